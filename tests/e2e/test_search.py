"""Issue 4 end to end: mail stored by ingest, embedded by a real batch worker, searched through the
real front with the official MCP Python SDK: modes, cursors, references, related messages,
contacts and tenant scope (spec sections 3 and 4.3)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from shared.auth.keys import create_key
from shared.auth.permissions import Permission
from shared.errors import ErrorCode
from shared.ingest.pipeline import ingest_raw
from shared.mail.patterns import set_pattern
from shared.tenancy.store import create_identity
from tests.conftest import REDIS_URL, running_front, running_worker, settings_for
from tests.e2e.harness import pylota, sdk_client, tenant_with_identity
from tests.shared.search.conftest import mail


async def embedded(conn) -> None:
    async with asyncio.timeout(30):
        while await conn.fetchval("SELECT count(*) FROM embedding_queue"):
            await asyncio.sleep(0.1)


MESSAGES = [
    ("pcn@x", dict(sender="parking@council.example", subject="Penalty Charge Notice",
                   body="PCN WK05123456 was issued to vehicle AB12 CDE for parking on Hill Street.",
                   date="Mon, 02 Nov 2026 10:00:00 +0000")),
    ("appeal@x", dict(sender="desk@acme.example", to="parking@council.example",
                      subject="Appeal against a parking ticket",
                      body="We appeal PCN WK05123456: our van was loading goods.",
                      date="Tue, 03 Nov 2026 10:00:00 +0000")),
    ("trip@x", dict(sender="travel@trips.example", subject="Your trip",
                    body="Booking XKA-123 to Lisbon is confirmed.",
                    date="Wed, 04 Nov 2026 10:00:00 +0000")),
    ("lunch@x", dict(sender="Ann Lee <ann@clients.example>", subject="Lunch friday",
                     body="Team lunch on Friday at the noodle bar?",
                     date="Thu, 05 Nov 2026 10:00:00 +0000")),
]


@pytest.fixture
async def stack(db_url, conn, monkeypatch) -> AsyncIterator[dict]:
    tenant_id, identity_id, token = await tenant_with_identity(conn, "desk@acme.example")
    await set_pattern(conn, tenant_id, "booking", "[A-Z]{3}[0-9]{3}")
    second = await create_identity(conn, tenant_id, "sales@acme.example")
    ids = {}
    for mid, kwargs in MESSAGES:
        outcome, _ = await ingest_raw(conn, None, identity_id, mail(mid, **kwargs))
        ids[mid] = outcome.message_id
    outcome, _ = await ingest_raw(conn, None, second.id, mail(
        "sales@x", sender="buyer@shop.example", to="sales@acme.example", subject="parking fine",
        body="A parking fine for our delivery van.", date="Fri, 06 Nov 2026 10:00:00 +0000"))
    ids["sales@x"] = outcome.message_id
    _, tenant_token = await create_key(conn, tenant_id=tenant_id, identity_id=None,
                                       permissions=list(Permission))
    # Redis database 1: the batch worker's cron jobs stay out of the queues other tests watch
    settings = settings_for(db_url, pm_embedder="hash", pm_embed_poll_seconds=1,
                            redis_url=REDIS_URL.rsplit("/", 1)[0] + "/1")
    async with running_front(settings) as url, running_worker(settings, batch=True):
        await embedded(conn)
        yield {"url": url, "token": token, "tenant_token": tenant_token, "ids": ids,
               "tenant_id": tenant_id, "identity_id": identity_id, "second": second.id}


def error_code(result) -> str:
    assert result.is_error
    return json.loads(result.content[0].text)["error"]["code"]


async def test_modes_cursor_and_references_over_mcp(stack) -> None:
    back = {v: k for k, v in stack["ids"].items()}
    async with sdk_client(stack["url"], stack["token"]) as client:
        sem = (await client.call_tool("mail_search", {"q": "parking penalty van",
                                                      "mode": "semantic"})).structured_content
        assert not sem["degraded"] and sem["semantic_coverage"] == 1.0
        assert {back[h["message_id"]] for h in sem["hits"][:2]} == {"pcn@x", "appeal@x"}
        assert all(h["why"]["semantic_score"] is not None for h in sem["hits"])

        pages, cursor = [], None
        while True:
            args = {"q": "parking OR lunch", "mode": "hybrid", "limit": 1}
            if cursor:
                args["cursor"] = cursor
            page = (await client.call_tool("mail_search", args)).structured_content
            pages += [back[h["message_id"]] for h in page["hits"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(pages) == len(set(pages)) and {"pcn@x", "appeal@x", "lunch@x"} <= set(pages)

        plate = (await client.call_tool("mail_search", {"q": 'ref:"ab12 cde"', "mode": "keyword"})
                 ).structured_content
        assert [back[h["message_id"]] for h in plate["hits"]] == ["pcn@x"]
        assert plate["hits"][0]["why"]["matched"] == ['ref:"ab12 cde"']
        booking = (await client.call_tool("mail_search", {"q": "custom:booking:xka123"})
                   ).structured_content
        assert [back[h["message_id"]] for h in booking["hits"]] == ["trip@x"]
        unknown = await client.call_tool("mail_search", {"q": "custom:flight:AB1"})
        assert error_code(unknown) == ErrorCode.INVALID_REQUEST

        related = (await client.call_tool("mail_find_related", {
            "message_id": stack["ids"]["pcn@x"]})).structured_content
        assert back[related["hits"][0]["message_id"]] == "appeal@x"
        assert "ref:WK05123456" in related["hits"][0]["why"]["matched"]

        people = (await client.call_tool("mail_search_contacts", {"q": "ann"})).structured_content
        assert [c["address"] for c in people["data"]] == ["ann@clients.example"]
        empty = await client.call_tool("mail_search_contacts", {"q": "  "})
        assert error_code(empty) == ErrorCode.INVALID_REQUEST


async def test_tenant_scope_rules(stack, conn) -> None:
    async with sdk_client(stack["url"], stack["token"]) as client:
        denied = await client.call_tool("mail_search", {"q": "parking", "scope": "tenant"})
        assert error_code(denied) == ErrorCode.SCOPE_DENIED
    async with sdk_client(stack["url"], stack["tenant_token"]) as client:
        both = (await client.call_tool("mail_search", {"q": "parking", "scope": "tenant",
                                                       "mode": "keyword"})).structured_content
        assert {h["identity_id"] for h in both["hits"]} == {stack["identity_id"], stack["second"]}
        assert both["partial"] is False and both["failed_identities"] == []
        # an identity named beside scope tenant was silently ignored (found by an attack)
        named_one = await client.call_tool("mail_search", {"q": "parking", "scope": "tenant",
                                                            "identity": stack["identity_id"]})
        assert error_code(named_one) == ErrorCode.INVALID_REQUEST
        assert json.loads(named_one.content[0].text)["error"]["details"] == {"path": "identity"}

        await conn.execute("UPDATE identities SET status = 'deleting' WHERE id = $1", stack["second"])
        partial = (await client.call_tool("mail_search", {
            "q": "parking", "scope": "tenant", "mode": "keyword",
            "identity_ids": [stack["identity_id"], stack["second"]]})).structured_content
        assert partial["partial"] is True and partial["failed_identities"] == [stack["second"]]
        assert {h["identity_id"] for h in partial["hits"]} == {stack["identity_id"]}

        for n in range(101):
            await create_identity(conn, stack["tenant_id"], f"agent{n}@acme.example")
        too_large = await client.call_tool("mail_search", {"q": "parking", "scope": "tenant"})
        assert error_code(too_large) == ErrorCode.SCOPE_TOO_LARGE
        named = await client.call_tool("mail_search", {"q": "parking", "scope": "tenant",
                                                        "identity_ids": [stack["identity_id"]]})
        assert not named.is_error


async def test_categories_facets_and_message_triage_over_mcp(stack) -> None:
    back = {v: k for k, v in stack["ids"].items()}
    async with sdk_client(stack["url"], stack["token"]) as client:
        legal = (await client.call_tool("mail_search", {"q": "category:legal", "mode": "keyword"})
                 ).structured_content
        assert {back[h["message_id"]] for h in legal["hits"]} == {"pcn@x", "appeal@x"}
        assert legal["query"] == "category:legal"
        assert all(h["why"]["matched"] == ["category:legal"] for h in legal["hits"])
        wide = (await client.call_tool("mail_search", {"q": "parking OR lunch OR trip",
                                                       "mode": "keyword"})).structured_content
        assert {f["value"]: f["count"] for f in wide["facets"]["category"]} == {"legal": 2, "other": 2}
        bad = await client.call_tool("mail_search", {"q": "category:invoices"})
        assert error_code(bad) == ErrorCode.INVALID_REQUEST

        pcn = (await client.call_tool("mail_get_message", {"message_id": stack["ids"]["pcn@x"]})
               ).structured_content
        assert pcn["triage"] == {"category": "legal", "urgency": "normal", "risk_flags": [],
                                 "automated": False}
        assert {"kind": "plate", "value": "AB12CDE"} in pcn["refs"]
        assert {"kind": "pcn", "value": "WK05123456"} in pcn["refs"]
        thread = (await client.call_tool("mail_get_thread", {"thread_id": pcn["thread_id"]})
                  ).structured_content
        assert thread["messages"][0]["triage"]["category"] == "legal"


async def test_reindex_triages_and_extracts_mail_stored_before(db_url, conn) -> None:
    tenant_id, identity_id, _ = await tenant_with_identity(conn, "desk@acme.example")
    outcome, _ = await ingest_raw(conn, None, identity_id, mail(
        "inv@x", subject="Invoice 7 overdue", body="Booking XKA-123: please pay today."))
    await conn.execute("DELETE FROM message_triage")
    await set_pattern(conn, tenant_id, "booking", "[A-Z]{3}[0-9]{3}")
    done = pylota(db_url, "reindex", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"messages": 1, "recategorised": 1, "new_references": 1,
                                        "attachments_queued": 0}
    row = await conn.fetchrow("SELECT category, urgency FROM message_triage WHERE message_id = $1",
                              outcome.message_id)
    assert (row["category"], row["urgency"]) == ("billing", "high")
    assert await conn.fetchval("SELECT count(*) FROM message_refs WHERE kind = 'custom:booking'"
                               " AND value = 'XKA123'") == 1
    again = pylota(db_url, "reindex", "--identity", "desk@acme.example")
    assert again.stdout.strip() == ("read 1 message(s): 0 with a new category, 0 new reference(s),"
                                    " 0 attachment(s) queued for text extraction")
    unknown = pylota(db_url, "reindex", "--identity", "nobody@acme.example")
    assert unknown.returncode != 0 and "nobody@acme.example" in unknown.stderr
    assert "pylota identities create" in unknown.stderr and "key" not in unknown.stderr
    empty = pylota(db_url, "reindex", "--identity", "")
    assert empty.returncode != 0 and "No identity ''" in empty.stderr


async def test_backfill_command_embeds_mail_stored_without_vectors(db_url, conn, monkeypatch) -> None:
    _, identity_id, _ = await tenant_with_identity(conn, "desk@acme.example")
    await ingest_raw(conn, None, identity_id, mail("a@x", body="parking fine"))
    await conn.execute("DELETE FROM embedding_queue")
    monkeypatch.setenv("PM_EMBEDDER", "hash")
    done = pylota(db_url, "embeddings", "backfill", "--now")
    assert done.returncode == 0, done.stderr
    assert "queued 1 message(s) for hash-v1" in done.stdout and "embedded 1" in done.stdout
    assert await conn.fetchval("SELECT count(*) FROM message_embeddings") == 1
    again = pylota(db_url, "embeddings", "backfill")
    assert "queued 0" in again.stdout


async def test_demo_mailbox_by_reference_and_category(db_url, conn) -> None:
    """The demo mailbox (``demo/brightwell.mbox``) imported with ``pylota import``, searched through
    the real front: a purchase order written without its keyword, and each category."""
    _, _, token = await tenant_with_identity(conn, "desk@pylota.example")
    done = pylota(db_url, "import", "--identity", "desk@pylota.example", "demo/brightwell.mbox")
    assert done.returncode == 0 and "imported 8" in done.stdout, done.stdout + done.stderr
    async with running_front(settings_for(db_url)) as url, sdk_client(url, token) as client:
        async def subjects(q: str) -> list[str]:
            found = (await client.call_tool("mail_search", {"q": q, "mode": "keyword"})
                     ).structured_content
            return sorted(h["subject"] for h in found["hits"])

        assert await subjects("ref:PO-44817") == ["Booking request: van hire 8-12 September"]
        assert await subjects("ref:44817") == ["Booking request: van hire 8-12 September"]
        assert await subjects("category:billing") == ["Invoice INV-77120 for September"]
        assert await subjects("category:claims") == [
            "Claim CLM-5531: damage to vehicle AB12 CDE",
            "Re: Claim CLM-5531: damage to vehicle AB12 CDE"]
        assert await subjects("category:legal") == ["Penalty charge notice PCN KT09917332"]
        assert "Thanks for the van" in await subjects("category:other")


async def test_the_readme_deep_search_example_is_answered_by_the_day_on_the_demo_mailbox(
        db_url, conn) -> None:
    """README, "Deep search": "When is invoice INV-77120 due?" on the demo mailbox. Once the
    attachment's text was read, its "September 2026" was quoted instead of the sentence naming
    the day (found by a new user)."""
    _, _, token = await tenant_with_identity(conn, "desk@pylota.example")
    done = pylota(db_url, "import", "--identity", "desk@pylota.example", "demo/brightwell.mbox")
    assert done.returncode == 0, done.stdout + done.stderr
    settings = settings_for(db_url, pm_embedder="hash")
    async with running_worker(settings, batch=True), running_worker(settings):
        async with asyncio.timeout(90):  # the attachment's text, read by the batch worker
            while not await conn.fetchval(
                    "SELECT count(*) FROM attachment_texts WHERE status = 'ready'"):
                await asyncio.sleep(0.5)
        async with running_front(settings) as url, sdk_client(url, token) as client:
            result = (await client.call_tool("mail_deep_search", {
                "question": "When is invoice INV-77120 due?"})).structured_content
    assert result["status"] == "answered", result
    assert "payable by 3 October 2026" in result["answer"]
