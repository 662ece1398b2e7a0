"""signing_keys: one active Ed25519 key per purpose, kid = RFC 7638 thumbprint, private keys
encrypted under PM_SIGNING_SECRET, rotation with a grace, on the real PostgreSQL database."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
from datetime import datetime, timedelta, timezone

import asyncpg
import pytest
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from shared.config import MIN_SIGNING_SECRET_LENGTH, Settings, SettingsError
from shared.db import connect
from shared.errors import ErrorCode, PylotaError
from shared.signing.keys import (CACHE_MAX_AGE, LONGEST_LIFETIME, RETIREMENT_GRACE, KeyPurpose,
                                 active_signer, ensure_active_key, published_keys,
                                 published_signers, rotate_key, thumbprint)
from tests.shared.signing.test_rfc9421 import RFC_TEST_KEY, RFC_TEST_KID

SECRET = secrets.token_urlsafe(32)
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def rfc7638_thumbprint(public_key: bytes) -> str:
    """RFC 7638 section 3 for an OKP key (RFC 8037 appendix A.3), computed here by hand."""
    x = base64.urlsafe_b64encode(public_key).rstrip(b"=").decode()
    members = json.dumps({"crv": "Ed25519", "kty": "OKP", "x": x}, separators=(",", ":"),
                         sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(members.encode()).digest()).rstrip(b"=").decode()


def test_thumbprint_of_the_rfc9421_test_key_is_the_drafts_keyid():
    assert thumbprint(RFC_TEST_KEY.public_key()) == RFC_TEST_KID


async def test_first_use_makes_one_active_key_per_purpose_named_by_its_thumbprint(conn):
    assertion = await ensure_active_key(conn, KeyPurpose.ASSERTION, SECRET, now=T0)
    again = await ensure_active_key(conn, KeyPurpose.ASSERTION, SECRET, now=T0)
    http = await ensure_active_key(conn, KeyPurpose.HTTP_SIGNATURE, SECRET, now=T0)
    assert again == assertion
    assert http.kid != assertion.kid
    for key in (assertion, http):
        assert key.state == "active" and key.drop_after is None
        assert len(key.kid) == 43
        assert key.kid == rfc7638_thumbprint(key.public_key)
    signer = await active_signer(conn, KeyPurpose.ASSERTION, SECRET)
    assert signer.kid == assertion.kid and signer.public_key == assertion.public_key
    assert await conn.fetchval("SELECT count(*) FROM signing_keys") == 2


async def test_two_processes_making_the_first_key_at_once_make_one(db_url):
    first, second = await connect(db_url), await connect(db_url)
    try:
        keys = await asyncio.gather(
            *(active_signer(c, KeyPurpose.HTTP_SIGNATURE, SECRET) for c in (first, second)))
        assert keys[0].kid == keys[1].kid
        assert await first.fetchval("SELECT count(*) FROM signing_keys") == 1
    finally:
        await first.close()
        await second.close()


async def test_the_private_key_is_not_readable_from_the_table_without_the_secret(conn):
    signer = await active_signer(conn, KeyPurpose.ASSERTION, SECRET)
    raw = signer.private_key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    stored = await conn.fetchval("SELECT private_key FROM signing_keys WHERE kid = $1", signer.kid)
    assert raw not in stored and len(stored) == 12 + 32 + 16   # nonce, ciphertext, GCM tag
    with pytest.raises(PylotaError) as wrong:
        await active_signer(conn, KeyPurpose.ASSERTION, secrets.token_urlsafe(32))
    assert wrong.value.code is ErrorCode.UNAVAILABLE
    assert "PM_SIGNING_SECRET" in wrong.value.message


async def test_a_ciphertext_moved_to_another_key_does_not_decrypt(conn):
    a = await active_signer(conn, KeyPurpose.ASSERTION, SECRET)
    h = await active_signer(conn, KeyPurpose.HTTP_SIGNATURE, SECRET)
    await conn.execute(
        "UPDATE signing_keys SET private_key = (SELECT private_key FROM signing_keys"
        " WHERE kid = $2) WHERE kid = $1", h.kid, a.kid)
    with pytest.raises(PylotaError) as moved:
        await active_signer(conn, KeyPurpose.HTTP_SIGNATURE, SECRET)
    assert moved.value.code is ErrorCode.UNAVAILABLE


async def test_signing_without_a_secret_is_a_clear_error(conn):
    with pytest.raises(PylotaError) as unset:
        await active_signer(conn, KeyPurpose.ASSERTION, "")
    assert unset.value.code is ErrorCode.UNAVAILABLE
    assert unset.value.details == {"setting": "PM_SIGNING_SECRET"}
    assert "PM_SIGNING_SECRET" in unset.value.fix
    assert unset.value.envelope("req_x").error.retryable is False  # retrying will not help
    assert await conn.fetchval("SELECT count(*) FROM signing_keys") == 0


def test_a_short_secret_stops_start_up_and_names_the_variable():
    with pytest.raises(SettingsError, match="PM_SIGNING_SECRET"):
        Settings.from_env({"PM_SIGNING_SECRET": "x" * (MIN_SIGNING_SECRET_LENGTH - 1)})
    assert Settings.from_env({}).pm_signing_secret == ""
    assert Settings.from_env({"PM_SIGNING_SECRET": SECRET}).pm_signing_secret == SECRET


async def test_rotation_keeps_the_old_key_published_until_its_last_token_has_expired(conn):
    old = await ensure_active_key(conn, KeyPurpose.ASSERTION, SECRET, now=T0)
    rotated_at = T0 + timedelta(days=30)
    new = await rotate_key(conn, KeyPurpose.ASSERTION, SECRET, now=rotated_at)
    assert new.kid != old.kid and new.state == "active"
    assert (await active_signer(conn, KeyPurpose.ASSERTION, SECRET)).kid == new.kid

    retired = {k.kid: k for k in await published_keys(conn, KeyPurpose.ASSERTION,
                                                      now=rotated_at)}[old.kid]
    assert retired.state == "retired" and retired.retired_at == rotated_at
    assert retired.drop_after == rotated_at + RETIREMENT_GRACE
    # the longest token signed just before the rotation still verifies until then
    assert retired.drop_after >= rotated_at + LONGEST_LIFETIME

    last_moment = retired.drop_after - timedelta(seconds=1)
    assert [k.kid for k in await published_keys(conn, KeyPurpose.ASSERTION, now=last_moment)] \
        == [new.kid, old.kid]
    assert [s.kid for s in await published_signers(conn, KeyPurpose.ASSERTION, SECRET,
                                                   now=last_moment)] == [new.kid, old.kid]
    assert [k.kid for k in await published_keys(conn, KeyPurpose.ASSERTION,
                                                now=retired.drop_after)] == [new.kid]
    # the other purpose is untouched
    assert await published_keys(conn, KeyPurpose.HTTP_SIGNATURE, now=rotated_at) == []


async def test_a_later_rotation_deletes_keys_past_their_grace(conn):
    first = await ensure_active_key(conn, KeyPurpose.HTTP_SIGNATURE, SECRET, now=T0)
    second = await rotate_key(conn, KeyPurpose.HTTP_SIGNATURE, SECRET, now=T0)
    third = await rotate_key(conn, KeyPurpose.HTTP_SIGNATURE, SECRET,
                             now=T0 + RETIREMENT_GRACE)
    kids = {r["kid"]: r["state"] for r in await conn.fetch("SELECT kid, state FROM signing_keys")}
    assert kids == {second.kid: "retired", third.kid: "active"}
    assert first.kid not in kids


async def test_concurrent_rotations_leave_one_active_key(db_url):
    conns = [await connect(db_url) for _ in range(3)]
    try:
        await ensure_active_key(conns[0], KeyPurpose.ASSERTION, SECRET)
        await asyncio.gather(*(rotate_key(c, KeyPurpose.ASSERTION, SECRET) for c in conns))
        states = [r["state"] for r in await conns[0].fetch(
            "SELECT state FROM signing_keys ORDER BY state")]
        assert states == ["active", "retired", "retired", "retired"]
    finally:
        for c in conns:
            await c.close()


async def test_the_table_refuses_a_second_active_key(conn):
    await ensure_active_key(conn, KeyPurpose.ASSERTION, SECRET)
    row = await conn.fetchrow("SELECT * FROM signing_keys")
    with pytest.raises(asyncpg.UniqueViolationError):
        await conn.execute(
            "INSERT INTO signing_keys (kid, purpose, public_key, private_key, created_at)"
            " VALUES ($1, 'assertion', $2, $3, now())",
            "A" * 43, row["public_key"], row["private_key"])


def test_the_cache_lifetime_is_shorter_than_the_grace():
    assert CACHE_MAX_AGE < RETIREMENT_GRACE


def test_the_package_exports_what_it_lists():
    import shared.signing
    from shared.signing import assertions, keys, rfc9421, web_bot_auth

    for module in (shared.signing, assertions, keys, rfc9421, web_bot_auth):
        assert module.__all__ and all(hasattr(module, name) for name in module.__all__)
