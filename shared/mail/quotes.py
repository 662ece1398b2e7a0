"""A message's own words, apart from the history it quotes.

``new_text`` removes, in plain text:

- everything from an Outlook ``-----Original Message-----`` line on (the forwarded or replied-to
  message follows it);
- everything from a signature separator on: ``-- `` alone on a line (RFC 3676 section 4.3), also
  without its trailing space, which many clients strip;
- quoted lines, those starting with ``>`` after optional white space (RFC 3676 section 4.5);
- the attribution line just before a quote block (``On <date>, <name> wrote:``, also wrapped over up
  to four lines, and ``<name> writes:``).

It is deliberately simple: it works line by line, knows only English attributions, and does not
look into HTML or Outlook ``From:/Sent:`` blocks without a separator line. The cases that upstream
reply parsers test are summarised in the team kit's ``corpus/quote-stripping/EXPECTED.md``.

``snippet`` makes the one-line preview shown in lists. Pure: no I/O. Called by ``ingest`` and
search result rendering.
"""

from __future__ import annotations

import re

__all__ = ["new_text", "snippet"]

_ORIGINAL_MESSAGE = re.compile(r"^\s*-{2,}\s*Original Message\s*-{2,}\s*$", re.IGNORECASE)
_SIGNATURE = re.compile(r"^-- ?$")
_QUOTED = re.compile(r"^\s*>")
_ATTRIBUTION_END = re.compile(r"\b(?:wrote|writes)\s*:\s*$", re.IGNORECASE)
_ATTRIBUTION_START = re.compile(r"^\s*On\s", re.IGNORECASE)
# Clients wrap a long "On <date>, <name> <address> wrote:" over a few lines; look back that far.
_ATTRIBUTION_MAX_LINES = 4
_WHITESPACE = re.compile(r"\s+")


def new_text(text: str) -> str:
    """``text`` without quoted history or signature (see the module docstring for the rules).

    Line endings become ``\\n``; blank lines at the start and end are dropped. Returns ``""`` when
    nothing new is left.
    """
    kept: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if _ORIGINAL_MESSAGE.match(line) or _SIGNATURE.match(line):
            break
        if _QUOTED.match(line):
            _drop_attribution(kept)
            continue
        kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    while kept and not kept[0].strip():
        kept.pop(0)
    return "\n".join(kept)


def _drop_attribution(kept: list[str]) -> None:
    """Remove an attribution that ends the kept lines (ignoring blank lines after it)."""
    end = len(kept)
    while end and not kept[end - 1].strip():
        end -= 1
    if not end or not _ATTRIBUTION_END.search(kept[end - 1]):
        return
    start = end - 1
    # A wrapped attribution: walk back over non-blank lines to the one starting "On ".
    for candidate in range(end - 1, max(end - _ATTRIBUTION_MAX_LINES, 0) - 1, -1):
        if not kept[candidate].strip():
            break
        if _ATTRIBUTION_START.match(kept[candidate]):
            start = candidate
            break
    del kept[start:]


def snippet(text: str, chars: int = 200) -> str:
    """``text`` on one line, white space collapsed, at most ``chars`` characters.

    A longer text is cut at the last word boundary that fits and ends with ``…`` (counted in
    ``chars``); a single word longer than that is cut inside the word.
    """
    flat = _WHITESPACE.sub(" ", text).strip()
    if len(flat) <= chars:
        return flat
    cut = flat[: chars - 1]
    if " " in cut and flat[chars - 1] != " ":
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip() + "…"
