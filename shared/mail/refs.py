"""References in mail: extraction at ingest, the forms a ``ref:`` value is looked up by, and the
``message_refs`` table this module owns (spec section 4.3, ``ref:`` and ``custom:``).

What is extracted, from the subject and the whole text (quoted text included, so a reply that
quotes an invoice number is found by it):

- ``plate``: UK registration plates in the current format, ``AB12 CDE`` (two letters, two digits,
  three letters; any spacing, any case); the older UK prefix (``A123 BCD``) and suffix
  (``ABC 123D``) formats and French plates (``AB-123-CD``) when written in capitals, since in lower
  case they are ordinary words ("q3 for").
- ``invoice``, ``order``, ``claim``, ``pcn``, ``reference``: a number right after its keyword
  ("Invoice INV-2026-0042", "order #55123", "claim no. CLM 88-1234", "PCN: AB12345678",
  "Penalty Charge Notice WK0512345", "ref: XK-99-17", "order number is PO-44817"). The number
  must hold a digit; an optional letter prefix is joined by nothing, a space, ``-`` or ``/``; digit
  groups may be split by spaces, ``-`` or ``/``.
- The same kinds without their keyword: a code of 2 to 6 capital letters and 3 or more digits,
  joined by nothing, ``-`` or ``/`` (``PO-44817``, ``INV-2026-0042``, ``KT09917332``). Its prefix
  names the kind (``PO``/``ORD`` order, ``INV`` invoice, ``CLM`` claim, ``PCN`` pcn; anything else
  ``reference``); with one of those prefixes the digits alone are stored too, so ``ref:44817``
  finds ``PO-44817``. Capitals only, and no space inside, so that "about 300" is not a code.
- ``amount``: a sum with a currency (``£1,234.50``, ``$20``, ``EUR 99.90``, ``1.234,50 €`` is
  not read: only ``.`` as the decimal mark; ``$1`` to ``$9`` without cents are shell and regex
  arguments, not read). Stored as ``1234.50`` and ``GBP1234.50``.
- ``phone``: 9 to 15 digits that start with ``+`` or ``0`` (``+44 20 7946 0018``,
  ``(020) 7946-0018``), and North American numbers (``(415) 555-0134``, ``415.555.0134``).
  Stored as digits with the ``+``; a ``+44`` number also as its national form ``020…`` and a
  ``+1`` number as its ten digits, so either way of writing it finds the other. Other countries'
  national forms (``01 23 45 67 89`` in France) are stored as written: search them that way or
  with their ``+`` form as the mail wrote it.
- ``custom:NAME``: values that satisfy the whole of one of the tenant's patterns
  (``tenant_ref_patterns``): every run of up to three letter-digit tokens joined by white space
  or dashes is tried, normalized (``xka-123`` is tried as ``XKA123``).

Normalization (:func:`normalize`) is the parser's: upper case, white space and dashes removed.
Extraction is pure; the store functions take the connection first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import asyncpg

from shared.mail.patterns import compile_pattern
from shared.mail.prefilter import Gated, Scanned

__all__ = ["Ref", "extract_refs", "lookup_forms", "normalize", "save_refs", "save_refs_of",
           "refs_of",
           "sharing_refs", "count_refs", "REFS_COLUMN", "refs_from", "MAX_REFS", "MAX_REF_CHARS", "MOST_SHARING", "SHOWN_REFS", "TEXT_CHARS"]

#: Most references stored for one message; a mass mailing of numbers should not flood the table.
MAX_REFS = 200
#: Longest reference value stored; longer runs of letters and digits are not references, and an
#: index entry must fit a PostgreSQL page.
MAX_REF_CHARS = 64
#: Characters of a message's text read for references: the same prefix the full-text index
#: holds (migration 0001), so a 50 MB body costs no more than a long letter.
TEXT_CHARS = 200_000

Ref = tuple[str, str]
"""``(kind, value)``, value normalized."""

_SEPARATORS = re.compile(r"[\s\-\u2010-\u2015\u2212]+")
# Not inside a longer token joined by dots, slashes or underscores: "22550f7..cd14fec" in a diff
# is two commit hashes, not the plate CD14FEC.
_PLATE = re.compile(r"(?<![A-Z0-9._/])([A-Z]{2}[0-9]{2}) ?([A-Z]{3})(?![A-Z0-9_/])")
# Matched against the text as written: in capitals only (module docstring).
_PLATES_CAPITALS = re.compile(
    r"(?<![A-Za-z0-9])(?:([A-Z][0-9]{1,3}) ?([A-Z]{3})"      # UK prefix, A123 BCD
    r"|([A-Z]{3}) ?([0-9]{1,3}[A-Z])"                        # UK suffix, ABC 123D
    r"|([A-Z]{2})-([0-9]{3})-([A-Z]{2}))(?![A-Za-z0-9])")   # France, AB-123-CD
# Not part of an identifier (RFC1001_PORT) or a path.
_CODE = re.compile(r"(?<![A-Za-z0-9/\\_-])([A-Z]{2,6})[-/]?([0-9]{3,}(?:[-/][0-9]+)*)(?![A-Za-z0-9_])")
_CODE_KINDS = {"PO": "order", "ORD": "order", "INV": "invoice", "CLM": "claim", "PCN": "pcn"}
_NUMBER = r"(?P<v>(?:[A-Z]{1,6}[-/ ]?)?[A-Z0-9]*[0-9][A-Z0-9]*(?:[ \-/][A-Z0-9]*[0-9][A-Z0-9]*)*)"
_KEYWORDS = {
    "invoice": r"INVOICE|INV",
    "order": r"ORDER|PURCHASE ORDER|PO",
    "claim": r"CLAIM",
    "pcn": r"PCN|PENALTY CHARGE NOTICE|PENALTY CHARGE",
    "reference": r"REFERENCE|REF|BOOKING|TICKET|CASE|POLICY|ACCOUNT",
}
_KEYED = [(kind, Gated(re.compile(
    rf"(?<![A-Z0-9_])(?:{words})\b\.?(?:\s*(?:NO\.?|NUMBER|NUM\.?|#|:|IS))*\s*#?\s*{_NUMBER}"
    r"(?![A-Z0-9])"))) for kind, words in _KEYWORDS.items()]
_CURRENCY = {"£": "GBP", "$": "USD", "€": "EUR", "GBP": "GBP", "USD": "USD", "EUR": "EUR"}
# Up to a thousand billion: a longer run of digits is not a sum of money.
_SUM = r"(?P<n>[0-9]{1,3}(?:,[0-9]{3}){1,4}|[0-9]{1,15})(?:\.(?P<d>[0-9]{1,2}))?"
_AMOUNT_BEFORE = Gated(re.compile(rf"(?P<c>£|\$|€|\b(?:GBP|USD|EUR))\s?{_SUM}(?![0-9])"))
# "$1" alone is a shell or regex argument far more often than a dollar.
_SHELL_ARGUMENT = re.compile(r"\$[0-9](?![0-9.,])")
_AMOUNT_AFTER = Gated(re.compile(rf"(?<![0-9.,]){_SUM}\s?(?P<c>£|€|(?:GBP|USD|EUR)\b)"))
# Not glued to letters on either side, and no ".." inside: "0000000..1080b96" is a diff's index
# line, not a number to call.
_PHONE = re.compile(r"(?<![0-9A-Z+.])(\+|\(?0)(?:[0-9 ()\-]|\.(?!\.)){7,22}[0-9](?![0-9A-Z])")
_NANP = re.compile(r"(?<![0-9+\-.])\(?([2-9][0-9]{2})\)?[ .\-]?([0-9]{3})[ .\-]([0-9]{4})(?![0-9\-])")
_AMOUNT_QUERY = re.compile(rf"(?P<c>£|\$|€|GBP|USD|EUR)?{_SUM}(?P<c2>£|€|GBP|USD|EUR)?")
_PHONE_QUERY = re.compile(r"\+?[0-9().]{9,24}")
_TOKEN = re.compile(r"[A-Z0-9]+")
_JOIN = re.compile(r"[ \t\-\u2010-\u2015\u2212]{1,3}")
#: Tokens a custom reference may span ("ABC 123 456").
_CUSTOM_TOKENS = 3


def normalize(value: str) -> str:
    """Upper case without white space and dashes: the form the query parser gives ``ref:``."""
    return _SEPARATORS.sub("", value).upper()


def _amount(currency: str | None, whole: str, cents: str | None) -> list[str]:
    value = f"{int(whole.replace(',', ''))}.{(cents or '').ljust(2, '0')}"
    return [value, _CURRENCY[currency] + value] if currency else [value]


def _phone(raw: str) -> list[str]:
    digits = re.sub(r"[^0-9]", "", raw)
    plus = raw.lstrip().startswith("+")
    if not 9 <= len(digits) <= 15:
        return []
    if plus:
        forms = ["+" + digits]
        if digits.startswith("44"):
            forms.append("0" + digits[2:])
        elif digits.startswith("1") and len(digits) == 11:
            forms.append(digits[1:])
        return forms
    if not digits.startswith("0"):
        return []
    return [digits, "+44" + digits[1:]] if len(digits) == 11 else [digits]


def extract_refs(subject: str, text: str, custom_patterns: Mapping[str, str] | None = None
                 ) -> list[Ref]:
    """Every reference in ``subject`` and the first :data:`TEXT_CHARS` characters of ``text``,
    deduplicated, at most :data:`MAX_REFS`.

    Args:
        custom_patterns: the tenant's patterns, NAME (lower case) to a regular expression over
            the normalized value; each match is stored as kind ``custom:NAME``.

    Returns:
        ``(kind, value)`` pairs in order of first appearance.
    """
    text = text[:TEXT_CHARS]
    upper = f"{subject}\n{text}".upper()
    found: dict[Ref, None] = {}

    def add(kind: str, value: str) -> None:
        if value and len(value) <= MAX_REF_CHARS and len(found) < MAX_REFS:
            found.setdefault((kind, value), None)

    written = f"{subject}\n{text}"
    scanned = Scanned(upper)  # keywords and currencies are gates: most mail names none
    for m in _PLATE.finditer(upper):
        add("plate", m[1] + m[2])
    for m in _PLATES_CAPITALS.finditer(written):
        add("plate", "".join(g for g in m.groups() if g))
    for kind, pattern in _KEYED:
        for m in pattern.finditer(scanned):
            add(kind, re.sub(r"[\s\-/]+", "", m["v"]))
            prefix, space, rest = m["v"].partition(" ")
            if space and prefix.isalpha():  # "invoice is 123": keep 123 as well as IS123
                add(kind, re.sub(r"[\s\-/]+", "", rest))
    keyed = {value for _, value in found}
    for m in _CODE.finditer(written):
        kind = _CODE_KINDS.get(m[1], "reference")
        digits = re.sub(r"[-/]", "", m[2])
        if m[1] + digits not in keyed:  # "PCN KT099…" is already a pcn, not also a reference
            add(kind, m[1] + digits)
        if m[1] in _CODE_KINDS and digits not in keyed:
            add(kind, digits)
    for amount in (_AMOUNT_BEFORE, _AMOUNT_AFTER):
        for m in amount.finditer(scanned):
            if _SHELL_ARGUMENT.match(upper, m.start()):
                continue
            for value in _amount(m["c"].strip(), m["n"], m["d"]):
                add("amount", value)
    for m in _PHONE.finditer(upper):
        for value in _phone(m[0]):
            add("phone", value)
    for m in _NANP.finditer(upper):
        add("phone", m[1] + m[2] + m[3])
        add("phone", "+1" + m[1] + m[2] + m[3])
    if custom_patterns:
        compiled = [(f"custom:{name}", compile_pattern(regex))
                    for name, regex in custom_patterns.items()]
        for value in _candidates(upper):
            if len(value) > MAX_REF_CHARS:
                continue
            for kind, whole in compiled:
                if whole.fullmatch(value):
                    add(kind, value)
    return list(found)


def _candidates(upper: str) -> Iterable[str]:
    # Runs of 1 to _CUSTOM_TOKENS letter-digit tokens joined by white space or dashes, normalized:
    # "XKA-123" and "XKA 123" both give "XKA123" (and "XKA" and "123" alone).
    tokens = list(_TOKEN.finditer(upper))
    for i, first in enumerate(tokens):
        value = first[0]
        yield value
        for prev, token in zip(tokens[i:i + _CUSTOM_TOKENS - 1], tokens[i + 1:i + _CUSTOM_TOKENS]):
            if not _JOIN.fullmatch(upper, prev.end(), token.start()):
                break
            value += token[0]
            yield value


def lookup_forms(value: str) -> list[str]:
    """The stored values a ``ref:`` value (already :func:`normalize`d) finds.

    The value itself, and without ``#``, ``/`` and brackets; a sum with a currency mark or a
    decimal point also as the stored amount (``£1,234.5`` -> ``GBP1234.50``); a phone number also
    in its other form (``+44…`` and ``0…``). A bare integer is not read as an amount, so ``ref:500``
    finds invoice 500, not £500 (``ref:£500`` or ``ref:500.00`` find that).
    """
    forms = {value, re.sub(r"[#/()\[\]]", "", value)}
    amount = _AMOUNT_QUERY.fullmatch(value)
    if amount and (amount["c"] or amount["c2"] or amount["d"] or "," in amount["n"]):
        forms.update(_amount(amount["c"] or amount["c2"], amount["n"], amount["d"])[-1:])
    if _PHONE_QUERY.fullmatch(value):
        forms.update(_phone(value))
    return sorted(f for f in forms if f)


async def save_refs(conn: asyncpg.Connection, identity_id: str, message_id: str,
                    refs: Iterable[Ref]) -> None:
    """Store ``refs`` for ``message_id`` (idempotent: existing rows are kept)."""
    await save_refs_of(conn, identity_id, [(message_id, refs)])


async def save_refs_of(conn: asyncpg.Connection, identity_id: str,
                       found: Iterable[tuple[str, Iterable[Ref]]]) -> None:
    """Store the refs of each ``(message_id, refs)`` in one statement (idempotent)."""
    rows = [(message_id, identity_id, kind, value) for message_id, refs in found
            for kind, value in refs]
    if rows:
        await conn.executemany(
            "INSERT INTO message_refs (message_id, identity_id, kind, value)"
            " VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING", rows)


async def count_refs(conn: asyncpg.Connection, identity_id: str | None) -> int:
    """How many references are stored for ``identity_id`` (or for every identity)."""
    return await conn.fetchval(
        "SELECT count(*) FROM message_refs WHERE $1::text IS NULL OR identity_id = $1",
        identity_id)


#: Most other messages a reference may be shared with and still relate them (:func:`sharing_refs`).
MOST_SHARING = 50

#: References a Message object lists (``refs_of``); a message may hold up to :data:`MAX_REFS`.
SHOWN_REFS = 50


async def refs_of(conn: asyncpg.Connection, message_ids: list[str]) -> dict[str, list[Ref]]:
    """Up to :data:`SHOWN_REFS` stored references of each message, by kind then value. An amount
    stored both bare and with its currency (``1234.50``, ``GBP1234.50``) is listed once, with it."""
    rows = await conn.fetch(
        "SELECT message_id, kind, value FROM message_refs WHERE message_id = any($1::text[])"
        " ORDER BY message_id, kind, value", message_ids)
    stored: dict[str, list[Ref]] = {}
    for r in rows:
        stored.setdefault(r["message_id"], []).append((r["kind"], r["value"]))
    return {message_id: _shown(refs) for message_id, refs in stored.items()}


#: :func:`refs_of` of one message as a column of a query on ``messages m`` (its stored
#: ``(kind, value)`` records in the same order); :func:`refs_from` reads it.
REFS_COLUMN = """ARRAY(SELECT ROW(r.kind, r.value) FROM message_refs r
    WHERE r.message_id = m.id ORDER BY r.kind, r.value) AS refs"""


def refs_from(value: list[tuple[str, str]]) -> list[Ref]:
    """What :func:`refs_of` says of one message, from its :data:`REFS_COLUMN` value."""
    return _shown([(kind, ref) for kind, ref in value])


def _shown(refs: list[Ref]) -> list[Ref]:
    with_currency = {v[3:] for k, v in refs if k == "amount" and v[:1].isalpha()}
    return [(k, v) for k, v in refs if not (k == "amount" and v in with_currency)][:SHOWN_REFS]


async def sharing_refs(conn: asyncpg.Connection, message_id: str, *, most: int = MOST_SHARING
                       ) -> list[tuple[str, str, str]]:
    """``(other message id, kind, value)`` for every reference ``message_id`` shares with other
    messages of its identity, leaving out a value more than ``most`` others mention: a company's
    phone number or a standard fee ties nothing together, and reading each of its thousands of
    mentions would make the answer slow."""
    rows = await conn.fetch(
        """SELECT o.message_id, s.kind, s.value FROM message_refs s
           CROSS JOIN LATERAL (
               SELECT o.message_id FROM message_refs o
               WHERE o.identity_id = s.identity_id AND o.value = s.value
                 AND o.message_id <> s.message_id
               LIMIT $2 + 1) o
           WHERE s.message_id = $1""", message_id, most)
    per_value: dict[str, list[tuple[str, str, str]]] = {}
    for r in rows:
        per_value.setdefault(r["value"], []).append((r["message_id"], r["kind"], r["value"]))
    return [row for shared in per_value.values() if len(shared) <= most for row in shared]
