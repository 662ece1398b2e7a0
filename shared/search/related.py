"""Messages in other threads about the same thing as a given message (spec section 4.3,
``mail_find_related``).

Three kinds of evidence. Reasons for the first two are clauses of the query language, so an agent
can run them with ``mail_search``; the third is the reason ``similar content``:

- shared references (``ref:VALUE``, ``custom:NAME:VALUE``): a plate, invoice, order, claim, PCN or
  custom number both messages mention weighs :data:`REF_WEIGHT`; a shared phone number or amount,
  which many unrelated mails repeat, :data:`WEAK_REF_WEIGHT`;
- the same correspondent and subject words (``participant:ADDRESS`` plus ``subject:WORD``):
  :data:`PARTICIPANT_WEIGHT`, only together with at least one shared subject word of
  three or more letters (the same person alone writes about many things);
- semantic neighbours: cosine similarity of at least :data:`MIN_SIMILARITY` between the two
  messages' vectors adds the similarity times :data:`SEMANTIC_WEIGHT`.

Messages of the same thread are never related hits; candidates are limited to the same identity.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

import asyncpg
import msgspec

from shared.embeddings.store import similarities, vectors_of
from shared.mail.store import correspondence, outline, thread_ids
from shared.search.keyword import Ranked, RawHit, hit_details
from shared.mail.refs import sharing_refs
from shared.search.semantic import SemanticEngine

__all__ = ["Related", "find_related", "REF_WEIGHT", "WEAK_REF_WEIGHT", "PARTICIPANT_WEIGHT",
           "SEMANTIC_WEIGHT", "MIN_SIMILARITY"]

#: Score of one shared strong reference (plate, invoice, order, claim, PCN, reference, custom).
REF_WEIGHT = 3.0
#: Score of one shared phone number or amount.
WEAK_REF_WEIGHT = 1.0
#: Score of the same correspondent with shared subject words.
PARTICIPANT_WEIGHT = 1.5
#: Multiplier of the cosine similarity of semantic neighbours.
SEMANTIC_WEIGHT = 2.0
#: Least cosine similarity that counts as "about the same thing" (MiniLM: unrelated mail in
#: one mailbox scores 0.1-0.4; paraphrases 0.5 and up).
MIN_SIMILARITY = 0.5
#: Semantic neighbours considered before the cut.
_NEIGHBOURS = 50
_WORD = re.compile(r"[^\W\d_]{3,}")
_SUBJECT_NOISE = {"re", "fwd", "fw", "aw", "the", "and", "for", "your", "you", "our", "with",
                  "from", "this", "that", "are", "was", "has", "have", "not", "about", "patch"}


class Related(msgspec.Struct, kw_only=True):
    """One related message with its score, reasons and semantic similarity."""

    hit: RawHit
    reasons: list[str]


def _subject_words(subject: str) -> set[str]:
    return {w for w in _WORD.findall(subject.lower()) if w not in _SUBJECT_NOISE}


async def find_related(conn: asyncpg.Connection, engine: SemanticEngine, identity_id: str,
                       message_id: str, *, limit: int) -> tuple[list[Related], bool]:
    """Up to ``limit`` related messages, best first, and whether semantic evidence was
    unavailable (``degraded``). The message must exist in the identity (the caller checks)."""
    source = await outline(conn, message_id)
    assert source is not None, "the caller checks that the message exists"
    scores: dict[str, float] = {}
    reasons: dict[str, list[str]] = {}

    def credit(other: str, score: float, reason: str) -> None:
        scores[other] = scores.get(other, 0.0) + score
        if reason not in reasons.setdefault(other, []):
            reasons[other].append(reason)

    shared_refs = await sharing_refs(conn, message_id)
    threads = await thread_ids(conn, sorted({other for other, _, _ in shared_refs}))
    for other, kind, value in shared_refs:
        if threads.get(other) == source.thread_id:
            continue
        weak = kind in ("phone", "amount")
        reason = (f"custom:{kind.split(':', 1)[1]}:{value}" if kind.startswith("custom:")
                  else f"ref:{value}")
        credit(other, WEAK_REF_WEIGHT if weak else REF_WEIGHT, reason)

    if source.direction == "inbound":
        people = [source.from_address] if source.from_address else []
    else:
        people = source.recipients
    words = _subject_words(source.subject)
    if people and words:
        for other in await correspondence(conn, identity_id, people,
                                          outside_thread=source.thread_id):
            shared = sorted(words & _subject_words(other.subject))
            if shared:
                who = other.from_address if other.from_address in people else next(
                    a for a in other.recipients if a in people)
                credit(other.id, PARTICIPANT_WEIGHT, f"participant:{who}")
                for word in shared:
                    credit(other.id, 0.0, f"subject:{word}")

    degraded = await engine.ready(conn) is not None
    similarity: dict[str, float] = {}
    if not degraded:
        assert engine.embedder is not None
        own = (await vectors_of(conn, [message_id], engine.embedder.model)).get(message_id)
        if own is not None:
            near = await engine.nearest(
                conn, identity_ids=[identity_id], vector=own, as_of=datetime.now(timezone.utc),
                k=_NEIGHBOURS, where="m.thread_id <> $1", params=[source.thread_id])
            for other, sim in near:
                similarity[other] = sim
                if sim >= MIN_SIMILARITY:
                    credit(other, sim * SEMANTIC_WEIGHT, "similar content")
        if scores:
            missing = [i for i in scores if i not in similarity]
            if own is not None:
                similarity.update(await similarities(conn, missing, engine.embedder.model, own))

    best = sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))[:limit]
    threads = await thread_ids(conn, [i for i, _ in best])
    ranked = [Ranked(message_id=i, thread_id=threads[i], score=round(s, 4),
                     semantic_score=round(similarity[i], 4) if i in similarity else None)
              for i, s in best]
    hits = await hit_details(conn, ranked, None, "UTC")
    return [Related(hit=h, reasons=reasons[h.message_id]) for h in hits], degraded
