"""Plans and allowances (shared.plans) on a real PostgreSQL: usage counted from the stored data,
grants from the plan, the tenant's own grants and top-ups, resets in the tenant's time zone, and
the send allowance charged by the real send path (shared.outbound.send)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from zoneinfo import ZoneInfo

import asyncpg
import msgspec
import pytest

from shared.auth.keys import create_key, revoke_key
from shared.auth.permissions import Permission
from shared.errors import ErrorCode, PylotaError
from shared.ingest.pipeline import ingest_raw
from shared.outbound.model import Sender, SendRequest
from shared.outbound.send import send_message
from shared.plans import ALLOWANCES, GB, PLANS, charge_send, clear_allowance, set_allowance, \
    set_plan, top_up, usage
from shared.tenancy.store import create_identity, create_tenant
from tests.conftest import database

WAIT = 20


def inbound(n: int) -> bytes:
    return (f"From: Jo <jo@example.com>\r\nTo: desk@acme.example\r\nSubject: Hello {n}\r\n"
            f"Message-ID: <in-{n}@example.com>\r\nDate: Mon, 30 Nov 2026 09:00:00 +0000\r\n"
            f"\r\nHi number {n}.\r\n").encode()


def request(key: str, to: list[str] | None = None) -> SendRequest:
    return msgspec.convert({"idempotency_key": key, "subject": "Figures", "text": "Below.",
                            "to": to or ["jo@example.com", "bo@example.net", "al@example.org"]},
                           SendRequest)


@pytest.fixture
async def tenant(conn: asyncpg.Connection):
    return await create_tenant(conn, "acme", time_zone="Pacific/Auckland")


@pytest.fixture
async def sender(conn: asyncpg.Connection, tenant) -> Sender:
    return Sender.of(await create_identity(conn, tenant.id, "desk@acme.example"))


async def test_usage_is_counted_from_the_stored_data(db_url, conn, tenant, sender):
    await create_identity(conn, tenant.id, "sales@acme.example")
    await create_identity(conn, tenant.id, "desk@mail.acme.example")
    for n in range(3):
        await ingest_raw(conn, None, sender.identity_id, inbound(n))
    async with database(db_url) as pool:
        await send_message(pool, None, sender, request("k-1"), check_allowance=charge_send)
    _, token_a = await create_key(conn, tenant_id=tenant.id, identity_id=None,
                                  permissions=[Permission.USAGE_READ])
    key_b, _ = await create_key(conn, tenant_id=tenant.id, identity_id=sender.identity_id,
                                permissions=[Permission.MESSAGES_SEND])
    await create_key(conn, tenant_id=tenant.id, identity_id=None,
                     permissions=[Permission.USAGE_READ])
    await revoke_key(conn, key_b)
    raw_bytes = await conn.fetchval("SELECT sum(octet_length(raw)) FROM raw_messages")

    found = await usage(conn, tenant.id)
    assert found.plan.id == "unlimited" and [p.id for p in found.plans] == list(PLANS)
    used = {name: getattr(found.allowances, name).used for name in ALLOWANCES}
    assert used == {"inboxes": 3, "sends": 3, "triage": 3, "custom_domains": 2,
                    "storage_gb": round(raw_bytes / GB, 9), "seats": 2}
    for name in ALLOWANCES:
        each = getattr(found.allowances, name)
        assert each.unlimited and each.granted is None and each.remaining is None
    assert found.allowances.sends.enforced and found.allowances.storage_gb.enforced
    assert not found.allowances.inboxes.enforced
    assert found.topups == []


async def test_resets_follow_the_tenants_time_zone(conn, tenant):
    found = await usage(conn, tenant.id)
    zone = ZoneInfo("Pacific/Auckland")
    local = found.as_of.astimezone(zone)
    midnight = (local + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    first = (local.replace(day=28) + timedelta(days=4)).replace(day=1, hour=0, minute=0,
                                                                 second=0, microsecond=0)
    assert found.allowances.sends.period == "day"
    assert found.allowances.sends.resets_at == midnight
    assert found.allowances.triage.period == "month"
    assert found.allowances.triage.resets_at == first
    assert found.allowances.inboxes.resets_at is None and found.allowances.inboxes.period is None


async def test_plan_grants_own_grants_and_top_ups(conn, tenant, sender):
    await set_plan(conn, tenant.id, "free")
    found = await usage(conn, tenant.id)
    assert found.plan.id == "free"
    assert (found.allowances.sends.granted, found.allowances.sends.remaining) == (100, 100)
    assert found.allowances.inboxes.used == 1 and found.allowances.inboxes.remaining == 2

    await set_allowance(conn, tenant.id, "sends", 10)
    await set_allowance(conn, tenant.id, "storage_gb", None)
    await set_allowance(conn, tenant.id, "seats", 0.5)
    await top_up(conn, tenant.id, "sends", 5, note="launch")
    await top_up(conn, tenant.id, "storage_gb", 3)  # unlimited stays unlimited
    found = await usage(conn, tenant.id)
    assert found.allowances.sends.granted == 15 and not found.allowances.sends.unlimited
    assert found.allowances.storage_gb.unlimited and found.allowances.storage_gb.granted is None
    assert found.allowances.seats.granted == 0.5
    assert [(t.allowance, t.amount, t.note) for t in found.topups] == [
        ("sends", 5, "launch"), ("storage_gb", 3, None)]

    await clear_allowance(conn, tenant.id, "sends")
    assert (await usage(conn, tenant.id)).allowances.sends.granted == 105  # plan + top-up

    # yesterday's top-up of sends no longer counts; one of inboxes still does
    await conn.execute("UPDATE allowance_topups SET created_at = created_at - interval '2 days'")
    await top_up(conn, tenant.id, "inboxes", 2)
    await conn.execute("UPDATE allowance_topups SET created_at = created_at - interval '2 days'")
    found = await usage(conn, tenant.id)
    assert found.allowances.sends.granted == 100
    assert found.allowances.inboxes.granted == 5


async def test_unknown_plans_allowances_and_amounts_are_refused(conn, tenant):
    for call, path in ((set_plan(conn, tenant.id, "gold"), "plan"),
                       (set_allowance(conn, tenant.id, "bananas", 3), "allowance"),
                       (set_allowance(conn, tenant.id, "sends", -1), "granted"),
                       (top_up(conn, tenant.id, "sends", 0), "amount")):
        with pytest.raises(PylotaError) as caught:
            await call
        assert caught.value.code is ErrorCode.INVALID_REQUEST
        assert caught.value.details == {"path": path}


async def test_a_spent_send_allowance_stores_nothing_and_the_same_key_sends_after_a_top_up(
        db_url, conn, tenant, sender):
    await set_allowance(conn, tenant.id, "sends", 4)
    async with database(db_url) as pool:
        await send_message(pool, None, sender, request("k-1"), check_allowance=charge_send)
        messages = await conn.fetchval("SELECT count(*) FROM messages")
        with pytest.raises(PylotaError) as caught:
            await send_message(pool, None, sender, request("k-2"), check_allowance=charge_send)
        error = caught.value
        assert error.code is ErrorCode.BILLING_LIMIT and error.status == 402
        assert {k: error.details[k] for k in ("allowance", "granted", "used", "requested")} == {
            "allowance": "sends", "granted": 4, "used": 3, "requested": 3}
        assert "idempotency_key" in error.fix
        # one send is left: not "spent" (found by a new user)
        assert error.message == ("The plan's daily send allowance cannot take this message: 3 "
                                 "of 4 sends used today leaves 1, and the message has 3 "
                                 "recipients (one send each).")
        assert await conn.fetchval("SELECT count(*) FROM messages") == messages
        assert await conn.fetchval("SELECT count(*) FROM send_requests") == 1
        assert await conn.fetchval("SELECT count(*) FROM outbound_messages") == 1
        # a smaller message still fits
        await top_up(conn, tenant.id, "sends", 2)
        sent = await send_message(pool, None, sender, request("k-2"),
                                  check_allowance=charge_send)
    assert not sent.deduplicated and sent.message.status == "queued"
    assert (await usage(conn, tenant.id)).allowances.sends.remaining == 0


async def test_a_send_that_would_overfill_storage_is_refused_and_one_that_fits_is_sent(
        db_url, conn, tenant, sender):
    """Storage not yet full, but this message would pass the grant: refused, nothing stored
    (before, one 3 MB send took usage to 200 times a small grant: found by an attack)."""
    await ingest_raw(conn, None, sender.identity_id, inbound(1))
    stored = await conn.fetchval("SELECT sum(octet_length(raw)) FROM raw_messages")
    await set_allowance(conn, tenant.id, "storage_gb", (stored + 100) / GB)
    async with database(db_url) as pool:
        with pytest.raises(PylotaError) as caught:
            await send_message(pool, None, sender, request("k-1"), check_allowance=charge_send)
        assert caught.value.details["allowance"] == "storage_gb"
        assert caught.value.details["requested"] * GB > 100
        assert await conn.fetchval("SELECT count(*) FROM outbound_messages") == 0
        await set_allowance(conn, tenant.id, "storage_gb", (stored + 100_000) / GB)
        sent = await send_message(pool, None, sender, request("k-1"), check_allowance=charge_send)
    assert sent.message.status == "queued"
    assert await conn.fetchval("SELECT sum(octet_length(raw)) FROM raw_messages") <= stored + 100_000


async def test_full_storage_refuses_a_send(db_url, conn, tenant, sender):
    await ingest_raw(conn, None, sender.identity_id, inbound(1))
    await set_allowance(conn, tenant.id, "storage_gb", 1e-9)  # one byte
    async with database(db_url) as pool:
        with pytest.raises(PylotaError) as caught:
            await send_message(pool, None, sender, request("k-1"), check_allowance=charge_send)
    assert caught.value.code is ErrorCode.BILLING_LIMIT
    assert caught.value.details["allowance"] == "storage_gb"
    assert await conn.fetchval("SELECT count(*) FROM outbound_messages") == 0


async def test_concurrent_sends_never_both_take_the_last_one(db_url, conn, tenant, sender):
    await set_allowance(conn, tenant.id, "sends", 1)
    async with database(db_url, size=8) as pool:
        async with asyncio.timeout(WAIT):
            outcomes = await asyncio.gather(
                *(send_message(pool, None, sender, request(f"k-{n}", to=["jo@example.com"]),
                               check_allowance=charge_send) for n in range(6)),
                return_exceptions=True)
    refused = [o for o in outcomes if isinstance(o, PylotaError)]
    assert len(refused) == 5 and {e.code for e in refused} == {ErrorCode.BILLING_LIMIT}
    assert await conn.fetchval("SELECT count(*) FROM outbound_messages") == 1


async def test_unlimited_sends_take_no_lock(db_url, conn, tenant, sender):
    await set_plan(conn, tenant.id, "unlimited")
    async with conn.transaction():
        # another transaction holds the plan row; an unlimited send does not wait for it
        await conn.execute("SELECT 1 FROM tenant_plans WHERE tenant_id = $1 FOR UPDATE",
                           tenant.id)
        async with database(db_url) as pool, asyncio.timeout(WAIT):
            sent = await send_message(pool, None, sender, request("k-1"),
                                      check_allowance=charge_send)
    assert not sent.deduplicated
