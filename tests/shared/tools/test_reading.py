"""mail_list_identities, mail_get_message and mail_get_thread handlers with real keys and data:
scope rules of spec section 3, paging, and the budgets of section 4.2."""

from __future__ import annotations

import pytest

from shared.auth.keys import authenticate, create_key
from shared.auth.permissions import Permission
from shared.db import create_pool
from shared.errors import ErrorCode, PylotaError
from shared.mail.ingest import ingest_raw
from shared.mail.records import HeaderField
from shared.tenancy.store import create_identity, create_tenant
from shared.tools import identities, messages, threads
from shared.tools.context import ToolContext
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
    pool = await create_pool(db_url, max_size=4)

    async def ctx_for(identity_id: str | None, tenant_id: str = acme.id) -> ToolContext:
        _, token = await create_key(conn, tenant_id=tenant_id, identity_id=identity_id,
                                    permissions=list(Permission))
        principal = await authenticate(conn, f"Bearer {token}")
        return ToolContext(pool=pool, redis=redis, settings=settings_for(db_url),
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

    with pytest.raises(PylotaError) as raised:
        await identities.run(tenant_ctx, identities.ListIdentitiesArgs(tenant_id=world["acme"].id))
    assert raised.value.details["path"] == "tenant_id"
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
