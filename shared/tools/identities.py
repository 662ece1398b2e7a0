"""mail_list_identities (spec section 4.3)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from shared.tenancy.store import Identity, list_identities
from shared.tools.arguments import TenantId
from shared.tools.context import ToolContext
from shared.tools.cursor import decode_cursor, encode_cursor
from shared.tools.scope import reachable_tenant, tenant_scope

DESCRIPTION = (
    "List the email identities (mailboxes) this key can use, with their addresses. Call this "
    "first if you do not know which identity to act as. Pass an identity's id or address as "
    "\"identity\" to the other tools."
)


class ListIdentitiesArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Arguments of mail_list_identities (spec section 4.3)."""

    tenant_id: Annotated[TenantId, msgspec.Meta(
        description="Platform and partner keys only: limit to one tenant.")] | None = None
    status: Annotated[Literal["active", "paused"], msgspec.Meta(
        description="Only identities with this status.")] | None = None
    purpose: Annotated[str, msgspec.Meta(
        max_length=64, description="Only identities with this purpose tag.")] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] = 25
    cursor: str | None = None


class RestListIdentitiesArgs(ListIdentitiesArgs, kw_only=True, forbid_unknown_fields=True):
    """``GET /v1/identities``' arguments: its status filter also takes ``deleting`` and
    ``deleted``, to see identities that can no longer act (spec section 4.3)."""

    status: Annotated[Literal["active", "paused", "deleting", "deleted"], msgspec.Meta(
        description="Only identities with this status.")] | None = None


class ListIdentitiesResult(msgspec.Struct, kw_only=True):
    """``{data: Identity[], next_cursor}``."""

    data: list[Identity]
    next_cursor: str | None


async def run(ctx: ToolContext, args: ListIdentitiesArgs) -> ListIdentitiesResult:
    """List identities the key reaches, ordered by id, ``limit`` per page: those that can act
    (active or paused), or those of ``status`` when it is given.

    ``tenant_id`` limits a platform or partner key to one of its tenants; a tenant or identity
    key may name only its own.

    Raises:
        PylotaError: ``scope_denied`` for a tenant_id the key does not reach (spec section 3),
            ``invalid_request`` for a bad cursor.
    """
    principal = ctx.principal
    after = decode_cursor(args.cursor, "idn")["after"] if args.cursor else None
    async with ctx.db.acquire() as conn:
        tenants = [await reachable_tenant(conn, principal, args.tenant_id)] \
            if args.tenant_id is not None else await tenant_scope(conn, principal)
        rows = await list_identities(
            conn, tenant_ids=tenants, identity_id=principal.identity_id, status=args.status,
            purpose=args.purpose, after_id=after, limit=args.limit + 1)
    more = len(rows) > args.limit
    rows = rows[: args.limit]
    return ListIdentitiesResult(
        data=rows,
        next_cursor=encode_cursor({"k": "idn", "after": rows[-1].id}) if more else None,
    )
