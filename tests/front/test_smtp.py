"""The inbound SMTP listener (front.smtp) on real loopback sockets, real PostgreSQL and Redis:
smtplib as the sending server, a DNS table as the resolver (no network)."""

from __future__ import annotations

import asyncio
import email
import smtplib
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email import policy

import asyncpg
import msgspec
import pytest
from redis.asyncio import Redis

from front import smtp
import front.smtp
from front.smtp import (MAX_UNKNOWN_RECIPIENTS_PER_MINUTE, DnsTemporaryError, authentication_results,
                        smtp_listener)
from shared.db import open_database
from shared.mail.store import raw_of
from shared.outbound.delivery import RelayConfig, deliver_due
from shared.outbound.model import ReplyRequest, Sender, SendRequest
from shared.outbound.outbox import delivery_of
from shared.outbound.send import reply_message, send_message
from shared.outbound.suppression import suppressed
from shared.tenancy.store import create_identity, create_tenant
from shared.control import UNSTOPPABLE
from shared.events import NewMail, new_mail_channel
from shared.mail.waiting import WaitRequest, filter_for, wait_for_message
from shared.pubsub import Subscriptions
from tests.conftest import settings_for
from tests.shared.outbound.conftest import DkimKeys, Relay, make_dkim_keys, serving
from tests.shared.outbound.test_dsn import dsn

AUTHSERV = "mx.pylota.test"
DESK = "desk@acme.example"
LIMIT = 64 * 1024
WAIT = 15


@dataclass
class DnsTable:
    """A resolver answering from a table; names in ``broken`` fail as a DNS timeout would."""

    records: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    broken: set[str] = field(default_factory=set)

    def lookup(self, name: str, rdtype: str) -> list[str]:
        name = name.lower().rstrip(".")
        if name in self.broken:
            raise DnsTemporaryError(f"timeout for {name}")
        return list(self.records.get((name, rdtype), []))


@pytest.fixture(scope="module")
def sender_keys() -> DkimKeys:
    """The DKIM key of the remote domain that writes to us."""
    return make_dkim_keys("sender.example", "mail")


@pytest.fixture(scope="module")
def acme_keys() -> DkimKeys:
    """Our own DKIM key (acme.example, selector s1)."""
    return make_dkim_keys("acme.example", "s1")


@pytest.fixture
def dns(sender_keys: DkimKeys) -> DnsTable:
    return DnsTable(records={
        ("sender.example", "TXT"): ["v=spf1 ip4:127.0.0.1 -all"],
        ("_dmarc.sender.example", "TXT"): ["v=DMARC1; p=reject"],
        (sender_keys.record_name, "TXT"): [sender_keys.record],
        ("strict.example", "TXT"): ["v=spf1 ip4:192.0.2.1 -all"],
        ("_dmarc.strict.example", "TXT"): ["v=DMARC1; p=reject"],
    })


@dataclass
class Listener:
    host: str
    port: int
    pool: Database
    desk: Sender

    def send(self, raw: bytes, rcpts: list[str], *, mail_from: str = "jo@sender.example") -> dict:
        """Send with smtplib, as another mail server would (blocking: run in a thread)."""
        with smtplib.SMTP(self.host, self.port, local_hostname="mta.sender.example",
                          timeout=WAIT) as client:
            return client.sendmail(mail_from, rcpts, raw)


@pytest.fixture
async def listener(db_url: str, conn: asyncpg.Connection, redis: Redis,
                   dns: DnsTable) -> AsyncIterator[Listener]:
    tenant = await create_tenant(conn, "acme")
    desk = await create_identity(conn, tenant.id, DESK, display_name="Acme Desk")
    pool = await open_database(db_url, size=8, acquire_seconds=5)
    settings = settings_for(db_url, pm_smtp_max_message_bytes=LIMIT)
    try:
        async with smtp_listener(settings, pool, redis, authserv_id=AUTHSERV, resolver=dns,
                                 host="127.0.0.1", port=0) as (host, port):
            yield Listener(host, port, pool, Sender.of(desk))
    finally:
        await pool.close()


def message(*, sender: str = "Jo <jo@sender.example>", to: str = DESK, subject: str = "Hello",
            extra: str = "", body: str = "Hi there.") -> bytes:
    return (f"From: {sender}\r\nTo: {to}\r\nSubject: {subject}\r\n"
            f"Date: Mon, 30 Nov 2026 09:00:00 +0000\r\nMessage-ID: <m-{subject}@sender.example>\r\n"
            f"{extra}\r\n{body}\r\n").encode()


def results_of(raw: bytes) -> list[str]:
    return [str(v) for v in email.message_from_bytes(raw, policy=policy.default)
            .get_all("Authentication-Results", [])]


async def test_a_message_sent_with_smtplib_is_stored_and_mail_wait_returns_it(
        listener: Listener, redis: Redis, sender_keys: DkimKeys):
    signed = sender_keys.signer.sign(message())
    request = WaitRequest(identity_id=listener.desk.identity_id,
                          since=datetime.now(UTC) - timedelta(seconds=1), timeout_seconds=WAIT,
                          wanted=filter_for("any", from_=None, subject_contains=None,
                                            thread_id=None))
    feed = Subscriptions(redis, new_mail_channel("*"),
                         lambda raw: msgspec.json.decode(raw, type=NewMail))
    await feed.start()
    waiting = asyncio.create_task(wait_for_message(listener.pool, feed, request, UNSTOPPABLE,
                                                   heartbeat=5.0))
    try:
        async with asyncio.timeout(WAIT):
            refused = await asyncio.to_thread(listener.send, signed, [DESK.upper()])
            result = await waiting
    finally:
        await feed.stop()
    assert refused == {}
    assert result is not None and result.message is not None and not result.timed_out
    assert result.message.subject == "Hello" and result.message.direction == "inbound"
    # ingest believes the results the listener wrote: the message passed authentication
    assert result.message.trust is not None and result.message.trust.verdict == "pass"
    async with listener.pool.acquire() as conn:
        raw = await raw_of(conn, result.message.id)
    assert raw is not None and raw.startswith(b"Received: from mta.sender.example ([127.0.0.1])")
    [verdict] = results_of(raw)
    assert verdict.startswith(f"{AUTHSERV}; spf=pass smtp.mailfrom=")
    assert "dkim=pass header.d=sender.example" in verdict
    assert "dmarc=pass" in verdict


async def test_a_message_without_message_id_gets_one(listener: Listener,
                                                     conn: asyncpg.Connection):
    """Python's smtplib sends none, and a reply to such mail could not say what it answers
    (found by a new user)."""
    raw = (b"From: Jo <jo@sender.example>\r\nTo: desk@acme.example\r\nSubject: no id\r\n"
           b"\r\nHello.\r\n")
    async with asyncio.timeout(WAIT):
        await asyncio.to_thread(listener.send, raw, [DESK])
    message_id = await conn.fetchval("SELECT rfc_message_id FROM messages")
    assert message_id is not None and message_id.endswith(f"@{AUTHSERV}")
    # delivered again (a retry), it is the same message: the id is made from its bytes
    async with asyncio.timeout(WAIT):
        await asyncio.to_thread(listener.send, raw, [DESK])
    assert await conn.fetchval("SELECT count(*) FROM messages") == 1
    # one that has its own keeps it, whatever the field's case
    async with asyncio.timeout(WAIT):
        await asyncio.to_thread(listener.send, raw.replace(b"Subject: no id",
                                b"Subject: own id\r\nMESSAGE-ID: <own@sender.example>"), [DESK])
    assert await conn.fetchval("SELECT count(*) FROM messages WHERE rfc_message_id ="
                               " 'own@sender.example'") == 1


async def test_the_same_message_delivered_twice_is_stored_once(listener: Listener):
    raw = message(subject="Twice")
    async with asyncio.timeout(WAIT):
        await asyncio.to_thread(listener.send, raw, [DESK])
        await asyncio.to_thread(listener.send, raw, [DESK])
        await asyncio.to_thread(listener.send, message(subject="Twice", body="Other."), [DESK])
    async with listener.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM messages") == 2


async def test_unknown_recipients_are_refused_at_rcpt(listener: Listener):
    async with asyncio.timeout(WAIT):
        with pytest.raises(smtplib.SMTPRecipientsRefused) as caught:
            await asyncio.to_thread(listener.send, message(), ["nobody@acme.example"])
        assert caught.value.recipients["nobody@acme.example"][0] == 550
        # a known recipient beside an unknown one still gets the message
        refused = await asyncio.to_thread(listener.send, message(), ["nobody@acme.example", DESK])
    assert refused["nobody@acme.example"][0] == 550
    async with listener.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM messages") == 1


async def test_too_large_is_refused_with_552(listener: Listener):
    big = message(body=("x" * 70 + "\r\n") * (LIMIT // 72 + 10))
    async with asyncio.timeout(WAIT):
        # smtplib declares SIZE= at MAIL FROM, as servers do (RFC 1870)
        with pytest.raises(smtplib.SMTPSenderRefused) as caught:
            await asyncio.to_thread(listener.send, big, [DESK])
        assert caught.value.smtp_code == 552

        def undeclared() -> tuple[int, bytes]:
            with smtplib.SMTP(listener.host, listener.port, timeout=WAIT) as client:
                client.ehlo("mta.sender.example")
                client.mail("jo@sender.example")
                client.rcpt(DESK)
                return client.data(big)

        code, _ = await asyncio.to_thread(undeclared)
    assert code == 552
    async with listener.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM messages") == 0


@pytest.mark.parametrize("claimed", [
    AUTHSERV, AUTHSERV.upper(),
    # read as the trust code reads it, these name us too (found by an attack: they were kept)
    f"(relayed) {AUTHSERV}", f"{AUTHSERV}(x)", f"=?us-ascii?q?{AUTHSERV}?=",
    f"\t(a comment)\r\n {AUTHSERV}"])
async def test_forged_results_under_our_id_are_removed(listener: Listener, claimed: str):
    forged = message(extra=f"Authentication-Results: {claimed}; spf=pass; dkim=pass;"
                           " dmarc=pass header.from=strict.example\r\n"
                           "Authentication-Results: other.example; spf=pass\r\n",
                     sender="Boss <boss@strict.example>")
    async with asyncio.timeout(WAIT):
        await asyncio.to_thread(listener.send, forged, [DESK], mail_from="boss@strict.example")
    async with listener.pool.acquire() as conn:
        raw = await conn.fetchval("SELECT raw FROM raw_messages")
    verdicts = results_of(raw)
    assert len(verdicts) == 2 and verdicts[1] == "other.example; spf=pass"
    assert verdicts[0].startswith(f"{AUTHSERV}; spf=fail")
    assert "dkim=none" in verdicts[0] and "dmarc=fail" in verdicts[0]


def test_verdicts_without_records_and_with_dns_down(dns: DnsTable):
    raw = message(sender="a@plain.example")
    header = authentication_results(raw, authserv_id=AUTHSERV, ip="127.0.0.1",
                                    helo="mta.plain.example", mail_from="a@plain.example",
                                    resolver=dns)
    assert header == (f"Authentication-Results: {AUTHSERV}; spf=none smtp.mailfrom=a@plain.example;"
                      " dkim=none; dmarc=none")
    dns.broken |= {"sender.example", "_dmarc.sender.example"}
    header = authentication_results(message(), authserv_id=AUTHSERV, ip="127.0.0.1",
                                    helo="mta.sender.example", mail_from="jo@sender.example",
                                    resolver=dns)
    assert "spf=temperror" in header and header.endswith("dmarc=temperror")
    # the null sender of a bounce: SPF checks the HELO name (RFC 7208 section 2.3)
    dns.records[("mta.sender.example", "TXT")] = ["v=spf1 ip4:127.0.0.1 -all"]
    header = authentication_results(message(), authserv_id=AUTHSERV, ip="127.0.0.1",
                                    helo="mta.sender.example", mail_from="", resolver=dns)
    assert f"{AUTHSERV}; spf=pass smtp.helo=mta.sender.example" in header


async def test_malformed_mail_is_stored_with_what_could_be_checked(listener: Listener):
    async with asyncio.timeout(WAIT):
        await asyncio.to_thread(listener.send, b"Subject: no sender\r\n\r\nbody\r\n", [DESK])
        await asyncio.to_thread(listener.send, b"DKIM-Signature: v=1; junk\r\n\r\nbody\r\n",
                                [DESK])
    async with listener.pool.acquire() as conn:
        raws = [r["raw"] for r in await conn.fetch("SELECT raw FROM raw_messages ORDER BY message_id")]
    assert [results_of(raw)[0].split("; ", 1)[1] for raw in raws] == [
        "spf=pass smtp.mailfrom=sender.example; dkim=none; dmarc=permerror",
        "spf=pass smtp.mailfrom=sender.example; dkim=fail; dmarc=permerror"]


async def test_a_bounce_received_marks_the_recipient_and_suppresses_it(listener: Listener):
    sent = await send_message(listener.pool, None, listener.desk, msgspec.convert(
        {"idempotency_key": "k", "to": ["gone@client.example"], "subject": "Hi", "text": "Hi."},
        SendRequest))
    async with serving(Relay()) as relay:
        async with asyncio.timeout(WAIT):
            assert await deliver_due(listener.pool, relay.config()) == 1
    report = dsn().replace(b"<abc@acme.example>", f"<{sent.message.message_id}>".encode())
    async with asyncio.timeout(WAIT):
        # the same report from an ordinary sender (another recipient, say) changes nothing
        await asyncio.to_thread(listener.send, report, [DESK], mail_from="jo@client.example")
    async with listener.pool.acquire() as conn:
        assert (await delivery_of(conn, sent.message.id)).status == "sent"
        assert await suppressed(conn, listener.desk.tenant_id, ["gone@client.example"]) == set()
        await conn.execute("DELETE FROM messages WHERE direction = 'inbound'")
    async with asyncio.timeout(WAIT):
        await asyncio.to_thread(listener.send, report, [DESK], mail_from="")
    async with listener.pool.acquire() as conn:
        delivery = await delivery_of(conn, sent.message.id)
        assert delivery is not None and delivery.status == "failed"
        assert [r.status for r in delivery.recipients] == ["bounced"]
        assert await suppressed(conn, listener.desk.tenant_id, ["gone@client.example"]) == {
            "gone@client.example"}
        # the report itself is mail in the mailbox too
        assert await conn.fetchval("SELECT count(*) FROM messages WHERE direction = 'inbound'") == 1
        # MAIL FROM:<> (aiosmtpd says "<>"): SPF checked the HELO name (RFC 7208 section 2.3)
        raw = await conn.fetchval("SELECT raw FROM raw_messages r JOIN messages m"
                                  " ON m.id = r.message_id WHERE m.direction = 'inbound'")
        assert "smtp.helo=mta.sender.example" in results_of(raw)[0]


async def test_a_report_with_8bit_fields_is_stored_for_every_recipient(listener: Listener,
                                                                        conn: asyncpg.Connection):
    """compat32 reads a status field holding 8-bit bytes as a Header object: the report raised
    TypeError after the first recipient's copy, aiosmtpd answered a permanent 500 naming it, and
    the second recipient's copy was lost (found by an attack)."""
    await create_identity(conn, listener.desk.tenant_id, "sales@acme.example")
    report = (dsn().replace(b"Reporting-MTA: dns; relay.example", b"Reporting-MTA: dns; r\xe9lay")
              .replace(b"Final-Recipient: rfc822; Gone@", b"Final-Recipient: rfc822; G\xf6ne@")
              .replace(b"Status: 5.1.1", b"Status: 5.1.1 \xff"))
    async with asyncio.timeout(WAIT):
        assert await asyncio.to_thread(listener.send, report, [DESK, "sales@acme.example"],
                                       mail_from="") == {}
    assert await conn.fetchval("SELECT count(DISTINCT identity_id) FROM messages") == 2


async def test_a_failure_of_ours_is_temporary_and_names_nothing(listener: Listener, monkeypatch):
    async def broken(*args: object, **kwargs: object) -> int:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(front.smtp, "absorb_report", broken)
    async with asyncio.timeout(WAIT):
        with pytest.raises(smtplib.SMTPDataError) as refused:
            await asyncio.to_thread(listener.send, dsn(), [DESK], mail_from="")
    assert refused.value.smtp_code == 451
    assert b"secret" not in refused.value.smtp_error and b"RuntimeError" not in refused.value.smtp_error


async def test_a_reply_threads_by_references_in_both_mailboxes(
        listener: Listener, dns: DnsTable, acme_keys: DkimKeys):
    async with listener.pool.acquire() as conn:
        other = await create_tenant(conn, "client")
        jo = Sender.of(await create_identity(conn, other.id, "jo@client.example",
                                             display_name="Jo"))
    dns.records[(acme_keys.record_name, "TXT")] = [acme_keys.record]
    relay = RelayConfig(host=listener.host, port=listener.port, timeout=5.0)
    question = await send_message(listener.pool, None, jo, msgspec.convert(
        {"idempotency_key": "q", "to": [DESK], "subject": "Plan", "text": "Shall we meet?"},
        SendRequest))
    async with asyncio.timeout(WAIT):
        assert await deliver_due(listener.pool, relay) == 1
    async with listener.pool.acquire() as conn:
        received = await conn.fetchrow(
            "SELECT id, thread_id FROM messages WHERE identity_id = $1",
            listener.desk.identity_id)
    answer = await reply_message(listener.pool, None, listener.desk, ReplyRequest(
        message_id=received["id"], idempotency_key="a", text="Tuesday."))
    assert answer.message.thread_id == received["thread_id"]
    async with asyncio.timeout(WAIT):
        assert await deliver_due(listener.pool, relay, dkim=acme_keys.signer) == 1
    async with listener.pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, thread_id, direction, subject, \"references\""
                                " FROM messages WHERE identity_id = $1 ORDER BY id", jo.identity_id)
        reply_raw = await raw_of(conn, rows[-1]["id"])
    assert [(r["direction"], r["subject"]) for r in rows] == [("outbound", "Plan"),
                                                             ("inbound", "Re: Plan")]
    assert rows[0]["thread_id"] == rows[1]["thread_id"] == question.message.thread_id
    assert list(rows[1]["references"]) == [question.message.message_id]
    assert reply_raw is not None
    assert "dkim=pass header.d=acme.example" in results_of(reply_raw)[0]


@dataclass
class SlowDns:
    """``DnsTable`` with each lookup of a name under ``slow`` taking ``seconds``."""

    table: DnsTable
    slow: str
    seconds: float

    def lookup(self, name: str, rdtype: str) -> list[str]:
        if name.lower().rstrip(".").endswith(self.slow):
            time.sleep(self.seconds)
        return self.table.lookup(name, rdtype)


def test_a_senders_slow_dns_costs_at_most_the_checks_time(dns: DnsTable, monkeypatch):
    """An SPF record chaining slow includes held one message's checks for 40 s and more, and
    with them a thread of the listener's (found by an attack): its lookups stop at
    CHECK_SECONDS, and the verdict says temperror."""
    monkeypatch.setattr(smtp, "CHECK_SECONDS", 1.0)
    dns.records[("slow.example", "TXT")] = [
        "v=spf1 " + " ".join(f"include:i{n}.slow.example" for n in range(9)) + " -all"]
    for n in range(9):
        dns.records[(f"i{n}.slow.example", "TXT")] = ["v=spf1 ip4:192.0.2.9 -all"]
    started = time.monotonic()
    header = authentication_results(message(sender="a@slow.example"), authserv_id=AUTHSERV,
                                    ip="127.0.0.1", helo="mta.slow.example",
                                    mail_from="a@slow.example",
                                    resolver=SlowDns(dns, "slow.example", 0.4))
    assert time.monotonic() - started < 1.0 + 2 * 0.4 + 1.0  # the budget, a lookup, a margin
    assert "temperror" in header


async def test_one_client_gets_at_most_its_share_of_the_checks(db_url, conn, redis, dns,
                                                              monkeypatch):
    """Past MAX_CHECKS_PER_CLIENT messages of one client in their checks, its next one is
    answered 451, to come back later; the others are stored."""
    monkeypatch.setattr(smtp, "MAX_CHECKS_PER_CLIENT", 2)
    tenant = await create_tenant(conn, "acme")
    await create_identity(conn, tenant.id, DESK)
    pool = await open_database(db_url, size=8, acquire_seconds=5)
    slow = SlowDns(dns, "sender.example", 1.5)  # long enough for all three to be in checks
    try:
        async with smtp_listener(settings_for(db_url), pool, redis, authserv_id=AUTHSERV,
                                 resolver=slow, host="127.0.0.1", port=0) as (host, port):
            listener = Listener(host, port, pool, None)  # type: ignore[arg-type]

            def send(n: int) -> int:
                try:
                    listener.send(message(subject=f"m{n}"), [DESK])
                    return 250
                except smtplib.SMTPDataError as exc:
                    return exc.smtp_code

            codes = await asyncio.gather(*(asyncio.to_thread(send, n) for n in range(3)))
        assert sorted(codes) == [250, 250, 451]
        assert await conn.fetchval("SELECT count(*) FROM messages") == 2
    finally:
        await pool.close()


async def test_a_bare_cr_in_the_header_is_refused(listener: Listener):
    """dkimpy reads a bare CR as part of a line, the email package as a line break: fields put
    behind one were shown, unsigned, beside the signed ones under a DKIM pass (found by an
    attack). Such a message is refused; the body may hold one."""
    smuggled = b"X-Pad: x\rFrom: Bank <no-reply@bank.example>\rSubject: code 111111\r\r\n" + message()
    async with asyncio.timeout(WAIT):
        with pytest.raises(smtplib.SMTPDataError) as refused:
            await asyncio.to_thread(listener.send, smuggled, [DESK])
    assert refused.value.smtp_code == 550
    body = message(body="a bare\rCR in the body")
    async with asyncio.timeout(WAIT):
        await asyncio.to_thread(listener.send, body, [DESK])
    async with listener.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM messages") == 1


async def test_a_helo_name_with_a_control_character_is_refused(listener: Listener):
    """The EHLO name is written into the stored mail's Received field: "x\\rFrom: CEO <ceo@..>"
    made the stored sender the forged one (found by an attack). It is refused with 501, and
    the session goes on with a proper name."""
    def session() -> tuple[tuple[int, bytes], tuple[int, bytes], dict]:
        with smtplib.SMTP(listener.host, listener.port, timeout=WAIT) as client:
            # smtplib itself refuses to send a CR in a command: write the line as it is
            client.send("EHLO x\rFrom: CEO <ceo@bank.example>\r\n")
            forged = client.getreply()
            helo = client.docmd("HELO", "a\x00b")
            client.ehlo("mta.sender.example")
            return forged, helo, client.sendmail("jo@sender.example", [DESK], message())

    async with asyncio.timeout(WAIT):
        forged, helo, refused = await asyncio.to_thread(session)
    assert forged[0] == 501 and helo[0] == 501 and refused == {}
    async with listener.pool.acquire() as conn:
        assert await conn.fetchval("SELECT from_address FROM messages") == "jo@sender.example"


async def test_a_line_longer_than_rfc_5321_allows_is_stored(listener: Listener):
    """Mail with lines past 1,000 octets exists (7 of the kit's single messages); aiosmtpd
    answered 500 and the mail bounced (found by an attack). It is stored, whole."""
    long = message(subject="long", body="A" * 5000)
    async with asyncio.timeout(WAIT):
        assert await asyncio.to_thread(listener.send, long, [DESK]) == {}
    async with listener.pool.acquire() as conn:
        text = await conn.fetchval("SELECT text FROM messages")
    assert "A" * 5000 in text


async def test_large_messages_are_handled_one_at_a_time(listener: Listener, monkeypatch):
    """A message takes about 20 times its size in memory while it is checked and stored; three
    large ones at once would take the listener past 1 GB (found by an attack). Large ones take
    turns; every one is stored."""
    monkeypatch.setattr(front.smtp, "LARGE_MESSAGE_BYTES", 4096)
    running, most = 0, 0
    lock = threading.Lock()

    def counted(raw: bytes, **options: object) -> str:
        nonlocal running, most
        with lock:
            running += 1 if len(raw) > 4096 else 0
            most = max(most, running)
        try:
            time.sleep(0.3)  # long enough for the others to arrive
            return authentication_results(raw, **options)
        finally:
            with lock:
                running -= 1 if len(raw) > 4096 else 0

    monkeypatch.setattr(front.smtp, "authentication_results", counted)
    large = [message(subject=f"large {n}", body="x" * 8000) for n in range(3)]
    async with asyncio.timeout(WAIT * 2):
        sent = await asyncio.gather(*(asyncio.to_thread(listener.send, m, [DESK])
                                      for m in [*large, message(subject="small")]))
    assert sent == [{}] * 4
    assert most == 1
    async with listener.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM messages") == 4


def test_a_results_field_with_bytes_outside_ascii_is_removed():
    """A leading 0xA0 made the listener read "\\ufffdmx.pylota.test" and keep the field, while
    ingest read a no-break space and believed it (found by an attack)."""
    raw = (b"Authentication-Results: \xa0" + AUTHSERV.encode() + b"; dkim=pass header.d=b.example"
           b"\r\nAuthentication-Results: other.example; spf=pass\r\nFrom: a@b.example\r\n\r\nx")
    assert results_of(smtp.without_our_results(raw, AUTHSERV)) == ["other.example; spf=pass"]


async def test_a_client_naming_too_many_unknown_recipients_is_told_to_come_back_later(
        listener: Listener):
    """A directory harvest: past the minute's unknown recipients, every RCPT of that client,
    known addresses included, gets 450, so probing tells nothing more."""
    def probe() -> list[int]:
        with smtplib.SMTP(listener.host, listener.port, local_hostname="mta.sender.example",
                          timeout=WAIT) as client:
            client.ehlo("mta.sender.example")
            codes = []
            for n in range(MAX_UNKNOWN_RECIPIENTS_PER_MINUTE + 2):
                client.mail("jo@sender.example")
                codes.append(client.rcpt(f"guess{n}@acme.example")[0])
                client.rset()
            client.mail("jo@sender.example")
            codes.append(client.rcpt(DESK)[0])
            return codes

    async with asyncio.timeout(WAIT):
        codes = await asyncio.to_thread(probe)
    assert codes[:MAX_UNKNOWN_RECIPIENTS_PER_MINUTE] == [550] * MAX_UNKNOWN_RECIPIENTS_PER_MINUTE
    assert codes[MAX_UNKNOWN_RECIPIENTS_PER_MINUTE:] == [450, 450, 450]
