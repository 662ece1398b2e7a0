"""An HTML body as the plain text an agent reads: no Markdown, links kept, quoted blocks marked.

``lxml`` parses the HTML (libxml2's forgiving HTML parser) and ``inscriptis`` lays it out as text
the way a browser would (blocks on their own lines, tables as columns, list items with bullets,
no emphasis markers, headings as plain lines). Before layout, the tree is adjusted:

- a rule (``<hr>``) becomes a line of dashes;
- a link whose text is not its own address is followed by the address in angle brackets
  (``Read the report <https://…>``), as RFC 3986 Appendix C suggests for URIs in plain text; links
  without text (images) add nothing;
- quoted history is marked the way plain-text mail marks it, each of its lines starting with
  ``> ``, so that ``quotes.strip_quotes`` removes it by one rule for both: Gmail's ``gmail_quote``
  blocks, ``<blockquote type="cite">`` (Apple Mail, Thunderbird) and other blockquotes except
  Outlook's indentation (``border: none``).

Outlook and Hotmail put no quote element around history but a rule or a bordered ``div`` before a
From/Sent/To/Subject block, which reaches ``strip_quotes`` as those lines. Pure: no I/O. Called by
``parse``.
"""

from __future__ import annotations

import re

import lxml.etree
import lxml.html
from inscriptis import Inscriptis
from inscriptis.css_profiles import CSS_PROFILES
from inscriptis.model.config import ParserConfig

__all__ = ["html_to_text"]

# Private-use characters stand for the start and end of a quoted block during layout; any in the
# input are dropped first so that the markers are unambiguous.
_OPEN, _CLOSE = "\ue000", "\ue001"
_QUOTES = lxml.etree.XPath(
    "//*[contains(concat(' ', normalize-space(@class), ' '), ' gmail_quote ')"
    " or self::blockquote[not(contains(translate(@style, 'BORDENO ', 'bordeno'), 'border:none'))]]")
_LINKS = lxml.etree.XPath("//a[@href]")
_RULES = lxml.etree.XPath("//hr")
_CONFIG = ParserConfig(css=CSS_PROFILES["strict"])
_BLANK_LINES = re.compile(r"\n{3,}")
# lxml refuses a str that declares its encoding; the text is decoded already.
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*>")


def html_to_text(html: str) -> str:
    """``html`` (a whole document or a fragment) as plain text (module docstring).

    Returns the text with ``\\n`` line endings and at most one blank line in a row, ``""`` for
    markup without text. Raises ``ValueError`` (or an ``lxml`` error) for input lxml cannot parse
    and ``RecursionError`` for a tree too deep to lay out; ``parse`` records either as a defect.
    """
    html = _XML_DECLARATION.sub("", html.replace(_OPEN, "").replace(_CLOSE, "")).strip()
    if not html:
        return ""
    tree = lxml.html.document_fromstring(html)
    _mark_links(tree)
    _mark_rules(tree)
    _mark_quotes(tree)
    text = Inscriptis(tree, _CONFIG).get_text()
    return _BLANK_LINES.sub("\n\n", _quoted_lines(text)).strip("\n")


def _mark_links(tree: lxml.html.HtmlElement) -> None:
    for link in _LINKS(tree):
        href = (link.get("href") or "").strip()
        text = link.text_content().strip()
        if not text or not href.lower().startswith(("http:", "https:", "mailto:")):
            continue
        address = href[7:] if href.lower().startswith("mailto:") else href
        if address.rstrip("/") in text:
            continue
        link.tail = f" <{address}>" + (link.tail or "")


def _mark_rules(tree: lxml.html.HtmlElement) -> None:
    # A rule is a line of its own, as plain-text mail writes it; Outlook's separator before the
    # quoted header block is one.
    for rule in _RULES(tree):
        line = lxml.html.Element("div")
        line.text, line.tail = "-----", rule.tail
        rule.getparent().replace(rule, line)


def _mark_quotes(tree: lxml.html.HtmlElement) -> None:
    marked: set[lxml.html.HtmlElement] = set()
    for element in _QUOTES(tree):
        if any(ancestor in marked for ancestor in element.iterancestors()):
            continue
        marked.add(element)
        opening = lxml.html.Element("div")
        opening.text = _OPEN
        closing = lxml.html.Element("div")
        closing.text = _CLOSE
        opening.tail, element.text = element.text, None
        element.insert(0, opening)
        element.append(closing)


def _quoted_lines(text: str) -> str:
    """Lines between the markers prefixed with ``> ``; the marker lines dropped."""
    out: list[str] = []
    depth = 0
    for line in text.split("\n"):
        opens, closes = line.count(_OPEN), line.count(_CLOSE)
        line = line.replace(_OPEN, "").replace(_CLOSE, "")
        if depth + opens > 0 and line.strip():
            out.append("> " + line.strip())
        elif line.strip() or not (opens or closes):
            out.append(line.rstrip())
        depth = max(depth + opens - closes, 0)
    return "\n".join(out)
