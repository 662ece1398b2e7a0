"""MCP protocol types, codes and version facts: everything the server puts on or reads off the wire.

Pure data: msgspec Structs and constants, no I/O. The Structs follow ``schema.ts`` of 2026-07-28
and 2025-11-25, cut down to what Pylota Mail sends (seed section 2.7, adapted to Python). Wire names
are camelCase through ``rename="camel"``; ``_meta`` is renamed by hand.

Absent versus null. Result and entity Structs use ``omit_defaults=True`` with ``None`` defaults,
so an optional field left unset is absent on the wire, never ``null``. The fields that only the
2026-07-28 era carries (``resultType``, ``ttlMs``, ``cacheScope``, ``_meta``) are optional in the
same way: the dispatcher sets them for a modern request and leaves them out for a legacy one
(PROTOCOL.md section 2, "Legacy results carry no resultType"). The JSON-RPC envelopes do not use
``omit_defaults`` (``"jsonrpc": "2.0"`` is a default that must always be sent); their optional
members use ``UNSET``.

Tests: ``tests/front/mcp/test_protocol_types.py`` round-trips every type through the official
SDK's models and validates it against the official JSON schemas.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    # versions (seed section 1)
    "MODERN_VERSION",
    "MODERN_VERSIONS",
    "LEGACY_VERSIONS",
    "LEGACY_DEFAULT",
    "SUPPORTED_VERSIONS",
    # headers and _meta keys
    "PROTOCOL_VERSION_HEADER",
    "METHOD_HEADER",
    "NAME_HEADER",
    "PROTOCOL_VERSION_META_KEY",
    "CLIENT_CAPABILITIES_META_KEY",
    "CLIENT_INFO_META_KEY",
    "SERVER_INFO_META_KEY",
    "PROGRESS_TOKEN_META_KEY",
    # JSON-RPC error codes
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "SERVER_ERROR",
    "HEADER_MISMATCH",
    "MISSING_CLIENT_CAPABILITY",
    "UNSUPPORTED_PROTOCOL_VERSION",
    # envelopes
    "RequestId",
    "ProgressToken",
    "JSONRPCRequest",
    "JSONRPCNotification",
    "JSONRPCResponse",
    "JSONRPCError",
    "ErrorObject",
    "UnsupportedVersionData",
    "RequestMeta",
    # results and entities
    "ResultType",
    "CacheScope",
    "Implementation",
    "ToolsCapability",
    "PromptsCapability",
    "ServerCapabilities",
    "InitializeResult",
    "DiscoverResult",
    "ToolAnnotations",
    "Tool",
    "ListToolsResult",
    "TextContent",
    "ImageContent",
    "AudioContent",
    "ResourceContents",
    "EmbeddedResource",
    "ContentBlock",
    "CONTENT_BLOCK_TYPES",
    "CallToolResult",
    "PromptArgument",
    "Prompt",
    "ListPromptsResult",
    "PromptMessage",
    "GetPromptResult",
    "ProgressNotificationParams",
    "ProgressNotification",
    # codec
    "encode",
    "decode_json",
]

# --- Versions (seed section 1; PROTOCOL.md section 0) -----------------------------------------

MODERN_VERSION: Final = "2026-07-28"
"""The stateless revision: per-request ``_meta``, mirrored headers, no ``initialize``."""

MODERN_VERSIONS: Final[tuple[str, ...]] = (MODERN_VERSION,)
"""Revisions served on the per-request-envelope path. A tuple: versions are a set, not dates to compare."""

LEGACY_VERSIONS: Final[tuple[str, ...]] = ("2025-11-25", "2025-06-18")
"""Revisions reached through ``initialize``, newest first."""

LEGACY_DEFAULT: Final = "2025-11-25"
"""What ``initialize`` answers when the client asks for a version we do not serve (seed section 2.3)."""

SUPPORTED_VERSIONS: Final[tuple[str, ...]] = (*MODERN_VERSIONS, *LEGACY_VERSIONS)
"""Every revision served, in seed section 1 order; ``server/discover`` and -32022 data list these."""

# --- HTTP headers (2026-07-28 basic/transports/streamable-http.mdx, "Request Metadata") ---------
# Lower case: header names are case-insensitive, and ASGI and HTTP/2 present them lower-cased.

PROTOCOL_VERSION_HEADER: Final = "mcp-protocol-version"
"""Sent on every request after ``initialize`` (legacy) and on every request (modern)."""

METHOD_HEADER: Final = "mcp-method"
"""Modern only: mirrors the body's ``method``."""

NAME_HEADER: Final = "mcp-name"
"""Modern only: mirrors ``params.name`` (or ``params.uri``), possibly ``=?base64?…?=``-encoded."""

# --- _meta keys (2026-07-28 basic/index.mdx; PROTOCOL.md section 1.1) -------------------------

PROTOCOL_VERSION_META_KEY: Final = "io.modelcontextprotocol/protocolVersion"
"""Required on every modern request; its presence selects the modern era."""

CLIENT_CAPABILITIES_META_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
"""Required on every modern request: a ``ClientCapabilities`` object (``{}`` = none)."""

CLIENT_INFO_META_KEY: Final = "io.modelcontextprotocol/clientInfo"
"""Optional (SHOULD) on modern requests; servers must not require it."""

SERVER_INFO_META_KEY: Final = "io.modelcontextprotocol/serverInfo"
"""On every modern result's ``_meta``; ``serverInfo`` is not in the body of ``server/discover``."""

PROGRESS_TOKEN_META_KEY: Final = "progressToken"
"""Both eras: opts a request into ``notifications/progress``; echoed with its exact JSON type."""

# --- JSON-RPC error codes (JSON-RPC 2.0 section 5.1; 2026-07-28 basic/index.mdx "Error Codes") --

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
SERVER_ERROR: Final = -32000
"""Transport refusals that carry a Pylota error envelope as ``data`` (seed section 2.1: 401, 413, 429)."""
HEADER_MISMATCH: Final = -32020
MISSING_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

# --- JSON-RPC envelopes -------------------------------------------------------------------------

RequestId = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)] | str
"""A request id: integer or string, never null (2026-07-28 basic/index.mdx). ``0`` is a valid id.
Integers are i64, as the spec's ``RequestId::Number(i64)``: a larger one is an invalid request."""

ProgressToken = int | str
"""Kept with its JSON type: the SDK clients send the integer request id, conformance a string."""


class JSONRPCRequest(msgspec.Struct, kw_only=True):
    """``{"jsonrpc": "2.0", "id", "method", "params"?}``; MCP ``params`` is always an object.

    Inbound only, so ``jsonrpc`` has no default: a body without it is not JSON-RPC 2.0.
    """

    jsonrpc: Literal["2.0"]
    id: RequestId
    method: str
    params: dict[str, Any] | UnsetType = UNSET


class JSONRPCNotification(msgspec.Struct, kw_only=True):
    """A request without an ``id`` member (JSON-RPC 2.0 section 4.1): no response is owed. Inbound only."""

    jsonrpc: Literal["2.0"]
    method: str
    params: dict[str, Any] | UnsetType = UNSET


class JSONRPCResponse(msgspec.Struct, kw_only=True):
    """A result response; ``result`` is one of the result Structs below (or a plain ``{}``)."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    result: Any


class ErrorObject(msgspec.Struct, kw_only=True):
    """``{"code", "message", "data"?}``; codes are the constants above."""

    code: int
    message: str
    data: Any | UnsetType = UNSET


class JSONRPCError(msgspec.Struct, kw_only=True):
    """An error response. ``id`` is ``null`` when the request's id could not be read.

    JSON-RPC 2.0 section 5 asks for ``null`` there, seed section 2.1 step 3 says ``id: null``, and
    the official Python SDK's ``JSONRPCError`` requires the member; the MCP 2025-11-25+ schemas
    allow the member to be absent but not null (``tests/mcp_schema.py`` accounts for that).
    """

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId | None
    error: ErrorObject


class UnsupportedVersionData(msgspec.Struct, kw_only=True):
    """``data`` of -32022: ``requested`` is echoed as sent (PROTOCOL.md section 1.3)."""

    supported: list[str]
    requested: str


class RequestMeta(msgspec.Struct, kw_only=True):
    """The required part of a modern request's ``params._meta``; other keys pass through.

    Validated once, at the ladder's first modern rung; a failure is -32602.
    """

    protocol_version: str = msgspec.field(name=PROTOCOL_VERSION_META_KEY)
    client_capabilities: dict[str, Any] = msgspec.field(name=CLIENT_CAPABILITIES_META_KEY)
    client_info: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name=CLIENT_INFO_META_KEY)
    progress_token: ProgressToken | UnsetType = msgspec.field(default=UNSET, name=PROGRESS_TOKEN_META_KEY)


# --- Results and the entities in them -----------------------------------------------------------

ResultType = Literal["complete"]
"""Every modern result is ``"complete"``: the server never asks for input (no MRTR)."""

CacheScope = Literal["public", "private"]
"""``"private"`` whenever the answer depends on the bearer key (2026-07-28 caching.mdx)."""


class _Wire(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """Base of the result and entity types: camelCase names, unset optionals absent.

    msgspec applies ``kw_only`` per class, so a subclass that puts a required field after an
    optional one repeats it.
    """


class Implementation(_Wire):
    """``serverInfo``: ``{"name", "version", "title"?, "description"?, "websiteUrl"?}``."""

    name: str
    version: str
    title: str | None = None
    description: str | None = None
    website_url: str | None = None


class ToolsCapability(_Wire):
    """``{"listChanged": bool}``: always sent, ``false`` for us (seed section 2.5)."""

    list_changed: bool


class PromptsCapability(_Wire):
    """``{"listChanged": bool}``."""

    list_changed: bool


class ServerCapabilities(_Wire):
    """The capabilities we advertise; a method behind an absent capability is -32601."""

    tools: ToolsCapability | None = None
    prompts: PromptsCapability | None = None


class InitializeResult(_Wire):
    """Legacy ``initialize`` result (seed section 2.3): no ``resultType``, no ``_meta``."""

    protocol_version: str
    capabilities: ServerCapabilities
    server_info: Implementation
    instructions: str | None = None


class DiscoverResult(_Wire):
    """``server/discover`` result (PROTOCOL.md section 1.4); modern only, so every cache field is required.

    ``serverInfo`` goes in ``_meta[SERVER_INFO_META_KEY]``, not in the body.
    """

    result_type: ResultType
    supported_versions: list[str]
    capabilities: ServerCapabilities
    ttl_ms: int
    cache_scope: CacheScope
    instructions: str | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class ToolAnnotations(_Wire):
    """Hints only; an unset hint takes the spec's default (readOnly false, destructive true, …)."""

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


class Tool(_Wire, kw_only=True):
    """A ``tools/list`` entry; ``inputSchema`` has ``type: "object"`` at its root."""

    name: str
    title: str | None = None
    description: str | None = None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    annotations: ToolAnnotations | None = None


class ListToolsResult(_Wire):
    """``{"tools", "nextCursor"?}`` plus, on modern, ``resultType``, ``ttlMs``, ``cacheScope``, ``_meta``."""

    tools: list[Tool]
    next_cursor: str | None = None
    result_type: ResultType | None = None
    ttl_ms: int | None = None
    cache_scope: CacheScope | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class TextContent(msgspec.Struct, kw_only=True, tag_field="type", tag="text"):
    """``{"type": "text", "text"}``; the tag is always encoded (it is not a default)."""

    text: str


class ImageContent(msgspec.Struct, kw_only=True, tag_field="type", tag="image"):
    """``{"type": "image", "data": <base64>, "mimeType"}``."""

    data: str
    mime_type: str = msgspec.field(name="mimeType")


class AudioContent(msgspec.Struct, kw_only=True, tag_field="type", tag="audio"):
    """``{"type": "audio", "data": <base64>, "mimeType"}``."""

    data: str
    mime_type: str = msgspec.field(name="mimeType")


class ResourceContents(_Wire):
    """``{"uri", "mimeType"?, "text"}`` or ``{"uri", "mimeType"?, "blob": <base64>}``.

    One Struct for schema.ts's two forms (text and blob), because an untagged union of Structs
    cannot be decoded; exactly one of ``text`` and ``blob`` is set.
    """

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


class EmbeddedResource(msgspec.Struct, kw_only=True, tag_field="type", tag="resource"):
    """``{"type": "resource", "resource": {...}}``: a resource's contents inline."""

    resource: ResourceContents


ContentBlock = TextContent | ImageContent | AudioContent | EmbeddedResource
"""What a tool result or a prompt message may carry. The product's tools send text only
(seed section 4.2); the other kinds exist for tools that return media, such as the conformance
suite's fixtures."""

CONTENT_BLOCK_TYPES: Final = (TextContent, ImageContent, AudioContent, EmbeddedResource)
"""The members of :data:`ContentBlock`, for ``isinstance`` checks."""


class CallToolResult(_Wire):
    """``{"content", "structuredContent"?, "isError"?}``; ``isError`` is sent only when true.

    A tool error carries the error envelope as the text block and no ``structuredContent``
    (seed section 5). ``structuredContent`` is typed as an object because the legacy revisions
    require one (2026-07-28 allows any value; we send objects in both eras).
    """

    content: list[ContentBlock]
    structured_content: dict[str, Any] | None = None
    is_error: bool = False
    result_type: ResultType | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class PromptArgument(_Wire):
    """``{"name", "title"?, "description"?, "required"?}``."""

    name: str
    title: str | None = None
    description: str | None = None
    required: bool | None = None


class Prompt(_Wire):
    """A ``prompts/list`` entry (seed section 6.1)."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[PromptArgument] | None = None


class ListPromptsResult(_Wire):
    """``{"prompts", "nextCursor"?}`` plus the modern cache fields, as :class:`ListToolsResult`."""

    prompts: list[Prompt]
    next_cursor: str | None = None
    result_type: ResultType | None = None
    ttl_ms: int | None = None
    cache_scope: CacheScope | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class PromptMessage(_Wire):
    """``{"role": "user" | "assistant", "content": ContentBlock}``."""

    role: Literal["user", "assistant"]
    content: ContentBlock


class GetPromptResult(_Wire):
    """``{"messages", "description"?}`` plus ``resultType`` and ``_meta`` on modern."""

    messages: list[PromptMessage]
    description: str | None = None
    result_type: ResultType | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


class ProgressNotificationParams(_Wire):
    """``{"progressToken", "progress", "total"?, "message"?}``; ``progress`` increases."""

    progress_token: ProgressToken
    progress: float
    total: float | None = None
    message: str | None = None


class ProgressNotification(msgspec.Struct, kw_only=True):
    """``notifications/progress``, sent on the request's own SSE stream (seed section 2.6)."""

    jsonrpc: Literal["2.0"] = "2.0"
    method: Literal["notifications/progress"] = "notifications/progress"
    params: ProgressNotificationParams


# --- Codec: built once (msgspec perf-tips) ----------------------------------------------------

_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder()


def encode(message: msgspec.Struct | dict[str, Any]) -> bytes:
    """Compact JSON on one line, as SSE ``data:`` needs (PROTOCOL.md section 1.6)."""
    return _ENCODER.encode(message)


def decode_json(raw: bytes) -> Any:
    """Untyped JSON decode; the ladder types the result itself (it must tell a batch from an object).

    Raises:
        msgspec.DecodeError: malformed JSON or invalid UTF-8 (``msgspec.ValidationError``, a
            subclass, for an integer literal too long to convert).
        RecursionError: nesting too deep.
    """
    return _DECODER.decode(raw)
