"""Stored messages as callers read them: records completed with what ingest derived, and cut to
the Message object's output budgets (spec section 4.2, DESIGN.md section 5.4).

Used by the reading tools (mail_get_message, mail_get_thread) and by mail_wait's worker, so a
message reads the same whichever way it reaches a client.
"""

from __future__ import annotations

import asyncpg
import msgspec

from shared.budget import RESULT_BYTES, cut
from shared.mail.records import FoundRef, MessageRecord
from shared.mail.refs import REFS_COLUMN, refs_from, refs_of
from shared.mail.store import get_message_with
from shared.mail.triage import TRIAGE_COLUMN, triage_from, triage_of
from shared.mail.trust import TRUST_COLUMN, trust_from, trust_of

__all__ = ["annotate", "read_message", "budget_message", "LIST_ITEMS", "SUBJECT_CHARS", "SHRUNK_ITEMS",
           "SHRUNK_CHARS"]

#: Items of each list a Message object shows: to, cc, reply_to, attachments, headers.
LIST_ITEMS = 100
#: Subject characters shown (the parser keeps no more; older mail may hold more).
SUBJECT_CHARS = 1_000
#: What a message that would not fit a result alone is cut to.
SHRUNK_ITEMS, SHRUNK_CHARS = 10, 2_000


async def annotate(conn: asyncpg.Connection, records: list[MessageRecord]) -> None:
    """Fill each record's ``triage``, ``trust`` and ``refs`` from what ingest derived."""
    ids = [r.id for r in records]
    triaged = await triage_of(conn, ids)
    trusted = await trust_of(conn, ids)
    found = await refs_of(conn, ids)
    for record in records:
        record.triage = triaged.get(record.id)
        record.trust = trusted.get(record.id)
        record.refs = [FoundRef(kind, value) for kind, value in found.get(record.id, [])]


async def read_message(conn: asyncpg.Connection, identity_id: str, message_id: str, *,
                       include_text: bool = False, include_headers: bool = False
                       ) -> MessageRecord | None:
    """``shared.mail.store.get_message`` with :func:`annotate` done, in one round trip (the
    message with its attachments, triage, trust and references in one statement) instead of
    five; None when ``identity_id`` has no such message."""
    found = await get_message_with(conn, identity_id, message_id,
                                   (TRIAGE_COLUMN, TRUST_COLUMN, REFS_COLUMN),
                                   include_text=include_text, include_headers=include_headers)
    if found is None:
        return None
    record, row = found
    record.triage = triage_from(row["triage"])
    record.trust = trust_from(row["trust"])
    record.refs = [FoundRef(kind, value) for kind, value in refs_from(row["refs"])]
    return record


def budget_message(record: MessageRecord, chars: int, limit: int = RESULT_BYTES - 4096) -> bool:
    """Cut ``record`` to the Message object's budgets, flagging what was cut; True when anything
    was.

    Texts to ``chars`` characters each, the subject to :data:`SUBJECT_CHARS`, the recipient,
    attachment and header lists to :data:`LIST_ITEMS`; a message that still encodes over
    ``limit`` bytes (thousands of long recipients) keeps :data:`SHRUNK_ITEMS` of each list and
    :data:`SHRUNK_CHARS` of each text, so that one message always fits a result.
    """
    cuts = _cut_to(record, chars, LIST_ITEMS)
    if len(msgspec.json.encode(record)) > limit:
        cuts |= _cut_to(record, SHRUNK_CHARS, SHRUNK_ITEMS)
    return cuts


def _cut_to(record: MessageRecord, chars: int, items: int) -> bool:
    record.new_text, new_cut = cut(record.new_text, chars)
    record.new_text_truncated |= new_cut
    if record.text is not None:
        record.text, text_cut = cut(record.text, chars)
        record.text_truncated |= text_cut
    record.subject, subject_cut = cut(record.subject, SUBJECT_CHARS)
    record.subject_truncated |= subject_cut
    for name in ("to", "cc", "reply_to", "attachments", "headers"):
        values = getattr(record, name)
        if values is not None and len(values) > items:
            setattr(record, name, values[:items])
            setattr(record, f"{name}_truncated", True)
    return any((record.new_text_truncated, record.text_truncated, record.subject_truncated,
                record.to_truncated, record.cc_truncated, record.reply_to_truncated,
                record.attachments_truncated, record.headers_truncated))
