"""The limits every attachment is extracted under, against hostile and merely huge files.

Each limit is a named constant here and a field of :class:`Limits`, the one object the sandbox
and the guards read; tests pass a smaller :class:`Limits` to reach a limit quickly. Pure: no I/O.

Where a file goes over a limit *before* anything parses it (size, zip directory, page count,
text length), its text is ``skipped`` with the limit's reason; where the sandbox has to stop a
parser (wall time, CPU time, memory), it is ``unavailable`` (``shared.extract.outcome``).
"""

from __future__ import annotations

import msgspec

__all__ = ["MAX_INPUT_BYTES", "MAX_PAGES", "MAX_PAGE_CHARS", "MAX_TEXT_CHARS", "VIRTUAL_PAGE_CHARS",
           "MAX_COMPRESSION_RATIO", "RATIO_FLOOR_BYTES", "MAX_UNCOMPRESSED_BYTES",
           "MAX_ZIP_MEMBERS", "WALL_SECONDS", "CPU_SECONDS", "MEMORY_BYTES", "MAX_ATTEMPTS",
           "Limits", "DEFAULT_LIMITS"]

#: Largest attachment read at all, in bytes. Real office files and PDFs in mail are far below it
#: (the tika corpus tops out at 57 KB); a 200 MB declared part is skipped without being parsed.
MAX_INPUT_BYTES = 25 * 1024 * 1024
#: Most pages extracted from one file; the tool's ``pages`` pattern names pages 1 to 999
#: (spec section 4.3), so a page past 999 could never be read.
MAX_PAGES = 999
#: Characters stored per page; longer pages (a huge sheet, a text with no page breaks inside
#: explicit ones) are cut here. The tool cuts each page again at 32,000 for the model (spec
#: section 4.2); the rest is kept for search.
MAX_PAGE_CHARS = 100_000
#: Characters stored per file, all pages together; a file with more text is skipped.
MAX_TEXT_CHARS = 4_000_000
#: Size of a page of a format without pages (plain text, CSV, HTML, and DOCX, ODT or RTF without
#: page breaks): about one printed page, so "pages 1-3" reads the start of the document.
VIRTUAL_PAGE_CHARS = 4_000
#: Highest uncompressed / compressed size of one zip member (DOCX, XLSX, PPTX, ODT). Office XML
#: compresses 5 to 20 times; a zip bomb a thousand times or more.
MAX_COMPRESSION_RATIO = 100
#: Members smaller than this uncompressed are not held to the ratio: a few kilobytes of repeated
#: XML (an empty sheet, a style table) legitimately compress further.
RATIO_FLOOR_BYTES = 1024 * 1024
#: Most bytes all members of a zip-based file may declare uncompressed, together.
MAX_UNCOMPRESSED_BYTES = 200 * 1024 * 1024
#: Most members of a zip-based file; a real DOCX has a few dozen, a large PPTX a few thousand.
MAX_ZIP_MEMBERS = 10_000
#: Wall-clock seconds one file may take in the sandbox, start-up included, before it is killed.
WALL_SECONDS = 30.0
#: CPU seconds of the sandbox process (RLIMIT_CPU); also ends a sandbox orphaned by its worker.
CPU_SECONDS = 30
#: Address space of the sandbox process (RLIMIT_AS), in bytes.
MEMORY_BYTES = 1024 * 1024 * 1024
#: Claims of one file by a worker that then died (killed, out of memory) before storing a
#: result; the next claim ends the file ``unavailable`` (reason ``interrupted``).
MAX_ATTEMPTS = 2


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """The limits of one extraction; the defaults are the constants above."""

    max_input_bytes: int = MAX_INPUT_BYTES
    max_pages: int = MAX_PAGES
    max_page_chars: int = MAX_PAGE_CHARS
    max_text_chars: int = MAX_TEXT_CHARS
    virtual_page_chars: int = VIRTUAL_PAGE_CHARS
    max_compression_ratio: float = MAX_COMPRESSION_RATIO
    ratio_floor_bytes: int = RATIO_FLOOR_BYTES
    max_uncompressed_bytes: int = MAX_UNCOMPRESSED_BYTES
    max_zip_members: int = MAX_ZIP_MEMBERS
    wall_seconds: float = WALL_SECONDS
    cpu_seconds: int = CPU_SECONDS
    memory_bytes: int = MEMORY_BYTES


#: The limits used unless a caller passes others.
DEFAULT_LIMITS = Limits()
