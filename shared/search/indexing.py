"""What ingest does for search after a message is stored: extract its references and queue it for
an embedding. Called once per new message by :func:`shared.mail.ingest.ingest_raw`; the batch
worker computes the vector later (``shared.embeddings.store.embed_pending``).

:func:`reindex_refs` re-extracts references of stored mail, for mail imported before a tenant
added a ``custom:`` pattern or before this module existed (``pylota embeddings backfill --refs``).
"""

from __future__ import annotations

import asyncpg

from shared.embeddings.store import enqueue
from shared.search.patterns import identity_patterns
from shared.search.refs import extract_refs, save_refs

__all__ = ["index_message", "reindex_refs"]


async def index_message(conn: asyncpg.Connection, identity_id: str, message_id: str,
                        subject: str, text: str) -> None:
    """Store the references of a new message and queue it for embedding (spec section 4.3)."""
    patterns = await identity_patterns(conn, identity_id)
    async with conn.transaction():
        await save_refs(conn, identity_id, message_id, extract_refs(subject, text, patterns))
        await enqueue(conn, identity_id, message_id)


async def reindex_refs(conn: asyncpg.Connection, identity_id: str | None = None) -> int:
    """Extract references again for every message (of ``identity_id``, or all); returns how many
    messages were read. Rows already stored are kept."""
    count = 0
    patterns: dict[str, dict[str, str]] = {}
    async with conn.transaction():
        async for row in conn.cursor(
                "SELECT id, identity_id, subject, text FROM messages"
                " WHERE $1::text IS NULL OR identity_id = $1 ORDER BY id", identity_id):
            idn = row["identity_id"]
            if idn not in patterns:
                patterns[idn] = await identity_patterns(conn, idn)
            await save_refs(conn, idn, row["id"],
                            extract_refs(row["subject"], row["text"], patterns[idn]))
            count += 1
    return count
