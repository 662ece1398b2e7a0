"""Waiting for a new matching message (mail_wait, spec section 4.3; DESIGN.md section 2).

:func:`wait_for_message` runs on a worker. It registers on the identity's new-mail channel first,
then looks once for mail already stored since ``since``, then waits on events (never polling the
database) until a message matches, the timeout passes, or the caller stops it at a checkpoint
(every ``heartbeat`` seconds, when it also reports progress: spec section 2.6, "for mail_wait,
every 10 seconds (progress = elapsed seconds, total = timeout)"). When the event feed is lost
(Redis restarted) it looks in the database again once it is back, so a message stored during
the outage is still found.

``verification`` holds a code or link only when the waiter's ``from`` names the sender's domain
(or a parent of it) and the message passed authentication (its trust verdict is ``pass``:
``shared.mail.verification``), as the tool's description promises.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Literal

import msgspec

from shared.control import Control
from shared.db import Database
from shared.events import NewMail, new_mail_channel
from shared.mail.reading import annotate, budget_message
from shared.mail.records import MessageRecord
from shared.mail.store import MessageFilter, first_matching, get_message
from shared.mail.verification import Verification, verification_of
from shared.pubsub import Lost, Subscriptions

__all__ = ["WaitRequest", "WaitResult", "Verification", "wait_for_message", "WAIT_TEXT_CHARS"]

#: Text cap of the returned message (DESIGN.md section 5.4, one message).
WAIT_TEXT_CHARS = 32_000
#: How often a wait whose event feed was lost checks whether it is back.
LOST_RECHECK_SECONDS = 0.5


class WaitRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One wait: the identity, what to wait for, since when, and for how long (seconds)."""

    identity_id: str
    wanted: MessageFilter
    since: datetime | None
    timeout_seconds: float


class WaitResult(msgspec.Struct, kw_only=True):
    """``{message, verification, timed_out}`` (spec section 4.3, mail_wait)."""

    message: MessageRecord | None
    verification: Verification | None
    timed_out: bool


def filter_for(kind: Literal["any", "reply", "verification"], *, from_: str | None,
               subject_contains: str | None, thread_id: str | None) -> MessageFilter:
    """The :class:`~shared.mail.store.MessageFilter` of mail_wait's arguments."""
    return MessageFilter(from_=from_, subject_contains=subject_contains, thread_id=thread_id,
                         replies_only=kind == "reply")


async def _read(db: Database, identity_id: str, message_id: str) -> MessageRecord | None:
    async with db.acquire() as conn:
        record = await get_message(conn, identity_id, message_id)
        if record is not None:
            await annotate(conn, [record])
    return record


async def _look(db: Database, request: WaitRequest, since: datetime | None, *,
                message_id: str | None = None) -> MessageRecord | None:
    async with db.acquire() as conn:
        found = await first_matching(conn, request.identity_id, request.wanted,
                                     received_since=since, message_id=message_id)
    return None if found is None else await _read(db, request.identity_id, found)


def _result(record: MessageRecord | None, request: WaitRequest) -> WaitResult:
    if record is None:
        return WaitResult(message=None, verification=None, timed_out=True)
    # Read from the whole new text, before the budget cut a long message gets.
    verification = verification_of(
        sender=record.from_.address if record.from_ else None, subject=record.subject,
        new_text=record.new_text, trust=record.trust, from_filter=request.wanted.from_)
    budget_message(record, WAIT_TEXT_CHARS)
    return WaitResult(message=record, verification=verification, timed_out=False)


async def wait_for_message(db: Database, feed: Subscriptions[NewMail], request: WaitRequest,
                           control: Control, *, heartbeat: float) -> WaitResult:
    """Wait for a message matching ``request``.

    Args:
        feed: the process's new-mail subscriptions (``pylota:newmail:*``).
        heartbeat: seconds between ``control.progress(elapsed_seconds, timeout_seconds)``
            reports and checkpoints.

    Raises:
        Stopped: from ``control.checkpoint`` when the caller cancelled the wait.
        PylotaError: ``unavailable`` when the database cannot be reached.
    """
    timeout = float(request.timeout_seconds)
    started = time.monotonic()
    deadline = started + min(timeout, control.remaining())
    next_beat = started + heartbeat
    look_from = request.since
    with feed.listen(new_mail_channel(request.identity_id)) as events:
        # Registered before looking back, so a message stored in between is not missed.
        waited_from = datetime.now(timezone.utc)
        if look_from is not None and (found := await _look(db, request, look_from)) is not None:
            return _result(found, request)
        lost = False
        while (now := time.monotonic()) < deadline:
            if now >= next_beat:
                await control.checkpoint()
                await control.progress(round(now - started, 3), timeout, None)
                next_beat += heartbeat
            if lost and feed.connected:
                # Back after an outage: what arrived while the feed was down is in the database.
                lost = False
                since = look_from if look_from is not None else waited_from
                if (found := await _look(db, request, since)) is not None:
                    return _result(found, request)
            until = min(next_beat, deadline, now + LOST_RECHECK_SECONDS if lost else deadline)
            # A plain future, not asyncio.wait_for: on Python 3.11 that returns the item its
            # inner get took in the loop iteration in which this task is cancelled, swallowing
            # the cancellation (CPython gh-86296), and the wait then ran on to its timeout.
            if (event := await events.get(until - now)) is None:
                continue
            if isinstance(event, Lost):
                lost = True
                continue
            found = await _look(db, request, None, message_id=event.message_id)
            if found is not None:
                return _result(found, request)
        return _result(None, request)
