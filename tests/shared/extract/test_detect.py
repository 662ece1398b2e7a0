"""Which format an attachment is (shared.extract.detect): magic bytes, then extension, then
content type."""

from __future__ import annotations

import pytest

from shared.extract.detect import AttachmentType, detect_type
from tests.shared.extract import documents

T = AttachmentType
OCTET = "application/octet-stream"


@pytest.mark.parametrize(("content_type", "filename"), [
    (OCTET, None), (OCTET, "SCAN.PDF"), ("application/pdf", "scan"), (None, None),
    ("image/png", "picture.png"),  # the bytes win over a label that lies
])
def test_a_pdf_is_a_pdf_however_it_is_labelled(content_type, filename):
    assert detect_type(content_type, filename, documents.pdf(["x"])) is T.PDF


def test_an_extension_in_any_case_names_the_type():
    assert detect_type(OCTET, "Invoice.Pdf", b"not really a pdf") is T.PDF
    assert detect_type(OCTET, "NOTES.TXT", b"plain words") is T.TXT
    assert detect_type(OCTET, "table.CSV", b"a,b\n1,2\n") is T.CSV


def test_a_zip_reports_what_its_directory_holds():
    assert detect_type("application/zip", "a.zip", documents.docx_file([["x"]])) is T.DOCX
    assert detect_type(OCTET, None, documents.xlsx_file({"S": [["x"]]})) is T.XLSX
    assert detect_type(OCTET, "deck.docx", documents.pptx_file([("t", "b", "n")])) is T.PPTX
    assert detect_type(OCTET, None, documents.odt_file([["x"]])) is T.ODT


def test_an_ordinary_zip_is_not_a_document(tmp_path):
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("photos/a.jpg", b"\xff\xd8")
    assert detect_type("application/zip", "photos.zip", out.getvalue()) is None


def test_rtf_and_html_are_sniffed_from_their_start():
    assert detect_type(OCTET, None, b"{\\rtf1\\ansi hello}") is T.RTF
    assert detect_type(OCTET, None, b"  <!DOCTYPE html><html><p>x</p></html>") is T.HTML
    assert detect_type("text/html", None, b"<p>fragment</p>") is T.HTML


def test_content_types_name_the_text_formats():
    assert detect_type("text/plain", None, b"words") is T.TXT
    assert detect_type("TEXT/CSV; charset=utf-8", None, b"a,b") is T.CSV
    assert detect_type("application/msword", None, b"garbage") is T.DOC


def test_binary_bytes_labelled_as_text_are_not_text():
    assert detect_type("text/plain", "dump.txt", b"\x00\x01\x02binary") is None
    assert detect_type("text/plain", "utf16.txt", "hi".encode("utf-16")) is T.TXT


def test_unknown_types_are_none():
    assert detect_type("image/png", "photo.png", b"\x89PNG\r\n\x1a\n") is None
    assert detect_type(OCTET, None, b"\x89PNG\r\n\x1a\n") is None
    assert detect_type(None, None, b"") is None


def test_the_real_office_files_are_recognised_without_a_label(kit):
    expected = {"testEXCEL-formats.xlsx": T.XLSX, "testEXCEL.xls": T.XLS, "testEXCEL.xlsx": T.XLSX,
                "testOpenOffice2.odt": T.ODT, "testPDF.pdf": T.PDF,
                "testPDFTwoTextBoxes.pdf": T.PDF, "testPDF_Version.11.x.PDFA-1b.pdf": T.PDF,
                "testPPT.pptx": T.PPTX, "testRTF.rtf": T.RTF, "testWORD.doc": T.DOC,
                "testWORD.docx": T.DOCX, "testWORD_various.docx": T.DOCX}
    folder = kit / "corpus" / "attachments" / "tika"
    assert {name: detect_type(OCTET, None, (folder / name).read_bytes())
            for name in expected} == expected


@pytest.mark.parametrize(("content_type", "filename", "expected"), [
    ("message/rfc822", None, AttachmentType.EML), ("text/plain", "notes.txt", AttachmentType.TXT),
    (OCTET, "page.html", AttachmentType.HTML)])
def test_text_that_mentions_a_pdf_header_stays_text(content_type, filename, expected):
    """An attached email whose subject said "Your %PDF-1.7 statement" was read as a PDF and
    ended corrupt (found by an attack)."""
    content = b"Subject: Your %PDF-1.7 statement\r\n\r\nBug: files starting with %PDF-1.4 fail.\r\n"
    assert detect_type(content_type, filename, content) is expected


def test_a_pdf_with_junk_before_its_header_is_still_a_pdf():
    assert detect_type(OCTET, None, b"\r\n\x00junk " + documents.pdf(["x"])) is AttachmentType.PDF
