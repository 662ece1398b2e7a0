"""The text of a Word 97-2003 binary document (``.doc``), read from its piece table.

No well-kept Python library reads ``.doc`` text (antiword, the usual tool, is C and unmaintained
since 2005), so this module follows [MS-DOC] 2.4.1 "Retrieving Text" on top of ``olefile``,
which reads the OLE2 compound file: the FIB at the start of the WordDocument stream names the
table stream and the offset of the CLX in it; the CLX's piece table (PlcPcd) maps character
positions to byte runs of the WordDocument stream, each either cp1252 ("compressed") or
UTF-16LE. Only the main document (the first ``ccpText`` characters) is read; headers,
footnotes and comments follow it in the same character space and are left out.

Word's control characters become text: paragraph marks and line breaks newlines, cell and row
ends tabs and newlines, page and section breaks :data:`~shared.extract.pages.BREAK`; field
instructions (between field begin and separator) are dropped and their results kept. Pure: no
I/O; runs inside the sandbox.
"""

from __future__ import annotations

import struct

import olefile

from shared.extract.outcome import Encrypted
from shared.extract.pages import BREAK

__all__ = ["doc_text"]

_FIB_MAGIC = 0xA5EC
#: FibBase.fEncrypted and FibBase.fWhichTblStm ([MS-DOC] 2.5.2).
_F_ENCRYPTED = 0x0100
_F_WHICH_TABLE = 0x0200
#: Index of the fcClx/lcbClx pair in FibRgFcLcb97 ([MS-DOC] 2.5.6).
_CLX_PAIR = 33
#: Index of ccpText in FibRgLw97 ([MS-DOC] 2.5.4).
_CCP_TEXT = 3

_FIELD_BEGIN, _FIELD_SEPARATOR, _FIELD_END = "\x13", "\x14", "\x15"
_CHARACTERS = str.maketrans({
    "\r": "\n", "\x0b": "\n", "\x07": "\t", "\x0c": BREAK, "\x1e": "-", "\x1f": None,
    "\x01": None, "\x08": None, "\x02": None, "\x05": None,
})


def doc_text(content: bytes) -> str:
    """The main-document text of a ``.doc`` file, page breaks as form feeds.

    Raises:
        Encrypted: the document is password-protected (FibBase.fEncrypted).
        ValueError: not a Word 97 or later document, or its tables are inconsistent.
        OSError: not an OLE2 compound file (from ``olefile``).
    """
    ole = olefile.OleFileIO(content)
    try:
        word = ole.openstream("WordDocument").read()
        magic, _nfib = struct.unpack_from("<HH", word, 0)
        if magic != _FIB_MAGIC:
            raise ValueError("no Word FIB")
        flags = struct.unpack_from("<H", word, 0x0A)[0]
        if flags & _F_ENCRYPTED:
            raise Encrypted
        table_name = "1Table" if flags & _F_WHICH_TABLE else "0Table"
        if not ole.exists(table_name):
            raise ValueError("no table stream")
        table = ole.openstream(table_name).read()
    finally:
        ole.close()
    ccp_text, fc_clx, lcb_clx = _fib_fields(word)
    pieces = _piece_table(table[fc_clx:fc_clx + lcb_clx])
    text = "".join(_piece(word, *piece) for piece in pieces)[:ccp_text]
    return _drop_field_codes(text).translate(_CHARACTERS)


def _fib_fields(word: bytes) -> tuple[int, int, int]:
    pos = 32
    csw = struct.unpack_from("<H", word, pos)[0]
    pos += 2 + 2 * csw
    cslw = struct.unpack_from("<H", word, pos)[0]
    ccp_text = struct.unpack_from("<i", word, pos + 2 + 4 * _CCP_TEXT)[0]
    pos += 2 + 4 * cslw
    cb_rg_fc_lcb = struct.unpack_from("<H", word, pos)[0]
    if cb_rg_fc_lcb <= _CLX_PAIR:
        raise ValueError("FIB too short for Word 97")
    fc_clx, lcb_clx = struct.unpack_from("<II", word, pos + 2 + 8 * _CLX_PAIR)
    return ccp_text, fc_clx, lcb_clx


def _piece_table(clx: bytes) -> list[tuple[int, int, bool]]:
    """``(fc, characters, compressed)`` of each piece, in character order."""
    pos = 0
    # Skip the Prc entries (clxt 0x01: property modifiers) before the Pcdt (clxt 0x02).
    while pos < len(clx) and clx[pos] == 0x01:
        pos += 3 + struct.unpack_from("<H", clx, pos + 1)[0]
    if pos >= len(clx) or clx[pos] != 0x02:
        raise ValueError("no piece table")
    lcb = struct.unpack_from("<I", clx, pos + 1)[0]
    plc = clx[pos + 5:pos + 5 + lcb]
    count = (len(plc) - 4) // 12
    if count <= 0:
        raise ValueError("empty piece table")
    cps = struct.unpack_from(f"<{count + 1}I", plc, 0)
    pieces = []
    for i in range(count):
        fc = struct.unpack_from("<I", plc, 4 * (count + 1) + 8 * i + 2)[0]
        compressed = bool(fc & 0x40000000)
        start = (fc & 0x3FFFFFFF) // 2 if compressed else fc & 0x3FFFFFFF
        pieces.append((start, max(0, cps[i + 1] - cps[i]), compressed))
    return pieces


def _piece(word: bytes, start: int, characters: int, compressed: bool) -> str:
    if compressed:
        return word[start:start + characters].decode("cp1252", "replace")
    return word[start:start + 2 * characters].decode("utf-16-le", "replace")


def _drop_field_codes(text: str) -> str:
    # Fields nest: begin … separator result end; keep only the results.
    out: list[str] = []
    depth_in_code: list[bool] = []
    for char in text:
        if char == _FIELD_BEGIN:
            depth_in_code.append(True)
        elif char == _FIELD_SEPARATOR and depth_in_code:
            depth_in_code[-1] = False
        elif char == _FIELD_END and depth_in_code:
            depth_in_code.pop()
        elif not any(depth_in_code):
            out.append(char)
    return "".join(out)
