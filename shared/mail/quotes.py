"""A message's own words, apart from the history it quotes and the signature it ends with.

:func:`strip_quotes` removes quoted history from plain text (HTML parts reach it rendered by
``htmltext``, their quoted blocks marked with ``>`` as plain-text mail marks them):

- quoted lines, those starting with ``>`` after optional white space (RFC 3676 section 4.5),
  with the pieces of them a mailer wrapped onto lines of their own (an unquoted line between two
  quoted ones, no blank line around it, whose first word would not have fit on the quoted line
  before at :data:`WRAP_COLUMNS`, that line not ending a sentence), and
  the attribution just before a quote block: ``On <date>, <name> wrote:`` (also wrapped over up to
  four lines), ``<name> writes:``, the same verbs in a dozen languages, and any line ending in ``:``
  that names an e-mail address (``02.04.2012 14:20 пользователь "bob@x" <bob@x> написал:``);
- everything from an ``On <date> … wrote:`` attribution that no quoted line follows (clients that
  quote without ``>``, as Gmail's plain text and rendered HTML blockquotes without markers do);
- everything from an Outlook ``-----Original Message-----`` line on, or a Gmail (and our own
  ``mail_forward``) ``---------- Forwarded message ----------`` line;
- everything from a header block on: three or more ``From:``/``Sent:``/``Date:``/``To:``/``Cc:``/
  ``Subject:`` lines in any order, From among them, in English, German, French, Spanish,
  Portuguese, Italian, Dutch, Swedish, Danish, Polish or Russian (Outlook and Hotmail write them,
  with or without a separator line of dashes or underscores above, which goes too).

:func:`split_signature` finds a trailing signature: from a ``-- `` line (RFC 3676 section 4.3, also
without its trailing space), and, within the last :data:`SIGNATURE_MAX_LINES` lines, from a
``-Name`` or ``__`` line after a blank line, a ``Sent from my <device>`` line, or a short line
holding the sender's address or a word of their name, from the top of its paragraph of short lines
(a sign-off such as ``Thanks,`` and a title come with it) or from a separator line a few short
lines above it. :func:`new_text` is both: what an agent reads as what the sender wrote.

Known gaps, measured on the team kit's ``corpus/quote-stripping`` (README, "Reading mail text"):
an Outlook ``<hr>`` separator with its header block is cut at the header block, so a line between
the rule and the block stays; signatures that name nobody and follow no separator stay.

``snippet`` makes the one-line preview shown in lists. Pure: no I/O, linear time. Called by
``ingest`` and search result rendering.
"""

from __future__ import annotations

import re

__all__ = ["SIGNATURE_MAX_LINES", "WRAP_COLUMNS", "new_text", "snippet", "split_signature", "strip_quotes"]

#: Longest signature found by the heuristics other than ``-- `` (non-blank lines), as in talon.
SIGNATURE_MAX_LINES = 11
#: The narrowest width mailers wrap quoted text at: an unquoted line whose first word would not
#: have fit on the quoted line above is that line's continuation (module docstring).
WRAP_COLUMNS = 72

_ORIGINAL_MESSAGE = re.compile(r"^\s*-{2,}\s*(?:Original|Forwarded) Message\s*-{2,}\s*$",
                               re.IGNORECASE)
_SIGNATURE = re.compile(r"^-- ?$")
_QUOTED = re.compile(r"^\s*>")
_VERBS = (r"wrote|writes|schrieb|a\s+écrit|escribió|escreveu|ha\s+scritto|scrisse|schreef|skrev"
          r"|kirjoitti|napisał\(a\)|napisał|написал\(а\)|написала|написал|yazdı|写道|寫道")
# Searched only in the last characters of a line that ends with ":" (a cheap test first).
# The verb ends the attribution in English; German and Dutch put the name after it ("schrieb Bob:").
_ATTRIBUTION_END = re.compile(rf"(?:\b(?:{_VERBS})(?:\s[^:\n]{{0,80}})?|@\S*)\s*:\s*$",
                              re.IGNORECASE)
_ATTRIBUTION_START = re.compile(r"^\s*(?:-+\s*)?On\s", re.IGNORECASE)
# An attribution that no quote follows is cut only when it reads like one: "On", a digit, a verb.
_UNQUOTED_ATTRIBUTION = re.compile(
    rf"^\s*(?:-+\s*)?On\s.*\d.*\b(?:{_VERBS})(?:\s[^:]{{0,80}})?\s*:\s*$",
    re.IGNORECASE | re.DOTALL)
_DATE_OR_TIME = re.compile(r"\d{1,4}[./-]\d{1,2}[./-]\d{2,4}|\b\d{1,2}:\d{2}\b")
# Clients wrap a long "On <date>, <name> <address> wrote:" over a few lines; look back that far.
_ATTRIBUTION_MAX_LINES = 4
_HEADER_LABELS = {
    "from": ("from", "von", "de", "da", "van", "från", "fra", "od", "от"),
    "sent": ("sent", "gesendet", "envoyé", "enviado", "inviato", "verzonden", "skickat", "sendt",
             "wysłano", "отправлено", "date", "datum", "fecha", "data", "дата"),
    "to": ("to", "an", "à", "a", "para", "aan", "till", "til", "do", "кому"),
    "cc": ("cc", "kopie", "копия"),
    "subject": ("subject", "betreff", "objet", "asunto", "assunto", "oggetto", "onderwerp",
                "ämne", "emne", "temat", "тема"),
}
_LABEL_OF = {word: label for label, words in _HEADER_LABELS.items() for word in words}
_HEADER_LINE = re.compile(r"^[ \t]*\*?([^\W\d_]+)\*?[ \t]*:")
_SEPARATOR = re.compile(r"^\s*(?:-{4,}|_{4,}|={4,})\s*$")
_MOBILE = re.compile(r"^\s*Sent from my(?:\s+\w+){1,4}\s*$", re.IGNORECASE)
_DASH_NAME = re.compile(r"^-\w")
_UNDERSCORES = re.compile(r"^__")
_WORD = re.compile(r"\w+")
_SHORT_LINE = 60
_WHITESPACE = re.compile(r"\s+")


def new_text(text: str, sender: str | None = None) -> str:
    """``text`` without quoted history or signature: :func:`strip_quotes`, then the body part of
    :func:`split_signature`. ``sender`` is the sender's display name or address, if known.

    Line endings become ``\\n``; blank lines at the start and end are dropped. Returns ``""`` when
    nothing new is left.
    """
    return split_signature(strip_quotes(text), sender)[0]


def strip_quotes(text: str) -> str:
    """``text`` without quoted history (module docstring), signature kept; line endings become
    ``\\n`` and blank lines at the start and end are dropped."""
    lines = text.replace("\r\n", "\n").split("\n")
    kept: list[str] = []
    for number, line in enumerate(lines):
        if _ORIGINAL_MESSAGE.match(line) or _header_block_at(lines, number):
            while kept and (not kept[-1].strip() or _SEPARATOR.match(kept[-1])):
                kept.pop()
            break
        if _QUOTED.match(line):
            _drop_attribution(kept)
            continue
        if _wrapped_quote(lines, number):
            continue
        if _attribution_end(line) and not _quote_follows(lines, number + 1):
            start = _attribution_start([*kept, line], len(kept))
            joined = " ".join([*kept[start:], line])
            if len(joined) <= 600 and _UNQUOTED_ATTRIBUTION.match(joined):
                del kept[start:]
                break
        kept.append(line)
    return _trimmed(kept)


def split_signature(text: str, sender: str | None = None) -> tuple[str, str]:
    """``(body, signature)`` of ``text`` (module docstring); ``signature`` is ``""`` when none is
    found. Both are trimmed of blank lines at their ends."""
    lines = text.replace("\r\n", "\n").split("\n")
    address = sender.strip().lower() if sender and "@" in sender else None
    start = _signature_start(lines, _name_words(sender), address)
    if start is None:
        return _trimmed(lines), ""
    return _trimmed(lines[:start]), _trimmed(lines[start:])


def _trimmed(lines: list[str]) -> str:
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    begin = 0
    while begin < end and not lines[begin].strip():
        begin += 1
    return "\n".join(lines[begin:end])


def _label(line: str) -> str | None:
    match = _HEADER_LINE.match(line)
    return _LABEL_OF.get(match.group(1).lower()) if match else None


def _header_block_at(lines: list[str], number: int) -> bool:
    """Whether a header block (three distinct labels, From among them) starts at ``number``."""
    if _label(lines[number]) is None:
        return False
    labels: set[str] = set()
    unlabelled = 0
    for line in lines[number:number + 8]:
        label = _label(line)
        if label is None:
            # An Outlook From line wraps over two lines at most; a blank line ends the block.
            unlabelled += 1
            if not line.strip() or unlabelled > 1:
                break
            continue
        unlabelled = 0
        labels.add(label)
    return len(labels) >= 3 and "from" in labels


def _wrapped_quote(lines: list[str], number: int) -> bool:
    """Whether ``lines[number]`` is the wrapped end of the quoted line above it (module
    docstring): Outlook quotes a message it had already wrapped, leaving pieces such as
    ``linux-kernel@vger.kernel.org;`` or ``(first use in this function)`` unquoted."""
    if not 0 < number < len(lines) - 1:
        return False
    line, above, below = lines[number], lines[number - 1].rstrip(), lines[number + 1]
    if not line.strip() or not _QUOTED.match(above) or not _QUOTED.match(below) \
            or above.endswith((".", "?", "!", ":")):
        return False
    return len(above) + 1 + len(line.split(None, 1)[0]) > WRAP_COLUMNS


def _quote_follows(lines: list[str], number: int) -> bool:
    """Whether the first non-blank line from ``number`` is quoted."""
    for line in lines[number:number + 20]:
        if line.strip():
            return bool(_QUOTED.match(line))
    return False


def _attribution_end(line: str) -> bool:
    tail = line.rstrip()[-300:]
    return tail.endswith(":") and _ATTRIBUTION_END.search(tail) is not None


def _attribution_start(kept: list[str], end: int) -> int:
    """Where the attribution ending at ``kept[end]`` starts: the line starting ``On`` up to
    :data:`_ATTRIBUTION_MAX_LINES` back over non-blank lines, else the first of the lines just
    above that hold a date or time or end inside an address (``… 14:20 "bob@x" <``), else ``end``
    itself."""
    for candidate in range(end, max(end - _ATTRIBUTION_MAX_LINES, -1), -1):
        if not kept[candidate].strip():
            break
        if _ATTRIBUTION_START.match(kept[candidate]):
            return candidate
    start = end
    while start > max(end - _ATTRIBUTION_MAX_LINES, 0) and kept[start - 1].strip() and (
            kept[start - 1].rstrip().endswith("<") or _DATE_OR_TIME.search(kept[start - 1])):
        start -= 1
    return start


def _drop_attribution(kept: list[str]) -> None:
    """Remove an attribution that ends the kept lines (ignoring blank lines after it)."""
    end = len(kept)
    while end and not kept[end - 1].strip():
        end -= 1
    if not end or not _attribution_end(kept[end - 1]):
        return
    del kept[_attribution_start(kept, end - 1):]


def _name_words(sender: str | None) -> set[str]:
    """Lower-cased words of a display name, or the local part of an addr-spec, two letters or
    more (so initials do not count)."""
    if not sender:
        return set()
    name = sender.split("@", 1)[0] if "@" in sender and " " not in sender.strip() else sender
    return {w.lower() for w in _WORD.findall(name.replace("_", " "))
            if len(w) > 1 and not w.isdigit()}


def _names_sender(line: str, names: set[str], address: str | None) -> bool:
    """Whether ``line`` is short and holds the sender's address or one of their name's words
    among at most six words."""
    if len(line.strip()) > _SHORT_LINE:
        return False
    if address and address in line.lower():
        return True
    words = [w.lower() for w in _WORD.findall(line)]
    return len(words) <= 6 and any(w in names for w in words)


def _signature_start(lines: list[str], names: set[str], address: str | None) -> int | None:
    for number, line in enumerate(lines):
        if _SIGNATURE.match(line):
            return number
    filled = [n for n, line in enumerate(lines) if line.strip()]
    window = filled[-SIGNATURE_MAX_LINES:]
    # Every line of a signature is short; the window starts after the last long line.
    for position in range(len(window) - 1, -1, -1):
        if len(lines[window[position]].strip()) > _SHORT_LINE * 2:
            window = window[position + 1:]
            break
    for number in window:
        line = lines[number]
        after_blank = number == 0 or not lines[number - 1].strip()
        if _MOBILE.match(line) or (after_blank and (_DASH_NAME.match(line)
                                                   or _UNDERSCORES.match(line))):
            return number
        if (names or address) and _names_sender(line, names, address):
            start = _extend_up(lines, number, names, address)
            # A text that is all signature is a short message signed by its sender.
            return start if start > filled[0] else None
    return None


def _extend_up(lines: list[str], number: int, names: set[str], address: str | None) -> int:
    """The start of a signature whose name line is ``number``: the top of its paragraph of short
    lines (a sign-off such as ``Thanks,`` and a title), else a separator line above it across
    blank and short lines."""
    start = number
    for above in range(number - 1, max(number - 6, -1), -1):
        line = lines[above].strip()
        sentence = line.endswith((".", "!", "?")) and len(_WORD.findall(line)) >= 3
        if not line or len(line) > _SHORT_LINE or (sentence and not _names_sender(
                line, names, address)):
            break
        start = above
    if start == number:
        for above in range(number - 1, max(number - 6, -1), -1):
            line = lines[above].strip()
            if _SEPARATOR.match(line):
                return above
            if len(line) > 40 or line.endswith((".", "!", "?")):
                break
    return start


def snippet(text: str, chars: int = 200) -> str:
    """``text`` on one line, white space collapsed, at most ``chars`` characters.

    A longer text is cut at the last word boundary that fits and ends with ``…`` (counted in
    ``chars``); a single word longer than that is cut inside the word.
    """
    # Collapse only as much of the text as the snippet needs: one pass over a 16 MiB text held
    # the GIL, and with it every other thread's event loop, for 0.75 s (found by an attack).
    reach = chars * 4 + 64
    while True:
        flat = _WHITESPACE.sub(" ", text[:reach]).strip()
        if len(flat) > chars or reach >= len(text):
            break
        reach *= 4
    if len(flat) <= chars:
        return flat
    cut = flat[: chars - 1]
    if " " in cut and flat[chars - 1] != " ":
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip() + "…"
