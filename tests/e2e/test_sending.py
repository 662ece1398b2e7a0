"""Sending and receiving for real (issue 12), end to end on real sockets: the official MCP Python
SDK against a real uvicorn front, real arq workers (one killed with SIGKILL as an operator's
machine would lose it), real PostgreSQL and Redis, and SMTP on loopback — an aiosmtpd relay
stand-in, and our own listener (``front.smtp``) as a second mailbox. Mail from the kit's corpus
is only ever relayed to 127.0.0.1.

The batch workers' drain tick is set to a minute here unless a test needs retries, so a prompt
delivery proves that a send wakes them."""

from __future__ import annotations

import asyncio
import contextlib
import email
import os
import signal
import smtplib
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from email import policy
from pathlib import Path
from typing import Any

import dkim
import httpx
import msgspec
import pytest
from aiosmtpd.smtp import SMTP, Envelope, Session
from jsonschema import Draft202012Validator
from redis.asyncio import Redis

from front.smtp import smtp_listener
from shared.auth.keys import create_key
from shared.auth.permissions import Permission
from shared.config import Settings
from shared.events import workers_key
from shared.ingest.pipeline import ingest_raw
from shared.mail.parse import parse_message
from shared.mail.sources import iter_sources
from shared.plans import set_allowance, top_up
from shared.tools.registry import TOOLS
from tests.conftest import (NAMESPACE, REDIS_URL, ROOT, database, free_port, running_front,
                            running_worker, settings_for)
from tests.e2e.harness import sdk_client
from tests.e2e.transport_kit import keyed_identity
from tests.front.test_smtp import DnsTable
from tests.shared.outbound.conftest import DkimKeys, Relay, make_dkim_keys, serving

WAIT = 30  # seconds any one wait of these tests may take at most
DESK = "desk@acme.example"


@dataclass
class Sink(Relay):
    """The relay stand-in, telling the test when a transaction was accepted."""

    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        reply = await super().handle_DATA(server, session, envelope)
        self.arrived.set()
        return reply

    async def arrivals(self, count: int) -> None:
        """Wait until ``count`` transactions were accepted."""
        async with asyncio.timeout(WAIT):
            while len(self.received) < count:
                self.arrived.clear()
                await self.arrived.wait()


@pytest.fixture(scope="module")
def keys() -> DkimKeys:
    """Our DKIM key: acme.example, selector s1."""
    return make_dkim_keys("acme.example", "s1")


@pytest.fixture
def key_file(tmp_path: Path, keys: DkimKeys) -> str:
    path = tmp_path / "dkim.pem"
    path.write_bytes(keys.signer.private_key)
    return str(path)


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    async with serving(Sink()) as running:
        yield running  # type: ignore[misc]


def stack_settings(db_url: str, relay_port: int, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "pm_smtp_relay_host": "127.0.0.1", "pm_smtp_relay_port": relay_port,
        "pm_smtp_relay_timeout": 5.0, "pm_smtp_retry_seconds": 0.0, "pm_smtp_max_attempts": 3,
        "pm_embedder": "hash", "pm_embed_poll_seconds": 60, "pm_stream_heartbeat_seconds": 0.3}
    values.update(overrides)
    assert values["pm_smtp_relay_host"] == "127.0.0.1"  # nothing leaves this machine
    return settings_for(db_url, **values)


@contextlib.asynccontextmanager
async def stack(settings: Settings, *, batch: bool = True) -> AsyncIterator[str]:
    """A front, an interactive worker and (``batch``) a batch worker; yields the /mcp URL."""
    async with running_front(settings) as url, running_worker(settings):
        if batch:
            async with running_worker(settings, batch=True):
                yield url
        else:
            yield url


OUTPUT = {t.name: Draft202012Validator(t.output_schema) for t in TOOLS if t.output_schema}


def body(result: Any, tool: str | None = None) -> dict[str, Any]:
    """A successful result's structuredContent, validated against ``tool``'s outputSchema."""
    assert not result.is_error, result.content
    if tool is not None:
        OUTPUT[tool].validate(result.structured_content)
    return result.structured_content


def error_of(result: Any) -> dict[str, Any]:
    assert result.is_error
    return msgspec.json.decode(result.content[0].text)["error"]


async def delivery_until(client: Any, message_id: str, *states: str) -> tuple[dict, list[str]]:
    """Read the message through mail_get_message until its delivery reaches one of ``states``;
    returns it and every status seen on the way."""
    seen: list[str] = []
    async with asyncio.timeout(WAIT):
        while True:
            found = body(await client.call_tool("mail_get_message", {"message_id": message_id}),
                         "mail_get_message")
            status = found["delivery"]["status"]
            if not seen or seen[-1] != status:
                seen.append(status)
            if status in states:
                return found, seen
            await asyncio.sleep(0.1)


async def test_mail_send_is_delivered_signed_with_its_headers(db_url, conn, sink: Sink,
                                                               keys: DkimKeys, key_file: str):
    _, _, _, token = await keyed_identity(conn, DESK)
    settings = stack_settings(db_url, sink.port, pm_dkim_domain="acme.example",
                              pm_dkim_selector="s1", pm_dkim_key_file=key_file)
    async with stack(settings) as url, sdk_client(url, token) as client:
        sent = body(await client.call_tool("mail_send", {
            "idempotency_key": "q3-figures", "to": ["Jo Lee <jo@example.com>"],
            "cc": [{"address": "bo@example.net", "name": "Bo"}], "bcc": ["audit@example.org"],
            "subject": "Quarterly figures", "text": "Figures below.",
            "html": "<p>Figures below.</p>",
            "headers": {"X-Campaign": "q3", "Importance": "high"}, "labels": ["finance"],
            "metadata": {"ticket": "T-1"}}), "mail_send")
        assert (sent["deduplicated"], sent["status"], sent["direction"]) == (False, "queued",
                                                                             "outbound")
        assert sent["delivery"]["status"] == "queued" and sent["labels"] == ["finance"]
        assert sent["metadata"] == {"ticket": "T-1"} and sent["kind"] == "transactional"
        await sink.arrivals(1)
        read, _ = await delivery_until(client, sent["id"], "sent", "failed")
    got = sink.received[0]
    assert got.mail_from == DESK
    assert sorted(got.rcpt_tos) == ["audit@example.org", "bo@example.net", "jo@example.com"]
    assert dkim.verify(got.content, dnsfunc=keys.dnsfunc)
    msg = email.message_from_bytes(got.content, policy=policy.default)
    assert msg["From"] == DESK and msg["To"] == "Jo Lee <jo@example.com>"
    assert msg["Cc"] == "Bo <bo@example.net>" and "Bcc" not in msg
    assert msg["Subject"] == "Quarterly figures"
    assert msg["Message-ID"] == f"<{sent['message_id']}>"
    assert (msg["X-Campaign"], msg["Importance"]) == ("q3", "high")
    assert "d=acme.example" in msg["DKIM-Signature"]
    assert read["status"] == "sent" and read["delivery"]["attempts"] == 1
    assert {r["status"] for r in read["delivery"]["recipients"]} == {"sent"}


def real_message(kit: Path) -> bytes:
    """A real list message that is a reply (References) with a From and no Reply-To."""
    mbox = kit / "corpus" / "mailboxes" / "notmuch-lkml" / "notmuch-lkml.mbox"
    for item in iter_sources([mbox]):
        if item.raw:
            parsed = parse_message(item.raw)
            if len(parsed.references) > 1 and parsed.from_ is not None and not parsed.reply_to:
                return item.raw
    raise AssertionError("no such message in the corpus")


async def test_a_reply_threads_in_our_store_and_in_the_mailbox_that_receives_it(
        db_url, conn, kit, keys: DkimKeys, key_file: str, redis: Redis):
    raw = real_message(kit)
    author = parse_message(raw).from_.address  # type: ignore[union-attr]
    tenant_id, desk_id, _, token = await keyed_identity(conn, DESK)
    # The mailbox of the original's author, on this deployment: the reply is delivered to it
    # through our own listener on loopback, never to the real address.
    _, author_id, _, _ = await keyed_identity(conn, author)
    await ingest_raw(conn, None, desk_id, raw)
    await ingest_raw(conn, None, author_id, raw)
    original = await conn.fetchrow(
        "SELECT id, thread_id, rfc_message_id FROM messages WHERE identity_id = $1", desk_id)
    dns = DnsTable(records={(keys.record_name, "TXT"): [keys.record]})
    async with database(db_url) as pool:
        listening = smtp_listener(settings_for(db_url), pool, redis, authserv_id="mx.pylota.test",
                                  resolver=dns, host="127.0.0.1", port=0)
        async with listening as (host, port):
            assert host == "127.0.0.1"
            settings = stack_settings(db_url, port, pm_dkim_domain="acme.example",
                                      pm_dkim_selector="s1", pm_dkim_key_file=key_file)
            async with stack(settings) as url, sdk_client(url, token) as client:
                reply = body(await client.call_tool("mail_reply", {
                    "message_id": original["id"], "idempotency_key": "thanks-1",
                    "text": "Thanks, applied."}), "mail_reply")
                assert [a["address"] for a in reply["to"]] == [author]
                await delivery_until(client, reply["id"], "sent")
                thread = body(await client.call_tool("mail_get_thread",
                                                     {"thread_id": original["thread_id"]}))
    assert reply["thread_id"] == original["thread_id"]
    assert reply["in_reply_to"] == [original["rfc_message_id"]]
    assert reply["references"][-1] == original["rfc_message_id"]
    assert [m["id"] for m in thread["messages"]] == [original["id"], reply["id"]]
    received = await conn.fetchrow(
        "SELECT m.thread_id, r.raw FROM messages m JOIN raw_messages r ON r.message_id = m.id"
        " WHERE m.identity_id = $1 AND m.rfc_message_id = $2", author_id, reply["message_id"])
    theirs = await conn.fetchval(
        "SELECT thread_id FROM messages WHERE identity_id = $1 AND rfc_message_id = $2",
        author_id, original["rfc_message_id"])
    assert received is not None and received["thread_id"] == theirs
    assert b"dkim=pass header.d=acme.example" in received["raw"]


async def test_mail_sent_to_the_listener_is_returned_by_a_waiting_mail_wait(db_url, conn,
                                                                              redis: Redis):
    _, _, _, token = await keyed_identity(conn, DESK)
    settings = stack_settings(db_url, free_port())
    waiting = asyncio.Event()

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        waiting.set()

    def deliver(host: str, port: int) -> None:
        raw = (f"From: Jo <jo@sender.example>\r\nTo: {DESK}\r\nSubject: Your code\r\n"
               "Message-ID: <code-1@sender.example>\r\n\r\nThe code is 123456.\r\n").encode()
        with smtplib.SMTP(host, port, local_hostname="mta.sender.example", timeout=WAIT) as smtp:
            assert smtp.sendmail("jo@sender.example", [DESK], raw) == {}

    async with database(db_url) as pool, smtp_listener(
            settings, pool, redis, authserv_id="mx.pylota.test", resolver=DnsTable(),
            host="127.0.0.1", port=0) as (host, port):
        async with stack(settings, batch=False) as url, sdk_client(url, token) as client:
            call = asyncio.create_task(client.call_tool(
                "mail_wait", {"from": "@sender.example", "timeout_seconds": 20},
                progress_callback=progressed))
            async with asyncio.timeout(WAIT):
                await waiting.wait()  # the wait runs on its worker
                await asyncio.to_thread(deliver, host, port)
                result = body(await call)
    assert result["timed_out"] is False
    assert result["message"]["subject"] == "Your code"
    assert result["message"]["from"]["address"] == "jo@sender.example"


async def test_relay_down_is_retried_then_failed_and_mail_get_message_shows_it(db_url, conn):
    _, _, _, token = await keyed_identity(conn, DESK)
    settings = stack_settings(db_url, free_port(), pm_embed_poll_seconds=1)
    async with stack(settings) as url, sdk_client(url, token) as client:
        sent = body(await client.call_tool("mail_send", {
            "idempotency_key": "k-1", "to": ["jo@example.com"], "subject": "Hello",
            "text": "Hi."}))
        read, seen = await delivery_until(client, sent["id"], "failed")
    assert "deferred" in seen and seen[-1] == "failed"
    assert read["status"] == "failed" and read["delivery"]["attempts"] == 3
    assert read["delivery"]["last_reply"].startswith("relay unreachable: ")
    [recipient] = read["delivery"]["recipients"]
    assert recipient["status"] == "failed"
    assert recipient["last_reply"].startswith("gave up after 3 attempts: relay unreachable")


async def test_a_hundred_concurrent_sends_with_one_key_deliver_once(db_url, conn, sink: Sink):
    _, _, _, token = await keyed_identity(conn, DESK)
    settings = stack_settings(db_url, sink.port, pm_rl_send_per_minute=1000,
                              pm_max_in_flight=300, pm_max_in_flight_per_key=300)
    arguments = {"idempotency_key": "once", "to": ["jo@example.com"], "subject": "Once",
                 "text": "Only once."}
    async with stack(settings) as url, sdk_client(url, token) as client:
        async with asyncio.timeout(WAIT * 2):
            results = await asyncio.gather(
                *(client.call_tool("mail_send", arguments) for _ in range(100)))
        bodies = [body(r) for r in results]
        await sink.arrivals(1)
        read, _ = await delivery_until(client, bodies[0]["id"], "sent")
    assert {b["id"] for b in bodies} == {bodies[0]["id"]}
    assert sorted(b["deduplicated"] for b in bodies) == [False] + [True] * 99
    assert len(sink.received) == 1 and read["delivery"]["attempts"] == 1
    assert await conn.fetchval("SELECT count(*) FROM outbound_messages") == 1


async def start_batch_worker(settings: Settings) -> subprocess.Popen:
    """``pylota worker --batch`` as an operator starts it, once it beats in Redis."""
    env = {**os.environ, "DATABASE_URL": settings.database_url, "REDIS_URL": REDIS_URL,
           "PM_NAMESPACE": NAMESPACE, "PM_EMBEDDER": "hash", "PM_EMBED_POLL_SECONDS": "1",
           "PM_SMTP_RELAY_HOST": settings.pm_smtp_relay_host,
           "PM_SMTP_RELAY_PORT": str(settings.pm_smtp_relay_port),
           "PM_SMTP_LEASE_SECONDS": str(settings.pm_smtp_lease_seconds)}
    process = subprocess.Popen([sys.executable, "-m", "cli", "worker", "--batch"], env=env,
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    redis = Redis.from_url(REDIS_URL)
    try:
        async with asyncio.timeout(WAIT):
            while not await redis.zcard(workers_key(NAMESPACE, "batch")):
                assert process.poll() is None, "the worker exited"
                await asyncio.sleep(0.05)
    finally:
        await redis.aclose()
    return process


async def test_a_worker_killed_mid_delivery_delivers_once_after_restart(db_url, conn,
                                                                        sink: Sink):
    _, _, _, token = await keyed_identity(conn, DESK)
    settings = stack_settings(db_url, sink.port, pm_embed_poll_seconds=1,
                              pm_smtp_lease_seconds=2.0)
    sink.hold = True  # the relay keeps the transaction open in DATA, before its reply
    async with running_front(settings) as url, running_worker(settings):
        worker = await start_batch_worker(settings)
        try:
            async with sdk_client(url, token) as client:
                sent = body(await client.call_tool("mail_send", {
                    "idempotency_key": "k-1", "to": ["jo@example.com"], "subject": "Hello",
                    "text": "Hi."}))
                async with asyncio.timeout(WAIT):
                    await sink.entered.wait()
                worker.send_signal(signal.SIGKILL)
                async with asyncio.timeout(WAIT):
                    await asyncio.to_thread(worker.wait)
                held, _ = await delivery_until(client, sent["id"], "sending")
                sink.hold = False
                sink.release.set()
                async with running_worker(settings, batch=True):
                    await sink.arrivals(1)
                    read, _ = await delivery_until(client, sent["id"], "sent")
        finally:
            if worker.poll() is None:
                worker.kill()
    assert held["delivery"]["attempts"] == 1
    assert len(sink.offered) == 2 and len(sink.received) == 1
    assert read["delivery"]["attempts"] == 2 and read["status"] == "sent"


async def test_rl_send_is_rate_limited_with_retry_after_on_both_surfaces(db_url, conn):
    _, identity_id, _, token = await keyed_identity(conn, DESK)
    settings = stack_settings(db_url, free_port(), pm_rl_send_per_minute=2)
    arguments = {"to": ["jo@example.com"], "subject": "Hello", "text": "Hi."}
    async with stack(settings, batch=False) as url, sdk_client(url, token) as client:
        for n in range(2):
            body(await client.call_tool("mail_send", {**arguments, "idempotency_key": f"k-{n}"}))
        limited = error_of(await client.call_tool("mail_send",
                                                  {**arguments, "idempotency_key": "k-2"}))
        async with httpx.AsyncClient(base_url=url.removesuffix("/mcp"), timeout=WAIT) as http:
            rest = await http.post(f"/v1/identities/{identity_id}/messages", json=arguments,
                                   headers={"Authorization": f"Bearer {token}",
                                            "Idempotency-Key": "k-3"})
    assert limited["code"] == "rate_limited" and limited["retryable"] is True
    assert limited["details"]["bucket"] == "RL_SEND" and limited["details"]["retry_after"] >= 1
    assert rest.status_code == 429 and int(rest.headers["retry-after"]) >= 1
    assert rest.json()["error"]["details"]["bucket"] == "RL_SEND"
    assert await conn.fetchval("SELECT count(*) FROM outbound_messages") == 2


async def test_an_identity_being_deleted_cannot_send_on_either_surface(db_url, conn):
    """Sending acts as the identity, which a deleting or deleted identity cannot do (spec section
    4.3, mail_list_identities): ``identity_not_found``, nothing queued (found by an attack)."""
    _, identity_id, _, token = await keyed_identity(conn, DESK)
    await conn.execute("UPDATE identities SET status = 'deleting' WHERE id = $1", identity_id)
    settings = stack_settings(db_url, free_port())
    arguments = {"to": ["jo@example.com"], "subject": "Hello", "text": "Hi."}
    async with stack(settings, batch=False) as url, sdk_client(url, token) as client:
        refused = error_of(await client.call_tool("mail_send", {**arguments,
                                                                "idempotency_key": "k-1"}))
        async with httpx.AsyncClient(base_url=url.removesuffix("/mcp"), timeout=WAIT) as http:
            rest = await http.post(f"/v1/identities/{identity_id}/messages", json=arguments,
                                   headers={"Authorization": f"Bearer {token}",
                                            "Idempotency-Key": "k-2"})
    assert refused["code"] == "identity_not_found"
    assert rest.status_code == 404 and rest.json()["error"]["code"] == "identity_not_found"
    assert await conn.fetchval("SELECT count(*) FROM outbound_messages") == 0


async def test_a_key_that_may_not_send_learns_that_before_the_missing_idempotency_key(
        db_url, conn):
    """The permission is the blocker to report: a missing Idempotency-Key would send the caller
    to fix a header and fail again (found by an attack)."""
    _, identity_id, _, token = await keyed_identity(conn, DESK,
                                                    permissions=[Permission.MESSAGES_READ])
    settings = stack_settings(db_url, free_port())
    async with stack(settings, batch=False) as url, \
            httpx.AsyncClient(base_url=url.removesuffix("/mcp"), timeout=WAIT) as http:
        refused = await http.post(f"/v1/identities/{identity_id}/messages",
                                  json={"to": ["jo@example.com"], "subject": "Hi", "text": "Hi."},
                                  headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "permission_denied"
    assert await conn.fetchval("SELECT count(*) FROM outbound_messages") == 0


async def test_a_rest_send_missing_a_field_names_the_header_among_what_it_requires(db_url, conn):
    """An empty body was told mail_send requires idempotency_key, which the REST body refuses
    (found by an attack)."""
    _, identity_id, _, token = await keyed_identity(conn, DESK)
    settings = stack_settings(db_url, free_port())
    async with stack(settings, batch=False) as url, \
            httpx.AsyncClient(base_url=url.removesuffix("/mcp"), timeout=WAIT) as http:
        empty = await http.post(f"/v1/identities/{identity_id}/messages", json={},
                                headers={"Authorization": f"Bearer {token}",
                                         "Idempotency-Key": "k-1"})
    error = empty.json()["error"]
    assert empty.status_code == 400 and error["details"] == {"path": "to"}
    assert error["fix"] == ("Pass to; mail_send requires: to, subject, the Idempotency-Key "
                            "header.")


async def test_rest_sends_take_the_idempotency_key_header(db_url, conn):
    tenant_id, identity_id, _, token = await keyed_identity(conn, DESK)
    settings = stack_settings(db_url, free_port())
    path = f"/v1/identities/{identity_id}/messages"
    message = {"to": ["jo@example.com"], "subject": "Hello", "text": "Hi."}

    def headers(key: str | None = None) -> dict[str, str]:
        found = {"Authorization": f"Bearer {token}"}
        return found if key is None else {**found, "Idempotency-Key": key}

    async with stack(settings, batch=False) as url, \
            httpx.AsyncClient(base_url=url.removesuffix("/mcp"), timeout=WAIT) as http:
        missing = await http.post(path, json=message, headers=headers())
        twice = await http.post(path, json={**message, "idempotency_key": "k"},
                                headers=headers("k"))
        bad = await http.post(path, json=message, headers=headers("k" * 256))
        # two keys: a proxy might read the other one, so a retry could send twice
        doubled = await http.post(path, json=message, headers=[
            *headers().items(), ("Idempotency-Key", "k-a"), ("Idempotency-Key", "k-b")])
        new = await http.post(path, json=message, headers=headers("k-1"))
        replay = await http.post(path, json=message, headers=headers("k-1"))
        conflict = await http.post(path, json={**message, "text": "Other."},
                                   headers=headers("k-1"))
        await set_allowance(conn, tenant_id, "sends", 1)
        spent = await http.post(path, json=message, headers=headers("k-2"))
        await top_up(conn, tenant_id, "sends", 1)
        topped = await http.post(path, json=message, headers=headers("k-2"))
        usage = await http.get("/v1/usage", headers=headers())
        document = (await http.get("/v1/openapi.json")).json()
    assert missing.status_code == 400
    assert missing.json()["error"]["details"] == {"header": "Idempotency-Key"}
    assert missing.json()["error"]["message"] == "The Idempotency-Key header is required."
    assert twice.status_code == 400 and twice.json()["error"]["details"] == {
        "path": "idempotency_key"}
    assert bad.status_code == 400 and bad.json()["error"]["details"] == {
        "header": "Idempotency-Key"}
    assert doubled.status_code == 400 and doubled.json()["error"]["details"] == {
        "header": "Idempotency-Key"}
    assert "2 times" in doubled.json()["error"]["message"]
    assert new.status_code == 201 and new.json()["deduplicated"] is False
    assert replay.status_code == 200 and replay.json()["deduplicated"] is True
    assert replay.json()["id"] == new.json()["id"]
    assert conflict.status_code == 409
    assert conflict.json()["error"]["details"] == {"original_message_id": new.json()["id"]}
    assert spent.status_code == 402 and spent.json()["error"]["code"] == "billing_limit"
    assert "Idempotency-Key header over REST" in spent.json()["error"]["fix"]  # a new user's report
    assert topped.status_code == 201 and topped.json()["deduplicated"] is False
    sends = usage.json()["allowances"]["sends"]
    assert (sends["granted"], sends["used"], sends["remaining"]) == (2, 2, 0)
    operation = document["paths"]["/v1/identities/{identity_id}/messages"]["post"]
    [header] = [p for p in operation["parameters"] if p["in"] == "header"]
    assert (header["name"], header["required"]) == ("Idempotency-Key", True)
    assert "idempotency_key" not in operation["requestBody"]["content"]["application/json"][
        "schema"]["properties"]
    assert {"201", "200"} <= set(operation["responses"])


async def test_a_long_message_is_cut_in_the_result_and_still_valid(db_url, conn):
    _, _, _, token = await keyed_identity(conn, DESK)
    long_text = "Figures. " * 5_000  # 45,000 characters, over one message's 32,000
    settings = stack_settings(db_url, free_port())
    async with stack(settings, batch=False) as url, sdk_client(url, token) as client:
        sent = body(await client.call_tool("mail_send", {
            "idempotency_key": "long", "to": ["jo@example.com"], "subject": "Long",
            "text": long_text}), "mail_send")
    assert sent["truncated"] is True and sent["new_text_truncated"] is True
    assert len(sent["new_text"]) == 32_000 and sent["new_text"].endswith("…")


async def test_billing_limit_over_mcp_then_the_same_key_after_a_top_up(db_url, conn,
                                                                         sink: Sink):
    tenant_id, _, _, token = await keyed_identity(conn, DESK)
    _, tenant_token = await create_key(conn, tenant_id=tenant_id, identity_id=None,
                                       permissions=list(Permission))
    await set_allowance(conn, tenant_id, "sends", 0)
    arguments = {"identity": DESK, "idempotency_key": "launch", "to": ["jo@example.com"],
                 "subject": "Launch", "text": "We are live."}
    settings = stack_settings(db_url, sink.port)
    async with stack(settings) as url, sdk_client(url, tenant_token) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"mail_get_usage", "mail_send", "mail_reply", "mail_forward"} <= tools
        spent = error_of(await client.call_tool("mail_send", arguments))
        assert await conn.fetchval("SELECT count(*) FROM messages") == 0
        usage = body(await client.call_tool("mail_get_usage", {}), "mail_get_usage")
        await top_up(conn, tenant_id, "sends", 1, note="upgrade")
        sent = body(await client.call_tool("mail_send", arguments))
        await sink.arrivals(1)
    assert spent["code"] == "billing_limit" and spent["details"]["allowance"] == "sends"
    assert usage["tenant_id"] == tenant_id and usage["allowances"]["sends"]["remaining"] == 0
    assert sent["deduplicated"] is False and len(sink.received) == 1
