"""From a file's bytes and detected type to its pages: one reader per format.

Paged formats give their own pages: PDF (pypdf), XLSX and XLS (a sheet a page,
``shared.extract.sheets``) and PPTX (a slide a page, ``shared.extract.slides``). Flowing formats
give text with page breaks, which ``shared.extract.pages.paginate`` cuts into pages: DOCX
(``wordml``), DOC (``msdoc``), ODT (``opendoc``), RTF (striprtf; ``\\page`` breaks), plain text and
CSV (form feeds break pages), HTML (inscriptis), an attached email (``message/rfc822``,
``shared.extract.forwarded``). Zip-based files pass the zip directory check
first. A reader is imported only when a file of its format comes, because the sandbox starts a
new interpreter per file and importing them all would double its start-up.

:func:`extract_pages` is what the sandbox runs; a library that rejects the file ends as
``unavailable`` (``corrupt``), never as an exception. Pure: no I/O.
"""

from __future__ import annotations

import codecs
import importlib
import io
import re
import zipfile
from collections.abc import Callable

from shared.extract.detect import AttachmentType
from shared.extract.limits import Limits
from shared.extract.outcome import Encrypted, Outcome, Reason
from shared.extract.pages import finish, paginate
from shared.extract.zipguard import check_zip

__all__ = ["extract_pages", "decode_text"]

_T = AttachmentType
_ZIP_BASED = frozenset({_T.DOCX, _T.XLSX, _T.PPTX, _T.ODT})
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def extract_pages(content: bytes, kind: AttachmentType, limits: Limits) -> Outcome:
    """The pages of ``content``, read as ``kind`` under ``limits``.

    Returns:
        ``ready`` with the pages; ``skipped`` over a limit (``too_many_pages``,
        ``too_much_text``, or a zip directory limit); ``unavailable`` with ``encrypted`` or
        ``corrupt``. A ``MemoryError`` propagates, for the sandbox to report.
    """
    if kind in _ZIP_BASED:
        if content.startswith(_OLE_MAGIC):
            # [MS-OFFCRYPTO] 2.3.4.4: a password-protected OOXML file is an OLE2 file
            return Outcome.failed(Reason.ENCRYPTED, kind)
        if (reason := check_zip(content, limits)) is not None:
            return Outcome.failed(reason, kind)
    module, function, paged = _READERS[kind]
    reader: Callable[..., object] = getattr(importlib.import_module(module), function)
    try:
        if paged:
            pages = reader(content, limits.max_pages)
            if pages is None:
                return Outcome.failed(Reason.TOO_MANY_PAGES, kind)
        else:
            pages = paginate(reader(content), limits)
    except Encrypted:
        return Outcome.failed(Reason.ENCRYPTED, kind)
    except MemoryError:
        raise
    except Exception as exc:
        # Whatever a third-party parser raises on a hostile or broken file (each has its own
        # exception types, and many raise KeyError, ValueError or RecursionError) means the
        # same thing here: the file cannot be read. The sandbox logs the type, never content.
        if _odf_encrypted(kind, content):
            return Outcome.failed(Reason.ENCRYPTED, kind)
        return Outcome.failed(Reason.CORRUPT, kind, detail=type(exc).__name__)
    return finish(pages, kind, limits)


def _odf_encrypted(kind: AttachmentType, content: bytes) -> bool:
    # ODF 1.2 part 3, 4.8: an encrypted member has manifest:encryption-data in the manifest.
    if kind is not _T.ODT:
        return False
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            return b"encryption-data" in archive.read("META-INF/manifest.xml")
    except (KeyError, zipfile.BadZipFile, OSError, ValueError):
        return False


def _pdf_pages(content: bytes, max_pages: int) -> list[str] | None:
    """One page per PDF page, text in content-stream order; None past ``max_pages`` pages.

    A PDF encrypted with an empty user password (only printing or copying restricted) opens as
    any viewer opens it; one that needs a password raises :class:`Encrypted`. pypdf itself
    refuses a page tree that loops ("Detected cyclic page references").
    """
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(content))
    if reader.is_encrypted:
        try:
            opened = reader.decrypt("")
        except (pypdf.errors.DependencyError, NotImplementedError, pypdf.errors.PdfReadError) as exc:
            raise Encrypted from exc
        if not opened:
            raise Encrypted
    try:
        count = len(reader.pages)
    except pypdf.errors.LimitReachedError:
        return None  # pypdf's own cap on a page tree: a /Count of 200,000 Kids
    if count > max_pages:
        return None
    return [page.extract_text() or "" for page in reader.pages]


_RTF_PAGE = re.compile(rb"\\page(?![a-zA-Z]) ?")


def _rtf_text(content: bytes) -> str:
    """The text of an RTF file; ``\\page`` becomes a page break.

    striprtf turns ``\\page`` into blank lines, so it is first rewritten as the hex escape of a
    form feed, which striprtf passes through.
    """
    from striprtf.striprtf import rtf_to_text

    source = _RTF_PAGE.sub(rb"\\'0c", content).decode("latin-1")
    return rtf_to_text(source, errors="replace")


def _plain_text(content: bytes) -> str:
    """A plain text or CSV file's text (:func:`decode_text`); form feeds break pages."""
    return decode_text(content)


_META_CHARSET = re.compile(rb"""<meta[^>]{0,200}?charset=["']?([A-Za-z0-9_.:-]{1,40})""", re.I)


def _html_text(content: bytes) -> str:
    """The text of an HTML file as inscriptis lays it out (blocks on their own lines, tables
    in columns, scripts and styles dropped); the charset of a ``<meta>`` tag is honoured."""
    from inscriptis import get_text

    declared = _META_CHARSET.search(content[:4096])
    return get_text(decode_text(content, declared.group(1).decode() if declared else None))


def decode_text(content: bytes, charset: str | None = None) -> str:
    """``content`` as text: by its byte-order mark, else ``charset`` when Python knows it, else
    UTF-8, else Windows-1252 (which maps every byte but five, replaced by U+FFFD). Attachments
    are stored without their charset parameter, hence the guess."""
    for bom, encoding in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF32_LE, "utf-32"),
                          (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"),
                          (codecs.BOM_UTF16_BE, "utf-16")):
        if content.startswith(bom):
            return content.decode(encoding, "replace")
    if charset:
        try:
            return content.decode(codecs.lookup(charset).name)
        except (LookupError, UnicodeDecodeError):
            pass
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return content.decode("cp1252", "replace")


#: type -> (module, function, gives its own pages). Paged readers take ``max_pages`` and return
#: None past it; flowing readers return text with form feeds at page breaks.
_READERS: dict[AttachmentType, tuple[str, str, bool]] = {
    _T.PDF: (__name__, "_pdf_pages", True),
    _T.XLSX: ("shared.extract.sheets", "xlsx_pages", True),
    _T.XLS: ("shared.extract.sheets", "xls_pages", True),
    _T.PPTX: ("shared.extract.slides", "pptx_pages", True),
    _T.DOCX: ("shared.extract.wordml", "docx_text", False),
    _T.DOC: ("shared.extract.msdoc", "doc_text", False),
    _T.ODT: ("shared.extract.opendoc", "odt_text", False),
    _T.RTF: (__name__, "_rtf_text", False),
    _T.TXT: (__name__, "_plain_text", False),
    _T.CSV: (__name__, "_plain_text", False),
    _T.HTML: (__name__, "_html_text", False),
    _T.EML: ("shared.extract.forwarded", "eml_text", False),
}
