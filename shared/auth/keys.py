"""Owner of ``api_keys``: minting keys and resolving a bearer token to a :class:`Principal`.

A token is ``pmk_live_`` or ``pmk_test_`` plus 43 base64url characters (256 random bits). Only its
SHA-256 is stored: a salted slow hash buys nothing for a secret with that much entropy, and the
lookup must be one indexed read per request.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timezone

import asyncpg
import msgspec

from shared.auth.permissions import FORBIDDEN_FOR_LEVEL, KeyLevel, Permission
from shared.errors import ErrorCode, PylotaError, invalid
from shared.ids import Prefix, new_id
from shared.tenancy.store import identity_tenant_id, partner_status, tenant_mode

__all__ = ["Principal", "KeyInfo", "create_key", "authenticate", "hash_token", "list_keys",
           "revoke_key", "live_key_count"]


class Principal(msgspec.Struct, frozen=True, kw_only=True):
    """What a bearer key resolves to (spec section 3): level, scope ids, permissions, mode."""

    key_id: str
    level: KeyLevel
    partner_id: str | None
    tenant_id: str | None
    identity_id: str | None
    permissions: frozenset[Permission]
    mode: str


class KeyInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A key as an operator sees it: never the token, only its first characters (``token_hint``)."""

    id: str
    token_hint: str
    name: str | None
    level: str
    tenant_id: str | None
    identity_id: str | None
    permissions: list[str]
    mode: str
    expires_at: datetime | None
    revoked_at: datetime | None
    created_at: datetime


def hash_token(token: str) -> bytes:
    """SHA-256 of the token's UTF-8 bytes."""
    return hashlib.sha256(token.encode()).digest()


async def create_key(conn: asyncpg.Connection, *, tenant_id: str, identity_id: str | None,
                     permissions: list[Permission], name: str | None = None,
                     expires_at: datetime | None = None) -> tuple[str, str]:
    """Mint a tenant key, or an identity key when ``identity_id`` is given.

    The mode (live/test) follows the tenant's. Returns ``(key_id, token)``; the token is shown
    once and never stored.

    Raises:
        PylotaError: ``invalid_request`` when the identity is not in the tenant or a permission is
            not allowed at the key's level.
    """
    level = KeyLevel.IDENTITY if identity_id else KeyLevel.TENANT
    if bad := set(permissions) & FORBIDDEN_FOR_LEVEL[level]:
        raise invalid("permissions", f"{level} keys cannot hold {sorted(bad)}.",
                      "Drop those permissions.")
    mode = await tenant_mode(conn, tenant_id)
    if identity_id is not None:
        if await identity_tenant_id(conn, identity_id) != tenant_id:
            raise invalid("identity", "That identity is not in the tenant.",
                          "Pass an identity of the same tenant.")
    token = f"pmk_{mode}_{secrets.token_urlsafe(32)}"
    key_id = new_id(Prefix.KEY)
    await conn.execute(
        "INSERT INTO api_keys (id, token_hash, token_hint, name, level, tenant_id, identity_id,"
        " permissions, mode, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        key_id, hash_token(token), token[:13] + "…", name, level.value, tenant_id, identity_id,
        sorted(p.value for p in permissions), mode, expires_at,
    )
    return key_id, token


async def authenticate(conn: asyncpg.Connection, authorization: str | None) -> Principal:
    """Resolve an ``Authorization`` header value to a principal (spec section 2.1 step 5).

    Raises:
        PylotaError: ``unauthenticated`` (missing, malformed or unknown), ``key_expired``,
            ``key_revoked`` (all HTTP 401), or ``partner_suspended`` (403).
    """
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token.startswith(("pmk_live_", "pmk_test_")):
        raise PylotaError(ErrorCode.UNAUTHENTICATED, "A valid bearer API key is required.")
    row = await conn.fetchrow(
        "SELECT id, level, partner_id, tenant_id, identity_id, permissions, mode, expires_at,"
        " revoked_at FROM api_keys WHERE token_hash = $1", hash_token(token))
    if row is None:
        raise PylotaError(ErrorCode.UNAUTHENTICATED, "This API key is not known.")
    if row["revoked_at"] is not None:
        raise PylotaError(ErrorCode.KEY_REVOKED, "This API key was revoked.")
    if row["expires_at"] is not None and row["expires_at"] <= datetime.now(timezone.utc):
        raise PylotaError(ErrorCode.KEY_EXPIRED, "This API key has expired.")
    standing = await partner_status(conn, partner_id=row["partner_id"],
                                    tenant_id=row["tenant_id"])
    if standing == "suspended":
        raise PylotaError(ErrorCode.PARTNER_SUSPENDED, "This key's partner is suspended.",
                          fix="Contact the platform operator.")
    return Principal(
        key_id=row["id"], level=KeyLevel(row["level"]), partner_id=row["partner_id"],
        tenant_id=row["tenant_id"], identity_id=row["identity_id"],
        permissions=frozenset(Permission(p) for p in row["permissions"]), mode=row["mode"],
    )


async def list_keys(conn: asyncpg.Connection, tenant_id: str) -> list[KeyInfo]:
    """The keys of ``tenant_id``, oldest first, revoked ones included."""
    rows = await conn.fetch(
        "SELECT id, token_hint, name, level, tenant_id, identity_id, permissions, mode,"
        " expires_at, revoked_at, created_at FROM api_keys WHERE tenant_id = $1"
        " ORDER BY created_at, id", tenant_id)
    return [KeyInfo(**{**dict(r), "permissions": list(r["permissions"])}) for r in rows]


async def revoke_key(conn: asyncpg.Connection, key_id: str) -> KeyInfo:
    """Revoke ``key_id`` from now on (revoking twice keeps the first time).

    Raises:
        PylotaError: ``invalid_request`` (path ``key``) when no such key exists.
    """
    row = await conn.fetchrow(
        "UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1"
        " RETURNING id, token_hint, name, level, tenant_id, identity_id, permissions, mode,"
        " expires_at, revoked_at, created_at", key_id)
    if row is None:
        raise invalid("key", f"No key {key_id!r}.", "Pass a key id (key_…) from `pylota keys list`.")
    return KeyInfo(**{**dict(row), "permissions": list(row["permissions"])})


async def live_key_count(conn: asyncpg.Connection, tenant_id: str) -> int:
    """How many keys of ``tenant_id`` still authenticate (neither revoked nor expired): the
    seats of its plan (``shared.plans``)."""
    return await conn.fetchval(
        "SELECT count(*) FROM api_keys WHERE tenant_id = $1 AND revoked_at IS NULL"
        " AND (expires_at IS NULL OR expires_at > now())", tenant_id)
