"""Owner of ``suppressions``: the addresses a tenant no longer sends to.

A hard bounce (a delivery status notification, RFC 3464, reporting ``Action: failed`` with a
permanent ``5.x.x`` status, RFC 3463) adds the recipient (``shared.outbound.bounces``). Sends
honour the list: a suppressed recipient is marked ``suppressed`` when the message is queued and
again at delivery, and the relay never sees it. Addresses are compared lower-cased.
"""

from __future__ import annotations

import asyncpg

__all__ = ["HARD_BOUNCE", "suppress", "suppressed"]

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
