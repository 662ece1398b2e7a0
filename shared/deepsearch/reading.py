"""Reading: the threads search ranked best, through ``shared.mail.store``, cut into sentences.

Only a message's own words count (``new_text``: quoted history and signature removed by
``shared.mail.quotes``), and the ready text of its attachments after them (``shared.extract``),
so a fact quoted in eight replies is one sentence of the message that first said it; a sentence repeated word for word by a later message is kept for the earliest
only. Patches keep their description, the notes after ``---`` and the diffstat summary line
("17 files changed, 30 insertions(+), 30 deletions(-)"); the diff itself, the per-file diffstat
lines, a cover letter's shortlog ("Suresh Jayaraman (10):" and the patch titles under it, each
stated by its own patch) and the header lines of a quoted message ("From: … Date: …") are not
sentences. Lines of a block that is indented or looks like program output (a
compiler error, a shell prompt) are sentences one by one; prose is joined across line breaks and
split at sentence ends.

:func:`sentences_of` is pure; :func:`read_messages` reads the store.
"""

from __future__ import annotations

import re
from datetime import datetime

import asyncpg
import msgspec

from shared.extract.store import ready_texts
from shared.mail.records import MessageRecord
from shared.mail.store import get_thread, messages_by_ids, thread_page

__all__ = ["ReadMessage", "Sentence", "read_messages", "sentences_of", "MAX_THREAD_MESSAGES",
           "MAX_OWN_CHARS"]

#: Most messages read of one thread (a 44-patch series is one thread of about 90).
MAX_THREAD_MESSAGES = 120
#: Longest sentence kept whole; longer ones (a paragraph without full stops) are cut.
MAX_SENTENCE_CHARS = 400
#: Characters of a message's own text that deep search reads (the rest is not evidence). Cutting
#: sentences is CPU work on the worker's event loop: a 30 MB text held it for seconds past the
#: call's budget, long enough for the front to take the worker for dead and fail its other
#: callers' jobs. Longer than any patch description or reply of the kit's mailboxes.
MAX_OWN_CHARS = 100_000

_DIFF_START = re.compile(r"^(?:diff --git |Index: |--- a/|\+\+\+ b/|@@ )")
_DIFFSTAT_LINE = re.compile(r"^\s*\S+\s+\|\s+(?:\d+\s*[+-]*|Bin .*)$")
_DIFFSTAT_SUMMARY = re.compile(r"^\s*\d+ files? changed\b")
#: The head of a git shortlog: an author and their patch count ("Suresh Jayaraman (10):").
_SHORTLOG_HEAD = re.compile(r"^\S[^()]{0,80} \(\d+\):?\s*$")
_TRAILER = re.compile(r"^\s*(?:Acked|Reviewed|Tested|Reported|Signed-off|Suggested|Cc)[- ]by:",
                      re.IGNORECASE)
_PROGRAM_LINE = re.compile(r"^\s*(?:\$ |# |[\w./-]+:\d+(?::\d+)?:|[A-Z]{2,}\s{2,}|[\w./-]+\.[ch]:)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(“])|(?<=[.!?])(?=[A-Z][a-z])")
_SPACES = re.compile(r"\s+")
#: Header lines of a quoted or forwarded message ("From: Joe <joe@…> Date: Sun, 14 Nov 2010"):
#: they introduce someone else's words.
_QUOTED_HEADER = re.compile(r"^\s*(?:From|Date|Sent|To|Cc|Subject):\s", re.IGNORECASE)


class ReadMessage(msgspec.Struct, frozen=True, kw_only=True):
    """A message as deep search reads it: headers it may cite and its own text (its first
    :data:`MAX_OWN_CHARS` characters)."""

    id: str
    thread_id: str
    rfc_message_id: str | None
    in_reply_to: tuple[str, ...]
    subject: str
    from_name: str | None
    from_address: str | None
    date: datetime
    own_text: str


class Sentence(msgspec.Struct, frozen=True, kw_only=True):
    """One sentence of a message's own text; ``index`` is its place in the message."""

    message_id: str
    index: int
    text: str


def _blocks(text: str) -> list[list[str]]:
    """Paragraphs (lists of lines) of ``text`` without the diff and diffstat file lines."""
    blocks: list[list[str]] = [[]]
    in_diff = in_shortlog = False
    for line in text.replace("\r\n", "\n").split("\n"):
        if _DIFF_START.match(line):
            in_diff = True
        if in_diff:
            # a diff runs to the end of the part; a later "-- " signature was already removed
            continue
        if _SHORTLOG_HEAD.match(line):
            in_shortlog = True
        if in_shortlog:
            # the patch titles under it: indented lines, up to the first other line
            if line[:1].isspace() and line.strip() or _SHORTLOG_HEAD.match(line):
                continue
            in_shortlog = False
        if _QUOTED_HEADER.match(line):
            continue
        if _DIFFSTAT_LINE.match(line) or line.strip() in ("---", "--", "..."):
            blocks.append([])
            continue
        if not line.strip():
            blocks.append([])
            continue
        blocks[-1].append(line)
    return [b for b in blocks if b]


def _split_prose(paragraph: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(paragraph) if s.strip()]


def sentences_of(message: ReadMessage) -> list[Sentence]:
    """The sentences of ``message``'s own text, in order (see the module docstring)."""
    texts: list[str] = []
    for block in _blocks(message.own_text):
        line_by_line = any(line[:1].isspace() or _PROGRAM_LINE.match(line)
                           or _TRAILER.match(line) or _DIFFSTAT_SUMMARY.match(line)
                           for line in block)
        if line_by_line:
            prose: list[str] = []
            for line in block:
                if line[:1].isspace() or _PROGRAM_LINE.match(line) or _TRAILER.match(line) \
                        or _DIFFSTAT_SUMMARY.match(line):
                    if prose:
                        texts.extend(_split_prose(" ".join(prose)))
                        prose = []
                    texts.append(line.strip())
                else:
                    prose.append(line.strip())
            if prose:
                texts.extend(_split_prose(" ".join(prose)))
        else:
            texts.extend(_split_prose(" ".join(line.strip() for line in block)))
    out = []
    for text in texts:
        text = _SPACES.sub(" ", text).strip()
        if len(text) > MAX_SENTENCE_CHARS:
            text = text[: MAX_SENTENCE_CHARS - 1].rsplit(" ", 1)[0] + "…"
        if re.search(r"\w", text):
            out.append(Sentence(message_id=message.id, index=len(out), text=text))
    return out


def _read(record: MessageRecord, texts: dict[str, str]) -> ReadMessage:
    # The ready text of its attachments follows its own words: an invoice's total is in the
    # PDF, and deep search answered "insufficient_evidence" where mail_search found it (found
    # by a new user). Said by the message's sender, who sent the file.
    attached = [texts[a.id] for a in record.attachments if a.id in texts]
    own = "\n\n".join([record.new_text, *attached]) if attached else record.new_text
    return ReadMessage(
        id=record.id, thread_id=record.thread_id, rfc_message_id=record.message_id,
        in_reply_to=tuple(record.in_reply_to), subject=record.subject,
        from_name=record.from_.name if record.from_ else None,
        from_address=record.from_.address if record.from_ else None, date=record.date,
        own_text=own[:MAX_OWN_CHARS])


async def read_messages(conn: asyncpg.Connection, identity_ids: list[str],
                        thread_ids: list[str], message_ids: list[str], *,
                        per_thread: int = MAX_THREAD_MESSAGES) -> list[ReadMessage]:
    """The messages of ``thread_ids`` (up to ``per_thread`` each, oldest first) and the messages
    ``message_ids``, once each, restricted to ``identity_ids``."""
    records: dict[str, MessageRecord] = {}
    owners: dict[str, str] = {}
    for record in await messages_by_ids(conn, identity_ids, message_ids):
        records[record.id] = record
        owners[record.thread_id] = record.identity_id
    for thread_id in thread_ids:
        identity_id = owners.get(thread_id)
        if identity_id is None:
            continue
        thread = await get_thread(conn, identity_id, thread_id)
        if thread is None:
            continue
        page, _ = await thread_page(conn, thread, offset=0, limit=per_thread, include_text=False)
        for record in page.messages:
            records.setdefault(record.id, record)
    texts = await ready_texts(conn, [a.id for r in records.values() for a in r.attachments],
                              MAX_OWN_CHARS)
    return sorted((_read(r, texts) for r in records.values()), key=lambda m: (m.date, m.id))
