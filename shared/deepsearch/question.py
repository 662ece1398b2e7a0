"""Question analysis: what a deep-search question asks and what it names (issue 10, "the loop").

:func:`analyse` splits a question into its parts (``"What did he propose instead, and did Suresh
agree?"`` has two), gives each its kind (who, when, where, what, which, how_many, yes_no, why)
and the person it is about, and collects what searches can use: capitalized names, addresses,
dates, identifiers (``cifsglob.h``, ``CONFIG_X86_64``, ``enable_IR_x2apic()``), quoted phrases
and content words. It is English-only and works on surface forms; it does not decide which names
are people (the agent asks the mailbox's contacts).

Who a part is about (its *actor*) comes from the name right after its auxiliary verb ("did Ingo
suggest", "was Carl"), or, for a pronoun ("did he propose"), from the first person named before
the part. A possessive ("Joe's patch") names whose thing it is, not who acted.

Pure: no I/O. Called by ``shared.deepsearch.agent``.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

import msgspec

__all__ = ["Kind", "Name", "Part", "Question", "analyse", "content_words", "stem", "fold",
           "STOPWORDS"]

Kind = Literal["who", "when", "where", "what", "which", "how_many", "yes_no", "why", "how"]

#: Words that carry no topic: function words, question words and reporting verbs.
STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each else end ended ever
eventually few first for from further get got had has have having he her here hers herself him
himself his how i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours out over own really same she should so some such than that the their
theirs them then there these they this those through to too under until up very was we were what
when where which while who whom whose why will with would you your yours actually apart instead
anyone someone something anything did didn't doesn't don't wasn't weren't isn't end up did whether
say said says tell told think thought wrote write writes mention mentioned ask asked
""".split())

_AUXILIARIES = ("did", "does", "do", "is", "was", "were", "are", "has", "have", "had", "can",
                "could", "would", "will", "should")
_WH = ("who", "whom", "whose", "what", "which", "when", "where", "why", "how")
#: Capitalized words that start questions or clauses and are never names.
_NOT_NAMES = frozenset("""
who whom whose what which when where why how did does do is was were are has have had can could
would will should apart instead in on at the a an and but or if of for by from to with after before
since during while besides other than yes no please
""".split())
_PARTICLES = frozenset({"de", "van", "von", "der", "den", "da", "di", "du", "le", "la", "del",
                        "dos"})

_SENTENCE = re.compile(r"(?<=[?.!])\s+(?=[A-Z\"'“‘(])")
_PART_SPLIT = re.compile(
    r",\s*(?:and|but)\s+(?=(?:" + "|".join(_WH + _AUXILIARIES) + r")\b)", re.IGNORECASE)
_WORD = re.compile(r"[\w][\w'’]*", re.UNICODE)
_NAME_TOKEN = re.compile(r"\b[A-Z][^\W\d_A-Z]+(?:['’][^\W\d_]+)?\b|\b(?:" + "|".join(_PARTICLES)
                         + r")\b", re.UNICODE)
_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_QUOTED = re.compile(r"[\"“]([^\"”]{2,80})[\"”]|(?<!\w)['‘]([^'’]{2,60})['’](?!\w)")
#: A token that is code or a path rather than a word: it holds _ . / or (), or mixes digits
#: into letters in a way words do not (CONFIG_X86_64, 2.6.38-rc4, fsl_rio, -next).
_IDENTIFIER = re.compile(
    r"(?<![\w/.-])(?:-[a-z]+\b|[\w-]*[_./][\w./-]*\w(?:\(\))?|\w+\(\)|[A-Za-z]+\d+\w*)(?![\w/])")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_YEAR = re.compile(r"\b(19|20)\d{2}\b")


class Name(msgspec.Struct, frozen=True, kw_only=True):
    """A capitalized name as written (``Nicolas de Pesloüan``) and whether it was possessive."""

    text: str
    possessive: bool = False


class Part(msgspec.Struct, frozen=True, kw_only=True):
    """One thing the question asks: its text, kind, and the names of the people it is about
    (``actors``: who did what is asked; ``owners``: whose thing it is; ``excluded``: who cannot
    be the answer, as in "apart from Alex, who …" or "who reviewed Chris's patch"). ``focus``
    holds the stems that say what is asked: the head words after the wh-word ("how many error
    lines") and the verb ("did Ingo suggest", "who acked")."""

    text: str
    kind: Kind
    actors: tuple[str, ...] = ()
    owners: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    focus: tuple[str, ...] = ()
    #: For a "which X" part, the stems of X when it names a class the answer belongs to
    #: ("which Kconfig switch", "which Debian release"); the answer's sentence must hold one.
    head: tuple[str, ...] = ()
    #: People a wh-part says nothing of but the question's statements are about ("Nicolas
    #: proposed a comparison. What was it?"): their mail is likelier, not required.
    about: tuple[str, ...] = ()
    #: The part asks for the outcome ("did Howells end up agreeing", "eventually", "finally"):
    #: the latest of equally good answers is the one.
    final: bool = False


class Question(msgspec.Struct, frozen=True, kw_only=True):
    """The analysed question: ``context`` is its statements ("Adrian wanted tags stored in the
    mail files."), ``parts`` what it asks, and the rest what searches can use."""

    text: str
    context: str
    parts: tuple[Part, ...]
    names: tuple[Name, ...]
    addresses: tuple[str, ...]
    identifiers: tuple[str, ...]
    phrases: tuple[str, ...]
    years: tuple[str, ...]
    dates: tuple[str, ...]
    words: tuple[str, ...]


def fold(text: str) -> str:
    """``text`` lower-cased without accents, for comparing names (``Pesloüan`` = ``pesloua n``)."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def stem(word: str) -> str:
    """A crude English stem: enough that ``acked``, ``acks`` and ``ack`` meet."""
    w = fold(word).rstrip("'’")
    if w.endswith(("'s", "’s")):
        w = w[:-2]
    for suffix in ("ing", "ied", "ies", "ed", "es", "s", "e"):
        if len(w) - len(suffix) >= 3 and w.endswith(suffix):
            return w[: -len(suffix)] + ("y" if suffix in ("ied", "ies") else "")
    return w


def content_words(text: str) -> list[str]:
    """The stems of ``text``'s words that are not :data:`STOPWORDS`, in order, repeats kept."""
    out = []
    for word in _WORD.findall(text):
        low = fold(word)
        if low in STOPWORDS or len(low) < 2 and not low.isdigit():
            continue
        out.append(stem(low))
    return out


def _names(text: str) -> list[Name]:
    """Runs of capitalized words (with particles inside: ``Nicolas de Pesloüan``)."""
    found: list[Name] = []
    run: list[str] = []
    end = 0

    def close() -> None:
        while run and run[-1].lower() in _PARTICLES:
            run.pop()
        if run:
            last = run[-1]
            possessive = last.endswith(("'s", "’s"))
            if possessive:
                run[-1] = last[:-2]
            found.append(Name(text=" ".join(run), possessive=possessive))
        run.clear()

    for match in _NAME_TOKEN.finditer(text):
        token = match.group(0)
        gap = text[end:match.start()]
        if run and gap.strip():
            close()
        end = match.end()
        if token.lower() in _PARTICLES:
            if run:
                run.append(token)
            continue
        if token.lower() in _NOT_NAMES and not run:
            continue
        if token.lower() in _NOT_NAMES:
            close()
            continue
        run.append(token)
        if token.endswith(("'s", "’s")):  # "Chris Wilson's Makefile": the name ends here
            close()
    close()
    return found


def _kind(part: str) -> Kind:
    low = part.lower()
    first = re.match(r"\s*(\w+)", low)
    if first and first.group(1) in _AUXILIARIES:
        return "yes_no"
    wh = "|".join(_WH)
    # The wh-word that governs the clause comes a few words before its auxiliary ("in which city
    # did"); a leading "When Aron reported ..., in which city" is a time clause, not the ask.
    governed = re.search(rf"\b({wh})\b(?:\s+[\w'-]+){{0,3}}?\s+(?:{'|'.join(_AUXILIARIES)})\b", low)
    match = governed or re.search(rf"\b({wh})\b", low)
    if match is None:
        return "yes_no" if re.search(rf"\b(?:{'|'.join(_AUXILIARIES)})\b", low) else "what"
    word = match.group(1)
    after = low[match.end(1):]
    if word == "how":
        return "how_many" if re.match(r"\s+(many|much)\b", after) else "how"
    if word in ("who", "whom", "whose"):
        return "who"
    if word in ("what", "which") and re.match(r"\s+(date|day|time|year|month)\b", after):
        return "when"
    if word in ("what", "which") and re.match(r"\s+(city|country|place|town)\b", after):
        return "where"
    return word  # type: ignore[return-value]


def _actors(part: str, earlier: list[Name]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    names = _names(part)
    owners = tuple(n.text for n in names if n.possessive)
    aux = "|".join(_AUXILIARIES)
    actors: list[str] = []
    for n in names:
        if n.possessive:
            continue
        if re.search(rf"\b(?:{aux})\s+(?:he\s+and\s+)?{re.escape(n.text)}\b", part,
                     re.IGNORECASE):
            actors.append(n.text)
    if re.search(rf"\b(?:{aux})\s+(?:he|she)\b", part, re.IGNORECASE):
        first = next((n.text for n in earlier if not n.possessive), None)
        if first is not None and first not in actors:
            actors.insert(0, first)
    return tuple(actors), owners


_EXCLUDING = re.compile(r"\b(?:apart from|aside from|besides|other than|except(?: for)?)\s+"
                        r"([A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*)")
_PRONOUN_SUBJECT = ("he", "she", "it", "they", "that", "this", "the", "his", "her", "its")


def _focus(part: str, kind: Kind) -> tuple[str, ...]:
    words = _WORD.findall(part)
    low = [fold(w) for w in words]
    focus: list[str] = []
    # the wh-word that governs: the last one before the first auxiliary after a wh-word
    whs = [i for i, w in enumerate(low) if w in _WH]
    first_aux = next((i for i, w in enumerate(low) if w in _AUXILIARIES and whs and i > whs[0]),
                     len(low))
    wh = whs[0] if kind == "who" and whs else max((i for i in whs if i < first_aux), default=None)
    if wh is not None:
        j = wh + 1
        while j < len(low) and low[j] not in _AUXILIARIES and len(focus) < 3:
            if low[j] not in STOPWORDS and not low[j].endswith("ly") \
                    and low[j] not in ("else", "many", "much"):
                focus.append(stem(low[j]))
                if kind == "who":
                    break
            j += 1
    aux = next((i for i, w in enumerate(low) if w in _AUXILIARIES and (wh is None or i > wh)),
               None)
    if aux is not None:
        j = aux + 1
        while j < len(low) and (words[j][:1].isupper() or low[j] in _PRONOUN_SUBJECT
                                or low[j] in ("and", "up", "end")):
            j += 1
        while j < len(low) and low[j] in STOPWORDS | {"end", "up"}:
            j += 1
        if j < len(low):
            focus.append(stem(low[j]))
    return tuple(dict.fromkeys(f for f in focus if len(f) > 1))


_FINAL = re.compile(r"\b(?:end(?:ed)? up|eventually|finally|in the end|at last|ultimately)\b",
                    re.IGNORECASE)
#: Heads of "which X" that name no class of answers ("which one").
_GENERIC_HEADS = frozenset({"one", "ones", "way", "kind", "thing", "part", "type", "time"})


def _head(part: str) -> tuple[str, ...]:
    """The stems of "which [modifiers] X did …" (X the last word before the auxiliary); none
    when X is generic ("which one")."""
    match = re.search(r"\bwhich\s+((?:[\w'’-]+\s+){0,3}?)([\w'’-]+)\s+(?:"
                      + "|".join(_AUXILIARIES) + r")\b", part, re.IGNORECASE)
    if match is None:
        return ()
    word = fold(match.group(2))
    if word in _GENERIC_HEADS or word in STOPWORDS:
        return ()
    return tuple(dict.fromkeys(content_words(f"{match.group(1)} {match.group(2)}")))


def analyse(question: str) -> Question:
    """Analyse ``question`` (any length; callers pass at most 1,024 characters).

    Returns:
        The :class:`Question`; a question without a question mark is one part.
    """
    text = " ".join(question.split())
    sentences = [s for s in _SENTENCE.split(text) if s.strip()]
    asked = [s for s in sentences if s.rstrip().endswith("?")] or sentences
    context = " ".join(s for s in sentences if s not in asked)
    parts: list[Part] = []
    seen = context
    for sentence in asked:
        for piece in _PART_SPLIT.split(sentence.rstrip(" ?")):
            piece = piece.strip(" ,")
            if not piece:
                continue
            kind = _kind(piece)
            named = _names(piece)
            excluded = [m.group(1) for m in _EXCLUDING.finditer(piece)]
            if kind == "who":  # the answer is someone the part does not name
                actors, owners = (), tuple(n.text for n in named if n.possessive)
                excluded += [n.text for n in named]
            else:
                actors, owners = _actors(piece, _names(seen))
            focus = _focus(piece, kind)
            about: tuple[str, ...] = ()
            # "What was it?" asks for what the statements' subject said; "Did it work?" asks
            # how it turned out, which anyone may tell
            if kind not in ("who", "yes_no") and not actors and not named \
                    and len(content_words(piece)) <= 1:
                first = next((n.text for n in _names(context) if not n.possessive), None)
                about = (first,) if first else ()
            head = _head(piece) if kind == "which" else ()
            parts.append(Part(text=piece, kind=kind, actors=actors, owners=owners,
                              excluded=tuple(dict.fromkeys(excluded)), focus=focus, head=head,
                              about=about,
                              final=_FINAL.search(piece) is not None))
            seen = f"{seen} {piece}"
    quoted = [a or b for a, b in _QUOTED.findall(text)]
    identifiers = []
    for match in _IDENTIFIER.finditer(_ADDRESS.sub(" ", text)):  # an address is not code
        token = match.group(0).rstrip(".,;:")
        if token.endswith("()"):
            token = token[:-2]
        if len(token) >= 3 and token not in identifiers and not _ISO_DATE.fullmatch(token):
            identifiers.append(token)
    names: list[Name] = []
    for n in _names(text):
        if all(n.text != m.text for m in names):
            names.append(n)
    words: list[str] = []
    for w in content_words(text):
        if w not in words:
            words.append(w)
    return Question(
        text=text, context=context, parts=tuple(parts), names=tuple(names),
        addresses=tuple(dict.fromkeys(_ADDRESS.findall(text))),
        identifiers=tuple(identifiers), phrases=tuple(dict.fromkeys(quoted)),
        years=tuple(dict.fromkeys(m.group(0) for m in _YEAR.finditer(text))),
        dates=tuple(dict.fromkeys(m.group(0) for m in _ISO_DATE.finditer(text))),
        words=tuple(words))
