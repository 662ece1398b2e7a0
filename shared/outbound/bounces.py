"""Bounces coming back: a delivery status notification received by an identity updates the
delivery of the message it reports on, and hard bounces feed the suppression list.

Only a report about a message this identity sent counts, and only for that message's own
recipients: a forged report can at most mark a recipient of ours bounced, never suppress an
address we did not write to. Called by the SMTP listener (``front.smtp``) after it stored the
report as ordinary mail, so the report also stays readable in the mailbox.
"""

from __future__ import annotations

import asyncpg

from shared.logs import get_logger
from shared.outbound.dsn import parse_dsn
from shared.outbound.outbox import mark_bounced, sent_message
from shared.outbound.suppression import HARD_BOUNCE, suppress

__all__ = ["absorb_report"]

log = get_logger("shared.outbound.bounces")


async def absorb_report(conn: asyncpg.Connection, identity_id: str, raw: bytes) -> int:
    """Apply the DSN in ``raw`` (RFC 3464), if it is one, to what ``identity_id`` sent.

    Each hard-bounced recipient of the reported message is marked ``bounced`` with the report's
    status and diagnostic, and put on its tenant's suppression list.

    Returns:
        How many recipients were marked bounced (0 for anything that is not such a report).
    """
    report = parse_dsn(raw)
    if report is None or report.original_message_id is None:
        return 0
    found = await sent_message(conn, identity_id, report.original_message_id)
    if found is None:
        return 0
    message_id, tenant_id = found
    marked = 0
    for recipient in report.recipients:
        if not recipient.hard_bounce:
            continue
        reply = f"bounced: {recipient.status}" + (f" {recipient.diagnostic}"
                                                   if recipient.diagnostic else "")
        async with conn.transaction():
            if not await mark_bounced(conn, message_id, recipient.address, reply):
                continue
            await suppress(conn, tenant_id, recipient.address, reason=HARD_BOUNCE,
                           status=recipient.status, diagnostic=recipient.diagnostic,
                           message_id=message_id)
        marked += 1
    if marked:
        log.info("hard_bounces", identity_id=identity_id, message_id=message_id, count=marked)
    return marked
