"""Owner of ``outbound_messages`` and ``outbound_recipients``: what waits for delivery, and how
each delivery went.

A send queues one row per message and one per envelope recipient (:func:`enqueue`). Workers take
due messages one at a time (:func:`claim_next`): the row becomes ``sending`` with a lease, in its
own short transaction, so other workers skip it and a worker that dies leaves it to be claimed
again once the lease has passed. The claim's attempt number is a fencing token: :func:`settle`
writes the outcome only while the row is still that attempt's, so a worker that outlived its
lease cannot overwrite a newer attempt. When a message reaches ``sent`` or ``failed`` its
``messages.status`` follows (``shared.mail.store.set_status``).

Rows leave as Structs of ``shared.outbound.model`` or of this module.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

from shared.mail.store import set_status
from shared.outbound.model import Delivery, DeliveryStatus, RecipientDelivery, RecipientStatus

__all__ = ["Outbound", "Claim", "enqueue", "outbound_of", "delivery_of", "claim_next",
           "keep_signed", "settle", "sent_message", "mark_bounced", "recipients_since"]


class Outbound(msgspec.Struct, frozen=True, kw_only=True):
    """What a send stored beside the message: its kind, metadata, flags and delivery."""

    kind: str
    metadata: dict[str, str]
    flags: list[str]
    delivery: Delivery


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    """A message a worker holds for one attempt: envelope sender, pending recipients, whether
    an earlier attempt already delivered to someone (``delivered``), the bytes an earlier
    attempt offered (``signed``, None before the first), and ``attempt`` (1 for the first), the
    fencing token of :func:`settle` and :func:`keep_signed`."""

    message_id: str
    identity_id: str
    tenant_id: str
    rfc_message_id: str
    mail_from: str
    attempt: int
    recipients: list[str]
    delivered: bool
    signed: bytes | None = None


async def enqueue(conn: asyncpg.Connection, *, message_id: str, identity_id: str, tenant_id: str,
                  rfc_message_id: str, mail_from: str, recipients: list[tuple[str, str]],
                  kind: str, metadata: dict[str, str], flags: list[str],
                  suppressed: set[str]) -> None:
    """Queue ``message_id`` for delivery to ``recipients`` (``(field, address)`` pairs, field
    ``to``, ``cc`` or ``bcc``); addresses in ``suppressed`` (lower-case) are marked
    ``suppressed`` at once. A message whose every recipient is suppressed is ``failed``."""
    deliverable = any(address.lower() not in suppressed for _, address in recipients)
    status = "queued" if deliverable else "failed"
    await conn.execute(
        """INSERT INTO outbound_messages (message_id, identity_id, tenant_id, rfc_message_id,
             mail_from, kind, metadata, flags, status, last_reply)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)""",
        message_id, identity_id, tenant_id, rfc_message_id, mail_from, kind, metadata, flags,
        status, None if deliverable else "every recipient is suppressed")
    await conn.executemany(
        "INSERT INTO outbound_recipients (message_id, address, field, status, last_reply)"
        " VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        [(message_id, address, field,
          "suppressed" if address.lower() in suppressed else "pending",
          "suppressed: an earlier message to this address bounced"
          if address.lower() in suppressed else None)
         for field, address in recipients])
    if not deliverable:
        await set_status(conn, message_id, "failed")


async def delivery_of(conn: asyncpg.Connection, message_id: str) -> Delivery | None:
    """The delivery state of ``message_id``, or None for a message that was not sent by us
    (imported or received mail)."""
    row = await conn.fetchrow(
        "SELECT status, attempts, last_reply, next_attempt_at, updated_at FROM outbound_messages"
        " WHERE message_id = $1", message_id)
    if row is None:
        return None
    recipients = await conn.fetch(
        "SELECT address, field, status, last_reply FROM outbound_recipients WHERE message_id = $1"
        " ORDER BY array_position(ARRAY['to', 'cc', 'bcc'], field), address", message_id)
    waiting = row["status"] in ("queued", "deferred")
    return Delivery(status=row["status"], attempts=row["attempts"], last_reply=row["last_reply"],
                    next_attempt_at=row["next_attempt_at"] if waiting else None,
                    updated_at=row["updated_at"],
                    recipients=[RecipientDelivery(**dict(r)) for r in recipients])


async def outbound_of(conn: asyncpg.Connection, message_id: str) -> Outbound | None:
    """Kind, metadata, flags and delivery of a message we sent, or None."""
    row = await conn.fetchrow(
        "SELECT kind, metadata, flags FROM outbound_messages WHERE message_id = $1", message_id)
    delivery = await delivery_of(conn, message_id)
    if row is None or delivery is None:
        return None
    return Outbound(kind=row["kind"], metadata=row["metadata"], flags=list(row["flags"]),
                    delivery=delivery)


async def claim_next(conn: asyncpg.Connection, *, lease_seconds: float,
                     skip: list[str] | None = None) -> Claim | None:
    """Take the most overdue message (queued or deferred and due, or ``sending`` with a lapsed
    lease), other than those in ``skip``, for one attempt, in its own transaction; None when
    nothing is due."""
    async with conn.transaction():
        row = await conn.fetchrow(
            """UPDATE outbound_messages o SET status = 'sending', attempts = o.attempts + 1,
                 lease_until = now() + make_interval(secs => $1), updated_at = now()
               WHERE o.message_id = (
                 SELECT message_id FROM outbound_messages
                 WHERE next_attempt_at <= now()
                   AND (status IN ('queued', 'deferred')
                        OR (status = 'sending' AND lease_until < now()))
                   AND message_id <> all($2::text[])
                 ORDER BY next_attempt_at, message_id
                 FOR UPDATE SKIP LOCKED LIMIT 1)
               RETURNING o.message_id, o.identity_id, o.tenant_id, o.rfc_message_id,
                         o.mail_from, o.attempts, o.signed""",
            lease_seconds, skip or [])
        if row is None:
            return None
        recipients = await conn.fetch(
            "SELECT address, status FROM outbound_recipients WHERE message_id = $1"
            " ORDER BY array_position(ARRAY['to', 'cc', 'bcc'], field), address",
            row["message_id"])
    return Claim(message_id=row["message_id"], identity_id=row["identity_id"],
                 tenant_id=row["tenant_id"], rfc_message_id=row["rfc_message_id"],
                 mail_from=row["mail_from"], attempt=row["attempts"],
                 recipients=[r["address"] for r in recipients if r["status"] == "pending"],
                 delivered=any(r["status"] == "sent" for r in recipients),
                 signed=row["signed"])


async def keep_signed(conn: asyncpg.Connection, claim: Claim, signed: bytes) -> bool:
    """Keep the bytes ``claim``'s attempt is about to offer, so every later attempt offers the
    same ones (a DKIM signature carries its time, t=). False when the attempt no longer holds
    the message."""
    return bool(await conn.fetchval(
        "UPDATE outbound_messages SET signed = $3 WHERE message_id = $1 AND attempts = $2"
        " AND status = 'sending' RETURNING true", claim.message_id, claim.attempt, signed))


async def settle(conn: asyncpg.Connection, claim: Claim, *,
                 recipients: dict[str, tuple[RecipientStatus, str | None]],
                 status: DeliveryStatus, last_reply: str | None,
                 retry_at: datetime | None = None) -> bool:
    """Record the outcome of ``claim``'s attempt: each recipient's new status and reply, the
    message's status and last reply, and for ``deferred`` when to try again.

    Returns:
        False, writing nothing, when the attempt no longer holds the message (its lease lapsed
        and another attempt took it).
    """
    async with conn.transaction():
        held = await conn.fetchval(
            """UPDATE outbound_messages SET status = $3, last_reply = $4,
                 next_attempt_at = coalesce($5, next_attempt_at), lease_until = NULL,
                 updated_at = now()
               WHERE message_id = $1 AND attempts = $2 AND status = 'sending'
               RETURNING true""",
            claim.message_id, claim.attempt, status, last_reply, retry_at)
        if not held:
            return False
        await conn.executemany(
            "UPDATE outbound_recipients SET status = $3, last_reply = $4"
            " WHERE message_id = $1 AND address = $2",
            [(claim.message_id, address, state, reply)
             for address, (state, reply) in recipients.items()])
        if status in ("sent", "failed"):
            await set_status(conn, claim.message_id, status)
    return True


async def sent_message(conn: asyncpg.Connection, identity_id: str, rfc_message_id: str
                       ) -> tuple[str, str] | None:
    """``(message_id, tenant_id)`` of the message ``identity_id`` sent with this Message-ID."""
    row = await conn.fetchrow(
        "SELECT message_id, tenant_id FROM outbound_messages"
        " WHERE identity_id = $1 AND rfc_message_id = $2", identity_id, rfc_message_id)
    return (row["message_id"], row["tenant_id"]) if row else None


async def mark_bounced(conn: asyncpg.Connection, message_id: str, address: str,
                       reply: str) -> bool:
    """Mark a recipient of ``message_id`` ``bounced`` with the report's ``reply``; a message
    left with no recipient sent or pending becomes ``failed``. False when ``address`` is not
    one of its recipients (a report about someone else is ignored)."""
    async with conn.transaction():
        changed = await conn.fetchval(
            "UPDATE outbound_recipients SET status = 'bounced', last_reply = $3"
            " WHERE message_id = $1 AND lower(address) = lower($2) RETURNING true",
            message_id, address, reply)
        if not changed:
            return False
        alive = await conn.fetchval(
            "SELECT count(*) FROM outbound_recipients"
            " WHERE message_id = $1 AND status IN ('sent', 'pending')", message_id)
        # A message that a worker holds right now is settled by that attempt.
        if alive == 0 and await conn.fetchval(
                "UPDATE outbound_messages SET status = 'failed', last_reply = $2,"
                " updated_at = now() WHERE message_id = $1 AND status <> 'sending'"
                " RETURNING true", message_id, reply):
            await set_status(conn, message_id, "failed")
    return True


async def recipients_since(conn: asyncpg.Connection, tenant_id: str, since: datetime) -> int:
    """Envelope recipients of the messages ``tenant_id`` queued since ``since``, suppressed ones
    included: the sends its plan counts (``shared.plans``; a message to three people is three
    sends)."""
    return await conn.fetchval(
        "SELECT count(*) FROM outbound_recipients r"
        " JOIN outbound_messages m ON m.message_id = r.message_id"
        " WHERE m.tenant_id = $1 AND m.created_at >= $2", tenant_id, since)
