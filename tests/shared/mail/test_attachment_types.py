"""``shared.mail.attachment_types``: one kind per attachment, the same for ``type:``, the facet and
migration 0006's backfill (issue 11)."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from importlib import resources

import asyncpg
import pytest

from shared.mail.attachment_types import OTHER, attachment_type
from shared.ingest.pipeline import ingest_raw
from shared.search.keyword import Filters, Scope, facets, where_sql
from shared.search.query import ATTACHMENT_TYPES, parse
from shared.tenancy.store import create_identity, create_tenant
from tests.shared.search.conftest import mail

PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n"
DOCX = b"PK\x03\x04\x14\x00\x06\x00" + b"\x00" * 22 + b"[Content_Types].xml" + b"\x00" * 300 \
    + b"PK\x03\x04" + b"\x00" * 26 + b"word/document.xml"
XLSX = b"PK\x03\x04" + b"\x00" * 26 + b"xl/workbook.xml"

CASES = [
    # (content type, filename, content, kind)
    ("application/pdf", "a.bin", b"", "pdf"),
    ("application/octet-stream", "SCAN.PDF", b"", "pdf"),
    ("application/octet-stream", "scan.Pdf", b"junk", "pdf"),
    ("application/octet-stream", None, PDF, "pdf"),
    ("application/octet-stream", "scan", PDF, "pdf"),
    ("application/x-download", "statement.unknown", PDF, "pdf"),
    ("image/heic", "IMG_1.HEIC", b"", "image"),
    ("application/octet-stream", "photo.JPG", b"", "image"),
    ("application/octet-stream", None, b"\x89PNG\r\n\x1a\n....", "image"),
    ("application/octet-stream", None, b"\xff\xd8\xff\xe0", "image"),
    ("application/octet-stream", "invite", b"BEGIN:VCALENDAR\r\n", "calendar"),
    ("application/ics", None, b"", "calendar"),
    ("application/octet-stream", "report.docx", b"", "docx"),
    ("application/msword", None, b"\xd0\xcf\x11\xe0", "doc"),
    ("application/octet-stream", "Letter.DOC", b"\xd0\xcf\x11\xe0", "doc"),
    ("application/octet-stream", None, DOCX, "docx"),
    ("application/octet-stream", None, XLSX, "xlsx"),
    ("application/octet-stream", None, b"PK\x03\x04" + b"\x00" * 30 + b"notes.txt", "zip"),
    ("application/vnd.ms-excel", "x.pdf", b"", "xls"),  # a content type naming a kind wins
    ("text/plain", None, b"", "text"),
    ("application/octet-stream", "readme.TXT", b"", "text"),
    ("text/html", None, b"", "html"),
    ("text/csv", "data.csv", b"a,b\n", OTHER),
    ("message/rfc822", None, b"From: a@x\r\n", OTHER),
    ("application/octet-stream", "archive.tar.gz", b"\x1f\x8b", OTHER),
    ("application/octet-stream", "noext.", PDF, "pdf"),
]


@pytest.mark.parametrize(("content_type", "filename", "content", "kind"), CASES)
def test_kind(content_type: str, filename: str | None, content: bytes, kind: str) -> None:
    assert attachment_type(content_type, filename, content) == kind


def test_every_kind_is_a_type_operator_value() -> None:
    kinds = {attachment_type(c, f, b) for c, f, b, _ in CASES}
    assert kinds - {OTHER} == ATTACHMENT_TYPES


def _backfill_sql() -> str:
    sql = resources.files("shared.db.migrations").joinpath("0006_attachment_type.sql").read_text()
    [update] = re.findall(r"^UPDATE attachments .*?;$", sql, re.MULTILINE | re.DOTALL)
    return update


async def _identity(conn: asyncpg.Connection) -> str:
    tenant = await create_tenant(conn, "acme")
    return (await create_identity(conn, tenant.id, "desk@acme.example")).id


async def test_the_migration_backfill_agrees_with_the_function(conn: asyncpg.Connection) -> None:
    identity_id = await _identity(conn)
    for n, (content_type, filename, content, _) in enumerate(CASES):
        await ingest_raw(conn, None, identity_id, mail(
            f"m{n}@x.example", subject=f"case {n}", body="see attached",
            attachment=(filename or "", content_type, content)))
    stored = {r["id"]: r["attachment_type"]
              for r in await conn.fetch("SELECT id, attachment_type FROM attachments")}
    assert len(stored) >= len(CASES)
    await conn.execute(_backfill_sql())
    rows = await conn.fetch("SELECT id, content_type, filename, content, attachment_type"
                            " FROM attachments")
    for r in rows:
        expected = attachment_type(r["content_type"], r["filename"], r["content"])
        assert (r["filename"], r["attachment_type"]) == (r["filename"], expected)
        assert stored[r["id"]] == expected


async def test_type_operator_and_facet_agree_on_octet_stream_pdfs(conn: asyncpg.Connection) -> None:
    """Before: type:pdf found the upper-case .PDF (filename) but not the magic-bytes one, and the
    facet counted both as ``other``."""
    identity_id = await _identity(conn)
    await ingest_raw(conn, None, identity_id, mail(
        "upper@x.example", subject="scan one", body="attached",
        attachment=("SCAN.PDF", "application/octet-stream", PDF)))
    await ingest_raw(conn, None, identity_id, mail(
        "magic@x.example", subject="scan two", body="attached",
        attachment=("scan", "application/octet-stream", PDF)))
    await ingest_raw(conn, None, identity_id, mail(
        "photo@x.example", subject="photo", body="attached",
        attachment=("photo.jpg", "image/jpeg", b"\xff\xd8\xff")))
    scope = Scope(identity_ids=[identity_id], as_of=datetime.now(timezone.utc), time_zone="UTC")

    where, params, _ = where_sql(scope, parse("type:pdf").root, Filters())
    found = await conn.fetch(f"SELECT m.rfc_message_id FROM messages m WHERE {where}", *params)
    assert {r["rfc_message_id"] for r in found} == {"upper@x.example", "magic@x.example"}
    pdf_facet = await facets(conn, where, params, "UTC")
    assert [(f.value, f.count) for f in pdf_facet.attachment_type] == [("pdf", 2)]

    where, params, _ = where_sql(scope, parse("has:attachment").root, Filters())
    every = await facets(conn, where, params, "UTC")
    assert {(f.value, f.count) for f in every.attachment_type} == {("pdf", 2), ("image", 1)}
