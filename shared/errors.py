"""The one error vocabulary of Pylota Mail (DESIGN.md section 5.5, spec section 5).

Domain code raises :class:`PylotaError` with an :class:`ErrorCode`; each surface renders it in one
place (the MCP ``isError`` envelope in ``front.mcp.dispatch``, HTTP statuses at the transport).
JSON-RPC protocol errors are a separate type in ``front.mcp``; they never leave a tool.
"""

from __future__ import annotations

import asyncio
from enum import StrEnum
from typing import Any

import asyncpg
import msgspec
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["ErrorCode", "PylotaError", "ErrorBody", "ErrorEnvelope", "STATUS", "RETRYABLE", "MAX_ERROR_TEXT",
           "invalid", "dependency_failure"]


class ErrorCode(StrEnum):
    """Error codes of DESIGN.md section 5.5."""

    INVALID_REQUEST = "invalid_request"
    SCOPE_TOO_LARGE = "scope_too_large"
    TOO_MANY_RECIPIENTS = "too_many_recipients"
    HEADER_NOT_ALLOWED = "header_not_allowed"
    UNAUTHENTICATED = "unauthenticated"
    KEY_EXPIRED = "key_expired"
    KEY_REVOKED = "key_revoked"
    BILLING_LIMIT = "billing_limit"
    PERMISSION_DENIED = "permission_denied"
    SCOPE_DENIED = "scope_denied"
    PARTNER_SUSPENDED = "partner_suspended"
    POLICY_DENIED = "policy_denied"
    WEB_BOT_AUTH_DISABLED = "web_bot_auth_disabled"
    IDENTITY_NOT_FOUND = "identity_not_found"
    MESSAGE_NOT_FOUND = "message_not_found"
    THREAD_NOT_FOUND = "thread_not_found"
    ATTACHMENT_NOT_FOUND = "attachment_not_found"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    RATE_LIMITED = "rate_limited"
    INTERNAL = "internal"
    UNAVAILABLE = "unavailable"


#: REST status of each code (DESIGN.md section 5.5).
STATUS: dict[ErrorCode, int] = {
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.SCOPE_TOO_LARGE: 400,
    ErrorCode.TOO_MANY_RECIPIENTS: 400,
    ErrorCode.HEADER_NOT_ALLOWED: 400,
    ErrorCode.UNAUTHENTICATED: 401,
    ErrorCode.KEY_EXPIRED: 401,
    ErrorCode.KEY_REVOKED: 401,
    ErrorCode.BILLING_LIMIT: 402,
    ErrorCode.PERMISSION_DENIED: 403,
    ErrorCode.SCOPE_DENIED: 403,
    ErrorCode.PARTNER_SUSPENDED: 403,
    ErrorCode.POLICY_DENIED: 403,
    ErrorCode.WEB_BOT_AUTH_DISABLED: 403,
    ErrorCode.IDENTITY_NOT_FOUND: 404,
    ErrorCode.MESSAGE_NOT_FOUND: 404,
    ErrorCode.THREAD_NOT_FOUND: 404,
    ErrorCode.ATTACHMENT_NOT_FOUND: 404,
    ErrorCode.IDEMPOTENCY_CONFLICT: 409,
    ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.INTERNAL: 500,
    ErrorCode.UNAVAILABLE: 503,
}

#: Codes a client may retry unchanged.
RETRYABLE: frozenset[ErrorCode] = frozenset(
    {ErrorCode.RATE_LIMITED, ErrorCode.INTERNAL, ErrorCode.UNAVAILABLE}
)

_DEFAULT_FIX: dict[ErrorCode, str] = {
    ErrorCode.UNAUTHENTICATED: "Send a valid API key as 'Authorization: Bearer pmk_live_…'.",
    ErrorCode.KEY_EXPIRED: "Create a new API key; this one has expired.",
    ErrorCode.KEY_REVOKED: "Create a new API key; this one was revoked.",
    ErrorCode.RATE_LIMITED: "Wait details.retry_after seconds, then retry.",
    ErrorCode.INTERNAL: "Retry; if it keeps failing, report the request_id.",
    ErrorCode.UNAVAILABLE: "A dependency is down; retry in a few seconds.",
}


class ErrorBody(msgspec.Struct, kw_only=True):
    """The ``error`` object of the envelope (spec section 5)."""

    code: str
    message: str
    retryable: bool
    fix: str
    request_id: str
    details: dict[str, Any] = {}


class ErrorEnvelope(msgspec.Struct):
    """``{"error": {...}}``, sent as compact JSON in a tool's text block."""

    error: ErrorBody


class PylotaError(Exception):
    """A failure every surface can render.

    Args:
        code: the catalog code.
        message: what went wrong, for a model to read; never holds mail content or secrets.
        fix: what to do next, naming MCP argument names (spec section 5).
        details: structured fields such as ``retry_after`` or ``path``.
        retryable: whether the same call may succeed later, when it differs from the code's
            rule (``unavailable`` for a deployment left unconfigured: retrying will not help
            until an operator acts).
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        fix: str | None = None,
        details: dict[str, Any] | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = code in RETRYABLE if retryable is None else retryable
        self.message = message
        self.fix = fix if fix is not None else _DEFAULT_FIX.get(code, "Correct the request and retry.")
        self.details = details or {}

    @property
    def status(self) -> int:
        """The REST status of the code."""
        return STATUS[self.code]

    def envelope(self, request_id: str) -> ErrorEnvelope:
        """Render as the spec section 5 envelope; ``message``, ``fix`` and text ``details`` cut
        to :data:`MAX_ERROR_TEXT` characters."""
        return ErrorEnvelope(
            error=ErrorBody(
                code=self.code.value,
                message=_cut(self.message),
                retryable=self.retryable,
                fix=_cut(self.fix),
                request_id=request_id,
                details={k: _cut(v) if isinstance(v, str) else v for k, v in self.details.items()},
            )
        )


#: Longest text of an error's message, fix or text detail: an error that quotes the caller's
#: input (an unknown label) quoted all of it, 600,000 characters into the model's context
#: (found by an attack), where results are held to 96 KB (spec section 4.2).
MAX_ERROR_TEXT = 1_000


def _cut(text: str) -> str:
    return text if len(text) <= MAX_ERROR_TEXT else text[:MAX_ERROR_TEXT - 1] + "…"


def invalid(path: str, message: str, fix: str) -> PylotaError:
    """An ``invalid_request`` naming the argument at ``path`` (``details.path``)."""
    return PylotaError(ErrorCode.INVALID_REQUEST, message, fix=fix, details={"path": path})


#: Exceptions that mean a dependency is down or too slow, not that our code is wrong: a lost or
#: refused PostgreSQL or Redis connection, a server shutting down, a statement timeout.
_DEPENDENCY_FAILURES: tuple[type[BaseException], ...] = (
    OSError, asyncio.TimeoutError, asyncpg.PostgresConnectionError,
    asyncpg.OperatorInterventionError, asyncpg.QueryCanceledError,
    asyncpg.TooManyConnectionsError, RedisConnectionError, RedisTimeoutError,
)


def _closed_connection(exc: BaseException) -> bool:
    """asyncpg's ``InterfaceError`` for a connection that PostgreSQL's loss already closed: a
    transaction's rollback (or any call) after the connection went away mid-query raises it in
    place of the ``ConnectionDoesNotExistError`` it follows. Other interface errors (a
    connection used after its release) are our bugs, and stay ``internal``."""
    return isinstance(exc, asyncpg.InterfaceError) and "connection is closed" in str(exc)


def dependency_failure(exc: BaseException) -> PylotaError | None:
    """``unavailable`` (retryable) when ``exc`` means PostgreSQL or Redis is down or too slow;
    None when it is anything else, which callers render as ``internal``.

    The one table of such exceptions, used wherever a failure is rendered (the call pipeline,
    the job runner, the transports), like httpx's ``map_httpcore_exceptions``.
    """
    if isinstance(exc, PylotaError):
        return exc
    if isinstance(exc, _DEPENDENCY_FAILURES) or _closed_connection(exc):
        return PylotaError(ErrorCode.UNAVAILABLE, "A dependency of the service did not answer.",
                           fix="Retry in a few seconds; if it keeps failing, report the request_id.")
    return None
