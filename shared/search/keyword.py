"""Keyword search: PostgreSQL full-text search over the identities in scope (STACK.md section 2).

Every statement is scoped by identity ids and by ``as_of`` (messages stored after the first page
was served are left out, so later pages of a cursor neither repeat nor skip hits while new mail
arrives). Ranking blends ``ts_rank_cd`` with recency; a query without words orders by date.

Costs are bounded for big mailboxes (STACK.md section 2: ranking and counting are O(matches)): a
query with words ranks only the newest :data:`RANK_CANDIDATES` messages that match it, and facets
count the newest :data:`FACET_CANDIDATES` matches, so a word found in most of a 100,000-message
mailbox does not rank all of them; operators (``after:``, ``from:``) reach older mail. Both run
with sequential scans off and custom plans (:func:`_planned`): the planner does not count the cost
of reading each message's TOASTed ``tsv``, and so prefers a scan that reads every one of them over
the GIN index (measured: 500 ms against 80 ms for a word in a third of 100,000 messages).
A phrase needs word positions, which the GIN index does not hold: PostgreSQL rechecks it against
the TOASTed ``tsv`` of every message holding all its words. So a query with phrases looks for them
only among the newest :data:`PHRASE_CANDIDATES` messages matching its loose form (each phrase as
all of its words, in any order: answered by the GIN index alone; :func:`narrowed`), and ranks and
counts those of them that match exactly: a phrase whose words are common together does not reach
mail older than those candidates unless operators (``before:``, ``from:``) narrow the search.
Headlines are computed only for the rows returned (:func:`hit_details`, also used by the
semantic and hybrid modes), and ``why`` is checked clause by clause on those rows only, in the
same statement.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from shared.mail.model import Address
from shared.search.compile import compile_query
from shared.search.query import And, Node, Or, Phrase, Term, render

__all__ = ["Filters", "Ranked", "RawHit", "FacetCount", "Facets", "Scope", "where_sql",
           "loose_where_sql", "keyword_ranked", "hit_details", "facets"]

#: Newest matching messages a query with words ranks; later pages end there.
RANK_CANDIDATES = 500
#: Newest matching messages the facets count: a sample large enough to show which operator
#: narrows a search, small enough that a common word costs no more than 100 ms at 100,000
#: messages (each match read is a TOASTed tsv).
FACET_CANDIDATES = 1_000
#: Newest messages containing all the words of a query's phrases (the loose condition of
#: :func:`~shared.search.compile.compile_query`) in which the phrases themselves are looked for,
#: each read with its word positions (measured at 100,000 messages for "payment reminder", whose
#: words are together in a third of them: 5,000 cost 130 ms, 2,000 cost 90 ms; a whole search,
#: ranking and facets each checking them, 160 ms at 2,000 and 135 ms at 1,000).
PHRASE_CANDIDATES = 1_000
#: Weight of recency against text relevance in the blended score (0..1).
RECENCY_WEIGHT = 0.2
#: Age in days (at ``as_of``, so every page of a cursor scores alike) at which the recency part
#: of the score has fallen to 1/e.
RECENCY_DAYS = 365.0


class Filters(msgspec.Struct, frozen=True, kw_only=True):
    """Filters from tool arguments rather than from ``q``."""

    direction: str | None = None
    labels: tuple[str, ...] = ()
    after: datetime | None = None
    before: datetime | None = None


class Scope(msgspec.Struct, frozen=True, kw_only=True):
    """What every statement is limited to: identities, ``as_of`` and the tenant's time zone."""

    identity_ids: list[str]
    as_of: datetime
    time_zone: str


class Ranked(msgspec.Struct, kw_only=True):
    """One ranked message id; ``semantic_score`` is set when vectors took part."""

    message_id: str
    thread_id: str
    score: float
    thread_hits: int = 1
    semantic_score: float | None = None


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
    semantic_score: float | None = None
    #: The clauses of the query the message satisfies (:func:`hit_details`).
    matched: list[str] = []
    #: Its attachments whose text holds the query's words (:func:`hit_details`).
    in_attachments: list[str] = []


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


_DATE_SQL = "coalesce(m.sent_at, m.received_at)"
#: Characters of a message's text a snippet is looked for in.
_HEADLINE_CHARS = 20_000


def where_sql(scope: Scope, root: Node | None, filters: Filters
              ) -> tuple[str, list[Any], list[str]]:
    """The condition over ``messages m`` for ``root`` and ``filters`` in ``scope``, its parameters
    (from ``$1``), and the ``tsquery`` SQL of the positive words to rank and mark.

    Raises:
        PylotaError: ``invalid_request`` from :func:`~shared.search.compile.compile_query`.
    """
    where, params, rank_terms, _ = _where(scope, root, filters, loose=False)
    return where, params, rank_terms


def loose_where_sql(scope: Scope, root: Node | None, filters: Filters) -> str | None:
    """The loose form of :func:`where_sql`'s condition (:func:`~shared.search.compile.compile_query`:
    phrases as all of their words, in any order), with the same parameters; None when the query
    has no phrase, so that both are the same."""
    where, _, _, loosened = _where(scope, root, filters, loose=True)
    return where if loosened else None


def _where(scope: Scope, root: Node | None, filters: Filters, *, loose: bool
           ) -> tuple[str, list[Any], list[str], bool]:
    params: list[Any] = [scope.identity_ids, scope.as_of]
    cond, compiled = compile_query(root, first=3, time_zone=scope.time_zone, loose=loose,
                                   identities="$1::text[]")
    # One identity (the usual case) as an equality, so "newest first" can walk the
    # (identity_id, date) index instead of sorting every message of the mailbox. In the loose
    # form, no btree index may serve the identity (``|| ''``): the planner would read the
    # identity's messages through one and test the words on each, reading every TOASTed ``tsv``
    # (a cost it does not count), rather than find them in the GIN index (measured: 64 ms
    # against 15 ms for two common words in 11,000 messages).
    identity = "(m.identity_id || '')" if loose and compiled.rank_terms else "m.identity_id"
    clauses = [f"{identity} = ($1::text[])[1]" if len(scope.identity_ids) == 1
               else f"{identity} = any($1::text[])", "m.created_at <= $2", cond]
    params.extend(compiled.params)
    if filters.direction:
        params.append(filters.direction)
        clauses.append(f"m.direction = ${len(params)}")
    if filters.labels:
        params.append(list(filters.labels))
        clauses.append(f"m.labels @> ${len(params)}::text[]")
    if filters.after:
        params.append(filters.after)
        clauses.append(f"{_DATE_SQL} >= ${len(params)}")
    if filters.before:
        params.append(filters.before)
        clauses.append(f"{_DATE_SQL} < ${len(params)}")
    return " AND ".join(clauses), params, compiled.rank_terms, compiled.loosened


def narrowed(where: str, loose: str | None, params: list[Any]) -> str:
    """``messages m`` rows satisfying ``where``, as a FROM item: only those among the newest
    :data:`PHRASE_CANDIDATES` satisfying ``loose`` (its loose form, same parameters) when there
    is one (a phrase), so word positions are read for those rows only. Appends
    the parameter it needs to ``params``."""
    if loose is None:
        return f"messages m WHERE {where}"
    params.append(PHRASE_CANDIDATES)
    return (f"(SELECT m.id FROM messages m WHERE {loose} ORDER BY {_DATE_SQL} DESC, m.id DESC"
            f" LIMIT ${len(params)}) l JOIN messages m ON m.id = l.id WHERE {where}")


@contextlib.asynccontextmanager
async def _planned(conn: asyncpg.Connection) -> AsyncIterator[None]:
    # A generic plan would keep "numnode(q) = 0 OR tsv @@ q" unfolded, and never use GIN. The
    # transaction and both settings in one round trip (a simple query may hold several
    # statements; issue 14: round trips are a search's cost); a transaction left open by a
    # cancelled call is rolled back when the pool takes the connection back.
    await conn.execute("BEGIN READ ONLY; SET LOCAL enable_seqscan = off;"
                       " SET LOCAL plan_cache_mode = force_custom_plan")
    try:
        yield
    except BaseException:
        # The call's own error is what the caller sees: a ROLLBACK on a connection that was
        # just lost fails too, and the pool then drops the connection anyway.
        with contextlib.suppress(Exception):
            if not conn.is_closed() and conn.is_in_transaction():
                await conn.execute("ROLLBACK")
        raise
    await conn.execute("COMMIT")


async def keyword_ranked(conn: asyncpg.Connection, scope: Scope, root: Node | None,
                         filters: Filters, *, offset: int, limit: int, group_by_thread: bool
                         ) -> tuple[list[Ranked], bool]:
    """``limit`` ranked ids from ``offset``, best first, and whether more follow.

    With ``group_by_thread``, one hit per thread (its best message) with the thread's count of
    matching messages.
    """
    where, params, rank_terms = where_sql(scope, root, filters)
    loose = loose_where_sql(scope, root, filters)
    # 1 for mail dated at as_of, falling towards 0 with age; capped so that a bogus Date (year
    # 100) cannot underflow. Alone it is the score of a query without words (newest first), so
    # every score an agent sees lies between 0 and 1.
    recency = (f"exp(-least(50, greatest(0, extract(epoch FROM $2 - {_DATE_SQL})::float8 / 86400)"
               f" / {RECENCY_DAYS}))")
    if rank_terms:
        rank = f"ts_rank_cd(m.tsv, {' || '.join(rank_terms)}, 32)"
        score = f"((1 - {RECENCY_WEIGHT}) * {rank} + {RECENCY_WEIGHT} * {recency})"
        inner = narrowed(where, loose, params)
        params.append(RANK_CANDIDATES)
        source = (f"(SELECT m.id FROM {inner} ORDER BY {_DATE_SQL} DESC, m.id DESC"
                  f" LIMIT ${len(params)}) c JOIN messages m ON m.id = c.id")
    else:
        score = recency
        source = narrowed(where, loose, params)
    base = f"SELECT m.id, m.thread_id, {score}::float8 AS score, {_DATE_SQL} AS date FROM {source}"
    if group_by_thread:
        base = (f"SELECT DISTINCT ON (thread_id) id, thread_id, score, date,"
                f" count(*) OVER (PARTITION BY thread_id) AS thread_hits"
                f" FROM ({base}) b ORDER BY thread_id, score DESC, date DESC, id DESC")
    else:
        base = f"SELECT id, thread_id, score, date, 1 AS thread_hits FROM ({base}) b"
    params.extend([limit + 1, offset])
    # Without words the score is recency, which never rises with age: ordered by date, the same
    # order, the (identity_id, date) index is walked only as far as the page instead of scoring
    # every message in scope (measured: 147 ms against a few for "" in 100,000 messages).
    order = ("date DESC, id DESC" if not rank_terms and not group_by_thread
             else "score DESC, date DESC, id DESC")
    async with _planned(conn):
        rows = await conn.fetch(
            f"SELECT * FROM ({base}) p ORDER BY {order}"
            f" LIMIT ${len(params) - 1} OFFSET ${len(params)}", *params)
    ranked = [Ranked(message_id=r["id"], thread_id=r["thread_id"], score=round(float(r["score"]), 6),
                     thread_hits=r["thread_hits"]) for r in rows]
    return ranked[:limit], len(ranked) > limit


async def hit_details(conn: asyncpg.Connection, ranked: list[Ranked], root: Node | None,
                      time_zone: str) -> list[RawHit]:
    """The hits for ``ranked``, in its order, in one statement: snippets marking the words of
    ``root`` with « and » (the stored snippet when no word matches the message), the clauses
    of ``root`` each satisfies (``RawHit.matched``: the top-level terms and the alternatives of
    a top-level OR, rendered in the query language; words that are only stop words are never
    listed) and its attachments, in part order, whose ready text holds a word or phrase of
    ``root`` outside any exclusion (``RawHit.in_attachments``: what ``why`` points the caller
    to, mail_get_attachment_text). One statement because round trips are a search's cost
    (issue 14)."""
    if not ranked:
        return []
    texts = [t for text in _positive_texts(root)
             for t in ([text, text.replace("-", " ")] if "-" in text else [text])]
    params: list[Any] = [[r.message_id for r in ranked], *texts]
    if texts:
        tsq = " || ".join(f"phraseto_tsquery('en_unaccent', ${n})" for n in range(2, len(texts) + 2))
        matched = f"m.tsv @@ ({tsq})"
        headline = (f"ts_headline('en_unaccent', left(m.text, {_HEADLINE_CHARS}), {tsq},"
                    " 'StartSel=«, StopSel=», MaxWords=30, MinWords=10, MaxFragments=2,"
                    " FragmentDelimiter=\" … \"')")
        in_attachments = f"""ARRAY(SELECT a.id FROM attachments a
            JOIN attachment_texts x ON x.attachment_id = a.id
            WHERE a.message_id = m.id AND numnode({tsq}) > 0 AND x.tsv @@ ({tsq})
            ORDER BY a.part_index)"""
    else:
        matched, headline, in_attachments = "false", "NULL", "'{}'::text[]"
    clauses = _clauses(root)
    columns = []
    for n, clause in enumerate(clauses):
        cond, compiled = compile_query(clause, first=len(params) + 1, time_zone=time_zone)
        params.extend(compiled.params)
        if isinstance(clause, (Term, Phrase)):
            # A stop word ("for") matches every message, so it explains none.
            params.append(clause.text)
            cond = f"({cond}) AND numnode(plainto_tsquery('en_unaccent', ${len(params)})) > 0"
        columns.append(f", ({cond}) AS c{n}")
    rows = await conn.fetch(
        f"""SELECT m.id, m.identity_id, m.subject, m.from_address, m.from_name,
                   {_DATE_SQL} AS date, m.snippet, h.headline, h.head, h.tail,
                   {in_attachments} AS in_attachments{''.join(columns)}
            FROM messages m
            LEFT JOIN LATERAL (SELECT {headline} AS headline, left(m.text, 200) AS head,
                                      right(left(m.text, {_HEADLINE_CHARS}), 200) AS tail
                               WHERE {matched}) h ON true
            WHERE m.id = any($1::text[])""", *params)
    by_id = {r["id"]: r for r in rows}
    rendered = [render(c) for c in clauses]
    hits = []
    for item in ranked:
        r = by_id.get(item.message_id)
        if r is None:
            continue
        hits.append(RawHit(
            message_id=item.message_id, thread_id=item.thread_id, identity_id=r["identity_id"],
            subject=r["subject"], date=r["date"], score=item.score,
            from_=Address(address=r["from_address"], name=r["from_name"]) if r["from_address"] else None,
            snippet=_snippet(r), thread_hits=item.thread_hits,
            semantic_score=item.semantic_score,
            matched=[rendered[n] for n in range(len(clauses)) if r[f"c{n}"]],
            in_attachments=list(r["in_attachments"])))
    return hits


def _snippet(row: asyncpg.Record) -> str:
    # ts_headline gives the start of the text when the words matched only the subject or the
    # sender, and never says where it cut: such a hit gets the stored snippet, and a fragment
    # that does not reach the start or the end of the text gets an ellipsis there.
    headline = " ".join((row["headline"] or "").split())
    if "«" not in headline:
        return " ".join(row["snippet"].split())
    plain = headline.replace("«", "").replace("»", "")
    head, tail = " ".join(row["head"].split()), " ".join(row["tail"].split())
    first, last = plain.split(" … ")[0][:40], plain.split(" … ")[-1][-40:]
    return (("" if head.startswith(first) else "… ") + headline
            + ("" if tail.endswith(last) else " …"))


def _positive_texts(node: Node | None) -> list[str]:
    match node:
        case Term(text) | Phrase(text):
            return [text]
        case Or(nodes) | And(nodes):
            return [t for n in nodes for t in _positive_texts(n)]
    return []


def _clauses(root: Node | None) -> list[Node]:
    # The top-level terms, and each alternative of a top-level OR, so "why" says which matched.
    if root is None:
        return []
    tops = list(root.nodes) if isinstance(root, And) else [root]
    out: list[Node] = []
    for node in tops:
        out.extend(node.nodes if isinstance(node, Or) else [node])
    return out


async def facets(conn: asyncpg.Connection, where: str, params: list[Any], time_zone: str, *,
                 also: list[str] | None = None, loose: str | None = None) -> Facets:
    """Facet counts over the newest :data:`FACET_CANDIDATES` messages satisfying ``where`` (over
    ``messages m``, parameters from ``$1``) and the messages ``also`` (already in scope: the
    semantic candidates), top 10 values each. ``loose``: the loose form of ``where``
    (:func:`narrowed`)."""
    params = [*params, time_zone]
    tz = f"${len(params)}"
    source = narrowed(where, loose, params)
    params.extend([FACET_CANDIDATES, also or []])
    async with _planned(conn):
        rows = await _facet_rows(conn, source, params, tz)
    out = Facets()
    for r in sorted(rows, key=lambda r: (-r["n"], r["value"] or "")):
        bucket = getattr(out, r["facet"])
        if len(bucket) < 10 and r["value"]:
            bucket.append(FacetCount(r["value"], r["n"]))
    return out


async def _facet_rows(conn: asyncpg.Connection, source: str, params: list[Any], tz: str
                      ) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"""WITH found AS ((SELECT m.id, m.from_address, m.labels,
                                   coalesce(m.sent_at, m.received_at) AS date
                            FROM {source}
                            ORDER BY coalesce(m.sent_at, m.received_at) DESC, m.id DESC
                            LIMIT ${len(params) - 1})
                           UNION
                           SELECT m.id, m.from_address, m.labels, coalesce(m.sent_at, m.received_at)
                           FROM messages m WHERE m.id = any(${len(params)}::text[])),
                 -- a probe per hit: joined, the planner walks the whole table's key in a merge join
                 hit AS MATERIALIZED (SELECT found.*, (SELECT t.category FROM message_triage t
                                      WHERE t.message_id = found.id) AS category FROM found)
            SELECT 'sender_domain' AS facet, split_part(from_address, '@', 2) AS value,
                   count(*) AS n FROM hit WHERE from_address IS NOT NULL GROUP BY 2
            UNION ALL
            SELECT 'month', to_char(date AT TIME ZONE {tz}, 'YYYY-MM'), count(*) FROM hit GROUP BY 2
            UNION ALL
            SELECT 'label', l, count(*) FROM hit, unnest(labels) l GROUP BY 2
            UNION ALL
            SELECT 'category', category, count(*) FROM hit WHERE category IS NOT NULL GROUP BY 2
            UNION ALL
            SELECT 'attachment_type', a.attachment_type, count(DISTINCT a.message_id)
            FROM hit JOIN attachments a ON a.message_id = hit.id GROUP BY 2""",
        *params,
    )
