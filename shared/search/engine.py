"""The three search modes over one scope (spec section 4.3, ``mail_search``; STACK.md section 1.4).

- ``keyword``: full-text search (``keyword.py``): every word and operator must match; ranked by
  ``ts_rank_cd`` blended with recency.
- ``semantic``: the query's words are embedded and compared with message vectors; operators and
  exclusions (``-booking``) still filter (a word OR-ed with an operator is left to meaning). At most
  :data:`SEMANTIC_LIMIT` hits.
- ``hybrid``: reciprocal-rank fusion of the keyword ranking (all of it: up to
  ``keyword.RANK_CANDIDATES``) and the semantic top :data:`HYBRID_DEPTH`, so a message found by
  both ranks first and paging reaches every keyword match (it stopped at the keyword top 50,
  with no cursor: found by a new user).

A query without words (only operators, or empty) has nothing to embed: every mode then runs
keyword search, which orders by date. When the model or the vector index is unavailable, or no
message in scope has a vector yet, semantic and hybrid return keyword results with
``degraded: true``. Facets count the match set: keyword matches (the newest
``keyword.FACET_CANDIDATES`` of them), semantic candidates (within the operators), or their union
for hybrid. Pages of one cursor rank the same set: everything (messages and vectors) is limited to
what was stored by ``as_of``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Literal

import msgspec

from shared.db import Database
from shared.embeddings.store import coverage, similarities
from shared.mail.store import thread_ids
from shared.search.compile import without_words, words_of
from shared.search.keyword import (RANK_CANDIDATES, Facets, Filters, Ranked, RawHit, Scope, facets,
                                   hit_details, keyword_ranked, loose_where_sql, where_sql)
from shared.search.query import Node
from shared.search.semantic import SemanticEngine

__all__ = ["Outcome", "run_search", "SEMANTIC_LIMIT", "HYBRID_DEPTH", "RRF_K"]

#: Most hits semantic mode ranks (later pages are empty).
SEMANTIC_LIMIT = 1_000
#: Length of the semantic list hybrid mode fuses (STACK.md section 1.4: top 50).
HYBRID_DEPTH = 50
#: The k of reciprocal-rank fusion, score = sum of 1 / (k + rank) (Cormack et al., SIGIR 2009).
RRF_K = 60

Mode = Literal["keyword", "semantic", "hybrid"]


class Outcome(msgspec.Struct, kw_only=True):
    """One page of a search, with what the response reports besides hits (each hit says which
    clauses and attachments matched: ``RawHit.matched``, ``RawHit.in_attachments``)."""

    hits: list[RawHit]
    more: bool
    facets: Facets
    semantic_coverage: float
    degraded: bool


def _fuse(keyword: list[str], semantic: list[str]) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion of the two rankings, highest score first. Of two equal scores the
    message that holds the query's words goes first: a rare word's only matches tied with
    messages merely near in meaning, and the order of their ids put them below (found by a new
    user: "SwiftMailer" ranked a message about Nodemailer first)."""
    scores: dict[str, float] = {}
    for ranking in (keyword, semantic):
        for rank, message_id in enumerate(ranking, start=1):
            scores[message_id] = scores.get(message_id, 0.0) + 1.0 / (RRF_K + rank)
    literal = set(keyword)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0] not in literal, pair[0]))


def _group(ranked: list[Ranked]) -> list[Ranked]:
    best: dict[str, Ranked] = {}
    for item in ranked:
        if item.thread_id in best:
            best[item.thread_id].thread_hits += 1
        else:
            best[item.thread_id] = item
    return list(best.values())


async def run_search(db: Database, engine: SemanticEngine, scope: Scope,
                     root: Node | None, filters: Filters, *, mode: Mode, offset: int, limit: int,
                     group_by_thread: bool) -> Outcome:
    """One page (``offset``, ``limit``) of ``mode`` search for ``root`` within ``scope``.

    The facets, which read the whole match set, run beside the ranking on a second connection
    when one is free at once, and after it on the same connection otherwise: a search never
    holds one connection while it waits for another (``Database.acquire_free``; a burst of
    searches once deadlocked the front that way, issue 9).

    Raises:
        PylotaError: ``invalid_request`` (path ``q``) from the query compiler.
    """
    async with db.acquire() as conn, db.acquire_free() as free:
        counting: asyncio.Future[Facets] | None = None
        deferred: tuple[tuple[Any, ...], dict[str, Any]] | None = None

        def count(*args: Any, **kwargs: Any) -> None:
            nonlocal counting, deferred
            if free is not None:
                counting = asyncio.ensure_future(facets(free, *args, **kwargs))
            else:
                deferred = (args, kwargs)

        try:
            problem = await engine.ready(conn)
            model = engine.embedder.model if engine.embedder else None
            share = await coverage(conn, scope.identity_ids, model) if model else 0.0
            words = words_of(root)
            semantic_ok = problem is None and share > 0
            kw_where, kw_params, _ = where_sql(scope, root, filters)
            kw_loose = loose_where_sql(scope, root, filters)
            vector = None
            if mode == "keyword" or not words or not semantic_ok:
                count(kw_where, kw_params, scope.time_zone, loose=kw_loose)
                page, more = await keyword_ranked(conn, scope, root, filters, offset=offset,
                                                  limit=limit, group_by_thread=group_by_thread)
                degraded = mode != "keyword" and bool(words) and not semantic_ok
            else:
                vector = await engine.embed_query(words)
                filter_root = without_words(root)
                where, params, _ = where_sql(scope, filter_root, filters)
                narrowed = filter_root is not None or filters != Filters()
                depth = SEMANTIC_LIMIT if mode == "semantic" else HYBRID_DEPTH
                nearest = await engine.nearest(conn, identity_ids=scope.identity_ids, vector=vector,
                                               as_of=scope.as_of, k=depth,
                                               where=where if narrowed else None,
                                               params=params if narrowed else None)
                similarity = dict(nearest)
                near_ids = [i for i, _ in nearest]
                if mode == "semantic":
                    order = nearest
                    count("false", [], scope.time_zone, also=near_ids)
                else:
                    count(kw_where, kw_params, scope.time_zone, also=near_ids, loose=kw_loose)
                    keyword, _ = await keyword_ranked(conn, scope, root, filters, offset=0,
                                                      limit=RANK_CANDIDATES,
                                                      group_by_thread=False)
                    order = _fuse([r.message_id for r in keyword], near_ids)
                threads = await thread_ids(conn, [i for i, _ in order])
                ranked = [Ranked(message_id=i, thread_id=threads[i], score=round(s, 6),
                                 semantic_score=round(similarity[i], 4) if i in similarity else None)
                          for i, s in order if i in threads]
                if group_by_thread:
                    ranked = _group(ranked)
                page, more = ranked[offset:offset + limit], len(ranked) > offset + limit
                degraded = False
            if vector is not None and model:
                missing = [r.message_id for r in page if r.semantic_score is None]
                for message_id, sim in (await similarities(conn, missing, model, vector)).items():
                    next(r for r in page if r.message_id == message_id).semantic_score = round(
                        sim, 4)
            hits = await hit_details(conn, page, root, scope.time_zone)
        except BaseException:
            if counting is not None:  # never release ``free`` with its query still running
                counting.cancel()
                with contextlib.suppress(BaseException):
                    await counting
            raise
        if counting is not None:
            counted = await counting
        else:
            assert deferred is not None
            counted = await facets(conn, *deferred[0], **deferred[1])
    return Outcome(hits=hits, more=more, facets=counted, semantic_coverage=share,
                   degraded=degraded)
