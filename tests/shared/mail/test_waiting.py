"""Waiting for a new matching message (shared.mail.waiting), the work behind mail_wait, on real
PostgreSQL and Redis pub/sub."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta, timezone

import msgspec
import pytest

from shared.control import Stopped
from shared.db import open_database
from shared.events import NewMail, new_mail_channel
from shared.ingest.pipeline import ingest_raw
from shared.mail.waiting import WaitRequest, filter_for, wait_for_message
from shared.pubsub import Subscriptions
from shared.tenancy.store import create_identity, create_tenant


def eml(mid: str, subject: str, sender: str, *, irt: str = "") -> bytes:
    head = (f"Message-ID: <{mid}>\r\nFrom: {sender}\r\nTo: desk@acme.example\r\n"
            f"Subject: {subject}\r\nDate: Mon, 30 Nov 2026 09:00:00 +0000\r\n")
    if irt:
        head += f"In-Reply-To: <{irt}>\r\n"
    return (head + "\r\nbody\r\n").encode()


@pytest.fixture
async def setup(db_url, conn, redis):
    tenant = await create_tenant(conn, "acme")
    identity = await create_identity(conn, tenant.id, "desk@acme.example")
    db = await open_database(db_url, size=4, acquire_seconds=5)
    feed = Subscriptions(redis, new_mail_channel("*"),
                         lambda raw: msgspec.json.decode(raw, type=NewMail))
    await feed.start()
    yield (db, feed), identity.id
    await feed.stop()
    await db.close()


class Recorder:
    """A Control that records progress and stops the work once ``cancel_after`` seconds pass."""

    def __init__(self, cancel_after: float | None) -> None:
        self.beats: list[tuple[float, float]] = []
        self.cancel_after = cancel_after
        self.started = asyncio.get_running_loop().time()

    async def progress(self, progress, total, message):
        self.beats.append((progress, total))

    async def checkpoint(self):
        if self.cancel_after is not None and \
                asyncio.get_running_loop().time() - self.started > self.cancel_after:
            raise Stopped

    def remaining(self):
        return float("inf")


def request(identity_id, *, from_=None, subject_contains=None, thread_id=None, kind="any",
            since=None, timeout_seconds=30):
    return WaitRequest(identity_id=identity_id, since=since, timeout_seconds=timeout_seconds,
                       wanted=filter_for(kind, from_=from_, subject_contains=subject_contains,
                                         thread_id=thread_id))


async def run_wait(resources, identity_id, wanted: WaitRequest, *, heartbeat=0.3,
                   cancel_after=None):
    db, feed = resources
    control = Recorder(cancel_after)
    result = await wait_for_message(db, feed, wanted, control, heartbeat=heartbeat)
    return result, control.beats


async def deliver_later(db_url, redis, identity_id, raws, delay=0.4):
    from shared.db import connect

    await asyncio.sleep(delay)
    c = await connect(db_url)
    try:
        for raw in raws:
            await ingest_raw(c, redis, identity_id, raw)
    finally:
        await c.close()


async def test_only_a_matching_new_message_ends_the_wait(setup, db_url, redis):
    pool, identity_id = setup
    arrivals = asyncio.create_task(deliver_later(db_url, redis, identity_id, [
        eml("n1@x", "newsletter", "news@other.example"),
        eml("n2@x", "Your code", "Desk <desk@acme.example>"),   # outbound: never matches
        eml("n3@x", "Your code is 123456", "noreply@service.example"),
    ]))
    result, beats = await run_wait(pool, identity_id,
                                   request(identity_id, from_="@service.example",
                                           subject_contains="CODE", timeout_seconds=10))
    await arrivals
    assert result is not None and not result.timed_out
    assert result.message.message_id == "n3@x"
    assert result.verification is None


async def test_times_out_with_progress_every_heartbeat(setup, redis):
    pool, identity_id = setup
    result, beats = await run_wait(pool, identity_id, request(identity_id, timeout_seconds=1),
                                   heartbeat=0.3)
    assert result.timed_out and result.message is None
    assert len(beats) == 3
    assert all(0.3 * k <= e < 0.3 * k + 0.25 for k, (e, _) in enumerate(beats, 1))
    assert {t for _, t in beats} == {1.0}


async def test_since_returns_stored_mail_at_once(setup, conn, redis):
    pool, identity_id = setup
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    await ingest_raw(conn, None, identity_id, eml("old@x", "hello", "ann@example.net"))
    result, beats = await run_wait(pool, identity_id,
                                   request(identity_id, since=before, from_="ann@example.net",
                                           timeout_seconds=5))
    assert result.message.message_id == "old@x" and beats == []
    later = datetime.now(timezone.utc) + timedelta(seconds=5)
    result, _ = await run_wait(pool, identity_id,
                               request(identity_id, since=later, from_="ann@example.net",
                                       timeout_seconds=1))
    assert result.timed_out


async def test_reply_kind_and_thread_filter(setup, conn, db_url, redis):
    pool, identity_id = setup
    await ingest_raw(conn, None, identity_id, eml("root@x", "Quote", "desk@acme.example"))
    thread_id = await conn.fetchval("SELECT thread_id FROM messages WHERE rfc_message_id = 'root@x'")
    arrivals = asyncio.create_task(deliver_later(db_url, redis, identity_id, [
        eml("fresh@x", "Quote", "bo@client.example"),                   # not a reply
        eml("reply@x", "Re: Quote", "bo@client.example", irt="root@x"),
    ]))
    result, _ = await run_wait(pool, identity_id,
                               request(identity_id, kind="reply", thread_id=thread_id,
                                       timeout_seconds=10))
    await arrivals
    assert result.message.message_id == "reply@x"
    assert result.message.thread_id == thread_id


async def test_cancellation_stops_at_the_next_checkpoint(setup, redis):
    pool, identity_id = setup
    started = asyncio.get_running_loop().time()
    with pytest.raises(Stopped):
        await run_wait(pool, identity_id, request(identity_id, timeout_seconds=30),
                       heartbeat=0.2, cancel_after=0.5)
    assert asyncio.get_running_loop().time() - started < 2


async def test_a_wait_cancelled_as_its_feed_is_lost_ends_there(setup, redis):
    """The wait's task is cancelled in the very loop iteration in which the feed's ``LOST``
    marker reaches it: both follow from one Redis outage (the worker closes its arq worker,
    cancelling its jobs, as the pub/sub reader marks every queue lost). The wait ends there,
    cancelled. Python 3.11's ``asyncio.wait_for`` instead returned the marker its inner get had
    just taken, swallowing the cancellation: the wait ran on to its timeout, and the worker,
    which waits for its cancelled jobs before it starts arq again, took no job meanwhile (the
    fault suite's Redis-outage-mid-wait test failed about one run in ten on a loaded machine)."""
    (db, feed), identity_id = setup
    wait = asyncio.create_task(run_wait((db, feed), identity_id,
                                        request(identity_id, timeout_seconds=30), heartbeat=10))
    for _ in range(10):  # a few loop iterations: the wait is now blocked on its feed
        await asyncio.sleep(0)
    assert not wait.done()
    feed._lose_all()  # what the reader does when the connection drops (shared.pubsub)
    wait.cancel()  # in the same iteration, as the worker's close does
    try:
        done, _ = await asyncio.wait({wait}, timeout=2)
        assert done, "the cancelled wait went on waiting: its cancellation was swallowed"
        assert wait.cancelled(), wait
    finally:
        wait.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await wait
