"""mail_sign_assertion's domain: agent assertions (compact JWS) and the JWKS that verifies them.

An assertion is a JWT (RFC 7519) signed with the deployment's active assertion key, JWS ``alg``
``EdDSA`` over Ed25519 (RFC 8037), made with ``joserfc``. Header: ``alg``, ``typ: "JWT"``,
``kid``. Claims:

=====================  ==========================================================
``iss``                the issuer, ``https://{PM_API_HOST}``
``sub``                the identity id (``idn_…``), stable across address changes
``aud``                the ``audience`` argument
``iat``, ``exp``       issued at, and ``iat + expires_in`` (NumericDate, seconds)
``jti``                128 random bits, base64url: unique per call
``nonce``              the ``nonce`` argument, when given
``email``              the identity's address
``name``               the identity's display name, when it has one
``agent``              ``true``: an AI agent holds this mailbox
``accountable_human``  whether an accountable human stands behind the agent
``workspace``          ``{"id": "ten_…", "name": …}``: the tenant
``ext``                the ``ext`` argument, when given and not empty
=====================  ==========================================================

``email``, ``name`` and ``nonce`` are claims registered with IANA (from OpenID Connect), so
verifiers read them without knowing Pylota. The key signs nothing but assertions, so no other
token of this issuer can pass for one. Tokens are never stored or logged (spec section 7).
"""

from __future__ import annotations

import secrets
import warnings
from datetime import datetime, timezone
from typing import Annotated, Any, Final

import asyncpg
import msgspec
from joserfc import jwt
from joserfc.errors import SecurityWarning
from joserfc.jwk import OKPKey

from shared.errors import invalid
from shared.signing.keys import (CACHE_MAX_AGE, Instant, KeyPurpose, WellKnownDocument,
                                 active_signer, jwk_x, published_keys)

__all__ = [
    "ALG", "JWKS_PATH", "JWKS_MEDIA_TYPE", "EXPIRES_IN_MIN", "EXPIRES_IN_MAX",
    "EXPIRES_IN_DEFAULT", "EXT_MAX_BYTES", "EXT_MAX_DEPTH", "REGISTERED_CLAIMS", "TOKEN_CLAIMS", "PYLOTA_CLAIMS",
    "REFUSED_EXT_NAMES", "AssertionResult", "issuer", "jwks_uri", "check_ext", "sign_assertion",
    "jwks_document",
]

#: JWS algorithm. RFC 9864 deprecates "EdDSA" for the fully specified "Ed25519", but the
#: verifiers in use (PyJWT among them) know only "EdDSA"; the signature is the same Ed25519.
ALG: Final = "EdDSA"

#: Where the JWKS is served; ``jwks_uri`` is ``https://{PM_API_HOST}`` plus this.
JWKS_PATH: Final = "/.well-known/jwks.json"
#: RFC 7517 section 8.5.2.
JWKS_MEDIA_TYPE: Final = "application/jwk-set+json"
#: Bounds and default of ``expires_in`` in seconds (spec section 4.3).
EXPIRES_IN_MIN: Final = 60
EXPIRES_IN_MAX: Final = 600
EXPIRES_IN_DEFAULT: Final = 300
#: ``ext`` at most this many bytes as compact UTF-8 JSON (spec section 4.3).
EXT_MAX_BYTES: Final = 2048
#: ``ext`` nested at most this deep (objects and arrays): 500 levels fit in 2,048 bytes and made
#: the JWS library's JSON encoder overflow Python's stack (found by an attack).
EXT_MAX_DEPTH: Final = 32

#: RFC 7519 section 4.1.
REGISTERED_CLAIMS: Final = frozenset({"iss", "sub", "aud", "exp", "nbf", "iat", "jti"})
#: Other registered claims this token uses.
TOKEN_CLAIMS: Final = frozenset({"nonce", "email", "name"})
#: Claims Pylota defines.
PYLOTA_CLAIMS: Final = frozenset({"agent", "accountable_human", "workspace", "ext"})
#: Top-level names ``ext`` may not use, so that no verifier can mistake an ``ext`` member for
#: a claim of the token.
REFUSED_EXT_NAMES: Final = REGISTERED_CLAIMS | TOKEN_CLAIMS | PYLOTA_CLAIMS

Kid = Annotated[str, msgspec.Meta(pattern="^[A-Za-z0-9_-]{43}$")]
Uri = Annotated[str, msgspec.Meta(extra_json_schema={"format": "uri"})]


class AssertionResult(msgspec.Struct, frozen=True, kw_only=True):
    """mail_sign_assertion's result (spec section 4.3): the token, the kid that signed it, when
    it expires (UTC, whole seconds) and where its key is published."""

    assertion: Annotated[str, msgspec.Meta(description="The token, a compact JWS.")]
    kid: Kid
    expires_at: Instant
    jwks_uri: Uri


class _Jwk(msgspec.Struct, frozen=True):
    kty: str
    crv: str
    x: str
    kid: str
    alg: str
    use: str


class _Jwks(msgspec.Struct, frozen=True):
    keys: list[_Jwk]


def issuer(api_host: str) -> str:
    """The ``iss`` of this deployment's assertions: ``https://{PM_API_HOST}``."""
    return f"https://{api_host}"


def jwks_uri(api_host: str) -> str:
    """Where this deployment's JWKS is served: ``https://{PM_API_HOST}/.well-known/jwks.json``."""
    return issuer(api_host) + JWKS_PATH


def check_ext(ext: dict[str, Any]) -> None:
    """Refuse an ``ext`` the schema cannot: more than :data:`EXT_MAX_BYTES` as JSON, nested
    deeper than :data:`EXT_MAX_DEPTH`, or a top-level name in :data:`REFUSED_EXT_NAMES` (spec
    section 4.3, O6).

    Raises:
        PylotaError: ``invalid_request`` with ``details.path`` ``ext``.
    """
    if refused := sorted(REFUSED_EXT_NAMES & ext.keys()):
        raise invalid(
            "ext", f"ext uses claim names the token reserves: {', '.join(refused)}.",
            f"Rename or drop {', '.join(refused)} in ext. Refused names: registered claims"
            f" ({', '.join(sorted(REGISTERED_CLAIMS | TOKEN_CLAIMS))}) and Pylota claims"
            f" ({', '.join(sorted(PYLOTA_CLAIMS))}).")
    size = len(msgspec.json.encode(ext))
    if size > EXT_MAX_BYTES:
        raise invalid("ext", f"ext is {size} bytes as JSON; at most {EXT_MAX_BYTES} are allowed.",
                      f"Shorten ext to at most {EXT_MAX_BYTES} bytes of compact JSON.")
    if _depth(ext) > EXT_MAX_DEPTH:
        raise invalid("ext", f"ext is nested more than {EXT_MAX_DEPTH} levels deep.",
                      f"Flatten ext to at most {EXT_MAX_DEPTH} levels of objects and arrays.")


def _depth(value: Any) -> int:
    """How deep objects and arrays nest in ``value`` (a JSON value; 1 for ``{}``), counted
    without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(
            item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest


async def sign_assertion(conn: asyncpg.Connection, *, secret: str, api_host: str,
                         identity_id: str, address: str, display_name: str | None,
                         tenant_id: str, tenant_name: str, accountable_human: bool,
                         audience: str, expires_in: int = EXPIRES_IN_DEFAULT,
                         nonce: str | None = None, ext: dict[str, Any] | None = None,
                         now: datetime | None = None) -> AssertionResult:
    """A new signed assertion for one identity (spec section 4.3, mail_sign_assertion).

    Args:
        conn: a connection; the key is made on first use.
        secret: PM_SIGNING_SECRET.
        api_host: PM_API_HOST: gives ``iss`` and ``jwks_uri``.
        identity_id, address, display_name: the identity (``sub``, ``email``, ``name``).
        tenant_id, tenant_name: its workspace (``workspace``).
        accountable_human: the tenant policy's answer (``accountable_human``).
        audience: ``aud``; nonce: ``nonce``; ext: ``ext`` (see :func:`check_ext`).
        expires_in: seconds, :data:`EXPIRES_IN_MIN` to :data:`EXPIRES_IN_MAX` (checked at
            decode).
        now: the signing time (default: the clock); tests pass it.

    Raises:
        PylotaError: ``invalid_request`` (path ``ext``) from :func:`check_ext`, before any key
            is touched; ``unavailable`` when PM_SIGNING_SECRET is unset or does not decrypt
            the key.
    """
    if ext is not None:
        check_ext(ext)
    signer = await active_signer(conn, KeyPurpose.ASSERTION, secret, now=now)
    issued = int((now or datetime.now(timezone.utc)).timestamp())
    claims: dict[str, Any] = {
        "iss": issuer(api_host), "sub": identity_id, "aud": audience,
        "iat": issued, "exp": issued + expires_in, "jti": secrets.token_urlsafe(16),
        "email": address, "agent": True, "accountable_human": accountable_human,
        "workspace": {"id": tenant_id, "name": tenant_name},
    }
    if display_name:
        claims["name"] = display_name
    if nonce is not None:
        claims["nonce"] = nonce
    if ext:
        claims["ext"] = ext
    with warnings.catch_warnings():
        # joserfc warns on every "EdDSA" signature (RFC 9864); ALG says why it is used anyway.
        warnings.simplefilter("ignore", SecurityWarning)
        token = jwt.encode({"alg": ALG, "typ": "JWT", "kid": signer.kid}, claims,
                           OKPKey.import_key(signer.private_key), algorithms=[ALG])
    return AssertionResult(assertion=token, kid=signer.kid,
                           expires_at=datetime.fromtimestamp(issued + expires_in, timezone.utc),
                           jwks_uri=jwks_uri(api_host))


async def jwks_document(conn: asyncpg.Connection, *,
                        now: datetime | None = None) -> WellKnownDocument:
    """What ``GET`` :data:`JWKS_PATH` answers: the public assertion keys a verifier may need at
    ``now`` (the active key, and retired keys until their ``drop_after``), each with ``kty``,
    ``crv``, ``x``, ``kid``, ``alg`` and ``use`` only, and ``Cache-Control: public,
    max-age=300`` (:data:`~shared.signing.keys.CACHE_MAX_AGE`). Needs no secret.
    """
    keys = await published_keys(conn, KeyPurpose.ASSERTION, now=now)
    body = msgspec.json.encode(_Jwks(keys=[
        _Jwk(kty="OKP", crv="Ed25519", kid=k.kid, alg=ALG, use="sig",
             x=jwk_x(k.public_key)) for k in keys]))
    return WellKnownDocument(body=body, headers={
        "Content-Type": JWKS_MEDIA_TYPE,
        "Cache-Control": f"public, max-age={int(CACHE_MAX_AGE.total_seconds())}"})
