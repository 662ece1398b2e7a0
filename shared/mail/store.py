"""Owner of the mail tables: ``messages``, ``threads``, ``thread_refs``, ``thread_aliases``,
``raw_messages`` and ``attachments`` (``contacts`` belongs to ``shared.mail.contacts``,
``message_triage`` to ``shared.mail.triage``). Labels and read state are written here only
(:func:`update_labels`, :func:`set_labels`).

Threading (RFC 5322 section 3.6.4): every msg-id a message names (its own Message-ID, its
References and In-Reply-To) is mapped to a thread in ``thread_refs``. A new message joins the
thread(s) its ids already map to; when they map to several, those threads are merged into the
oldest, which makes the result independent of arrival order (a reply imported before its parent,
or two replies to a missing parent). A merged thread's id becomes an alias of the thread it
joined (``thread_aliases``), and every lookup by thread id here resolves it, so an id once
returned keeps answering. Only a ``Re:``/``Fwd:`` message that carries neither
In-Reply-To nor References falls back to the newest thread with the same subject that its sender
takes part in (or any, for the identity's own mail); a message with headers never joins by
subject, so two unrelated threads that share a subject stay apart.

Every write for one message happens under a per-identity transaction lock, so concurrent ingests
of the same mailbox cannot race on thread_refs.

The one exception to "no SQL on these tables outside this module": the search read path
(``shared.search``, mail_list_threads' listing in ``shared.search.listing`` included, and the
embedding index of ``shared.embeddings``) reads ``messages``, ``attachments``, ``threads`` and
``thread_aliases`` directly for speed — ranking, filters, facets and snippets are single
statements that join the mail with the search and triage tables — and never writes them.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timezone
from typing import Literal

import asyncpg
import msgspec

from shared.errors import ErrorCode, PylotaError
from shared.ids import Prefix, new_id
from shared.mail.attachment_types import attachment_type
from shared.mail.compound import index_terms
from shared.mail.contacts import ContactBook, correspondents
from shared.mail.domains import spellings
from shared.mail.model import Address, ParsedMessage
from shared.mail.records import (
    AttachmentInfo, HeaderField, LabelState, MessageRecord, ThreadHeader, ThreadRecord,
)
from shared.mail.threading import (ThreadState, ThreadUnion, is_reply_or_forward, subject_key,
                                    thread_keys)
from shared.tenancy.store import identity_addresses

__all__ = ["StoreOutcome", "NewMessage", "insert_messages", "insert_message", "get_message", "get_message_with", "get_thread",
           "thread_page",
           "messages_by_ids", "StoredContent", "stored_contents", "Outline",
           "outline", "correspondence", "thread_ids", "MessageFilter", "first_matching",
           "message_exists", "AttachmentFile", "attachment_file", "attachment_identities",
           "attachment_twins", "message_attachment_ids", "all_attachment_ids", "raw_of", "set_status", "set_labels",
           "update_labels", "MAX_LABELS", "THREAD_LABELS_SHOWN", "READ_TEXT_CHARS", "stored_bytes",
           "received_since"]


class StoreOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """Result of :func:`insert_message`; ``duplicate`` means nothing new was stored. ``date`` is
    the message's date as stored (its Date, else the time it was received); ``attachment_ids``
    the ids of the attachments stored with it, in part order."""

    message_id: str
    thread_id: str
    date: datetime
    duplicate: bool
    duplicate_reason: str | None = None
    attachment_ids: list[str] = []
    #: Stored as the identity's own mail (``direction`` outbound).
    outbound: bool = False


#: The live thread of a thread id given as ``{}`` (an SQL parameter): the thread it was merged
#: into when it is an alias, else the id itself.
_LIVE_THREAD = ("coalesce((SELECT a.thread_id FROM thread_aliases a WHERE a.alias_id = {0}),"
                " {0})")


def _addresses(items: list[Address]) -> list[dict[str, str]]:
    return [msgspec.to_builtins(a) for a in items]


def _dedupe_key(message_id: str | None, raw: bytes) -> str:
    # The same message read from a maildir and from an mbox differs only in line endings and
    # trailing blank lines; those do not make it a different message.
    normal = raw.replace(b"\r\n", b"\n").rstrip(b"\n")
    digest = hashlib.sha256(normal).hexdigest()
    return f"mid:{message_id}|sha:{digest}" if message_id else f"sha:{digest}"


class NewMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One message for :func:`insert_messages`: the parse of ``raw``, its new text and snippet,
    its ``status`` (``received``, ``queued`` or ``unparsed``), and ``dedupe_raw``, the bytes its
    content is judged on when ``raw`` carries trace fields added on receipt."""

    parsed: ParsedMessage
    raw: bytes
    new_text: str
    snippet: str
    status: str = "received"
    dedupe_raw: bytes | None = None
    #: Delivered to us from outside (the SMTP listener): inbound whatever its From says, and it
    #: counts as no mail the identity wrote (a stranger's From can name the mailbox itself).
    arrived: bool = False


async def _thread_union(conn: asyncpg.Connection, identity_id: str,
                        items: Sequence[NewMessage]) -> ThreadUnion:
    """The :class:`ThreadUnion` of the threads ``items`` can touch: every msg-id they name, and
    every thread whose subject key a Re:/Fwd: without parent among them could join."""
    keys = sorted({k for item in items for k in thread_keys(item.parsed)})
    subjects = sorted({subject_key(i.parsed.subject) for i in items
                       if not i.parsed.in_reply_to and not i.parsed.references
                       and is_reply_or_forward(i.parsed.subject)} - {""})
    refs = {r["message_id"]: r["thread_id"] for r in await conn.fetch(
        "SELECT message_id, thread_id FROM thread_refs"
        " WHERE identity_id = $1 AND message_id = any($2::text[])", identity_id, keys)}
    # Each thread with the message that gives it its subject (the order _REFRESH aggregates by).
    # A thread a fallback subject matches also comes with its participants, whom the rules
    # require of a message joining it by subject (shared.mail.threading).
    rows = await conn.fetch(
        """SELECT t.id, t.created_at, t.last_at, t.subject_key, r.answers, r.date, r.id AS root,
                  r.subject,
                  CASE WHEN t.subject_key = any($3::text[]) THEN
                    (SELECT coalesce(array_agg(DISTINCT p.address), '{}')
                     FROM messages m, LATERAL (
                       SELECT m.from_address UNION ALL
                       SELECT e->>'address' FROM jsonb_array_elements(m.to_addresses
                                                                      || m.cc_addresses) e
                     ) p(address)
                     WHERE m.thread_id = t.id AND p.address IS NOT NULL) END AS participants
           FROM threads t LEFT JOIN LATERAL (
             SELECT cardinality(m.in_reply_to) + cardinality(m."references") <> 0 AS answers,
                    coalesce(m.sent_at, m.received_at) AS date, m.id, m.subject
             FROM messages m WHERE m.thread_id = t.id ORDER BY 1, 2, 3 LIMIT 1) r ON true
           WHERE t.id = any($2::text[])
              OR (t.identity_id = $1 AND t.subject_key = any($3::text[]))""",
        identity_id, sorted(set(refs.values())), subjects)
    return ThreadUnion(refs, [ThreadState(
        id=r["id"], created_at=r["created_at"], last_at=r["last_at"], subject_key=r["subject_key"],
        root=None if r["root"] is None else ((r["answers"], r["date"], r["root"]), r["subject"]),
        participants=None if r["participants"] is None else set(r["participants"]))
        for r in rows])


#: A thread's counts and bounds recomputed from its messages, and its subject: its root's (a
#: message naming no other), else its earliest message's; rows come back for the subject key.
_REFRESH = """UPDATE threads t SET
     message_count = s.n, first_at = s.first_at, last_at = s.last_at,
     subject = coalesce(s.first_subject, t.subject)
   FROM (SELECT thread_id, count(*) AS n,
                min(coalesce(sent_at, received_at)) AS first_at,
                max(coalesce(sent_at, received_at)) AS last_at,
                (array_agg(subject ORDER BY cardinality(in_reply_to) + cardinality("references") = 0 DESC,
                           coalesce(sent_at, received_at), id))[1] AS first_subject
         FROM messages WHERE thread_id = any($1::text[]) GROUP BY thread_id) s
   WHERE t.id = s.thread_id
   RETURNING t.id, t.subject"""


async def _write_threads(conn: asyncpg.Connection, identity_id: str, union: ThreadUnion,
                         created: dict[str, tuple[str, datetime]], existing: set[str]) -> None:
    """Write the threads ``union`` created (``created``: id → first subject and date) and merged,
    before the messages that name them: new threads that survived are inserted; a merged thread's
    rows, refs and aliases move to the thread it lives on as, and its id becomes an alias."""
    live_new = [t for t in created if t not in union.merged_into]
    if live_new:
        await conn.executemany(
            "INSERT INTO threads (id, identity_id, subject, subject_key, first_at, last_at,"
            " created_at) VALUES ($1, $2, $3, $4, $5, $5, $6)",
            [(t, identity_id, created[t][0], subject_key(created[t][0]), created[t][1],
              union.threads[t].created_at) for t in live_new])
    merged = list(union.merged_into)
    if not merged:
        return
    olds = [t for t in merged if t in existing]
    news = [union.live(t) for t in olds]
    if olds:
        for table in ("messages", "thread_refs", "thread_aliases"):
            await conn.execute(
                f"UPDATE {table} x SET thread_id = m.new FROM unnest($1::text[], $2::text[])"
                " AS m(old, new) WHERE x.thread_id = m.old", olds, news)
    # The merged ids keep answering (thread_aliases): an alias always names a live thread.
    await conn.execute(
        "INSERT INTO thread_aliases (alias_id, identity_id, thread_id)"
        " SELECT o, $2, n FROM unnest($1::text[], $3::text[]) AS a(o, n)",
        merged, identity_id, [union.live(t) for t in merged])
    if olds:
        await conn.execute("DELETE FROM threads WHERE id = any($1::text[])", olds)


async def insert_messages(conn: asyncpg.Connection, identity_id: str,
                          items: Sequence[NewMessage]) -> list[StoreOutcome]:
    """Store parsed messages with their raw bytes, attachments and contacts, and thread them,
    one after another in the order given, in the caller's transaction (or one of its own).

    De-duplication: a message with the same Message-ID and the same content as a stored one of
    the identity (or an earlier one of ``items``) is a duplicate and stores nothing (see
    :func:`_dedupe_key`). Two different messages that share a Message-ID (test suites, broken
    mailers) are both kept. Direction is ``outbound`` when the sender is one of the identity's
    addresses and it did not arrive from outside (``NewMessage.arrived``); such a message is
    stored ``sent`` (mail imported from a sent folder) unless its status is ``queued`` (mail
    composed by the send tools, waiting for delivery).

    Threading follows the module docstring; the run is placed in memory
    (``shared.mail.threading.ThreadUnion``) from the rows it touches, so a reply and its parent
    in the same run thread as they would one at a time, and the result is written in a few
    statements whatever the number of messages.

    Returns:
        Per item, in order, the stored (or already stored) message and thread ids. A message's
        ``thread_id`` is its thread when it was placed; when a later message of the run merged
        that thread into another, the id answers as an alias of it.
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", identity_id)
        hashes = [hashlib.sha256(i.raw).digest() for i in items]
        dedupe_keys = [_dedupe_key(i.parsed.message_id, i.raw if i.dedupe_raw is None
                                   else i.dedupe_raw) for i in items]
        seen = {r["dedupe_key"]: (r["id"], r["thread_id"], r["content_hash"], r["date"])
                for r in await conn.fetch(
                    "SELECT dedupe_key, id, thread_id, content_hash,"
                    " coalesce(sent_at, received_at) AS date FROM messages"
                    " WHERE identity_id = $1 AND dedupe_key = any($2::text[])",
                    identity_id, dedupe_keys)}
        own = await identity_addresses(conn, identity_id)
        union = await _thread_union(conn, identity_id, items)
        existing = set(union.threads)
        book = ContactBook()
        created: dict[str, tuple[str, datetime]] = {}
        outcomes: list[StoreOutcome] = []
        rows, raws, attachments, keys = [], [], [], {}
        for item, content_hash, dedupe_key in zip(items, hashes, dedupe_keys):
            parsed = item.parsed
            if dedupe_key in seen:
                message_id, thread_id, stored_hash, date = seen[dedupe_key]
                outcomes.append(StoreOutcome(
                    message_id=message_id, thread_id=union.live(thread_id), date=date,
                    duplicate=True, duplicate_reason="same bytes" if stored_hash == content_hash
                    else "same message, received again" if item.dedupe_raw is not None
                    else "same message, other line endings"))
                continue
            received = datetime.now(timezone.utc)
            when = parsed.sent_at or received
            message_id = new_id(Prefix.MESSAGE)
            outbound, people = correspondents(parsed, own, arrived=item.arrived)
            placed = union.place(message_id, parsed, when, ours=outbound)
            keys.update(dict.fromkeys(thread_keys(parsed)))
            if placed.created:
                created[placed.thread_id] = (parsed.subject, when)
            seen[dedupe_key] = (message_id, placed.thread_id, content_hash, when)
            book.count(people, outbound=outbound, when=when)
            rows.append([
                message_id, identity_id, placed.thread_id, parsed.message_id, parsed.in_reply_to,
                parsed.references, parsed.subject,
                parsed.from_.address if parsed.from_ else None,
                parsed.from_.name if parsed.from_ else None,
                _addresses(parsed.to), _addresses(parsed.cc), _addresses(parsed.reply_to),
                parsed.sent_at, received, parsed.text, item.new_text, item.snippet,
                [list(h) for h in parsed.headers], "outbound" if outbound else "inbound",
                "sent" if outbound and item.status == "received" else item.status,
                content_hash, dedupe_key, parsed.defects, bool(parsed.attachments), outbound,
                index_terms(parsed.subject, parsed.from_.address if parsed.from_ else None,
                            parsed.text, (a.filename for a in parsed.attachments))])
            raws.append((message_id, item.raw))
            stored = [(new_id(Prefix.ATTACHMENT), message_id, a.part_index, a.filename,
                       a.content_type, a.disposition, a.content_id, len(a.content),
                       hashlib.sha256(a.content).digest(), a.content,
                       attachment_type(a.content_type, a.filename, a.content))
                      for a in parsed.attachments]
            attachments += stored
            outcomes.append(StoreOutcome(message_id=message_id, thread_id=placed.thread_id,
                                         duplicate=False, date=when, outbound=outbound,
                                         attachment_ids=[a[0] for a in stored]))
        if not rows:
            return outcomes
        await _write_threads(conn, identity_id, union, created, existing)
        # Messages of threads merged later in the run are written where they live now.
        for row in rows:
            row[2] = union.live(row[2])
        touched = sorted({row[2] for row in rows} | {union.live(t) for t in union.merged_into})
        await conn.execute(
            "INSERT INTO thread_refs (identity_id, message_id, thread_id)"
            " SELECT $1, k, t FROM unnest($2::text[], $3::text[]) AS r(k, t)"
            " ON CONFLICT (identity_id, message_id) DO UPDATE SET thread_id = excluded.thread_id",
            identity_id, list(keys), [union.live(union.refs[k]) for k in keys])
        await conn.executemany(
            """INSERT INTO messages (id, identity_id, thread_id, rfc_message_id, in_reply_to,
                 "references", subject, from_address, from_name, to_addresses, cc_addresses,
                 reply_to, sent_at, received_at, text, new_text, snippet, headers, direction,
                 status, content_hash, dedupe_key, parse_defects, has_attachment, read, terms)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                       $17, $18, $19, $20, $21, $22, $23, $24, $25, $26)""", rows)
        await conn.executemany("INSERT INTO raw_messages (message_id, raw) VALUES ($1, $2)", raws)
        if attachments:
            await conn.executemany(
                "INSERT INTO attachments (id, message_id, part_index, filename, content_type,"
                " disposition, content_id, size, sha256, content, attachment_type)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)", attachments)
        await book.save(conn, identity_id)
        refreshed = await conn.fetch(_REFRESH, touched)
        await conn.execute(
            "UPDATE threads t SET subject_key = k.key FROM unnest($1::text[], $2::text[])"
            " AS k(id, key) WHERE t.id = k.id",
            [r["id"] for r in refreshed], [subject_key(r["subject"] or "") for r in refreshed])
    return outcomes


async def insert_message(conn: asyncpg.Connection, identity_id: str, parsed: ParsedMessage,
                         raw: bytes, *, new_text: str, snippet: str,
                         status: str = "received", dedupe_raw: bytes | None = None,
                         arrived: bool = False) -> StoreOutcome:
    """Store one message: :func:`insert_messages` of ``NewMessage(parsed=parsed, raw=raw, ...)``.
    ``dedupe_raw`` is what the content is judged on when ``raw`` carries trace fields added on
    receipt (the SMTP listener's Received and Authentication-Results), so a redelivered message
    is a duplicate; ``arrived`` as :class:`NewMessage` says."""
    return (await insert_messages(conn, identity_id, [NewMessage(
        parsed=parsed, raw=raw, new_text=new_text, snippet=snippet, status=status,
        dedupe_raw=dedupe_raw, arrived=arrived)]))[0]


#: Characters of a message's text and new text read into a :class:`MessageRecord`. Every
#: result cuts them far shorter (32,000 characters in ``mail_get_message``), a reply quotes
#: 20,000 of its parent (a forward reads it whole: ``get_message(whole_text=True)``), and
#: keyword search reads its own index (the first 200,000 characters, migration 0001); the
#: stored text stays whole. Without the cut, six calls reading one 32 MB message held 1.2 GB
#: of the front's memory (found by an attack).
READ_TEXT_CHARS = 1_000_000

_HEAD_COLUMNS = """m.id, m.thread_id, m.identity_id, m.rfc_message_id, m.in_reply_to,
    m."references", m.subject, m.from_address, m.from_name, m.to_addresses, m.cc_addresses,
    m.reply_to, coalesce(m.sent_at, m.received_at) AS date, m.direction, m.status, m.labels,
    m.read, m.snippet, m.parse_defects, m.headers"""
_MESSAGE_COLUMNS = f"""{_HEAD_COLUMNS}, left(m.new_text, {READ_TEXT_CHARS}) AS new_text,
    left(m.text, {READ_TEXT_CHARS}) AS text"""
#: The same with the texts whole, for a forward (which sends the original's whole text).
_WHOLE_MESSAGE_COLUMNS = f"{_HEAD_COLUMNS}, m.new_text, m.text"


def _record(row: asyncpg.Record, attachments: list[AttachmentInfo], *, include_text: bool,
            include_headers: bool) -> MessageRecord:
    def addrs(items: list[dict[str, str]]) -> list[Address]:
        return [Address(**a) for a in items]

    return MessageRecord(
        id=row["id"], thread_id=row["thread_id"], identity_id=row["identity_id"],
        message_id=row["rfc_message_id"], in_reply_to=list(row["in_reply_to"]),
        references=list(row["references"]), subject=row["subject"],
        from_=Address(address=row["from_address"], name=row["from_name"])
        if row["from_address"] else None,
        to=addrs(row["to_addresses"]), cc=addrs(row["cc_addresses"]),
        reply_to=addrs(row["reply_to"]), date=row["date"], direction=row["direction"],
        status=row["status"], labels=list(row["labels"]), read=row["read"],
        snippet=row["snippet"], new_text=row["new_text"],
        text=row["text"] if include_text else None, attachments=attachments,
        headers=[HeaderField(name=h[0], value=h[1]) for h in row["headers"]]
        if include_headers else None,
        parse_defects=list(row["parse_defects"]), triage=None, trust=None, refs=[],
    )


#: A message's attachments in its own statement (``m``), in part order, as one jsonb array of
#: :class:`AttachmentInfo` objects: one round trip fewer for the message reader (issue 14).
_ATTACHMENTS_COLUMN = """(SELECT coalesce(jsonb_agg(jsonb_build_object(
        'id', a.id, 'filename', a.filename, 'content_type', a.content_type, 'size', a.size,
        'disposition', a.disposition) ORDER BY a.part_index), '[]'::jsonb)
    FROM attachments a WHERE a.message_id = m.id) AS attachment_list"""


async def _attachments_of(conn: asyncpg.Connection, message_ids: list[str]
                          ) -> dict[str, list[AttachmentInfo]]:
    rows = await conn.fetch(
        "SELECT id, message_id, filename, content_type, size, disposition FROM attachments"
        " WHERE message_id = any($1::text[]) ORDER BY message_id, part_index", message_ids)
    out: dict[str, list[AttachmentInfo]] = {}
    for r in rows:
        out.setdefault(r["message_id"], []).append(AttachmentInfo(
            id=r["id"], filename=r["filename"], content_type=r["content_type"], size=r["size"],
            disposition=r["disposition"]))
    return out


async def get_message(conn: asyncpg.Connection, identity_id: str, message_id: str, *,
                      include_text: bool = False, include_headers: bool = False,
                      whole_text: bool = False) -> MessageRecord | None:
    """The message ``message_id`` of ``identity_id``, or None (also for another identity's).
    Its texts are cut to :data:`READ_TEXT_CHARS` characters unless ``whole_text``."""
    columns = _WHOLE_MESSAGE_COLUMNS if whole_text else _MESSAGE_COLUMNS
    row = await conn.fetchrow(
        f"SELECT {columns} FROM messages m WHERE m.id = $1 AND m.identity_id = $2",
        message_id, identity_id)
    if row is None:
        return None
    atts = await _attachments_of(conn, [message_id])
    return _record(row, atts.get(message_id, []), include_text=include_text,
                   include_headers=include_headers)


async def get_message_with(conn: asyncpg.Connection, identity_id: str, message_id: str,
                           columns: tuple[str, ...], *, include_text: bool = False,
                           include_headers: bool = False
                           ) -> tuple[MessageRecord, asyncpg.Record] | None:
    """:func:`get_message` whose row also holds ``columns`` (SQL expressions on ``messages m``
    that their owner modules give, e.g. ``shared.mail.triage.TRIAGE_COLUMN``), read in the
    message's statement, with its attachments: one snapshot, one round trip. Returns the record
    and the row."""
    row = await conn.fetchrow(
        f"SELECT {_MESSAGE_COLUMNS}, {_ATTACHMENTS_COLUMN}, {', '.join(columns)} FROM messages m"
        " WHERE m.id = $1 AND m.identity_id = $2", message_id, identity_id)
    if row is None:
        return None
    attachments = msgspec.convert(row["attachment_list"], list[AttachmentInfo])
    return _record(row, attachments, include_text=include_text,
                   include_headers=include_headers), row


async def messages_by_ids(conn: asyncpg.Connection, identity_ids: list[str],
                          message_ids: list[str]) -> list[MessageRecord]:
    """Messages with these ids in these identities, in the order of ``message_ids``."""
    rows = await conn.fetch(
        f"SELECT {_MESSAGE_COLUMNS} FROM messages m"
        " WHERE m.id = any($1::text[]) AND m.identity_id = any($2::text[])",
        message_ids, identity_ids)
    atts = await _attachments_of(conn, [r["id"] for r in rows])
    by_id = {r["id"]: _record(r, atts.get(r["id"], []), include_text=False,
                              include_headers=False) for r in rows}
    return [by_id[i] for i in message_ids if i in by_id]


async def get_thread(conn: asyncpg.Connection, identity_id: str, thread_id: str
                     ) -> ThreadHeader | None:
    """The thread ``thread_id`` of ``identity_id`` without messages, or None. An id merged into
    another thread gives that thread (``thread_aliases``)."""
    row = await conn.fetchrow(
        f"SELECT id, identity_id, subject, message_count, first_at, last_at FROM threads"
        f" WHERE id = {_LIVE_THREAD.format('$1')} AND identity_id = $2", thread_id, identity_id)
    return ThreadHeader(**dict(row)) if row else None


async def thread_page(conn: asyncpg.Connection, thread: ThreadHeader, *, offset: int,
                      limit: int, include_text: bool) -> tuple[ThreadRecord, bool]:
    """Up to ``limit`` messages of ``thread`` from ``offset``, oldest first.

    Returns the thread object and whether more messages follow.
    """
    rows = await conn.fetch(
        f"SELECT {_MESSAGE_COLUMNS} FROM messages m WHERE m.thread_id = $1"
        " ORDER BY coalesce(m.sent_at, m.received_at), m.id OFFSET $2 LIMIT $3",
        thread.id, offset, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    atts = await _attachments_of(conn, [r["id"] for r in rows])
    messages = [_record(r, atts.get(r["id"], []), include_text=include_text,
                        include_headers=False) for r in rows]
    return ThreadRecord(id=thread.id, identity_id=thread.identity_id, subject=thread.subject,
                        message_count=thread.message_count, first_at=thread.first_at,
                        last_at=thread.last_at, messages=messages), more


class StoredContent(msgspec.Struct, frozen=True, kw_only=True):
    """What ingest derived references, trust and triage from, read back from storage:
    ``reply_to`` as addr-specs, ``headers`` as ``(name, value)`` pairs, ``attachments`` as
    ``(filename, content_type)``, ``date`` as the message's date (Date, else received);
    ``answers`` is true when it has an In-Reply-To or References."""

    id: str
    identity_id: str
    date: datetime
    subject: str
    from_address: str | None
    from_name: str | None
    reply_to: list[str]
    headers: list[tuple[str, str]]
    text: str
    new_text: str
    attachments: list[tuple[str | None, str]]
    answers: bool
    outbound: bool
    defects: list[str]


async def stored_contents(conn: asyncpg.Connection, identity_id: str | None, *, text_chars: int
                          ) -> AsyncIterator[StoredContent]:
    """Every stored message of ``identity_id`` (or of all identities), oldest id first, with the
    first ``text_chars`` characters of its texts, for re-deriving what ingest derives. Must run
    inside a transaction (it reads through a cursor)."""
    async for row in conn.cursor(
            """SELECT m.id, m.identity_id, coalesce(m.sent_at, m.received_at) AS date, m.subject, m.from_address, m.from_name, m.reply_to,
                      m.headers, left(m.text, $2) AS text, left(m.new_text, $2) AS new_text,
                      (m.in_reply_to <> '{}' OR m."references" <> '{}') AS answers,
                      m.direction = 'outbound' AS outbound, m.parse_defects,
                      coalesce((SELECT jsonb_agg(jsonb_build_array(a.filename, a.content_type)
                                                 ORDER BY a.part_index)
                                FROM attachments a WHERE a.message_id = m.id), '[]') AS atts
               FROM messages m WHERE $1::text IS NULL OR m.identity_id = $1 ORDER BY m.id""",
            identity_id, text_chars):
        yield StoredContent(
            id=row["id"], identity_id=row["identity_id"], date=row["date"],
            subject=row["subject"], from_address=row["from_address"], from_name=row["from_name"],
            reply_to=[a["address"] for a in row["reply_to"]],
            headers=[(h[0], h[1]) for h in row["headers"]], text=row["text"],
            new_text=row["new_text"], attachments=[(a[0], a[1]) for a in row["atts"]],
            answers=row["answers"], outbound=row["outbound"],
            defects=list(row["parse_defects"] or []))


async def save_terms(conn: asyncpg.Connection, terms: list[tuple[str, str]]) -> None:
    """Set each message's ``terms`` (``(message id, terms)``, ``shared.mail.compound``) where they
    differ, and so its full-text vector: for mail stored before migration 0018 or before the
    rules changed (``pylota reindex``)."""
    await conn.executemany("UPDATE messages SET terms = $2 WHERE id = $1 AND terms <> $2", terms)


class Outline(msgspec.Struct, frozen=True, kw_only=True):
    """Who and what a message is about: its thread, subject, direction, sender and the To and Cc
    addr-specs."""

    id: str
    thread_id: str
    subject: str
    direction: str
    from_address: str | None
    recipients: list[str]


def _outline(row: asyncpg.Record) -> Outline:
    return Outline(id=row["id"], thread_id=row["thread_id"], subject=row["subject"],
                   direction=row["direction"], from_address=row["from_address"],
                   recipients=[a["address"] for a in row["recipients"]])


_OUTLINE_COLUMNS = ("m.id, m.thread_id, m.subject, m.direction, m.from_address,"
                    " m.to_addresses || m.cc_addresses AS recipients")


async def outline(conn: asyncpg.Connection, message_id: str) -> Outline | None:
    """The outline of ``message_id``, or None."""
    row = await conn.fetchrow(f"SELECT {_OUTLINE_COLUMNS} FROM messages m WHERE m.id = $1",
                              message_id)
    return _outline(row) if row else None


async def correspondence(conn: asyncpg.Connection, identity_id: str, people: list[str], *,
                         outside_thread: str) -> list[Outline]:
    """Messages of ``identity_id`` outside the thread ``outside_thread`` that ``people``
    (addr-specs) sent or received (To or Cc)."""
    rows = await conn.fetch(
        f"""SELECT {_OUTLINE_COLUMNS} FROM messages m
            WHERE m.identity_id = $1 AND m.thread_id <> $2
              AND (m.from_address = any($3::text[]) OR EXISTS (
                   SELECT 1 FROM jsonb_array_elements(m.to_addresses || m.cc_addresses) e
                   WHERE e->>'address' = any($3::text[])))""",
        identity_id, outside_thread, people)
    return [_outline(r) for r in rows]


async def thread_ids(conn: asyncpg.Connection, message_ids: list[str]) -> dict[str, str]:
    """The thread id of each of ``message_ids`` that exists."""
    rows = await conn.fetch("SELECT id, thread_id FROM messages WHERE id = any($1::text[])",
                            message_ids)
    return {r["id"]: r["thread_id"] for r in rows}


class MessageFilter(msgspec.Struct, frozen=True, kw_only=True):
    """Which inbound messages a waiter wants (mail_wait, spec section 4.3).

    ``from_`` is an addr-spec or ``@domain`` (matched case-insensitively; ``@domain`` matches that
    domain and its subdomains, so ``@example.com`` waits for ``noreply@mail.example.com`` too;
    a domain matches in Unicode and in ``xn--`` form alike),
    ``subject_contains`` a case-insensitive substring, ``replies_only`` keeps messages with
    In-Reply-To or References.
    """

    from_: str | None = None
    subject_contains: str | None = None
    thread_id: str | None = None
    replies_only: bool = False


async def first_matching(conn: asyncpg.Connection, identity_id: str, wanted: MessageFilter, *,
                         received_since: datetime | None = None,
                         message_id: str | None = None) -> str | None:
    """The id of the earliest-received inbound message of ``identity_id`` that ``wanted``
    matches, received at or after ``received_since``; with ``message_id``, that message's id
    when it matches. None when nothing does."""
    clauses = ["m.identity_id = $1", "m.direction = 'inbound'"]
    params: list[object] = [identity_id]

    def bind(value: object) -> str:
        params.append(value)
        return f"${len(params)}"

    if wanted.from_:
        local, _, domain = wanted.from_.strip().lower().rpartition("@")
        forms = spellings(domain)  # stored as written: Unicode or xn--
        if not local:
            clauses.append(f"EXISTS (SELECT 1 FROM unnest({bind(forms)}::text[]) d WHERE "
                           "split_part(m.from_address, '@', 2) = d OR right(split_part("
                           "m.from_address, '@', 2), length(d) + 1) = '.' || d)")
        else:
            clauses.append(f"m.from_address = any({bind([f'{local}@{d}' for d in forms])}"
                           "::text[])")
    if wanted.subject_contains:
        clauses.append(f"strpos(lower(m.subject), {bind(wanted.subject_contains.lower())}) > 0")
    if wanted.thread_id:  # resolved on each look: the thread may merge during the wait
        clauses.append(f"m.thread_id = {_LIVE_THREAD.format(bind(wanted.thread_id))}")
    if wanted.replies_only:
        clauses.append('cardinality(m.in_reply_to) + cardinality(m."references") > 0')
    if received_since is not None:
        clauses.append(f"m.received_at >= {bind(received_since)}")
    if message_id is not None:
        clauses.append(f"m.id = {bind(message_id)}")
    return await conn.fetchval(
        f"SELECT m.id FROM messages m WHERE {' AND '.join(clauses)}"
        " ORDER BY m.received_at, m.id LIMIT 1", *params)


async def message_exists(conn: asyncpg.Connection, identity_id: str, message_id: str) -> bool:
    """Whether ``message_id`` is a message of ``identity_id``."""
    return bool(await conn.fetchval(
        "SELECT true FROM messages WHERE id = $1 AND identity_id = $2", message_id, identity_id))


class AttachmentFile(msgspec.Struct, frozen=True, kw_only=True):
    """One attachment's bytes and what its format is told from (``shared.extract``). ``size``
    is in bytes; ``content`` is None when the attachment is larger than the ``max_bytes`` it was
    read with, so an oversize part is never loaded."""

    id: str
    message_id: str
    identity_id: str
    filename: str | None
    content_type: str
    size: int
    content: bytes | None


async def attachment_file(conn: asyncpg.Connection, attachment_id: str, *, max_bytes: int
                          ) -> AttachmentFile | None:
    """The attachment ``attachment_id`` with its bytes up to ``max_bytes``, or None."""
    row = await conn.fetchrow(
        """SELECT a.id, a.message_id, m.identity_id, a.filename, a.content_type, a.size,
                  CASE WHEN a.size <= $2 THEN a.content END AS content
           FROM attachments a JOIN messages m ON m.id = a.message_id WHERE a.id = $1""",
        attachment_id, max_bytes)
    return AttachmentFile(**dict(row)) if row else None


async def attachment_identities(conn: asyncpg.Connection, attachment_ids: list[str]
                                ) -> dict[str, str]:
    """The identity id of each of ``attachment_ids`` that exists."""
    rows = await conn.fetch(
        "SELECT a.id, m.identity_id FROM attachments a JOIN messages m ON m.id = a.message_id"
        " WHERE a.id = any($1::text[])", attachment_ids)
    return {r["id"]: r["identity_id"] for r in rows}


async def attachment_twins(conn: asyncpg.Connection, attachment_id: str, limit: int
                           ) -> list[str]:
    """At most ``limit`` other attachments of the same identity with the same bytes
    (``sha256``, migration 0021) as ``attachment_id``, oldest first: the index walked in id
    order, so the cost does not grow with how many copies there are."""
    rows = await conn.fetch(
        """SELECT b.id FROM attachments a
           JOIN messages m ON m.id = a.message_id
           JOIN attachments b ON b.sha256 = a.sha256 AND b.id <> a.id
           JOIN messages n ON n.id = b.message_id AND n.identity_id = m.identity_id
           WHERE a.id = $1 ORDER BY b.id LIMIT $2""", attachment_id, limit)
    return [r["id"] for r in rows]


async def all_attachment_ids(conn: asyncpg.Connection, identity_id: str | None) -> list[str]:
    """Every attachment id of ``identity_id`` (or of every identity), oldest message first."""
    rows = await conn.fetch(
        "SELECT a.id FROM attachments a JOIN messages m ON m.id = a.message_id"
        " WHERE $1::text IS NULL OR m.identity_id = $1 ORDER BY a.message_id, a.part_index",
        identity_id)
    return [r["id"] for r in rows]


async def message_attachment_ids(conn: asyncpg.Connection, identity_id: str, message_id: str
                                 ) -> list[str] | None:
    """The attachment ids of the message ``message_id`` of ``identity_id`` in part order; None
    when the identity has no such message."""
    row = await conn.fetchrow(
        """SELECT coalesce((SELECT array_agg(a.id ORDER BY a.part_index) FROM attachments a
                            WHERE a.message_id = m.id), '{}') AS ids
           FROM messages m WHERE m.id = $1 AND m.identity_id = $2""",
        message_id, identity_id)
    return list(row["ids"]) if row else None


async def raw_of(conn: asyncpg.Connection, message_id: str) -> bytes | None:
    """The raw bytes ``message_id`` was stored from, exactly, or None."""
    return await conn.fetchval("SELECT raw FROM raw_messages WHERE message_id = $1", message_id)


async def set_status(conn: asyncpg.Connection, message_id: str,
                     status: Literal["queued", "sent", "failed"]) -> None:
    """Set the status of an outbound message: ``shared.outbound`` reports its delivery here."""
    await conn.execute("UPDATE messages SET status = $2 WHERE id = $1 AND direction = 'outbound'",
                       message_id, status)


async def set_labels(conn: asyncpg.Connection, message_id: str, labels: list[str]) -> None:
    """Replace the labels of ``message_id`` (the send tools' ``labels``, on the message they
    just stored)."""
    await conn.execute("UPDATE messages SET labels = $2 WHERE id = $1", message_id, labels)


#: Most labels one message holds (mail_update_labels adds at most 64 in a call, as the send
#: tools' ``labels`` do; a message keeps no more, so its labels always fit a result).
MAX_LABELS = 64
#: Labels of a thread shown (the union of its messages'); ``labels_truncated`` says when more.
THREAD_LABELS_SHOWN = 64


async def update_labels(conn: asyncpg.Connection, identity_id: str, *, message_id: str | None = None,
                        thread_id: str | None = None, add: Sequence[str] = (),
                        remove: Sequence[str] = (), read: bool | None = None
                        ) -> LabelState | None:
    """Add ``add`` and remove ``remove`` from the labels of one message (``message_id``) or of
    every message of a thread (``thread_id``, an alias of a merged thread included), and set
    ``read`` on them when it is not None: the one writer of labels and read state
    (mail_update_labels, spec section 4.3). Labels keep the order they were added in; one
    already there is not added twice. Search (``label:``, ``is:unread``, the label facet) and
    mail_list_threads read the same columns, so the change shows at once. Only messages that
    change are written (a write re-derives a row's full-text vector).

    Returns:
        The message's ``{id, labels, read}``, or the thread's (its live id, the union of its
        messages' labels sorted, cut to :data:`THREAD_LABELS_SHOWN`; ``read`` when every
        message is); None when the identity has no such message or thread.

    Raises:
        PylotaError: ``invalid_request`` (path ``labels_add``) when a message would hold more
            than :data:`MAX_LABELS` labels; nothing is changed then.
    """
    assert (message_id is None) != (thread_id is None)
    async with conn.transaction():
        # The lock insert_message takes: a thread cannot merge or grow under this update.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", identity_id)
        if thread_id is not None:
            target = await conn.fetchval(
                f"SELECT id FROM threads WHERE id = {_LIVE_THREAD.format('$1')}"
                " AND identity_id = $2", thread_id, identity_id)
            scope = "m.thread_id = $1"
        else:
            target = await conn.fetchval(
                "SELECT id FROM messages WHERE id = $1 AND identity_id = $2",
                message_id, identity_id)
            scope = "m.id = $1"
        if target is None:
            return None
        new_labels = ("ARRAY(SELECT l FROM unnest(m.labels || $2::text[]) WITH ORDINALITY u(l, n)"
                      " WHERE l <> ALL($3::text[]) GROUP BY l ORDER BY min(n))")
        await conn.execute(
            f"UPDATE messages m SET labels = {new_labels}, read = coalesce($4, m.read)"
            f" WHERE {scope} AND ({new_labels} IS DISTINCT FROM m.labels"
            "  OR m.read IS DISTINCT FROM coalesce($4, m.read))",
            target, list(add), list(remove), read)
        state = await conn.fetchrow(
            "SELECT coalesce((SELECT array_agg(DISTINCT l ORDER BY l) FROM messages m,"
            f"  unnest(m.labels) l WHERE {scope}), '{{}}') AS labels,"
            f" bool_and(m.read) AS read, max(cardinality(m.labels)) AS most"
            f" FROM messages m WHERE {scope}", target)
        if (state["most"] or 0) > MAX_LABELS:
            raise PylotaError(ErrorCode.INVALID_REQUEST,
                              f"A message holds at most {MAX_LABELS} labels.",
                              fix="Remove labels with labels_remove (in the same call or first), "
                                  "or add fewer.", details={"path": "labels_add"})
        if message_id is not None:
            row = await conn.fetchrow("SELECT labels, read FROM messages WHERE id = $1", target)
            return LabelState(id=target, labels=list(row["labels"]), read=row["read"])
    labels = list(state["labels"])
    cut = len(labels) > THREAD_LABELS_SHOWN
    return LabelState(id=target, labels=labels[:THREAD_LABELS_SHOWN], read=bool(state["read"]),
                      labels_truncated=cut, truncated=cut)


async def stored_bytes(conn: asyncpg.Connection, identity_ids: list[str]) -> int:
    """Bytes of every message stored for ``identity_ids``, as received or sent (the raw
    message, attachments included): the storage a plan counts (``shared.plans``)."""
    return await conn.fetchval(
        "SELECT coalesce(sum(octet_length(r.raw)), 0)::bigint FROM messages m"
        " JOIN raw_messages r ON r.message_id = m.id WHERE m.identity_id = any($1::text[])",
        identity_ids)


async def received_since(conn: asyncpg.Connection, identity_ids: list[str], since: datetime
                         ) -> int:
    """How many inbound messages were stored for ``identity_ids`` since ``since`` (each is
    triaged as it is stored: the triage allowance of ``shared.plans``)."""
    return await conn.fetchval(
        "SELECT count(*) FROM messages WHERE identity_id = any($1::text[])"
        " AND direction = 'inbound' AND created_at >= $2", identity_ids, since)
