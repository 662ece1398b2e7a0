"""Composing, built in: an extractive answer from the ranked sentences (no model service).

For each part of the question the best sentence is chosen, if its score clears the threshold
(:data:`ANSWER_THRESHOLD` for the first part, :data:`FOLLOW_THRESHOLD` for later ones; both
calibrated on the QA kit's dev set only, see ``bench/deep_search.py``). A later part asks what
followed the first: it takes no message older than the first part's, and prefers a reply to an
earlier part's message (:data:`RELATION_BONUS`), since "…, and did Suresh agree?" is answered by
the reply; a later "who …" part ("and who convinced him?") prefers the message an earlier one
replied to instead, and may be older. A part that asks for the outcome ("did Howells end up
agreeing") favours the latest of its best candidates (:data:`FINAL_BONUS`), and a "when" part the
earliest (a series is sent when its first message is). A part about a person ("did Kumar Gala
apply …") takes only a sentence that person wrote, or one that names them. When the first part
has no sentence, there is no answer: the question is ``insufficient_evidence``. A sentence by
someone the part excludes ("apart from Alex, who …") is never chosen for it, nor, for "which X"
(``Part.head``), a sentence that does not mention X, nor, for "how many" or "how much", one
without an amount (``evidence.holds_amount``: money for a price).

Each chosen sentence becomes one answer sentence that says who wrote it and when, quotes it, and
cites its message: ``Jeff Layton wrote on 22 June 2010: “Strong ACK”`` ``[msg_…]``; for a "which
X" part whose X only the message's subject names, the subject too ("… wrote on 23 September 2026
under the subject Claim CLM-5531: damage to vehicle AB12 CDE: “Please send photos …”"). A very short
sentence ("Good point.") is quoted with the one after it, and a very short one before the chosen
sentence ("Apologies.") is quoted with it.

Pure: no I/O. Called by ``shared.deepsearch.backends``.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

import msgspec

from shared.deepsearch.citations import Claim
from shared.deepsearch.evidence import (Candidate, Ranking, author_matches, date_precision,
                                        holds_amount, wants_stated_date)
from shared.deepsearch.question import Part, Question, content_words, fold
from shared.deepsearch.reading import ReadMessage, sentences_of
from shared.deepsearch.records import MAX_QUOTE_CHARS

__all__ = ["Choice", "choose", "claim_for", "ANSWER_THRESHOLD", "FOLLOW_THRESHOLD",
           "RELATION_BONUS", "SHORT_QUOTE"]

#: Least score of the first part's sentence for an answer (dev-set calibration).
ANSWER_THRESHOLD = 0.45
#: Least score (with the relation bonus) of a later part's sentence.
FOLLOW_THRESHOLD = 0.50
#: Added for a later part to the message replying to, or replied to by, an earlier part's.
RELATION_BONUS = 0.20
#: Most added, for a part asking for the outcome (``Part.final``), to the latest of its best
#: candidates' messages (by date rank among them).
FINAL_BONUS = 0.10
#: Quotes shorter than this many characters are extended by the next sentence.
SHORT_QUOTE = 40
#: Candidates of each part looked at.
_DEPTH = 40
#: Best candidates among which the latest is favoured for an outcome part.
_FINAL_DEPTH = 10


class Choice(msgspec.Struct, frozen=True, kw_only=True):
    """The sentence chosen for one part: the part, the candidate, its adjusted score, and the
    quote (the sentence, possibly with the next one)."""

    part: Part
    candidate: Candidate
    score: float
    quote: str


def _same_msg_id(reference: str, msg_id: str) -> bool:
    """Whether ``reference`` names ``msg_id``; list archives such as Gmane rewrite the ids in
    In-Reply-To to ``<local>-<long token>@<archive host>``, so that form counts too."""
    if reference == msg_id:
        return True
    local, _, _ = msg_id.partition("@")
    ref_local, _, _ = reference.partition("@")
    return ref_local.startswith(local + "-") and len(ref_local) - len(local) > 16


def _replies_to(message: ReadMessage, other: ReadMessage) -> bool:
    target = other.rfc_message_id
    return bool(target) and any(_same_msg_id(r, target) for r in message.in_reply_to)


def _related(part: Part, message: ReadMessage, earlier: list[Choice]) -> bool:
    """Whether ``message`` answers a later ``part`` the way follow-ups are answered: "who
    convinced him" by the message an earlier one replied to, anything else ("did Suresh
    agree") by a reply to it."""
    for choice in earlier:
        other = choice.candidate.message
        if other.id != message.id and (_replies_to(other, message) if part.kind == "who"
                                       else _replies_to(message, other)):
            return True
    return False


def _in_order(part: Part, message: ReadMessage, earlier: list[Choice]) -> bool:
    """A later part that is not "who …" asks what followed: its message is not older than the
    first part's."""
    return part.kind == "who" or not earlier or message.date >= earlier[0].candidate.message.date


def _about(part: Part, candidate: Candidate, question: str) -> bool:
    if any(author_matches(x, candidate.message) for x in part.excluded):
        return False
    if not holds_amount(part, candidate.sentence.text, question):
        return False
    if part.head and not set(part.head) & set(content_words(
            f"{candidate.sentence.text} {candidate.message.subject}")):
        return False
    if not part.actors:
        return True
    text = fold(candidate.sentence.text)
    return any(author_matches(a, candidate.message) or fold(a) in text for a in part.actors)


def _quote(candidate: Candidate) -> str:
    text = candidate.sentence.text
    around = {s.index: s.text for s in sentences_of(candidate.message)}
    before = around.get(candidate.sentence.index - 1)
    if before is not None and len(before) < SHORT_QUOTE and not before.rstrip().endswith(","):
        text = f"{before} {text}"  # "Apologies. In my haste …"; not a greeting ("Hi Jo,")
    if len(candidate.sentence.text) < SHORT_QUOTE and candidate.sentence.index + 1 in around:
        text = f"{text} {around[candidate.sentence.index + 1]}"
    if len(text) > MAX_QUOTE_CHARS:
        text = text[: MAX_QUOTE_CHARS - 1].rsplit(" ", 1)[0] + "…"
    return text


def choose(question: Question, ranking: Ranking, *, answer_threshold: float = ANSWER_THRESHOLD,
           follow_threshold: float = FOLLOW_THRESHOLD) -> list[Choice]:
    """The sentence for each part that has one; empty when the first part has none."""
    chosen: list[Choice] = []
    used: set[tuple[str, int]] = set()
    for j, part in enumerate(question.parts):
        best: Choice | None = None
        pool = ranking.by_part[j][:_DEPTH]
        dates = sorted({c.message.date for c in pool[:_FINAL_DEPTH]})
        # "When is the invoice due?": once a candidate states a date, only those answer, and
        # of those the most precise: an invoice's "September 2026" is not when it is due
        # (found by a new user) when another sentence names the day
        precision = max((date_precision(c.sentence.text) for c in pool), default=0) \
            if wants_stated_date(part) else 0
        for candidate in pool:
            key = (candidate.message.id, candidate.sentence.index)
            if key in used or not _about(part, candidate, question.text) or not _in_order(
                    part, candidate.message, chosen) or (
                    date_precision(candidate.sentence.text) < precision):
                continue
            score = candidate.scores[j] + (RELATION_BONUS if _related(part, candidate.message,
                                                                      chosen) else 0.0)
            if len(dates) > 1 and candidate.message.date in dates:
                rank = dates.index(candidate.message.date) / (len(dates) - 1)
                if part.final:
                    score += FINAL_BONUS * rank
                elif part.kind == "when":  # when something was done: when it was first done
                    score += FINAL_BONUS * (1 - rank)
            if best is None or score > best.score:
                best = Choice(part=part, candidate=candidate, score=round(score, 4), quote="")
        threshold = answer_threshold if j == 0 else follow_threshold
        if best is None or best.score < threshold:
            if j == 0:
                return []
            continue
        best = msgspec.structs.replace(best, quote=_quote(best.candidate))
        used.add((best.candidate.message.id, best.candidate.sentence.index))
        chosen.append(best)
    return chosen


def _sender(message: ReadMessage) -> str:
    name = (message.from_name or "").strip()
    if "," in name:  # "Bounine, Alexandre"
        last, _, first = name.partition(",")
        name = f"{first.strip()} {last.strip()}".strip()
    return name or message.from_address or "The sender"


def claim_for(choice: Choice, time_zone: str) -> Claim:
    """The answer sentence for ``choice``: who wrote it, when, and the quote."""
    message = choice.candidate.message
    when = message.date.astimezone(ZoneInfo(time_zone))
    quote = choice.quote.replace("“", "\"").replace("”", "\"")
    head = set(choice.part.head)
    # "Which vehicle …": when only the subject names the vehicle, the answer must show it.
    under = f" under the subject {message.subject.strip()}" if head and not head & set(
        content_words(choice.quote)) and head & set(content_words(message.subject)) else ""
    return Claim(text=f"{_sender(message)} wrote on {when.day} {when:%B %Y}{under}: “{quote}”",
                 cites=(message.id,))
