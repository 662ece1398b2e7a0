"""Owner of ``signing_keys``: the deployment's Ed25519 signing keys, encrypted at rest.

Each purpose (:class:`KeyPurpose`) has one active key that signs, and may have retired keys that
no longer sign but stay published until every token or signature they made has expired
(:data:`RETIREMENT_GRACE`). A ``kid`` is the key's RFC 7638 JWK SHA-256 thumbprint (base64url,
43 characters), which is also the Web Bot Auth ``keyid`` (draft-ietf-webbotauth-httpsig-protocol,
"Generating HTTP Message Signature"; RFC 8037 appendix A.3 for Ed25519).

Why Ed25519 (JWS ``alg`` EdDSA, RFC 8037): the one algorithm both signing tools can share,
deterministic (no per-signature randomness to get wrong), small keys and signatures, and the
algorithm Web Bot Auth verifiers are known to accept.

Private keys are stored as AES-256-GCM ciphertext (``cryptography``) under a key derived with
HKDF-SHA256 from ``PM_SIGNING_SECRET``; the purpose and kid are the associated data, so a
ciphertext moved to another row does not decrypt. Nothing here logs key material; a new or
rotated key is logged by kid, which is public.

Functions take the connection first; the caller owns the transaction (rotation opens its own).
"""

from __future__ import annotations

import base64
import os
from datetime import datetime, timedelta, timezone
from enum import StrEnum
from typing import Annotated

import asyncpg
import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import (Encoding, NoEncryption, PrivateFormat,
                                                          PublicFormat)
from joserfc.jwk import OKPKey

from shared.errors import ErrorCode, PylotaError
from shared.logs import get_logger

__all__ = [
    "KeyPurpose", "SigningKey", "Signer", "WellKnownDocument", "Instant",
    "LONGEST_LIFETIME", "CLOCK_SKEW", "RETIREMENT_GRACE", "CACHE_MAX_AGE",
    "thumbprint", "raw_public_key", "jwk_x", "ensure_active_key", "active_signer",
    "published_keys", "published_signers", "rotate_key",
]

_log = get_logger("signing")


class KeyPurpose(StrEnum):
    """What a key signs; each purpose has its own keys (the draft's "Key Reuse Considered
    Harmful")."""

    #: mail_sign_assertion's JWTs, published in the JWKS.
    ASSERTION = "assertion"
    #: mail_sign_http_request's Web Bot Auth signatures, published in the signatures directory.
    HTTP_SIGNATURE = "http_signature"


#: The longest a token or signature lives: mail_sign_assertion's expires_in maximum (spec
#: section 4.3); mail_sign_http_request's (300 s) is shorter.
LONGEST_LIFETIME = timedelta(seconds=600)
#: Clock difference a verifier may allow when checking ``exp``/``expires``.
CLOCK_SKEW = timedelta(seconds=60)
#: How long a retired key stays published: past it, nothing it signed can still verify.
RETIREMENT_GRACE = LONGEST_LIFETIME + CLOCK_SKEW
#: Cache lifetime of the published key sets (``Cache-Control: max-age``). Shorter than the
#: grace, so a verifier's cached copy is refreshed while the retired key is still in it; it also
#: bounds how long a verifier that does not refetch on an unknown kid misses a new key.
CACHE_MAX_AGE = timedelta(seconds=300)

#: A time zone aware instant; its JSON Schema is ``{"type": "string", "format": "date-time"}``
#: as the tools' output schemas say.
Instant = Annotated[datetime, msgspec.Meta(tz=True)]

_HKDF_INFO = b"pylota-mail signing_keys private_key AES-256-GCM v1"
_NONCE_BYTES = 12


class SigningKey(msgspec.Struct, frozen=True, kw_only=True):
    """A key as anyone may see it: never the private half.

    ``public_key`` is the raw 32-byte Ed25519 key; ``drop_after`` is when a retired key leaves
    the published sets (None while active).
    """

    kid: str
    purpose: KeyPurpose
    public_key: bytes
    state: str
    created_at: datetime
    retired_at: datetime | None
    drop_after: datetime | None


class Signer(msgspec.Struct, frozen=True, kw_only=True):
    """A decrypted private key with its kid and raw public key, for one signature; never
    stored or logged."""

    kid: str
    public_key: bytes
    private_key: Ed25519PrivateKey


class WellKnownDocument(msgspec.Struct, frozen=True, kw_only=True):
    """A published document: the exact body bytes and the response headers to send with it
    (``Content-Type`` and ``Cache-Control`` included). Send ``body`` unchanged: a signed
    document's ``Content-Digest`` covers these bytes."""

    body: bytes
    headers: dict[str, str]


_COLUMNS = "kid, purpose, public_key, state, created_at, retired_at, drop_after"
_ACTIVE = f"SELECT {_COLUMNS} FROM signing_keys WHERE purpose = $1 AND state = 'active'"
_ACTIVE_PRIVATE = ("SELECT kid, public_key, private_key FROM signing_keys"
                   " WHERE purpose = $1 AND state = 'active'")
#: Active first, then retired keys still within their grace, newest first.
_PUBLISHED_WHERE = (" WHERE purpose = $1 AND (state = 'active' OR drop_after > $2)"
                    " ORDER BY state = 'active' DESC, created_at DESC, kid")


def _key(row: asyncpg.Record) -> SigningKey:
    return SigningKey(**{**dict(row), "purpose": KeyPurpose(row["purpose"])})


def thumbprint(public_key: Ed25519PublicKey) -> str:
    """The RFC 7638 JWK SHA-256 thumbprint of ``public_key``, base64url without padding."""
    return OKPKey.import_key(public_key).thumbprint()


def raw_public_key(public_key: Ed25519PublicKey) -> bytes:
    """The 32 bytes of ``public_key`` (RFC 8032 section 5.1.5)."""
    return public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def jwk_x(public_key: bytes) -> str:
    """The JWK ``x`` member of a raw Ed25519 public key: base64url without padding (RFC 8037
    section 2)."""
    return base64.urlsafe_b64encode(public_key).rstrip(b"=").decode("ascii")


def _aead(secret: str) -> AESGCM:
    if not secret:
        raise PylotaError(
            ErrorCode.UNAVAILABLE,
            "Signing is not set up on this deployment: PM_SIGNING_SECRET is not set.",
            fix="Ask the operator of this deployment to set PM_SIGNING_SECRET; retrying will not"
                " help until then.",
            details={"setting": "PM_SIGNING_SECRET"}, retryable=False)
    key = HKDF(algorithm=SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(secret.encode())
    return AESGCM(key)


def _associated_data(purpose: KeyPurpose, kid: str) -> bytes:
    return f"{purpose.value}:{kid}".encode()


def _seal(aead: AESGCM, purpose: KeyPurpose, kid: str, private_key: Ed25519PrivateKey) -> bytes:
    raw = private_key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    nonce = os.urandom(_NONCE_BYTES)
    return nonce + aead.encrypt(nonce, raw, _associated_data(purpose, kid))


def _open(aead: AESGCM, purpose: KeyPurpose, kid: str, sealed: bytes) -> Ed25519PrivateKey:
    nonce, ciphertext = sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:]
    try:
        raw = aead.decrypt(nonce, ciphertext, _associated_data(purpose, kid))
    except InvalidTag as exc:
        raise PylotaError(
            ErrorCode.UNAVAILABLE,
            "PM_SIGNING_SECRET does not decrypt this deployment's signing key (was it changed?).",
            fix="Ask the operator to restore the PM_SIGNING_SECRET the keys were made with, or to"
                " delete the signing_keys rows so that new keys are made.",
            details={"setting": "PM_SIGNING_SECRET"}, retryable=False) from exc
    return Ed25519PrivateKey.from_private_bytes(raw)


def _signer(aead: AESGCM, purpose: KeyPurpose, row: asyncpg.Record) -> Signer:
    return Signer(kid=row["kid"], public_key=row["public_key"],
                  private_key=_open(aead, purpose, row["kid"], row["private_key"]))


def _now(now: datetime | None) -> datetime:
    return now if now is not None else datetime.now(timezone.utc)


async def _insert_active(conn: asyncpg.Connection, purpose: KeyPurpose, aead: AESGCM,
                         now: datetime) -> None:
    private_key = Ed25519PrivateKey.generate()
    kid = thumbprint(private_key.public_key())
    inserted = await conn.fetchval(
        "INSERT INTO signing_keys (kid, purpose, public_key, private_key, created_at)"
        " VALUES ($1, $2, $3, $4, $5)"
        " ON CONFLICT (purpose) WHERE state = 'active' DO NOTHING RETURNING kid",
        kid, purpose.value, raw_public_key(private_key.public_key()),
        _seal(aead, purpose, kid, private_key), now)
    if inserted is not None:
        _log.info("signing_key_created", kid=kid, purpose=purpose.value)


async def ensure_active_key(conn: asyncpg.Connection, purpose: KeyPurpose, secret: str, *,
                            now: datetime | None = None) -> SigningKey:
    """Return the active key of ``purpose``, making one when there is none.

    Safe from several processes at once: the partial unique index keeps one active key and the
    losers read the winner's. The front may call it at start-up so that the published sets are
    never empty.

    Raises:
        PylotaError: ``unavailable`` when ``secret`` (PM_SIGNING_SECRET) is empty and a key has
            to be made, or does not decrypt the stored key.
    """
    row = await conn.fetchrow(_ACTIVE, purpose.value)
    if row is None:
        await _insert_active(conn, purpose, _aead(secret), _now(now))
        row = await conn.fetchrow(_ACTIVE, purpose.value)
    return _key(row)


async def active_signer(conn: asyncpg.Connection, purpose: KeyPurpose, secret: str, *,
                        now: datetime | None = None) -> Signer:
    """The decrypted active key of ``purpose`` (made on first use).

    Raises:
        PylotaError: ``unavailable`` when ``secret`` is empty or does not decrypt the key.
    """
    aead = _aead(secret)
    row = await conn.fetchrow(_ACTIVE_PRIVATE, purpose.value)
    if row is None:
        # Whoever wins the insert, an active key exists afterwards.
        await _insert_active(conn, purpose, aead, _now(now))
        row = await conn.fetchrow(_ACTIVE_PRIVATE, purpose.value)
    return _signer(aead, purpose, row)


async def published_keys(conn: asyncpg.Connection, purpose: KeyPurpose, *,
                         now: datetime | None = None) -> list[SigningKey]:
    """Keys of ``purpose`` a verifier may need at ``now``: the active one, then retired ones
    whose ``drop_after`` has not passed, newest first."""
    rows = await conn.fetch(f"SELECT {_COLUMNS} FROM signing_keys" + _PUBLISHED_WHERE,
                            purpose.value, _now(now))
    return [_key(r) for r in rows]


async def published_signers(conn: asyncpg.Connection, purpose: KeyPurpose, secret: str, *,
                            now: datetime | None = None) -> list[Signer]:
    """The decrypted private keys of :func:`published_keys`, in the same order (for the
    directory's proof of possession, one signature per published key).

    Raises:
        PylotaError: ``unavailable`` when ``secret`` is empty or does not decrypt a key.
    """
    aead = _aead(secret)
    rows = await conn.fetch("SELECT kid, public_key, private_key FROM signing_keys"
                            + _PUBLISHED_WHERE, purpose.value, _now(now))
    return [_signer(aead, purpose, r) for r in rows]


async def rotate_key(conn: asyncpg.Connection, purpose: KeyPurpose, secret: str, *,
                     now: datetime | None = None) -> SigningKey:
    """Make a new active key of ``purpose`` and retire the old one.

    The retired key stops signing at once and stays published until ``now +``
    :data:`RETIREMENT_GRACE` (its ``drop_after``); retired keys already past theirs are deleted.
    Runs in its own transaction under an advisory lock, so concurrent rotations apply one after
    the other. Returns the new key.

    Raises:
        PylotaError: ``unavailable`` when ``secret`` (PM_SIGNING_SECRET) is empty.
    """
    aead = _aead(secret)
    at = _now(now)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('signing_keys:' || $1))",
                           purpose.value)
        await conn.execute(
            "DELETE FROM signing_keys WHERE purpose = $1 AND state = 'retired'"
            " AND drop_after <= $2", purpose.value, at)
        retired = await conn.fetchval(
            "UPDATE signing_keys SET state = 'retired', retired_at = $2, drop_after = $3"
            " WHERE purpose = $1 AND state = 'active' RETURNING kid",
            purpose.value, at, at + RETIREMENT_GRACE)
        await _insert_active(conn, purpose, aead, at)
        row = await conn.fetchrow(_ACTIVE, purpose.value)
    if retired is not None:
        _log.info("signing_key_retired", kid=retired, purpose=purpose.value,
                  drop_after=(at + RETIREMENT_GRACE).isoformat())
    return _key(row)
