"""Keys kept in a front's memory (shared.auth.cache): answered without PostgreSQL, forgotten on
every change within a bound, never used while changes cannot be heard."""

from __future__ import annotations

import asyncio
import json
import secrets
from datetime import datetime, timedelta, timezone

import asyncpg
import pytest

from shared.auth.cache import APPLICATION_NAME, RECONNECT_DELAYS, KeyCache
from shared.auth.keys import create_key, create_partner_key, revoke_key
from shared.auth.permissions import Permission
from shared.db import open_database
from shared.errors import ErrorCode, PylotaError
from shared.logs import configure
from shared.tenancy.store import (create_identity, create_partner, create_tenant,
                                  set_partner_status)
from tests.faults.kit import Relay, eventually

#: How soon a change must reach a listening cache (README "API keys and key levels").
HEARD_WITHIN = 1.0


@pytest.fixture
async def db(db_url):
    database = await open_database(db_url, size=2, acquire_seconds=5)
    yield database
    await database.close()


@pytest.fixture
async def cache(db_url):
    kept = KeyCache(db_url)
    await kept.start()
    await eventually(lambda: kept.listening, 5, "the cache listens")
    yield kept
    await kept.stop()


@pytest.fixture
async def world(conn):
    partner = await create_partner(conn, "resells")
    tenant = await create_tenant(conn, "acme", partner_id=partner.id)
    identity = await create_identity(conn, tenant.id, "desk@acme.example")
    key_id, token = await create_key(conn, tenant_id=tenant.id, identity_id=identity.id,
                                     permissions=[Permission.MESSAGES_READ])
    return {"partner": partner, "tenant": tenant, "identity": identity, "key_id": key_id,
            "token": token}


async def refused(cache: KeyCache, db, token: str) -> ErrorCode | None:
    try:
        await cache.authenticate(db, f"Bearer {token}")
    except PylotaError as exc:
        return exc.code
    return None


async def closed_pool(db_url):
    """A pool on which every acquire fails."""
    unreachable = await open_database(db_url, size=1, acquire_seconds=1)
    await unreachable.close()
    return unreachable


async def kept(cache: KeyCache, db, unreachable, token: str) -> bool:
    """Whether ``token`` is answered from memory once read through ``db``. Changes made just
    before (creating the world notifies too) may reach the cache after the read and empty it,
    so callers ask again until it holds."""
    await cache.authenticate(db, f"Bearer {token}")
    try:
        await cache.authenticate(unreachable, f"Bearer {token}")
    except asyncpg.InterfaceError:
        return False
    return True


async def test_a_kept_key_is_answered_without_postgresql(cache, db, db_url, world):
    unreachable = await closed_pool(db_url)
    await eventually(lambda: kept(cache, db, unreachable, world["token"]), HEARD_WITHIN,
                     "the key is kept")
    first = await cache.authenticate(unreachable, f"Bearer {world['token']}")
    assert first.identity is not None and first.identity.addresses == ["desk@acme.example"]
    with pytest.raises(Exception):  # the same pool cannot serve a key it does not hold
        await cache.authenticate(unreachable, f"Bearer pmk_live_{secrets.token_urlsafe(32)}")


@pytest.mark.parametrize("change, code", [
    ("revoke", ErrorCode.KEY_REVOKED),
    ("expire", ErrorCode.KEY_EXPIRED),
    ("suspend", ErrorCode.PARTNER_SUSPENDED),
])
async def test_each_change_is_heard_within_the_bound(cache, db, conn, world, change, code):
    assert await refused(cache, db, world["token"]) is None  # kept now
    if change == "revoke":
        await revoke_key(conn, world["key_id"])
    elif change == "expire":
        await conn.execute("UPDATE api_keys SET expires_at = now() WHERE id = $1",
                           world["key_id"])
    else:
        await set_partner_status(conn, world["partner"].id, "suspended")
    assert await eventually(lambda: refused(cache, db, world["token"]), HEARD_WITHIN,
                            f"{change} is heard") == code


async def test_an_identity_keys_own_identity_follows_its_addresses(cache, db, conn, world):
    assert (await cache.authenticate(db, f"Bearer {world['token']}")).identity.addresses == [
        "desk@acme.example"]
    await conn.execute("INSERT INTO identity_addresses (address, identity_id) VALUES ($1, $2)",
                       "sales@acme.example", world["identity"].id)

    async def addresses():
        principal = await cache.authenticate(db, f"Bearer {world['token']}")
        return "sales@acme.example" in principal.identity.addresses
    await eventually(addresses, HEARD_WITHIN, "the new address is heard")


async def test_a_kept_key_expires_on_time_without_a_notification(cache, db, db_url, conn, world):
    await conn.execute("UPDATE api_keys SET expires_at = now() + interval '1.5 seconds'"
                       " WHERE id = $1", world["key_id"])
    unreachable = await closed_pool(db_url)
    await eventually(lambda: kept(cache, db, unreachable, world["token"]), HEARD_WITHIN,
                     "the key is kept with its expiry date")
    await asyncio.sleep(1.6)
    assert await refused(cache, unreachable, world["token"]) is ErrorCode.KEY_EXPIRED


async def test_while_changes_cannot_be_heard_every_key_is_read_again(db, db_url, conn, world):
    relay = Relay()
    await relay.start()
    cache = KeyCache(relay.dsn(db_url))
    await cache.start()
    try:
        await eventually(lambda: cache.listening, 5, "the cache listens through the relay")
        assert await refused(cache, db, world["token"]) is None
        await relay.cut()  # the listening connection is lost, and cannot come back
        await eventually(lambda: not cache.listening, HEARD_WITHIN, "the loss is noticed")
        await revoke_key(conn, world["key_id"])  # announced to nobody
        assert await refused(cache, db, world["token"]) is ErrorCode.KEY_REVOKED
        assert len(cache) == 0
        await relay.start()
        await eventually(lambda: cache.listening, 10, "the cache listens again")
    finally:
        await cache.stop()
        await relay.cut()


async def test_unknown_keys_are_never_kept(cache, db):
    for _ in range(3):
        assert await refused(cache, db, f"pmk_live_{secrets.token_urlsafe(32)}") is \
            ErrorCode.UNAUTHENTICATED
    assert len(cache) == 0


async def test_last_use_is_written_once_a_minute_for_kept_keys(cache, db, conn, world):
    await cache.authenticate(db, f"Bearer {world['token']}")
    written = await conn.fetchval("SELECT last_used_at FROM api_keys WHERE id = $1",
                                  world["key_id"])
    assert written is not None
    assert datetime.now(timezone.utc) - written < timedelta(seconds=30)
    await cache.authenticate(db, f"Bearer {world['token']}")
    assert await conn.fetchval("SELECT last_used_at FROM api_keys WHERE id = $1",
                               world["key_id"]) == written


async def test_a_partner_key_is_kept_and_its_suspension_heard(cache, db, conn, world):
    _, token = await create_partner_key(conn, partner_id=world["partner"].id,
                                        permissions=[Permission.IDENTITIES_READ])
    principal = await cache.authenticate(db, f"Bearer {token}")
    assert principal.identity is None and len(cache) == 1
    await set_partner_status(conn, world["partner"].id, "suspended")
    assert await eventually(lambda: refused(cache, db, token), HEARD_WITHIN,
                            "the suspension is heard") is ErrorCode.PARTNER_SUSPENDED


async def test_every_loss_of_the_listening_connection_is_logged_and_mended_at_once(
        cache, conn, capsys):
    """Each outage writes its line, and the cache listens again after the shortest delay: a
    loss after an earlier one is neither silent nor slower to mend."""
    configure("info")
    for _ in range(3):
        capsys.readouterr()
        pids = await conn.fetch("SELECT pid FROM pg_stat_activity WHERE application_name = $1"
                                " AND datname = current_database()", APPLICATION_NAME)
        assert pids, "the cache's listening connection"
        for row in pids:
            await conn.execute("SELECT pg_terminate_backend($1)", row["pid"])
        await eventually(lambda: not cache.listening, HEARD_WITHIN, "the loss is noticed")
        await eventually(lambda: cache.listening, RECONNECT_DELAYS[0] + 2, "listening again")
        events = [json.loads(line)["event"] for line in capsys.readouterr().err.splitlines()]
        assert events.count("key_cache_not_listening") == 1, events
