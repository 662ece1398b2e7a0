"""The words inside compound tokens, for the full-text index (``messages.terms``).

PostgreSQL's text search parser reads a path, a file name, an address or a host name as one token
(``mm/hugetlb.c``, ``q3-report.xlsx``, ``jo@brightwell.example``, ``settings.toml``), so a
search for ``hugetlb``, ``report``, ``brightwell`` or ``INV-77120`` found none of them (found by
a new user on the kit's mail: ``hugetlb`` found 0 of the 3 messages whose subject names
``mm/hugetlb.c``). :func:`index_terms` gives, for every such token of a message's subject, sender
address, text and attachment file names, the token's pieces between ``/``, ``\\`` and ``@``
(``hugetlb.c``, ``brightwell.example``) and its words (``hugetlb``, ``c``, ``brightwell``,
``example``); an attachment's file name is also given whole, since it is in no other indexed
column. The ``tsv`` column indexes them at the lowest weight (migration 0018), so a search by a
part finds the message and ranks it below one that says the word on its own.

Pure: no I/O. Called by ``shared.mail.store`` for every message it stores, and by
``pylota reindex`` for mail stored before migration 0018.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MAX_TERMS_CHARS", "TEXT_CHARS", "index_terms"]

#: Characters of a message's text read: the prefix the full-text index holds (migration 0001).
TEXT_CHARS = 200_000
#: Longest terms string kept: a text of a hundred thousand paths should not double its index.
MAX_TERMS_CHARS = 50_000

#: What joins the parts of a compound token.
_JOINS = re.compile(r"[./@\\]")
#: What separates its pieces (a path's directories, an address's local part and domain).
_PIECES = re.compile(r"[/@\\]+")
#: A word: letters and digits, hyphenated words whole (the parser splits those itself).
_WORD = re.compile(r"[^\W_]+(?:-[^\W_]+)*")
#: Punctuation around a token in running text ("see mm/hugetlb.c," or "<jo@x.example>").
_AROUND = "\"'()[]{}<>,;:!?*.`"


def index_terms(subject: str, from_address: str | None, text: str,
                filenames: Iterable[str | None]) -> str:
    """The pieces and words of the compound tokens of a message (module docstring), one token's
    per line, each once, at most :data:`MAX_TERMS_CHARS` characters. Empty when there are none.
    """
    found: dict[str, None] = {}
    for name in filenames:
        if name:
            found[name.strip()] = None
            _add(name.strip(), found)
    for source in (subject, from_address or "", text[:TEXT_CHARS]):
        for token in source.split():
            if _JOINS.search(token):
                _add(token.strip(_AROUND), found)
    out, size = [], 0
    for line in found:
        size += len(line) + 1
        if size > MAX_TERMS_CHARS:
            break
        out.append(line)
    return "\n".join(out)


def _add(token: str, found: dict[str, None]) -> None:
    words = _WORD.findall(token)
    if len(words) < 2:
        return
    pieces = [p for p in _PIECES.split(token) if p]
    if len(pieces) > 1:
        found[" ".join(pieces)] = None
    found[" ".join(words)] = None
