"""Evidence ranking: each sentence read, scored against each part of the question.

A sentence's score for a part blends (weights in :data:`WEIGHTS`):

- ``meaning``: cosine similarity of the sentence and the part (with the question's statements
  before it) under the engine's embedding model;
- ``words``: the share of the part's content words (IDF-weighted over the sentences read, the
  question's statements at half weight, its focus words double) the sentence or its message's
  subject holds;
- ``subject``: the same share in the message's subject, since a one-line reply ("Acked-by: …")
  says what it is about only there;
- ``search``: how high search ranked the message (reciprocal-rank fusion over every search);
- ``focus``: the share of the part's focus words (what is asked: "acked", "how many error
  lines") in the sentence itself;
- ``author``: the message is from a person the part is about ("did Ingo suggest"; for "What was
  it?", the person the question's statements are about), half for whose thing it is
  ("Ingmar's patch");
- ``shape``: a how-many part wants a number the question does not hold, best right before the
  unit asked about ("4604 lines"), and "how much" a sum of money ("GBP 4,812.50"); the number of
  a code ("INV-77120") is no quantity; a when part likes a sentence holding a date or a time
  ("payable by 3 October 2026"); a who part likes a sentence that names someone other than its
  sender, or an ``Acked-by:``-style trailer; a part asking what someone proposed likes a
  sentence written as a proposal ("Would a tuple … be a better choice?").

Which parts follow an earlier part ("…, and who convinced him?") is settled when composing: the
relation to the earlier part's message is added there.

Sentences of a message that gives instructions to the reader (``shared.deepsearch.instructions``)
are never candidates. Pure apart from the embedding call it is handed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Sequence

import msgspec
import numpy as np

from shared.deepsearch.instructions import addresses_the_reader
from shared.deepsearch.question import Part, Question, content_words, fold, stem
from shared.deepsearch.reading import ReadMessage, Sentence, sentences_of

__all__ = ["Candidate", "Ranking", "WEIGHTS", "rank_evidence", "author_matches", "embed_sentences",
           "wants_stated_date", "date_precision",
           "holds_amount", "MAX_EMBEDDED"]

#: Weights of the score's parts (see the module docstring); tuned on the QA kit's dev set only.
WEIGHTS = {"meaning": 0.45, "words": 0.30, "subject": 0.10, "search": 0.10, "author": 0.12,
           "shape": 0.08, "focus": 0.10}
#: Words from which a sentence said again word for word by a later message is a repetition.
REPEAT_WORDS = 6
#: Factor of a part's focus words (``Part.focus``) among its terms.
FOCUS_WEIGHT = 2.0
#: Sentences embedded per question: the best of each part by the other scores. The model is the
#: slow part: a batch costs its longest text times its size, so texts are cut to
#: :data:`EMBEDDED_CHARS` and batched by length (:func:`embed_sentences`).
MAX_EMBEDDED = 32
#: Characters of a sentence the model reads (about 40 tokens of English).
EMBEDDED_CHARS = 120
#: Texts per model call.
EMBED_BATCH = 16
#: Messages, and sentences, read between two checkpoints. Reading is CPU work on the worker's
#: event loop: 120 messages of 100,000 characters held it for 15 s, so that other callers' jobs
#: on that worker did not start and the call ran past its max_seconds (found by an attack). A
#: checkpoint gives the loop back (a Redis round trip) and is where a call past its deadline or
#: cancelled stops; cutting one message of 100,000 characters into sentences and their words
#: takes about a quarter of a second, so sentences are read one message at a time.
YIELD_MESSAGES = 4
YIELD_SENTENCES = 500

Embed = Callable[[Sequence[str]], Awaitable[np.ndarray]]
#: A quantity: digits not inside a word or after a decimal point, nor the number of a code such
#: as ``INV-77120`` (letters and a dash before it).
_NUMBER = re.compile(r"(?<![\w.])(?<![A-Za-z]-)\d[\d,]*(?![\w])")
#: A sum of money: a currency sign or code before the number, or a currency after it.
_MONEY = re.compile(r"(?:[£$€¥]|\b(?:GBP|USD|EUR|CHF|JPY|CAD|AUD)\b)\s?\d|\d(?:[\d,]*\.\d\d)?"
                    r"\s?(?:GBP|USD|EUR|CHF|pounds?|dollars?|euros?)\b", re.IGNORECASE)
_HOW_MUCH = re.compile(r"\bhow\s+much\b", re.IGNORECASE)
#: A "how much" with no unit after it ("how much did the letter promise"): it asks for a sum.
_HOW_MUCH_BARE = re.compile(r"\bhow\s+much\s+(?:did|does|do|is|was|were|are|will|would|has|"
                            r"have|had|can|could|should|money)\b", re.IGNORECASE)
#: A "how much" that asks for a price: only a sum of money answers it.
_PRICE = re.compile(r"\b(?:cost|costs|price|prices|pay|paid|charge|charged|fee|fees|fine|owe|owed|"
                    r"amount|invoice|bill|billed|penalty|total|spend|spent|refund)\b",
                    re.IGNORECASE)
_NUMBER_WORD = re.compile(r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
                          r"dozen|hundred|thousand|million|once|twice|single|both|none)\b",
                          re.IGNORECASE)
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
          r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
#: A day or a time: "3 October 2026", "October 3", "2026-10-03", "03/10/2026", a weekday,
#: "tomorrow", "end of the month", "10:30", "5pm".
_DAY = re.compile(
    rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b|\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b"
    r"|\b\d{4}-\d\d-\d\d\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
    r"|\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|\b(?:today|tomorrow|tonight|yesterday)\b"
    r"|\bend\s+of\s+(?:the\s+)?(?:day|week|month|year)\b|\b\d{1,2}:\d\d\b|\b\d{1,2}\s?[ap]m\b",
    re.IGNORECASE)
#: A month of a year ("September 2026"): a date, less precise than a day.
_MONTH_OF_YEAR = re.compile(rf"\b{_MONTH}\s+\d{{4}}\b", re.IGNORECASE)


class Candidate(msgspec.Struct, frozen=True, kw_only=True):
    """A sentence, its message, and its score for each part of the question (same order)."""

    sentence: Sentence
    message: ReadMessage
    scores: tuple[float, ...]


class Ranking(msgspec.Struct, frozen=True, kw_only=True):
    """Candidates best first for each part, the messages read (by id), and how many messages were
    left out because they address the reader."""

    by_part: tuple[tuple[Candidate, ...], ...]
    messages: dict[str, ReadMessage]
    refused: int


def author_matches(name: str, message: ReadMessage) -> bool:
    """Whether ``name`` (as written in a question: ``Howells``, ``Nicolas de Pesloüan``) names
    the message's sender: each of its words is a word of the sender's display name, or the
    name's last word is in the address's local part."""
    words = [w for w in fold(name).replace("'", " ").split() if len(w) > 1]
    if not words:
        return False
    display = set(re.findall(r"\w+", fold(message.from_name or "")))
    if all(w in display for w in words):
        return True
    local = fold((message.from_address or "").split("@")[0])
    return len(words[-1]) >= 4 and words[-1] in local


def _idf(sentences: list[list[str]]) -> dict[str, float]:
    df: dict[str, int] = {}
    for words in sentences:
        for w in set(words):
            df[w] = df.get(w, 0) + 1
    n = len(sentences) + 1
    return {w: math.log(n / (c + 0.5)) + 1.0 for w, c in df.items()}


def _focus_share(part: Part, have: set[str]) -> float:
    return sum(f in have for f in part.focus) / len(part.focus) if part.focus else 0.0


def _share(wanted: dict[str, float], have: set[str]) -> float:
    total = sum(wanted.values())
    return sum(v for w, v in wanted.items() if w in have) / total if total else 0.0


def _part_terms(question: Question, part: Part, idf: dict[str, float], names: set[str]
                ) -> dict[str, float]:
    terms: dict[str, float] = {}
    default = max(idf.values(), default=1.0)
    for weight, text in ((0.5, question.context), (0.5, question.text), (1.0, part.text)):
        for w in content_words(text):
            if w in names:
                continue
            terms[w] = max(terms.get(w, 0.0), weight * idf.get(w, default))
    for w in part.focus:  # what is asked weighs double
        if w in terms:
            terms[w] *= FOCUS_WEIGHT
    return terms


#: Stems of asking for a proposal ("what did he propose instead", "which switch did Ingo suggest").
_PROPOSING = frozenset({"propos", "suggest", "recommend", "advis"})
#: How proposals are written: "Would a tuple … be a better choice?", "Shouldn't it be …
#: instead?", "Cannot we use …", "How about …", "I'd suggest …".
_PROPOSAL = re.compile(r"^(?:would|could|shouldn'?t|should|cannot|can'?t|can|why not|how about|"
                       r"what about|maybe|perhaps)\b.*\?$|\b(?:instead|better|suggest|propose|"
                       r"i'd rather|i would rather|how about)\b", re.IGNORECASE)
_CAPITALIZED_PAIR = re.compile(r"(?<!^)(?<![.!?] )\b[A-Z][a-z]+\s+[A-Z][a-z]+\b")
_ACK_TRAILER = re.compile(r"^\s*(?:Acked|Reviewed|Tested|Reported)-by:", re.IGNORECASE)


def _shape(part: Part, sentence: str, message: ReadMessage, question_numbers: set[str],
           proposing: bool) -> float:
    if proposing and part.kind in ("what", "which") and _PROPOSAL.search(sentence):
        return 2.0  # the form of the answer itself, a stronger cue than a number or a name
    much = part.kind == "how_many" and _HOW_MUCH.search(part.text) is not None
    if much and _MONEY.search(sentence):
        return 2.0  # "how much is the fine": a sum of money is the form of the answer itself
    if part.kind == "when":
        return 1.0 if date_precision(sentence) else 0.0
    if part.kind == "how_many":
        tokens = re.findall(r"[\w,]+", sentence)
        near_unit = any(_NUMBER.fullmatch(t) and t.replace(",", "") not in question_numbers
                        and any(stem(u) in part.focus for u in tokens[i + 1:i + 4])
                        for i, t in enumerate(tokens))
        numbers = {n.replace(",", "") for n in _NUMBER.findall(sentence)} - question_numbers
        # "how much" with neither money nor the unit asked about: a date's or a code's digits
        return 1.0 if near_unit else -1.0 if not numbers else -0.5 if much else 0.3
    if part.kind == "who":
        sender = set(fold(message.from_name or "").split())
        named = any(not set(fold(m).split()) <= sender
                    for m in _CAPITALIZED_PAIR.findall(sentence))
        return 0.5 if named or _ACK_TRAILER.match(sentence) else 0.0
    return 0.0


def holds_amount(part: Part, sentence: str, question: str) -> bool:
    """Whether ``sentence`` can answer ``part`` when it asks how many or how much (any other
    part: True): a sum of money for a price ("how much did the hire cost") or a "how much" with
    no unit ("how much did the letter promise": a phone number answered it, found by a new
    user), else a number the
    ``question`` does not hold, or a number word ("twice", "three"). A sentence without one is
    no answer, however close its words."""
    if part.kind != "how_many":
        return True
    if _HOW_MUCH_BARE.search(part.text) or (_HOW_MUCH.search(part.text)
                                            and _PRICE.search(part.text)):
        return _MONEY.search(sentence) is not None
    asked = {n.replace(",", "") for n in _NUMBER.findall(question)}
    return bool({n.replace(",", "") for n in _NUMBER.findall(sentence)} - asked) or \
        _NUMBER_WORD.search(sentence) is not None


#: A "when" about a message itself ("when did Joe send the series"): the message's date, which
#: every answer sentence states, answers it; any other "when" wants a date the mail states.
_MAIL_ACT = re.compile(r"\b(?:send|sends|sent|write|writes|wrote|written|post|posts|posted|"
                       r"reply|replies|replied|e-?mail(?:s|ed)?|mail(?:s|ed)?|announce[sd]?|"
                       r"submit(?:s|ted)?|report(?:s|ed)?|ask(?:s|ed)?|propose[sd]?|say|says|"
                       r"said|tell|tells|told|forward(?:s|ed)?)\b", re.IGNORECASE)


def wants_stated_date(part: Part) -> bool:
    """Whether ``part`` asks when something is or was ("when is the invoice due"), which a
    sentence answers only with a date or a time in it (:func:`date_precision`), rather than
    when a message was sent."""
    return part.kind == "when" and _MAIL_ACT.search(part.text) is None


def date_precision(sentence: str) -> int:
    """How precisely ``sentence`` states a date: 2 for a day or a time ("3 October 2026",
    "Friday", "10:30"), 1 for a month of a year ("September 2026"), 0 for none."""
    return 2 if _DAY.search(sentence) else 1 if _MONTH_OF_YEAR.search(sentence) else 0


async def embed_sentences(texts: Sequence[str], embed: Embed,
                          checkpoint: Callable[[], Awaitable[None]]) -> np.ndarray:
    """The vectors of ``texts`` (in order), computed in batches of similar length with a
    checkpoint before each batch."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out: np.ndarray | None = None
    for start in range(0, len(order), EMBED_BATCH):
        batch = order[start:start + EMBED_BATCH]
        await checkpoint()
        vectors = await embed([texts[i] for i in batch])
        if out is None:
            out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
        out[batch] = vectors
    await checkpoint()
    return out if out is not None else np.zeros((0, 1), dtype=np.float32)


async def rank_evidence(question: Question, messages: Sequence[ReadMessage],
                        search_rank: dict[str, float], embed: Embed,
                        checkpoint: Callable[[], Awaitable[None]]) -> Ranking:
    """Score every sentence of ``messages`` for every part of ``question``.

    Args:
        search_rank: each message's search relevance, 0..1 (1 for the best).
        embed: the embedding model, as an awaitable (it runs in a thread).
        checkpoint: awaited before each batch of the model and after the last; raises to stop.
    """
    kept: list[ReadMessage] = []
    refused = 0
    for n, m in enumerate(messages):
        if n % YIELD_MESSAGES == YIELD_MESSAGES - 1:
            await checkpoint()
        if addresses_the_reader(f"{m.subject}\n{m.own_text}"):
            refused += 1
        else:
            kept.append(m)
    by_id = {m.id: m for m in kept}
    seen: set[str] = set()
    sentences: list[Sentence] = []
    words: list[set[str]] = []
    for m in kept:  # oldest first: a repeated sentence counts for the first to say it
        await checkpoint()
        for s in sentences_of(m):
            found = set(content_words(s.text))
            if not found:
                continue
            key = " ".join(fold(s.text).split())
            # a short formula ("Applied, thanks.") is said anew each time, not repeated
            if len(key.split()) >= REPEAT_WORDS:
                if key in seen:
                    continue
                seen.add(key)
            sentences.append(s)
            words.append(found)
    subjects = {m.id: set(content_words(m.subject)) for m in kept}
    # "Who sent the insurance claim?": the sender's name ("Harbour Insurance Claims") says what
    # the message is as much as its subject does
    senders = {m.id: set(content_words(m.from_name or "")) for m in kept}
    asks_sender = [p.kind == "who" and _MAIL_ACT.search(p.text) is not None
                   for p in question.parts]
    idf = _idf([list(w) for w in words])
    names = {w for n in question.names for w in content_words(n.text)}
    parts = question.parts
    terms = [_part_terms(question, p, idf, names) for p in parts]
    question_numbers = {n.replace(",", "") for n in _NUMBER.findall(question.text)}
    proposing = [bool(_PROPOSING & set(content_words(f"{question.context} {p.text}")))
                 for p in parts]
    lexical = np.zeros((len(sentences), len(parts)))
    for i, s in enumerate(sentences):
        if i % YIELD_SENTENCES == YIELD_SENTENCES - 1:
            await checkpoint()
        m = by_id[s.message_id]
        for j, p in enumerate(parts):
            author = any(author_matches(a, m) for a in (*p.actors, *p.about)) or any(
                author_matches(o, m) for o in p.owners) * 0.5
            known = words[i] | subjects[m.id] | (senders[m.id] if asks_sender[j] else set())
            lexical[i, j] = (WEIGHTS["words"] * _share(terms[j], known)
                             + WEIGHTS["subject"] * _share(terms[j], subjects[m.id])
                             + WEIGHTS["search"] * search_rank.get(m.id, 0.0)
                             + WEIGHTS["author"] * float(author)
                             + WEIGHTS["shape"] * _shape(p, s.text, m, question_numbers,
                                                         proposing[j])
                             + WEIGHTS["focus"] * _focus_share(p, words[i]))
    meaning = np.zeros_like(lexical)
    if sentences:
        # the best of each part by words, so a later part's few candidates are not crowded out
        each = max(1, MAX_EMBEDDED // len(parts))
        order = np.array(list(dict.fromkeys(
            int(i) for j in range(len(parts)) for i in np.argsort(-lexical[:, j])[:each])))
        queries = [" ".join(x for x in (question.context, p.text) if x) for p in parts]
        texts = [*queries, *(sentences[i].text[:EMBEDDED_CHARS] for i in order)]
        vectors = await embed_sentences(texts, embed, checkpoint)
        q, v = vectors[: len(parts)], vectors[len(parts):]
        meaning[order] = v @ q.T
    scores = lexical + WEIGHTS["meaning"] * meaning
    candidates = [Candidate(sentence=s, message=by_id[s.message_id],
                            scores=tuple(round(float(x), 4) for x in scores[i]))
                  for i, s in enumerate(sentences)]
    by_part = tuple(tuple(sorted(candidates, key=lambda c, j=j: (-c.scores[j], c.message.date,
                                                                 c.sentence.index)))
                    for j in range(len(parts)))
    return Ranking(by_part=by_part, messages=by_id, refused=refused)
