"""mail_wait (spec section 4.3), in two halves.

:func:`run` runs in the front: it checks the arguments and the identity, so that a bad call fails
at once as JSON, and returns the :class:`WaitJob` to enqueue. :func:`wait_for` runs on a worker
(DESIGN.md section 2, "Streaming tools"): it subscribes to the identity's new-mail channel first,
then looks once for mail already stored since ``since``, then waits on events (never polling the
database) until a message matches, the timeout passes or the job is cancelled.

Verification codes and links need the message's authentication verdict, which is not computed yet;
until it is, ``verification`` is always null (the description promises a code only for mail that
passed authentication).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Literal

import asyncpg
import msgspec
from redis.asyncio import Redis

from shared.events import NewMail, new_mail_channel
from shared.mail.records import MessageRecord
from shared.mail.store import get_message
from shared.tools.context import ToolContext
from shared.tools.messages import IdentityRef, annotate, budget_message
from shared.tools.scope import identity_for
from shared.tools.threads import ThreadId

DESCRIPTION = (
    "Wait up to timeout_seconds for a new matching message, for example a reply in a thread or a "
    "verification code after a sign-up. A code or link is returned only when \"from\" names the "
    "expected sender domain and the message passed authentication. Returns timed_out true if "
    "nothing arrived."
)

INPUT_SCHEMA = {
    "type": "object", "additionalProperties": False, "properties": {
        "identity": {"type": "string", "maxLength": 254},
        "from": {"type": "string", "maxLength": 254, "description": "An address or @domain."},
        "subject_contains": {"type": "string", "maxLength": 200},
        "thread_id": {"type": "string", "pattern": "^thr_[0-9A-HJKMNP-TV-Z]{26}$"},
        "kind": {"type": "string", "enum": ["any", "reply", "verification"], "default": "any"},
        "since": {"type": "string", "format": "date-time"},
        "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 60, "default": 30},
    },
}

#: Text cap of the returned message (DESIGN.md section 5.4, one message).
WAIT_TEXT_CHARS = 32_000


class WaitArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    identity: IdentityRef | None = None
    from_: Annotated[str, msgspec.Meta(max_length=254)] | None = msgspec.field(
        name="from", default=None)
    subject_contains: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    thread_id: ThreadId | None = None
    kind: Literal["any", "reply", "verification"] = "any"
    since: datetime | None = None
    timeout_seconds: Annotated[int, msgspec.Meta(ge=1, le=60)] = 30


class Verification(msgspec.Struct, kw_only=True):
    """A code or link from a verification message that passed authentication."""

    code: str | None
    link: str | None


class WaitResult(msgspec.Struct, kw_only=True):
    """``{message, verification, timed_out}``."""

    message: MessageRecord | None
    verification: Verification | None
    timed_out: bool


class WaitJob(msgspec.Struct, frozen=True, kw_only=True):
    """What the front enqueues: the resolved identity and the checked arguments."""

    identity_id: str
    args: WaitArgs


async def run(ctx: ToolContext, args: WaitArgs) -> WaitJob:
    """Resolve the identity for the worker.

    Raises:
        PylotaError: identity errors from :func:`~shared.tools.scope.identity_for`.
    """
    async with ctx.pool.acquire() as conn:
        identity = await identity_for(conn, ctx.principal, args.identity)
    return WaitJob(identity_id=identity.id, args=args)


def _match_sql(args: WaitArgs) -> tuple[str, list[object]]:
    """The filters of ``args`` as a condition on ``messages m``, parameters from ``$2``.

    One definition serves both the look-back over stored mail and each announced message.
    """
    params: list[object] = []

    def bind(value: object) -> str:
        params.append(value)
        return f"${len(params) + 1}"

    clauses = ["m.direction = 'inbound'"]
    if args.from_:
        wanted = args.from_.strip().lower()
        clauses.append(f"m.from_address LIKE {bind('%' + wanted)}" if wanted.startswith("@")
                       else f"m.from_address = {bind(wanted)}")
    if args.subject_contains:
        clauses.append(f"strpos(lower(m.subject), {bind(args.subject_contains.lower())}) > 0")
    if args.thread_id:
        clauses.append(f"m.thread_id = {bind(args.thread_id)}")
    if args.kind == "reply":
        clauses.append("cardinality(m.in_reply_to) + cardinality(m.\"references\") > 0")
    return " AND ".join(clauses), params


def _result(record: MessageRecord | None) -> WaitResult:
    if record is not None:
        budget_message(record, WAIT_TEXT_CHARS)
    return WaitResult(message=record, verification=None, timed_out=record is None)


async def _first_match(pool: asyncpg.Pool, job: WaitJob, *, message_id: str | None = None
                       ) -> MessageRecord | None:
    """The earliest stored message matching ``job`` (received since ``since``), or, with
    ``message_id``, that message when it matches."""
    condition, params = _match_sql(job.args)
    extra = []
    if message_id is not None:
        params.append(message_id)
        extra.append(f"m.id = ${len(params) + 1}")
    if job.args.since is not None:
        params.append(job.args.since)
        extra.append(f"m.received_at >= ${len(params) + 1}")
    where = " AND ".join([condition, *extra])
    async with pool.acquire() as conn:
        found = await conn.fetchval(
            f"SELECT m.id FROM messages m WHERE m.identity_id = $1 AND {where}"
            " ORDER BY m.received_at, m.id LIMIT 1", job.identity_id, *params)
        record = await get_message(conn, job.identity_id, found) if found else None
        if record is not None:
            await annotate(conn, [record])
        return record


async def wait_for(pool: asyncpg.Pool, redis: Redis, job: WaitJob, *, heartbeat: float,
                   progress: Callable[[float, float], Awaitable[None]],
                   cancelled: Callable[[], Awaitable[bool]]) -> WaitResult | None:
    """Wait for a message matching ``job``; None when cancelled.

    Args:
        heartbeat: seconds between ``progress(elapsed_seconds, timeout_seconds)`` calls and
            cancellation checks (spec section 2.6: every 10 seconds).
    """
    timeout = float(job.args.timeout_seconds)
    started = time.monotonic()
    deadline = started + timeout
    next_beat = started + heartbeat
    pubsub = redis.pubsub(ignore_subscribe_messages=True)
    try:
        # Subscribe before looking back, so a message stored in between is not missed.
        await pubsub.subscribe(new_mail_channel(job.identity_id))
        if job.args.since is not None and (found := await _first_match(pool, job)) is not None:
            return _result(found)
        while (now := time.monotonic()) < deadline:
            if now >= next_beat:
                if await cancelled():
                    return None
                await progress(round(now - started, 3), timeout)
                next_beat += heartbeat
            # get_message returns None at once for a swallowed subscribe confirmation
            # (STACK.md section 3), so the remaining time is recomputed on every turn.
            event = await pubsub.get_message(timeout=max(0.0, min(next_beat, deadline) - now))
            if event is None or event.get("type") != "message":
                continue
            new = msgspec.json.decode(event["data"], type=NewMail)
            if (found := await _first_match(pool, job, message_id=new.message_id)) is not None:
                return _result(found)
        return _result(None)
    finally:
        await pubsub.aclose()
