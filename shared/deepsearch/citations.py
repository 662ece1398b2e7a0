"""The citation check: every sentence of an answer must be supported by the messages it cites.

A :class:`Claim` is one answer sentence and the message ids it cites. It is supported when:

1. it cites at least one message, and every message it cites was read for this question (and was
   not left out for addressing the reader);
2. every quotation in it (between “ ” or " ") is, word for word, in the own text (quoted history
   removed) of a cited message;
3. outside quotations, every *salient* token (a number, a capitalized word, an identifier such as
   ``CONFIG_X86_X2APIC``) occurs in a cited message: its own text, subject, sender, or date;
4. outside quotations, at least :data:`MIN_COVERAGE` of the content words occur there too.

The same check holds for every backend; a sentence that fails it is removed. It is lexical, so
it can keep a paraphrase that inverts a cited sentence's meaning with words the sentence has;
it never keeps a number, name or identifier that the cited mail does not hold.

Pure: no I/O. Called by ``shared.deepsearch.agent``.
"""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo

import msgspec

from shared.deepsearch.question import content_words, fold, stem
from shared.deepsearch.reading import ReadMessage

__all__ = ["Claim", "check_claims", "supported", "MIN_COVERAGE"]

#: Share of a claim's content words (outside quotations) its cited messages must hold.
MIN_COVERAGE = 0.6
#: Words that say who said what; they are not facts to find in the mail.
_FRAME = frozenset(stem(w) for w in """wrote write writes replied reply answered asked said
says noted added explained suggested proposed reported confirmed agreed message mail email
thread""".split())
_QUOTATION = re.compile(r"“([^”]*)”|\"([^\"]*)\"")
_SALIENT = re.compile(r"(?<![\w])(?:\d[\w.,:/-]*|[A-Z][\w'’-]*|[\w-]*[_./][\w./-]*\w|\w+\(\))")
_SPACES = re.compile(r"\s+")
_PLAIN_QUOTES = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'"})


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    """One answer sentence (without its citation marker) and the message ids it cites."""

    text: str
    cites: tuple[str, ...]


def _normal(text: str) -> str:
    return _SPACES.sub(" ", fold(text).translate(_PLAIN_QUOTES)).strip()


def _vocabulary(message: ReadMessage, zone: ZoneInfo) -> str:
    when = message.date.astimezone(zone)
    utc = message.date.astimezone(ZoneInfo("UTC"))
    dates = " ".join(f"{d:%d %B %b %A %a %Y %Y-%m-%d} {d.day}" for d in (when, utc))
    return _normal(" ".join((message.own_text, message.subject, message.from_name or "",
                             message.from_address or "", dates)))


def supported(claim: Claim, messages: dict[str, ReadMessage], time_zone: str) -> bool:
    """Whether ``claim`` passes the check of the module docstring against ``messages``, the
    messages read (by id); dates are also read in ``time_zone`` (an IANA name)."""
    cited = [messages.get(i) for i in claim.cites]
    if not cited or any(m is None for m in cited):
        return False
    zone = ZoneInfo(time_zone)
    own = [_normal(m.own_text) for m in cited if m is not None]
    for a, b in _QUOTATION.findall(claim.text):
        quote = _normal(a or b).rstrip("…").strip()
        if quote and not any(quote in text for text in own):
            return False
    outside = _QUOTATION.sub(" ", claim.text)
    vocabulary = " ".join(_vocabulary(m, zone) for m in cited if m is not None)
    for token in _SALIENT.findall(outside):
        token = _normal(token).rstrip(".,;:")
        if token and not re.search(rf"(?<!\w){re.escape(token)}(?!\w)", vocabulary):
            return False
    wanted = [w for w in content_words(outside) if w not in _FRAME]
    if not wanted:
        return True
    have = set(content_words(vocabulary))
    return sum(w in have for w in wanted) / len(wanted) >= MIN_COVERAGE


def check_claims(claims: list[Claim], messages: dict[str, ReadMessage], time_zone: str
                 ) -> tuple[list[Claim], list[Claim]]:
    """``claims`` split into (supported, removed), each in order."""
    kept, removed = [], []
    for claim in claims:
        (kept if supported(claim, messages, time_zone) else removed).append(claim)
    return kept, removed
