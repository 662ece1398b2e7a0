"""mail_list_identities, mail_get_message and mail_get_thread handlers with real keys and data:
scope rules of spec section 3, paging, and the budgets of section 4.2."""

from __future__ import annotations

import pytest

from shared.auth.keys import authenticate, create_key
from shared.auth.permissions import Permission
from shared.db import open_database
from shared.errors import ErrorCode, PylotaError
from shared.ingest.pipeline import ingest_raw
from shared.mail.records import HeaderField
from shared.tenancy.store import create_identity, create_tenant
from shared.tools import identities, messages, threads
from shared.tools.context import ToolContext
from shared.budget import RESULT_BYTES
from shared.mail.reading import LIST_ITEMS, SHRUNK_CHARS, SHRUNK_ITEMS, SUBJECT_CHARS, budget_message
from tests.conftest import settings_for


def eml(mid: str, subject: str, body: str, *, refs: str = "", minute: int = 0) -> bytes:
    head = (f"Message-ID: <{mid}>\r\nFrom: Ann <ann@example.net>\r\nTo: desk@acme.example\r\n"
            f"Subject: {subject}\r\nDate: Mon, 30 Nov 2026 09:{minute:02d}:00 +0000\r\n")
    if refs:
        head += f"References: {refs}\r\n"
    return (head + "\r\n" + body + "\r\n").encode()


@pytest.fixture
async def world(db_url, conn, redis):
    acme = await create_tenant(conn, "acme")
    desk = await create_identity(conn, acme.id, "desk@acme.example")
    sales = await create_identity(conn, acme.id, "sales@acme.example")
    other = await create_tenant(conn, "other")
    outsider = await create_identity(conn, other.id, "x@other.example")
    pool = await open_database(db_url, size=4, acquire_seconds=5)

    async def ctx_for(identity_id: str | None, tenant_id: str = acme.id) -> ToolContext:
        _, token = await create_key(conn, tenant_id=tenant_id, identity_id=identity_id,
                                    permissions=list(Permission))
        principal = await authenticate(conn, f"Bearer {token}")
        return ToolContext(db=pool, redis=redis, settings=settings_for(db_url),
                           principal=principal, request_id="req_test")

    yield {"acme": acme, "desk": desk, "sales": sales, "outsider": outsider, "ctx_for": ctx_for}
    await pool.close()


async def test_list_identities_by_key_level_with_paging(world):
    tenant_ctx = await world["ctx_for"](None)
    page = await identities.run(tenant_ctx, identities.ListIdentitiesArgs(limit=1))
    assert len(page.data) == 1 and page.next_cursor
    rest = await identities.run(tenant_ctx, identities.ListIdentitiesArgs(limit=1, cursor=page.next_cursor))
    assert {page.data[0].id, rest.data[0].id} == {world["desk"].id, world["sales"].id}
    assert rest.next_cursor is None

    identity_ctx = await world["ctx_for"](world["desk"].id)
    own = await identities.run(identity_ctx, identities.ListIdentitiesArgs())
    assert [i.addresses for i in own.data] == [["desk@acme.example"]]

    # naming its own tenant narrows nothing; naming another is out of scope (spec section 3)
    named = await identities.run(tenant_ctx, identities.ListIdentitiesArgs(
        tenant_id=world["acme"].id))
    assert {i.id for i in named.data} == {world["desk"].id, world["sales"].id}
    with pytest.raises(PylotaError) as raised:
        await identities.run(tenant_ctx, identities.ListIdentitiesArgs(
            tenant_id=world["outsider"].tenant_id))
    assert raised.value.code is ErrorCode.SCOPE_DENIED
    with pytest.raises(PylotaError) as raised:
        await identities.run(tenant_ctx, identities.ListIdentitiesArgs(cursor="bm9wZQ"))
    assert raised.value.details["path"] == "cursor"


async def test_identity_argument_rules(world, conn):
    outcome, _ = await ingest_raw(conn, None, world["desk"].id, eml("m1@x", "hello", "hi"))
    tenant_ctx = await world["ctx_for"](None)
    desk_ctx = await world["ctx_for"](world["desk"].id)
    sales_ctx = await world["ctx_for"](world["sales"].id)

    async def get(ctx, identity=None):
        return await messages.run(ctx, messages.GetMessageArgs(message_id=outcome.message_id,
                                                               identity=identity))

    assert (await get(desk_ctx)).message_id == "m1@x"
    assert (await get(desk_ctx, "DESK@acme.example")).message_id == "m1@x"
    assert (await get(tenant_ctx, "desk@acme.example")).message_id == "m1@x"
    assert (await get(tenant_ctx, world["desk"].id)).message_id == "m1@x"
    cases = [(tenant_ctx, None, ErrorCode.INVALID_REQUEST),            # wider keys must say which
             (desk_ctx, "sales@acme.example", ErrorCode.IDENTITY_NOT_FOUND),
             (tenant_ctx, "x@other.example", ErrorCode.IDENTITY_NOT_FOUND),   # another tenant
             (sales_ctx, None, ErrorCode.MESSAGE_NOT_FOUND)]          # not in this mailbox
    for ctx, identity, code in cases:
        with pytest.raises(PylotaError) as raised:
            await get(ctx, identity)
        assert raised.value.code is code, (identity, code)


async def test_thread_pages_oldest_first_and_texts_are_budgeted(world, conn):
    desk_ctx = await world["ctx_for"](world["desk"].id)
    long_body = "word " * 3000  # 15,000 characters
    refs = ""
    for i in range(5):
        await ingest_raw(conn, None, world["desk"].id,
                         eml(f"t{i}@x", "Re: long" if i else "long", long_body, refs=refs, minute=i))
        refs += f" <t{i}@x>"
    thread_id = await conn.fetchval("SELECT id FROM threads")
    first = await threads.run(desk_ctx, threads.GetThreadArgs(thread_id=thread_id, messages_limit=2))
    assert [m.message_id for m in first.messages] == ["t0@x", "t1@x"]
    assert first.truncated and all(m.new_text_truncated for m in first.messages)
    assert all(len(m.new_text) == threads.THREAD_MESSAGE_CHARS for m in first.messages)
    assert first.messages[0].new_text.endswith("…")
    seen = [m.message_id for m in first.messages]
    cursor = first.next_cursor
    while cursor:
        page = await threads.run(desk_ctx, threads.GetThreadArgs(thread_id=thread_id,
                                                                 messages_limit=2, cursor=cursor))
        seen += [m.message_id for m in page.messages]
        cursor = page.next_cursor
    assert seen == [f"t{i}@x" for i in range(5)]

    one = await messages.run(desk_ctx, messages.GetMessageArgs(
        message_id=first.messages[0].id, include_quoted=True, include_headers=True))
    assert not one.truncated and len(one.new_text) < messages.MESSAGE_TEXT_CHARS
    assert HeaderField(name="Subject", value="long") in one.headers and one.text is not None
    assert one.read is False and one.labels == []

    with pytest.raises(PylotaError) as raised:
        await threads.run(await world["ctx_for"](world["sales"].id),
                          threads.GetThreadArgs(thread_id=thread_id))
    assert raised.value.code is ErrorCode.THREAD_NOT_FOUND


def _encoded(result) -> int:
    import msgspec
    return len(msgspec.json.encode(result))


async def test_huge_messages_fit_the_budget_and_pages_move_on(world, conn):
    """A message with 1,000 long recipients in To and in Cc and 300 attachments (the attack
    report of issue 4 had 10,000 of each)."""
    desk_ctx = await world["ctx_for"](world["desk"].id)
    recipients = ", ".join(f"\"Person {n:05d} {'y' * 240}\" <p{n:05d}@{'x' * 60}.example>"
                           for n in range(1_000))
    parts = "".join(f"--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: "
                    f"attachment; filename=f{n:04d}.exe\r\n\r\nx\r\n" for n in range(300))
    raw = (f"Message-ID: <big@x>\r\nFrom: Ann <ann@example.net>\r\nTo: {recipients}\r\n"
           f"Cc: {recipients}\r\nSubject: big\r\nMIME-Version: 1.0\r\n"
           f"Content-Type: multipart/mixed; boundary=b\r\n\r\n{parts}--b--\r\n").encode()
    await ingest_raw(conn, None, world["desk"].id, raw)
    for n in range(3):
        await ingest_raw(conn, None, world["desk"].id,
                         raw.replace(b"<big@x>", f"<big{n}@x>\r\nReferences: <big@x>".encode()))
    big_id, thread_id = await conn.fetchrow("SELECT id, thread_id FROM messages"
                                            " WHERE rfc_message_id = 'big@x'")

    one = await messages.run(desk_ctx, messages.GetMessageArgs(message_id=big_id,
                                                               include_headers=True))
    assert _encoded(one) <= RESULT_BYTES
    assert one.truncated and one.to_truncated and one.cc_truncated and one.attachments_truncated
    assert 0 < len(one.to) <= LIST_ITEMS and one.to[0].address.startswith("p00000@")
    assert "dangerous_attachment" in one.triage.risk_flags

    seen, cursor = [], None
    for _ in range(10):
        page = await threads.run(desk_ctx, threads.GetThreadArgs(
            thread_id=thread_id, messages_limit=10, cursor=cursor))
        assert page.messages and _encoded(page) <= RESULT_BYTES
        seen += [m.id for m in page.messages]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 4


def test_a_message_too_big_even_with_its_lists_cut_is_shrunk():
    from datetime import datetime, timezone

    from shared.mail.model import Address
    from shared.mail.records import MessageRecord
    people = [Address(address=f"p{n}@{'x' * 250}.example", name="n" * 256) for n in range(500)]
    record = MessageRecord(
        id="msg_1", thread_id="thr_1", identity_id="idn_1", message_id=None, in_reply_to=[],
        references=[], subject="s" * 5000, to=people, cc=people, reply_to=people,
        date=datetime.now(timezone.utc), direction="inbound", status="received", labels=[],
        read=False, new_text="w " * 20_000, triage=None, trust=None, refs=[])
    assert budget_message(record, messages.MESSAGE_TEXT_CHARS)
    assert _encoded(record) <= RESULT_BYTES
    assert len(record.to) == SHRUNK_ITEMS and record.to_truncated
    assert len(record.new_text) == SHRUNK_CHARS and record.new_text_truncated
    assert len(record.subject) == SUBJECT_CHARS and record.subject_truncated
