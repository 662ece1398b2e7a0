"""Keyword search: PostgreSQL full-text search over the identities in scope (STACK.md section 2).

Every statement is scoped by identity ids and by ``as_of`` (messages stored after the first page
was served are left out, so later pages of a cursor neither repeat nor skip hits while new mail
arrives). Ranking blends ``ts_rank_cd`` with recency; a query without words orders by date.
Headlines are computed only for the rows returned.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from shared.mail.model import Address
from shared.search.compile import compile_query
from shared.search.query import Query

__all__ = ["Filters", "RawHit", "FacetCount", "Facets", "run_keyword", "facets"]

#: Weight of recency against text relevance in the blended score (0..1).
RECENCY_WEIGHT = 0.2
#: Age in days at which the recency part of the score has fallen to 1/e.
RECENCY_DAYS = 365.0


class Filters(msgspec.Struct, frozen=True, kw_only=True):
    """Filters from tool arguments rather than from ``q``."""

    direction: str | None = None
    labels: tuple[str, ...] = ()
    after: datetime | None = None
    before: datetime | None = None


class RawHit(msgspec.Struct, kw_only=True):
    """One ranked message before rendering."""

    message_id: str
    thread_id: str
    identity_id: str
    subject: str
    from_: Address | None
    date: datetime
    score: float
    snippet: str
    thread_hits: int = 1


class FacetCount(msgspec.Struct, frozen=True):
    """One facet value and how many matching messages have it."""

    value: str
    count: int


class Facets(msgspec.Struct, kw_only=True):
    """Counts over the whole match set, top 10 values each."""

    sender_domain: list[FacetCount] = []
    month: list[FacetCount] = []
    category: list[FacetCount] = []
    label: list[FacetCount] = []
    attachment_type: list[FacetCount] = []


def _where(identity_ids: list[str], query: Query, filters: Filters, as_of: datetime,
           time_zone: str) -> tuple[str, list[Any], list[str]]:
    params: list[Any] = [identity_ids, as_of]
    clauses = ["m.identity_id = any($1::text[])", "m.created_at <= $2"]
    cond, compiled = compile_query(query.root, first=3, time_zone=time_zone)
    clauses.append(cond)
    params.extend(compiled.params)
    date_sql = "coalesce(m.sent_at, m.received_at)"
    if filters.direction:
        params.append(filters.direction)
        clauses.append(f"m.direction = ${len(params)}")
    if filters.labels:
        params.append(list(filters.labels))
        clauses.append(f"m.labels @> ${len(params)}::text[]")
    if filters.after:
        params.append(filters.after)
        clauses.append(f"{date_sql} >= ${len(params)}")
    if filters.before:
        params.append(filters.before)
        clauses.append(f"{date_sql} < ${len(params)}")
    return " AND ".join(clauses), params, compiled.rank_terms


async def run_keyword(conn: asyncpg.Connection, *, identity_ids: list[str], query: Query,
                      filters: Filters, as_of: datetime, time_zone: str, offset: int,
                      limit: int, snippet_chars: int, group_by_thread: bool
                      ) -> tuple[list[RawHit], bool]:
    """One page of hits, best first, and whether more follow.

    Raises:
        PylotaError: ``invalid_request`` from :func:`~shared.search.compile.compile_query`.
    """
    where, params, rank_terms = _where(identity_ids, query, filters, as_of, time_zone)
    date_sql = "coalesce(m.sent_at, m.received_at)"
    if rank_terms:
        tsq = " || ".join(rank_terms)
        rank = f"ts_rank_cd(m.tsv, {tsq}, 32)"
        score = (f"((1 - {RECENCY_WEIGHT}) * {rank} + {RECENCY_WEIGHT} * "
                 f"exp(-greatest(0, extract(epoch FROM now() - {date_sql}) / 86400) / {RECENCY_DAYS}))")
        headline_q = tsq
    else:
        score = f"extract(epoch FROM {date_sql})"
        headline_q = None
    base = (f"SELECT m.id, m.thread_id, {score}::float8 AS score, {date_sql} AS date"
            f" FROM messages m WHERE {where}")
    if group_by_thread:
        base = (f"SELECT DISTINCT ON (thread_id) id, thread_id, score, date,"
                f" count(*) OVER (PARTITION BY thread_id) AS thread_hits"
                f" FROM ({base}) b ORDER BY thread_id, score DESC, date DESC, id DESC")
    else:
        base = f"SELECT id, thread_id, score, date, 1 AS thread_hits FROM ({base}) b"
    params.extend([limit + 1, offset])
    page_sql = (f"SELECT * FROM ({base}) p ORDER BY score DESC, date DESC, id DESC"
                f" LIMIT ${len(params) - 1} OFFSET ${len(params)}")
    headline = (f"ts_headline('en_unaccent', left(m.text, 20000), {headline_q},"
                " 'StartSel=«, StopSel=», MaxWords=30, MinWords=10, MaxFragments=2,"
                " FragmentDelimiter=\" … \"')" if headline_q else "m.snippet")
    rows = await conn.fetch(
        f"""SELECT p.id, p.thread_id, p.score, p.date, p.thread_hits, m.identity_id, m.subject,
                   m.from_address, m.from_name, {headline} AS snippet
            FROM ({page_sql}) p JOIN messages m ON m.id = p.id
            ORDER BY p.score DESC, p.date DESC, p.id DESC""",
        *params,
    )
    hits = [RawHit(
        message_id=r["id"], thread_id=r["thread_id"], identity_id=r["identity_id"],
        subject=r["subject"], date=r["date"], score=round(float(r["score"]), 6),
        from_=Address(address=r["from_address"], name=r["from_name"]) if r["from_address"] else None,
        snippet=" ".join((r["snippet"] or "").split()), thread_hits=r["thread_hits"],
    ) for r in rows]
    return hits[:limit], len(hits) > limit


async def facets(conn: asyncpg.Connection, *, identity_ids: list[str], query: Query,
                 filters: Filters, as_of: datetime, time_zone: str) -> Facets:
    """Facet counts over every message the query matches (not just one page)."""
    where, params, _ = _where(identity_ids, query, filters, as_of, time_zone)
    params.append(time_zone)
    tz = f"${len(params)}"
    rows = await conn.fetch(
        f"""WITH hit AS (SELECT m.id, m.from_address, m.labels,
                                coalesce(m.sent_at, m.received_at) AS date
                         FROM messages m WHERE {where})
            SELECT 'sender_domain' AS facet, split_part(from_address, '@', 2) AS value,
                   count(*) AS n FROM hit WHERE from_address IS NOT NULL GROUP BY 2
            UNION ALL
            SELECT 'month', to_char(date AT TIME ZONE {tz}, 'YYYY-MM'), count(*) FROM hit GROUP BY 2
            UNION ALL
            SELECT 'label', l, count(*) FROM hit, unnest(labels) l GROUP BY 2
            UNION ALL
            SELECT 'attachment_type', CASE
                     WHEN a.content_type = 'application/pdf' THEN 'pdf'
                     WHEN a.content_type LIKE 'image/%' THEN 'image'
                     WHEN a.content_type = 'text/calendar' THEN 'calendar'
                     WHEN a.content_type LIKE '%wordprocessingml%' THEN 'docx'
                     WHEN a.content_type = 'application/msword' THEN 'doc'
                     WHEN a.content_type LIKE '%spreadsheetml%' THEN 'xlsx'
                     WHEN a.content_type = 'application/vnd.ms-excel' THEN 'xls'
                     WHEN a.content_type LIKE '%zip%' THEN 'zip'
                     WHEN a.content_type = 'text/plain' THEN 'text'
                     WHEN a.content_type = 'text/html' THEN 'html'
                     ELSE 'other' END, count(DISTINCT a.message_id)
            FROM hit JOIN attachments a ON a.message_id = hit.id GROUP BY 2""",
        *params,
    )
    out = Facets()
    for r in sorted(rows, key=lambda r: (-r["n"], r["value"] or "")):
        bucket = getattr(out, r["facet"])
        if len(bucket) < 10 and r["value"]:
            bucket.append(FacetCount(r["value"], r["n"]))
    return out
