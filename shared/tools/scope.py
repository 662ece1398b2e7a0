"""Which identities and tenants a key reaches (spec section 3, "Identity argument")."""

from __future__ import annotations

import asyncpg

from shared.auth.keys import Principal
from shared.auth.permissions import KeyLevel
from shared.errors import ErrorCode, PylotaError, invalid
from shared.tenancy.store import Identity, partner_tenant_ids, resolve_identity

__all__ = ["tenant_scope", "identity_for", "lookup_identity"]


async def tenant_scope(conn: asyncpg.Connection, principal: Principal) -> list[str] | None:
    """Tenant ids the key reaches; None means every tenant (platform keys).

    A partner key reaches only tenants whose partner_id is its partner; a tenant with no partner
    never matches (spec section 3).
    """
    if principal.level is KeyLevel.PLATFORM:
        return None
    if principal.level is KeyLevel.PARTNER:
        return await partner_tenant_ids(conn, principal.partner_id)
    assert principal.tenant_id is not None
    return [principal.tenant_id]


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
