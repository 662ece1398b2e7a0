"""API keys of every level: minted once, stored hashed, and resolved with the errors of spec
section 2.1 step 5; test mode, partner suspension and last use (spec section 3)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import asyncpg
import msgspec
import pytest

from shared.auth.keys import (LAST_USED_RESOLUTION, authenticate, create_key, create_partner_key,
                              create_platform_key, hash_token, list_keys, revoke_key)
from shared.auth.permissions import FORBIDDEN_FOR_LEVEL, KeyLevel, Permission, parse_permissions
from shared.errors import ErrorCode, PylotaError
from shared.ids import Prefix, new_id
from shared.tenancy.store import (create_identity, create_partner, create_tenant,
                                  set_partner_status)


@pytest.fixture
async def tenant(conn):
    return await create_tenant(conn, "acme")


async def code_of(conn, header: str | None) -> ErrorCode:
    with pytest.raises(PylotaError) as raised:
        await authenticate(conn, header)
    return raised.value.code


async def test_tenant_key_round_trip(conn, tenant):
    key_id, token = await create_key(conn, tenant_id=tenant.id, identity_id=None,
                                     permissions=[Permission.SEARCH_READ])
    assert token.startswith("pmk_live_") and len(token) == len("pmk_live_") + 43
    stored = await conn.fetchval("SELECT token_hash FROM api_keys WHERE id = $1", key_id)
    assert stored == hash_token(token) and token.encode() not in stored
    principal = await authenticate(conn, f"Bearer {token}")
    assert (principal.key_id, principal.level, principal.tenant_id, principal.identity_id) == (
        key_id, KeyLevel.TENANT, tenant.id, None)
    assert principal.mode == "live"
    # the scheme is case-insensitive (RFC 9110 section 11.1)
    assert (await authenticate(conn, f"bearer  {token} ")).key_id == key_id


async def test_test_tenants_mint_test_keys(conn):
    tenant = await create_tenant(conn, "sandbox", mode="test")
    _, token = await create_key(conn, tenant_id=tenant.id, identity_id=None,
                                permissions=[Permission.SEARCH_READ])
    assert token.startswith("pmk_test_")
    assert (await authenticate(conn, f"Bearer {token}")).mode == "test"


async def test_missing_unknown_expired_revoked_and_suspended(conn, tenant):
    assert await code_of(conn, None) is ErrorCode.UNAUTHENTICATED
    assert await code_of(conn, "Basic dXNlcjpwYXNz") is ErrorCode.UNAUTHENTICATED
    assert await code_of(conn, "Bearer pmk_live_" + "A" * 43) is ErrorCode.UNAUTHENTICATED

    past = datetime.now(timezone.utc) - timedelta(minutes=1)
    _, expired = await create_key(conn, tenant_id=tenant.id, identity_id=None,
                                  permissions=[Permission.SEARCH_READ], expires_at=past)
    assert await code_of(conn, f"Bearer {expired}") is ErrorCode.KEY_EXPIRED

    key_id, revoked = await create_key(conn, tenant_id=tenant.id, identity_id=None,
                                       permissions=[Permission.SEARCH_READ])
    await conn.execute("UPDATE api_keys SET revoked_at = now() WHERE id = $1", key_id)
    assert await code_of(conn, f"Bearer {revoked}") is ErrorCode.KEY_REVOKED

    partner = new_id(Prefix.PARTNER)
    await conn.execute("INSERT INTO partners (id, name, status) VALUES ($1, 'p', 'suspended')", partner)
    await conn.execute("UPDATE tenants SET partner_id = $1 WHERE id = $2", partner, tenant.id)
    _, under = await create_key(conn, tenant_id=tenant.id, identity_id=None,
                                permissions=[Permission.SEARCH_READ])
    assert await code_of(conn, f"Bearer {under}") is ErrorCode.PARTNER_SUSPENDED


async def test_identity_keys_stay_in_their_tenant(conn, tenant):
    other = await create_tenant(conn, "other")
    stranger = await create_identity(conn, other.id, "x@other.example")
    with pytest.raises(PylotaError) as raised:
        await create_key(conn, tenant_id=tenant.id, identity_id=stranger.id,
                         permissions=[Permission.MESSAGES_READ])
    assert raised.value.code is ErrorCode.INVALID_REQUEST
    assert raised.value.details["path"] == "identity"


def test_permission_lists():
    assert parse_permissions("search:read, messages:read") == [Permission.MESSAGES_READ,
                                                               Permission.SEARCH_READ]
    assert set(parse_permissions("all")) == set(Permission)
    with pytest.raises(ValueError, match="unknown permission 'search:write'"):
        parse_permissions("search:write")
    with pytest.raises(ValueError, match="no permissions"):
        parse_permissions(" , ")
    # "all" beside others was "unknown permission 'all'; use 'all' or …" (a new user's report)
    with pytest.raises(ValueError, match="'all' stands alone"):
        parse_permissions("all,identities:sign")


# --- Key levels (spec section 3), test mode (L4), last use ----------------------------------


async def test_platform_and_partner_keys_resolve_to_their_level(conn):
    partner = await create_partner(conn, "reseller")
    platform_id, platform = await create_platform_key(conn, permissions=[Permission.SEARCH_READ],
                                                      name="ops")
    partner_id, wide = await create_partner_key(conn, partner_id=partner.id, mode="test",
                                                permissions=[Permission.MESSAGES_READ])
    assert platform.startswith("pmk_live_") and wide.startswith("pmk_test_")
    as_platform = await authenticate(conn, f"Bearer {platform}")
    assert (as_platform.level, as_platform.partner_id, as_platform.tenant_id,
            as_platform.mode) == (KeyLevel.PLATFORM, None, None, "live")
    as_partner = await authenticate(conn, f"Bearer {wide}")
    assert (as_partner.key_id, as_partner.level, as_partner.partner_id, as_partner.mode) == (
        partner_id, KeyLevel.PARTNER, partner.id, "test")
    listed = await list_keys(conn, level=KeyLevel.PLATFORM)
    assert [(k.id, k.name) for k in listed] == [(platform_id, "ops")]
    assert [k.id for k in await list_keys(conn, partner_id=partner.id)] == [partner_id]


@pytest.mark.parametrize("forbidden", sorted(FORBIDDEN_FOR_LEVEL[KeyLevel.PARTNER]))
async def test_wide_keys_never_hold_sign_or_usage(conn, forbidden):
    partner = await create_partner(conn, "reseller")
    for make in (lambda p: create_platform_key(conn, permissions=p),
                 lambda p: create_partner_key(conn, partner_id=partner.id, permissions=p)):
        with pytest.raises(PylotaError) as raised:
            await make([Permission.SEARCH_READ, forbidden])
        assert raised.value.code is ErrorCode.INVALID_REQUEST
        assert raised.value.details["path"] == "permissions"
    key_id, _ = await create_platform_key(conn, permissions=[Permission.SEARCH_READ])
    # the table refuses it too, whoever writes the row
    with pytest.raises(asyncpg.CheckViolationError):
        await conn.execute("UPDATE api_keys SET permissions = permissions || $2::text"
                           " WHERE id = $1", key_id, forbidden.value)


async def test_a_partner_key_needs_a_partner(conn):
    with pytest.raises(PylotaError) as raised:
        await create_partner_key(conn, partner_id=new_id(Prefix.PARTNER),
                                 permissions=[Permission.SEARCH_READ])
    assert raised.value.details["path"] == "partner"


async def test_suspending_a_partner_refuses_its_keys_and_its_tenants_keys(conn):
    partner = await create_partner(conn, "reseller")
    tenant = await create_tenant(conn, "shop", partner_id=partner.id)
    identity = await create_identity(conn, tenant.id, "desk@shop.example")
    tokens = [
        (await create_partner_key(conn, partner_id=partner.id,
                                  permissions=[Permission.SEARCH_READ]))[1],
        (await create_key(conn, tenant_id=tenant.id, identity_id=None,
                          permissions=[Permission.SEARCH_READ]))[1],
        (await create_key(conn, tenant_id=tenant.id, identity_id=identity.id,
                          permissions=[Permission.SEARCH_READ]))[1],
    ]
    unrelated = await create_tenant(conn, "elsewhere")
    _, bystander = await create_key(conn, tenant_id=unrelated.id, identity_id=None,
                                    permissions=[Permission.SEARCH_READ])
    await set_partner_status(conn, partner.id, "suspended")
    for token in tokens:
        assert await code_of(conn, f"Bearer {token}") is ErrorCode.PARTNER_SUSPENDED
    assert (await authenticate(conn, f"Bearer {bystander}")).tenant_id == unrelated.id
    await set_partner_status(conn, partner.id, "active")
    for token in tokens:
        await authenticate(conn, f"Bearer {token}")


async def test_a_key_whose_mode_is_not_its_tenants_is_refused(conn, tenant):
    _, token = await create_key(conn, tenant_id=tenant.id, identity_id=None,
                                permissions=[Permission.SEARCH_READ])
    await conn.execute("UPDATE tenants SET mode = 'test' WHERE id = $1", tenant.id)
    assert await code_of(conn, f"Bearer {token}") is ErrorCode.UNAUTHENTICATED


async def test_last_use_is_written_at_most_once_a_minute(conn, tenant):
    key_id, token = await create_key(conn, tenant_id=tenant.id, identity_id=None,
                                     permissions=[Permission.SEARCH_READ])
    assert (await list_keys(conn, tenant.id))[0].last_used_at is None
    await authenticate(conn, f"Bearer {token}")
    first = (await list_keys(conn, tenant.id))[0].last_used_at
    assert first is not None
    assert abs(first - datetime.now(timezone.utc)) < timedelta(seconds=30)
    await authenticate(conn, f"Bearer {token}")
    assert (await list_keys(conn, tenant.id))[0].last_used_at == first  # not rewritten
    stale = first - LAST_USED_RESOLUTION - timedelta(seconds=1)
    await conn.execute("UPDATE api_keys SET last_used_at = $2 WHERE id = $1", key_id, stale)
    await authenticate(conn, f"Bearer {token}")
    assert (await list_keys(conn, tenant.id))[0].last_used_at > stale


async def test_key_names_expiry_and_revocation_are_listed(conn, tenant):
    later = datetime.now(timezone.utc) + timedelta(days=30)
    key_id, token = await create_key(conn, tenant_id=tenant.id, identity_id=None,
                                     permissions=[Permission.SEARCH_READ], name="crm sync",
                                     expires_at=later)
    (info,) = await list_keys(conn, tenant.id)
    assert (info.name, info.expires_at, info.revoked_at, info.level) == (
        "crm sync", later, None, "tenant")
    assert token not in msgspec.json.encode(info).decode()
    revoked = await revoke_key(conn, key_id)
    assert revoked.revoked_at is not None
    assert await code_of(conn, f"Bearer {token}") is ErrorCode.KEY_REVOKED
    with pytest.raises(PylotaError) as raised:
        await create_key(conn, tenant_id=tenant.id, identity_id=None,
                         permissions=[Permission.SEARCH_READ],
                         expires_at=datetime(2030, 1, 1))
    assert raised.value.details["path"] == "expires"
