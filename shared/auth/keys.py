"""Owner of ``api_keys``: minting keys of every level and resolving a bearer token to a
:class:`Principal` (spec section 3, FR-KEY-3/4).

A token is ``pmk_live_`` or ``pmk_test_`` plus 43 base64url characters (256 random bits). Only its
SHA-256 is stored: a salted slow hash buys nothing for a secret with that much entropy, and the
lookup must be one indexed read per request.

Levels, widest first: a **platform** key reaches every tenant of its mode; a **partner** key the
tenants of its partner (``shared.tools.scope``); a **tenant** key its tenant; an **identity** key
one identity. Platform and partner keys never hold ``identities:sign`` or ``usage:read``
(refused at creation, and forbidden by a CHECK of ``api_keys``). A key's mode is its tenant's for tenant and identity keys, and chosen at creation for
the wider ones; a key works only on tenants of its own mode (L4).

``last_used_at`` is written at most once a minute per key (:data:`LAST_USED_RESOLUTION`):
authentication reads it with the key and updates it only when it is older, so a busy key costs
one small write a minute.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta, timezone

import asyncpg
import msgspec

from shared.auth.permissions import FORBIDDEN_FOR_LEVEL, KeyLevel, Permission
from shared.errors import ErrorCode, PylotaError, invalid
from shared.ids import Prefix, new_id
from shared.header_text import plain_text
from shared.tenancy.store import (OWN_IDENTITY_COLUMN, STANDING_COLUMNS, Identity, KeyStanding,
                                  identity_tenant_id, own_identity, tenant_mode)

__all__ = ["Principal", "KeyInfo", "KeyRecord", "LAST_USED_RESOLUTION", "MODES", "create_key",
           "create_partner_key", "create_platform_key", "authenticate", "bearer_token",
           "read_key", "admit_key", "use_is_stale", "note_use", "hash_token", "list_keys",
           "revoke_key", "live_key_count"]

#: How stale ``last_used_at`` may get before authentication writes it again.
LAST_USED_RESOLUTION = timedelta(minutes=1)
#: Key and tenant modes (DESIGN.md section 4): ``pmk_live_…`` and ``pmk_test_…``.
MODES = ("live", "test")


class Principal(msgspec.Struct, frozen=True, kw_only=True):
    """What a bearer key resolves to (spec section 3): level, scope ids, permissions, mode."""

    key_id: str
    level: KeyLevel
    partner_id: str | None
    tenant_id: str | None
    identity_id: str | None
    permissions: frozenset[Permission]
    mode: str
    #: An identity key's own identity as authentication read it (None for other keys), so
    #: that resolving it costs no second statement (``shared.tools.scope.identity_for``).
    identity: Identity | None = None


class KeyInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A key as an operator sees it: never the token, only its first characters (``token_hint``).
    ``last_used_at`` is to the minute (:data:`LAST_USED_RESOLUTION`), None if never used."""

    id: str
    token_hint: str
    name: str | None
    level: str
    partner_id: str | None
    tenant_id: str | None
    identity_id: str | None
    permissions: list[str]
    mode: str
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None
    created_at: datetime


_INFO_COLUMNS = ("id, token_hint, name, level, partner_id, tenant_id, identity_id, permissions,"
                 " mode, expires_at, revoked_at, last_used_at, created_at")


def _info(row: asyncpg.Record) -> KeyInfo:
    return KeyInfo(**{**dict(row), "permissions": list(row["permissions"])})


def hash_token(token: str) -> bytes:
    """SHA-256 of the token's UTF-8 bytes."""
    return hashlib.sha256(token.encode()).digest()


def _check_grant(level: KeyLevel, permissions: list[Permission], expires_at: datetime | None,
                mode: str) -> None:
    if bad := set(permissions) & FORBIDDEN_FOR_LEVEL[level]:
        raise invalid("permissions",
                      f"{level.value} keys cannot hold {', '.join(sorted(p.value for p in bad))}.",
                      "Drop those permissions.")
    if not permissions:
        raise invalid("permissions", "A key needs at least one permission.",
                      "Pass the permissions the key may use.")
    if expires_at is not None and expires_at.tzinfo is None:
        raise invalid("expires", "The expiry has no time zone.",
                      "Pass an instant with its offset, such as 2027-01-01T00:00:00Z.")
    if mode not in MODES:
        raise invalid("mode", f"Unknown mode {mode!r}.", "Use live or test.")


async def _insert(conn: asyncpg.Connection, *, level: KeyLevel, partner_id: str | None,
                  tenant_id: str | None, identity_id: str | None, permissions: list[Permission],
                  mode: str, name: str | None, expires_at: datetime | None) -> tuple[str, str]:
    if name is not None:
        plain_text("name", name)  # `keys list` prints it: a line break forged a key's line
    token = f"pmk_{mode}_{secrets.token_urlsafe(32)}"
    key_id = new_id(Prefix.KEY)
    try:
        await conn.execute(
            "INSERT INTO api_keys (id, token_hash, token_hint, name, level, partner_id, tenant_id,"
            " identity_id, permissions, mode, expires_at)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            key_id, hash_token(token), token[:13] + "…", name, level.value, partner_id,
            tenant_id, identity_id, sorted(p.value for p in permissions), mode, expires_at,
        )
    except asyncpg.ForeignKeyViolationError as exc:
        raise invalid("partner", f"No partner {partner_id!r}.",
                      "Pass a partner id (par_…) from `pylota partners list`.") from exc
    return key_id, token


async def create_key(conn: asyncpg.Connection, *, tenant_id: str, identity_id: str | None,
                     permissions: list[Permission], name: str | None = None,
                     expires_at: datetime | None = None) -> tuple[str, str]:
    """Mint a tenant key, or an identity key when ``identity_id`` is given.

    The mode (live/test) follows the tenant's. Returns ``(key_id, token)``; the token is shown
    once and never stored.

    Raises:
        PylotaError: ``invalid_request`` when the tenant does not exist (path ``tenant``), the
            identity is not in the tenant (``identity``), no permission is given or one is not
            allowed at the key's level (``permissions``), or ``expires_at`` has no time zone
            (``expires``).
    """
    level = KeyLevel.IDENTITY if identity_id else KeyLevel.TENANT
    mode = await tenant_mode(conn, tenant_id)
    if mode is None:
        raise invalid("tenant", f"No tenant {tenant_id!r}.",
                      "Pass a tenant id (ten_…) or name; `pylota tenants create NAME` makes one.")
    _check_grant(level, permissions, expires_at, mode)
    if identity_id is not None:
        if await identity_tenant_id(conn, identity_id) != tenant_id:
            raise invalid("identity", "That identity is not in the tenant.",
                          "Pass an identity of the same tenant.")
    return await _insert(conn, level=level, partner_id=None, tenant_id=tenant_id,
                         identity_id=identity_id, permissions=permissions, mode=mode, name=name,
                         expires_at=expires_at)


async def create_partner_key(conn: asyncpg.Connection, *, partner_id: str,
                             permissions: list[Permission], mode: str = "live",
                             name: str | None = None,
                             expires_at: datetime | None = None) -> tuple[str, str]:
    """Mint a partner key: it reaches the tenants of ``mode`` whose partner is ``partner_id``
    (spec section 3). Returns ``(key_id, token)``.

    Raises:
        PylotaError: ``invalid_request`` for ``identities:sign`` or ``usage:read``, no
            permission, an expiry without time zone, an unknown mode, or (path ``partner``) no
            such partner.
    """
    _check_grant(KeyLevel.PARTNER, permissions, expires_at, mode)
    return await _insert(conn, level=KeyLevel.PARTNER, partner_id=partner_id, tenant_id=None,
                         identity_id=None, permissions=permissions, mode=mode, name=name,
                         expires_at=expires_at)


async def create_platform_key(conn: asyncpg.Connection, *, permissions: list[Permission],
                              mode: str = "live", name: str | None = None,
                              expires_at: datetime | None = None) -> tuple[str, str]:
    """Mint a platform key: it reaches every tenant of ``mode`` (spec section 3). Returns
    ``(key_id, token)``.

    Raises:
        PylotaError: ``invalid_request`` for ``identities:sign`` or ``usage:read``, no
            permission, an expiry without time zone, or an unknown mode.
    """
    _check_grant(KeyLevel.PLATFORM, permissions, expires_at, mode)
    return await _insert(conn, level=KeyLevel.PLATFORM, partner_id=None, tenant_id=None,
                         identity_id=None, permissions=permissions, mode=mode, name=name,
                         expires_at=expires_at)


class KeyRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A key as authentication reads it, in one statement (:func:`read_key`): its row, its
    standing (``partner_status``, ``tenant_mode``) and, for an identity key, its own identity.
    :func:`admit_key` decides from it alone, so a front may keep it in memory
    (``shared.auth.cache``)."""

    key_id: str
    level: KeyLevel
    partner_id: str | None
    tenant_id: str | None
    identity_id: str | None
    permissions: frozenset[Permission]
    mode: str
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None
    standing: KeyStanding
    identity: Identity | None


def bearer_token(authorization: str | None) -> str:
    """The API key of an ``Authorization`` header value (``Bearer pmk_…``, scheme in any case).

    Raises:
        PylotaError: ``unauthenticated`` when it is missing or not a Pylota key.
    """
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token.startswith(("pmk_live_", "pmk_test_")):
        raise PylotaError(ErrorCode.UNAUTHENTICATED, "A valid bearer API key is required.")
    return token


async def read_key(conn: asyncpg.Connection, token_hash: bytes) -> KeyRecord | None:
    """The key whose token hashes to ``token_hash`` (:func:`hash_token`), with its standing and
    an identity key's own identity, in one round trip (this runs for every request the front
    does not answer from memory); None when no key has that hash."""
    row = await conn.fetchrow(
        "SELECT k.id, k.level, k.partner_id, k.tenant_id, k.identity_id, k.permissions, k.mode,"
        f" k.expires_at, k.revoked_at, k.last_used_at, {STANDING_COLUMNS}, {OWN_IDENTITY_COLUMN}"
        " FROM api_keys k WHERE k.token_hash = $1", token_hash)
    if row is None:
        return None
    return KeyRecord(
        key_id=row["id"], level=KeyLevel(row["level"]), partner_id=row["partner_id"],
        tenant_id=row["tenant_id"], identity_id=row["identity_id"],
        permissions=frozenset(Permission(p) for p in row["permissions"]), mode=row["mode"],
        expires_at=row["expires_at"], revoked_at=row["revoked_at"],
        last_used_at=row["last_used_at"],
        standing=KeyStanding(partner_status=row["partner_status"],
                             tenant_mode=row["tenant_mode"]),
        identity=own_identity(row["own_identity"]))


def admit_key(record: KeyRecord, token: str, now: datetime) -> Principal:
    """The principal of ``record`` presented as ``token`` at ``now``, if the key may act.

    Raises:
        PylotaError: ``key_revoked``, ``key_expired``, ``unauthenticated`` for a key whose mode
            is not its tenant's (HTTP 401), or ``partner_suspended`` (403) when the key's partner,
            or its tenant's, is suspended.
    """
    if record.revoked_at is not None:
        raise PylotaError(ErrorCode.KEY_REVOKED, "This API key was revoked.")
    if record.expires_at is not None and record.expires_at <= now:
        raise PylotaError(ErrorCode.KEY_EXPIRED, "This API key has expired.")
    if record.standing.partner_status == "suspended":
        raise PylotaError(ErrorCode.PARTNER_SUSPENDED, "This key's partner is suspended.",
                          fix="Contact the platform operator.")
    # L4: a test key never acts on a live tenant, nor a live key on a test tenant.
    if not token.startswith(f"pmk_{record.mode}_") or (
            record.tenant_id is not None and record.standing.tenant_mode != record.mode):
        raise PylotaError(ErrorCode.UNAUTHENTICATED,
                          "This API key's mode (live or test) is not its tenant's.",
                          fix="Use a pmk_test_… key for a test tenant and a pmk_live_… key for "
                              "a live one.")
    return Principal(key_id=record.key_id, level=record.level, partner_id=record.partner_id,
                     tenant_id=record.tenant_id, identity_id=record.identity_id,
                     permissions=record.permissions, mode=record.mode, identity=record.identity)


def use_is_stale(last_used_at: datetime | None, now: datetime) -> bool:
    """Whether ``last_used_at`` is old enough (:data:`LAST_USED_RESOLUTION`) to be written."""
    return last_used_at is None or last_used_at <= now - LAST_USED_RESOLUTION


async def note_use(conn: asyncpg.Connection, key_id: str) -> None:
    """Set the key's ``last_used_at`` to now, unless another front did within the minute."""
    # The guard repeats the check in SQL, so fronts racing on one key write once.
    await conn.execute(
        "UPDATE api_keys SET last_used_at = now() WHERE id = $1"
        " AND (last_used_at IS NULL OR last_used_at <= now() - $2::interval)",
        key_id, LAST_USED_RESOLUTION)


async def authenticate(conn: asyncpg.Connection, authorization: str | None) -> Principal:
    """Resolve an ``Authorization`` header value to a principal (spec section 2.1 step 5), and
    note the key's use (at most once a minute). A front does the same through
    :class:`shared.auth.cache.KeyCache`, which keeps keys in memory.

    Raises:
        PylotaError: ``unauthenticated`` (missing, malformed or unknown, or a key whose mode is
            not its tenant's), ``key_expired``, ``key_revoked`` (all HTTP 401), or
            ``partner_suspended`` (403) when the key's partner, or its tenant's, is suspended.
    """
    token = bearer_token(authorization)
    record = await read_key(conn, hash_token(token))
    if record is None:
        raise PylotaError(ErrorCode.UNAUTHENTICATED, "This API key is not known.")
    now = datetime.now(timezone.utc)
    principal = admit_key(record, token, now)
    if use_is_stale(record.last_used_at, now):
        await note_use(conn, record.key_id)
    return principal


async def list_keys(conn: asyncpg.Connection, tenant_id: str | None = None, *,
                    partner_id: str | None = None,
                    level: KeyLevel | None = None) -> list[KeyInfo]:
    """Keys oldest first, revoked ones included: those of ``tenant_id`` (tenant and identity
    keys), of ``partner_id`` (partner keys), and of ``level``; each filter given narrows."""
    rows = await conn.fetch(
        f"SELECT {_INFO_COLUMNS} FROM api_keys"
        " WHERE ($1::text IS NULL OR tenant_id = $1) AND ($2::text IS NULL OR partner_id = $2)"
        " AND ($3::text IS NULL OR level = $3) ORDER BY created_at, id",
        tenant_id, partner_id, level.value if level is not None else None)
    return [_info(r) for r in rows]


async def revoke_key(conn: asyncpg.Connection, key_id: str) -> KeyInfo:
    """Revoke ``key_id`` from now on (revoking twice keeps the first time).

    Raises:
        PylotaError: ``invalid_request`` (path ``key``) when no such key exists.
    """
    row = await conn.fetchrow(
        "UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1"
        f" RETURNING {_INFO_COLUMNS}", key_id)
    if row is None:
        raise invalid("key", f"No key {key_id!r}.",
                      "Pass a key id (key_…) from `pylota keys list`.")
    return _info(row)


async def live_key_count(conn: asyncpg.Connection, tenant_id: str) -> int:
    """How many keys of ``tenant_id`` still authenticate (neither revoked nor expired): the
    seats of its plan (``shared.plans``)."""
    return await conn.fetchval(
        "SELECT count(*) FROM api_keys WHERE tenant_id = $1 AND revoked_at IS NULL"
        " AND (expires_at IS NULL OR expires_at > now())", tenant_id)
