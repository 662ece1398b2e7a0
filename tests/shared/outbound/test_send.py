"""mail_send, mail_reply and mail_forward as domain functions (shared.outbound.send), on real
PostgreSQL: what is stored, how it threads, what is queued, and what is refused."""

from __future__ import annotations

import asyncio
import base64
import email
import time
from datetime import UTC, datetime
from email import policy

import asyncpg
import msgspec
import pytest

from shared.errors import ErrorCode, PylotaError
from shared.ingest.pipeline import ingest_raw
from shared.mail.store import raw_of
from shared.outbound.model import (ForwardRequest, Recipient, ReplyRequest, Sender,
                                   SendRequest)
from shared.outbound.replies import REPLY_TO_OTHER_DOMAIN
from shared.outbound.send import forward_message, reply_message, send_message
from shared.outbound.suppression import HARD_BOUNCE, suppress
from shared.search.keyword import Filters, Scope, where_sql
from shared.search.query import parse
from shared.tenancy.store import create_identity
from tests.shared.outbound.conftest import OWN

PDF = b"%PDF-1.4 quarterly figures"


def request(**overrides: object) -> SendRequest:
    values: dict[str, object] = {"idempotency_key": "k-1", "to": ["Jo Lee <jo@example.com>"],
                                 "subject": "Quarterly figures", "text": "Figures attached."}
    values.update(overrides)
    return msgspec.convert(values, SendRequest)


def inbound(mid: str, *, subject: str = "Plan", extra: str = "", body: str = "Shall we meet?",
            to: str = OWN, attachment: bool = False) -> bytes:
    head = (f"From: Jo Lee <jo@example.com>\r\nTo: {to}\r\nSubject: {subject}\r\n"
            f"Date: Mon, 02 Nov 2026 10:00:00 +0000\r\nMessage-ID: <{mid}>\r\n{extra}")
    if not attachment:
        return f"{head}\r\n{body}\r\n".encode()
    return (f"{head}MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=zz\r\n\r\n"
            f"--zz\r\nContent-Type: text/plain\r\n\r\n{body}\r\n--zz\r\n"
            "Content-Type: application/pdf\r\nContent-Disposition: attachment; filename=q3.pdf\r\n"
            "Content-Transfer-Encoding: base64\r\n\r\n"
            f"{base64.b64encode(PDF).decode()}\r\n--zz--\r\n").encode()


async def found(conn: asyncpg.Connection, sender: Sender, q: str) -> set[str]:
    scope = Scope(identity_ids=[sender.identity_id], as_of=datetime.now(UTC), time_zone="UTC")
    where, params, _ = where_sql(scope, parse(q).root, Filters())
    return {r["id"] for r in await conn.fetch(f"SELECT m.id FROM messages m WHERE {where}",
                                              *params)}


async def test_a_send_is_stored_queued_searchable_and_labelled(pool, conn, sender, redis):
    req = request(cc=[{"address": "bo@example.net", "name": "Bo"}], bcc=["audit@example.org"],
                  html="<p>Figures attached.</p>", labels=["reports", "q3"],
                  metadata={"crm_id": "42"}, headers={"X-Campaign": "q3"},
                  attachments=[{"filename": "q3.pdf", "content_type": "application/pdf",
                                "content_base64": base64.b64encode(PDF).decode()}])
    sent = await send_message(pool, redis, sender, req)
    msg = sent.message
    assert not sent.deduplicated
    assert (msg.direction, msg.status, msg.read) == ("outbound", "queued", True)
    assert msg.from_ is not None and msg.from_.address == OWN and msg.from_.name == "Acme Desk"
    assert [a.address for a in msg.to] == ["jo@example.com"]
    assert [a.address for a in msg.cc] == ["bo@example.net"]
    assert msg.labels == ["reports", "q3"] and sent.metadata == {"crm_id": "42"}
    # its text is queued for extraction as the message is stored, so the result says so, as
    # mail_get_message would (it said null; found by a new user)
    assert [(a.filename, a.text_status) for a in msg.attachments] == [("q3.pdf", "pending")]
    assert sent.kind == "transactional" and sent.flags == []
    assert sent.delivery.status == "queued" and sent.delivery.attempts == 0
    assert [(r.field, r.address, r.status) for r in sent.delivery.recipients] == [
        ("to", "jo@example.com", "pending"), ("cc", "bo@example.net", "pending"),
        ("bcc", "audit@example.org", "pending")]
    raw = await raw_of(conn, msg.id)
    assert raw is not None and b"audit@example.org" not in raw
    headers = email.message_from_bytes(raw, policy=policy.default)
    assert headers["X-Campaign"] == "q3" and headers["Message-ID"] == f"<{msg.message_id}>"
    assert msg.message_id is not None and msg.message_id.endswith("@acme.example")
    assert await found(conn, sender, "in:outbound figures") == {msg.id}
    assert await found(conn, sender, "in:inbound") == set()


async def test_the_same_key_replays_and_other_arguments_conflict(pool, conn, sender):
    first = await send_message(pool, None, sender, request())
    again = await send_message(pool, None, sender, request(identity=OWN))
    assert again.deduplicated and again.message.id == first.message.id
    with pytest.raises(PylotaError) as caught:
        await send_message(pool, None, sender, request(text="Other figures."))
    assert caught.value.code is ErrorCode.IDEMPOTENCY_CONFLICT
    assert caught.value.details == {"original_message_id": first.message.id}
    other = await send_message(pool, None, sender, request(idempotency_key="k-2"))
    assert other.message.id != first.message.id
    assert await conn.fetchval("SELECT count(*) FROM messages") == 2


async def test_keys_belong_to_one_identity(pool, conn, sender):
    second = Sender.of(await create_identity(conn, sender.tenant_id, "ops@acme.example"))
    one = await send_message(pool, None, sender, request())
    two = await send_message(pool, None, second, request())
    assert not two.deduplicated and two.message.id != one.message.id


async def test_a_spent_allowance_stores_nothing_and_a_retry_after_top_up_sends(pool, conn, sender):
    calls: list[int] = []

    async def spent(conn: asyncpg.Connection, who: Sender, count: int, size: int) -> None:
        assert size > 300  # the composed message: its header fields and text
        calls.append(count)
        raise PylotaError(ErrorCode.BILLING_LIMIT, "The plan's sends are used up.")

    with pytest.raises(PylotaError) as caught:
        await send_message(pool, None, sender, request(cc=["bo@example.net"]),
                           check_allowance=spent)
    assert caught.value.code is ErrorCode.BILLING_LIMIT and calls == [2]
    for table in ("messages", "send_requests", "outbound_messages", "threads"):
        assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 0

    async def topped_up(conn: asyncpg.Connection, who: Sender, count: int, size: int) -> None:
        calls.append(count)

    sent = await send_message(pool, None, sender, request(cc=["bo@example.net"]),
                              check_allowance=topped_up)
    assert not sent.deduplicated and calls == [2, 2]
    replay = await send_message(pool, None, sender, request(cc=["bo@example.net"]),
                                check_allowance=spent)
    assert replay.deduplicated and calls == [2, 2]  # a replay is never charged


async def test_refusals(pool, conn, sender):
    cases = [
        (request(text=None), ErrorCode.INVALID_REQUEST, "text"),
        (request(text="", html=""), ErrorCode.INVALID_REQUEST, "text"),
        (request(to=["not an address"]), ErrorCode.INVALID_REQUEST, "to[0]"),
        (request(bcc=["ok@example.com", "x@localhost"]), ErrorCode.INVALID_REQUEST, "bcc[1]"),
        (request(subject="Hi\r\nBcc: evil@example.net"), ErrorCode.INVALID_REQUEST, "subject"),
        (request(headers={"Reply-To": "evil@example.net"}), ErrorCode.HEADER_NOT_ALLOWED,
         "headers.Reply-To"),
        (request(from_address="ceo@acme.example"), ErrorCode.INVALID_REQUEST, "from_address"),
        (request(labels=["Has Space"]), ErrorCode.INVALID_REQUEST, "labels[0]"),
        (request(labels=["ok", "ok\n"]), ErrorCode.INVALID_REQUEST, "labels[1]"),
        # 60,000 metadata keys were stored, 100,000 headers took 10 s of CPU (an attack)
        (request(metadata={f"k{n}": "v" for n in range(51)}), ErrorCode.INVALID_REQUEST,
         "metadata"),
        (request(metadata={"k" * 65: "v"}), ErrorCode.INVALID_REQUEST, "metadata." + "k" * 64),
        (request(headers={f"X-H{n}": "v" for n in range(51)}), ErrorCode.INVALID_REQUEST,
         "headers"),
        (request(headers={"X-Long": "v" * 999}), ErrorCode.INVALID_REQUEST, "headers.X-Long"),
        (request(headers={"X-Foo\n": "Bcc: injected@evil.example"}),
         ErrorCode.HEADER_NOT_ALLOWED, "headers.X-Foo\n"),
        (request(thread_id="thr_01J9Z3AAAAAAAAAAAAAAAAAAAA"), ErrorCode.THREAD_NOT_FOUND, None),
    ]
    for i, (req, code, path) in enumerate(cases):
        with pytest.raises(PylotaError) as caught:
            await send_message(pool, None, sender, msgspec.structs.replace(
                req, idempotency_key=f"refused-{i}"))
        assert caught.value.code is code, req
        assert caught.value.details.get("path") == path
    await conn.execute("UPDATE tenants SET max_recipients = 2")
    with pytest.raises(PylotaError) as caught:
        await send_message(pool, None, sender, request(cc=["a@example.com"],
                                                       bcc=["b@example.com"]))
    assert caught.value.code is ErrorCode.TOO_MANY_RECIPIENTS
    assert await conn.fetchval("SELECT count(*) FROM messages") == 0
    assert await conn.fetchval("SELECT count(*) FROM send_requests") == 0
    # the most metadata and headers allowed pass
    sent = await send_message(pool, None, sender, request(
        idempotency_key="largest", metadata={f"k{n:0>63}": "v" * 512 for n in range(50)},
        headers={f"X-H{n}": "v" * 998 for n in range(50)}))
    assert len(sent.metadata) == 50


async def test_a_suppressed_recipient_is_never_offered(pool, conn, sender):
    await suppress(conn, sender.tenant_id, "Gone@Example.com", reason=HARD_BOUNCE, status="5.1.1",
                   diagnostic=None, message_id=None)
    sent = await send_message(pool, None, sender, request(to=["gone@example.com", "jo@example.com"]))
    assert [(r.address, r.status) for r in sent.delivery.recipients] == [
        ("gone@example.com", "suppressed"), ("jo@example.com", "pending")]
    alone = await send_message(pool, None, sender, request(idempotency_key="k-2",
                                                           to=["gone@example.com"]))
    assert alone.delivery.status == "failed" and alone.message.status == "failed"


async def test_a_send_into_a_thread_joins_it(pool, conn, sender):
    outcome, _ = await ingest_raw(conn, None, sender.identity_id, inbound("p1@example.com"))
    sent = await send_message(pool, None, sender, request(thread_id=outcome.thread_id,
                                                          subject="Following up"))
    assert sent.message.thread_id == outcome.thread_id
    assert sent.message.in_reply_to == ["p1@example.com"]
    assert sent.message.references == ["p1@example.com"]


async def test_a_reply_threads_by_references_and_quotes(pool, conn, sender):
    first, _ = await ingest_raw(conn, None, sender.identity_id, inbound("p1@example.com"))
    second, _ = await ingest_raw(conn, None, sender.identity_id, inbound(
        "p2@example.com", subject="Re: Plan", extra="In-Reply-To: <p1@example.com>\r\n"
        "References: <p1@example.com>\r\nReply-To: Jo's desk <desk@jo.example>\r\n"
        "Cc: bo@example.net, Desk <DESK@acme.example>\r\n"))
    reply = await reply_message(pool, None, sender, ReplyRequest(
        message_id=second.message_id, idempotency_key="r-1", text="Tuesday works.",
        reply_all=True))
    msg = reply.message
    assert msg.thread_id == first.thread_id == second.thread_id
    assert msg.subject == "Re: Plan"
    assert msg.in_reply_to == ["p2@example.com"]
    assert msg.references == ["p1@example.com", "p2@example.com"]
    assert [a.address for a in msg.to] == ["desk@jo.example"]
    assert [a.address for a in msg.cc] == ["bo@example.net"]
    assert reply.flags == [REPLY_TO_OTHER_DOMAIN]
    assert msg.new_text.strip() == "Tuesday works."
    raw = await raw_of(conn, msg.id)
    assert raw is not None and b"> Shall we meet?" in raw
    assert await conn.fetchval("SELECT message_count FROM threads WHERE id = $1",
                               first.thread_id) == 3
    replay = await reply_message(pool, None, sender, ReplyRequest(
        message_id=second.message_id, idempotency_key="r-1", text="Tuesday works.",
        reply_all=True))
    assert replay.deduplicated and replay.flags == [REPLY_TO_OTHER_DOMAIN]


async def test_no_auto_reply_to_automated_mail(pool, conn, sender):
    auto, _ = await ingest_raw(conn, None, sender.identity_id, inbound(
        "ooo@example.com", extra="Auto-Submitted: auto-replied\r\n"))
    with pytest.raises(PylotaError) as caught:
        await reply_message(pool, None, sender, ReplyRequest(
            message_id=auto.message_id, idempotency_key="a-1", text="I am away.",
            kind="auto_reply"))
    assert caught.value.code is ErrorCode.INVALID_REQUEST and caught.value.details["path"] == "kind"
    person, _ = await ingest_raw(conn, None, sender.identity_id, inbound("hi@example.com"))
    away = await reply_message(pool, None, sender, ReplyRequest(
        message_id=person.message_id, idempotency_key="a-2", text="I am away.",
        kind="auto_reply"))
    raw = await raw_of(conn, away.message.id)
    assert raw is not None and b"Auto-Submitted: auto-replied" in raw


async def test_another_identitys_message_is_not_found(pool, conn, sender):
    other = await create_identity(conn, sender.tenant_id, "ops@acme.example")
    theirs, _ = await ingest_raw(conn, None, other.id, inbound("t@example.com",
                                                               to="ops@acme.example"))
    for call in (reply_message(pool, None, sender, ReplyRequest(
                     message_id=theirs.message_id, idempotency_key="x", text="hi")),
                 forward_message(pool, None, sender, ForwardRequest(
                     message_id=theirs.message_id, idempotency_key="y",
                     to=["bo@example.net"]))):
        with pytest.raises(PylotaError) as caught:
            await call
        assert caught.value.code is ErrorCode.MESSAGE_NOT_FOUND


async def test_a_forward_keeps_the_original_and_its_attachments(pool, conn, sender):
    original, _ = await ingest_raw(conn, None, sender.identity_id, inbound(
        "f1@example.com", subject="Q3 report", body="Report attached.", attachment=True))
    fwd = await forward_message(pool, None, sender, ForwardRequest(
        message_id=original.message_id, idempotency_key="f-1", to=["Bo <bo@example.net>"],
        text="FYI, see below."))
    msg = fwd.message
    assert msg.subject == "Fwd: Q3 report" and msg.thread_id == original.thread_id
    assert msg.references == ["f1@example.com"] and msg.in_reply_to == ["f1@example.com"]
    assert [a.address for a in msg.to] == ["bo@example.net"]
    assert [(a.filename, a.size) for a in msg.attachments] == [("q3.pdf", len(PDF))]
    stored = await conn.fetchval("SELECT content FROM attachments WHERE message_id = $1", msg.id)
    assert stored == PDF
    raw = await raw_of(conn, msg.id)
    assert raw is not None and b"Forwarded message" in raw and b"Report attached." in raw
    bare = await forward_message(pool, None, sender, ForwardRequest(
        message_id=original.message_id, idempotency_key="f-2", to=["bo@example.net"],
        include_attachments=False))
    assert bare.message.attachments == [] and bare.message.subject == "Fwd: Q3 report"


async def test_a_forward_sends_the_whole_text_of_a_long_original(pool, conn, sender):
    """Records read a text up to READ_TEXT_CHARS; a forward sends its original's whole text
    (it was cut there without a word: found by a second attack)."""
    from shared.mail.store import READ_TEXT_CHARS

    body = "Opening line.\r\n" + "long report line\r\n" * (READ_TEXT_CHARS // 16) \
        + "The very last line.\r\n"
    original, _ = await ingest_raw(conn, None, sender.identity_id, inbound(
        "long@example.com", subject="Long report", body=body))
    fwd = await forward_message(pool, None, sender, ForwardRequest(
        message_id=original.message_id, idempotency_key="f-long", to=["bo@example.net"]))
    text = await conn.fetchval("SELECT text FROM messages WHERE id = $1", fwd.message.id)
    assert len(text) > READ_TEXT_CHARS and text.rstrip().endswith("The very last line.")


async def test_forwarding_a_large_message_leaves_the_event_loop_free(pool, conn, sender):
    """Parsing a 20 MB original for its attachments and rendering the forward ran on the event
    loop: the front answered no other tenant for 2.6 s of a 6 s forward (found by an attack).
    A ticker on the same loop measures the longest time it waited; threads still take the GIL
    for single C calls over the whole text (a tenth of a second or two on this machine)."""
    original, _ = await ingest_raw(conn, None, sender.identity_id, inbound(
        "big@example.com", body="x" * 20_000_000, attachment=True))
    gaps: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    fwd = await forward_message(pool, None, sender, ForwardRequest(
        message_id=original.message_id, idempotency_key="f-big", to=["bo@example.net"]))
    took = time.monotonic() - started
    done.set()
    await ticker
    assert [(a.filename, a.size) for a in fwd.message.attachments] == [("q3.pdf", len(PDF))]
    assert max(gaps) < took / 5, (max(gaps), took)


async def test_recipient_objects_and_strings_mix(pool, sender):
    sent = await send_message(pool, None, sender, request(
        to=[Recipient(address="ann@bücher.de", name="Ann"), "jo@example.com"]))
    assert [(a.address, a.name) for a in sent.message.to] == [
        ("ann@xn--bcher-kva.de", "Ann"), ("jo@example.com", None)]


#: Encoded words (RFC 2047) that decode to a line break and a header field of the attacker's.
INJECTED = "=?utf-8?q?=0D=0AX-Injected:_yes?="
DOUBLE = "=?utf-8?b?" + base64.b64encode(INJECTED.encode()).decode() + "?="


def _field_names(raw: bytes) -> list[str]:
    msg = email.message_from_bytes(raw, policy=policy.default)
    return [name.lower() for part in msg.walk() for name in part.keys()]


@pytest.mark.parametrize("arguments", [
    {"subject": f"Invoice {INJECTED}"},
    {"subject": "Invoice \u2028Bcc: x@example.com"},
    # charsets the decoder does not know are decoded by the email package all the same
    {"subject": "Invoice =?x-unknown?q?=0D=0AX-Injected:_yes?="},
    {"subject": "Invoice =?utf-8*en?q?=0D=0AX-Injected:_yes?="},
    {"to": [{"address": "jo@example.com", "name": f"Jo {INJECTED}"}]},
    {"headers": {"X-Ref": f"A {INJECTED}"}},
    {"headers": {"Organization": "Acme\u2029Inc"}},
    {"attachments": [{"filename": f"a.pdf {INJECTED}", "content_type": "application/pdf",
                      "content_base64": base64.b64encode(PDF).decode()}]},
], ids=["subject", "subject-u2028", "subject-unknown-charset", "subject-language", "name",
        "x-header", "header-u2029", "filename"])
async def test_a_line_break_hidden_in_a_send_is_refused_naming_the_field(pool, conn, sender,
                                                                        arguments):
    """Python 3.11 before 3.11.10 writes a decoded encoded word's line break into the header
    (CVE-2024-6923): a subject could add fields to the mail we send (found by an attack). A
    caller's value is refused, never stored; U+2028 and U+2029 too (they were a 500)."""
    with pytest.raises(PylotaError) as caught:
        await send_message(pool, None, sender, request(idempotency_key="inj", **arguments))
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.details["path"].split(".")[0].split("[")[0] in (
        "subject", "to", "headers", "attachments")
    assert await conn.fetchval("SELECT count(*) FROM messages WHERE direction = 'outbound'") == 0


async def test_replying_to_and_forwarding_a_strangers_hostile_mail_injects_nothing(
        pool, conn, sender):
    """A stranger's subject, display name and attachment filename that decode, once stored, to
    encoded words hiding a line break (or hold one outright) reach our reply and forward as
    inert text: no field is added, the call does not fail (it was a 500), and the message
    still threads."""
    hostile = (f"From: =?utf-8?b?{base64.b64encode(f'Jo {INJECTED}'.encode()).decode()}?= "
               f"<jo@example.com>\r\nTo: {OWN}\r\nSubject: Invoice {DOUBLE}\r\n"
               "Date: Mon, 02 Nov 2026 10:00:00 +0000\r\nMessage-ID: <evil@example.com>\r\n"
               "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=zz\r\n\r\n"
               "--zz\r\nContent-Type: text/plain\r\n\r\nPay now.\r\n--zz\r\n"
               "Content-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\n"
               "Content-Disposition: attachment; filename*=utf-8''inv.pdf%0D%0AX-Injected: yes"
               f"\r\n\r\n{base64.b64encode(PDF).decode()}\r\n--zz--\r\n").encode()
    parent, _ = await ingest_raw(conn, None, sender.identity_id, hostile)
    broken = (b"From: Jo <jo@example.com>\r\nTo: " + OWN.encode() + b"\r\nSubject: =?utf-8?b?"
              + base64.b64encode(b"Hello\r\nBcc: x@example.com") + b"?=\r\n"
              b"Date: Mon, 02 Nov 2026 11:00:00 +0000\r\nMessage-ID: <crlf@example.com>\r\n\r\n"
              b"Hi.\r\n")
    second, _ = await ingest_raw(conn, None, sender.identity_id, broken)
    unknown = "Invoice =?x-unknown?q?4471=0D=0AX-Injected:_yes?="
    third, _ = await ingest_raw(conn, None, sender.identity_id, (
        f"From: Jo <jo@example.com>\r\nTo: {OWN}\r\nSubject: =?utf-8?b?"
        f"{base64.b64encode(unknown.encode()).decode()}?=\r\n"
        "Date: Mon, 02 Nov 2026 12:00:00 +0000\r\nMessage-ID: <unknown@example.com>\r\n\r\n"
        "Hi.\r\n").encode())
    sent = [await reply_message(pool, None, sender, ReplyRequest(
                message_id=parent.message_id, idempotency_key="h-1", text="Received.")),
            await forward_message(pool, None, sender, ForwardRequest(
                message_id=parent.message_id, idempotency_key="h-2", to=["bo@example.net"])),
            await reply_message(pool, None, sender, ReplyRequest(
                message_id=second.message_id, idempotency_key="h-3", text="Hi.")),
            await forward_message(pool, None, sender, ForwardRequest(
                message_id=second.message_id, idempotency_key="h-4", to=["bo@example.net"])),
            await reply_message(pool, None, sender, ReplyRequest(
                message_id=third.message_id, idempotency_key="h-5", text="Hi."))]
    for done in sent:
        raw = await raw_of(conn, done.message.id)
        assert raw is not None
        names = _field_names(raw)
        assert "x-injected" not in names and "bcc" not in names, raw[:600]
        head = raw.split(b"\r\n\r\n", 1)[0]  # the forward's body quotes the original's fields
        assert b"\r\nX-Injected" not in head and b"\r\nBcc" not in head
    assert sent[0].message.thread_id == parent.thread_id
    assert sent[0].message.subject.startswith("Re: Invoice")
