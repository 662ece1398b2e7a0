"""Issue 2 acceptance: real mail imported by the CLI, served by the real front and an arq worker,
read by the official MCP Python SDK."""

from __future__ import annotations

import asyncio
import email
import email.policy
import re
import time
from pathlib import Path

import httpx
import msgspec
import pytest
from mcp import MCPError

from front.mcp.protocol import INVALID_PARAMS
from shared.auth.keys import create_key, hash_token
from shared.auth.permissions import Permission
from shared.db import connect
from shared.events import inflight_key
from shared.ingest.pipeline import ingest_raw
from shared.mail.sources import iter_sources
from shared.tenancy.store import create_identity
from tests.conftest import running_front, running_worker, settings_for
from tests.e2e.harness import pylota, sdk_client, tenant_with_identity

MSG_ID = re.compile(r"<([^<>@\s]+@[^<>\s]+)>")


def independent_threads(paths: list[Path]) -> set[frozenset[str]]:
    """Threads as References and In-Reply-To imply them, computed without our parser:
    union-find over msg-ids (a value without '@', such as ``<yes>``, is not a msg-id)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    own: set[str] = set()
    for item in iter_sources(paths):
        msg = email.message_from_bytes(item.raw, policy=email.policy.compat32)
        mid = MSG_ID.findall(str(msg.get("Message-ID", "")))[0]
        own.add(mid)
        for header in ("References", "In-Reply-To"):
            for ref in MSG_ID.findall(" ".join(str(v) for v in msg.get_all(header, []))):
                parent[find(ref)] = find(mid)
        find(mid)
    groups: dict[str, set[str]] = {}
    for mid in own:
        groups.setdefault(find(mid), set()).add(mid)
    return {frozenset(g) for g in groups.values()}


async def stored_threads(conn, identity_id: str) -> set[frozenset[str]]:
    rows = await conn.fetch(
        "SELECT thread_id, array_agg(rfc_message_id) AS ids FROM messages"
        " WHERE identity_id = $1 GROUP BY thread_id", identity_id)
    return {frozenset(r["ids"]) for r in rows}


async def test_lkml_maildir_and_mbox_give_the_same_messages_and_threads(db_url, conn, kit):
    lkml = kit / "corpus/mailboxes/notmuch-lkml"
    tenant_id, maildir_idn, _ = await tenant_with_identity(conn, "maildir@acme.example")
    mbox_idn = (await create_identity(conn, tenant_id, "mbox@acme.example")).id

    for address, path in (("maildir@acme.example", lkml / "maildir"),
                          ("mbox@acme.example", lkml / "notmuch-lkml.mbox")):
        done = pylota(db_url, "import", "--identity", address, "--json", "--no-progress", str(path))
        assert done.returncode == 0, done.stderr
        summary = msgspec.json.decode(done.stdout)
        assert summary["imported"] == 176
        assert summary["duplicates"] == 34
        assert summary["failed"] == []

    by_maildir = await stored_threads(conn, maildir_idn)
    by_mbox = await stored_threads(conn, mbox_idn)
    expected = independent_threads([lkml / "maildir"])
    assert sum(len(t) for t in expected) == 176
    assert by_maildir == by_mbox == expected
    # `In-Reply-To: <yes>` names no message: the CIFS patches carrying it stay apart.
    yes_rows = await conn.fetch(
        "SELECT thread_id FROM messages m JOIN raw_messages r ON r.message_id = m.id"
        " WHERE m.identity_id = $1 AND position('In-Reply-To: <yes>' in convert_from(r.raw, 'SQL_ASCII')) > 0",
        maildir_idn)
    assert len(yes_rows) >= 10
    assert len({r["thread_id"] for r in yes_rows}) > 1


#: How long the batch worker may take to bring every attachment of the singles to a final status
#: (a few hundred files, each bounded by the extraction's own time limit).
SINGLES_ATTACHMENTS_SECONDS = 240


async def test_importing_every_single_ends_with_each_message_stored_or_reported(db_url, conn, kit):
    singles = kit / "corpus/singles"
    _, _, token = await tenant_with_identity(conn, "singles@acme.example")
    items = list(iter_sources([singles]))
    done = pylota(db_url, "import", "--identity", "singles@acme.example", "--json", "--no-progress",
                  str(singles))
    assert done.returncode == 0, done.stderr
    summary = msgspec.json.decode(done.stdout)
    assert summary["imported"] + summary["duplicates"] + len(summary["failed"]) == len(items)
    assert summary["imported"] > 450
    assert all(f["reason"] for f in summary["failed"])
    stored = await conn.fetchval("SELECT count(*) FROM messages")
    assert stored == summary["imported"]
    defective = await conn.fetchval("SELECT count(*) FROM messages WHERE parse_defects <> '{}'")
    assert defective == len(summary["with_defects"]) > 50
    assert all(d["origin"].startswith(str(singles)) and d["reason"] for d in summary["with_defects"])
    # raw bytes are kept byte-exact for every stored message
    mismatched = await conn.fetchval(
        "SELECT count(*) FROM messages m JOIN raw_messages r ON r.message_id = m.id"
        " WHERE sha256(r.raw) <> m.content_hash")
    assert mismatched == 0

    # Issue 11's acceptance: every stored message reads through the real front, and a real batch
    # worker brings every attachment to a final status within a bounded time.
    settings = settings_for(db_url)
    ids = [r["id"] for r in await conn.fetch("SELECT id FROM messages ORDER BY id")]
    attachments = await conn.fetchval("SELECT count(*) FROM attachments")
    assert attachments > 100
    async with running_front(settings) as url, running_worker(settings, batch=True):
        base = url.removesuffix("/mcp")
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                     timeout=30) as http:
            for message_id in ids:
                read = await http.get(f"{base}/v1/messages/{message_id}")
                assert read.status_code == 200, (message_id, read.text)
                assert read.json()["id"] == message_id
        deadline = time.monotonic() + SINGLES_ATTACHMENTS_SECONDS
        while await conn.fetchval(
                "SELECT count(*) FROM attachment_texts WHERE status = 'pending'"):
            assert time.monotonic() < deadline, "attachments still pending"
            await asyncio.sleep(1)
    statuses = dict(await conn.fetch(
        "SELECT status, count(*) FROM attachment_texts GROUP BY status"))
    assert sum(statuses.values()) == attachments
    assert statuses.get("ready", 0) > 50


@pytest.fixture
async def lkml_stack(db_url, conn, kit):
    """LKML imported into one identity, with the front and a worker running."""
    tenant_id, identity_id, token = await tenant_with_identity(conn, "lkml@acme.example")
    done = pylota(db_url, "import", "--identity", "lkml@acme.example", "--no-progress",
                  str(kit / "corpus/mailboxes/notmuch-lkml/notmuch-lkml.mbox"))
    assert done.returncode == 0, done.stderr
    settings = settings_for(db_url, pm_stream_heartbeat_seconds=1.0)
    async with running_front(settings) as url, running_worker(settings):
        yield {"url": url, "token": token, "tenant_id": tenant_id, "identity_id": identity_id,
               "settings": settings}


async def test_sdk_lists_searches_reads_and_waits(lkml_stack, conn, redis):
    url, token = lkml_stack["url"], lkml_stack["token"]
    davem = {r["rfc_message_id"] for r in await conn.fetch(
        "SELECT rfc_message_id FROM messages WHERE from_address = 'davem@davemloft.net'")}
    assert len(davem) == 10
    async with sdk_client(url, token, mode="legacy") as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert {"mail_list_identities", "mail_search", "mail_get_thread", "mail_get_message",
                "mail_wait"} <= set(names)

        found = await client.call_tool("mail_search", {"q": "from:davem@davemloft.net",
                                                       "mode": "keyword", "limit": 25})
        assert not found.is_error
        hits = found.structured_content["hits"]
        ids = {h["message_id"] for h in hits}
        headers = {r["rfc_message_id"] for r in await conn.fetch(
            "SELECT rfc_message_id FROM messages WHERE id = any($1::text[])", list(ids))}
        assert headers == davem

        thread = await client.call_tool("mail_get_thread", {"thread_id": hits[0]["thread_id"],
                                                            "messages_limit": 50})
        dates = [m["date"] for m in thread.structured_content["messages"]]
        assert len(dates) > 1 and dates == sorted(dates)

        progress: list[tuple[float, float | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, total))

        async def arrive() -> None:
            await asyncio.sleep(2.5)
            raw = (b"Message-ID: <wait-test@example.net>\r\nFrom: Ann <ann@example.net>\r\n"
                   b"To: lkml@acme.example\r\nSubject: ping from the wait test\r\n"
                   b"Date: Mon, 30 Nov 2026 10:00:00 +0000\r\n\r\nAre you there?\r\n")
            c = await connect(lkml_stack["settings"].database_url)
            try:
                await ingest_raw(c, redis, lkml_stack["identity_id"], raw)
            finally:
                await c.close()

        started = time.monotonic()
        arrival = asyncio.create_task(arrive())
        waited = await client.call_tool("mail_wait", {"from": "@example.net", "timeout_seconds": 20},
                                        progress_callback=on_progress)
        await arrival
        assert not waited.is_error
        result = waited.structured_content
        assert result["timed_out"] is False
        assert result["message"]["subject"] == "ping from the wait test"
        assert result["message"]["triage"] == {"category": "other", "urgency": "normal",
                                               "risk_flags": [], "automated": False}
        assert result["message"]["refs"] == []
        assert 2.0 < time.monotonic() - started < 15
        assert progress and progress[0][1] == 20.0
        assert all(a[0] < b[0] for a, b in zip(progress, progress[1:]))


async def test_wait_times_out_with_nothing_matching(lkml_stack):
    async with sdk_client(lkml_stack["url"], lkml_stack["token"]) as client:
        waited = await client.call_tool("mail_wait", {"from": "nobody@nowhere.example",
                                                      "timeout_seconds": 2})
    assert waited.structured_content == {"message": None, "verification": None, "timed_out": True}


async def test_wrong_or_missing_key_gets_401(lkml_stack):
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}
    async with httpx.AsyncClient() as http:
        for headers in ({}, {"Authorization": "Bearer pmk_live_notakey"},
                        {"Authorization": "Basic abc"}):
            r = await http.post(lkml_stack["url"], json=body, headers=headers)
            assert r.status_code == 401
            assert r.headers["www-authenticate"].startswith('Bearer realm="pylota-mail"')
            assert r.json()["error"]["data"]["error"]["code"] == "unauthenticated"


async def test_key_without_messages_read_cannot_see_or_call_get_message(lkml_stack, conn):
    _, token = await create_key(conn, tenant_id=lkml_stack["tenant_id"],
                                identity_id=lkml_stack["identity_id"],
                                permissions=[Permission.SEARCH_READ, Permission.IDENTITIES_READ])
    message_id = await conn.fetchval("SELECT id FROM messages LIMIT 1")
    async with sdk_client(lkml_stack["url"], token) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"mail_list_identities", "mail_search", "mail_find_related",
                         "mail_deep_search"}
        with pytest.raises(MCPError) as raised:
            await client.call_tool("mail_get_message", {"message_id": message_id})
    assert raised.value.error.code == INVALID_PARAMS


async def test_closing_the_stream_cancels_the_wait_job(lkml_stack, redis, conn):
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "mail_wait", "arguments": {"timeout_seconds": 60},
                       "_meta": {"progressToken": "tok-7"}}}
    headers = {"Authorization": f"Bearer {lkml_stack['token']}",
               "MCP-Protocol-Version": "2025-11-25",
               "Accept": "application/json, text/event-stream"}
    # Our job, by the key the front names a caller's streaming request under: other runs may
    # share this Redis, so "a job that started meanwhile" could be theirs.
    key_id = await conn.fetchval("SELECT id FROM api_keys WHERE token_hash = $1",
                                 hash_token(lkml_stack["token"]))
    async with httpx.AsyncClient(timeout=30) as http:
        async with http.stream("POST", lkml_stack["url"], json=body, headers=headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
            assert response.headers["cache-control"] == "no-store"
            async with asyncio.timeout(10):
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        progress = msgspec.json.decode(line[5:])
                        break
            assert progress["method"] == "notifications/progress"
            assert progress["params"]["progressToken"] == "tok-7"
            assert progress["params"]["total"] == 60
            job_id = (await redis.get(inflight_key(key_id, 7))).decode().split(" ")[0]
            ours = f"arq:in-progress:{job_id}"
            assert await redis.exists(ours)
    # the client went away: the job stops at its next checkpoint, long before its 60 s
    async with asyncio.timeout(10):
        while await redis.exists(ours):
            await asyncio.sleep(0.1)
    assert await redis.exists(f"pylota:cancel:{job_id}")
