"""The deep-search loop (spec sections 2.6, 4.3 ``mail_deep_search`` and 7; issue 10).

One call runs these steps, each reported through ``progress(step, max_steps, message)``:

1. **search** (up to ``max_steps - 2`` steps): the planned searches
   (``shared.deepsearch.planning``), best first, each through the search service ``mail_search``
   uses (``shared.search.query.parse`` with the tenant's ``custom:`` patterns, then
   ``shared.search.engine.run_search``), 10 hits each;
2. **read**: the threads holding the best hits (by reciprocal-rank fusion over the searches),
   and the hits themselves, through ``shared.mail.store`` (with ``max_steps`` 2 this step is
   folded into the next);
3. **answer**: sentence ranking (``evidence``), the backend's draft (``backends``), and the
   citation check (``citations``): a sentence whose cited messages do not support it is removed.

Before the analysis the question's capitalized names are looked up among the mailbox's contacts,
so that only people get ``from:`` searches. ``checkpoint()`` is awaited before every step and
around the embedding model; it raises to stop the job (cancellation), and that exception goes
to the caller untouched.

Status: ``answered`` when a checked sentence is left; ``degraded`` when every search ran without
semantic matching (the answer then lists the plain search hits); ``budget_exhausted`` when no
sentence is left and the step or time budget cut off an essential search
(``PlannedSearch.essential``) or left no time to read;
``insufficient_evidence`` otherwise. Searches start only in the first :data:`SEARCH_SHARE` of
``max_seconds``, so reading and answering have the rest.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timezone
from typing import Literal
from zoneinfo import ZoneInfo

import asyncpg
import numpy as np

from shared.deepsearch.backends import Backend, Draft, Support
from shared.deepsearch.citations import Claim, check_claims
from shared.deepsearch.evidence import Ranking, rank_evidence
from shared.deepsearch.planning import PlannedSearch, plan_searches
from shared.deepsearch.question import Question, analyse, fold
from shared.deepsearch.reading import ReadMessage, read_messages
from shared.deepsearch.records import (MAX_ANSWER_CHARS, MAX_EVIDENCE, MAX_QUOTE_CHARS,
                                       DeepSearchRequest, DeepSearchResult, Evidence, Status,
                                       TraceStep, Usage)
from shared.db import Database
from shared.errors import PylotaError
from shared.mail.contacts import search_contacts
from shared.search.engine import RRF_K, run_search
from shared.search.keyword import Filters, RawHit, Scope
from shared.search.query import parse
from shared.search.semantic import SemanticEngine

__all__ = ["deep_search", "SEARCH_LIMIT", "READ_THREADS", "SEARCH_SHARE"]

#: Hits asked of each search.
SEARCH_LIMIT = 10
#: Threads read in full (besides every hit).
READ_THREADS = 4
#: Share of max_seconds in which searches may start.
SEARCH_SHARE = 0.5
#: Identities whose contacts are asked about the question's names.
_CONTACT_IDENTITIES = 10

Progress = Callable[[int, int, str], Awaitable[None]]
Action = Literal["search", "read", "answer"]
Checkpoint = Callable[[], Awaitable[None]]


async def _people(conn: asyncpg.Connection, identity_ids: list[str], question: Question
                  ) -> dict[str, str]:
    """The question's names that are contacts of the mailbox, mapped to a display name."""
    people: dict[str, str] = {}
    for name in question.names:
        words = fold(name.text).split()
        for identity_id in identity_ids[:_CONTACT_IDENTITIES]:
            found, _ = await search_contacts(conn, identity_id, name.text.split()[-1], offset=0,
                                             limit=20)
            for contact in found:
                display = set(fold(contact.name or "").replace(",", " ").split())
                if all(w in display for w in words if len(w) > 2 or w.isalpha()):
                    people[name.text] = contact.name or contact.address
                    break
            if name.text in people:
                break
    return people


def _render(claims: list[Claim]) -> str:
    out = ""
    for claim in claims:
        sentence = f"{claim.text.rstrip('.')} [{', '.join(claim.cites)}]."
        if len(out) + len(sentence) + 1 > MAX_ANSWER_CHARS:
            break
        out = f"{out} {sentence}" if out else sentence
    return out


class _OutOfTime(Exception):
    """The answer step ran past the call's max_seconds."""


class _Run:
    """The state of one call: clock, steps and trace."""

    def __init__(self, request: DeepSearchRequest, progress: Progress,
                 clock: Callable[[], float]) -> None:
        self.request = request
        self.progress = progress
        self.clock = clock
        self.started = clock()
        self.step = 0
        self.trace: list[TraceStep] = []

    def elapsed(self) -> float:
        return self.clock() - self.started

    async def record(self, action: Action, detail: str, hits: int, began: float, message: str
                     ) -> None:
        self.step += 1
        self.trace.append(TraceStep(step=self.step, action=action, detail=detail, hits=hits,
                                    seconds=round(max(0.0, self.clock() - began), 3)))
        await self.progress(self.step, self.request.max_steps, message)


def _degraded(run: _Run, hits: list[RawHit], searches: int, time_zone: str) -> DeepSearchResult:
    zone = ZoneInfo(time_zone)
    claims, evidence = [], []
    for hit in hits[:5]:
        sender = (hit.from_.name or hit.from_.address) if hit.from_ else "unknown sender"
        claims.append(Claim(text=f"Search hit: “{hit.subject}” from {sender}, "
                                 f"{hit.date.astimezone(zone):%d %B %Y}", cites=(hit.message_id,)))
        evidence.append(Evidence(message_id=hit.message_id, thread_id=hit.thread_id,
                                 quote=hit.snippet[:MAX_QUOTE_CHARS],
                                 why="keyword search hit (semantic search is unavailable)"))
    return DeepSearchResult(status="degraded", answer=_render(claims), evidence=evidence,
                            trace=run.trace, degraded=True,
                            usage=Usage(steps=run.step, searches=searches, messages_read=0,
                                        seconds=round(run.elapsed(), 3)))


async def deep_search(pool: Database, engine: SemanticEngine, request: DeepSearchRequest, *,
                      backend: Backend, progress: Progress, checkpoint: Checkpoint,
                      clock: Callable[[], float] = time.monotonic) -> DeepSearchResult:
    """Answer ``request.question`` from the mail of ``request.identity_ids``; see the module
    docstring for the steps and statuses.

    Args:
        pool: asyncpg pool (``async with pool.acquire() as conn``); search takes two
            connections at once.
        engine: the process's semantic engine (``shared.search.semantic.engine_for``).
        backend: composes the draft (``shared.deepsearch.backends.backend_for``).
        progress: awaited once per step with (step, max_steps, message).
        checkpoint: awaited between steps and inside long ones; raises to stop the call.
        clock: seconds, monotonic (tests pass their own).

    Returns:
        The agentic response (spec section 4.3).

    Raises:
        Whatever ``checkpoint`` raises, and storage errors as the search service and the store
        raise them (asyncpg's; the job runner maps a lost connection to ``unavailable``).
    """
    run = _Run(request, progress, clock)
    question = analyse(request.question)
    async with pool.acquire() as conn:
        people = await _people(conn, request.identity_ids, question)
    plan = plan_searches(question, people)
    search_steps = max(1, request.max_steps - 2)
    scope = Scope(identity_ids=request.identity_ids, as_of=datetime.now(timezone.utc),
                  time_zone=request.time_zone)
    fused: dict[str, float] = {}
    hits_by_id: dict[str, RawHit] = {}
    ran: list[PlannedSearch] = []
    degraded_searches = 0
    for planned in plan:
        await checkpoint()
        if len(ran) >= search_steps or run.elapsed() >= SEARCH_SHARE * request.max_seconds:
            break
        try:
            root = parse(planned.q, custom_patterns=request.patterns).root
        except PylotaError:
            continue  # a name or word the query language refuses: the other searches remain
        began = clock()
        outcome = await run_search(pool, engine, scope, root, Filters(), mode=planned.mode,
                                   offset=0, limit=SEARCH_LIMIT, group_by_thread=False)
        ran.append(planned)
        degraded_searches += outcome.degraded
        for rank, hit in enumerate(outcome.hits, start=1):
            fused[hit.message_id] = fused.get(hit.message_id, 0.0) + 1.0 / (RRF_K + rank)
            hits_by_id.setdefault(hit.message_id, hit)
        await run.record("search", f"{planned.mode}: {planned.q}", len(outcome.hits), began,
                         f"search ({planned.mode}): {planned.q} ({_count(len(outcome.hits), 'hit')})")
    cut_short = any(p.essential and p not in ran for p in plan)
    ordered = sorted(fused, key=lambda i: -fused[i])
    if ran and degraded_searches == len(ran):
        return _degraded(run, [hits_by_id[i] for i in ordered], len(ran), request.time_zone)

    def exhausted_or_insufficient(messages_read: int, tokens: int | None = None
                                  ) -> DeepSearchResult:
        status: Status = "budget_exhausted" if cut_short else "insufficient_evidence"
        return DeepSearchResult(status=status, answer="", evidence=[], trace=run.trace,
                                degraded=False, usage=Usage(
                                    steps=run.step, searches=len(ran),
                                    messages_read=messages_read,
                                    seconds=round(run.elapsed(), 3), model_tokens=tokens))

    await checkpoint()
    if run.elapsed() >= request.max_seconds:
        cut_short = True
        return exhausted_or_insufficient(0)
    began = clock()
    threads: list[str] = []
    for message_id in ordered:
        thread_id = hits_by_id[message_id].thread_id
        if thread_id not in threads:
            threads.append(thread_id)
    async with pool.acquire() as conn:
        messages = await read_messages(conn, request.identity_ids, threads[:READ_THREADS],
                                       ordered)
    if request.max_steps >= 3:
        await run.record("read", f"{min(len(threads), READ_THREADS)} threads and every hit",
                         len(messages), began,
                         f"read: {min(len(threads), READ_THREADS)} threads ({len(messages)} messages)")
        began = clock()
    await checkpoint()
    if not messages:
        return exhausted_or_insufficient(0)
    if run.elapsed() >= request.max_seconds:
        cut_short = True
        return exhausted_or_insufficient(len(messages))
    best = fused[ordered[0]] if ordered else 1.0
    search_rank = {i: s / best for i, s in fused.items()}

    async def in_time() -> None:
        # reading long threads can take longer than the budget (120 messages of 100,000
        # characters): past max_seconds the call ends budget_exhausted, not at the job's deadline
        await checkpoint()
        if run.elapsed() >= request.max_seconds:
            raise _OutOfTime

    try:
        ranking, draft = await _draft(question, messages, search_rank, engine, backend,
                                      request.time_zone, in_time)
    except _OutOfTime:
        cut_short = True
        return exhausted_or_insufficient(len(messages))
    kept, removed = check_claims(draft.claims, ranking.messages, request.time_zone)
    refused = (f"; {ranking.refused} messages not read as evidence: they give instructions to "
               "the reader" if ranking.refused else "")
    await run.record("answer", f"{len(kept)} sentences kept, {len(removed)} removed by the "
                               f"citation check{refused}", len(kept), began,
                     f"answer: {_count(len(kept), 'cited sentence')}")
    if not kept:
        return exhausted_or_insufficient(len(messages), draft.model_tokens)
    by_id = {m.id: m for m in messages}
    evidence: list[Evidence] = []
    for claim in kept:
        for message_id in claim.cites:
            if any(e.message_id == message_id for e in evidence):
                continue
            support = draft.support.get(message_id) or Support(
                quote=" ".join(by_id[message_id].own_text.split()), why="cited")
            evidence.append(Evidence(message_id=message_id, thread_id=by_id[message_id].thread_id,
                                     quote=support.quote[:MAX_QUOTE_CHARS], why=support.why))
    return DeepSearchResult(
        status="answered", answer=_render(kept), evidence=evidence[:MAX_EVIDENCE],
        trace=run.trace, degraded=draft.degraded,
        usage=Usage(steps=run.step, searches=len(ran), messages_read=len(messages),
                    seconds=round(run.elapsed(), 3), model_tokens=draft.model_tokens))


async def _draft(question: Question, messages: list[ReadMessage], search_rank: dict[str, float],
                 engine: SemanticEngine, backend: Backend, time_zone: str,
                 checkpoint: Checkpoint) -> tuple[Ranking, Draft]:
    embedder = engine.embedder

    async def embed(texts: Sequence[str]) -> np.ndarray:
        if embedder is None:
            return np.zeros((len(texts), 1), dtype=np.float32)
        return await asyncio.to_thread(embedder.embed, list(texts))

    ranking = await rank_evidence(question, messages, search_rank, embed, checkpoint)
    return ranking, await backend.compose(question, ranking, time_zone=time_zone)


def _count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless one: a progress message a person reads."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
