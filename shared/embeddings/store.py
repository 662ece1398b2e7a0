"""Owner of ``message_embeddings`` and ``embedding_queue`` (STACK.md section 1.4).

Ingest puts each new message on the queue (:func:`enqueue`); the batch worker drains it
(:func:`embed_pending`), and ``pylota embeddings backfill`` queues every message that has no
vector of the current model (:func:`enqueue_missing`). Vectors are float32 little-endian bytes;
where the ``vec_v`` pgvector column exists (migration 0002) it is written from the same values.
Functions take the connection (or pool) first; no asyncpg record leaves this module.
"""

from __future__ import annotations

import asyncio

import asyncpg
import numpy as np

from shared.db import Database
from shared.embeddings.embedder import Embedder

__all__ = ["TEXT_CHARS", "enqueue", "enqueue_missing", "embed_pending", "coverage",
           "has_vector_column", "vectors_after", "vectors_of", "queue_length"]

#: Characters of subject and own text handed to the embedder; the model reads 256 tokens
#: (about 1,000 characters of English), so more would only cost tokenizer time.
TEXT_CHARS = 2_000


async def enqueue(conn: asyncpg.Connection, identity_id: str, message_id: str) -> None:
    """Queue ``message_id`` for embedding (idempotent)."""
    await conn.execute(
        "INSERT INTO embedding_queue (message_id, identity_id) VALUES ($1, $2)"
        " ON CONFLICT DO NOTHING", message_id, identity_id)


async def enqueue_missing(conn: asyncpg.Connection, model: str,
                          identity_id: str | None = None) -> int:
    """Queue every message (of ``identity_id``, or all) without a ``model`` vector; returns how many."""
    status = await conn.execute(
        """INSERT INTO embedding_queue (message_id, identity_id)
           SELECT m.id, m.identity_id FROM messages m
           LEFT JOIN message_embeddings e ON e.message_id = m.id AND e.model = $1
           WHERE e.message_id IS NULL AND ($2::text IS NULL OR m.identity_id = $2)
           ON CONFLICT DO NOTHING""", model, identity_id)
    return int(status.rsplit(" ", 1)[-1])


async def queue_length(conn: asyncpg.Connection) -> int:
    """Messages waiting for an embedding."""
    return await conn.fetchval("SELECT count(*) FROM embedding_queue")


async def has_vector_column(conn: asyncpg.Connection) -> bool:
    """True when migration 0002 found pgvector and added ``message_embeddings.vec_v``."""
    return bool(await conn.fetchval(
        "SELECT true FROM information_schema.columns"
        " WHERE table_name = 'message_embeddings' AND column_name = 'vec_v'"))


def _text(subject: str, new_text: str, text: str) -> str:
    return f"{subject}\n{new_text.strip() or text}"[:TEXT_CHARS]


async def embed_pending(pool: Database, embedder: Embedder, *, batch: int = 32,
                        limit: int | None = None) -> int:
    """Embed queued messages, ``batch`` at a time, until the queue is empty (or ``limit`` done).

    Each batch is claimed with ``FOR UPDATE SKIP LOCKED`` inside one transaction, so several
    workers share the queue and a crash leaves the batch queued. The model runs in a thread.

    Returns:
        How many messages were embedded.
    """
    done = 0
    async with pool.acquire() as conn:
        pgvector = await has_vector_column(conn)
        while limit is None or done < limit:
            async with conn.transaction():
                rows = await conn.fetch(
                    """SELECT q.message_id, q.identity_id, m.subject, m.new_text, m.text
                       FROM embedding_queue q JOIN messages m ON m.id = q.message_id
                       ORDER BY q.queued_at, q.message_id
                       LIMIT $1 FOR UPDATE OF q SKIP LOCKED""", batch)
                if not rows:
                    return done
                texts = [_text(r["subject"], r["new_text"], r["text"]) for r in rows]
                vectors = await asyncio.to_thread(embedder.embed, texts)
                await _save(conn, embedder, [(r["message_id"], r["identity_id"]) for r in rows],
                            vectors, pgvector)
                await conn.execute("DELETE FROM embedding_queue WHERE message_id = any($1::text[])",
                                   [r["message_id"] for r in rows])
            done += len(rows)
    return done


async def _save(conn: asyncpg.Connection, embedder: Embedder, keys: list[tuple[str, str]],
                vectors: np.ndarray, pgvector: bool) -> None:
    rows = [(mid, idn, embedder.model, embedder.dim, vectors[i].astype("<f4").tobytes())
            for i, (mid, idn) in enumerate(keys)]
    upsert = ("INSERT INTO message_embeddings AS e (message_id, identity_id, model, dim, vec{extra})"
              " VALUES ($1, $2, $3, $4, $5{value}) ON CONFLICT (message_id) DO UPDATE SET"
              " model = excluded.model, dim = excluded.dim, vec = excluded.vec{update},"
              " seq = DEFAULT, created_at = now()")
    if pgvector:
        sql = upsert.format(extra=", vec_v", value=", $6::text::vector",
                            update=", vec_v = excluded.vec_v")
        rows = [(*r, "[" + ",".join(f"{x:.7g}" for x in vectors[i]) + "]")
                for i, r in enumerate(rows)]
    else:
        sql = upsert.format(extra="", value="", update="")
    await conn.executemany(sql, rows)


async def coverage(conn: asyncpg.Connection, identity_ids: list[str], model: str) -> float:
    """Share (0..1, 4 decimals) of the identities' messages that have a ``model`` vector now;
    1.0 for an empty mailbox (nothing is missing). Two index-only counts, no join."""
    total = await conn.fetchval(
        "SELECT count(*) FROM messages WHERE identity_id = any($1::text[])", identity_ids)
    embedded = await conn.fetchval(
        "SELECT count(*) FROM message_embeddings WHERE identity_id = any($1::text[])"
        " AND model = $2", identity_ids, model)
    return 1.0 if total == 0 else round(min(1.0, embedded / total), 4)


async def vectors_after(conn: asyncpg.Connection, identity_id: str, model: str, seq: int
                        ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """The identity's ``model`` vectors written after ``seq``.

    Returns:
        ``(message_ids, matrix (n, dim) float32, stamps (n,) epoch seconds when both the
        message and its vector were stored, seqs (n,) int64)``, in ``seq`` order.
    """
    rows = await conn.fetch(
        """SELECT e.message_id, e.vec, e.seq, extract(epoch FROM greatest(m.created_at, e.created_at)) AS created
           FROM message_embeddings e JOIN messages m ON m.id = e.message_id
           WHERE e.identity_id = $1 AND e.model = $2 AND e.seq > $3 ORDER BY e.seq""",
        identity_id, model, seq)
    if not rows:
        return [], np.zeros((0, 0), np.float32), np.zeros(0), np.zeros(0, np.int64)
    matrix = np.frombuffer(b"".join(r["vec"] for r in rows), dtype="<f4").reshape(len(rows), -1)
    return ([r["message_id"] for r in rows], matrix.astype(np.float32),
            np.array([float(r["created"]) for r in rows]),
            np.array([r["seq"] for r in rows], dtype=np.int64))


async def vectors_of(conn: asyncpg.Connection, message_ids: list[str], model: str
                     ) -> dict[str, np.ndarray]:
    """The ``model`` vectors of these messages (those that have one)."""
    rows = await conn.fetch(
        "SELECT message_id, vec FROM message_embeddings"
        " WHERE message_id = any($1::text[]) AND model = $2", message_ids, model)
    return {r["message_id"]: np.frombuffer(r["vec"], dtype="<f4") for r in rows}
