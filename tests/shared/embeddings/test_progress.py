"""Embedding progress (issue 14): per identity, embedded / total, the queue, the measured rate and
the time left; the batch worker's drain logs counts and rates, never mail content."""

from __future__ import annotations

import json

from shared.embeddings import store
from shared.embeddings.embedder import HashEmbedder
from shared.embeddings.store import embed_pending, progress
from shared.ingest.importer import import_paths
from shared.ingest.pipeline import ingest_raw
from shared.logs import configure
from shared.tenancy.store import create_identity, create_tenant
from tests.conftest import database
from tests.shared.search.conftest import mail


async def test_progress_per_identity_before_and_after(db_url, conn, monkeypatch) -> None:
    tenant = await create_tenant(conn, "acme")
    one = (await create_identity(conn, tenant.id, "one@acme.example")).id
    two = (await create_identity(conn, tenant.id, "two@acme.example")).id
    for i in range(3):
        await ingest_raw(conn, None, one, mail(f"one{i}@x", body=f"parking fine number {i}"))
    await ingest_raw(conn, None, two, mail("two@x", body="lunch"))
    monkeypatch.setitem(store.NOMINAL_RATES, "hash-v1", 2.0)
    before = {p.identity_id: p for p in await progress(conn, "hash-v1", batch=2)}
    assert (before[one].embedded, before[one].total, before[one].queued) == (0, 3, 3)
    assert before[one].per_second is None  # nothing embedded yet: the nominal rate is used
    assert before[one].seconds_left == 1.5
    # two's message was queued last: the whole queue is ahead of it
    assert before[two].seconds_left == 2.0 and before[two].queued == 1
    assert [p.identity_id for p in await progress(conn, "hash-v1", [two], batch=2)] == [two]
    assert await progress(conn, "no-such-model", [one], batch=2) == [
        store.IdentityProgress(identity_id=one, embedded=0, total=3, queued=3, per_second=None,
                               seconds_left=None)]

    async with database(db_url) as pool:
        assert await embed_pending(pool, HashEmbedder(), batch=2) == 4
    after = {p.identity_id: p for p in await progress(conn, "hash-v1", batch=2)}
    assert (after[one].embedded, after[one].total, after[one].queued) == (3, 3, 0)
    assert after[one].seconds_left == 0.0
    assert after[one].per_second is not None and after[one].per_second > 0

    # The rate is the workers' while they worked: idle minutes since do not lower it.
    await conn.execute(
        "UPDATE message_embeddings e SET created_at = now() - make_interval(secs => 300 - o.n)"
        " FROM (SELECT message_id, row_number() OVER (ORDER BY message_id) - 1 AS n"
        "       FROM message_embeddings) o WHERE o.message_id = e.message_id")
    # each message its own full batch (of 1), a second apart: the last one's time is unknown,
    # so 3 in 3 s
    assert (await progress(conn, "hash-v1", batch=1))[0].per_second == 1.0
    # the same batches where a worker takes 32: each emptied the queue, and the time after it
    # was idle, not work (sends seconds apart made the rate 0.2 a second: a new user's report)
    assert (await progress(conn, "hash-v1", batch=32))[0].per_second is None

    # Two bursts with an idle spell between them (two imports): the spell does not count.
    await conn.execute(
        "UPDATE message_embeddings e SET created_at = now() - make_interval(secs => o.t)"
        " FROM (SELECT message_id, (ARRAY[400, 399, 100, 99])[row_number() OVER"
        " (ORDER BY message_id)] AS t FROM message_embeddings) o WHERE o.message_id = e.message_id")
    # 2 in 2 s of work, not 2 in 301 s
    assert (await progress(conn, "hash-v1", batch=1))[0].per_second == 1.0


async def test_the_drain_logs_progress_without_mail_content(db_url, conn, capsys, monkeypatch
                                                            ) -> None:
    tenant = await create_tenant(conn, "acme")
    one = (await create_identity(conn, tenant.id, "one@acme.example")).id
    for i in range(5):
        await ingest_raw(conn, None, one, mail(f"m{i}@x", subject="Secret merger plans",
                                               body=f"confidential body {i}"))
    monkeypatch.setattr(store, "PROGRESS_LOG_SECONDS", 0.0)  # a line after every batch
    configure("info")
    capsys.readouterr()
    async with database(db_url) as pool:
        assert await embed_pending(pool, HashEmbedder(), batch=2) == 5
    lines = [line for line in capsys.readouterr().err.splitlines() if "embed_progress" in line]
    assert len(lines) == 4  # after each of the 3 batches, and once at the end
    last = json.loads(lines[-1])
    assert (last["embedded"], last["queued"], last["seconds_left"]) == (5, 0, 0)
    assert "per_second" in last
    logged = "\n".join(lines)
    assert "Secret" not in logged and "confidential" not in logged and one not in logged


async def test_live_mail_is_embedded_before_an_import_backlog(db_url, conn, monkeypatch,
                                                               tmp_path) -> None:
    """One queue for every tenant, first in first out: a message that arrived over SMTP waited
    about 5 minutes behind another tenant's import, unfindable by meaning (found by a new
    user). Imports queue as bulk; live mail goes first."""
    kit = await create_tenant(conn, "kit")
    demo = await create_tenant(conn, "demo")
    sa = (await create_identity(conn, kit.id, "sa@kit.example")).id
    desk = (await create_identity(conn, demo.id, "desk@demo.example")).id
    for i in range(4):
        (tmp_path / f"{i}.eml").write_bytes(mail(f"bulk{i}@x", body=f"spam {i}"))
    assert (await import_paths(conn, None, sa, [tmp_path])).imported == 4
    live, _ = await ingest_raw(conn, None, desk, mail("live@x", body="booking a van"))
    monkeypatch.setitem(store.NOMINAL_RATES, "hash-v1", 1.0)
    waiting = {p.identity_id: p for p in await progress(conn, "hash-v1", batch=32)}
    assert waiting[desk].seconds_left == 1.0 and waiting[sa].seconds_left == 5.0

    async with database(db_url) as pool:
        assert await embed_pending(pool, HashEmbedder(), batch=1, limit=1) == 1
    assert await conn.fetchval("SELECT message_id FROM message_embeddings") == live.message_id
