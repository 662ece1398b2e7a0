"""The Pylota Mail query language: tokenizer, recursive-descent parser and canonical renderer.

Pure: no I/O, no clock and no time zone. It turns the ``q`` argument of ``mail_search`` into an AST
of frozen Structs; later search modules run that AST, and responses echo :func:`render`'s string.
The language is the one taught by the ``mail_search`` description (spec section 4.3) and the
``mail_search_strategy`` prompt (spec section 6.1); operators are read as the QA kit's search
judgments read them. Callers pass ``q`` already limited to 1,024 characters by the tool schema;
the parser allows 16 levels of parentheses and :data:`MAX_OPERATORS` operators.

Grammar (EBNF; tokens are separated by white space, and ``(``, ``)`` and quotes also end a word)::

    query    = [ and_expr ] ;
    and_expr = or_expr , { or_expr } ;                 (* implicit AND between terms *)
    or_expr  = unary , { "OR" , unary } ;              (* OR binds tighter than AND *)
    unary    = [ "-" ] , primary ;                     (* "-" directly before what it excludes *)
    primary  = word | phrase | operator | "(" , and_expr , ")" ;
    operator = name , ":" , ( bare_value | phrase ) ;  (* no space after the colon *)
    phrase   = quote , { any character but a quote } , quote ;
    quote    = '"' | "“" | "”" ;

So ``a b OR c d`` is ``a AND (b OR c) AND d``. A term repeated in one AND or one OR counts once. Only upper-case ``OR`` is the keyword; ``or`` is a
word. Parentheses group (``(a b) OR c``); they are not in the spec, but models write them from
habit, and without them a parenthesis would be read as part of a word. Runs of white space inside
quotes count as one space.

Operators. Names are case-insensitive; ``Operator.value`` keeps the value as typed, without quotes,
and ``Operator.normalized`` is the form a search module compares:

- ``from: to: participant:``: an address, ``@domain`` or part of a name. Normalized: an address or
  domain lower-cased, a name lower-cased with white space collapsed. A value with ``@`` must be ``local@domain`` or ``@domain``.
- ``subject: filename:``: a word or quoted phrase; normalized lower-cased.
- ``ref:``: a plate, or an invoice, order, claim or PCN number, an amount or a phone number.
  Normalized: upper-case with white space and dashes removed; it must keep a letter or a digit.
- ``custom:NAME:VALUE``: a value of the tenant's pattern ``NAME``; normalized ``name:VALUE``, VALUE
  as for ``ref:``.
- ``after: before:``: ``YYYY-MM-DD``, or an RFC 3339 date-time with an offset. Normalized: the date,
  or the instant in UTC as ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``.
- ``newer_than: older_than:``: ``<n>d``, ``<n>w``, ``<n>m`` or ``<n>y``, from 1 day to 100 years;
  normalized to the number of days, as digits.
- ``has:attachment``; ``type:`` one of :data:`ATTACHMENT_TYPES`; ``in:inbound``, ``in:outbound``;
  ``is:unread``, ``is:read``, ``is:needs_reply``. Case-insensitive; normalized lower-case.
- ``label:``: ``^[a-z0-9][a-z0-9_:-]{0,63}$`` after lower-casing (the pattern admits no capitals, so
  ``label:Claims`` means ``claims``); ``category:`` one of ``shared.mail.triage.CATEGORIES``.
  Normalized lower-case.
- ``thread:``: ``thr_`` and 26 Crockford base32 characters, either case; normalized upper-case.

``after:D`` means on or after D 00:00 and ``before:D`` strictly before D 00:00 in the tenant's time
zone; the parser keeps the date and the search module applies the zone. A date-time carries its own
offset, so it is an instant. Durations count days: ``w`` = 7, ``m`` = 30, ``y`` = 365.

``custom:NAME:VALUE`` searches references of a pattern the organisation defines (booking references,
for instance). ``custom_patterns`` maps each ``NAME`` (case-insensitive) to a regular expression
that must match the whole normalized VALUE; the tenant's patterns are checked when they are saved.

What counts as an operator: a word ``NAME:VALUE`` whose ``NAME`` is an operator above. Otherwise the
word is an unknown operator, and an error, when ``NAME`` is two or more ASCII letters or ``_`` and
``VALUE`` is quoted, or is non-empty and starts with neither ``/`` nor ``:``. Everything else is a
plain word: times and ratios (``10:30``), URLs (``https://…``), ``std::string`` and ``fe80::1``,
single letters (``C:\\temp``), names with other characters (``Acked-by:``, ``Message-ID:<…>``) and
words ending in a colon (``Re:``). A known operator with nothing after the colon is an error, since
``from: jo`` is a typo for ``from:jo``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, date, datetime
from enum import StrEnum
from types import MappingProxyType
from typing import NamedTuple

import msgspec

from shared.errors import PylotaError, invalid
from shared.ids import Prefix, is_id
from shared.mail.attachment_types import ATTACHMENT_TYPES
from shared.mail.triage import CATEGORIES
from shared.mail.patterns import compile_pattern

__all__ = [
    "ATTACHMENT_TYPES",
    "DAYS_PER_UNIT",
    "MAX_OPERATORS",
    "And",
    "Node",
    "Not",
    "Operator",
    "OperatorName",
    "Or",
    "Phrase",
    "Query",
    "Term",
    "may_use_custom",
    "parse",
    "render",
]


class OperatorName(StrEnum):
    """The operators of the query language (spec sections 4.3 and 6.1)."""

    FROM = "from"
    TO = "to"
    PARTICIPANT = "participant"
    SUBJECT = "subject"
    REF = "ref"
    CUSTOM = "custom"
    AFTER = "after"
    BEFORE = "before"
    NEWER_THAN = "newer_than"
    OLDER_THAN = "older_than"
    HAS = "has"
    FILENAME = "filename"
    TYPE = "type"
    IN = "in"
    IS = "is"
    LABEL = "label"
    CATEGORY = "category"
    THREAD = "thread"


#: Days per unit of ``newer_than:``/``older_than:``; months and years are fixed lengths.
DAYS_PER_UNIT: Mapping[str, int] = MappingProxyType({"d": 1, "w": 7, "m": 30, "y": 365})


# --- AST ---------------------------------------------------------------------------------------


class _Node(msgspec.Struct, frozen=True, tag_field="kind", tag=str.lower):
    """Base of the AST nodes; tagged so that a parsed query can travel as JSON (to a worker, say)."""


class Term(_Node, frozen=True):
    """A plain word, as typed."""

    text: str


class Phrase(_Node, frozen=True):
    """A quoted phrase: its words in this order. Never empty, white space collapsed."""

    text: str


class Operator(_Node, frozen=True):
    """``name:value``; ``normalized`` is the form to compare (see the module docstring)."""

    name: OperatorName
    value: str
    normalized: str


class Not(_Node, frozen=True):
    """``-node``: excludes what ``node`` matches."""

    node: Node


class Or(_Node, frozen=True):
    """``a OR b OR …``: at least two alternatives, none of them an ``Or``."""

    nodes: tuple[Node, ...]


class And(_Node, frozen=True):
    """Space-separated terms: at least two, none of them an ``And``."""

    nodes: tuple[Node, ...]


#: Any node of the AST.
Node = Term | Phrase | Operator | Not | Or | And


class Query(msgspec.Struct, frozen=True):
    """A parsed query; ``root`` is None for the empty query, which lists the newest messages."""

    root: Node | None

    def render(self) -> str:
        """The canonical query string ("" for the empty query)."""
        return "" if self.root is None else render(self.root)


# --- operator values -----------------------------------------------------------------------------


class _BadValue(Exception):
    """A value an operator rejects; the parser turns it into ``invalid_request``."""

    def __init__(self, reason: str, fix: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fix = fix


class _Rule(NamedTuple):
    normalize: Callable[[str], str]
    fix: str  # ``{op}`` stands for the operator's name


_DOMAIN = r"[^\s@.]+(?:\.[^\s@.]+)*"
_ADDRESS = re.compile(rf"[^\s@]*@{_DOMAIN}")
# Dashes people type inside references: hyphen-minus, U+2010..U+2015 and the minus sign.
_REF_SEPARATORS = re.compile(r"[\s\-\u2010-\u2015\u2212]+")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DATE_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2})"
)
# Six digits bound int() and the day count long before DAYS_PER_UNIT multiplies them.
_DURATION = re.compile(r"([0-9]{1,6})([dwmy])")
_MAX_DAYS = 100 * DAYS_PER_UNIT["y"]  # keeps "now - days" a valid datetime downstream
_LABEL = re.compile(r"[a-z0-9][a-z0-9_:-]{0,63}")  # mail_list_threads' label pattern
_SHOWN = 60  # characters of a token quoted in a message


def _cut(text: str) -> str:
    """``text`` cut so that a long word cannot flood a message."""
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def _show(text: str) -> str:
    return repr(_cut(text))


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _address(value: str) -> str:
    if "@" not in value:
        return _text(value)
    if _ADDRESS.fullmatch(value) is None:
        raise _BadValue(f"{_show(value)} is neither an address nor an @domain")
    return value.lower()


def _text(value: str) -> str:
    # lower(), not casefold(): search compares with SQL ILIKE, which would not match "ß" to "ss".
    return _collapse(value.lower())


def _reference(value: str) -> str:
    normalized = _REF_SEPARATORS.sub("", value).upper()
    if not any(ch.isalnum() for ch in normalized):
        raise _BadValue(f"{_show(value)} has no letter or digit")
    return normalized


def _custom(value: str, *, patterns: Mapping[str, str]) -> str:
    name, _, reference = value.partition(":")
    key = name.lower()
    if key not in patterns:
        known = ", ".join(sorted(patterns))
        raise _BadValue(
            f"this organisation defines no custom pattern named '{name}'",
            f"Use one of the patterns {known}, e.g. custom:{min(patterns)}:VALUE."
            if patterns
            else "No custom patterns are defined; search the reference with ref:VALUE.",
        )
    if not reference.strip():
        raise _BadValue(f"it has no value after '{name}:'")
    normalized = _reference(reference)
    if compile_pattern(patterns[key]).fullmatch(normalized) is None:
        raise _BadValue(
            f"{_show(reference)} does not match the '{key}' pattern",
            f"Check the reference, or search it with ref:{normalized}.",
        )
    return f"{key}:{normalized}"


def _instant(value: str) -> str:
    upper = value.upper()  # RFC 3339 section 5.6 allows a lower-case "t" and "z"
    try:
        if _DATE.fullmatch(upper):
            return date.fromisoformat(upper).isoformat()
        if _DATE_TIME.fullmatch(upper):
            moment = datetime.fromisoformat(upper).astimezone(UTC)
            return moment.isoformat().replace("+00:00", "Z")
    except (ValueError, OverflowError) as exc:  # 2026-02-30, 25:00, or year 1 moved before UTC
        raise _BadValue(f"{_show(value)} is not a real date or time") from exc
    raise _BadValue(f"{_show(value)} is not a date")


def _duration(value: str) -> str:
    match = _DURATION.fullmatch(value.lower())
    if match is None:
        raise _BadValue(f"{_show(value)} is not a whole number followed by d, w, m or y")
    days = int(match[1]) * DAYS_PER_UNIT[match[2]]
    if not 1 <= days <= _MAX_DAYS:
        raise _BadValue(f"{_show(value)} is not between 1 day and 100 years")
    return str(days)


def _choice(*allowed: str) -> Callable[[str], str]:
    def normalize(value: str) -> str:
        if value.lower() not in allowed:
            raise _BadValue(f"{_show(value)} is not {' or '.join(allowed)}")
        return value.lower()

    return normalize


def _label(value: str) -> str:
    if not value.isascii() or _LABEL.fullmatch(value.lower()) is None:
        raise _BadValue(f"{_show(value)} is not a label name")
    return value.lower()


def _category(value: str) -> str:
    if value.lower() not in CATEGORIES:
        raise _BadValue(f"{_show(value)} is not a category")
    return value.lower()


def _thread(value: str) -> str:
    prefix, _, body = value.partition("_")
    # Crockford base32 is read case-insensitively; ids are stored upper-case.
    candidate = f"{prefix.lower()}_{body.upper()}"
    if not value.isascii() or not is_id(candidate, Prefix.THREAD):
        raise _BadValue(f"{_show(value)} is not a thread id")
    return candidate


_ADDRESS_FIX = "Give an address ({op}:jo@example.net), a domain ({op}:@example.com) or part of a name ({op}:jo or {op}:\"Jo Smith\")."
_INSTANT_FIX = "Give a date as YYYY-MM-DD ({op}:2026-09-01) or an RFC 3339 date-time with an offset ({op}:2026-09-01T09:30:00Z)."
_DURATION_FIX = "Give a whole number and a unit d, w, m (30 days) or y (365 days), up to 100 years, e.g. {op}:30d or {op}:1y."

#: How each fixed operator checks and normalizes its value; ``custom`` is bound per tenant in ``parse``.
_RULES: Mapping[OperatorName, _Rule] = {
    OperatorName.FROM: _Rule(_address, _ADDRESS_FIX),
    OperatorName.TO: _Rule(_address, _ADDRESS_FIX),
    OperatorName.PARTICIPANT: _Rule(_address, _ADDRESS_FIX),
    OperatorName.SUBJECT: _Rule(_text, 'Give a word or a quoted phrase, e.g. subject:"change of dates".'),
    OperatorName.REF: _Rule(_reference, 'Give the reference with its letters and digits, e.g. ref:AB12CDE or ref:"INV 2026-0042".'),
    OperatorName.AFTER: _Rule(_instant, _INSTANT_FIX),
    OperatorName.BEFORE: _Rule(_instant, _INSTANT_FIX),
    OperatorName.NEWER_THAN: _Rule(_duration, _DURATION_FIX),
    OperatorName.OLDER_THAN: _Rule(_duration, _DURATION_FIX),
    OperatorName.HAS: _Rule(_choice("attachment"), "Use has:attachment; for a kind of file use type:, e.g. type:pdf."),
    OperatorName.FILENAME: _Rule(_text, 'Give part of the file name, e.g. filename:invoice or filename:"march report".'),
    OperatorName.TYPE: _Rule(_choice(*sorted(ATTACHMENT_TYPES)), f"Use one of type:{', type:'.join(sorted(ATTACHMENT_TYPES))}."),
    OperatorName.IN: _Rule(_choice("inbound", "outbound"), "Use in:inbound or in:outbound."),
    OperatorName.IS: _Rule(_choice("unread", "read", "needs_reply"), "Use is:unread, is:read or is:needs_reply."),
    OperatorName.LABEL: _Rule(_label, "Give a label of up to 64 lower-case letters, digits, _, : or -, starting with a letter or digit, e.g. label:claims."),
    OperatorName.CATEGORY: _Rule(_category, f"Use one of category:{', category:'.join(CATEGORIES)}."),
    OperatorName.THREAD: _Rule(_thread, "Give a thread id from a result: thr_ and 26 characters of 0-9 and A-Z without I, L, O, U, e.g. thread:thr_01HZY8Q6W4C5N2M7R3T9V0XKJB."),
}
_CUSTOM_FIX = "Write custom:NAME:VALUE with a pattern NAME your organisation defines, e.g. custom:booking:ABC123."

# Names people reach for that the language spells differently; offered in the unknown-operator fix.
_SUGGESTIONS: Mapping[str, str] = {
    "cc": "to:", "bcc": "to:", "sender": "from:", "recipient": "to:", "date": "after: or before:",
    "since": "after:", "until": "before:", "newer": "newer_than:", "older": "older_than:",
    "tag": "label:", "file": "filename:", "attachment": "has:attachment or filename:",
    "ext": "type:", "reference": "ref:", "is_unread": "is:unread",
}  # fmt: skip


# --- tokens ---------------------------------------------------------------------------------------


class _Kind(StrEnum):
    WORD = "word"
    PHRASE = "phrase"
    OR = "OR"
    NOT = "-"
    OPEN = "("
    CLOSE = ")"
    END = "end"


class _Token(NamedTuple):
    kind: _Kind
    start: int  # index into q, for messages
    text: str  # the source span, for messages
    value: str = ""  # a word (with an attached quoted value unquoted), or a phrase's text
    quoted: bool = False  # the word is ``name:"…"``


_QUOTES = '"\u201c\u201d'  # models and word processors send curly quotes too
_QUOTE = re.compile(f"[{_QUOTES}]")
_WORD_END = re.compile(rf"[\s(){_QUOTES}]")
_ATTACHES_QUOTE = re.compile(r"[A-Za-z_]+:(?:.*:)?", re.DOTALL)  # name:"…" and custom:NAME:"…"
_OPERATOR_SHAPE = re.compile(r"([A-Za-z_]+):(.*)", re.DOTALL)
_MAX_DEPTH = 16  # bounds recursion; no real query nests parentheses this deep

_EXCLUDE_FIX = "Attach '-' to what it excludes, with no space: -draft, -\"change of dates\" or -from:@example.com."
_OR_FIX = "Put a term on each side of OR, e.g. invoice OR receipt; to search for the word 'or', write it in lower case."
_CLOSE_FIX = "Remove the ')' or add its '('; to search for text with parentheses, put it in quotes."

#: Syntax errors: message (``{at}`` is the 1-based character, ``{text}`` the token) and fix.
_SYNTAX: Mapping[str, tuple[str, str]] = {
    "unclosed_quote": ("Unbalanced quote at character {at}: {text} is never closed.",
                       "Close the phrase with a second \", or remove the quote to search the words separately."),
    "empty_phrase": ("Empty phrase {text} at character {at}.", "Put words between the quotes, or remove them."),
    "lone_minus": ("'-' at character {at} has nothing to exclude.", _EXCLUDE_FIX),
    "double_minus": ("'--' at character {at} excludes twice.",
                     "Use a single '-'; to search for text that starts with '-', put it in quotes."),
    "minus_before": ("'-' at character {at} is followed by {text}, not by something to exclude.", _EXCLUDE_FIX),
    "or_first": ("'OR' at character {at} has no alternative before it.", _OR_FIX),
    "or_last": ("'OR' at character {at} has no alternative after it.", _OR_FIX),
    "unopened": ("')' at character {at} has no matching '('.", _CLOSE_FIX),
    "unclosed": ("'(' at character {at} is never closed.", "Add the matching ')', or remove the '('."),
    "empty_group": ("Empty parentheses '()' at character {at}.", "Put terms inside the parentheses, or remove them."),
    "too_deep": (f"'(' at character {{at}} nests parentheses deeper than {_MAX_DEPTH} levels.",
                 f"Use at most {_MAX_DEPTH} levels of parentheses; OR already binds tighter than spaces."),
}  # fmt: skip


def _syntax_error(error: str, start: int, text: str = "") -> PylotaError:
    message, fix = _SYNTAX[error]
    return invalid("q", message.format(at=start + 1, text=_show(text)), fix)


def _quoted(q: str, start: int) -> tuple[str, int]:
    """The collapsed text of the quoted section opening at ``start``, and the index after it."""
    close = _QUOTE.search(q, start + 1)
    if close is None:
        raise _syntax_error("unclosed_quote", start, q[start:])
    return _collapse(q[start + 1 : close.start()]), close.end()


def _scan(q: str) -> Iterator[_Token]:
    """Split ``q`` into tokens; raises ``invalid_request`` for an unclosed quote or a lone '-'."""
    i, n = 0, len(q)
    while i < n:
        ch = q[i]
        if ch.isspace():
            i += 1
        elif ch in "()":
            yield _Token(_Kind(ch), i, ch)
            i += 1
        elif ch == "-":
            if i + 1 == n or q[i + 1].isspace():
                raise _syntax_error("lone_minus", i)
            yield _Token(_Kind.NOT, i, ch)
            i += 1
        elif ch in _QUOTES:
            text, end = _quoted(q, i)
            if not text:
                raise _syntax_error("empty_phrase", i, q[i:end])
            yield _Token(_Kind.PHRASE, i, q[i:end], text)
            i = end
        else:
            stop = _WORD_END.search(q, i)
            end = n if stop is None else stop.start()
            word = q[i:end]
            if end < n and q[end] in _QUOTES and _ATTACHES_QUOTE.fullmatch(word):
                inner, end = _quoted(q, end)
                yield _Token(_Kind.WORD, i, q[i:end], word + inner, quoted=True)
            elif word == "OR":
                yield _Token(_Kind.OR, i, word)
            else:
                yield _Token(_Kind.WORD, i, word, word)
            i = end
    yield _Token(_Kind.END, n, "the end of the query")


# --- parser ----------------------------------------------------------------------------------------


class _Parser:
    """One pass of recursive descent over the tokens of one query (grammar in the module docstring)."""

    def __init__(self, q: str, custom_patterns: Mapping[str, str]) -> None:
        self._tokens = list(_scan(q))
        self._at = 0
        self._depth = 0
        patterns = {name.lower(): pattern for name, pattern in custom_patterns.items()}
        self._rules = {
            **_RULES,
            OperatorName.CUSTOM: _Rule(functools.partial(_custom, patterns=patterns), _CUSTOM_FIX),
        }

    def _peek(self) -> _Token:
        return self._tokens[self._at]

    def _next(self) -> _Token:
        token = self._tokens[self._at]
        self._at += 1
        return token

    def query(self) -> Node | None:
        if self._peek().kind is _Kind.END:
            return None
        node = self._and()
        if (token := self._peek()).kind is _Kind.CLOSE:
            raise _syntax_error("unopened", token.start)
        return node

    def _and(self) -> Node:
        nodes: list[Node] = []
        while self._peek().kind not in (_Kind.END, _Kind.CLOSE):
            node = self._or()
            nodes.extend(node.nodes if isinstance(node, And) else (node,))
        nodes = list(dict.fromkeys(nodes))  # "a a" is "a": a repeat costs a search, adds nothing
        return nodes[0] if len(nodes) == 1 else And(tuple(nodes))

    def _or(self) -> Node:
        nodes: list[Node] = []
        while True:
            node = self._unary()
            nodes.extend(node.nodes if isinstance(node, Or) else (node,))
            if self._peek().kind is not _Kind.OR:
                nodes = list(dict.fromkeys(nodes))
                return nodes[0] if len(nodes) == 1 else Or(tuple(nodes))
            keyword = self._next()
            if self._peek().kind in (_Kind.OR, _Kind.CLOSE, _Kind.END):
                raise _syntax_error("or_last", keyword.start)

    def _unary(self) -> Node:
        if self._peek().kind is not _Kind.NOT:
            return self._primary()
        minus = self._next()
        following = self._peek()
        if following.kind is _Kind.NOT:
            raise _syntax_error("double_minus", minus.start)
        if following.kind in (_Kind.OR, _Kind.CLOSE, _Kind.END):
            raise _syntax_error("minus_before", minus.start, following.text)
        return Not(self._primary())

    def _primary(self) -> Node:
        # "-" is taken by _unary, and END and ")" end _and, so neither reaches here.
        token = self._next()
        if token.kind is _Kind.PHRASE:
            return Phrase(token.value)
        if token.kind is _Kind.WORD:
            return self._word(token)
        if token.kind is _Kind.OR:
            raise _syntax_error("or_first", token.start)
        return self._group(token)

    def _group(self, opening: _Token) -> Node:
        if self._depth == _MAX_DEPTH:
            raise _syntax_error("too_deep", opening.start)
        if self._peek().kind is _Kind.CLOSE:
            raise _syntax_error("empty_group", opening.start)
        self._depth += 1
        node = self._and()
        self._depth -= 1
        if self._next().kind is not _Kind.CLOSE:
            raise _syntax_error("unclosed", opening.start)
        return node

    def _word(self, token: _Token) -> Node:
        shape = _OPERATOR_SHAPE.fullmatch(token.value)
        if shape is None:
            return Term(token.value)
        name, value = shape[1].lower(), shape[2]
        if name in self._rules:
            return self._operator(OperatorName(name), value, token)
        if token.quoted or (len(name) > 1 and value and not value.startswith(("/", ":"))):
            hint = f"Did you mean {_SUGGESTIONS[name]}? " if name in _SUGGESTIONS else ""
            raise invalid(
                "q",
                f"Unknown search operator '{shape[1]}:' in {_show(token.text)} at character {token.start + 1}.",
                f"{hint}Use one of the operators {', '.join(f'{op}:' for op in OperatorName)}; "
                f'to search for the text itself, put it in quotes: "{_cut(_collapse(token.value))}".',
            )
        return Term(token.value)

    def _operator(self, name: OperatorName, value: str, token: _Token) -> Operator:
        rule = self._rules[name]
        if not value:
            raise invalid(
                "q",
                f"Operator '{name}:' at character {token.start + 1} has no value.",
                "Put the value right after the colon, with no space. " + rule.fix.format(op=name),
            )
        try:
            normalized = rule.normalize(value)
        except _BadValue as exc:
            raise invalid(
                "q",
                f"Invalid value in {_show(token.text)} at character {token.start + 1}: {exc.reason}.",
                exc.fix or rule.fix.format(op=name),
            ) from exc
        return Operator(name, value, normalized)


def may_use_custom(q: str) -> bool:
    """Whether ``q`` may hold a ``custom:`` operator, so that :func:`parse` needs the tenant's
    patterns: a caller reads them only then (one round trip fewer for every other search, issue
    14). Conservative: an operator name is matched case-insensitively, and no character but
    ASCII ones lower-cases to the letters of ``custom``."""
    return "custom:" in q.lower()


def parse(q: str, *, custom_patterns: Mapping[str, str] | None = None) -> Query:
    """Parse ``q`` (the ``mail_search`` query language, spec sections 4.3 and 6.1).

    Args:
        q: the query; empty or white space only gives ``Query(root=None)``.
        custom_patterns: the tenant's ``custom:`` patterns, name to a regular expression matched
            against the whole normalized value; None when the tenant defines none.

    Returns:
        A :class:`Query` whose ``root`` is the AST: And/Or hold at least two nodes and are flattened
        (no And directly inside an And, no Or inside an Or).

    Raises:
        PylotaError: ``invalid_request`` with ``details.path == "q"`` for an unknown operator, a bad
            operator value, an unbalanced quote or parenthesis, a dangling OR or a lone '-'; the
            message names the token and the character where it starts, and ``fix`` says what to write.
    """
    query = Query(_Parser(q, custom_patterns or {}).query())
    _check_range(query.root)
    _check_operators(query.root)
    return query


#: Most operators one query holds. Each is a check of its own on every candidate message, and
#: PostgreSQL's planning of many ANDed ones grows much faster than their number (measured on
#: 6,046 messages: 32 ``ref:`` 0.16 s, 64 0.6 s, 128 3.9 s, 200 15 s: found by an attack).
MAX_OPERATORS = 32


def _operators(node: Node | None) -> int:
    match node:
        case Operator():
            return 1
        case Not(inner):
            return _operators(inner)
        case And(nodes) | Or(nodes):
            return sum(_operators(n) for n in nodes)
    return 0


def _check_operators(root: Node | None) -> None:
    count = _operators(root)
    if count > MAX_OPERATORS:
        raise invalid("q", f"The query holds {count} operators; one search takes at most "
                      f"{MAX_OPERATORS}.", "Split it into several searches (for many references, "
                      f"at most {MAX_OPERATORS} ref: a search), or drop operators that narrow "
                      "little.")


def _check_range(root: Node | None) -> None:
    """Refuse a query whose own ``after:`` is not before its own ``before:``: nothing can match,
    and swapped dates otherwise read as "no such mail" (found by an attack). Only operators the
    query ANDs at its top are compared, and only two dates or two instants (a date's zone is the
    tenant's, applied later)."""
    nodes = root.nodes if isinstance(root, And) else (root,) if root is not None else ()
    bounds: dict[OperatorName, list[str]] = {OperatorName.AFTER: [], OperatorName.BEFORE: []}
    for node in nodes:
        if isinstance(node, Operator) and node.name in bounds:
            bounds[node.name].append(node.normalized)
    for after in bounds[OperatorName.AFTER]:
        for before in bounds[OperatorName.BEFORE]:
            if ("T" in after) == ("T" in before) and _moment(after) >= _moment(before):
                raise invalid("q", f"after:{after} is not before before:{before}, so no message "
                              "can match.", "Swap the two, or drop one: after: is the first "
                              "day searched, before: the day after the last.")


def _moment(value: str) -> str | datetime:
    """A normalized after:/before: value in a form that compares in time order."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if "T" in value else value


# --- rendering -------------------------------------------------------------------------------------

_NEEDS_QUOTES = re.compile(rf"[\s(){_QUOTES}]")


def render(node: Node) -> str:
    """The canonical query string of ``node``: ``parse(render(parse(q).root)) == parse(q)``.

    Operator names are lower-case, values are quoted only when they hold white space or
    parentheses, and parentheses appear only where precedence needs them.
    """
    match node:
        case Term(text):
            return text
        case Phrase(text):
            return f'"{text}"'
        case Operator(name, value):
            return f'{name}:"{value}"' if _NEEDS_QUOTES.search(value) else f"{name}:{value}"
        case Not(inner):
            return "-" + _grouped(inner, (And, Or, Not))
        case Or(nodes):
            return " OR ".join(_grouped(child, (And, Or)) for child in nodes)
        case And(nodes):
            return " ".join(_grouped(child, (And,)) for child in nodes)
    raise TypeError(f"not a query node: {node!r}")


def _grouped(node: Node, needs_parentheses: tuple[type, ...]) -> str:
    text = render(node)
    return f"({text})" if isinstance(node, needs_parentheses) else text
