"""Delivery to an SMTP relay on loopback (shared.outbound.delivery), on real sockets and a real
PostgreSQL: what the relay receives, DKIM, retries, permanent failures, a worker killed
mid-delivery, suppression, and the fencing of stale attempts."""

from __future__ import annotations

import asyncio
import email
from email import policy

import asyncpg
import dkim
import msgspec

from shared.outbound.delivery import RelayConfig, deliver_due, retry_delay
from shared.outbound.model import Sender, SendRequest
from shared.outbound.outbox import claim_next, delivery_of, settle
from shared.outbound.send import send_message
from shared.outbound.suppression import HARD_BOUNCE, suppress
from tests.conftest import free_port
from tests.shared.outbound.conftest import OWN, Certificates, DkimKeys, Relay, serving

WAIT = 10  # seconds any single wait of these tests may take at most


def request(key: str = "k-1", **overrides: object) -> SendRequest:
    values: dict[str, object] = {"idempotency_key": key, "to": ["Jo Lee <jo@example.com>"],
                                 "cc": ["bo@example.net"], "bcc": ["audit@example.org"],
                                 "subject": "Quarterly figures", "text": "Figures below.",
                                 "html": "<p>Figures below.</p>"}
    values.update(overrides)
    return msgspec.convert(values, SendRequest)


async def status_of(conn: asyncpg.Connection, message_id: str) -> str:
    return await conn.fetchval("SELECT status FROM messages WHERE id = $1", message_id)


async def test_delivered_with_its_headers_and_a_dkim_signature_that_verifies(
        pool, conn, sender, relay: Relay, dkim_keys: DkimKeys):
    sent = await send_message(pool, None, sender, request())
    async with asyncio.timeout(WAIT):
        assert await deliver_due(pool, relay.config(), dkim=dkim_keys.signer) == 1
    assert len(relay.received) == 1
    got = relay.received[0]
    assert got.mail_from == OWN
    assert sorted(got.rcpt_tos) == ["audit@example.org", "bo@example.net", "jo@example.com"]
    assert dkim.verify(got.content, dnsfunc=dkim_keys.dnsfunc)
    msg = email.message_from_bytes(got.content, policy=policy.default)
    assert msg["From"] == f"Acme Desk <{OWN}>"
    assert msg["To"] == "Jo Lee <jo@example.com>" and msg["Cc"] == "bo@example.net"
    assert msg["Subject"] == "Quarterly figures"
    assert msg["Message-ID"] == f"<{sent.message.message_id}>"
    assert "Bcc" not in msg and msg["Date"] is not None
    assert "d=acme.example" in msg["DKIM-Signature"] and "s=s1" in msg["DKIM-Signature"]
    assert msg.get_content_type() == "multipart/alternative"
    delivery = await delivery_of(conn, sent.message.id)
    assert delivery is not None and delivery.status == "sent" and delivery.attempts == 1
    assert delivery.last_reply == "250 2.0.0 Ok: queued as TEST"
    assert {r.status for r in delivery.recipients} == {"sent"}
    assert await status_of(conn, sent.message.id) == "sent"
    # nothing is due any more
    assert await deliver_due(pool, relay.config(), dkim=dkim_keys.signer) == 0
    assert len(relay.received) == 1


async def test_starttls_and_auth(pool, conn, sender, certificates: Certificates):
    sent = await send_message(pool, None, sender, request())
    async with serving(Relay(), tls=certificates.server, password="s3cret") as relay:
        wrong = relay.config(security="starttls", ca_file=certificates.ca_file,
                             username="relay-user", password="wrong")
        async with asyncio.timeout(WAIT):
            assert await deliver_due(pool, wrong) == 1
        delivery = await delivery_of(conn, sent.message.id)
        assert delivery is not None and delivery.status == "deferred"
        assert delivery.last_reply is not None
        assert delivery.last_reply.startswith("relay refused our credentials: 535")
        plain = relay.config(security="none", username="relay-user", password="s3cret")
        async with asyncio.timeout(WAIT):
            assert await deliver_due(pool, plain) == 1  # the relay insists on STARTTLS
        right = relay.config(security="starttls", ca_file=certificates.ca_file,
                             username="relay-user", password="s3cret")
        async with asyncio.timeout(WAIT):
            assert await deliver_due(pool, right) == 1
    assert [(r.secure, r.login) for r in relay.received] == [(True, "relay-user")]
    delivery = await delivery_of(conn, sent.message.id)
    assert delivery is not None and (delivery.status, delivery.attempts) == ("sent", 3)


async def test_implicit_tls_checks_the_certificate(pool, conn, sender,
                                                   certificates: Certificates):
    sent = await send_message(pool, None, sender, request())
    async with serving(Relay(), tls=certificates.server, implicit=True) as relay:
        async with asyncio.timeout(WAIT):
            # without our CA the certificate does not verify: a temporary failure
            assert await deliver_due(pool, relay.config(security="tls")) == 1
            delivery = await delivery_of(conn, sent.message.id)
            assert delivery is not None and delivery.status == "deferred"
            assert await deliver_due(pool, relay.config(security="tls",
                                                        ca_file=certificates.ca_file)) == 1
    assert [r.secure for r in relay.received] == [True]


async def test_relay_down_is_retried_then_failed(pool, conn, sender):
    sent = await send_message(pool, None, sender, request())
    down = RelayConfig(host="127.0.0.1", port=free_port(), timeout=5.0, max_attempts=3,
                       retry_seconds=0.0)
    async with asyncio.timeout(WAIT):
        for attempt, expected in ((1, "deferred"), (2, "deferred"), (3, "failed")):
            assert await deliver_due(pool, down) == 1
            delivery = await delivery_of(conn, sent.message.id)
            assert delivery is not None
            assert (delivery.attempts, delivery.status) == (attempt, expected)
            assert delivery.last_reply is not None
            assert delivery.last_reply.startswith("relay unreachable: ")
        assert await deliver_due(pool, down) == 0
    assert {r.status for r in delivery.recipients} == {"failed"}
    assert delivery.recipients[0].last_reply is not None
    assert delivery.recipients[0].last_reply.startswith("gave up after 3 attempts: relay unreachable")
    assert await status_of(conn, sent.message.id) == "failed"


async def test_a_deferred_message_waits_for_its_backoff(pool, conn, sender):
    await send_message(pool, None, sender, request())
    slow = RelayConfig(host="127.0.0.1", port=free_port(), timeout=5.0, retry_seconds=60.0)
    assert [retry_delay(slow, n) for n in (1, 2, 3, 9)] == [60.0, 240.0, 960.0, 6 * 3600]
    async with asyncio.timeout(WAIT):
        assert await deliver_due(pool, slow) == 1
        assert await deliver_due(pool, slow) == 0  # not due for another minute


async def test_a_4xx_recipient_is_retried_alone(pool, conn, sender, relay: Relay):
    sent = await send_message(pool, None, sender, request())
    relay.refuse["bo@example.net"] = "450 4.2.1 Mailbox busy, try later"
    async with asyncio.timeout(WAIT):
        assert await deliver_due(pool, relay.config()) == 1
        delivery = await delivery_of(conn, sent.message.id)
        assert delivery is not None and delivery.status == "deferred"
        assert {r.address: r.status for r in delivery.recipients} == {
            "jo@example.com": "sent", "bo@example.net": "pending", "audit@example.org": "sent"}
        relay.refuse.clear()
        assert await deliver_due(pool, relay.config()) == 1
    assert [r.rcpt_tos for r in relay.received] == [
        ["jo@example.com", "audit@example.org"], ["bo@example.net"]]
    delivery = await delivery_of(conn, sent.message.id)
    assert delivery is not None and delivery.status == "sent" and delivery.attempts == 2


async def test_a_retry_offers_the_same_signed_bytes(pool, conn, sender, relay: Relay,
                                                    dkim_keys: DkimKeys):
    await send_message(pool, None, sender, request())
    relay.data_reply = "451 4.3.0 Try again later"
    async with asyncio.timeout(WAIT):
        assert await deliver_due(pool, relay.config(), dkim=dkim_keys.signer) == 1
        relay.data_reply = None
        assert await deliver_due(pool, relay.config(), dkim=dkim_keys.signer) == 1
    first, second = relay.offered
    assert first == second == relay.received[0].content
    assert dkim.verify(second, dnsfunc=dkim_keys.dnsfunc)


async def test_an_envelope_address_outside_ascii_fails_for_good(pool, conn, sender,
                                                                relay: Relay):
    """aiosmtplib raised UnicodeEncodeError for it: the drain failed on every lease and the
    message stayed sending (found by a new user)."""
    sent = await send_message(pool, None, sender, request())
    await conn.execute("UPDATE outbound_messages SET mail_from = 'ünï@acme.example'")
    async with asyncio.timeout(WAIT):
        assert await deliver_due(pool, relay.config()) == 1
        assert await deliver_due(pool, relay.config()) == 0
    delivery = await delivery_of(conn, sent.message.id)
    assert delivery is not None and delivery.status == "failed"
    assert "SMTPUTF8" in (delivery.last_reply or "")
    assert {r.status for r in delivery.recipients} == {"failed"}
    assert relay.received == []


async def test_5xx_replies_fail_for_good(pool, conn, sender, relay: Relay):
    one = await send_message(pool, None, sender, request())
    relay.refuse["bo@example.net"] = "550 5.1.1 No such user"
    async with asyncio.timeout(WAIT):
        assert await deliver_due(pool, relay.config()) == 1
    delivery = await delivery_of(conn, one.message.id)
    assert delivery is not None and delivery.status == "sent"
    refused = next(r for r in delivery.recipients if r.address == "bo@example.net")
    assert (refused.status, refused.last_reply) == ("failed", "550 5.1.1 No such user")

    two = await send_message(pool, None, sender, request("k-2"))
    relay.data_reply = "554 5.7.1 Message refused"
    async with asyncio.timeout(WAIT):
        assert await deliver_due(pool, relay.config()) == 1
        assert await deliver_due(pool, relay.config()) == 0
    delivery = await delivery_of(conn, two.message.id)
    assert delivery is not None
    assert (delivery.status, delivery.attempts) == ("failed", 1)
    assert delivery.last_reply == "554 5.7.1 Message refused"
    assert await status_of(conn, two.message.id) == "failed"


async def test_a_worker_killed_mid_delivery_delivers_once_after_restart(
        pool, conn, sender, relay: Relay):
    sent = await send_message(pool, None, sender, request())
    relay.hold = True
    # lease 0: the claim lapses at once, as it would after a crashed worker's lease ran out
    killed = asyncio.create_task(deliver_due(pool, relay.config(), lease_seconds=0))
    async with asyncio.timeout(WAIT):
        await relay.entered.wait()
    killed.cancel()
    async with asyncio.timeout(WAIT):
        await asyncio.gather(killed, return_exceptions=True)
    delivery = await delivery_of(conn, sent.message.id)
    assert delivery is not None and delivery.status == "sending" and relay.received == []
    relay.hold = False
    async with asyncio.timeout(WAIT):
        assert await deliver_due(pool, relay.config()) == 1
        assert await deliver_due(pool, relay.config()) == 0
    assert len(relay.received) == 1
    delivery = await delivery_of(conn, sent.message.id)
    assert delivery is not None and (delivery.status, delivery.attempts) == ("sent", 2)


async def test_a_stale_attempt_cannot_overwrite_a_newer_one(pool, conn, sender):
    sent = await send_message(pool, None, sender, request())
    stale = await claim_next(conn, lease_seconds=0)
    fresh = await claim_next(conn, lease_seconds=60)
    assert stale is not None and fresh is not None
    assert (stale.attempt, fresh.attempt) == (1, 2)
    assert not await settle(conn, stale, recipients={}, status="failed", last_reply="late")
    assert await settle(conn, fresh, recipients={a: ("sent", "250 ok") for a in fresh.recipients},
                        status="sent", last_reply="250 ok")
    delivery = await delivery_of(conn, sent.message.id)
    assert delivery is not None and delivery.status == "sent"


async def test_suppressed_at_delivery_time(pool, conn, sender: Sender, relay: Relay):
    sent = await send_message(pool, None, sender, request())
    await suppress(conn, sender.tenant_id, "bo@example.net", reason=HARD_BOUNCE, status="5.1.1",
                   diagnostic=None, message_id=None)
    async with asyncio.timeout(WAIT):
        assert await deliver_due(pool, relay.config()) == 1
    assert sorted(relay.received[0].rcpt_tos) == ["audit@example.org", "jo@example.com"]
    delivery = await delivery_of(conn, sent.message.id)
    assert delivery is not None
    assert {r.address: r.status for r in delivery.recipients}["bo@example.net"] == "suppressed"


async def test_a_reply_to_real_imported_mail_threads_and_goes_to_loopback_only(
        pool, conn, sender, relay: Relay, kit):
    from shared.ingest.pipeline import ingest_raw
    from shared.mail.parse import parse_message
    from shared.mail.sources import iter_sources
    from shared.outbound.model import ReplyRequest
    from shared.outbound.send import reply_message

    # Real mail is only ever relayed to the loopback stand-in (the kit's rule).
    assert relay.config().host == "127.0.0.1"
    mbox = kit / "corpus" / "mailboxes" / "notmuch-lkml" / "notmuch-lkml.mbox"
    raw = next(item.raw for item in iter_sources([mbox]) if item.raw
               and len(parse_message(item.raw).references) > 1)
    await ingest_raw(conn, None, sender.identity_id, raw)
    row = await conn.fetchrow(
        "SELECT id, thread_id, rfc_message_id, \"references\" FROM messages"
        " WHERE cardinality(\"references\") > 1 AND from_address IS NOT NULL ORDER BY id LIMIT 1")
    reply = await reply_message(pool, None, sender, ReplyRequest(
        message_id=row["id"], idempotency_key="real-1", text="Thanks, applied."))
    assert reply.message.thread_id == row["thread_id"]
    assert reply.message.in_reply_to == [row["rfc_message_id"]]
    assert reply.message.references[-1] == row["rfc_message_id"]
    assert reply.message.references[0] == row["references"][0]
    async with asyncio.timeout(WAIT):
        assert await deliver_due(pool, relay.config()) == 1
    delivered = email.message_from_bytes(relay.received[0].content, policy=policy.default)
    assert delivered["In-Reply-To"] == f"<{row['rfc_message_id']}>"
    original = await conn.fetchval("SELECT subject FROM messages WHERE id = $1", row["id"])
    assert original.startswith("Re: ")
    assert str(delivered["Subject"]).strip() == original  # Re: once, not "Re: Re:"
