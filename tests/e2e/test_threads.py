"""mail_list_threads and mail_update_labels end to end (issue 11): mail imported through the
importer a user runs, served by a real uvicorn front and a real arq worker, called with the
official MCP Python SDK (which validates ``structuredContent`` against each ``outputSchema``);
and a thread id that a merge made disappear still answering ``mail_get_thread``, ``thread:`` and
``mail_wait``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from redis.asyncio import Redis

from shared.ingest.importer import import_paths
from tests.conftest import ROOT, running_front, running_worker, settings_for
from tests.e2e.harness import sdk_client
from tests.e2e.transport_kit import keyed_identity

DEMO = ROOT / "demo" / "brightwell.mbox"
DESK = "desk@pylota.example"


def body(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content


def error(result) -> dict:
    assert result.is_error
    return json.loads(result.content[0].text)["error"]


def mbox(path: Path, *messages: str) -> Path:
    """An mbox file of ``messages`` (header lines and a body, joined by blank lines)."""
    path.write_text("".join(f"From MAILER-DAEMON Mon Nov  2 10:00:00 2026\n{m.strip()}\n\n"
                            for m in messages))
    return path


async def test_list_label_and_find_again_over_mcp(db_url, conn):
    _, identity_id, _, token = await keyed_identity(conn, DESK)
    summary = await import_paths(conn, None, identity_id, [DEMO])
    assert summary.imported > 5 and not summary.failed
    async with running_front(settings_for(db_url)) as url, sdk_client(url, token) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["mail_list_threads"].annotations.read_only_hint is True
        assert tools["mail_update_labels"].annotations.read_only_hint is False
        listed = body(await client.call_tool("mail_list_threads", {"limit": 50}))
        threads = listed["data"]
        assert threads and listed["next_cursor"] is None
        dates = [t["last_message_at"] for t in threads]
        assert dates == sorted(dates, reverse=True)
        assert sum(t["message_count"] for t in threads) == summary.imported
        waiting = body(await client.call_tool("mail_list_threads", {"needs_reply_gte": 0.5}))
        assert all(t["needs_reply"] >= 0.5 and t["last_direction"] == "inbound"
                   for t in waiting["data"])

        chosen = threads[0]
        marked = body(await client.call_tool("mail_update_labels", {
            "thread_id": chosen["id"], "labels_add": ["handled"], "read": True}))
        assert marked == {"id": chosen["id"], "labels": ["handled"], "read": True}
        handled = body(await client.call_tool("mail_list_threads", {"label": "handled"}))
        assert [t["id"] for t in handled["data"]] == [chosen["id"]]
        assert handled["data"][0]["unread_count"] == 0
        hits = body(await client.call_tool("mail_search", {"q": "label:handled",
                                                           "mode": "keyword"}))["hits"]
        assert len(hits) == chosen["message_count"]
        assert {h["thread_id"] for h in hits} == {chosen["id"]}
        unread = body(await client.call_tool("mail_search", {"q": f"thread:{chosen['id']} "
                                                             "is:unread", "mode": "keyword"}))
        assert unread["hits"] == []

        one = hits[0]["message_id"]
        again = body(await client.call_tool("mail_update_labels", {
            "message_id": one, "labels_remove": ["handled"], "read": False}))
        assert again == {"id": one, "labels": [], "read": False}
        nothing = error(await client.call_tool("mail_update_labels", {"message_id": one}))
        assert nothing["code"] == "invalid_request" and nothing["details"] == {"path": "labels_add"}
        bad = await client.call_tool("mail_list_threads", {"limit": 51})
        assert error(bad)["details"] == {"path": "limit"}


async def test_a_merged_thread_id_keeps_answering_over_mcp(db_url, conn, tmp_path, redis: Redis):
    _, identity_id, _, token = await keyed_identity(conn, DESK)
    first = mbox(tmp_path / "first.mbox",
                 f"From: jo@x.example\nTo: {DESK}\nSubject: Van\nMessage-ID: <van@x>\n"
                 "Date: Mon, 02 Nov 2026 10:00:00 +0000\n\nThe van is booked.",
                 f"From: jo@x.example\nTo: {DESK}\nSubject: Keys\nMessage-ID: <keys@x>\n"
                 "Date: Tue, 03 Nov 2026 10:00:00 +0000\n\nThe keys are ready.")
    await import_paths(conn, None, identity_id, [first])
    van, keys = [r["thread_id"] for r in await conn.fetch(
        "SELECT thread_id FROM messages WHERE identity_id = $1 ORDER BY sent_at", identity_id)]
    joining = mbox(tmp_path / "join.mbox",
                   f"From: jo@x.example\nTo: {DESK}\nSubject: Re: Van and keys\n"
                   "Message-ID: <both@x>\nReferences: <van@x> <keys@x>\n"
                   "Date: Wed, 04 Nov 2026 10:00:00 +0000\n\nBoth at nine?")
    assert (await import_paths(conn, None, identity_id, [joining])).imported == 1
    settings = settings_for(db_url)
    async with running_front(settings) as url, running_worker(settings), \
            sdk_client(url, token) as client:
        thread = body(await client.call_tool("mail_get_thread", {"thread_id": keys}))
        assert thread["id"] == van and thread["message_count"] == 3
        hits = body(await client.call_tool("mail_search", {"q": f"thread:{keys}",
                                                           "mode": "keyword"}))["hits"]
        assert len(hits) == 3 and {h["thread_id"] for h in hits} == {van}
        listed = body(await client.call_tool("mail_list_threads", {}))["data"]
        assert [t["id"] for t in listed] == [van] and listed[0]["needs_reply"] == 0.8

        started = asyncio.Event()

        async def progressed(progress: float, total: float | None, message: str | None) -> None:
            started.set()

        waiting = asyncio.create_task(client.call_tool(
            "mail_wait", {"thread_id": keys, "timeout_seconds": 20}, progress_callback=progressed))
        async with asyncio.timeout(30):
            await started.wait()
            reply = mbox(tmp_path / "reply.mbox",
                         f"From: jo@x.example\nTo: {DESK}\nSubject: Re: Van and keys\n"
                         "Message-ID: <nine@x>\nIn-Reply-To: <both@x>\nReferences: <both@x>\n"
                         "Date: Thu, 05 Nov 2026 10:00:00 +0000\n\nNine it is.")
            assert (await import_paths(conn, redis, identity_id, [reply])).imported == 1
            waited = body(await waiting)
    assert waited["timed_out"] is False
    assert waited["message"]["thread_id"] == van
    assert waited["message"]["new_text"].startswith("Nine it is.")


@pytest.mark.parametrize("mailbox", ["notmuch-default"])
async def test_a_real_mailbox_lists_and_labels(db_url, conn, kit, mailbox):
    """A mailbox of the team kit's real-mail corpus, imported whole: every thread listed once
    across pages, the needs-reply filter consistent with the fields, a label on a thread seen."""
    _, identity_id, _, token = await keyed_identity(conn, DESK)
    summary = await import_paths(conn, None, identity_id, [kit / "corpus" / "mailboxes" / mailbox])
    assert summary.imported > 20
    async with running_front(settings_for(db_url)) as url, sdk_client(url, token) as client:
        seen, cursor, pages = [], None, 0
        while True:
            page = body(await client.call_tool(
                "mail_list_threads", {"limit": 50, **({"cursor": cursor} if cursor else {})}))
            seen += page["data"]
            pages += 1
            cursor = page["next_cursor"]
            if not cursor:
                break
        stored = await conn.fetchval("SELECT count(*) FROM threads WHERE identity_id = $1",
                                     identity_id)
        assert len({t["id"] for t in seen}) == len(seen) == stored
        assert sum(t["message_count"] for t in seen) == summary.imported
        waiting = body(await client.call_tool("mail_list_threads",
                                              {"needs_reply_gte": 0.5, "limit": 50}))["data"]
        expected = [t["id"] for t in seen if t["needs_reply"] >= 0.5][:50]
        assert [t["id"] for t in waiting] == expected
        target = seen[-1]
        body(await client.call_tool("mail_update_labels", {
            "thread_id": target["id"], "labels_add": ["archived"]}))
        after = body(await client.call_tool("mail_list_threads", {"archived": True}))["data"]
        assert [t["id"] for t in after] == [target["id"]]
