"""Nearest-neighbour search over stored message vectors, behind one interface (STACK.md 1.2, 1.4).

- :class:`NumpyIndex` works on any PostgreSQL: it keeps each identity's vectors in memory
  (loaded from ``message_embeddings.vec``, then only the rows written since) and scores them all
  with one matrix product: exact, about 10 ms per 100,000 vectors; a message's score is the best
  of its chunks' (``np.maximum.reduceat`` over its rows).
- :class:`PgvectorIndex` asks PostgreSQL (``vec_v``, HNSW with iterative scans) where migration
  0002 found the ``vector`` extension.

:func:`choose_index` picks pgvector when the column exists, else numpy. Both honour the same
contract (tests/shared/embeddings/test_index.py): one result per message, scored by its most
similar chunk (``shared.embeddings.store``); scores are cosine similarities, best first;
only the given identities; only vectors and messages stored by ``as_of`` (so a cursor's later pages
rank the same set); and, when ``where`` is given, only messages satisfying that SQL condition over
``messages m`` with ``params`` numbered from ``$1``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime
from typing import Any, Protocol

import asyncpg
import numpy as np

from shared.embeddings.store import MAX_CHUNKS, has_vector_column, vectors_after

__all__ = ["VectorIndex", "NumpyIndex", "PgvectorIndex", "choose_index", "CACHE_VECTORS", "PROBE",
           "PROBE_PER_RESULT"]

#: Vectors the numpy index keeps in memory per process (x 1,536 bytes: about 730 MiB), least
#: recently used identities first out.
CACHE_VECTORS = 500_000
#: Nearest candidates the numpy index checks against an operator filter before reading the
#: filter's whole match set (:meth:`NumpyIndex.nearest`): at least this many, and four per
#: result asked for, so a filter a quarter of the mail passes is met from the candidates.
PROBE = 1_000
PROBE_PER_RESULT = 4


class VectorIndex(Protocol):
    """Exact or approximate top-k by cosine similarity."""

    #: ``numpy`` or ``pgvector``, reported in logs.
    name: str

    async def nearest(self, conn: asyncpg.Connection, *, identity_ids: list[str], model: str,
                      vector: np.ndarray, as_of: datetime, k: int, where: str | None = None,
                      params: list[Any] | None = None) -> list[tuple[str, float]]:
        """Up to ``k`` ``(message_id, similarity)`` pairs, most similar first."""
        ...


class _Mailbox:
    """One identity's vectors in memory: message ``i``'s chunks are ``matrix`` rows ``starts[i]``
    up to ``starts[i + 1]``; ``ids`` and ``stamp`` are per message."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.matrix = np.zeros((0, 0), np.float32)
        self.starts = np.zeros(0, np.int64)
        self.stamp = np.zeros(0)
        self.seq = 0
        self._rows: dict[str, int] | None = None

    def scores(self, vector: np.ndarray) -> np.ndarray:
        """Per message, the cosine similarity of its best chunk to ``vector``."""
        rows = self.matrix @ vector
        if len(rows) == len(self.ids):  # one chunk each
            return rows
        return np.maximum.reduceat(rows, self.starts)

    def mask(self, allowed: list[str]) -> np.ndarray:
        """True at the rows of the ``allowed`` message ids."""
        if self._rows is None:
            self._rows = {message_id: row for row, message_id in enumerate(self.ids)}
        rows = [r for r in map(self._rows.get, allowed) if r is not None]
        keep = np.zeros(len(self.ids), bool)
        keep[rows] = True
        return keep


class NumpyIndex:
    """Exact search in numpy over vectors cached per identity and model."""

    name = "numpy"

    def __init__(self, max_vectors: int = CACHE_VECTORS) -> None:
        self._cache: OrderedDict[tuple[str, str], _Mailbox] = OrderedDict()
        self._max = max_vectors
        self._lock = threading.Lock()

    async def _mailbox(self, conn: asyncpg.Connection, identity_id: str, model: str) -> _Mailbox:
        key = (identity_id, model)
        box = self._cache.get(key) or _Mailbox()
        latest = await conn.fetchval(
            "SELECT max(seq) FROM message_embeddings WHERE identity_id = $1 AND model = $2",
            identity_id, model) or 0
        if latest != box.seq:
            ids, matrix, starts, stamp, seq = await vectors_after(conn, identity_id, model, box.seq)
            if set(ids) & set(box.ids):  # a message was re-embedded: reload it all
                box = _Mailbox()
                ids, matrix, starts, stamp, seq = await vectors_after(conn, identity_id, model, 0)
            if ids:  # a new object, so a concurrent search keeps a consistent one
                grown = _Mailbox()
                grown.ids = box.ids + ids
                grown.matrix = matrix if not len(box.ids) else np.vstack([box.matrix, matrix])
                grown.starts = np.concatenate([box.starts, starts + len(box.matrix)])
                grown.stamp = np.concatenate([box.stamp, stamp])
                grown.seq = seq
                box = grown
        with self._lock:
            self._cache[key] = box
            self._cache.move_to_end(key)
            while (sum(len(b.matrix) for b in self._cache.values()) > self._max
                   and len(self._cache) > 1):
                self._cache.popitem(last=False)
        return box

    async def nearest(self, conn: asyncpg.Connection, *, identity_ids: list[str], model: str,
                      vector: np.ndarray, as_of: datetime, k: int, where: str | None = None,
                      params: list[Any] | None = None) -> list[tuple[str, float]]:
        cutoff = as_of.timestamp()
        scored: list[tuple[_Mailbox, np.ndarray]] = []
        for identity_id in identity_ids:
            box = await self._mailbox(conn, identity_id, model)
            if box.ids:
                scores = box.scores(vector.astype(np.float32))
                scored.append((box, np.where(box.stamp <= cutoff, scores, -np.inf)))
        if where is None:
            return _best(scored, k)
        # A filter most mail passes (category:billing, in:inbound) is cheaper to check on the
        # nearest candidates than to read whole: 78,000 ids cost 300 ms, 1,000 cost 5.
        wanted = max(PROBE, PROBE_PER_RESULT * k)
        candidates = _best(scored, wanted)
        probe = len(params or []) + 1
        rows = await conn.fetch(f"SELECT m.id FROM messages m WHERE m.id = any(${probe}::text[])"
                                f" AND ({where})", *(params or []), [i for i, _ in candidates])
        passed = {r["id"] for r in rows}
        found = [(i, score) for i, score in candidates if i in passed]
        if len(found) >= k or len(candidates) < wanted:  # enough, or every vector was a candidate
            return found[:k]
        rows = await conn.fetch(f"SELECT m.id FROM messages m WHERE {where}", *(params or []))
        allowed = [r["id"] for r in rows]
        return _best([(box, np.where(box.mask(allowed), scores, -np.inf))
                      for box, scores in scored], k)


def _best(scored: list[tuple[_Mailbox, np.ndarray]], k: int) -> list[tuple[str, float]]:
    """The ``k`` best ``(message id, score)`` over the mailboxes, best first; rows scored
    ``-inf`` are left out."""
    found: list[tuple[str, float]] = []
    for box, scores in scored:
        top = min(k, int(np.isfinite(scores).sum()))
        if top:
            best = np.argpartition(-scores, top - 1)[:top]
            found.extend((box.ids[i], float(scores[i])) for i in best)
    found.sort(key=lambda pair: (-pair[1], pair[0]))
    return found[:k]


class PgvectorIndex:
    """pgvector inner-product search (vectors are unit length, so inner product = cosine).

    It reads the ``k`` x :data:`~shared.embeddings.store.MAX_CHUNKS` nearest chunks and keeps
    each message's best: the best chunk of each of the ``k`` best messages is among them, since
    fewer than ``k`` messages, of at most that many chunks each, rank above it."""

    name = "pgvector"

    async def nearest(self, conn: asyncpg.Connection, *, identity_ids: list[str], model: str,
                      vector: np.ndarray, as_of: datetime, k: int, where: str | None = None,
                      params: list[Any] | None = None) -> list[tuple[str, float]]:
        args = list(params or [])
        n = len(args)
        args += [identity_ids, model, as_of, "[" + ",".join(f"{x:.7g}" for x in vector) + "]",
                 k * MAX_CHUNKS, k]
        async with conn.transaction():
            # Filtered HNSW scans stop early without iterative scans (pgvector >= 0.8).
            await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            rows = await conn.fetch(
                f"""SELECT message_id, max(score) AS score FROM (
                      SELECT e.message_id, -(e.vec_v <#> ${n + 4}::text::vector) AS score
                      FROM message_embeddings e JOIN messages m ON m.id = e.message_id
                      WHERE e.identity_id = any(${n + 1}::text[]) AND e.model = ${n + 2}
                        AND m.created_at <= ${n + 3} AND e.created_at <= ${n + 3}
                        AND ({where or 'true'})
                      ORDER BY e.vec_v <#> ${n + 4}::text::vector LIMIT ${n + 5}) chunks
                    GROUP BY message_id ORDER BY score DESC, message_id LIMIT ${n + 6}""", *args)
        found = [(r["message_id"], float(r["score"])) for r in rows]
        found.sort(key=lambda pair: (-pair[1], pair[0]))
        return found


async def choose_index(conn: asyncpg.Connection, numpy_index: NumpyIndex | None = None
                       ) -> VectorIndex:
    """pgvector when migration 0002 added ``vec_v`` (the server has the extension), else numpy."""
    if await has_vector_column(conn):
        return PgvectorIndex()
    return numpy_index or NumpyIndex()
