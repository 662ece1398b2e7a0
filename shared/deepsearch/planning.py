"""Planning: the searches that answer an analysed question, best first (issue 10, "plan
searches").

Each planned search is a ``q`` in the query language of ``mail_search`` (``shared.search.query``)
and a mode, run by the same search service ``mail_search`` uses:

1. the topic in ``hybrid`` mode: identifiers and quoted phrases as phrases, plus the question's
   other content words, capitalised ones that are no person of the mailbox included (keyword
   matching finds exact terms, meaning covers the rest);
2. per person a part is about (its actor, when the mailbox knows them), ``from:"Name"`` with the
   part's words: what that person wrote about it; per address the question holds, ``from:``
   it with the topic; per ISO date, ``after:``/``before:`` that day with the topic;
3. the whole question's words in ``semantic`` mode (the gist, for paraphrased questions);
4. per person whose thing it is ("Leo Li's patches"), ``from:"Name"`` with the topic;
5. the identifiers alone in ``keyword`` mode, OR-ed.

Plans with nothing to say (no identifiers, no known people) are skipped, so a plain question
plans two searches. Pure: no I/O.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Literal

import msgspec

from shared.deepsearch.question import STOPWORDS, Question, fold

__all__ = ["PlannedSearch", "plan_searches", "MAX_TOPIC_WORDS"]

#: Words of a topic search besides identifiers and phrases.
MAX_TOPIC_WORDS = 6
#: Most words of the semantic search (the model reads about 256 tokens; a question is short).
MAX_SEMANTIC_WORDS = 30

_WORD = re.compile(r"[^\W_][\w'’-]*", re.UNICODE)


class PlannedSearch(msgspec.Struct, frozen=True, kw_only=True):
    """One search to run: ``q`` (query language), ``mode``, and what it is for."""

    q: str
    mode: Literal["keyword", "semantic", "hybrid"]
    purpose: str
    #: Whether leaving it out for lack of steps makes an empty answer ``budget_exhausted``
    #: rather than ``insufficient_evidence`` (the variants of 4 and 5 are not).
    essential: bool = True


def _quoted(text: str) -> str:
    return '"' + text.replace('"', " ").strip() + '"'


def _plain_words(text: str, exclude: set[str]) -> list[str]:
    """Content words as written, for a query: no stopwords, no names, no operator look-alikes."""
    out: list[str] = []
    for word in _WORD.findall(text):
        word = re.sub(r"['’]s$", "", word.strip("'’-"))
        low = fold(word)
        if not word or low in STOPWORDS or low in exclude or len(low) < 2:
            continue
        if word not in out:
            out.append(word)
    return out


def plan_searches(question: Question, people: dict[str, str]) -> list[PlannedSearch]:
    """The searches for ``question``, best first (see the module docstring).

    Args:
        people: names of the question that are people of the mailbox, as written in the
            question, mapped to the display name found (``"Howells"`` to ``"David Howells"``).
    """
    # Only the mailbox's people leave the words for from: searches. A capitalised word that is
    # no one here is usually the topic ("What did the Razor users complain about?" searched
    # "users complain" alone: found by a new user).
    name_words = {fold(w) for n in question.names if n.text in people for w in n.text.split()}
    exact = [*question.identifiers, *question.phrases]
    exact_words = {fold(w) for e in exact for w in re.findall(r"\w+", e)}
    prose = question.text
    for literal in (*question.addresses, *question.dates):  # searched with operators below
        prose = prose.replace(literal, " ")
    words = [w for w in _plain_words(prose, name_words) if fold(w) not in exact_words]
    plans: list[PlannedSearch] = []
    topic = [_quoted(e) if re.search(r"[^\w]", e) else e for e in exact[:3]]
    topic += words[: max(2, MAX_TOPIC_WORDS - len(topic))]
    if topic:
        plans.append(PlannedSearch(q=" ".join(topic), mode="hybrid", purpose="the topic"))
    actors = list(dict.fromkeys(a for p in question.parts for a in p.actors if a in people))
    for actor in actors[:2]:
        part = next(p for p in question.parts if actor in p.actors)
        own = [w for w in _plain_words(part.text, name_words) if fold(w) not in exact_words]
        terms = [*topic[:2], *own[:4]] if len(own) < 3 else own[:5]
        plans.append(PlannedSearch(q=f"from:{_quoted(actor)} " + " ".join(dict.fromkeys(terms)),
                                   mode="hybrid", purpose=f"what {people[actor]} wrote"))
    for address in question.addresses[:2]:
        plans.append(PlannedSearch(q=f"from:{address} " + " ".join(topic[:4]), mode="hybrid",
                                   purpose=f"what {address} wrote"))
    for day in question.dates[:1]:
        try:
            following = (date.fromisoformat(day) + timedelta(days=1)).isoformat()
        except ValueError:  # 2009-13-45 looks like a date and is none
            continue
        plans.append(PlannedSearch(q=f"after:{day} before:{following} " + " ".join(topic[:4]),
                                   mode="hybrid", purpose=f"mail of {day}"))
    everything = _plain_words(prose, set())[:MAX_SEMANTIC_WORDS]
    if everything:
        plans.append(PlannedSearch(q=" ".join(everything), mode="semantic",
                                   purpose="the question's meaning"))
    owners = list(dict.fromkeys(o for p in question.parts for o in p.owners
                                if o in people and o not in actors))
    for owner in owners[:1]:
        plans.append(PlannedSearch(q=f"from:{_quoted(owner)} " + " ".join(topic[:4]),
                                   mode="hybrid", purpose=f"{people[owner]}'s mail on it",
                                   essential=False))
    if exact:
        plans.append(PlannedSearch(q=" OR ".join(_quoted(e) for e in exact[:4]), mode="keyword",
                                   purpose="the exact terms", essential=False))
    return plans
