"""Owner of ``suppressions``: the addresses a tenant no longer sends to.

A hard bounce (a delivery status notification, RFC 3464, reporting ``Action: failed`` with a
permanent ``5.x.x`` status, RFC 3463) adds the recipient (``shared.outbound.bounces``). Sends
honour the list: a suppressed recipient is marked ``suppressed`` when the message is queued and
again at delivery, and the relay never sees it. Addresses are compared lower-cased. An operator
lists and lifts entries with ``pylota suppressions`` (a report can be forged, and an address can
start to work again).
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

__all__ = ["HARD_BOUNCE", "Suppression", "suppress", "suppressed", "list_suppressions",
           "lift"]

#: The reason recorded for an address a hard bounce added.
HARD_BOUNCE = "hard_bounce"


async def suppress(conn: asyncpg.Connection, tenant_id: str, address: str, *, reason: str,
                   status: str | None, diagnostic: str | None, message_id: str | None) -> None:
    """Add ``address`` to ``tenant_id``'s list, or refresh its entry with the latest bounce."""
    await conn.execute(
        """INSERT INTO suppressions (tenant_id, address, reason, status, diagnostic, message_id)
           VALUES ($1, lower($2), $3, $4, $5, $6)
           ON CONFLICT (tenant_id, address) DO UPDATE SET reason = excluded.reason,
             status = excluded.status, diagnostic = excluded.diagnostic,
             message_id = excluded.message_id, created_at = now()""",
        tenant_id, address, reason, status, diagnostic, message_id)


async def suppressed(conn: asyncpg.Connection, tenant_id: str, addresses: list[str]) -> set[str]:
    """Which of ``addresses`` (lower-cased in the answer) ``tenant_id`` does not send to."""
    rows = await conn.fetch(
        "SELECT address FROM suppressions WHERE tenant_id = $1 AND address = any($2::text[])",
        tenant_id, [a.lower() for a in addresses])
    return {r["address"] for r in rows}


class Suppression(msgspec.Struct, frozen=True, kw_only=True):
    """One address a tenant does not send to, and the bounce that put it there."""

    address: str
    reason: str
    status: str | None
    diagnostic: str | None
    message_id: str | None
    created_at: datetime


async def list_suppressions(conn: asyncpg.Connection, tenant_id: str) -> list[Suppression]:
    """Every address ``tenant_id`` does not send to, in address order."""
    rows = await conn.fetch(
        """SELECT address, reason, status, diagnostic, message_id, created_at FROM suppressions
           WHERE tenant_id = $1 ORDER BY address""", tenant_id)
    return [Suppression(**dict(r)) for r in rows]


async def lift(conn: asyncpg.Connection, tenant_id: str, address: str) -> bool:
    """Send to ``address`` again: take it off ``tenant_id``'s list. False when it was not on it."""
    return await conn.fetchval(
        "DELETE FROM suppressions WHERE tenant_id = $1 AND address = lower($2) RETURNING true",
        tenant_id, address.strip()) is not None
