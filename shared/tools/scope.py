"""Which identities and tenants a key reaches (spec section 3, "Identity argument", and L4).

A platform key reaches every tenant of its mode, a partner key the tenants of its mode whose
partner is its partner, a tenant or identity key its own tenant (whose mode authentication has
checked). Out of reach looks the same as missing: ``identity_not_found`` for an identity,
``scope_denied`` for a tenant (:func:`reachable_tenant`).
"""

from __future__ import annotations

import asyncpg

from shared.auth.keys import Principal
from shared.auth.permissions import KeyLevel
from shared.errors import ErrorCode, PylotaError, invalid
from shared.tenancy.store import (Identity, partner_tenant_ids, platform_tenant_ids,
                                  resolve_identity)

__all__ = ["tenant_scope", "reachable_tenant", "identity_for", "acting_identity_for",
           "lookup_identity"]


async def tenant_scope(conn: asyncpg.Connection, principal: Principal) -> list[str]:
    """Tenant ids the key reaches, in id order (see the module docstring).

    A partner key reaches only tenants whose partner_id is its partner; a tenant with no partner
    never matches (spec section 3). Platform and partner keys reach only tenants of their own
    mode (L4).
    """
    if principal.level is KeyLevel.PLATFORM:
        return await platform_tenant_ids(conn, mode=principal.mode)
    if principal.level is KeyLevel.PARTNER:
        return await partner_tenant_ids(conn, principal.partner_id, mode=principal.mode)
    assert principal.tenant_id is not None
    return [principal.tenant_id]


async def reachable_tenant(conn: asyncpg.Connection, principal: Principal,
                           tenant_id: str) -> str:
    """``tenant_id`` when ``principal`` reaches it (a tool's ``tenant_id`` argument).

    Raises:
        PylotaError: ``scope_denied`` when the key does not reach that tenant, whether or not it
            exists (spec section 3: scope failures reveal nothing).
    """
    if tenant_id not in await tenant_scope(conn, principal):
        raise PylotaError(ErrorCode.SCOPE_DENIED, f"This key cannot reach tenant {tenant_id}.",
                          fix="Pass a tenant_id this key reaches (a partner key: one of its own "
                              "tenants), or omit tenant_id for a tenant or identity key.")
    return tenant_id


async def identity_for(conn: asyncpg.Connection, principal: Principal,
                       identity: str | None) -> Identity:
    """Resolve a tool's ``identity`` argument for ``principal``.

    An identity key uses its own identity, and naming another is ``identity_not_found``. Other
    keys must pass ``identity`` (an id or an active or retiring address) in their scope.

    Raises:
        PylotaError: ``invalid_request`` (path ``identity``) when a wider key omits it;
            ``identity_not_found`` when it is out of scope or unknown.
    """
    if principal.level is KeyLevel.IDENTITY:
        assert principal.identity_id is not None
        own = await resolve_identity(conn, principal.identity_id)
        if identity is not None and identity not in (own.id, *own.addresses) \
                and identity.strip().lower() not in own.addresses:
            raise PylotaError(ErrorCode.IDENTITY_NOT_FOUND,
                              f"No identity {identity!r} that this key can use.",
                              fix="Omit identity: this key acts as its own identity.")
        return own
    if identity is None:
        raise invalid("identity", "This key serves several identities; identity is required.",
                      "Pass identity: an idn_… id or an address from mail_list_identities.")
    return await resolve_identity(conn, identity, tenant_ids=await tenant_scope(conn, principal),
                                  for_key=True)


async def acting_identity_for(conn: asyncpg.Connection, principal: Principal,
                              identity: str | None) -> Identity:
    """:func:`identity_for`, for a tool that acts as the identity (the signing tools): an
    identity that is being deleted, or was, cannot act (spec section 4.3, mail_list_identities),
    and is answered as missing.

    Raises:
        PylotaError: as :func:`identity_for`; ``identity_not_found`` also for a deleting or
            deleted identity.
    """
    found = await identity_for(conn, principal, identity)
    if found.status in ("deleting", "deleted"):
        raise PylotaError(ErrorCode.IDENTITY_NOT_FOUND,
                          f"No identity {identity or found.id!r} that can act for this key.",
                          fix="Call mail_list_identities and pass an active or paused identity.")
    return found


async def lookup_identity(conn: asyncpg.Connection, principal: Principal, address: str) -> Identity:
    """The identity owning an active or retiring ``address``, when ``principal`` reaches it
    (``GET /v1/identities/lookup``, the logic behind every ``identity`` argument: spec
    section 3).

    Raises:
        PylotaError: ``identity_not_found``, also for an identity out of the key's scope.
    """
    return await identity_for(conn, principal, address) if principal.level is KeyLevel.IDENTITY \
        else await resolve_identity(conn, address, tenant_ids=await tenant_scope(conn, principal),
                                    for_key=True)
