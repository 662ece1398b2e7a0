"""Owner of ``send_requests``: the send tools' idempotency keys (spec section 4.3).

A key belongs to one identity. :func:`claim` runs first in the transaction that stores a new
message: ``INSERT … ON CONFLICT DO NOTHING`` on the primary key ``(identity_id,
idempotency_key)``. A second call with the same key, even a concurrent one, waits on that key's
index entry until the first transaction ends: if it committed, the second finds its row and
replays it (same request) or refuses (different request); if it rolled back (an error, a spent
allowance), the second claims the key itself. So one key queues exactly one message, by the
database's constraint, never by a check-then-insert.

Keys are kept at least :data:`KEEP` (24 hours): :func:`purge`, run periodically, deletes older
ones, after which the same key sends a new message.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

import asyncpg
import msgspec

from shared.errors import ErrorCode, PylotaError

__all__ = ["KEEP", "request_hash", "claim", "complete", "purge"]

#: How long a key is honoured at least; :func:`purge` removes keys older than this.
KEEP = timedelta(hours=24)

#: Arguments that name who sends or which call this is, not what is sent.
_NOT_HASHED = ("identity", "idempotency_key")


def request_hash(tool: str, request: msgspec.Struct) -> bytes:
    """SHA-256 of ``tool`` and the decoded arguments, defaults filled in (so an argument left
    out and the same argument given at its default are the same request), without
    ``identity`` and ``idempotency_key``."""
    fields = msgspec.to_builtins(request)
    for name in _NOT_HASHED:
        fields.pop(name, None)
    body = msgspec.json.encode(fields, order="sorted")
    return hashlib.sha256(tool.encode() + b"\0" + body).digest()


async def claim(conn: asyncpg.Connection, identity_id: str, key: str, digest: bytes) -> str | None:
    """Claim ``key`` for this transaction, or find the message it already sent.

    Must run inside the transaction that then stores the message and calls :func:`complete`.

    Returns:
        None when the key is new (this transaction now holds it), else the ``msg_`` id the
        same request stored before.

    Raises:
        PylotaError: ``idempotency_conflict`` with ``details.original_message_id`` when the key
            was used with other arguments.
    """
    claimed = await conn.fetchval(
        "INSERT INTO send_requests (identity_id, idempotency_key, request_hash)"
        " VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING true",
        identity_id, key, digest)
    if claimed:
        return None
    row = await conn.fetchrow(
        "SELECT request_hash, message_id FROM send_requests"
        " WHERE identity_id = $1 AND idempotency_key = $2", identity_id, key)
    if row is None:
        # Purged between the two statements; the key is free again.
        return await claim(conn, identity_id, key, digest)
    if row["request_hash"] != digest:
        raise PylotaError(
            ErrorCode.IDEMPOTENCY_CONFLICT,
            "This idempotency_key was used with different arguments.",
            fix="Use a new idempotency_key for a different message, or resend the original "
                "arguments.", details={"original_message_id": row["message_id"]})
    return row["message_id"]


async def complete(conn: asyncpg.Connection, identity_id: str, key: str, message_id: str) -> None:
    """Record the message a claimed key stored (same transaction as :func:`claim`)."""
    await conn.execute(
        "UPDATE send_requests SET message_id = $3 WHERE identity_id = $1 AND idempotency_key = $2",
        identity_id, key, message_id)


async def purge(conn: asyncpg.Connection, *, older_than: timedelta = KEEP) -> int:
    """Delete keys older than ``older_than`` (never less than :data:`KEEP`); returns how many.

    Meant for a periodic job (hourly is plenty)."""
    age = max(older_than, KEEP)
    status = await conn.execute("DELETE FROM send_requests WHERE created_at < now() - $1::interval",
                                age)
    return int(status.rsplit(" ", 1)[-1])
