"""mail_search_contacts (spec section 4.3): find a contact by name, address or domain prefix.

Matching and ranking are in :mod:`shared.mail.contacts`. ``q`` must not be empty (the spec:
a full list would fill the model's context). Limits: DESIGN.md section 5.4 (10 by default, 50 at
most); ``next_cursor`` pages on.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from shared.errors import invalid
from shared.mail.contacts import Contact, search_contacts
from shared.tools.arguments import IdentityRef
from shared.tools.context import ToolContext
from shared.tools.cursor import decode_cursor, encode_cursor
from shared.tools.scope import identity_for

DESCRIPTION = (
    "Find people and organisations this mailbox has exchanged mail with, by name, address or "
    "domain prefix, ranked by how often they were in contact. Use it to get an exact address "
    "before searching with from: or sending."
)


class SearchContactsArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Arguments of mail_search_contacts (spec section 4.3)."""

    q: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    identity: IdentityRef | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=50)] = 10
    cursor: str | None = None


class SearchContactsResult(msgspec.Struct, kw_only=True):
    """``{ data: Contact[], next_cursor }`` (spec section 4.3)."""

    data: list[Contact]
    next_cursor: str | None


async def run(ctx: ToolContext, args: SearchContactsArgs) -> SearchContactsResult:
    """Contacts matching ``args.q``, best first.

    Raises:
        PylotaError: ``invalid_request`` (path ``q``) for a blank ``q`` or (``cursor``) a cursor
            of another query; identity errors from :func:`~shared.tools.scope.identity_for`.
    """
    if not args.q.strip():
        raise invalid("q", "q is blank.", "Pass the start of a name, an address or a domain, "
                      "e.g. q: \"jo\" or q: \"@brightwell\".")
    offset = 0
    if args.cursor:
        state = decode_cursor(args.cursor, "contacts")
        if state.get("q") != args.q:
            raise invalid("cursor", "This cursor belongs to another q.",
                          "Repeat the same q with this cursor, or omit cursor.")
        offset = state["o"]
    async with ctx.db.acquire() as conn:
        identity = await identity_for(conn, ctx.principal, args.identity)
        found, more = await search_contacts(conn, identity.id, args.q, offset=offset,
                                            limit=args.limit)
    cursor = encode_cursor({"k": "contacts", "q": args.q, "o": offset + len(found)}) if more else None
    return SearchContactsResult(data=found, next_cursor=cursor)
