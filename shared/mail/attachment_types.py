"""One attachment type for every reader: ``type:``, the ``attachment_type`` facet and extraction.

:func:`attachment_type` gives an attachment one of the kinds of ``type:``
(:data:`ATTACHMENT_TYPES`) or :data:`OTHER`, in this order:

1. its content type, when that names a kind (``application/pdf``, ``image/*``, the Office types);
2. else its filename's extension, in any case (``SCAN.PDF``), because many mailers send every
   file as ``application/octet-stream``;
3. else its first bytes (``%PDF-``, the PNG, JPEG and GIF signatures, ``BEGIN:VCALENDAR``, and the
   ZIP signature, read as DOCX or XLSX when a ``word/`` or ``xl/`` member shows in the first
   :data:`HEAD_BYTES`).

The store computes it once, at ingest, into ``attachments.attachment_type``; migration 0006 fills
that column for older rows with the same rules in SQL (a test holds the two to agreement). Pure: no
I/O. Called by ``store.insert_message`` and attachment text extraction.
"""

from __future__ import annotations


__all__ = ["ATTACHMENT_TYPES", "HEAD_BYTES", "OTHER", "attachment_type"]

#: Values of ``type:`` in search; the ``attachment_type`` facet (spec section 6.1, step 3)
#: reports the same kinds.
ATTACHMENT_TYPES: frozenset[str] = frozenset(
    {"pdf", "doc", "docx", "xls", "xlsx", "image", "calendar", "zip", "text", "html"}
)

#: The kind of an attachment that is none of :data:`ATTACHMENT_TYPES`.
OTHER = "other"
#: Bytes of content that :func:`attachment_type` looks at (magic numbers, ZIP member names).
HEAD_BYTES = 4096

_BY_CONTENT_TYPE: dict[str, str] = {
    "application/pdf": "pdf",
    "application/x-pdf": "pdf",
    "application/acrobat": "pdf",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.template": "docx",
    "application/vnd.ms-word.document.macroenabled.12": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.template": "xlsx",
    "application/vnd.ms-excel.sheet.macroenabled.12": "xlsx",
    "text/calendar": "calendar",
    "application/ics": "calendar",
    "application/zip": "zip",
    "application/x-zip-compressed": "zip",
    "application/x-zip": "zip",
    "text/plain": "text",
    "text/html": "html",
}
_BY_EXTENSION: dict[str, str] = {
    "pdf": "pdf",
    "doc": "doc", "dot": "doc",
    "docx": "docx", "docm": "docx", "dotx": "docx",
    "xls": "xls", "xlt": "xls",
    "xlsx": "xlsx", "xlsm": "xlsx", "xltx": "xlsx",
    "png": "image", "jpg": "image", "jpeg": "image", "gif": "image", "bmp": "image",
    "tif": "image", "tiff": "image", "webp": "image", "heic": "image", "heif": "image",
    "svg": "image",
    "ics": "calendar", "vcs": "calendar",
    "zip": "zip",
    "txt": "text",
    "html": "html", "htm": "html",
}
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "pdf"),
    (b"\x89PNG\r\n\x1a\n", "image"),
    (b"\xff\xd8\xff", "image"),
    (b"GIF8", "image"),
    (b"BEGIN:VCALENDAR", "calendar"),
)
_ZIP = b"PK\x03\x04"


def attachment_type(content_type: str, filename: str | None, content: bytes) -> str:
    """The kind of one attachment (module docstring): a member of
    :data:`ATTACHMENT_TYPES`, or :data:`OTHER`.

    ``content_type`` is the lower-cased type/subtype without parameters (as ``parse`` stores
    it), ``filename`` the decoded filename or None, ``content`` the decoded bytes (only the first
    :data:`HEAD_BYTES` are read).
    """
    kind = _BY_CONTENT_TYPE.get(content_type)
    if kind is None and content_type.startswith("image/"):
        kind = "image"
    if kind is None and filename and "." in filename:
        kind = _BY_EXTENSION.get(filename.rsplit(".", 1)[1].lower())
    if kind is None:
        kind = _sniffed(content[:HEAD_BYTES])
    return kind if kind in ATTACHMENT_TYPES else OTHER


def _sniffed(head: bytes) -> str | None:
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if head.startswith(_ZIP):
        # An Office Open XML file is a ZIP whose member names show in its local headers.
        if b"word/" in head:
            return "docx"
        if b"xl/" in head:
            return "xlsx"
        return "zip"
    return None
