"""Deriving again what ingest derives, for mail already stored (``pylota reindex``).

:func:`reindex` derives references, trust, triage and the words inside compound tokens
(``shared.mail.compound``) again for stored mail: for mail imported before a tenant added a
``custom:`` pattern, before trust, triage or those words existed, or before their rules changed. It also queues for text extraction every attachment that was never queued (mail stored
before attachment text existed); the batch workers extract them (``shared.extract``).
"""

from __future__ import annotations

import dataclasses

import asyncpg
import msgspec

from shared.extract.store import queue_missing
from shared.mail.patterns import identity_patterns
from shared.mail.refs import TEXT_CHARS, count_refs, extract_refs, save_refs
from shared.mail.compound import index_terms
from shared.mail.store import save_terms, stored_contents
from shared.mail.triage import (Triage, TriageInput, categories_of, judged_text, save_triage,
                                 triage)
from shared.mail.trust import (
    Correspondence, Trust, TrustPolicy, checked_dkim, correspondence_of, judged_by, rejudge,
    save_trust,
)

__all__ = ["reindex", "Reindexed"]

#: Messages whose trust, triage and terms are written in one statement during a reindex.
_TRIAGE_BATCH = 500


class Reindexed(msgspec.Struct, frozen=True, kw_only=True):
    """How many messages a :func:`reindex` read, how many it gave another category, how many
    references it found that were not stored yet, and how many attachments it queued for text
    extraction."""

    messages: int
    recategorised: int
    new_references: int
    attachments_queued: int = 0


async def reindex(conn: asyncpg.Connection, identity_id: str | None = None, *,
                  trust_policy: TrustPolicy = TrustPolicy(),
                  listener_id: str | None = None) -> Reindexed:
    """Extract references, trust and triage again for every message (of ``identity_id``, or
    all), in one transaction. Reference rows already stored are kept; trust and triage are
    replaced. ``trust_policy`` is ingest's (``shared.mail.trust``): DKIM checks made at ingest
    are kept, signed mail never checked is verified when it has a resolver. ``listener_id`` is
    our SMTP listener's authserv-id: its field is believed again only for the messages whose
    verdict came from it at ingest (``shared.mail.trust.judged_by``), never for others."""
    count = changed = 0
    patterns: dict[str, dict[str, str]] = {}
    known: dict[str, Correspondence] = {}
    async with conn.transaction():
        refs_before = await count_refs(conn, identity_id)
        before = await categories_of(conn, identity_id)
        checked = await checked_dkim(conn, identity_id)
        heard = await judged_by(conn, identity_id, listener_id) if listener_id else set()
        listened = dataclasses.replace(trust_policy, own_authserv_id=listener_id)
        pending: dict[str, list[tuple[str, Trust, dict, Triage]]] = {}
        terms: list[tuple[str, str]] = []
        async for msg in stored_contents(conn, identity_id, text_chars=TEXT_CHARS):
            idn = msg.identity_id
            if idn not in patterns:
                patterns[idn] = await identity_patterns(conn, idn)
                known[idn] = await correspondence_of(conn, idn, None)
            await save_refs(conn, idn, msg.id, extract_refs(msg.subject, msg.text, patterns[idn]))
            terms.append((msg.id, index_terms(msg.subject, msg.from_address, msg.text,
                                              (name for name, _ in msg.attachments))))
            if len(terms) >= _TRIAGE_BATCH:
                await save_terms(conn, terms)
                terms.clear()
            trust, details = await rejudge(conn, msg, listened if msg.id in heard
                                           else trust_policy, known[idn], checked)
            result = triage(TriageInput(
                subject=msg.subject, from_address=msg.from_address, from_name=msg.from_name,
                reply_to=msg.reply_to, headers=msg.headers,
                text=judged_text(msg.new_text, msg.text, answers=msg.answers),
                attachments=msg.attachments, trust=trust))
            changed += before.get(msg.id) != result.category
            batch = pending.setdefault(idn, [])
            batch.append((msg.id, trust, details, result))
            if len(batch) >= _TRIAGE_BATCH:
                await _save(conn, idn, batch)
                batch.clear()
            count += 1
        for idn, batch in pending.items():
            await _save(conn, idn, batch)
        await save_terms(conn, terms)
        added = await count_refs(conn, identity_id) - refs_before
        queued = await queue_missing(conn, identity_id)
    return Reindexed(messages=count, recategorised=changed, new_references=added,
                     attachments_queued=queued)


async def _save(conn: asyncpg.Connection, identity_id: str,
                batch: list[tuple[str, Trust, dict, Triage]]) -> None:
    await save_trust(conn, identity_id, [(mid, trust, details) for mid, trust, details, _ in batch])
    await save_triage(conn, identity_id, [(mid, result) for mid, _, _, result in batch])
