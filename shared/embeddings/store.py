"""Owner of ``message_embeddings`` and ``embedding_queue`` (STACK.md section 1.4).

Ingest puts each new message on the queue (:func:`enqueue`); the batch worker drains it
(:func:`embed_pending`), and ``pylota embeddings backfill`` queues every message that has no
vector of the current model (:func:`enqueue_missing`). Vectors are float32 little-endian bytes;
where the ``vec_v`` pgvector column exists (migration 0002) it is written from the same values.
Functions take the connection (or pool) first; no asyncpg record leaves this module.

A message has 1 to :data:`MAX_CHUNKS` vectors (``chunk`` 0, 1, …, migration 0013): the model reads
256 tokens, so a long message (a patch, a long review) is embedded in consecutive windows of its
own text, each led by the subject (``Embedder.split``), and a reply that quotes gets one more
chunk, its text read with the quotes; its similarity to a query is that of its best chunk.
Chunk 0 (subject and the start of the own text) is the message's head vector
(:func:`vectors_of`).
:func:`progress` reports how far embedding has come per identity, and how long the rest takes.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import msgspec
import numpy as np

from shared.db import Database
from shared.embeddings.embedder import Embedder
from shared.embeddings.quantized import MODEL
from shared.logs import get_logger

__all__ = ["MAX_CHUNKS", "SUBJECT_CHARS", "PROGRESS_LOG_SECONDS", "RATE_WINDOW_SECONDS",
           "NOMINAL_RATES", "IdentityProgress", "chunk_texts", "enqueue", "enqueue_all",
           "enqueue_missing", "embed_pending",
           "coverage", "has_vector_column", "vectors_after", "vectors_of", "similarities",
           "queue_length", "progress", "recent_rate"]

log = get_logger("shared.embeddings")

#: Most vectors one message gets: up to this many windows of 256 tokens of its own text (about
#: 1,000 characters of English each), one fewer when the reply-with-quotes chunk is added; text
#: past them is searched by keyword only. Each chunk costs a model run at embedding time, so the
#: bound keeps a patch series from multiplying the batch workers' work (README, Search).
MAX_CHUNKS = 4
#: Characters of the subject that lead each chunk (the embedder cuts it further to its tokens).
SUBJECT_CHARS = 300
#: Seconds between two progress lines of a draining batch worker.
PROGRESS_LOG_SECONDS = 10.0
#: Seconds of recent embedding the measured rate (:func:`recent_rate`) looks back over.
RATE_WINDOW_SECONDS = 600
#: A gap between two saved batches longer than this is the workers idling, not working.
IDLE_GAP_SECONDS = 30
#: Messages per second one batch worker embeds on 2 cores, by model, for a time-left estimate
#: before any rate was measured: SpamAssassin mail, chunked, on a loaded machine (README,
#: Performance, bench.embed).
NOMINAL_RATES = {MODEL: 8.0, "hash-v1": 500.0}


async def enqueue(conn: asyncpg.Connection, identity_id: str, message_id: str) -> None:
    """Queue ``message_id`` for embedding (idempotent)."""
    await enqueue_all(conn, identity_id, [message_id])


async def enqueue_all(conn: asyncpg.Connection, identity_id: str, message_ids: list[str], *,
                      bulk: bool = False) -> None:
    """Queue ``message_ids`` of ``identity_id`` for embedding in one statement (idempotent).
    ``bulk``: part of an import, embedded after every live message queued (migration 0020)."""
    await conn.execute(
        "INSERT INTO embedding_queue (message_id, identity_id, bulk)"
        " SELECT m, $2, $3 FROM unnest($1::text[]) AS m ON CONFLICT DO NOTHING",
        message_ids, identity_id, bulk)


async def enqueue_missing(conn: asyncpg.Connection, model: str,
                          identity_id: str | None = None) -> int:
    """Queue every message (of ``identity_id``, or all) without a ``model`` vector, as bulk;
    returns how many."""
    status = await conn.execute(
        """INSERT INTO embedding_queue (message_id, identity_id, bulk)
           SELECT m.id, m.identity_id, true FROM messages m
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


def chunk_texts(embedder: Embedder, subject: str, new_text: str, text: str) -> list[str]:
    """Windows of the message's own text (quotes removed), and, for a reply that quotes, one
    more: the start of its whole text, the reply read with what it answers ("Fixed it in transit"
    says nothing of the broken archive it quotes). At most :data:`MAX_CHUNKS` in all."""
    head, own = subject[:SUBJECT_CHARS], new_text.strip()
    if not own or own == text.strip():
        return embedder.split(head, own or text, MAX_CHUNKS)
    chunks = embedder.split(head, own, MAX_CHUNKS - 1)
    context = embedder.split(head, text, 1)[0]
    return chunks if context in chunks else [*chunks, context]


def _embed_messages(embedder: Embedder, messages: list[tuple[str, str, str]]
                    ) -> tuple[list[list[str]], np.ndarray]:
    """Each ``(subject, new_text, text)``'s chunks, and their vectors in the same order."""
    split = [chunk_texts(embedder, *message) for message in messages]
    return split, embedder.embed([t for parts in split for t in parts])


async def embed_pending(pool: Database, embedder: Embedder, *, batch: int = 32,
                        limit: int | None = None, seconds: float | None = None) -> int:
    """Embed queued messages, ``batch`` at a time, until the queue is empty, or ``limit`` are
    done, or a batch ends ``seconds`` after the start.

    Each batch is claimed with ``FOR UPDATE SKIP LOCKED`` inside one transaction, so several
    workers share the queue and a crash leaves the batch queued; live mail goes before bulk
    loads (imports, re-embedding), each oldest first. A message gets up to
    :data:`MAX_CHUNKS` vectors; the model runs in a thread, on all the batch's chunks. Every
    :data:`PROGRESS_LOG_SECONDS`, and when the run ends, an ``embed_progress`` line logs counts
    and rates (never mail content).

    Returns:
        How many messages were embedded.
    """
    done = chunks = 0
    started = last_log = time.monotonic()
    async with pool.acquire() as conn:
        pgvector = await has_vector_column(conn)
        while (limit is None or done < limit) and (
                seconds is None or time.monotonic() - started < seconds or not done):
            async with conn.transaction():
                rows = await conn.fetch(
                    """SELECT q.message_id, q.identity_id, m.subject, m.new_text, m.text
                       FROM embedding_queue q JOIN messages m ON m.id = q.message_id
                       ORDER BY q.bulk, q.queued_at, q.message_id
                       LIMIT $1 FOR UPDATE OF q SKIP LOCKED""", batch)
                if not rows:
                    break
                # Cutting into windows tokenizes: in the thread too, off the worker's event loop.
                split, vectors = await asyncio.to_thread(
                    _embed_messages, embedder,
                    [(r["subject"], r["new_text"], r["text"]) for r in rows])
                texts = [t for parts in split for t in parts]
                keys = [(r["message_id"], r["identity_id"], c)
                        for r, parts in zip(rows, split) for c in range(len(parts))]
                await _save(conn, embedder, keys, vectors, pgvector)
                await conn.execute("DELETE FROM embedding_queue WHERE message_id = any($1::text[])",
                                   [r["message_id"] for r in rows])
            done += len(rows)
            chunks += len(texts)
            if time.monotonic() - last_log >= PROGRESS_LOG_SECONDS:
                last_log = time.monotonic()
                await _log_progress(conn, embedder.model, done, chunks, last_log - started)
        if done:
            await _log_progress(conn, embedder.model, done, chunks, time.monotonic() - started)
    return done


async def _log_progress(conn: asyncpg.Connection, model: str, done: int, chunks: int,
                        seconds: float) -> None:
    queued = await queue_length(conn)
    rate = done / seconds if seconds > 0 else 0.0
    log.info("embed_progress", model=model, embedded=done, chunks=chunks, queued=queued,
             seconds=round(seconds, 1), per_second=round(rate, 2),
             seconds_left=round(queued / rate) if rate > 0 else None)


async def _save(conn: asyncpg.Connection, embedder: Embedder, keys: list[tuple[str, str, int]],
                vectors: np.ndarray, pgvector: bool) -> None:
    # A message re-embedded may have fewer chunks than before: its old rows go first.
    await conn.execute("DELETE FROM message_embeddings WHERE message_id = any($1::text[])",
                       sorted({mid for mid, _, _ in keys}))
    rows = [(mid, idn, chunk, embedder.model, embedder.dim, vectors[i].astype("<f4").tobytes())
            for i, (mid, idn, chunk) in enumerate(keys)]
    insert = ("INSERT INTO message_embeddings (message_id, identity_id, chunk, model, dim, vec{extra})"
              " VALUES ($1, $2, $3, $4, $5, $6{value})")
    if pgvector:
        sql = insert.format(extra=", vec_v", value=", $7::text::vector")
        rows = [(*r, "[" + ",".join(f"{x:.7g}" for x in vectors[i]) + "]")
                for i, r in enumerate(rows)]
    else:
        sql = insert.format(extra="", value="")
    await conn.executemany(sql, rows)


async def coverage(conn: asyncpg.Connection, identity_ids: list[str], model: str) -> float:
    """Share (0..1, 4 decimals) of the identities' messages that have a ``model`` vector now;
    1.0 for an empty mailbox (nothing is missing). Two index-only counts, no join, in one
    round trip."""
    total, embedded = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM messages WHERE identity_id = any($1::text[])),"
        " (SELECT count(*) FROM message_embeddings WHERE identity_id = any($1::text[])"
        " AND model = $2 AND chunk = 0)", identity_ids, model)
    return 1.0 if total == 0 else round(min(1.0, embedded / total), 4)


class IdentityProgress(msgspec.Struct, kw_only=True):
    """How far one identity's embeddings have come (``pylota embeddings status``).

    ``embedded`` messages of ``total`` have a vector of the model; ``queued`` wait for one;
    ``per_second``: messages embedded per second over the last :data:`RATE_WINDOW_SECONDS`
    (all identities, since the workers share one queue; None when nothing was embedded then);
    ``seconds_left``: the identity's queue position divided by that rate, or by the model's
    :data:`NOMINAL_RATES` entry when no rate was measured (None when neither is known).
    """

    identity_id: str
    embedded: int
    total: int
    queued: int
    per_second: float | None
    seconds_left: float | None


async def recent_rate(conn: asyncpg.Connection, model: str, batch: int) -> float | None:
    """Messages per second embedded with ``model`` while the workers worked, over the last
    :data:`RATE_WINDOW_SECONDS`; None when that cannot be told yet. ``batch`` is the workers'
    batch size (``PM_EMBED_BATCH``).

    A batch is claimed and saved in one transaction, so its vectors share one time, when it was
    claimed. A full batch (``batch`` messages) left more in the queue, so its worker claimed the
    next one as soon as it was saved: the time to the next claim is its work. A batch short of
    full emptied the queue, and what follows it is idle time, which never counts: sends a few
    seconds apart, one message each, had made the rate 0.2 messages a second where a worker
    embeds dozens (found by a new user). So does a gap over :data:`IDLE_GAP_SECONDS`."""
    row = await conn.fetchrow(
        """WITH batches AS (
               SELECT created_at, count(*) AS n FROM message_embeddings
               WHERE model = $1 AND chunk = 0 AND created_at > now() - make_interval(secs => $2)
               GROUP BY created_at),
           timed AS (
               SELECT n, extract(epoch FROM lead(created_at) OVER (ORDER BY created_at)
                                            - created_at) AS took
               FROM batches)
           SELECT sum(n) AS n, sum(took) AS busy FROM timed WHERE took <= $3 AND n >= $4""",
        model, RATE_WINDOW_SECONDS, IDLE_GAP_SECONDS, batch)
    if not row["n"] or not row["busy"]:
        return None
    return round(float(row["n"]) / float(row["busy"]), 2)


async def progress(conn: asyncpg.Connection, model: str, identity_ids: list[str] | None = None,
                   *, batch: int) -> list[IdentityProgress]:
    """Per identity (``identity_ids``, or every identity with mail), its :class:`IdentityProgress`
    for ``model`` with the workers' ``batch`` size (:func:`recent_rate`), in identity id order. The time left of an identity counts the queue ahead of
    its last queued message, since the workers drain live mail first, then bulk loads, each
    oldest first."""
    rows = await conn.fetch(
        """SELECT m.identity_id, count(*) AS total, count(e.message_id) AS embedded
           FROM messages m
           LEFT JOIN message_embeddings e ON e.message_id = m.id AND e.chunk = 0 AND e.model = $1
           WHERE $2::text[] IS NULL OR m.identity_id = any($2::text[])
           GROUP BY m.identity_id ORDER BY m.identity_id""", model, identity_ids)
    queued = {r["identity_id"]: (r["n"], r["ahead"]) for r in await conn.fetch(
        """SELECT q.identity_id, count(*) AS n,
                  CASE WHEN bool_or(q.bulk)
                       THEN (SELECT count(*) FROM embedding_queue a WHERE NOT a.bulk
                             OR a.queued_at <= max(q.queued_at) FILTER (WHERE q.bulk))
                       ELSE (SELECT count(*) FROM embedding_queue a WHERE NOT a.bulk
                             AND a.queued_at <= max(q.queued_at)) END AS ahead
           FROM embedding_queue q GROUP BY q.identity_id""")}
    rate = await recent_rate(conn, model, batch)
    pace = rate or NOMINAL_RATES.get(model)
    found = []
    for r in rows:
        n, ahead = queued.get(r["identity_id"], (0, 0))
        found.append(IdentityProgress(
            identity_id=r["identity_id"], embedded=r["embedded"], total=r["total"], queued=n,
            per_second=rate,
            seconds_left=(0.0 if not n else round(ahead / pace, 1) if pace else None)))
    return found


async def vectors_after(conn: asyncpg.Connection, identity_id: str, model: str, seq: int
                        ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, int]:
    """The identity's ``model`` vectors written after ``seq``, grouped by message.

    A message's chunks are written in one transaction, so they appear together.

    Returns:
        ``(message_ids, matrix (rows, dim) float32, starts (messages,) int64, stamps
        (messages,) epoch seconds when both the message and its vectors were stored, last seq)``:
        message ``i``'s chunks are rows ``starts[i]`` up to ``starts[i + 1]``; messages in the
        order of their first vector's ``seq``.
    """
    rows = await conn.fetch(
        """SELECT e.message_id, e.vec, e.seq, extract(epoch FROM greatest(m.created_at, e.created_at)) AS created
           FROM message_embeddings e JOIN messages m ON m.id = e.message_id
           WHERE e.identity_id = $1 AND e.model = $2 AND e.seq > $3 ORDER BY e.seq""",
        identity_id, model, seq)
    if not rows:
        return [], np.zeros((0, 0), np.float32), np.zeros(0, np.int64), np.zeros(0), seq
    grouped: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        grouped.setdefault(r["message_id"], []).append(i)
    order = [i for members in grouped.values() for i in members]
    matrix = np.frombuffer(b"".join(rows[i]["vec"] for i in order),
                           dtype="<f4").reshape(len(rows), -1)
    sizes = np.array([len(members) for members in grouped.values()], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    stamps = np.array([max(float(rows[i]["created"]) for i in members)
                       for members in grouped.values()])
    return list(grouped), matrix.astype(np.float32), starts, stamps, int(rows[-1]["seq"])


async def vectors_of(conn: asyncpg.Connection, message_ids: list[str], model: str
                     ) -> dict[str, np.ndarray]:
    """The ``model`` head vectors (chunk 0: subject and the start of the text) of these messages
    (those that have one)."""
    rows = await conn.fetch(
        "SELECT message_id, vec FROM message_embeddings"
        " WHERE message_id = any($1::text[]) AND model = $2 AND chunk = 0", message_ids, model)
    return {r["message_id"]: np.frombuffer(r["vec"], dtype="<f4") for r in rows}


async def similarities(conn: asyncpg.Connection, message_ids: list[str], model: str,
                       vector: np.ndarray) -> dict[str, float]:
    """Cosine similarity of ``vector`` to each message's best ``model`` chunk (those that have
    one), as the indexes score them."""
    rows = await conn.fetch(
        "SELECT message_id, vec FROM message_embeddings"
        " WHERE message_id = any($1::text[]) AND model = $2", message_ids, model)
    found: dict[str, float] = {}
    query = vector.astype(np.float32)
    for r in rows:
        score = float(np.frombuffer(r["vec"], dtype="<f4") @ query)
        found[r["message_id"]] = max(score, found.get(r["message_id"], -np.inf))
    return found
