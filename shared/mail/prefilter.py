"""Regular expressions behind a literal gate: the strings of which every match holds one.

A pattern such as ``\\bto be removed\\b|\\bremoval (instructions|link)`` matches only a text that
contains ``to be removed`` or ``removal ``. Finding which of every gate's strings a text holds
takes one Aho-Corasick pass (``pyahocorasick``, :class:`Scanned`), far less than letting ``re``
try each pattern at every position of the text, and most patterns do not occur in most mail:
triage's 130-odd searches a message were a third of an import's time (issue 14, README
"Performance"). :class:`Gated` searches only when the gate lets it, so its results are exactly
those of the pattern; :func:`required_literals` reads the gate off the pattern's own parse tree
(``re._parser``, the standard library's), so the gate cannot drift from the pattern. A pattern
without such strings (``[A-Z]{3}``) has no gate and is always searched.

Case: an IGNORECASE pattern's strings are looked for in the text folded by :func:`fold`: lower
case, with the four characters outside ASCII that ``re`` matches to an ASCII letter under
IGNORECASE (İ ı ſ and the Kelvin sign) mapped to it. Only ASCII, Latin-1's accented letters
and caseless characters (CJK, Hangul) are taken into a gate's strings; any other letter ends the
string there, since ``re``'s case equivalences for it (Greek sigma, micro sign) are not what
``str.lower`` gives.

Pure: no I/O. Used by ``shared.mail.spam``, ``shared.mail.triage`` and ``shared.mail.refs``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from re import _constants as C  # noqa: N812 - the parser's opcodes, as the stdlib names them
from re import _parser

import ahocorasick

__all__ = ["Gated", "Scanned", "fold", "required_literals", "MAX_GATE_STRINGS"]

#: Most strings one gate holds; a pattern whose gate would need more (``[a-z]{3}``) gets none and
#: is always searched.
MAX_GATE_STRINGS = 64
# Most strings one run of exact nodes is spelled out into ("(a|b) (c|d)" is four): fewer, shorter
# strings per alternative leave room for every alternative of a long pattern in one gate.
_RUN_STRINGS = 16

# re's IGNORECASE matches these with an ASCII letter; str.lower() does not map them to it
# (Python's sre equivalences i/ı and s/ſ; İ lowers to "i" plus a combining dot).
_FOLD_SPECIAL = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s"})

# Latin-1's accented letters: each one's only case partner under re's IGNORECASE is its capital
# (or small letter), which str.lower() maps to it.
_LATIN1_LETTERS = frozenset("àáâãäåæçèéêëìíîïðñòóôõöøùúûüýþ")

_ZERO_WIDTH = {C.AT, C.ASSERT, C.ASSERT_NOT}
_REPEATS = {C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT}


def fold(text: str) -> str:
    """``text`` as an IGNORECASE gate reads it (module docstring). O(len(text))."""
    return (text if text.isascii() else text.translate(_FOLD_SPECIAL)).lower()


class _Info:
    """What one node of a parse tree matches: ``exact``, the only strings it can match (None when
    unknown or too many), and ``needs``, strings of which every match contains one (None: none
    known)."""

    __slots__ = ("exact", "needs")

    def __init__(self, exact: frozenset[str] | None, needs: frozenset[str] | None = None):
        self.exact = exact
        self.needs = _shortest(needs if exact is None else (None if "" in exact else exact))


def _shortest(strings: frozenset[str] | None) -> frozenset[str] | None:
    # A text holding "invoice." holds "invoice": the longer string adds nothing to a gate.
    if strings is None:
        return None
    return frozenset(s for s in strings if not any(t != s and t in s for t in strings))


_ANYTHING = _Info(None)
_EMPTY = _Info(frozenset({""}))


def _better(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    # Longer strings are rarer in text; of two gates as long, the one with fewer strings.
    if a is None or b is None:
        return a if b is None else b
    return max(a, b, key=lambda s: (min(map(len, s)), -len(s)))


def _char(code: int, ignore_case: bool) -> str | None:
    ch = chr(code)
    if not ignore_case:
        return ch
    if ch.isascii() or ch.lower() == ch == ch.upper() or ch.lower() in _LATIN1_LETTERS:
        return ch.lower()
    return None


def _in(items: list, ignore_case: bool) -> _Info:
    chars: set[str] = set()
    for op, av in items:
        if op is C.LITERAL:
            codes = [av]
        elif op is C.RANGE and av[1] - av[0] < _RUN_STRINGS:
            codes = list(range(av[0], av[1] + 1))
        else:  # NEGATE, CATEGORY, a wide range
            return _ANYTHING
        for code in codes:
            ch = _char(code, ignore_case)
            if ch is None:
                return _ANYTHING
            chars.add(ch)
    return _Info(frozenset(chars)) if len(chars) <= _RUN_STRINGS else _ANYTHING


def _sequence(items: list, ignore_case: bool) -> _Info:
    run = frozenset({""})  # the exact strings of the current run of exact nodes
    best: frozenset[str] | None = None
    exact = True
    for item in items:
        info = _node(item, ignore_case)
        if info.exact is not None and len(run) * len(info.exact) <= _RUN_STRINGS:
            run = frozenset(a + b for a in run for b in info.exact)
            continue
        exact = False
        best = _better(best, _Info(run).needs)
        if info.exact is not None:  # too many strings joined: a new run starts here
            run = info.exact
        else:
            best = _better(best, info.needs)
            run = frozenset({""})
    if exact:
        return _Info(run)
    return _Info(None, _better(best, _Info(run).needs))


def _node(item: tuple, ignore_case: bool) -> _Info:
    op, av = item
    if op is C.LITERAL:
        ch = _char(av, ignore_case)
        return _ANYTHING if ch is None else _Info(frozenset({ch}))
    if op is C.IN:
        return _in(av, ignore_case)
    if op in _ZERO_WIDTH:
        return _EMPTY
    if op is C.SUBPATTERN:
        _, add_flags, del_flags, pattern = av
        if add_flags or del_flags:  # (?i:...) and the like: not worth following
            return _ANYTHING
        return _sequence(pattern, ignore_case)
    if op is C.ATOMIC_GROUP:
        return _sequence(av, ignore_case)
    if op is C.BRANCH:
        infos = [_sequence(branch, ignore_case) for branch in av[1]]
        if all(i.exact is not None for i in infos):
            union = frozenset().union(*(i.exact for i in infos))
            if len(union) <= _RUN_STRINGS:
                return _Info(union)
        if any(i.needs is None for i in infos):
            return _ANYTHING
        needs = frozenset().union(*(i.needs for i in infos))
        return _Info(None, needs if len(needs) <= MAX_GATE_STRINGS else None)
    if op in _REPEATS:
        low, high, pattern = av
        inner = _sequence(pattern, ignore_case)
        if low == 0:
            if high == 1 and inner.exact is not None:
                return _Info(inner.exact | {""})
            return _ANYTHING
        if low == high == 1:
            return inner
        return _Info(None, inner.needs)  # one repetition at least: its strings
    return _ANYTHING  # ANY, NOT_LITERAL, CATEGORY, GROUPREF, GROUPREF_EXISTS


def required_literals(pattern: re.Pattern[str]) -> frozenset[str] | None:
    """Strings of which every match of ``pattern`` contains one (folded by :func:`fold` when the
    pattern ignores case), or None when no such set of at most :data:`MAX_GATE_STRINGS` is
    found."""
    ignore_case = bool(pattern.flags & re.IGNORECASE)
    return _sequence(list(_parser.parse(pattern.pattern, pattern.flags)), ignore_case).needs


class _Registry:
    """Every gated pattern of one case mode by gate string, and an Aho-Corasick automaton
    (``pyahocorasick``) that finds which of the strings a text holds in one pass; rebuilt when a
    pattern was added since. A text's open patterns are then those its strings name."""

    def __init__(self) -> None:
        self.owners: dict[str, list[Gated]] = {}
        self.short: list[str] = []  # looked for with ``in`` (_SCANNED_CHARS)
        self.automaton: ahocorasick.Automaton | None = None

    def add(self, gated: Gated) -> None:
        for t in gated.gate or ():
            if t not in self.owners:
                self.owners[t] = []
                if len(t) < _SCANNED_CHARS:
                    self.short.append(t)
                else:
                    self.automaton = None
            self.owners[t].append(gated)

    def opened(self, text: str) -> set[Gated]:
        """The patterns whose gate ``text`` (already folded for this case mode) opens."""
        if self.automaton is None and len(self.owners) > len(self.short):
            automaton = ahocorasick.Automaton()
            for t in self.owners:
                if len(t) >= _SCANNED_CHARS:
                    automaton.add_word(t, t)
            automaton.make_automaton()
            self.automaton = automaton
        present = {t for _, t in self.automaton.iter(text)} if self.automaton else set()
        present.update(t for t in self.short if t in text)
        return {g for t in present for g in self.owners[t]}


# Gate strings shorter than this are looked for with ``in``: "$" or "\n" occur so often that
# collecting each occurrence from the automaton would cost more than the search they gate.
_SCANNED_CHARS = 3
_REGISTRIES = {False: _Registry(), True: _Registry()}


class Scanned:
    """One text as gates read it: the text, and (computed once per case mode, on first use) the
    gated patterns it opens. Build one per text that several :class:`Gated` patterns search."""

    __slots__ = ("text", "_opened")

    def __init__(self, text: str) -> None:
        self.text = text
        self._opened: dict[bool, set[Gated]] = {}

    def opens(self, gated: Gated) -> bool:
        """Whether the text holds one of ``gated``'s gate strings."""
        opened = self._opened.get(gated.ignore_case)
        if opened is None:
            text = fold(self.text) if gated.ignore_case else self.text
            opened = self._opened[gated.ignore_case] = _REGISTRIES[gated.ignore_case].opened(text)
        return gated in opened


class Gated:
    """A compiled pattern with its gate. :meth:`search` and :meth:`finditer` answer as the
    pattern's own do, for a text given as is or as :class:`Scanned` (one scan shared by every
    gated pattern run over it)."""

    __slots__ = ("pattern", "gate", "ignore_case")

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.gate = required_literals(pattern)
        self.ignore_case = bool(pattern.flags & re.IGNORECASE)
        _REGISTRIES[self.ignore_case].add(self)

    def _open(self, scan: Scanned) -> bool:
        return self.gate is None or scan.opens(self)

    def search(self, text: str | Scanned) -> re.Match[str] | None:
        """``pattern.search(text)``."""
        scan = text if type(text) is Scanned else Scanned(text)
        return self.pattern.search(scan.text) if self._open(scan) else None

    def finditer(self, text: str | Scanned) -> Iterator[re.Match[str]]:
        """``pattern.finditer(text)``."""
        scan = text if type(text) is Scanned else Scanned(text)
        return self.pattern.finditer(scan.text) if self._open(scan) else iter(())
