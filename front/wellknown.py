"""The agent identity documents a verifier fetches, unauthenticated (spec section 4.3).

- ``GET /.well-known/jwks.json``: the JWK Set that verifies mail_sign_assertion's tokens
  (``shared.signing.assertions.jwks_document``: the active key and retired keys until their
  last token has expired);
- ``GET /.well-known/http-message-signatures-directory``: the key directory of
  mail_sign_http_request's Web Bot Auth signatures, signed by each of its keys
  (``shared.signing.web_bot_auth.directory_document``).

Both go out exactly as the domain builds them: body bytes unchanged (the directory's
``Content-Digest`` covers them) and its headers, ``Cache-Control: public, max-age=300``
included. When PM_SIGNING_SECRET is set, a purpose without a key yet gets its first key here,
so a verifier never caches an empty set just before the first token. The directory needs the
secret (its proof is signed); without it the answer is 503 ``unavailable``, as for the tools.
Each request writes one ``request`` log line, never the documents' signatures.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
from litestar import Request, Response, route

from front.resources import Resources
from front.rest.errors import error_response
from shared.errors import ErrorCode, PylotaError, dependency_failure
from shared.ids import Prefix, new_id
from shared.logs import get_logger
from shared.signing import KeyPurpose, WellKnownDocument, directory_document, jwks_document
from shared.signing.assertions import JWKS_PATH
from shared.signing.keys import ensure_active_key
from shared.signing.web_bot_auth import DIRECTORY_PATH

__all__ = ["wellknown_routes"]

log = get_logger("front.wellknown")

Build = Callable[[asyncpg.Connection, Resources], Awaitable[WellKnownDocument]]


async def _jwks(conn: asyncpg.Connection, res: Resources) -> WellKnownDocument:
    if res.settings.pm_signing_secret:
        await ensure_active_key(conn, KeyPurpose.ASSERTION, res.settings.pm_signing_secret)
    return await jwks_document(conn)


async def _directory(conn: asyncpg.Connection, res: Resources) -> WellKnownDocument:
    secret = res.settings.pm_signing_secret
    if secret:
        await ensure_active_key(conn, KeyPurpose.HTTP_SIGNATURE, secret)
    return await directory_document(conn, secret=secret, api_host=res.settings.pm_api_host)


async def _serve(request: Request[Any, Any, Any], path: str, build: Build) -> Response[bytes]:
    res: Resources = request.app.state.resources
    request_id = new_id(Prefix.REQUEST)
    started = time.monotonic()
    fields: dict[str, Any] = {"surface": "wellknown", "request_id": request_id,
                              "http_method": request.method, "route": path}
    try:
        async with res.db.acquire() as conn:
            document = await build(conn, res)
        response = Response(content=document.body, status_code=200,
                            headers={**document.headers, "x-request-id": request_id},
                            media_type=document.headers["Content-Type"])
    except Exception as exc:  # noqa: BLE001 - every failure is the envelope
        error = dependency_failure(exc) or PylotaError(ErrorCode.INTERNAL,
                                                       "The document could not be built.")
        if not isinstance(exc, PylotaError):
            fields["exception"] = type(exc).__name__
        fields["error_code"] = error.code.value
        response = error_response(error, request_id)
    log.info("request", **fields, status=response.status_code,
             duration_ms=round((time.monotonic() - started) * 1000, 1))
    return response


def wellknown_routes() -> list[Any]:
    """The route handlers of the two documents."""

    @route(JWKS_PATH, http_method=["GET", "HEAD"], include_in_schema=False)
    async def jwks(request: Request[Any, Any, Any]) -> Response[bytes]:
        """The JWKS of agent assertions."""
        return await _serve(request, JWKS_PATH, _jwks)

    @route(DIRECTORY_PATH, http_method=["GET", "HEAD"], include_in_schema=False)
    async def directory(request: Request[Any, Any, Any]) -> Response[bytes]:
        """The HTTP message signatures directory of Web Bot Auth."""
        return await _serve(request, DIRECTORY_PATH, _directory)

    return [jwks, directory]
