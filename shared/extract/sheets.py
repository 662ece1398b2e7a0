"""Text of spreadsheets: XLSX with openpyxl, Excel 97-2003 XLS with xlrd. A sheet is a page.

A sheet's page is its name on the first line, then one line per row that holds a value, cells
separated by tabs and trailing empty cells dropped. Values are the stored ones (for a formula,
the result the application last saved): integers without ``.0``, dates in ISO 8601, booleans
``TRUE``/``FALSE``. Pure: no I/O; runs inside the sandbox (XLSX after the zip directory check).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from datetime import date, datetime, time

import openpyxl
import xlrd

from shared.extract.outcome import Encrypted

__all__ = ["xlsx_pages", "xls_pages"]


def xlsx_pages(content: bytes, max_pages: int) -> list[str] | None:
    """One page per sheet of an XLSX, in workbook order (a chart sheet gives its name only);
    None when it has more than ``max_pages`` sheets.

    Raises:
        KeyError, ValueError, zipfile.BadZipFile, openpyxl.utils.exceptions.InvalidFileException:
            not a readable XLSX (from openpyxl).
    """
    book = openpyxl.load_workbook(io.BytesIO(content), read_only=True, data_only=True)
    try:
        if len(book.sheetnames) > max_pages:
            return None
        pages = []
        for sheet in book:
            if not hasattr(sheet, "iter_rows"):
                pages.append(sheet.title)
                continue
            # The declared dimension can claim a million empty rows and columns; ignoring it
            # reads only the cells the sheet holds.
            sheet.reset_dimensions()
            pages.append(_sheet(sheet.title, sheet.iter_rows(values_only=True)))
        return pages
    finally:
        book.close()


def xls_pages(content: bytes, max_pages: int) -> list[str] | None:
    """One page per sheet of an XLS; None when it has more than ``max_pages`` sheets.

    Raises:
        Encrypted: the workbook is password-protected.
        xlrd.XLRDError: not a readable XLS.
    """
    try:
        book = xlrd.open_workbook(file_contents=content, on_demand=True)
    except xlrd.XLRDError as exc:
        # xlrd has no exception type of its own for this
        if "encrypted" in str(exc).lower():
            raise Encrypted from exc
        raise
    try:
        if book.nsheets > max_pages:
            return None
        pages = []
        for index in range(book.nsheets):
            sheet = book.sheet_by_index(index)
            pages.append(_sheet(sheet.name, _xls_rows(sheet, book.datemode)))
            book.unload_sheet(index)
        return pages
    finally:
        book.release_resources()


def _sheet(title: str, rows: Iterable[Iterable[object]]) -> str:
    lines = [title]
    for row in rows:
        cells = [_cell(value) for value in row]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            lines.append("\t".join(cells))
    return "\n".join(lines)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == time() else value.isoformat(" ")
    if isinstance(value, (date, time)):
        return value.isoformat()
    return str(value).replace("\n", " ")


def _xls_rows(sheet: xlrd.sheet.Sheet, datemode: int) -> Iterator[list[object]]:
    for r in range(sheet.nrows):
        row: list[object] = []
        for cell in sheet.row(r):
            if cell.ctype == xlrd.XL_CELL_DATE:
                try:
                    row.append(xlrd.xldate.xldate_as_datetime(cell.value, datemode))
                except (xlrd.xldate.XLDateError, OverflowError, ValueError):
                    row.append(cell.value)
            elif cell.ctype == xlrd.XL_CELL_BOOLEAN:
                row.append(bool(cell.value))
            elif cell.ctype in (xlrd.XL_CELL_ERROR, xlrd.XL_CELL_BLANK, xlrd.XL_CELL_EMPTY):
                row.append(None)
            else:
                row.append(cell.value)
        yield row
