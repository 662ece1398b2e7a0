"""Text page by page for every format we read (shared.extract.formats and its readers), on
files built here with each format's own library and on the kit's 12 real office files, all
through the sandbox a worker uses."""

from __future__ import annotations

import asyncio

import pytest

from shared.extract.detect import AttachmentType
from shared.extract.formats import decode_text, extract_pages
from shared.extract.limits import DEFAULT_LIMITS, VIRTUAL_PAGE_CHARS
from shared.extract.outcome import Outcome, TextStatus
from shared.extract.sandbox import extract
from tests.shared.extract import documents

T = AttachmentType
OCTET = "application/octet-stream"


async def read(content: bytes, filename: str | None = None,
               content_type: str = OCTET) -> Outcome:
    async with asyncio.timeout(DEFAULT_LIMITS.wall_seconds + 5):
        return await extract(content, content_type=content_type, filename=filename)


def pages_of(outcome: Outcome) -> list[str]:
    assert outcome.status is TextStatus.READY, (outcome.reason, outcome.detail)
    return outcome.pages


async def test_pdf_pages_are_its_pages():
    outcome = await read(documents.pdf(["Invoice total 120.50 EUR", "Terms and conditions"]))
    assert outcome.kind == "pdf"
    assert pages_of(outcome) == ["Invoice total 120.50 EUR", "Terms and conditions"]


async def test_a_pdf_that_opens_without_a_password_is_read():
    content = documents.encrypted_pdf("Printable only", user_password="")
    assert pages_of(await read(content, "locked.pdf")) == ["Printable only"]


async def test_docx_pages_break_at_page_breaks_and_tables_are_rows():
    content = documents.docx_file([["Decision letter", "Your claim is accepted."],
                                   ["Second page"]],
                                  table=[["Item", "Amount"], ["Repair", "300"]])
    pages = pages_of(await read(content, "letter.docx"))
    assert pages == ["Decision letter\nYour claim is accepted.",
                     "Second page\nItem\tAmount\nRepair\t300"]


async def test_a_long_docx_without_breaks_is_cut_into_pages_without_losing_text():
    paragraphs = [f"Paragraph {i} " + "lorem ipsum " * 40 for i in range(40)]
    pages = pages_of(await read(documents.docx_file([paragraphs]), "long.docx"))
    assert len(pages) > 1 and all(len(p) <= VIRTUAL_PAGE_CHARS for p in pages)
    joined = "\n".join(pages)
    assert all(p.strip() in joined for p in paragraphs)


async def test_xlsx_sheets_are_pages_headed_by_their_names():
    content = documents.xlsx_file({"Totals": [["Month", "Amount"], ["January", 1200], [],
                                              ["February", 99.5]],
                                   "Notes": [["checked", True]]})
    assert pages_of(await read(content, None, "application/vnd.ms-excel")) == [
        "Totals\nMonth\tAmount\nJanuary\t1200\nFebruary\t99.5", "Notes\nchecked\tTRUE"]


async def test_pptx_slides_are_pages_with_their_notes():
    content = documents.pptx_file([("Quarterly plan", "Grow revenue", "say hello"),
                                   ("Budget", "Cut costs", "")])
    assert pages_of(await read(content, "deck.PPTX")) == [
        "Quarterly plan\nGrow revenue\nsay hello", "Budget\nCut costs"]


async def test_odt_pages_break_where_a_paragraph_style_breaks_them():
    content = documents.odt_file([["Chapter one", "Body text"], ["Chapter two"]])
    assert pages_of(await read(content, "book.odt")) == [
        "Chapter one\nBody text", "Chapter two"]


async def test_rtf_pages_break_at_page():
    content = documents.rtf_file(["First page text", "Second page text"])
    assert pages_of(await read(content, "memo.rtf")) == ["First page text", "Second page text"]


async def test_plain_text_pages_break_at_form_feeds():
    content = "Report\nline two\fAppendix\n".encode()
    assert pages_of(await read(content, "report.txt")) == ["Report\nline two", "Appendix"]


async def test_csv_keeps_its_rows():
    content = b"date,amount,payee\n2026-11-02,120.50,ACME Ltd\n"
    assert pages_of(await read(content, "export.csv")) == [
        "date,amount,payee\n2026-11-02,120.50,ACME Ltd"]


async def test_html_text_drops_scripts_and_styles():
    content = (b"<html><head><style>p{color:red}</style><script>var secret=1</script></head>"
               b"<body><h1>Booking</h1><p>Reference <b>ABC123</b></p></body></html>")
    [page] = pages_of(await read(content, "booking.html", "text/html"))
    assert "Booking" in page and "Reference ABC123" in page
    assert "secret" not in page and "color" not in page


_FORWARDED = (
    b"From: =?utf-8?q?J=C3=B6rg_Pe?= <jorg@supplier.example>\r\n"
    b"To: Accounts <accounts@example.com>\r\n"
    b"Date: Tue, 06 Oct 2026 09:15:00 +0200\r\n"
    b"Subject: Revised quote Q-4471\r\n"
    b"MIME-Version: 1.0\r\n"
    b"Content-Type: multipart/mixed; boundary=b1\r\n\r\n"
    b"--b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
    b"The revised total is 4,120.00 EUR, valid until 30 October.\r\n"
    b"--b1\r\nContent-Type: application/pdf; name=quote.pdf\r\n"
    b"Content-Disposition: attachment; filename=quote.pdf\r\n"
    b"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--b1--\r\n")


@pytest.mark.parametrize(("filename", "content_type"), [
    (None, "message/rfc822"), ("fwd.EML", OCTET)])
async def test_an_attached_email_reads_as_a_mail_client_shows_it(filename, content_type):
    outcome = await read(_FORWARDED, filename, content_type)
    assert outcome.kind == "eml"
    [page] = pages_of(outcome)
    assert page.splitlines()[:5] == [
        "From: Jörg Pe <jorg@supplier.example>", "To: Accounts <accounts@example.com>",
        "Date: 2026-10-06 07:15 UTC", "Subject: Revised quote Q-4471", ""]
    assert "The revised total is 4,120.00 EUR, valid until 30 October." in page
    assert page.rstrip().endswith("Attachments: quote.pdf")


async def test_a_broken_attached_email_gives_what_parsed():
    [page] = pages_of(await read(b"Subject: half a message\r\nFrom: <<<\r\n\r\nbody text",
                                 None, "message/rfc822"))
    assert "Subject: half a message" in page and "body text" in page


def test_text_is_decoded_by_bom_then_utf8_then_windows_1252():
    assert decode_text("\ufeffcafé".encode("utf-8")) == "café"
    assert decode_text("café".encode("utf-16")) == "café"
    assert decode_text("café".encode("utf-8")) == "café"
    assert decode_text("café €5".encode("cp1252")) == "café €5"
    assert decode_text("café".encode("iso-8859-1"), "iso-8859-1") == "café"


def test_an_empty_document_is_ready_with_no_pages():
    outcome = extract_pages(documents.docx_file([[]]), T.DOCX, DEFAULT_LIMITS)
    assert (outcome.status, outcome.pages) == (TextStatus.READY, [])


def test_a_broken_file_is_corrupt_not_an_exception():
    outcome = extract_pages(b"%PDF-1.4 then nothing", T.PDF, DEFAULT_LIMITS)
    assert (outcome.status.value, outcome.reason.value) == ("unavailable", "corrupt")


#: A few words of each of the kit's real office files (Apache Tika's test documents, see
#: corpus/attachments/tika/SOURCES.md), by page.
TIKA = {
    "testEXCEL-formats.xlsx": {1: ["Format Examples", "Custom Date:"]},
    "testEXCEL.xls": {1: ["Feuil1", "Sample Excel Worksheet", "Numbers and their Squares"],
                      3: ["Feuil3"]},
    "testEXCEL.xlsx": {1: ["Feuil1", "Sample Excel Worksheet", "Numbers and their Squares"],
                       2: ["Feuil2"]},
    "testOpenOffice2.odt": {1: ["This is a sample Open Office document", "NeoOffice"]},
    "testPDF.pdf": {1: ["Apache Tika - Apache Tika"]},
    "testPDFTwoTextBoxes.pdf": {1: ["Left column line 1", "Right column line 2"]},
    "testPPT.pptx": {1: ["Attachment Test"], 3: ["Different words to test against"]},
    "testRTF.rtf": {1: ["Test d\u2019indexation Word"]},
    "testWORD.doc": {1: ["Sample Word Document", "This is a sample Microsoft Word Document"]},
    "testWORD.docx": {1: ["Sample Word Document", "This is a sample Microsoft Word Document"],
                      2: ["Signature style"]},
    "testWORD_various.docx": {1: ["Here is a text box", "Row 2 Col 3",
                                  "\u30be\u30eb\u30b2\u3068\u5c3e\u5d0e"]},
}


@pytest.mark.parametrize("name", sorted(TIKA))
async def test_the_real_office_files_give_their_text(kit, name):
    content = (kit / "corpus" / "attachments" / "tika" / name).read_bytes()
    pages = pages_of(await read(content, name, OCTET))
    for page, expected in TIKA[name].items():
        for text in expected:
            assert text in pages[page - 1], (name, page, text)


async def test_the_image_only_pdf_is_ready_with_an_empty_page(kit):
    # Acrobat Web Capture of a scan: one page, an image and no text layer (its only words are
    # the document title in the metadata); we do no OCR.
    content = (kit / "corpus" / "attachments" / "tika" /
               "testPDF_Version.11.x.PDFA-1b.pdf").read_bytes()
    assert pages_of(await read(content)) == [""]
