"""Pages: how extracted text is cut into the pages ``mail_get_attachment_text`` returns.

A page is what the format itself calls one: a PDF page, a spreadsheet sheet, a presentation
slide. Formats that flow (DOCX, DOC, ODT, RTF, plain text, CSV, HTML) start a new page at each
page break the file holds (DOCX: a page break, ``pageBreakBefore``, or Word's last rendered page
break; DOC and plain text: a form feed; ODT: ``fo:break-before``/``break-after`` and soft page
breaks; RTF: ``\\page``). The extractors mark those breaks with a form feed (:data:`BREAK`). A
text without any break is cut into pages of about ``Limits.virtual_page_chars`` characters, at a
paragraph end where there is one in the second half of the page, else a line end, else a space;
joining the pages gives back every character but the whitespace at the cuts.

Page numbers start at 1 (spec section 4.3). Pure: no I/O; runs inside the sandbox.
"""

from __future__ import annotations

import re

from shared.extract.limits import Limits
from shared.extract.outcome import Outcome, Reason, TextStatus

__all__ = ["BREAK", "Flow", "clean", "paginate", "finish"]

#: The page-break mark extractors put in flowing text.
BREAK = "\f"

# C0 controls but tab, newline and form feed; PostgreSQL text cannot hold NUL at all.
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0d-\x1f\x7f]")
_TRAILING_SPACE = re.compile(r"[ \t\u00a0]+\n")
_BLANK_RUNS = re.compile(r"\n{3,}")


class Flow:
    """Flowing text being written by an extractor, with page breaks that never open an empty
    page (Word writes a rendered page break right after a hard one: the two are one break)."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._page_has_text = False

    def write(self, text: str) -> None:
        """Append ``text``."""
        if text:
            self._parts.append(text)
            self._page_has_text = self._page_has_text or not text.isspace()

    def page_break(self) -> None:
        """End the page, unless nothing but whitespace was written since the last break."""
        if self._page_has_text:
            self._parts.append(BREAK)
            self._page_has_text = False

    def text(self) -> str:
        """Everything written, breaks as :data:`BREAK`."""
        return "".join(self._parts)

    def cell_text(self) -> str:
        """Everything written, as one table cell: on one line, without breaks."""
        return " ".join(self.text().replace(BREAK, " ").split())


def clean(text: str) -> str:
    """``text`` with newlines normalised, controls (but tab, newline, form feed) removed, lone
    surrogates replaced, trailing spaces of lines and runs of blank lines folded."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROLS.sub("", text)
    # Lone surrogates come from broken UTF-16 (DOC, PDF text strings); they cannot be encoded.
    text = text.encode("utf-8", "replace").decode("utf-8")
    text = _TRAILING_SPACE.sub("\n", text)
    return _BLANK_RUNS.sub("\n\n", text)


def paginate(text: str, limits: Limits) -> list[str]:
    """Cut flowing ``text`` into pages: at each :data:`BREAK`, or, when it has none, about every
    ``limits.virtual_page_chars`` characters (module docstring). A text that is only whitespace
    has no pages."""
    text = clean(text)
    if not text.strip():
        return []
    if BREAK in text:
        pages = text.split(BREAK)
        while pages and not pages[-1].strip():
            pages.pop()
        return [p.strip("\n") for p in pages]
    return _virtual_pages(text, limits.virtual_page_chars)


def _virtual_pages(text: str, size: int) -> list[str]:
    pages: list[str] = []
    start = 0
    while len(text) - start > size:
        window = text[start:start + size]
        cut = -1
        for separator in ("\n\n", "\n", " "):
            at = window.rfind(separator)
            if at >= size // 2:
                cut = at + len(separator)
                break
        if cut < 0:
            cut = size
        pages.append(window[:cut].strip("\n"))
        start += cut
    pages.append(text[start:].strip("\n"))
    return pages


def finish(pages: list[str], kind: str, limits: Limits) -> Outcome:
    """The outcome of a file whose pages are ``pages``: ``ready`` with each page cleaned and cut
    at ``limits.max_page_chars``, or ``skipped`` when they hold more than
    ``limits.max_text_chars`` characters (after the cut) or are more than ``limits.max_pages``."""
    pages = [clean(p).replace(BREAK, "\n").strip("\n")[:limits.max_page_chars] for p in pages]
    if sum(map(len, pages)) > limits.max_text_chars:
        return Outcome.failed(Reason.TOO_MUCH_TEXT, kind)
    if len(pages) > limits.max_pages:
        return Outcome.failed(Reason.TOO_MANY_PAGES, kind)
    return Outcome(status=TextStatus.READY, kind=kind, pages=pages)
