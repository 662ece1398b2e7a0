"""Text that goes into a header field of outgoing mail, and can never start another field.

A header value must not hold a line break, raw or hidden. Raw: CR, LF and the other characters
Python's ``str.splitlines`` breaks at (``\\v``, ``\\f``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028,
U+2029), which the email package refuses with a ValueError. Hidden: an RFC 2047 encoded word
(``=?utf-8?q?=0D=0A…?=``), which the email package decodes when the value is set and, in the
Python 3.11 releases before 3.11.10 (CVE-2024-6923), then writes out with the line break in it:
a subject, display name or filename could add fields, or start the body, of mail we send (found
by an attack).

Two uses:

* :func:`plain_text` checks a caller's value (``mail_send`` arguments, and the names of
  partners, tenants, keys and identities, which reach headers, signed claims and terminals):
  one that holds either is ``invalid_request`` at its path;
* :func:`inert` makes stored text safe to reuse (the subject of a message replied to, its
  sender's name, a forwarded attachment's filename: a stranger wrote them): line breaks become
  spaces, and an encoded word that would decode to one is broken apart (``= ?utf-8?q?…``), so
  the recipient reads it as the literal text the original showed. ``shared.outbound.compose``
  passes every header text through it, so nothing reaches the generator unchecked.

Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import re

from shared.errors import invalid

__all__ = ["plain_text", "inert", "hides_a_break"]

#: What ``str.splitlines`` breaks at beside the ASCII controls (which are refused anyway).
_UNICODE_BREAKS = "\x85\u2028\u2029"
# Any encoded word, even without the white space RFC 2047 asks around it: the email package's
# parsers are lenient in places (inside a quoted display name or filename).
_ENCODED_WORD = re.compile(r"=\?[^?\s]*\?([bBqQ])\?([^?]*)\?=")


def _control(ch: str) -> bool:
    return ord(ch) < 32 and ch != "\t" or ord(ch) == 127 or ch in _UNICODE_BREAKS


def hides_a_break(value: str) -> bool:
    """Whether an encoded word in ``value`` may decode to a line break or another control
    character, whatever its charset says: the email package decodes a word of an unknown
    charset (``=?x-unknown?q?=0D=0A?=``) or with an RFC 2231 language (``=?utf-8*en?…``) too,
    so the words' bytes are read here directly, and a word whose bytes cannot be read counts
    as hiding one (found by an attack on the first version, which skipped them)."""
    for word in _ENCODED_WORD.finditer(value):
        data = _word_bytes(word.group(1), word.group(2))
        if data is None or any(b < 32 and b != 9 or b == 127 for b in data):
            return True
        for charset in ("utf-8", "latin-1"):
            if any(_control(ch) for ch in data.decode(charset, "ignore")):
                return True
    return False


def _word_bytes(encoding: str, text: str) -> bytes | None:
    """The bytes an encoded word's text stands for (RFC 2047 section 4), None when unreadable."""
    try:
        if encoding in "bB":
            return base64.b64decode(text + "=" * (-len(text) % 4))
        return re.sub(rb"=([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]),
                      text.replace("_", " ").encode("latin-1"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return None


def plain_text(path: str, value: str) -> str:
    """``value`` when it holds no control character or line break, raw or inside an encoded
    word; else ``invalid_request`` at ``path``."""
    if any(_control(ch) for ch in value):
        raise invalid(path, "The value holds a line break or another control character.",
                      "Remove line breaks and control characters from it.")
    if any("\ud800" <= ch <= "\udfff" for ch in value):
        # a byte that is not UTF-8, as Python reads a command-line argument: PostgreSQL
        # refused it with a traceback (found by an attack)
        raise invalid(path, "The value holds bytes that are not UTF-8.",
                      "Write it in UTF-8.")
    if hides_a_break(value):
        raise invalid(path, "The value holds an encoded word (RFC 2047, =?charset?q?…?=) that "
                            "decodes to a line break or another control character.",
                      "Send the text itself; the generator encodes what needs encoding.")
    return value


def inert(value: str) -> str:
    """``value`` safe for a header field (module docstring): unchanged when it already is."""
    if any(_control(ch) for ch in value):
        value = "".join(" " if _control(ch) else ch for ch in value)
    while hides_a_break(value):
        value = _ENCODED_WORD.sub(lambda m: "= ?" + m.group(0)[2:] if hides_a_break(m.group(0))
                                  else m.group(0), value)
    return value
