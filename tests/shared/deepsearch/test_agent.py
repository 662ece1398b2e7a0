"""The deep-search loop on real PostgreSQL with the hash embedder (``shared.deepsearch.agent``):
each status, budgets of steps and seconds, checkpoint cancellation, and mail that tries to give
instructions."""

from __future__ import annotations

import asyncio
import re

import asyncpg
import msgspec
import pytest

from shared.deepsearch import BuiltinBackend, DeepSearchRequest, DeepSearchResult, deep_search
from shared.embeddings.embedder import HashEmbedder
from shared.embeddings.store import embed_pending
from shared.extract.store import extract_pending
from shared.search.semantic import SemanticEngine
from tests.shared.deepsearch.conftest import HIJACK
from tests.shared.extract import documents
from tests.shared.search.conftest import Mailbox

BUDGET_QUESTION = "What is the budget for the Q3 offsite?"


class Steps:
    """Records progress calls; optionally advances a fake clock by ``tick`` seconds per step."""

    def __init__(self, tick: float = 0.0) -> None:
        self.calls: list[tuple[int, int, str]] = []
        self.now = 0.0
        self.tick = tick

    async def progress(self, step: int, total: int, message: str) -> None:
        self.calls.append((step, total, message))
        self.now += self.tick

    def clock(self) -> float:
        return self.now


async def no_stop() -> None:
    return None


async def ask(pool: Database, engine: SemanticEngine, box: Mailbox, question: str, *,
              steps: Steps | None = None, **budget: int) -> tuple[DeepSearchResult, Steps]:
    steps = steps or Steps()
    request = DeepSearchRequest(question=question, identity_ids=[box.identity_id],
                                time_zone="Europe/London", **budget)
    kwargs = {"clock": steps.clock} if steps.tick else {}
    result = await deep_search(pool, engine, request, backend=BuiltinBackend(),
                               progress=steps.progress, checkpoint=no_stop, **kwargs)
    return result, steps


async def test_answered_cites_the_message_that_states_it(box: Mailbox, pool: Database,
                                                         engine: SemanticEngine) -> None:
    result, steps = await ask(pool, engine, box, BUDGET_QUESTION)
    assert result.status == "answered"
    assert "12,000 EUR" in result.answer
    assert [box.mids([e.message_id]) for e in result.evidence] == [{"offsite-1"}]
    assert result.evidence[0].message_id in result.answer
    assert result.evidence[0].thread_id.startswith("thr_")
    assert result.degraded is False
    # one progress call per step, each numbered and out of max_steps
    assert [c[0] for c in steps.calls] == [t.step for t in result.trace] == list(
        range(1, len(result.trace) + 1))
    assert {c[1] for c in steps.calls} == {6}
    # which mode each search ran in: a hybrid and a semantic search of one query read alike
    assert re.fullmatch(r"search \((hybrid|keyword|semantic)\): .+ \(\d+ hits?\)",
                        steps.calls[0][2])
    assert steps.calls[-1][2] == "answer: 1 cited sentence"
    assert [t.action for t in result.trace][-2:] == ["read", "answer"]
    assert result.usage.steps == len(result.trace) <= 6
    assert result.usage.searches == sum(t.action == "search" for t in result.trace)
    assert result.usage.messages_read >= 1 and result.usage.model_tokens is None


async def test_the_text_of_an_attachment_is_evidence(box: Mailbox, pool: Database,
                                                     engine: SemanticEngine) -> None:
    """The total was in the PDF, and deep search answered insufficient_evidence where
    mail_search found it (found by a new user)."""
    await box.add("hire", sender="Fleet Desk <fleet@vanhire.example>",
                  subject="Your van hire invoice", body="Please find the invoice attached.",
                  date="Fri, 11 Sep 2026 10:00:00 +0000",
                  attachment=("invoice.pdf", "application/pdf", documents.pdf(
                      ["Van hire invoice VH-881", "The total due for the van hire is 1,240.00 EUR."])))
    async with asyncio.timeout(120):
        await extract_pending(pool)
    await embed_pending(pool, HashEmbedder())
    result, _ = await ask(pool, engine, box, "How much is the total due for the van hire?")
    assert result.status == "answered", result.trace
    assert "1,240.00 EUR" in result.answer
    assert [box.mids([e.message_id]) for e in result.evidence] == [{"hire"}]


async def test_mail_that_gives_instructions_is_not_evidence(box: Mailbox, pool: Database,
                                                            engine: SemanticEngine) -> None:
    result, _ = await ask(pool, engine, box, BUDGET_QUESTION)
    assert HIJACK not in result.answer
    assert box.ids["inject"] not in {e.message_id for e in result.evidence}
    assert box.ids["inject"] not in result.answer
    assert "1 messages not read as evidence: they give instructions" in result.trace[-1].detail


async def test_unanswerable_question_is_insufficient_and_the_trace_shows_the_searches(
        box: Mailbox, pool: Database, engine: SemanticEngine) -> None:
    result, _ = await ask(pool, engine, box, "Which airline did Ann book for the offsite flights?")
    assert result.status == "insufficient_evidence"
    assert result.answer == "" and result.evidence == []
    searches = [t for t in result.trace if t.action == "search"]
    assert len(searches) >= 2 and all(t.detail for t in searches)


async def test_a_small_step_budget_runs_one_search_and_reports_exhaustion(
        box: Mailbox, pool: Database, engine: SemanticEngine) -> None:
    result, steps = await ask(pool, engine, box,
                              "Which airline did Ann book for the offsite flights?", max_steps=2)
    assert result.status == "budget_exhausted"
    assert len(steps.calls) == len(result.trace) == 2
    assert [t.action for t in result.trace] == ["search", "answer"]
    assert {c[1] for c in steps.calls} == {2}


async def test_the_time_budget_stops_searching(box: Mailbox, pool: Database,
                                               engine: SemanticEngine) -> None:
    # every step takes 5 s on this clock: after the first search the 3 s budget is spent
    result, steps = await ask(pool, engine, box, BUDGET_QUESTION, steps=Steps(tick=5.0),
                              max_seconds=3)
    assert result.status == "budget_exhausted"
    assert [t.action for t in result.trace] == ["search"]
    assert result.usage.seconds == pytest.approx(5.0)


async def test_the_time_budget_stops_the_answer_step(box: Mailbox, pool: Database,
                                                    engine: SemanticEngine) -> None:
    """Reading long threads can outlast the budget; past max_seconds the answer step ends the
    call budget_exhausted (it ran to the job's deadline, which answered `unavailable`: found
    by a second attack). Time passes here only at the answer step's own checkpoints."""
    now = 0.0
    after_read = 0

    async def progress(step: int, total: int, message: str) -> None:
        nonlocal after_read
        if message.startswith("read:"):
            after_read = 1

    async def checkpoint() -> None:
        nonlocal now, after_read
        if after_read:
            after_read += 1
            if after_read > 2:  # past the check right after reading: inside the answer step
                now += 5.0

    request = DeepSearchRequest(question=BUDGET_QUESTION, identity_ids=[box.identity_id],
                                time_zone="Europe/London", max_seconds=3)
    result = await deep_search(pool, engine, request, backend=BuiltinBackend(),
                               progress=progress, checkpoint=checkpoint, clock=lambda: now)
    assert result.status == "budget_exhausted" and result.answer == ""
    assert [t.action for t in result.trace][-1] == "read"
    assert result.usage.messages_read >= 1 and result.usage.seconds >= 3


class Stop(Exception):
    pass


async def test_checkpoint_cancels_between_steps(box: Mailbox, pool: Database,
                                                engine: SemanticEngine) -> None:
    steps = Steps()
    calls = 0

    async def checkpoint() -> None:
        nonlocal calls
        calls += 1
        if len(steps.calls) == 2:
            raise Stop

    request = DeepSearchRequest(question=BUDGET_QUESTION, identity_ids=[box.identity_id])
    with pytest.raises(Stop):
        await deep_search(pool, engine, request, backend=BuiltinBackend(),
                          progress=steps.progress, checkpoint=checkpoint)
    assert len(steps.calls) == 2  # nothing ran after the checkpoint that stopped it


async def test_checkpoint_cancels_inside_the_answer_step(box: Mailbox, pool: Database,
                                                         engine: SemanticEngine) -> None:
    steps = Steps()

    async def checkpoint() -> None:
        # the answer step checks between model batches, after the read step reported
        if steps.calls and steps.calls[-1][2].startswith("read:"):
            raise Stop

    request = DeepSearchRequest(question=BUDGET_QUESTION, identity_ids=[box.identity_id])
    with pytest.raises(Stop):
        await deep_search(pool, engine, request, backend=BuiltinBackend(),
                          progress=steps.progress, checkpoint=checkpoint)
    assert not any(c[2].startswith("answer:") for c in steps.calls)


async def test_without_semantic_search_the_answer_is_degraded_plain_hits(
        box: Mailbox, pool: Database) -> None:
    result, _ = await ask(pool, SemanticEngine("off", 1), box, BUDGET_QUESTION)
    assert result.status == "degraded" and result.degraded is True
    assert result.evidence and all(e.message_id in result.answer for e in result.evidence)


def test_the_result_schema_describes_every_field() -> None:
    schema = msgspec.json.schema(DeepSearchResult)
    defs = schema["$defs"]
    for name in ("DeepSearchResult", "Evidence", "TraceStep", "Usage"):
        for field, spec in defs[name]["properties"].items():
            assert "description" in spec or "$ref" in spec, (name, field)
    assert defs["DeepSearchResult"]["properties"]["evidence"]["maxItems"] == 20
    assert defs["DeepSearchResult"]["properties"]["answer"]["maxLength"] == 4000
