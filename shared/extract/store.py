"""Owner of ``attachment_texts`` (migration 0007): the text of each attachment, page by page.

Life of a row: :func:`queue` adds it ``pending`` when ingest stores a message with attachments
(and :func:`queue_missing` for mail stored before); :func:`extract_pending`, on the batch workers,
claims pending rows one at a time, extracts the file in the sandbox *outside any transaction* and
stores ``ready``, ``unavailable`` or ``skipped`` (``shared.extract.outcome``);
:func:`attachment_text` reads the pages ``mail_get_attachment_text`` returns.

Claiming, safe with any number of workers: a short transaction picks pending rows, each
identity's files taking turns (the lowest ``turn`` first, then the oldest), with
``FOR UPDATE SKIP LOCKED``, takes a session advisory lock on the first one no other worker
holds, counts the attempt and commits. The lock is held, on the worker's connection, while the
file is extracted; a worker that dies loses its connection and with it the lock, so the row is
at once claimable again, still ``pending``, with its attempt counted. The claim after
``MAX_ATTEMPTS`` attempts ends the file ``unavailable`` (``interrupted``) without extracting it,
so a file that kills its worker cannot stall the queue. A result is stored only by the claim
that is still the latest (``attempts`` matches).

The attachments themselves are read through ``shared.mail.store`` (``attachment_file``,
``attachment_identities``, ``attachment_twins``, ``message_attachment_ids``,
``all_attachment_ids``).

The one exception to "no SQL on this table outside this module", as for ``messages``
(``shared.mail.store``): the search read path (``shared.search``) reads ``tsv`` directly, inside
its ranking and ``why`` statements, so that mail_search matches words in ready attachment text;
it never writes the table.
"""

from __future__ import annotations

import re
import time

import asyncpg
import msgspec

from shared.db import Database
from shared.errors import ErrorCode, PylotaError, invalid
from shared.extract.limits import DEFAULT_LIMITS, MAX_ATTEMPTS, Limits
from shared.extract.outcome import Outcome, Reason, TextStatus
from shared.extract.sandbox import extract
from shared.logs import get_logger
from shared.mail.compound import index_terms
from shared.mail.records import MessageRecord
from shared.mail.store import (all_attachment_ids, attachment_file, attachment_identities,
                               attachment_twins, message_attachment_ids)

__all__ = ["SEARCH_CHARS", "PageText", "AttachmentText", "queue", "queue_missing", "ready_texts",
           "text_statuses", "with_text_status", "extract_pending", "attachment_text", "page_range"]

_log = get_logger("extract")

#: Characters of an attachment's text whose words go into ``tsv`` for search; the messages'
#: own index stops at the same length (migration 0001), and it keeps a tsvector far below
#: PostgreSQL's 1 MB limit.
SEARCH_CHARS = 200_000
#: First key of the two-key advisory locks that mark a claim (the second is the attachment id's
#: hash); the two-key space does not overlap the one-key locks ingest takes.
_LOCK_CLASS = 7_007
#: Pending rows a claim looks at; more workers than this extracting at once would make some of
#: them find nothing to claim while pending rows remain.
_CLAIM_CANDIDATES = 64

_PAGES = re.compile(r"([1-9][0-9]{0,2})(?:-([1-9][0-9]{0,2}))?")


class PageText(msgspec.Struct, frozen=True, kw_only=True):
    """One page: its number (from 1) and its stored text (up to ``MAX_PAGE_CHARS``)."""

    page: int
    text: str


class AttachmentText(msgspec.Struct, frozen=True, kw_only=True):
    """An attachment's text status and the requested pages (spec section 4.3).

    ``pages`` is empty unless ``status`` is ``ready``, and holds only pages that exist;
    ``total_pages`` is null until the text is ready; ``reason`` says why it is ``unavailable``
    or ``skipped`` (``shared.extract.outcome.Reason``).
    """

    status: TextStatus
    reason: Reason | None
    pages: list[PageText]
    total_pages: int | None


async def queue(conn: asyncpg.Connection, attachment_ids: list[str]) -> int:
    """Queue attachments for extraction (``pending``); ids already queued or unknown are
    ignored. Returns how many were queued."""
    identities = await attachment_identities(conn, attachment_ids)
    known = [i for i in dict.fromkeys(attachment_ids) if i in identities]  # in the order given
    # Each identity's files take turns (migration 0022): the n-th file an identity has waiting
    # gets turn n, so one identity's 499 files do not hold every other's first. Its waiting
    # files are counted once per identity, not once per file queued.
    status = await conn.execute(
        """WITH q AS (SELECT * FROM unnest($1::text[], $2::text[]) WITH ORDINALITY
                      AS q(id, identity_id, n)),
                waiting AS (SELECT w.identity_id, count(*) AS n FROM attachment_texts w
                            WHERE w.status = 'pending'
                              AND w.identity_id IN (SELECT identity_id FROM q)
                            GROUP BY w.identity_id)
           INSERT INTO attachment_texts (attachment_id, identity_id, turn)
           SELECT q.id, q.identity_id, coalesce(waiting.n, 0)
                  + row_number() OVER (PARTITION BY q.identity_id ORDER BY q.n) - 1
           FROM q LEFT JOIN waiting USING (identity_id)
           ON CONFLICT DO NOTHING""",
        known, [identities[i] for i in known])
    return int(status.rsplit(" ", 1)[-1])


async def queue_missing(conn: asyncpg.Connection, identity_id: str | None = None) -> int:
    """Queue every attachment (of ``identity_id``, or of all) that has no row yet, for mail
    stored before attachment text existed. Returns how many were queued."""
    return await queue(conn, await all_attachment_ids(conn, identity_id))


async def text_statuses(conn: asyncpg.Connection, attachment_ids: list[str]
                        ) -> dict[str, TextStatus]:
    """The text status of each of ``attachment_ids`` that was queued (for ``mail_get_message``;
    an attachment never queued is absent)."""
    rows = await conn.fetch("SELECT attachment_id, status FROM attachment_texts"
                            " WHERE attachment_id = any($1::text[])", attachment_ids)
    return {r["attachment_id"]: TextStatus(r["status"]) for r in rows}


async def ready_texts(conn: asyncpg.Connection, attachment_ids: list[str], max_chars: int
                      ) -> dict[str, str]:
    """The text of each ready one of ``attachment_ids`` (its pages joined by blank lines, its
    first ``max_chars`` characters); attachments without ready text are absent."""
    rows = await conn.fetch(
        "SELECT attachment_id, left(array_to_string(pages, E'\\n\\n'), $2) AS text"
        " FROM attachment_texts WHERE attachment_id = any($1::text[]) AND status = 'ready'",
        attachment_ids, max_chars)
    return {r["attachment_id"]: r["text"] for r in rows if r["text"].strip()}


async def with_text_status(conn: asyncpg.Connection, records: list[MessageRecord]) -> None:
    """Set each attachment's ``text_status`` in ``records`` (mail_get_message's "attachments with
    text status"); an attachment never queued (stored before attachment text existed, until
    ``pylota reindex`` or a batch worker's start queues it) reads ``pending``, as this tool
    reads it."""
    ids = [a.id for r in records for a in r.attachments]
    if not ids:
        return
    statuses = await text_statuses(conn, ids)
    for record in records:
        record.attachments = [
            msgspec.structs.replace(a, text_status=statuses.get(a.id, TextStatus.PENDING).value)
            for a in record.attachments]


async def extract_pending(pool: Database, *, limit: int | None = None,
                          seconds: float | None = None, limits: Limits = DEFAULT_LIMITS) -> int:
    """Extract pending attachments one at a time until none is left (or ``limit`` are done, or
    ``seconds`` have passed: no file is claimed after that, and the one in hand may take its
    ``limits.wall_seconds``).

    Each file is claimed in a short transaction, extracted in the sandbox under ``limits``
    with no transaction open, and its outcome stored (module docstring); another worker
    running this at the same time never gets the same file. Bad files end ``unavailable`` or
    ``skipped``; this raises only for database errors.

    Returns:
        How many attachments reached a final status.
    """
    done = 0
    until = None if seconds is None else time.monotonic() + seconds
    async with pool.acquire() as conn:
        while (limit is None or done < limit) and (until is None or time.monotonic() < until
                                                    or done == 0):
            claim = await _claim(conn)
            if claim is None:
                break
            attachment_id, attempts = claim
            try:
                outcome = await _extract_claimed(conn, attachment_id, attempts, limits)
                if outcome is not None and await _save(conn, attachment_id, attempts, outcome):
                    done += 1
            finally:
                await conn.execute("SELECT pg_advisory_unlock($1, hashtext($2))",
                                   _LOCK_CLASS, attachment_id)
    return done


async def _claim(conn: asyncpg.Connection) -> tuple[str, int] | None:
    async with conn.transaction():
        candidates = await conn.fetch(
            """SELECT attachment_id FROM attachment_texts WHERE status = 'pending'
               ORDER BY turn, queued_at, attachment_id LIMIT $1 FOR UPDATE SKIP LOCKED""",
            _CLAIM_CANDIDATES)
        for row in candidates:
            attachment_id = row["attachment_id"]
            if await conn.fetchval("SELECT pg_try_advisory_lock($1, hashtext($2))",
                                   _LOCK_CLASS, attachment_id):
                attempts = await conn.fetchval(
                    "UPDATE attachment_texts SET attempts = attempts + 1, claimed_at = now()"
                    " WHERE attachment_id = $1 RETURNING attempts", attachment_id)
                return attachment_id, attempts
    return None


async def _extract_claimed(conn: asyncpg.Connection, attachment_id: str, attempts: int,
                           limits: Limits) -> Outcome | None:
    if attempts > MAX_ATTEMPTS:
        _log.warning("attachment_interrupted", attachment_id=attachment_id, attempts=attempts)
        return Outcome.failed(Reason.INTERRUPTED)
    if (known := await _twin_outcome(conn, attachment_id)) is not None:
        return known
    file = await attachment_file(conn, attachment_id, max_bytes=limits.max_input_bytes)
    if file is None:
        return None  # deleted since it was queued; its row went with it
    if file.content is None:
        return Outcome.failed(Reason.TOO_LARGE)
    return await extract(file.content, content_type=file.content_type, filename=file.filename,
                         limits=limits)


#: Twins (the same bytes, the same identity) looked at for a result before a file is read.
TWINS_LOOKED_AT = 20


async def _twin_outcome(conn: asyncpg.Connection, attachment_id: str) -> Outcome | None:
    """The result of reading the same bytes for the same identity before, when one of its
    oldest :data:`TWINS_LOOKED_AT` twins has one that the bytes alone decide: a forward carries
    the original's files, and one of 400 cost the batch workers 100 s of extraction again;
    two copies of a PDF that timed out took 30 s each (found by attacks). Not copied: a type
    left unread (the twin's name or content type decided it), a reader that was interrupted."""
    twins = await attachment_twins(conn, attachment_id, TWINS_LOOKED_AT)
    row = await conn.fetchrow(
        """SELECT status, reason, kind, pages FROM attachment_texts
           WHERE attachment_id = any($1::text[]) AND (status = 'ready'
                 OR (status = 'unavailable' AND reason <> 'interrupted')
                 OR (status = 'skipped' AND reason <> 'unsupported_type'))
           ORDER BY status = 'ready' DESC, attachment_id LIMIT 1""", twins) if twins else None
    if row is None:
        return None
    return Outcome(status=TextStatus(row["status"]), kind=row["kind"],
                   reason=Reason(row["reason"]) if row["reason"] else None,
                   pages=list(row["pages"]), detail="same bytes as another attachment")


async def _save(conn: asyncpg.Connection, attachment_id: str, attempts: int,
                outcome: Outcome) -> bool:
    ready = outcome.status is TextStatus.READY
    # The words inside its paths and file names too, as a message's (shared.mail.compound):
    # "SwiftMailer" did not find a forwarded email's "Hello from SwiftMailer.docx" (found by
    # a new user).
    terms = index_terms("", None, "\n".join(outcome.pages)[:SEARCH_CHARS], ()) if ready else ""
    values = (attachment_id, attempts, outcome.status.value,
              outcome.reason.value if outcome.reason else None, outcome.kind, outcome.pages,
              len(outcome.pages) if ready else None, terms)
    update = """UPDATE attachment_texts SET status = $3, reason = $4, kind = $5,
                  pages = $6::text[], total_pages = $7, extracted_at = now(),
                  tsv = CASE WHEN $3::text = 'ready' THEN to_tsvector(
                        'en_unaccent', left(array_to_string($6::text[], E'\\n'), $9::integer))
                        || to_tsvector('en_unaccent', $8::text) END
                WHERE attachment_id = $1 AND attempts = $2 AND status = 'pending'"""
    try:
        status = await conn.execute(update, *values, SEARCH_CHARS)
    except asyncpg.ProgramLimitExceededError:
        # "string is too long for tsvector": text of many long distinct words; index less.
        status = await conn.execute(update, *values, SEARCH_CHARS // 10)
    return status == "UPDATE 1"


async def attachment_text(conn: asyncpg.Connection, identity_id: str, message_id: str,
                          attachment_id: str, first_page: int = 1, last_page: int = 3
                          ) -> AttachmentText:
    """The text status of an attachment of the identity's message, with pages ``first_page``
    to ``last_page`` (from 1, inclusive) when it is ready, full as stored; the tool cuts each
    page at 32,000 characters and the result at 96 KB (spec sections 4.2, 4.3). An attachment
    never queued reads as ``pending``.

    Raises:
        PylotaError: ``message_not_found`` when the identity has no message ``message_id``;
            ``attachment_not_found`` when that message has no attachment ``attachment_id``.
    """
    ids = await message_attachment_ids(conn, identity_id, message_id)
    if ids is None:
        raise PylotaError(ErrorCode.MESSAGE_NOT_FOUND, f"No message {message_id} in this identity.",
                          fix="Use a message_id returned by mail_search or mail_get_thread.")
    if attachment_id not in ids:
        raise PylotaError(ErrorCode.ATTACHMENT_NOT_FOUND,
                          f"Message {message_id} has no attachment {attachment_id}.",
                          fix="Use an attachment id from the attachments of mail_get_message.")
    row = await conn.fetchrow(
        "SELECT status, reason, total_pages, pages[$2:$3] AS pages FROM attachment_texts"
        " WHERE attachment_id = $1", attachment_id, first_page, last_page)
    if row is None:
        return AttachmentText(status=TextStatus.PENDING, reason=None, pages=[], total_pages=None)
    return AttachmentText(
        status=TextStatus(row["status"]), reason=Reason(row["reason"]) if row["reason"] else None,
        pages=[PageText(page=first_page + i, text=text) for i, text in enumerate(row["pages"])],
        total_pages=row["total_pages"])


def page_range(pages: str) -> tuple[int, int]:
    """``"2"`` -> ``(2, 2)``, ``"1-3"`` -> ``(1, 3)``: the ``pages`` argument of
    ``mail_get_attachment_text`` (pattern ``^[1-9][0-9]{0,2}(-[1-9][0-9]{0,2})?$``).

    Raises:
        PylotaError: ``invalid_request`` on path ``pages`` when it does not match the pattern
            or its range runs backwards.
    """
    match = _PAGES.fullmatch(pages)
    if match is None:
        raise invalid("pages", f"pages {pages!r} is not a page or a range of pages.",
                      fix='Pass pages as "N" or "N-M" with 1 <= N <= M <= 999, e.g. "1-3".')
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if last < first:
        raise invalid("pages", f"pages {pages!r} runs backwards.",
                      fix=f'Pass pages as "{last}-{first}".')
    return first, last
