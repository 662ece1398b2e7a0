"""Which identities and tenants a key reaches (spec section 3, "Identity argument", and L4), and
the search scope that ``mail_search`` and ``mail_deep_search`` share (:func:`search_scope`), and
a thread of the identity the tools read or wait on (:func:`thread_of`).

A platform key reaches every tenant of its mode, a partner key the tenants of its mode whose
partner is its partner, a tenant or identity key its own tenant (whose mode authentication has
checked). Out of reach looks the same as missing: ``identity_not_found`` for an identity,
``scope_denied`` for a tenant (:func:`reachable_tenant`).
"""

from __future__ import annotations

from collections.abc import Set
from contextvars import ContextVar
from typing import Literal

import asyncpg
import msgspec

from shared.auth.keys import Principal
from shared.auth.permissions import KeyLevel
from shared.errors import ErrorCode, PylotaError, invalid
from shared.mail.store import ThreadHeader, get_thread
from shared.tenancy.store import (Identity, Tenant, get_tenant, identity_statuses,
                                  partner_tenant_ids, platform_tenant_ids, resolve_identity)

__all__ = ["tenant_scope", "reachable_tenant", "identity_for", "acting_identity",
           "lookup_identity", "search_scope", "SearchScope", "MAX_SCOPE_IDENTITIES", "thread_of"]

#: Most identities one tenant-scope search covers (spec section 3).
MAX_SCOPE_IDENTITIES = 100

#: The identity the running call acts for, once :func:`identity_for` has resolved it: the call's
#: log line names it (spec section 7: each call logs its identity ID) when the key itself serves
#: several identities. Set in the call's own task; ``shared.tools.call`` reads and clears it.
acting_identity: ContextVar[str | None] = ContextVar("acting_identity", default=None)


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
    keys must pass ``identity`` (an id or an active or retiring address) in their scope. An
    identity that is being deleted, or was, cannot act (spec section 4.3, mail_list_identities):
    no tool reads, labels, waits on, sends or signs for it, as tenant-scope search lists it
    under ``failed``; it is answered as missing.

    Raises:
        PylotaError: ``invalid_request`` (path ``identity``) when a wider key omits it;
            ``identity_not_found`` when it is out of scope, unknown, deleting or deleted.
    """
    if principal.level is KeyLevel.IDENTITY:
        assert principal.identity_id is not None
        # Authentication read the key's own identity with the key (None: it is gone).
        own = principal.identity or await resolve_identity(conn, principal.identity_id)
        if identity is not None and identity not in (own.id, *own.addresses) \
                and identity.strip().lower() not in own.addresses:
            raise PylotaError(ErrorCode.IDENTITY_NOT_FOUND,
                              f"No identity {identity!r} that this key can use.",
                              fix="This key acts as its own identity only: omit identity (over "
                                  "REST, put the key's own identity in the path).")
        found = own
    elif identity is None:
        raise invalid("identity", "This key serves several identities; identity is required.",
                      "Pass identity: an idn_… id or an address from mail_list_identities.")
    else:
        found = await resolve_identity(conn, identity,
                                       tenant_ids=await tenant_scope(conn, principal),
                                       for_key=True)
    if found.status in ("deleting", "deleted"):
        raise PylotaError(ErrorCode.IDENTITY_NOT_FOUND,
                          f"No identity {identity or found.id!r} that can act for this key.",
                          fix="Call mail_list_identities and pass an active or paused identity.")
    acting_identity.set(found.id)
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


class SearchScope(msgspec.Struct, frozen=True, kw_only=True):
    """What a search covers: the ``identity_ids`` to search (sorted), the ``failed`` ones that were
    asked for but cannot be searched (being deleted), and the ``tenant`` whose policy applies
    (time zone, ``custom:`` patterns, agentic limits)."""

    identity_ids: list[str]
    failed: list[str]
    tenant: Tenant


async def search_scope(conn: asyncpg.Connection, principal: Principal, *,
                       scope: Literal["identity", "tenant"], identity: str | None,
                       tenant_id: str | None, identity_ids: Set[str] | None) -> SearchScope:
    """Resolve the scope arguments of ``mail_search`` and ``mail_deep_search`` (spec section 3).

    ``identity`` scope searches the one identity :func:`identity_for` resolves; ``identity_ids``
    and ``tenant_id`` need ``tenant`` scope. ``tenant`` scope (tenant, partner and platform keys;
    platform and partner keys name ``tenant_id``) searches the tenant's active and paused
    identities, or the ``identity_ids`` given (at most :data:`MAX_SCOPE_IDENTITIES`): an entry of
    the tenant that is being deleted is listed in ``failed`` instead.

    Raises:
        PylotaError: ``invalid_request`` (``identity_ids``, ``tenant_id`` or ``identity``, which
            ``tenant`` scope does not take),
            ``identity_not_found`` (also for ``identity_ids`` outside the tenant),
            ``scope_denied`` (an identity key asking for the tenant, or a ``tenant_id`` the key
            does not reach), ``scope_too_large`` (a tenant with more than 100 identities and no
            ``identity_ids``).
    """
    if scope == "identity":
        if identity_ids is not None or tenant_id:
            raise invalid("identity_ids" if identity_ids else "tenant_id",
                          "identity_ids and tenant_id need scope \"tenant\".",
                          "Pass scope: \"tenant\", or drop them and pass identity.")
        found = await identity_for(conn, principal, identity)
        tenant = await get_tenant(conn, found.tenant_id)
        if tenant is None:  # deleted between the two reads: so is the identity
            raise PylotaError(ErrorCode.IDENTITY_NOT_FOUND, "No such identity for this key.",
                              fix="Pass an identity from mail_list_identities.")
        return SearchScope(identity_ids=[found.id], failed=[], tenant=tenant)
    if identity is not None:
        # Searching the tenant while naming one identity was answered from every identity,
        # the one named silently ignored (found by an attack).
        raise invalid("identity", "identity needs scope \"identity\"; scope \"tenant\" searches "
                      "the tenant's identities.",
                      "Drop identity (over REST: POST /v1/tenants/{tenant_id}/search), or list "
                      "it in identity_ids to search it alone.")
    if principal.level is KeyLevel.IDENTITY:
        raise PylotaError(ErrorCode.SCOPE_DENIED, "An identity key cannot search the whole tenant.",
                          fix="Use scope \"identity\" (the default), or a tenant key.")
    wanted_tenant = tenant_id or principal.tenant_id
    if wanted_tenant is None:
        raise invalid("tenant_id", "Platform and partner keys must name the tenant.",
                      "Pass tenant_id with scope \"tenant\".")
    tenant = await get_tenant(conn, await reachable_tenant(conn, principal, wanted_tenant))
    assert tenant is not None  # reachable tenants exist
    statuses = await identity_statuses(conn, tenant.id)
    searchable = [i for i, status in statuses.items() if status in ("active", "paused")]
    if identity_ids:
        unknown = sorted(set(identity_ids) - statuses.keys())
        if unknown:
            raise PylotaError(ErrorCode.IDENTITY_NOT_FOUND,
                              f"Not identities of this tenant: {', '.join(unknown)}.",
                              fix="Pass ids from mail_list_identities.")
        wanted = sorted(identity_ids)
        return SearchScope(identity_ids=[i for i in wanted if i in searchable],
                           failed=[i for i in wanted if i not in searchable], tenant=tenant)
    if len(searchable) > MAX_SCOPE_IDENTITIES:
        raise PylotaError(ErrorCode.SCOPE_TOO_LARGE,
                          f"The tenant has {len(searchable)} identities; one search covers at most "
                          f"{MAX_SCOPE_IDENTITIES}.",
                          fix="Pass identity_ids with up to 100 ids from mail_list_identities.")
    return SearchScope(identity_ids=searchable, failed=[], tenant=tenant)


async def thread_of(conn: asyncpg.Connection, identity_id: str, thread_id: str) -> ThreadHeader:
    """The thread ``thread_id`` of the identity (an id merged into another thread gives that
    thread, ``shared.mail.store.get_thread``).

    Raises:
        PylotaError: ``thread_not_found`` when the identity has no such thread.
    """
    thread = await get_thread(conn, identity_id, thread_id)
    if thread is None:
        raise PylotaError(ErrorCode.THREAD_NOT_FOUND, f"No thread {thread_id} in this identity.",
                          fix="Use a thread_id returned by mail_search or mail_get_message.")
    return thread
