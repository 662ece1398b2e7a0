"""Finding messages on disk: single-message files, mbox files and maildir folders.

``iter_sources`` walks the paths it is given and yields one :class:`SourceItem` per message: its
raw bytes and where it came from, or, for a file that cannot be read or is clearly not mail, the
problem instead of bytes. Nothing here parses a message; ``parse`` does that.

Formats and their sources:

- A single message is one RFC 5322 message per file (``.eml``, ``.msg``, ``.txt``, no extension).
- mbox is the traditional Unix format described in RFC 4155 (``application/mbox``) and ``mbox(5)``:
  each message starts with a ``From <sender> <asctime date>`` separator line, which is not part of
  the message. In *mboxo* a body line starting ``From `` is escaped as ``>From `` and cannot be told
  apart from a real ``>From ``; in *mboxrd* every ``^>*From `` body line gets one more ``>``, so
  reading removes exactly one (``mboxrd=True``, the default).
- maildir (``maildir(5)``, D. J. Bernstein's spec) keeps one message per file in ``cur/`` and
  ``new/``; ``tmp/`` holds deliveries in progress and is skipped.

We split mbox files with our own reader rather than ``mailbox.mbox`` because the standard library
treats every ``From `` line after an empty line as a separator, so an unescaped ``From time to
time`` in a body splits a message in two, and it decodes separator lines as ASCII, so 8-bit bytes in
them raise ``UnicodeDecodeError``. Ours requires the separator's shape (sender, then a date with a
weekday, month, time and year) and works on bytes. Files are read line by line, so a large mbox
(gzip too) is never held in memory whole.

Pure apart from reading files: no parsing, no database. Called by the import command and workers.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import msgspec

__all__ = ["NOT_MAIL", "OUTLOOK_MSG", "LINK_OUTSIDE", "TOO_LARGE", "MAX_MESSAGE_BYTES", "SourceItem", "iter_sources"]

NOT_MAIL = "not a mail message: first line is not a header field"
#: The problem of an Outlook item (.msg: an OLE2 compound file, [MS-OXMSG]), which is no MIME.
OUTLOOK_MSG = ("an Outlook .msg file (MS-OXMSG), not a MIME message: save it from Outlook as "
               ".eml, or convert it (msgconvert of libemail-outlook-message-perl)")
_OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
#: The problem of a symbolic link, met in a directory walked, that leads out of it (or nowhere).
LINK_OUTSIDE = ("a symbolic link out of the folder imported (or broken): not followed; name "
                "its target on the command line to import it")

_MBOX_SUFFIXES = (".mbox", ".mbx", ".mbox.gz")

#: Longest line taken for an mbox separator ("From sender date"); longer ones are body text.
MAX_SEPARATOR_BYTES = 1000

#: Largest message read (64 MiB, past the SMTP listener's 25 MiB and the parser's 32 MiB): a
#: larger one is reported as too large and not imported. Storing a message holds it several
#: times over on its way to PostgreSQL, so a 204 KB gzip file of one 200 MB message took 2.1 GB
#: (found by an attack); it is now read no further than this, in pieces of :data:`_PIECE_BYTES`.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_PIECE_BYTES = 1024 * 1024
TOO_LARGE = (f"too large: over {MAX_MESSAGE_BYTES // (1024 * 1024)} MiB (MAX_MESSAGE_BYTES); "
             "not imported")

# RFC 4155 section 2 fixes only "From " plus sender plus a date in asctime form; real files vary
# (two spaces before the date, "goran at domain.com" senders, trailing text after the year, 8-bit
# senders), so we ask for the date's parts rather than its exact layout.
_SEPARATOR = re.compile(
    rb"From \S.*?\s"
    rb"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?\s+"
    rb"(?:(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\s+\d{1,2}"
    rb"|\d{1,2}\s+(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*)"
    rb"\s+(?:\d{4}\s+)?\d{1,2}:\d{2}(?::\d{2})?\b.*?\b\d{4}\b",
    re.IGNORECASE,
)
_MBOXRD_QUOTED_FROM = re.compile(rb">+From ")
# RFC 5322 section 3.6.8: field-name is printable US-ASCII except ":"; obsolete syntax (section
# 4.5) allows white space before the colon.
_HEADER_FIELD = re.compile(rb"[\x21-\x39\x3b-\x7e]+[ \t]*:")


class SourceItem(msgspec.Struct, frozen=True):
    """One message found on disk, or why a file could not give one.

    ``origin`` names the file, with ``#n`` (1-based) appended for the n-th message of an mbox.
    Exactly one of ``raw`` (the message's bytes, separator line removed) and ``problem`` is set.
    """

    origin: str
    raw: bytes | None
    problem: str | None


def iter_sources(paths: list[Path], *, mboxrd: bool = True) -> Iterator[SourceItem]:
    """Yield every message under ``paths`` in a stable order.

    Each path may be a file or a directory. Directories are walked recursively in sorted name
    order; in a maildir (a directory with ``cur/`` or ``new/``) the ``tmp/`` folder is skipped, and
    names starting with ``.`` are skipped everywhere (editor and OS droppings, maildir++ metadata).
    A file is an mbox when its name ends ``.mbox``, ``.mbx`` or ``.mbox.gz`` (gzip) or its first
    line is an mbox separator; otherwise it is one message. With ``mboxrd`` true, mbox body lines
    matching ``^>+From `` lose one ``>`` (mboxrd); with it false they are left alone (mboxo).

    A symbolic link found in a directory is followed only when its target lies inside the
    directory named in ``paths`` (:data:`LINK_OUTSIDE` otherwise): an unpacked archive holding a
    link to ``/etc`` or to a secret file would import what the importer's user can read as mail
    that API keys read (found by an attack). A path named in ``paths`` is read wherever it leads.

    Never raises for bad input: unreadable files, bad gzip data and files that are clearly not
    mail become items with ``raw=None`` and ``problem`` set.
    """
    visited: set[Path] = set()
    for path in paths:
        if path.is_dir():
            yield from _walk(path, path.resolve(), mboxrd=mboxrd, visited=visited)
        else:
            yield from _read_path(path, mboxrd=mboxrd)


def _walk(directory: Path, root: Path, *, mboxrd: bool, visited: set[Path]
          ) -> Iterator[SourceItem]:
    # A symlink back to a parent would otherwise walk the same folder until the OS gives up.
    real = directory.resolve()
    if real in visited:
        return
    visited.add(real)
    try:
        entries = sorted(p for p in directory.iterdir() if not p.name.startswith("."))
    except OSError as exc:
        yield SourceItem(str(directory), None, f"unreadable: {_reason(exc)}")
        return
    is_maildir = any(p.name in ("cur", "new") and p.is_dir() for p in entries)
    for entry in entries:
        if entry.is_symlink() and not _inside(entry, root):
            yield SourceItem(str(entry), None, LINK_OUTSIDE)
        elif entry.is_dir():
            if not (is_maildir and entry.name == "tmp"):
                yield from _walk(entry, root, mboxrd=mboxrd, visited=visited)
        else:
            yield from _read_path(entry, mboxrd=mboxrd)


def _inside(link: Path, root: Path) -> bool:
    """Whether the symbolic link ``link`` leads to ``root`` or below it (a loop leads nowhere)."""
    try:
        return link.resolve(strict=True).is_relative_to(root)
    except (OSError, RuntimeError):
        return False


def _read_path(path: Path, *, mboxrd: bool) -> Iterator[SourceItem]:
    if path.is_file():
        yield from _read_file(path, mboxrd=mboxrd)
    elif path.exists():
        # Opening a FIFO would block the import for ever, /dev/zero would fill the memory;
        # devices and sockets are not mail (named on the command line too: found by an attack).
        yield SourceItem(str(path), None, "not a regular file")
    else:
        yield SourceItem(str(path), None, "unreadable: No such file or directory")


def _read_file(path: Path, *, mboxrd: bool) -> Iterator[SourceItem]:
    origin = str(path)
    gzipped = path.name.lower().endswith(".gz")
    try:
        with gzip.open(path, "rb") if gzipped else path.open("rb") as stream:
            first_line = stream.readline(_PIECE_BYTES)
            if path.name.lower().endswith(_MBOX_SUFFIXES) or _is_separator(first_line):
                yield from _split_mbox(origin, _chain(first_line, stream), mboxrd=mboxrd)
                return
            raw = first_line + stream.read(MAX_MESSAGE_BYTES + 1 - len(first_line))
    except (OSError, EOFError, zlib.error) as exc:
        # gzip.BadGzipFile is an OSError; a truncated gzip stream raises EOFError.
        yield SourceItem(origin, None, f"unreadable: {_reason(exc)}")
        return
    if len(raw) > MAX_MESSAGE_BYTES:
        yield SourceItem(origin, None, TOO_LARGE)
        return
    yield _single(origin, raw)


def _single(origin: str, raw: bytes) -> SourceItem:
    if raw.startswith(_OLE2_MAGIC):
        return SourceItem(origin, None, OUTLOOK_MSG)
    first = next((line for line in raw.splitlines() if line.strip()), None)
    if first is None:
        return SourceItem(origin, None, "empty file")
    # Any "From " line counts here: saved messages often keep an envelope line without a date.
    if not (_HEADER_FIELD.match(first) or first.startswith(b"From ")):
        return SourceItem(origin, None, NOT_MAIL)
    return SourceItem(origin, raw, None)


def _chain(first_line: bytes, stream: BinaryIO) -> Iterator[bytes]:
    """The file's lines, a line longer than :data:`_PIECE_BYTES` in several pieces."""
    yield first_line
    while piece := stream.readline(_PIECE_BYTES):
        yield piece


def _split_mbox(origin: str, pieces: Iterable[bytes], *, mboxrd: bool) -> Iterator[SourceItem]:
    number = 0
    # One buffer a message, not one bytes object a line: 30 million short lines in a 61 KB
    # .mbox.gz took 4.3 GB that way (found by an attack).
    message = _Message()
    started = False  # a separator was seen, so ``message`` is a message even if empty
    previous_empty = True  # the start of the file counts as "after an empty line"
    line_start = True  # the piece begins a line (the one before it ended one)
    try:
        for piece in pieces:
            if line_start and previous_empty and _is_separator(piece):
                if started or message.has_text or message.size > MAX_MESSAGE_BYTES:
                    number += 1
                    yield message.finished(f"{origin}#{number}")
                message = _Message()
                started = True
            else:
                if line_start and mboxrd and _MBOXRD_QUOTED_FROM.match(piece):
                    piece = piece[1:]
                message.add(piece)
            previous_empty = line_start and piece in (b"\n", b"\r\n")
            line_start = piece.endswith(b"\n")
    except (OSError, EOFError, zlib.error) as exc:
        yield SourceItem(f"{origin}#{number + 1}", None, f"unreadable: {_reason(exc)}")
        return
    if started or message.has_text or message.size > MAX_MESSAGE_BYTES:
        number += 1
        yield message.finished(f"{origin}#{number}")
    elif number == 0:
        yield SourceItem(origin, None, "no messages: the mbox file is empty")


class _Message:
    """One message of an mbox being read: its bytes in one buffer, up to MAX_MESSAGE_BYTES;
    past them only counted."""

    __slots__ = ("buffer", "size", "has_text", "last_empty")

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.size = 0  # bytes of the message so far
        # Text before the first separator is kept as a message rather than dropped silently.
        self.has_text = False
        self.last_empty = 0  # length of the last piece when it was an empty line, else 0

    def add(self, piece: bytes) -> None:
        self.size += len(piece)
        if self.size <= MAX_MESSAGE_BYTES:
            self.buffer += piece
        elif self.buffer:
            self.buffer = bytearray()  # too large: what was read goes now
        self.has_text = self.has_text or bool(piece.strip())
        self.last_empty = len(piece) if piece in (b"\n", b"\r\n") else 0

    def finished(self, origin: str) -> SourceItem:
        if self.size > MAX_MESSAGE_BYTES:
            return SourceItem(origin, None, TOO_LARGE)
        # The empty line before a separator belongs to the mbox format, not to the message
        # (RFC 4155 section 2; mailbox.mbox drops it too).
        return SourceItem(origin, bytes(self.buffer[:len(self.buffer) - self.last_empty]), None)


def _is_separator(line: bytes) -> bool:
    # Real separators are short; the length check keeps the lazy pattern linear on hostile lines.
    return (line.startswith(b"From ") and len(line) <= MAX_SEPARATOR_BYTES
            and _SEPARATOR.match(line.rstrip(b"\r\n")) is not None)


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
