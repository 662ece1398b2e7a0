"""The MCP request ladder: the rungs of seed section 2.1 that need no database.

Pure: no I/O, no Litestar, no ``shared.db``. Each rung takes plain values (an HTTP method, a
header mapping, a length, raw bytes, a decoded body) and returns ``None`` or a value when it
passes, or a :class:`Rejection` for the first thing that failed. ``front/mcp/transport.py`` calls
the rungs in order, renders a rejection with :meth:`Rejection.error_response`, and runs the two
database rungs (authenticate, charge ``RL_API``) between :func:`parse_body` and
:func:`select_era`. Header mappings are looked up with lower-case names, so pass Litestar's
case-insensitive ``Headers`` or a dict keyed in lower case.

Rungs, in order (seed section 2.1), with the reason for each place:

1. :func:`check_method`: POST continues, OPTIONS is answered 204, anything else is 405 with
   ``Allow: POST``. First, because nothing else about a GET matters.
2. :func:`check_origin`: a present ``Origin`` other than ``https://{api_host}``, or a ``Host`` that
   is neither ``api_host`` nor loopback, is 403 with no id. Before the body is read, so a page
   in a browser learns nothing from our parser.
3. :func:`check_size_and_type`: more than 7 MiB is 413 (-32000, ``data`` the
   ``payload_too_large`` envelope); a type other than ``application/json`` is 415 (-32600). Both
   have ``id: null`` because the body is not read. Size before type: a huge body is refused
   whatever it claims to be.
4. :func:`parse_body`: malformed JSON is 400/-32700; a batch, a non-object or an object that is
   not a JSON-RPC 2.0 request or notification is 400/-32600.
5. (transport) authenticate, 6. (transport) charge ``RL_API``: they need the database, and run
   before era selection so an anonymous caller learns nothing about versions.
7. :func:`select_era`: ``initialize`` selects legacy; a modern ``_meta`` version or a modern
   ``MCP-Protocol-Version`` header selects modern, which then checks, in this order, the
   ``_meta`` shape (-32602), the mirrored headers (-32020), and the version (-32022): a client
   whose headers disagree with its body is told so before it is told the body's version is not
   served (PROTOCOL.md section 1.3; conformance sends header 2026-07-28 with ``_meta`` v999.0.0
   and expects -32020). Anything else is legacy, whose ``MCP-Protocol-Version`` must be one of
   :data:`~front.mcp.protocol.LEGACY_VERSIONS` (-32022 otherwise).

Not a rung: whether a method exists. Dispatch decides that in one place (DESIGN section 5.1); the
one exception here is ``initialize`` on the modern wire, which is 404/-32601 because era
selection is where ``initialize`` is recognised. Ignored on purpose: ``Mcp-Session-Id``,
``Last-Event-ID`` and ``Mcp-Param-*`` (no tool uses ``x-mcp-header``; seed section 2.2).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from front.mcp.protocol import (
    CLIENT_CAPABILITIES_META_KEY,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LEGACY_DEFAULT,
    LEGACY_VERSIONS,
    METHOD_HEADER,
    METHOD_NOT_FOUND,
    MODERN_VERSION,
    MODERN_VERSIONS,
    NAME_HEADER,
    PARSE_ERROR,
    PROGRESS_TOKEN_META_KEY,
    PROTOCOL_VERSION_HEADER,
    PROTOCOL_VERSION_META_KEY,
    SERVER_ERROR,
    SUPPORTED_VERSIONS,
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorObject,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    ProgressToken,
    RequestId,
    RequestMeta,
    UnsupportedVersionData,
    decode_json,
)
from shared.errors import ErrorCode, PylotaError

__all__ = [
    "MAX_BODY_BYTES",
    "ALLOW",
    "NAME_BEARING_METHODS",
    "RejectionKind",
    "REJECTION_STATUS",
    "Rejection",
    "Route",
    "reject",
    "check_method",
    "check_origin",
    "check_size_and_type",
    "parse_body",
    "select_era",
    "negotiate_legacy_version",
    "decode_header_value",
]

MAX_BODY_BYTES: Final = 7 * 1024 * 1024
"""The REST body limit, so ``mail_send`` can carry attachments (seed sections 2.1 step 3 and 7)."""

ALLOW: Final = "POST"
"""``Allow`` on 405 and on the OPTIONS answer: POST is the only method that does anything."""

NAME_BEARING_METHODS: Final[Mapping[str, str]] = MappingProxyType(
    {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
)
"""Method → the ``params`` member that ``Mcp-Name`` mirrors (2026-07-28 streamable-http.mdx).

``resources/read`` is listed although we serve no resources: the header rung checks the transport
contract and dispatch alone decides that the method does not exist.
"""

_UNSTATED_VERSION: Final = "2025-03-26"
"""What a request without ``MCP-Protocol-Version`` speaks (2025-11-25 transports, "Protocol
Version Header"); we do not serve it, so it is the ``requested`` of that -32022."""

_LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "[::1]"})

_OWS: Final = " \t"
"""RFC 9110 section 5.6.3 optional whitespace, trimmed from header values before comparing."""

_B64_SENTINEL: Final = re.compile(r"=\?base64\?(?P<payload>.*)\?=")


class RejectionKind(StrEnum):
    """Why a request is not served; :data:`REJECTION_STATUS` gives each its HTTP status and code."""

    OPTIONS = "options"
    """Not a failure: the 204 answer to OPTIONS, with no body and no CORS grant."""
    METHOD_NOT_ALLOWED = "method_not_allowed"
    FORBIDDEN_ORIGIN = "forbidden_origin"
    FORBIDDEN_HOST = "forbidden_host"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    REQUEST_TIMEOUT = "request_timeout"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    PARSE_ERROR = "parse_error"
    INVALID_REQUEST = "invalid_request"
    UNAUTHENTICATED = "unauthenticated"
    PARTNER_SUSPENDED = "partner_suspended"
    RATE_LIMITED = "rate_limited"
    INVALID_PARAMS = "invalid_params"
    HEADER_MISMATCH = "header_mismatch"
    UNSUPPORTED_VERSION = "unsupported_version"
    METHOD_NOT_FOUND = "method_not_found"
    UNAVAILABLE = "unavailable"
    """PostgreSQL or Redis is down, or the front is saturated: retry after ``Retry-After``."""
    INTERNAL = "internal"


REJECTION_STATUS: Final[Mapping[RejectionKind, tuple[int, int | None]]] = MappingProxyType(
    {
        RejectionKind.OPTIONS: (204, None),
        RejectionKind.METHOD_NOT_ALLOWED: (405, None),
        # The seed names no code for 403; -32000 is the one it uses for every other refusal
        # made by the transport rather than by JSON-RPC (401, 413, 429).
        RejectionKind.FORBIDDEN_ORIGIN: (403, SERVER_ERROR),
        # 403, not the SDK's 421: the conformance dns-rebinding check asks for 403 exactly.
        RejectionKind.FORBIDDEN_HOST: (403, SERVER_ERROR),
        RejectionKind.PAYLOAD_TOO_LARGE: (413, SERVER_ERROR),
        # A body that stops arriving; not in the seed's list, which assumes bodies arrive.
        RejectionKind.REQUEST_TIMEOUT: (408, SERVER_ERROR),
        RejectionKind.UNSUPPORTED_MEDIA_TYPE: (415, INVALID_REQUEST),
        RejectionKind.PARSE_ERROR: (400, PARSE_ERROR),
        RejectionKind.INVALID_REQUEST: (400, INVALID_REQUEST),
        RejectionKind.UNAUTHENTICATED: (401, SERVER_ERROR),
        # Authentication succeeded but the key's partner is suspended (seed section 3).
        RejectionKind.PARTNER_SUSPENDED: (403, SERVER_ERROR),
        RejectionKind.RATE_LIMITED: (429, SERVER_ERROR),
        RejectionKind.INVALID_PARAMS: (400, INVALID_PARAMS),
        RejectionKind.HEADER_MISMATCH: (400, HEADER_MISMATCH),
        RejectionKind.UNSUPPORTED_VERSION: (400, UNSUPPORTED_PROTOCOL_VERSION),
        # Only the modern era reaches a ladder 404; a legacy -32601 is dispatch's, with HTTP 200.
        RejectionKind.METHOD_NOT_FOUND: (404, METHOD_NOT_FOUND),
        # A failure outside a tool (seed section 2.4) that is the dependency's, not ours:
        # 503 with Retry-After, so clients back off rather than report a bug.
        RejectionKind.UNAVAILABLE: (503, INTERNAL_ERROR),
        RejectionKind.INTERNAL: (500, INTERNAL_ERROR),
    }
)
"""Kind → (HTTP status, JSON-RPC code or ``None`` for no body): the one copy of seed section 2.4."""


class Rejection(msgspec.Struct, frozen=True, kw_only=True):
    """The first rung that failed, ready to render.

    ``code is None`` means the response has no body (204, 405). ``id`` is the request's id when
    the body was read far enough to know it, else ``None`` (rendered ``"id": null``). ``headers``
    are extra response headers such as ``Allow`` or ``WWW-Authenticate``.
    """

    kind: RejectionKind
    http_status: int
    code: int | None
    message: str
    data: Any = None
    id: RequestId | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def error_response(self) -> JSONRPCError | None:
        """The JSON-RPC error body to send, or ``None`` when the status goes out without one."""
        if self.code is None:
            return None
        error = ErrorObject(code=self.code, message=self.message, data=UNSET if self.data is None else self.data)
        return JSONRPCError(id=self.id, error=error)


class Route(msgspec.Struct, frozen=True, kw_only=True):
    """A request that passed every rung here: which era serves it, at which version.

    ``version`` is the negotiated version for ``initialize``, the header's for other legacy
    messages and the ``_meta`` one for modern messages. ``id`` is ``UNSET`` for a notification
    (an id of ``0`` is an id). ``params`` is ``{}`` when the body had none. ``progress_token``
    keeps its JSON type (int or str), ``None`` when the request did not ask for progress.
    """

    era: Literal["legacy", "modern"]
    version: str
    method: str
    id: RequestId | UnsetType = UNSET
    params: dict[str, Any]
    progress_token: ProgressToken | None = None

    @property
    def is_notification(self) -> bool:
        """A message without an id: answered 202 with no body (seed section 2.1 step 9)."""
        return self.id is UNSET


def reject(
    kind: RejectionKind,
    message: str,
    *,
    data: Any = None,
    id: RequestId | None = None,
    headers: tuple[tuple[str, str], ...] = (),
) -> Rejection:
    """Build a :class:`Rejection` with the status and code of :data:`REJECTION_STATUS`.

    Public so the transport's own rungs (401, 429, 500) use the same table.
    """
    status, code = REJECTION_STATUS[kind]
    return Rejection(kind=kind, http_status=status, code=code, message=message, data=data, id=id, headers=headers)


# --- Rung 1: HTTP method ----------------------------------------------------------------------


def check_method(http_method: str) -> Rejection | None:
    """``None`` for POST; an OPTIONS answer (204) or a 405, both with ``Allow: POST``.

    Seed section 2.1 step 1: GET and DELETE are 405 in both revisions (we offer no SSE stream
    and no sessions), OPTIONS is 204 without a CORS grant, and every other method is 405.
    Method names are case-sensitive (RFC 9110 section 9.1), so ``post`` is 405 too.
    """
    if http_method == "POST":
        return None
    if http_method == "OPTIONS":
        return reject(RejectionKind.OPTIONS, "No CORS grant: browsers are not supported clients.", headers=(("allow", ALLOW),))
    return reject(RejectionKind.METHOD_NOT_ALLOWED, f"{http_method} is not allowed on /mcp.", headers=(("allow", ALLOW),))


# --- Rung 2: Origin and Host ------------------------------------------------------------------


def check_origin(headers: Mapping[str, str], api_host: str) -> Rejection | None:
    """403 (error without id) for a foreign ``Origin`` or ``Host``; ``None`` otherwise.

    ``Origin``: when present it must be exactly ``https://{api_host}`` (seed section 2.1 step 2;
    both revisions say a server MUST answer an invalid Origin with 403), or, on a loopback
    ``Host``, that host's own origin (:func:`_origin_allowed`). Native clients and Claude's cloud
    connectors send none.

    ``Host`` guards against DNS rebinding: a page on ``evil.example`` whose name is re-pointed at
    127.0.0.1 reaches a local server with ``Host: evil.example`` and, being same-origin to the
    browser, possibly no ``Origin`` at all. So ``Host`` must be ``api_host`` or a loopback name
    (``127.0.0.1``, ``localhost``, ``[::1]``) with any port: loopback names are what a local
    client or a test server on a random port sends, and an attacker's page cannot make a browser
    send them for its own origin. A request without ``Host`` passes: only browsers carry out
    rebinding and they always send it, and HTTP/1.1 servers refuse a request lacking it before we
    see it. The conformance scenario ``dns-rebinding-protection`` expects exactly this: 403 for
    ``Host: evil.example.com``, success for the server's own loopback ``host:port``.
    """
    origin = headers.get("origin")
    host = headers.get("host")
    host = None if host is None else host.strip(_OWS).lower()
    if origin is not None and not _origin_allowed(origin.strip(_OWS).lower(), host, api_host.lower()):
        return reject(RejectionKind.FORBIDDEN_ORIGIN, "Origin is not allowed.")
    if host is not None and not _host_allowed(host, api_host.lower()):
        return reject(RejectionKind.FORBIDDEN_HOST, "Host is not allowed.")
    return None


def _origin_allowed(origin: str, host: str | None, api_host: str) -> bool:
    """``origin`` (lower case) is ``https://{api_host}``, or the very origin of a loopback server.

    The second case is a request whose ``Host`` is a loopback name and whose ``Origin`` is that
    same ``http(s)://host[:port]``: a page of that origin is served by this server, which serves
    no pages, and a rebinding page's origin is always its own domain name, never a loopback
    literal. The conformance check ``localhost-host-valid-accepted`` sends exactly this.
    """
    if origin == f"https://{api_host}":
        return True
    return host is not None and _is_loopback(host) and origin in (f"http://{host}", f"https://{host}")


def _host_allowed(host: str, api_host: str) -> bool:
    """``host`` (lower case) is ``api_host`` or a loopback name, either with an optional numeric
    port: a client that reaches the front on a published port (``mail.internal:8000``) names
    the port in ``Host`` (RFC 9110 section 7.2), while a rebinding page's ``Host`` is always its
    own domain name, whatever the port."""
    name = _host_name(host)
    return name is not None and (name == (_host_name(api_host) or api_host)
                                 or name in _LOOPBACK_HOSTS)


def _is_loopback(host: str) -> bool:
    """``host`` (lower case) is ``127.0.0.1``, ``localhost`` or ``[::1]``, with an optional port."""
    return _host_name(host) in _LOOPBACK_HOSTS


def _host_name(host: str) -> str | None:
    """The name of ``host`` (``name``, ``name:port``, ``[v6]`` or ``[v6]:port``) without its
    port, or None when what follows the name is not a numeric port."""
    if host.startswith("["):
        name, bracket, rest = host.partition("]")
        name += bracket
    else:
        name, colon, port = host.partition(":")
        rest = colon + port
    if rest != "" and not (rest[0] == ":" and rest[1:].isdigit()):
        return None
    # "mail.example." is the same name written fully qualified (RFC 1034 section 3.1).
    return name[:-1] if name.endswith(".") and not name.startswith("[") else name


# --- Rung 3: size and type --------------------------------------------------------------------


def check_size_and_type(content_length: int | None, content_type: str | None, *, request_id: str) -> Rejection | None:
    """413 for more than :data:`MAX_BODY_BYTES`, 415 for a type other than ``application/json``.

    Args:
        content_length: the declared ``Content-Length``, or ``None`` when the body is chunked; the
            transport then stops reading at ``MAX_BODY_BYTES + 1`` bytes and calls again with the
            count, so a missing or lying header cannot get past the limit.
        content_type: the raw ``Content-Type``; parameters such as ``charset`` are ignored and the
            media type compares case-insensitively (RFC 9110 section 8.3.1).
        request_id: the Pylota request id (``req_…``) for the ``payload_too_large`` envelope.

    Both rejections have ``id: null``: the body is not read (seed section 2.1 step 3).
    """
    if content_length is not None and content_length > MAX_BODY_BYTES:
        error = PylotaError(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"The request body is larger than the limit of {MAX_BODY_BYTES} bytes (7 MiB).",
            fix="Send a smaller request: attachments count towards the 7 MiB limit.",
            details={"limit_bytes": MAX_BODY_BYTES},
        )
        return reject(
            RejectionKind.PAYLOAD_TOO_LARGE,
            "Payload too large",
            data=msgspec.to_builtins(error.envelope(request_id)),
        )
    media_type = (content_type or "").partition(";")[0].strip(_OWS).lower()
    if media_type != "application/json":
        return reject(RejectionKind.UNSUPPORTED_MEDIA_TYPE, "Content-Type must be application/json.")
    return None


# --- Rung 4: one JSON-RPC object --------------------------------------------------------------


def parse_body(raw: bytes) -> dict[str, Any] | Rejection:
    """The decoded body, checked to be one JSON-RPC 2.0 request or notification.

    A request is ``{"jsonrpc": "2.0", "id": int | str, "method": str, "params"?: object}``; without
    an ``id`` member it is a notification (key presence decides, JSON-RPC 2.0 section 4.1, so a
    request with a malformed id is refused rather than taken for a notification).

    Rejections: malformed JSON, invalid UTF-8, an integer literal too long to convert, or nesting
    too deep → 400/-32700 with ``id: null``. A batch (2025-06-18 removed batching), any other
    non-object, a posted response, or a malformed envelope → 400/-32600, echoing the id when it
    is a valid one.
    """
    try:
        decoded = decode_json(raw)
    except RecursionError:
        return reject(RejectionKind.PARSE_ERROR, "Parse error: the body's JSON nests deeper than "
                      "this server reads (about 1,000 arrays or objects inside each other).")
    except msgspec.ValidationError:  # msgspec's only one while decoding untyped JSON
        return reject(RejectionKind.PARSE_ERROR, "Parse error: an integer in the body is out of "
                      "range (a JSON number here fits 64 bits).")
    except (msgspec.DecodeError, ValueError) as exc:
        # DecodeError covers bad JSON and bad UTF-8 and says where (a byte offset, never the
        # body's content); ValueError is kept for the same reasons as the SDK's json.loads path
        # (mcp/server/_streamable_http_modern.py).
        return reject(RejectionKind.PARSE_ERROR, f"Parse error: the body is not valid JSON ({exc}).")
    if not isinstance(decoded, dict):
        what = "a batch (JSON array)" if isinstance(decoded, list) else "not a JSON object"
        return reject(
            RejectionKind.INVALID_REQUEST, f"The body is {what}; send one JSON-RPC request or notification."
        )
    shape = JSONRPCRequest if "id" in decoded else JSONRPCNotification
    try:
        msgspec.convert(decoded, shape)
    except msgspec.ValidationError as exc:
        return reject(
            RejectionKind.INVALID_REQUEST,
            f"Not a JSON-RPC 2.0 request or notification: {exc}",
            id=_readable_id(decoded.get("id")),
        )
    return decoded


def _readable_id(value: Any) -> RequestId | None:
    """``value`` when it is a valid request id (so the error can echo it), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        return None  # not an i64: it cannot be echoed as the spec's RequestId
    return value


# --- Rung 7: select the era -------------------------------------------------------------------


def select_era(body: Mapping[str, Any], headers: Mapping[str, str]) -> Route | Rejection:
    """Route a body that passed :func:`parse_body` to its era (seed section 2.1 step 7, 2.2, 2.3).

    1. ``initialize`` → legacy, at :func:`negotiate_legacy_version` of ``params.protocolVersion``
       (never -32022: seed section 2.3). Sent with a modern header or modern ``_meta`` it is
       404/-32601: 2026-07-28 removed it (DESIGN section 5.1, PROTOCOL.md section 0).
    2. ``_meta[PROTOCOL_VERSION_META_KEY]`` present, or ``MCP-Protocol-Version`` a modern version
       → modern. A request then passes ``_meta`` shape (-32602), mirrored headers (-32020) and
       version (-32022, also for a legacy version sent with modern ``_meta``), in that order.
       A notification is only checked for its version: the transport defines no headers for
       notification POSTs, and the SDK server acknowledges them the same way (PROTOCOL.md 1.7).
    3. Otherwise legacy: ``MCP-Protocol-Version`` must be in ``LEGACY_VERSIONS`` (-32022), for
       notifications too; the SDK clients stamp it on ``notifications/initialized`` already, so
       strictness breaks no real client (PROTOCOL.md section 4).

    Every rejection echoes the request's id. -32022 carries ``data = {"supported":
    SUPPORTED_VERSIONS, "requested": <as sent>}``; legacy versions are listed too, so a modern
    client falls back to ``initialize`` (the SDK's auto mode does so when ``supported`` is not
    modern-only).
    """
    method: str = body["method"]
    request_id: RequestId | UnsetType = body.get("id", UNSET)
    params: dict[str, Any] = body.get("params", {})
    meta = params.get("_meta")
    header_version = _header(headers, PROTOCOL_VERSION_HEADER)
    modern = (isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta) or header_version in MODERN_VERSIONS

    if method == "initialize":
        if modern:
            return reject(
                RejectionKind.METHOD_NOT_FOUND,
                f"initialize does not exist in {MODERN_VERSION}; call server/discover instead.",
                id=_echo(request_id),
            )
        return _legacy_route(method, request_id, params, negotiate_legacy_version(params.get("protocolVersion")))
    if not modern:
        if header_version not in LEGACY_VERSIONS:
            return _unsupported_version(header_version or _UNSTATED_VERSION, request_id,
                                        unstated=header_version is None)
        return _legacy_route(method, request_id, params, header_version)
    if request_id is UNSET:
        return _modern_notification(method, params, header_version)
    return _modern_request(method, request_id, params, headers, header_version)


def _legacy_route(method: str, request_id: RequestId | UnsetType, params: dict[str, Any], version: str) -> Route | Rejection:
    """A legacy :class:`Route`; the only check is the type of ``params._meta.progressToken``."""
    meta = params.get("_meta", {})
    if not isinstance(meta, dict):
        return reject(RejectionKind.INVALID_PARAMS, "params._meta must be an object.", id=_echo(request_id))
    progress_token: ProgressToken | None = None
    if PROGRESS_TOKEN_META_KEY in meta:
        try:
            progress_token = msgspec.convert(meta[PROGRESS_TOKEN_META_KEY], ProgressToken)
        except msgspec.ValidationError:
            return reject(
                RejectionKind.INVALID_PARAMS,
                "params._meta.progressToken must be a string or an integer.",
                id=_echo(request_id),
            )
    return Route(
        era="legacy", version=version, method=method, id=request_id, params=params, progress_token=progress_token
    )


def _modern_notification(method: str, params: dict[str, Any], header_version: str | None) -> Route | Rejection:
    """A modern notification: served when the header or ``_meta`` names a modern version."""
    meta = params.get("_meta")
    version = header_version if header_version in MODERN_VERSIONS else meta[PROTOCOL_VERSION_META_KEY]
    if not isinstance(version, str):
        return reject(RejectionKind.INVALID_PARAMS, f"params._meta[{PROTOCOL_VERSION_META_KEY!r}] must be a string.")
    if version not in MODERN_VERSIONS:
        return _unsupported_version(version, UNSET)
    return Route(era="modern", version=version, method=method, params=params)


def _modern_request(
    method: str,
    request_id: RequestId,
    params: dict[str, Any],
    headers: Mapping[str, str],
    header_version: str | None,
) -> Route | Rejection:
    """The modern ladder for a request: ``_meta`` shape, mirrored headers, then version."""
    try:
        meta = msgspec.convert(params.get("_meta"), RequestMeta)
    except msgspec.ValidationError as exc:
        # "Expected `int | str`, got `float` - at `$.progressToken`": name the member at fault
        message, _, where = str(exc).partition(" - at `$")
        return reject(
            RejectionKind.INVALID_PARAMS,
            f"Invalid params._meta{where.rstrip('`')}: {message}. A modern request's params._meta "
            f"carries {PROTOCOL_VERSION_META_KEY!r} and {CLIENT_CAPABILITIES_META_KEY!r}, and "
            "progressToken, when sent, is a string or an integer.",
            id=request_id,
        )

    if header_version != meta.protocol_version:
        state = "missing" if header_version is None else "different from the _meta version"
        return reject(RejectionKind.HEADER_MISMATCH, f"MCP-Protocol-Version header is {state}.", id=request_id)
    if (sent_method := _header(headers, METHOD_HEADER)) != method:
        state = "missing" if sent_method is None else "not the body's method"
        return reject(RejectionKind.HEADER_MISMATCH,
                      f"Mcp-Method header is {state}: send Mcp-Method: {method}.", id=request_id)
    name_key = NAME_BEARING_METHODS.get(method)
    # An absent name is dispatch's -32602, not a header mismatch (as in the SDK's ladder).
    if name_key is not None and (body_name := params.get(name_key)) is not None:
        raw_name = _header(headers, NAME_HEADER)
        if raw_name is None or decode_header_value(raw_name) != body_name:
            state = "missing" if raw_name is None else f"not params.{name_key}"
            return reject(
                RejectionKind.HEADER_MISMATCH,
                f"Mcp-Name header is {state}: send the value of params.{name_key} in it.",
                id=request_id,
            )

    if meta.protocol_version not in MODERN_VERSIONS:
        return _unsupported_version(meta.protocol_version, request_id)
    return Route(
        era="modern",
        version=meta.protocol_version,
        method=method,
        id=request_id,
        params=params,
        progress_token=None if meta.progress_token is UNSET else meta.progress_token,
    )


def _unsupported_version(requested: str, request_id: RequestId | UnsetType, *,
                         unstated: bool = False) -> Rejection:
    """-32022 with ``data = {"supported", "requested"}`` (2026-07-28 UnsupportedProtocolVersionError).
    ``unstated``: the request named no version at all, which the message says, since the
    ``requested`` it carries is only what the transport assumes then."""
    data = UnsupportedVersionData(supported=list(SUPPORTED_VERSIONS), requested=requested)
    return reject(
        RejectionKind.UNSUPPORTED_VERSION,
        (f"Unsupported protocol version: the request has no MCP-Protocol-Version header, "
         f"which means {requested}. Send MCP-Protocol-Version: {LEGACY_VERSIONS[0]} "
         f"(after initialize); or, for {MODERN_VERSION}, put {PROTOCOL_VERSION_META_KEY!r}: "
         f"{MODERN_VERSION!r} and {CLIENT_CAPABILITIES_META_KEY!r}: {{}} in params._meta, with "
         f"the headers MCP-Protocol-Version: {MODERN_VERSION} and Mcp-Method: the method."
         ) if unstated else "Unsupported protocol version",
        data=msgspec.to_builtins(data),
        id=_echo(request_id),
    )


def _echo(request_id: RequestId | UnsetType) -> RequestId | None:
    """The id an error echoes: the request's, or ``None`` (``null``) for a notification."""
    return None if request_id is UNSET else request_id


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """A header value with surrounding optional whitespace trimmed (RFC 9110 section 5.5).

    Conformance ``sep-2243-server-accepts-whitespace-header-value`` sends a padded ``Mcp-Name``
    and expects success; uvicorn trims already, other servers may not.
    """
    value = headers.get(name)
    return None if value is None else value.strip(_OWS)


# --- Values -----------------------------------------------------------------------------------


def negotiate_legacy_version(requested: object) -> str:
    """The version ``initialize`` answers: ``requested`` when it is a legacy version we serve, else
    :data:`~front.mcp.protocol.LEGACY_DEFAULT` (lifecycle, "Version negotiation": the server MUST
    answer with another version it supports; the client decides whether to go on).

    ``"2026-07-28"`` asked for in ``initialize`` also gets ``2025-11-25`` (PROTOCOL.md section 0:
    some clients send it; answering -32601 would strand them).
    """
    if isinstance(requested, str) and requested in LEGACY_VERSIONS:
        return requested
    return LEGACY_DEFAULT


def decode_header_value(value: str) -> str | None:
    """Decode ``=?base64?<base64 of UTF-8>?=``; any other value is returned as is.

    The markers are lower case and case-sensitive. ``None`` for a malformed sentinel (bad or
    non-canonical base64, bad UTF-8), so a corrupt header never equals a body value
    (2026-07-28 streamable-http.mdx, "Request Metadata"; the SDK's ``decode_header_value``).
    """
    match = _B64_SENTINEL.fullmatch(value)
    if match is None:
        return value
    payload = match.group("payload")
    try:
        decoded = base64.b64decode(payload, validate=True)
    except binascii.Error:
        return None
    # validate=True still accepts non-zero padding bits; encoders only emit the canonical form.
    if base64.b64encode(decoded).decode("ascii") != payload:
        return None
    try:
        return decoded.decode("utf-8")
    except UnicodeDecodeError:
        return None
