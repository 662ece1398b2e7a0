"""mail_wait's worker half (shared.tools.wait.wait_for) on real PostgreSQL and Redis pub/sub."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from shared.db import create_pool
from shared.mail.ingest import ingest_raw
from shared.tenancy.store import create_identity, create_tenant
from shared.tools.wait import WaitArgs, WaitJob, wait_for


def eml(mid: str, subject: str, sender: str, *, irt: str = "") -> bytes:
    head = (f"Message-ID: <{mid}>\r\nFrom: {sender}\r\nTo: desk@acme.example\r\n"
            f"Subject: {subject}\r\nDate: Mon, 30 Nov 2026 09:00:00 +0000\r\n")
    if irt:
        head += f"In-Reply-To: <{irt}>\r\n"
    return (head + "\r\nbody\r\n").encode()


@pytest.fixture
async def setup(db_url, conn):
    tenant = await create_tenant(conn, "acme")
    identity = await create_identity(conn, tenant.id, "desk@acme.example")
    pool = await create_pool(db_url, max_size=4)
    yield pool, identity.id
    await pool.close()


async def run_wait(pool, redis, identity_id, args: WaitArgs, *, heartbeat=0.3, cancel_after=None):
    beats: list[tuple[float, float]] = []
    started = asyncio.get_running_loop().time()

    async def progress(elapsed: float, total: float) -> None:
        beats.append((elapsed, total))

    async def cancelled() -> bool:
        return cancel_after is not None and asyncio.get_running_loop().time() - started > cancel_after

    result = await wait_for(pool, redis, WaitJob(identity_id=identity_id, args=args),
                            heartbeat=heartbeat, progress=progress, cancelled=cancelled)
    return result, beats


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
    result, beats = await run_wait(pool, redis, identity_id,
                                   WaitArgs(from_="@service.example", subject_contains="CODE",
                                            timeout_seconds=10))
    await arrivals
    assert result is not None and not result.timed_out
    assert result.message.message_id == "n3@x"
    assert result.verification is None


async def test_times_out_with_progress_every_heartbeat(setup, redis):
    pool, identity_id = setup
    result, beats = await run_wait(pool, redis, identity_id, WaitArgs(timeout_seconds=1),
                                   heartbeat=0.3)
    assert result.timed_out and result.message is None
    assert len(beats) == 3
    assert all(0.3 * k <= e < 0.3 * k + 0.25 for k, (e, _) in enumerate(beats, 1))
    assert {t for _, t in beats} == {1.0}


async def test_since_returns_stored_mail_at_once(setup, conn, redis):
    pool, identity_id = setup
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    await ingest_raw(conn, None, identity_id, eml("old@x", "hello", "ann@example.net"))
    result, beats = await run_wait(pool, redis, identity_id,
                                   WaitArgs(since=before, from_="ann@example.net", timeout_seconds=5))
    assert result.message.message_id == "old@x" and beats == []
    later = datetime.now(timezone.utc) + timedelta(seconds=5)
    result, _ = await run_wait(pool, redis, identity_id,
                               WaitArgs(since=later, from_="ann@example.net", timeout_seconds=1))
    assert result.timed_out


async def test_reply_kind_and_thread_filter(setup, conn, db_url, redis):
    pool, identity_id = setup
    await ingest_raw(conn, None, identity_id, eml("root@x", "Quote", "desk@acme.example"))
    thread_id = await conn.fetchval("SELECT thread_id FROM messages WHERE rfc_message_id = 'root@x'")
    arrivals = asyncio.create_task(deliver_later(db_url, redis, identity_id, [
        eml("fresh@x", "Quote", "bo@client.example"),                   # not a reply
        eml("reply@x", "Re: Quote", "bo@client.example", irt="root@x"),
    ]))
    result, _ = await run_wait(pool, redis, identity_id,
                               WaitArgs(kind="reply", thread_id=thread_id, timeout_seconds=10))
    await arrivals
    assert result.message.message_id == "reply@x"
    assert result.message.thread_id == thread_id


async def test_cancellation_stops_at_the_next_checkpoint(setup, redis):
    pool, identity_id = setup
    started = asyncio.get_running_loop().time()
    result, _ = await run_wait(pool, redis, identity_id, WaitArgs(timeout_seconds=30),
                               heartbeat=0.2, cancel_after=0.5)
    assert result is None
    assert asyncio.get_running_loop().time() - started < 2
