"""Chunked embeddings (issues 10 and 14): a long message is searched by its best window, on both
vector indexes; one result per message; coverage counts messages; re-embedding replaces every
chunk; migration 0013 keeps the vectors stored before it and queues the long messages again."""

from __future__ import annotations

from datetime import datetime, timezone

import asyncpg
import numpy as np

from shared.db import connect, open_database
from shared.db.migrate import available
from shared.embeddings import store
from shared.embeddings.embedder import HashEmbedder
from shared.embeddings.index import choose_index
from shared.embeddings.store import (MAX_CHUNKS, coverage, embed_pending, enqueue_missing,
                                     similarities, vectors_of)
from shared.ingest.pipeline import ingest_raw
from shared.tenancy.store import create_identity, create_tenant
from tests.conftest import _drop_db, _dsn, new_db_name
from tests.shared.search.conftest import mail

FILLER = " ".join(f"filler{i}" for i in range(300))  # every word once: no word outweighs the end
ENDING = "the parking fine for the delivery van on hill street must be appealed"


async def _mailbox(url: str):
    pool = await open_database(url, size=4, acquire_seconds=5)
    async with pool.acquire() as conn:
        tenant = await create_tenant(conn, "acme")
        identity = (await create_identity(conn, tenant.id, "one@acme.example")).id
        ids = {}
        for key, body in {"long": f"{FILLER} {ENDING}", "short": "team lunch on friday",
                          "huge": " ".join(f"more{i}" for i in range(5_000))}.items():
            outcome, _ = await ingest_raw(conn, None, identity, mail(f"{key}@x", subject="patch",
                                                                     body=body))
            ids[key] = outcome.message_id
    return pool, identity, ids


async def test_the_best_window_of_a_long_message_is_found(backend_url) -> None:
    backend, url = backend_url
    pool, identity, ids = await _mailbox(url)
    embedder = HashEmbedder()
    try:
        assert await embed_pending(pool, embedder, batch=2) == 3
        async with pool.acquire() as conn:
            rows = dict(await conn.fetch("SELECT message_id, count(*) FROM message_embeddings"
                                         " GROUP BY message_id"))
            assert rows[ids["short"]] == 1
            assert 2 <= rows[ids["long"]] < MAX_CHUNKS
            assert rows[ids["huge"]] == MAX_CHUNKS  # bounded, however long the message
            index = await choose_index(conn)
            assert index.name == backend
            query = embedder.embed(["parking fine for the delivery van"])[0]
            found = await index.nearest(conn, identity_ids=[identity], model=embedder.model,
                                        vector=query, as_of=datetime.now(timezone.utc), k=10)
            assert [i for i, _ in found][0] == ids["long"]
            assert len(found) == len({i for i, _ in found}) == 3  # one result per message
            # the score is the best chunk's, as similarities() computes it for a page
            best = await similarities(conn, list(ids.values()), embedder.model, query)
            assert abs(dict(found)[ids["long"]] - best[ids["long"]]) < 1e-4
            head = (await vectors_of(conn, [ids["long"]], embedder.model))[ids["long"]]
            assert float(head @ query) < best[ids["long"]]  # the ending is not in chunk 0
            assert await coverage(conn, [identity], embedder.model) == 1.0
            # a model change re-embeds every chunk and leaves no row of the old ones
            assert await enqueue_missing(conn, "another-model") == 3
            assert await embed_pending(pool, embedder) == 3
            assert dict(await conn.fetch("SELECT message_id, count(*) FROM message_embeddings"
                                         " GROUP BY message_id")) == rows
            again = await index.nearest(conn, identity_ids=[identity], model=embedder.model,
                                        vector=query, as_of=datetime.now(timezone.utc), k=2)
            assert [i for i, _ in again][0] == ids["long"] and len(again) == 2
    finally:
        await pool.close()


async def test_a_run_past_its_seconds_ends_with_its_batch(backend_url) -> None:
    """A run bounded in time takes no batch once its seconds are up, so the batch worker's other
    jobs (sends, attachment text) wait for a batch rather than the whole queue (a run of 1,000
    messages held sends back for minutes after an import: found by a new user)."""
    _, url = backend_url
    pool, _, _ = await _mailbox(url)
    embedder = HashEmbedder()
    try:
        assert await embed_pending(pool, embedder, batch=2, seconds=0) == 2
        async with pool.acquire() as conn:
            assert await store.queue_length(conn) == 1
        assert await embed_pending(pool, embedder, batch=2, seconds=60) == 1
    finally:
        await pool.close()


async def test_a_filter_keeps_one_result_per_message(backend_url) -> None:
    _, url = backend_url
    pool, identity, ids = await _mailbox(url)
    embedder = HashEmbedder()
    try:
        await embed_pending(pool, embedder)
        async with pool.acquire() as conn:
            index = await choose_index(conn)
            query = embedder.embed(["filler1 filler2 more1 more2"])[0]
            found = await index.nearest(conn, identity_ids=[identity], model=embedder.model,
                                        vector=query, as_of=datetime.now(timezone.utc), k=5,
                                        where="m.id <> $1", params=[ids["short"]])
            assert sorted(i for i, _ in found) == sorted([ids["long"], ids["huge"]])
    finally:
        await pool.close()


async def test_migration_0013_keeps_old_vectors_and_queues_long_mail(template_db) -> None:
    """A database without migration 0013, with one vector per message: after 0013 those rows are
    chunk 0 and searchable, and the long messages are queued to get their other chunks."""
    name = new_db_name("mig")
    admin = await asyncpg.connect(_dsn("postgres"))
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    conn = await connect(_dsn(name))
    try:
        for version, _, sql in available():
            if version not in (13, 17):  # these touch no embedding table
                await conn.execute(sql)
        tenant = await create_tenant(conn, "acme")
        identity = (await create_identity(conn, tenant.id, "one@acme.example")).id
        ids = {}
        for key, body in {"long": f"{FILLER} {ENDING}", "short": "team lunch"}.items():
            outcome, _ = await ingest_raw(conn, None, identity, mail(f"{key}@x", body=body))
            ids[key] = outcome.message_id
        await conn.execute("DELETE FROM embedding_queue")
        vector = HashEmbedder().embed(["team lunch"])[0].astype("<f4").tobytes()
        for message_id in ids.values():  # the 0002 schema: one row per message
            await conn.execute("INSERT INTO message_embeddings (message_id, identity_id, model,"
                               " dim, vec) VALUES ($1, $2, 'hash-v1', 384, $3)",
                               message_id, identity, vector)
        for version, _, sql in available():
            if version in (13, 17):  # 0017 queues another model's vectors only
                await conn.execute(sql)
        assert await conn.fetchval("SELECT array_agg(DISTINCT chunk) FROM message_embeddings") == [0]
        assert await coverage(conn, [identity], "hash-v1") == 1.0
        assert len(await vectors_of(conn, list(ids.values()), "hash-v1")) == 2
        queued = [r["message_id"] for r in await conn.fetch("SELECT message_id FROM embedding_queue")]
        assert queued == [ids["long"]]
    finally:
        await conn.close()
        await _drop_db(name)


def test_the_limit_is_named_and_bounded() -> None:
    assert 1 < store.MAX_CHUNKS <= 16


async def test_a_short_reply_is_found_by_what_it_quotes(backend_url) -> None:
    _, url = backend_url
    pool = await open_database(url, size=4, acquire_seconds=5)
    embedder = HashEmbedder()
    try:
        async with pool.acquire() as conn:
            tenant = await create_tenant(conn, "acme")
            identity = (await create_identity(conn, tenant.id, "one@acme.example")).id
            reply, _ = await ingest_raw(conn, None, identity, mail(
                "reply@x", subject="Re: hello",
                body="Fixed it, thanks.\n\nOn Monday Ann wrote:\n"
                     "> the mailing list archive link is broken\n"))
            other, _ = await ingest_raw(conn, None, identity, mail(
                "other@x", subject="Re: hello", body="Fixed it, thanks."))
        await embed_pending(pool, embedder)
        async with pool.acquire() as conn:
            counts = dict(await conn.fetch("SELECT message_id, count(*) FROM message_embeddings"
                                           " GROUP BY message_id"))
            assert counts == {reply.message_id: 2, other.message_id: 1}
            index = await choose_index(conn)
            query = embedder.embed(["mailing list archive link broken"])[0]
            found = await index.nearest(conn, identity_ids=[identity], model=embedder.model,
                                        vector=query, as_of=datetime.now(timezone.utc), k=2)
            assert found[0][0] == reply.message_id and found[0][1] > found[1][1]
            # the head vector is the reply's own text, as before chunks
            head = (await vectors_of(conn, [reply.message_id], embedder.model))[reply.message_id]
            assert np.allclose(head, embedder.embed(["Re: hello\nFixed it, thanks."])[0], atol=1e-5)
    finally:
        await pool.close()
