"""Verification codes and links for ``mail_wait`` (spec section 4.3: "A code or link is returned
only when "from" names the expected sender domain and the message passed authentication").

:func:`verification_of` gives ``{code, link}`` for a stored message only when both hold:

- **"from" names the sender's domain**: ``mail_wait``'s ``from`` is an address or ``@domain``
  whose domain equals the From domain or is a parent of it (``@example.com`` names
  ``no-reply@accounts.example.com``; ``@com`` or ``@co.uk``, public suffixes, name nobody), see
  :func:`names_sender`. Without ``from`` nothing is returned: an agent must say whom it expects.
- **the message passed authentication**: its trust verdict is ``pass`` (``shared.mail.trust``:
  the From domain is authenticated by DMARC or aligned DKIM/SPF).

What is read is the subject and the new text (quoted history removed at ingest), never the
quoted part, so a code quoted from an older message is not returned as new:

- a **code** is 4 to 10 digits (``123456``, also in two groups such as ``123 456`` or
  ``1234-5678``, returned without the separator), or 4 to 10 letters and digits with at least one of each (``K7XQ2P``),
  standing within :data:`NEAR_CHARS` characters of a word such as code, verification, OTP,
  one-time, passcode, PIN or 2FA; the candidate nearest such a word wins. Numbers inside links,
  addresses, dates and times are not codes.
- a **link** is an ``https`` link whose address, the text before it on its line (a Markdown
  link's label) or the line above says verify, confirm, activate or validate; plain ``http``
  links are never returned.

Pure: no I/O. The lead's ``mail_wait`` calls it for ``kind: verification`` (and may for ``any``).
"""

from __future__ import annotations

import re
from typing import Annotated

import msgspec

from shared.mail.domains import domain_of, is_within
from shared.mail.trust import Trust

__all__ = ["NEAR_CHARS", "Verification", "names_sender", "extract", "verification_of"]

#: How far (in characters) a code may stand from the word that announces it.
NEAR_CHARS = 60
#: Characters of new text read: verification mail puts its code at the top.
_TEXT_CHARS = 20_000


class Verification(msgspec.Struct, frozen=True, kw_only=True):
    """A verification code or link found in an authenticated message from the expected sender."""

    code: Annotated[str | None, msgspec.Meta(description=(
        "One-time code (4-10 digits or letters and digits), separators removed; null if none."))]
    link: Annotated[str | None, msgspec.Meta(description=(
        "https link to verify, confirm or activate; null if none."))]


_KEYWORD = re.compile(
    r"\b(codes?|verification|verify|otp|one[- ]time|pass ?code|pin|2fa|two[- ]factor"
    r"|security code|login code|sign[- ]in code)\b", re.IGNORECASE)
_CANDIDATE = re.compile(
    r"(?<![\w/:.@#=&?%+-])"
    r"(\d{3,5}[- ]\d{3,5}|\d{4,10}|(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{4,10})"
    r"(?![\w/@=&%+]|[:.,-]\d)")
_URL = re.compile(r"https?://[^\s<>()\[\]\"'`]+", re.IGNORECASE)
_LINK_WORD = re.compile(r"verif|confirm|activat|validat", re.IGNORECASE)
_TRAILING = ".,;:!?'\")]}>*"


def names_sender(from_filter: str | None, sender: str | None) -> bool:
    """True when ``from_filter`` (an addr-spec or ``@domain``) names the domain of ``sender``:
    the filter's domain equals the sender's domain or is a parent of it, and is not a public
    suffix."""
    if not from_filter or not sender:
        return False
    return is_within(domain_of(sender), domain_of(from_filter))


def _code(text: str) -> str | None:
    best: tuple[int, str] | None = None
    spans = [m.span() for m in _URL.finditer(text)]
    for key in _KEYWORD.finditer(text):
        lo, hi = max(0, key.start() - NEAR_CHARS), key.end() + NEAR_CHARS
        for cand in _CANDIDATE.finditer(text, lo, min(hi, len(text))):
            if any(a <= cand.start() < b for a, b in spans) or _KEYWORD.fullmatch(cand[1]):
                continue
            # Before the word ("123456 is your code") counts a little less than after it.
            gap = (cand.start() - key.end()) if cand.start() >= key.end() else (
                key.start() - cand.end()) * 2
            value = re.sub(r"[- ]", "", cand[1])
            if best is None or gap < best[0]:
                best = (gap, value)
    return best[1] if best else None


def _link(text: str) -> str | None:
    fallback = None
    for m in _URL.finditer(text):
        url = m[0].rstrip(_TRAILING)
        if not url.lower().startswith("https://"):
            continue
        if _LINK_WORD.search(url):
            return url
        # Its own line up to the link, and the line above ("Confirm your address:\n<link>").
        line_start = text.rfind("\n", 0, m.start()) + 1
        before = text[text.rfind("\n", 0, max(line_start - 1, 0)) + 1:m.start()]
        if fallback is None and _LINK_WORD.search(before):
            fallback = url
    return fallback


def extract(subject: str, text: str) -> Verification | None:
    """The code and link in ``subject`` and ``text`` (new text, quotes removed), or None when
    neither is there. No trust check: use :func:`verification_of`."""
    body = f"{subject}\n{text[:_TEXT_CHARS]}"
    code, link = _code(body), _link(body)
    return Verification(code=code, link=link) if code or link else None


def verification_of(*, sender: str | None, subject: str, new_text: str, trust: Trust | None,
                    from_filter: str | None) -> Verification | None:
    """``mail_wait``'s ``verification`` for a stored message (module docstring).

    Args:
        sender: the message's From addr-spec.
        subject, new_text: the message's subject and new text (quoted history removed).
        trust: its stored trust (``shared.mail.trust.trust_of``); None counts as not passed.
        from_filter: ``mail_wait``'s ``from`` argument.

    Returns:
        The code and link, or None when ``from_filter`` does not name the sender's domain, the
        message did not pass authentication, or it holds neither.
    """
    if trust is None or trust.verdict != "pass" or not names_sender(from_filter, sender):
        return None
    return extract(subject, new_text)
