"""Text of an ODT (OpenDocument text, ODF 1.2 part 1), opened with odfpy.

``office:text`` is walked in document order: headings and paragraphs, lists, tables (a row per
line, cells separated by tabs), frames and footnote bodies. Pages break at
``text:soft-page-break`` (where the writing application last laid out a page end) and at
paragraphs whose style, or a parent style, has ``fo:break-before`` or ``fo:break-after`` set to
``page``. Annotations, forms and change-tracking records are left out. Pure: no I/O; runs inside
the sandbox, after the zip directory check.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from odf.element import Element
from odf.namespaces import FONS, OFFICENS, STYLENS, TABLENS, TEXTNS
from odf.opendocument import OpenDocument, load
from odf.style import Style

from shared.extract.pages import Flow

__all__ = ["odt_text"]

#: Paragraph style name -> (page break before, page break after).
_Breaks = dict[str, tuple[bool, bool]]


def odt_text(content: bytes) -> str:
    """The text of an ODT, page breaks as :data:`~shared.extract.pages.BREAK`.

    Raises:
        KeyError, ValueError, xml.sax.SAXException, zipfile.BadZipFile: not a readable ODT
            (from odfpy).
    """
    document = load(io.BytesIO(content))
    flow = Flow()
    _children(document.text, flow, _page_breaks(document))
    return flow.text()


def _page_breaks(document: OpenDocument) -> _Breaks:
    declared: dict[str, tuple[str, bool, bool]] = {}
    for styles in (document.styles, document.automaticstyles):
        for style in styles.getElementsByType(Style):
            before = after = False
            for props in style.childNodes:
                if getattr(props, "qname", None) == (STYLENS, "paragraph-properties"):
                    before = props.getAttrNS(FONS, "break-before") == "page"
                    after = props.getAttrNS(FONS, "break-after") == "page"
            declared[style.getAttrNS(STYLENS, "name")] = (
                style.getAttrNS(STYLENS, "parent-style-name"), before, after)

    def resolve(name: str | None, seen: frozenset[str]) -> tuple[bool, bool]:
        if name is None or name not in declared or name in seen:
            return False, False
        parent, before, after = declared[name]
        above = resolve(parent, seen | {name})
        return before or above[0], after or above[1]

    return {name: resolve(name, frozenset()) for name in declared}


def _children(node: Element, flow: Flow, breaks: _Breaks) -> None:
    for child in node.childNodes:
        if child.nodeType == child.TEXT_NODE:
            flow.write(child.data)
        else:
            _HANDLERS.get(child.qname, _children)(child, flow, breaks)


def _paragraph(node: Element, flow: Flow, breaks: _Breaks) -> None:
    before, after = breaks.get(node.getAttrNS(TEXTNS, "style-name"), (False, False))
    if before:
        flow.page_break()
    _children(node, flow, breaks)
    flow.write("\n")
    if after:
        flow.page_break()


def _row(node: Element, flow: Flow, breaks: _Breaks) -> None:
    cells = []
    for cell in node.childNodes:
        if getattr(cell, "qname", None) == (TABLENS, "table-cell"):
            inner = Flow()
            _children(cell, inner, breaks)
            cells.append(inner.cell_text())
    flow.write("\t".join(cells).rstrip("\t") + "\n")


def _spaces(node: Element, flow: Flow, breaks: _Breaks) -> None:
    count = node.getAttrNS(TEXTNS, "c")
    flow.write(" " * (int(count) if count and count.isdigit() else 1))


def _skip(node: Element, flow: Flow, breaks: _Breaks) -> None:
    return None


_HANDLERS: dict[tuple[str, str], Callable[[Element, Flow, _Breaks], None]] = {
    (TEXTNS, "p"): _paragraph,
    (TEXTNS, "h"): _paragraph,
    (TABLENS, "table-row"): _row,
    (TEXTNS, "s"): _spaces,
    (TEXTNS, "tab"): lambda node, flow, breaks: flow.write("\t"),
    (TEXTNS, "line-break"): lambda node, flow, breaks: flow.write("\n"),
    (TEXTNS, "soft-page-break"): lambda node, flow, breaks: flow.page_break(),
    (TEXTNS, "note-citation"): _skip,
    (TEXTNS, "tracked-changes"): _skip,
    (TEXTNS, "sequence-decls"): _skip,
    (OFFICENS, "annotation"): _skip,
    (OFFICENS, "forms"): _skip,
}
