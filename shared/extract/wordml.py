"""Text of a DOCX (WordprocessingML, ECMA-376 part 1 section 17), opened with python-docx.

The body is walked in document order: paragraphs, tables (a row per line, cells separated by
tabs) and text boxes. Pages break at ``w:br w:type="page"``, at a paragraph with
``w:pageBreakBefore``, and at ``w:lastRenderedPageBreak``, where Word last laid out a page end,
so the pages are the ones the sender saw when the file was saved by Word. Headers, footers,
notes, field instructions and deleted text are left out; ``mc:Fallback`` repeats
``mc:Choice`` for older readers and is skipped. Pure: no I/O; runs inside the sandbox, after the
zip directory check.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import docx
from lxml import etree

from shared.extract.pages import Flow

__all__ = ["docx_text"]

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"


def docx_text(content: bytes) -> str:
    """The body text of a DOCX, page breaks as :data:`~shared.extract.pages.BREAK`.

    Raises:
        ValueError, KeyError, lxml.etree.XMLSyntaxError, zipfile.BadZipFile: not a readable
            DOCX (from python-docx).
    """
    body = docx.Document(io.BytesIO(content)).element.body
    flow = Flow()
    _children(body, flow)
    return flow.text()


def _children(element: etree._Element, flow: Flow) -> None:
    for child in element:
        handler = _HANDLERS.get(child.tag, _children)
        handler(child, flow)


def _paragraph(node: etree._Element, flow: Flow) -> None:
    properties = node.find(f"{_W}pPr")
    if properties is not None and properties.find(f"{_W}pageBreakBefore") is not None:
        flow.page_break()
    _children(node, flow)
    flow.write("\n")


def _row(node: etree._Element, flow: Flow) -> None:
    cells = []
    for cell in node.iterchildren(f"{_W}tc"):
        inner = Flow()
        _children(cell, inner)
        cells.append(inner.cell_text())
    flow.write("\t".join(cells).rstrip("\t") + "\n")


def _break(node: etree._Element, flow: Flow) -> None:
    if node.get(f"{_W}type") == "page":
        flow.page_break()
    else:
        flow.write("\n")


def _skip(node: etree._Element, flow: Flow) -> None:
    return None


_HANDLERS: dict[str, Callable[[etree._Element, Flow], None]] = {
    f"{_W}p": _paragraph,
    f"{_W}tr": _row,
    f"{_W}t": lambda node, flow: flow.write(node.text or ""),
    f"{_W}tab": lambda node, flow: flow.write("\t"),
    f"{_W}br": _break,
    f"{_W}cr": lambda node, flow: flow.write("\n"),
    f"{_W}lastRenderedPageBreak": lambda node, flow: flow.page_break(),
    f"{_W}pPr": _skip,
    f"{_W}rPr": _skip,
    f"{_W}sectPr": _skip,
    f"{_W}instrText": _skip,
    f"{_W}delText": _skip,
    _MC_FALLBACK: _skip,
}
