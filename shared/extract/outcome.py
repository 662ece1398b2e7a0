"""What extracting one attachment can end as: the statuses and reasons of attachment text.

``status`` is the spec's enum (section 4.3, ``mail_get_attachment_text``): ``pending`` until a
batch worker has tried, then ``ready`` (pages of text), ``unavailable`` (the file could not be
read: encrypted, broken, or a parser had to be stopped) or ``skipped`` (not a type we read, or
over a limit before parsing). ``reason`` says which, in the words of :class:`Reason`. Pure: no I/O.
"""

from __future__ import annotations

from enum import StrEnum

import msgspec

__all__ = ["TextStatus", "Reason", "Outcome", "SKIPPED_REASONS", "Encrypted"]


class TextStatus(StrEnum):
    """Status of an attachment's text (spec section 4.3)."""

    #: Queued; no worker has finished it yet.
    PENDING = "pending"
    #: Extracted; the pages hold its text (possibly empty, as for a scan without a text layer).
    READY = "ready"
    #: Could not be read; ``reason`` says why.
    UNAVAILABLE = "unavailable"
    #: Not read on purpose: the type is not one we read, or the file is over a limit.
    SKIPPED = "skipped"


class Reason(StrEnum):
    """Why an attachment's text is ``unavailable`` or ``skipped``."""

    #: skipped: not PDF, DOCX, DOC, XLSX, XLS, PPTX, ODT, RTF, plain text, CSV or HTML.
    UNSUPPORTED_TYPE = "unsupported_type"
    #: skipped: larger than ``Limits.max_input_bytes``.
    TOO_LARGE = "too_large"
    #: skipped: more pages (sheets, slides) than ``Limits.max_pages``.
    TOO_MANY_PAGES = "too_many_pages"
    #: skipped: more text than ``Limits.max_text_chars``.
    TOO_MUCH_TEXT = "too_much_text"
    #: skipped: a zip member expands more than ``Limits.max_compression_ratio`` times.
    COMPRESSION_RATIO = "compression_ratio"
    #: skipped: the zip members declare more than ``Limits.max_uncompressed_bytes`` together.
    UNCOMPRESSED_SIZE = "uncompressed_size"
    #: skipped: the zip holds more than ``Limits.max_zip_members`` members.
    TOO_MANY_MEMBERS = "too_many_members"
    #: unavailable: the file is password-protected (a PDF that opens with no password is read).
    ENCRYPTED = "encrypted"
    #: unavailable: the parser rejected the file (broken, truncated, or not what it claims).
    CORRUPT = "corrupt"
    #: unavailable: the sandbox ran past ``Limits.wall_seconds`` and was killed.
    TIMEOUT = "timeout"
    #: unavailable: the sandbox used ``Limits.cpu_seconds`` of CPU and was killed.
    CPU_TIME = "cpu_time"
    #: unavailable: the parser ran out of ``Limits.memory_bytes``.
    MEMORY = "memory"
    #: unavailable: the sandbox died in another way (a crash in a C extension, a signal).
    CRASHED = "crashed"
    #: unavailable: workers died while extracting this file ``MAX_ATTEMPTS`` times.
    INTERRUPTED = "interrupted"


#: Reasons whose status is ``skipped``; every other reason means ``unavailable``.
SKIPPED_REASONS: frozenset[Reason] = frozenset({
    Reason.UNSUPPORTED_TYPE, Reason.TOO_LARGE, Reason.TOO_MANY_PAGES, Reason.TOO_MUCH_TEXT,
    Reason.COMPRESSION_RATIO, Reason.UNCOMPRESSED_SIZE, Reason.TOO_MANY_MEMBERS,
})


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """The result of extracting one file: ``pages`` (page 1 first) when ``ready``, else a
    ``reason``. ``kind`` is the detected type (``shared.extract.detect.AttachmentType``), or None
    when none was recognised. ``detail`` names what stopped the reader (an exception type, a
    signal) for the logs; it never holds file content and is not stored."""

    status: TextStatus
    kind: str | None = None
    reason: Reason | None = None
    pages: list[str] = []
    detail: str | None = None

    @classmethod
    def failed(cls, reason: Reason, kind: str | None = None, *, detail: str | None = None
               ) -> Outcome:
        """An ``unavailable`` or ``skipped`` outcome, whichever ``reason`` implies."""
        status = TextStatus.SKIPPED if reason in SKIPPED_REASONS else TextStatus.UNAVAILABLE
        return cls(status=status, kind=kind, reason=reason, detail=detail)


class Encrypted(Exception):
    """Raised by a format reader when the file needs a password it does not have."""
