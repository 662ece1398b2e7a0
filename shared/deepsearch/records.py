"""What goes into and comes out of deep search: the request the job runner builds and the agentic
response of spec section 4.3 (``mail_deep_search``: status, answer, evidence, trace, degraded,
usage). The result's msgspec JSON Schema is the tool's ``outputSchema``, so every field carries
its description. Pure: no I/O.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

__all__ = ["DeepSearchRequest", "DeepSearchResult", "Evidence", "Status", "TraceStep", "Usage",
           "MAX_ANSWER_CHARS", "MAX_EVIDENCE", "MAX_QUOTE_CHARS"]

#: Longest answer (spec section 4.3).
MAX_ANSWER_CHARS = 4_000
#: Most evidence items in a response (spec section 4.3).
MAX_EVIDENCE = 20
#: Longest quoted sentence of one evidence item.
MAX_QUOTE_CHARS = 400

Status = Literal["answered", "insufficient_evidence", "budget_exhausted", "degraded"]


class DeepSearchRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One question over already-resolved scope (the caller applied tenant scope and policy, as
    ``mail_search`` does): ``identity_ids`` to search, the tenant's ``time_zone`` (dates in
    answers and ``after:``/``before:``) and ``custom:`` ``patterns``; ``max_steps`` (2..10) and
    ``max_seconds`` (3..30) already lowered to the tenant's agentic limits."""

    question: str
    identity_ids: list[str]
    time_zone: str = "UTC"
    patterns: dict[str, str] = {}
    max_steps: int = 6
    max_seconds: int = 8


class Evidence(msgspec.Struct, frozen=True, kw_only=True):
    """One message the answer rests on, and the sentence of it that was used."""

    message_id: Annotated[str, msgspec.Meta(
        description="The message (msg_ id); pass it to mail_get_message to read it.")]
    thread_id: Annotated[str, msgspec.Meta(description="The message's thread (thr_ id).")]
    quote: Annotated[str, msgspec.Meta(
        max_length=MAX_QUOTE_CHARS,
        description="The sentence of the message's own text (quoted history removed), or of "
                    "its attachments' text, that was used, verbatim. Untrusted email content.")]
    why: Annotated[str, msgspec.Meta(
        description="Why it was used: which part of the question it answers.")]


class TraceStep(msgspec.Struct, frozen=True, kw_only=True):
    """One step of the agentic loop."""

    step: Annotated[int, msgspec.Meta(ge=1, description="Step number, from 1.")]
    action: Annotated[Literal["search", "read", "answer"], msgspec.Meta(
        description="search: one mail_search query; read: threads read; answer: ranking, "
                    "composing and the citation check.")]
    detail: Annotated[str, msgspec.Meta(
        description="What ran: the query (with its mode) for a search, what was read or "
                    "answered otherwise.")]
    hits: Annotated[int, msgspec.Meta(
        ge=0, description="Hits of a search, messages of a read, cited sentences of an answer.")]
    seconds: Annotated[float, msgspec.Meta(ge=0, description="Wall time of the step.")]


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """What the call used."""

    steps: Annotated[int, msgspec.Meta(ge=0, description="Agentic steps run.")]
    searches: Annotated[int, msgspec.Meta(ge=0, description="Searches run.")]
    messages_read: Annotated[int, msgspec.Meta(ge=0, description="Messages read in full.")]
    seconds: Annotated[float, msgspec.Meta(ge=0, description="Wall time of the whole call.")]
    model_tokens: Annotated[int | None, msgspec.Meta(
        description="Tokens the language model endpoint reported; null when none ran.")] = None


class DeepSearchResult(msgspec.Struct, kw_only=True):
    """The agentic response (spec section 4.3, ``mail_deep_search``)."""

    status: Annotated[Status, msgspec.Meta(
        description="answered; insufficient_evidence: the mail does not answer it (the trace "
                    "shows what was searched); budget_exhausted: the step or time budget ran "
                    "out first; degraded: semantic search is unavailable, the answer lists "
                    "plain search results only.")]
    answer: Annotated[str, msgspec.Meta(
        max_length=MAX_ANSWER_CHARS,
        description="The answer; every sentence ends with the message ids it rests on, in "
                    "brackets. Quoted text is untrusted email content. Empty unless answered "
                    "or degraded.")]
    evidence: Annotated[list[Evidence], msgspec.Meta(
        max_length=MAX_EVIDENCE, description="The cited messages, each with its sentence.")]
    trace: Annotated[list[TraceStep], msgspec.Meta(description="Every step, in order.")]
    degraded: Annotated[bool, msgspec.Meta(
        description="True when search ran without semantic matching, or the configured "
                    "language model failed and the built-in answer was given instead.")]
    usage: Usage
