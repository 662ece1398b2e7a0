"""API keys: minted once, stored hashed, and resolved with the errors of spec section 2.1 step 5."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from shared.auth.keys import authenticate, create_key, hash_token
from shared.auth.permissions import KeyLevel, Permission, parse_permissions
from shared.errors import ErrorCode, PylotaError
from shared.ids import Prefix, new_id
from shared.tenancy.store import create_identity, create_tenant


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
