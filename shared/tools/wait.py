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

import asyncio
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
from shared.tools.budget import cut
from shared.tools.context import ToolContext
from shared.tools.messages import IdentityRef
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


def matches(record: MessageRecord, args: WaitArgs) -> bool:
    """True when an inbound ``record`` satisfies every filter of ``args``."""
    if record.direction != "inbound":
        return False
    if args.from_:
        wanted = args.from_.strip().lower()
        sender = record.from_.address if record.from_ else ""
        if wanted.startswith("@"):
            if not sender.endswith(wanted):
                return False
        elif sender != wanted:
            return False
    if args.subject_contains and args.subject_contains.casefold() not in record.subject.casefold():
        return False
    if args.thread_id and record.thread_id != args.thread_id:
        return False
    if args.kind == "reply" and not (record.in_reply_to or record.references):
        return False
    return True


def _result(record: MessageRecord | None) -> WaitResult:
    if record is not None:
        record.new_text, record.new_text_truncated = cut(record.new_text, WAIT_TEXT_CHARS)
    return WaitResult(message=record, verification=None, timed_out=record is None)


async def _stored_since(conn: asyncpg.Connection, job: WaitJob) -> MessageRecord | None:
    assert job.args.since is not None
    rows = await conn.fetch(
        "SELECT id FROM messages WHERE identity_id = $1 AND received_at >= $2"
        " AND direction = 'inbound' ORDER BY received_at, id LIMIT 500",
        job.identity_id, job.args.since)
    for row in rows:
        record = await get_message(conn, job.identity_id, row["id"])
        if record is not None and matches(record, job.args):
            return record
    return None


async def wait_for(pool: asyncpg.Pool, redis: Redis, job: WaitJob, *, heartbeat: float,
                   progress: Callable[[float, float], Awaitable[None]],
                   cancelled: Callable[[], Awaitable[bool]]) -> WaitResult | None:
    """Wait for a message matching ``job``; None when cancelled.

    Args:
        heartbeat: seconds between ``progress(elapsed_seconds, timeout_seconds)`` calls and
            cancellation checks (spec section 2.6: every 10 seconds).
    """
    timeout = job.args.timeout_seconds
    started = time.monotonic()
    pubsub = redis.pubsub(ignore_subscribe_messages=True)
    try:
        await pubsub.subscribe(new_mail_channel(job.identity_id))
        if job.args.since is not None:
            async with pool.acquire() as conn:
                if (found := await _stored_since(conn, job)) is not None:
                    return _result(found)
        next_beat = started + heartbeat
        while (now := time.monotonic()) < started + timeout:
            if now >= next_beat:
                if await cancelled():
                    return None
                await progress(round(now - started, 3), float(timeout))
                next_beat += heartbeat
            wait = max(0.0, min(next_beat, started + timeout) - time.monotonic())
            # get_message returns None at once for swallowed subscribe confirmations
            # (STACK.md section 3), so the loop re-computes the remaining time each turn.
            event = await pubsub.get_message(timeout=wait)
            if event is None or event.get("type") != "message":
                if event is None and wait > 0:
                    await asyncio.sleep(0)
                continue
            new = msgspec.json.decode(event["data"], type=NewMail)
            async with pool.acquire() as conn:
                record = await get_message(conn, job.identity_id, new.message_id)
            if record is not None and matches(record, job.args):
                return _result(record)
        return _result(None)
    finally:
        await pubsub.aclose()
