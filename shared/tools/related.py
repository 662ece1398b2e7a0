"""mail_find_related (spec section 4.3): messages in other threads about the same thing.

The evidence and weights are in :mod:`shared.search.related`. Each hit's ``why.matched`` lists
its reasons (``ref:…``, ``custom:…``, ``participant:…`` with ``subject:…``, or ``similar
content``) and ``why.semantic_score`` its cosine similarity to the message when both have
vectors. ``degraded`` is true when the embedding model or index is unavailable, so only
references and correspondents were compared. Limits: DESIGN.md section 5.4 (5 by default, 20 at
most) and the 96 KB result budget.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from shared.errors import ErrorCode, PylotaError
from shared.budget import cut, drop_to_fit
from shared.mail.store import message_exists
from shared.search.related import find_related
from shared.search.semantic import engine_for
from shared.tools.context import ToolContext
from shared.tools.arguments import IdentityRef, MessageId
from shared.tools.scope import identity_for
from shared.tools.search import SearchHit, Why

DESCRIPTION = (
    "Find messages in other threads that are about the same thing as a given message (same "
    "vehicle, claim, booking or topic). Useful to connect an invoice to its booking or a claim "
    "to its photos."
)

#: Snippet length of a related hit (the mail_search default, DESIGN.md section 5.4).
SNIPPET_CHARS = 200


class FindRelatedArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Arguments of mail_find_related (spec section 4.3)."""

    message_id: MessageId
    identity: IdentityRef | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=20)] = 5


class FindRelatedResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """``{ hits: SearchHit[], degraded }`` (spec section 4.3); ``truncated`` when hits were
    dropped to fit 96 KB."""

    hits: list[SearchHit]
    degraded: bool
    truncated: bool = False


async def run(ctx: ToolContext, args: FindRelatedArgs) -> FindRelatedResult:
    """Related messages of ``args.message_id``, best first.

    Raises:
        PylotaError: ``message_not_found`` when the message is not in the caller's identity;
            identity errors from :func:`~shared.tools.scope.identity_for`.
    """
    async with ctx.db.acquire() as conn:
        identity = await identity_for(conn, ctx.principal, args.identity)
        if not await message_exists(conn, identity.id, args.message_id):
            raise PylotaError(ErrorCode.MESSAGE_NOT_FOUND,
                              f"No message {args.message_id} in this identity.",
                              fix="Use a message_id returned by mail_search or mail_get_thread.")
        related, degraded = await find_related(conn, engine_for(ctx.settings), identity.id,
                                               args.message_id, limit=args.limit)
    hits = []
    for item in related:
        h = item.hit
        snippet, snippet_cut = cut(h.snippet, SNIPPET_CHARS)
        hits.append(SearchHit(message_id=h.message_id, thread_id=h.thread_id,
                              identity_id=h.identity_id, subject=h.subject, from_=h.from_,
                              date=h.date, snippet=snippet, snippet_truncated=snippet_cut,
                              score=h.score,
                              why=Why(matched=item.reasons, semantic_score=h.semantic_score)))
    result = FindRelatedResult(hits=hits, degraded=degraded)
    result.truncated = bool(drop_to_fit(result, result.hits))
    return result
