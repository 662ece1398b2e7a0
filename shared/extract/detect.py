"""Which of the formats we read an attachment is: from its bytes, filename and content type.

Senders label attachments badly: a PDF arrives as ``application/octet-stream``, a DOCX as
``application/zip``, an extension in upper case. :func:`detect_type` therefore trusts, in order,
the file's magic bytes (``%PDF-``, ``{\\rtf``, a zip's or an OLE2 compound file's own directory),
then the filename's extension (any case), then a content type that names a format, then an HTML
sniff. It is the one place that decides; the lead may swap it for the normalised attachment
type of ``attachments`` (migration 0006) once that lands. Pure: no I/O.
"""

from __future__ import annotations

import io
import zipfile
from enum import StrEnum
from pathlib import PurePosixPath

import olefile

__all__ = ["AttachmentType", "detect_type"]


class AttachmentType(StrEnum):
    """The formats whose text we extract."""

    PDF = "pdf"
    DOCX = "docx"
    DOC = "doc"
    XLSX = "xlsx"
    XLS = "xls"
    PPTX = "pptx"
    ODT = "odt"
    RTF = "rtf"
    TXT = "txt"
    CSV = "csv"
    HTML = "html"
    EML = "eml"


_T = AttachmentType

_BY_EXTENSION: dict[str, AttachmentType] = {
    ".pdf": _T.PDF, ".docx": _T.DOCX, ".doc": _T.DOC, ".xlsx": _T.XLSX, ".xlsm": _T.XLSX,
    ".xls": _T.XLS, ".pptx": _T.PPTX, ".odt": _T.ODT, ".rtf": _T.RTF, ".txt": _T.TXT,
    ".text": _T.TXT, ".md": _T.TXT, ".log": _T.TXT, ".csv": _T.CSV, ".tsv": _T.CSV,
    ".htm": _T.HTML, ".html": _T.HTML, ".xhtml": _T.HTML, ".eml": _T.EML,
}

_BY_CONTENT_TYPE: dict[str, AttachmentType] = {
    "application/pdf": _T.PDF,
    "application/x-pdf": _T.PDF,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": _T.DOCX,
    "application/msword": _T.DOC,
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": _T.XLSX,
    "application/vnd.ms-excel.sheet.macroenabled.12": _T.XLSX,
    "application/vnd.ms-excel": _T.XLS,
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": _T.PPTX,
    "application/vnd.oasis.opendocument.text": _T.ODT,
    "application/rtf": _T.RTF,
    "text/rtf": _T.RTF,
    "text/plain": _T.TXT,
    "text/markdown": _T.TXT,
    "text/csv": _T.CSV,
    "text/comma-separated-values": _T.CSV,
    "application/csv": _T.CSV,
    "text/tab-separated-values": _T.CSV,
    "text/html": _T.HTML,
    "application/xhtml+xml": _T.HTML,
    "message/rfc822": _T.EML,
    "message/global": _T.EML,
}

#: The zip member that makes an Office Open XML package a document, workbook or presentation
#: (ECMA-376 part 1, the main part of each), and the ODF mimetype (ODF 1.2 part 3, 3.3).
_OOXML_MAIN_PARTS: tuple[tuple[str, AttachmentType], ...] = (
    ("word/document.xml", _T.DOCX), ("xl/workbook.xml", _T.XLSX),
    ("ppt/presentation.xml", _T.PPTX),
)
_ODT_MIMETYPE = b"application/vnd.oasis.opendocument.text"

_ZIP_MAGIC = b"PK\x03\x04"
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_TEXT_TYPES = frozenset({_T.TXT, _T.CSV, _T.HTML, _T.EML})


def detect_type(content_type: str | None, filename: str | None, content: bytes
                ) -> AttachmentType | None:
    """The format of an attachment, or None when it is none we read (images, archives, …).

    Args:
        content_type: the part's MIME type as stored (``type/subtype``, any case, parameters
            ignored), or None.
        filename: the part's filename (RFC 2183 / RFC 2231 decoded), or None.
        content: the decoded bytes.

    Returns:
        The type; an OLE2 or zip file reports what its own directory holds, whatever its name.
    """
    hinted = _hint(content_type, filename)
    head = content[:1024]
    # PDF readers take a header within the first 1,024 bytes; a text, CSV, HTML or email that
    # merely mentions "%PDF-1.7" there stays what it says it is (an attached email with that
    # in its subject ended "corrupt": found by an attack).
    if head.startswith(b"%PDF-") or (b"%PDF-" in head and hinted not in _TEXT_TYPES):
        return _T.PDF
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{\\rtf"):
        return _T.RTF
    if head.startswith(_ZIP_MAGIC):
        return _zip_type(content) or (hinted if hinted in {_T.DOCX, _T.XLSX, _T.PPTX, _T.ODT}
                                      else None)
    if head.startswith(_OLE_MAGIC):
        return _ole_type(content, hinted)
    if hinted in _TEXT_TYPES or hinted is None:
        if _looks_binary(head):
            return None
        if hinted is None and head.lstrip().lower().startswith((b"<!doctype html", b"<html")):
            return _T.HTML
    return hinted


def _hint(content_type: str | None, filename: str | None) -> AttachmentType | None:
    if filename:
        by_name = _BY_EXTENSION.get(PurePosixPath(filename.strip().lower()).suffix)
        if by_name is not None:
            return by_name
    if content_type:
        return _BY_CONTENT_TYPE.get(content_type.split(";", 1)[0].strip().lower())
    return None


def _zip_type(content: bytes) -> AttachmentType | None:
    # Reads only the central directory; the members stay compressed (a bomb is no risk here).
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            names = set(archive.namelist())
            for part, kind in _OOXML_MAIN_PARTS:
                if part in names:
                    return kind
            if "mimetype" in names and archive.getinfo("mimetype").file_size < 100:
                if archive.read("mimetype").strip() == _ODT_MIMETYPE:
                    return _T.ODT
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError):
        return None
    return None


def _ole_type(content: bytes, hinted: AttachmentType | None) -> AttachmentType | None:
    # A password-protected DOCX or XLSX is an OLE2 file holding "EncryptedPackage"
    # ([MS-OFFCRYPTO] 2.3.4.4); it keeps the type its name says, and extraction reports it
    # encrypted.
    try:
        ole = olefile.OleFileIO(content)
    except (OSError, ValueError):
        return hinted if hinted in {_T.DOC, _T.XLS} else None
    try:
        if ole.exists("WordDocument"):
            return _T.DOC
        if ole.exists("Workbook") or ole.exists("Book"):
            return _T.XLS
        if ole.exists("EncryptedPackage") and hinted in {_T.DOCX, _T.XLSX, _T.PPTX}:
            return hinted
        return None
    finally:
        ole.close()


def _looks_binary(head: bytes) -> bool:
    # NUL bytes do not occur in text, except in UTF-16 and UTF-32 (which start with a BOM).
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False
    return b"\x00" in head
