"""Deriving again what ingest derives, for mail already stored (``pylota reindex``).

:func:`reindex` extracts references and triage again: for mail imported before a tenant added a
``custom:`` pattern, before triage existed, or before its rules changed.
"""

from __future__ import annotations

import asyncpg
import msgspec

from shared.mail.patterns import identity_patterns
from shared.mail.refs import TEXT_CHARS, count_refs, extract_refs, save_refs
from shared.mail.store import stored_contents
from shared.mail.triage import Triage, TriageInput, categories_of, save_triage, triage

__all__ = ["reindex", "Reindexed"]

#: Messages whose triage is written in one statement during a reindex.
_TRIAGE_BATCH = 500


class Reindexed(msgspec.Struct, frozen=True, kw_only=True):
    """How many messages a :func:`reindex` read, how many it gave another category, and how many
    references it found that were not stored yet."""

    messages: int
    recategorised: int
    new_references: int


async def reindex(conn: asyncpg.Connection, identity_id: str | None = None) -> Reindexed:
    """Extract references and triage again for every message (of ``identity_id``, or all), in one
    transaction. Reference rows already stored are kept; triage is replaced."""
    count = changed = 0
    patterns: dict[str, dict[str, str]] = {}
    async with conn.transaction():
        refs_before = await count_refs(conn, identity_id)
        before = await categories_of(conn, identity_id)
        pending: dict[str, list[tuple[str, Triage]]] = {}
        async for msg in stored_contents(conn, identity_id, text_chars=TEXT_CHARS):
            idn = msg.identity_id
            if idn not in patterns:
                patterns[idn] = await identity_patterns(conn, idn)
            await save_refs(conn, idn, msg.id, extract_refs(msg.subject, msg.text, patterns[idn]))
            result = triage(TriageInput(
                subject=msg.subject, from_address=msg.from_address, from_name=msg.from_name,
                reply_to=msg.reply_to, headers=msg.headers, text=msg.new_text or msg.text,
                attachments=msg.attachments))
            changed += before.get(msg.id) != result.category
            batch = pending.setdefault(idn, [])
            batch.append((msg.id, result))
            if len(batch) >= _TRIAGE_BATCH:
                await save_triage(conn, idn, batch)
                batch.clear()
            count += 1
        for idn, batch in pending.items():
            await save_triage(conn, idn, batch)
        added = await count_refs(conn, identity_id) - refs_before
    return Reindexed(messages=count, recategorised=changed, new_references=added)
