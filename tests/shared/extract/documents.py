"""Documents built for the extraction tests, with the libraries that write each format (and by
hand for PDF, whose writers do not lay out text): ordinary files of every format, and hostile
ones (a zip bomb, a page tree that loops, an encrypted PDF, a PDF that takes long to read)."""

from __future__ import annotations

import io
import zipfile

import docx
import openpyxl
import pptx
import pypdf
from odf.opendocument import OpenDocumentText
from odf.style import ParagraphProperties, Style
from odf.text import P


def raw_pdf(objects: list[bytes]) -> bytes:
    """A PDF of ``objects`` (numbered from 1, the first the catalog) with its cross-reference."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, xref)
    return bytes(out)


def _stream(data: bytes) -> bytes:
    return b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"


def pdf(pages: list[str], *, kids_loop: bool = False) -> bytes:
    """A PDF with one line of Helvetica text per page; with ``kids_loop`` its page tree also
    lists itself as a kid."""
    count = len(pages)
    font = 3 + 2 * count
    kids = [b"%d 0 R" % (3 + 2 * i) for i in range(count)] + ([b"2 0 R"] if kids_loop else [])
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % count]
    for i, text in enumerate(pages):
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R"
                       b" /Resources << /Font << /F1 %d 0 R >> >> >>" % (4 + 2 * i, font))
        objects.append(_stream(b"BT /F1 12 Tf 72 720 Td (" + text.encode("latin-1") + b") Tj ET"))
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return raw_pdf(objects)


def slow_pdf(operators: int = 200_000) -> bytes:
    """A one-page PDF whose content stream shows ``operators`` words one by one: about 3.4 MB
    that pypdf needs about 6 CPU seconds to read at the default count on a quiet machine (more
    under load)."""
    ops = b"BT /F1 12 Tf 72 720 Td " + b"(word) Tj 1 0 Td " * operators + b"ET"
    return raw_pdf([b"<< /Type /Catalog /Pages 2 0 R >>",
                 b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                 b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
                 b" /Resources << /Font << /F1 5 0 R >> >> >>",
                 _stream(ops),
                 b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"])


def encrypted_pdf(text: str, *, user_password: str) -> bytes:
    """A one-page PDF encrypted with AES-256; ``user_password`` "" opens without a password."""
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(pdf([text])))
    writer.encrypt(user_password=user_password, owner_password="owner-secret",
                   algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx_file(pages: list[list[str]], *, table: list[list[str]] | None = None) -> bytes:
    """A DOCX with the paragraphs of each page, a page break between pages, and ``table``
    (rows of cells) at the end."""
    document = docx.Document()
    for i, paragraphs in enumerate(pages):
        if i:
            document.add_page_break()
        for text in paragraphs:
            document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, text in enumerate(row):
                grid.cell(r, c).text = text
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def zip_bomb_docx(expanded_bytes: int = 100 * 1024 * 1024) -> bytes:
    """A valid DOCX plus a member of ``expanded_bytes`` zero bytes (deflated about a thousand
    times smaller), written in chunks so the test never holds it."""
    source = zipfile.ZipFile(io.BytesIO(docx_file([["Harmless text"]])))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bomb:
        for member in source.infolist():
            bomb.writestr(member, source.read(member))
        with bomb.open("word/media/bomb.bin", "w", force_zip64=True) as member:
            chunk = bytes(1024 * 1024)
            for _ in range(expanded_bytes // len(chunk)):
                member.write(chunk)
    return out.getvalue()


def xlsx_file(sheets: dict[str, list[list[object]]]) -> bytes:
    """An XLSX with one sheet per entry, rows of values."""
    book = openpyxl.Workbook()
    book.remove(book.active)
    for title, rows in sheets.items():
        sheet = book.create_sheet(title)
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def pptx_file(slides: list[tuple[str, str, str]]) -> bytes:
    """A PPTX with one (title, body, speaker notes) slide each."""
    presentation = pptx.Presentation()
    layout = presentation.slide_layouts[1]  # "Title and Content"
    for title, body, notes in slides:
        slide = presentation.slides.add_slide(layout)
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        slide.notes_slide.notes_text_frame.text = notes
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def odt_file(pages: list[list[str]]) -> bytes:
    """An ODT with the paragraphs of each page; each page after the first starts with a
    paragraph whose style breaks the page before it."""
    document = OpenDocumentText()
    breaking = Style(name="PageStart", family="paragraph")
    breaking.addElement(ParagraphProperties(breakbefore="page"))
    document.automaticstyles.addElement(breaking)
    for i, paragraphs in enumerate(pages):
        for j, text in enumerate(paragraphs):
            if i and not j:
                document.text.addElement(P(stylename=breaking, text=text))
            else:
                document.text.addElement(P(text=text))
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def rtf_file(pages: list[str]) -> bytes:
    """An RTF with one paragraph per page and ``\\page`` between them."""
    body = r"\page ".join(text.replace("\\", "\\\\") + r"\par " for text in pages)
    return (r"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0 Times New Roman;}}\f0 " + body
            + "}").encode("cp1252")
