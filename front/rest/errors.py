"""REST errors: every failure is the spec section 5 envelope with its DESIGN.md section 5.5 status.

:func:`error_response` is the one renderer: a :class:`~shared.errors.PylotaError` becomes
``{"error": {code, message, retryable, fix, request_id, details}}`` with the code's status,
``Retry-After`` on 429 (``details.retry_after``) and 503, and ``WWW-Authenticate`` on 401.
:data:`EXCEPTION_HANDLERS` renders what Litestar raises before a route runs (no such route,
method not allowed) the same way, so no response of the API is ever another shape.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, MethodNotAllowedException, NotFoundException

from front.shedding import RETRY_AFTER_SECONDS
from shared.errors import ErrorCode, PylotaError, dependency_failure
from shared.ids import Prefix, new_id
from shared.logs import get_logger

__all__ = ["error_response", "EXCEPTION_HANDLERS", "WWW_AUTHENTICATE"]

log = get_logger("front.rest")

#: ``WWW-Authenticate`` of a 401 (spec section 2.1 step 5; the same for REST).
WWW_AUTHENTICATE = 'Bearer realm="pylota-mail", error="invalid_token"'


def error_response(error: PylotaError, request_id: str) -> Response[bytes]:
    """``error`` as the REST error envelope and status (see the module docstring)."""
    headers = {"x-request-id": request_id}
    if error.code is ErrorCode.RATE_LIMITED and "retry_after" in error.details:
        headers["retry-after"] = str(error.details["retry_after"])
    elif error.code is ErrorCode.UNAVAILABLE:
        headers["retry-after"] = str(RETRY_AFTER_SECONDS)
    elif error.status == 401:
        headers["www-authenticate"] = WWW_AUTHENTICATE
    return Response(content=msgspec.json.encode(error.envelope(request_id)),
                    status_code=error.status, media_type="application/json", headers=headers)


def _refused(request: Request[Any, Any, Any], error: PylotaError, status: int | None = None,
             exc: Exception | None = None) -> Response[bytes]:
    """``error`` rendered for a request no route took, with its ``request`` log line (every
    request writes one; these wrote none: found by an attack). The path is not logged: it may
    hold anything a caller typed; ``route`` says no route matched."""
    request_id = new_id(Prefix.REQUEST)
    response = error_response(error, request_id)
    response.status_code = status or response.status_code
    fields: dict[str, Any] = {}
    if exc is not None and not isinstance(exc, HTTPException):
        fields["exception"] = type(exc).__name__
    log.info("request", surface="rest", request_id=request_id,
             http_method=request.method, route=None,
             error_code=error.code.value, status=response.status_code, **fields)
    return response


def _not_found(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    if not request.url.path.startswith("/v1"):
        return Response(content=b"", status_code=404)
    return _refused(request, PylotaError(
        ErrorCode.INVALID_REQUEST, f"No endpoint {request.method} {request.url.path}.",
        fix="See the API's OpenAPI document at /v1/openapi.json."), 404)


def _not_allowed(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    response = _refused(request, PylotaError(
        ErrorCode.INVALID_REQUEST, f"{request.method} is not allowed on {request.url.path}.",
        fix="See the API's OpenAPI document at /v1/openapi.json."), 405)
    if isinstance(exc, HTTPException) and exc.headers:
        response.headers.update(exc.headers)
    return response


def _http(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    assert isinstance(exc, HTTPException)
    code = ErrorCode.PAYLOAD_TOO_LARGE if exc.status_code == 413 else ErrorCode.INVALID_REQUEST
    return _refused(request, PylotaError(code, exc.detail or "The request was refused."),
                    exc.status_code)


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    return _refused(request, dependency_failure(exc) or PylotaError(
        ErrorCode.INTERNAL, "The request failed unexpectedly."), exc=exc)


EXCEPTION_HANDLERS: dict[Any, Any] = {
    NotFoundException: _not_found,
    MethodNotAllowedException: _not_allowed,
    HTTPException: _http,
    Exception: _unexpected,
}
