"""Bounces coming back (shared.outbound.bounces): a DSN about a message we sent marks its
recipient bounced and suppresses the address for the tenant's later sends."""

from __future__ import annotations

import asyncio

import msgspec

from shared.outbound.bounces import absorb_report
from shared.outbound.delivery import deliver_due
from shared.outbound.model import SendRequest
from shared.outbound.outbox import delivery_of
from shared.outbound.send import send_message
from shared.outbound.suppression import suppressed
from tests.shared.outbound.conftest import Relay
from tests.shared.outbound.test_dsn import dsn


def request(key: str, to: list[str]) -> SendRequest:
    return msgspec.convert({"idempotency_key": key, "to": to, "subject": "Hello",
                            "text": "Hi."}, SendRequest)


def report_on(message_id: str) -> bytes:
    return dsn().replace(b"<abc@acme.example>", f"<{message_id}>".encode())


async def test_a_hard_bounce_marks_the_recipient_and_suppresses_it(pool, conn, sender,
                                                                   relay: Relay):
    sent = await send_message(pool, None, sender, request(
        "k-1", ["gone@client.example", "slow@client.example"]))
    async with asyncio.timeout(10):
        assert await deliver_due(pool, relay.config()) == 1
    assert await absorb_report(conn, sender.identity_id, report_on(sent.message.message_id)) == 1
    delivery = await delivery_of(conn, sent.message.id)
    assert delivery is not None and delivery.status == "sent"  # slow@ was only delayed
    states = {r.address: (r.status, r.last_reply) for r in delivery.recipients}
    assert states["slow@client.example"][0] == "sent"
    assert states["gone@client.example"] == (
        "bounced", "bounced: 5.1.1 550 5.1.1 <gone@client.example>: Recipient address rejected")
    assert await suppressed(conn, sender.tenant_id, ["GONE@client.example",
                                                     "slow@client.example"]) == {"gone@client.example"}
    later = await send_message(pool, None, sender, request("k-2", ["gone@client.example"]))
    assert later.delivery.status == "failed"
    assert [r.status for r in later.delivery.recipients] == ["suppressed"]


async def test_a_message_whose_only_recipient_bounced_fails(pool, conn, sender, relay: Relay):
    sent = await send_message(pool, None, sender, request("k-1", ["gone@client.example"]))
    async with asyncio.timeout(10):
        await deliver_due(pool, relay.config())
    await absorb_report(conn, sender.identity_id, report_on(sent.message.message_id))
    delivery = await delivery_of(conn, sent.message.id)
    assert delivery is not None and delivery.status == "failed"
    assert await conn.fetchval("SELECT status FROM messages WHERE id = $1",
                               sent.message.id) == "failed"


async def test_reports_about_mail_we_did_not_send_change_nothing(pool, conn, sender):
    assert await absorb_report(conn, sender.identity_id, dsn()) == 0  # unknown Message-ID
    sent = await send_message(pool, None, sender, request("k-1", ["someone@client.example"]))
    # a report naming an address the message never went to
    assert await absorb_report(conn, sender.identity_id, report_on(sent.message.message_id)) == 0
    assert await suppressed(conn, sender.tenant_id, ["gone@client.example"]) == set()
    assert await absorb_report(conn, sender.identity_id, b"Subject: hi\r\n\r\nnot a report\r\n") == 0
