"""Text as pattern matching reads it: compatibility forms folded and invisible characters
dropped, so that a character that looks like nothing, or like another, does not hide a word
from a pattern (triage's, and deep search's check for instructions to an AI reader).

Pure: no I/O. Used by ``shared.mail.triage`` and ``shared.deepsearch.instructions``.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["plain"]

#: Characters that show as nothing (soft hyphen, zero-width and direction marks, variation
#: selectors, tags) or only mark the letter before them (combining marks left after NFKC).
_INVISIBLE = re.compile(
    "[\u00ad\u0300-\u036f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u17b4\u17b5\u180b-\u180f\u1ab0-\u1aff\u1dc0-\u1dff\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u20d0-\u20ff\u2800\u3164\ufe00-\ufe0f\ufe20-\ufe2f\ufeff\uffa0"
    "\ufff9-\ufffb\U0001d173-\U0001d17a\U000e0000-\U000e007f\U000e0100-\U000e01ef]")


def plain(text: str) -> str:
    """``text`` folded by NFKC (a no-break space is a space, a fullwidth ＠ an @, a letter and
    its accent one letter), with what is left invisible dropped. ASCII text is returned as it
    is. Look-alike letters of other scripts (a Cyrillic о) are not mapped."""
    if text.isascii():
        return text
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
