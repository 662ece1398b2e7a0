"""Validate what the server emits against the official MCP JSON schemas in the team kit.

For tests only. The kit is ``$PYLOTA_KIT`` (default ``<repo>/../shared``); its
``mcp/schema/<revision>/schema.json`` files are the published schemas of each revision. Tests that
need them skip with :data:`SKIP_REASON` when the kit is absent::

    pytestmark = pytest.mark.skipif(not kit_available(), reason=SKIP_REASON)

The conformance suite validates every server message against the per-revision schema (check
``wire-schema-valid``, PROTOCOL.md section 1.5); :func:`validate_server_message` does the same here.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

__all__ = ["KIT", "SKIP_REASON", "kit_available", "validate_definition", "validate_server_message",
           "check_if_kit"]

KIT = Path(os.environ.get("PYLOTA_KIT", Path(__file__).resolve().parents[1].parent / "shared"))
SKIP_REASON = f"MCP schemas not found under {KIT}/mcp/schema (set PYLOTA_KIT to the team kit)"

_RESULT_BY_METHOD = {
    "initialize": "InitializeResult",
    "server/discover": "DiscoverResult",
    "ping": "EmptyResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
}
"""Request method → the schema definition of its result (the names are the same in every revision)."""

_RESULT_BY_KEY = (
    ("supportedVersions", "DiscoverResult"),
    ("serverInfo", "InitializeResult"),
    ("tools", "ListToolsResult"),
    ("prompts", "ListPromptsResult"),
    ("messages", "GetPromptResult"),
    ("content", "CallToolResult"),
)
"""When the method is not given: a member only that result has → its definition."""

_NOTIFICATION_BY_METHOD = {"notifications/progress": "ProgressNotification"}

_ERROR_BY_CODE_2026 = {
    -32020: "HeaderMismatchError",
    -32021: "MissingRequiredClientCapabilityError",
    -32022: "UnsupportedProtocolVersionError",
}
"""2026-07-28 defines whole error responses for its own codes; earlier revisions do not."""


def kit_available(revision: str = "2026-07-28") -> bool:
    """True when the kit holds the schema of ``revision``."""
    return _schema_path(revision).is_file()


def validate_definition(instance: Any, name: str, revision: str) -> None:
    """Validate ``instance`` against definition ``name`` of ``revision``'s schema.

    Raises:
        jsonschema.ValidationError: the instance does not conform.
        KeyError: the revision has no such definition.
    """
    _validator(revision, name).validate(instance)


def validate_server_message(message: dict[str, Any], revision: str, *, method: str | None = None) -> None:
    """Validate one JSON-RPC message the server sent, for the revision the exchange used.

    * A result response is checked as ``JSONRPCResultResponse`` (``JSONRPCResponse`` in
      2025-06-18) and its ``result`` as the result of ``method`` (the request's method), or, when
      ``method`` is not given, of the result type its members identify. A result of no known type
      is checked only against the generic envelope, which for 2026-07-28 still requires
      ``resultType``.
    * An error response is checked as ``JSONRPCErrorResponse`` (``JSONRPCError`` in 2025-06-18),
      or for 2026-07-28 as the specific error of its code (-32020, -32021, -32022). An ``id`` of
      ``null`` (the request's id could not be read) is valid JSON-RPC 2.0 but not in the MCP
      schemas, which leave the member out instead; such an error is checked without ``id``, and
      its ``error`` object alone in 2025-06-18, which requires the member.
    * A notification is checked as its own definition (``ProgressNotification``) or as
      ``ServerNotification``.

    Raises:
        jsonschema.ValidationError: the message does not conform.
        ValueError: the message is none of a result, an error or a notification.
    """
    legacy_names = revision == "2025-06-18"
    if "result" in message:
        validate_definition(message, "JSONRPCResponse" if legacy_names else "JSONRPCResultResponse", revision)
        name = _RESULT_BY_METHOD.get(method) if method else _result_by_shape(message["result"])
        if name is not None:
            validate_definition(message["result"], name, revision)
    elif "error" in message:
        if message.get("id", 0) is None:
            message = {key: value for key, value in message.items() if key != "id"}
            if legacy_names:
                _validator(revision, "JSONRPCError", "properties", "error").validate(message["error"])
                return
        name = "JSONRPCError" if legacy_names else "JSONRPCErrorResponse"
        if revision == "2026-07-28":
            name = _ERROR_BY_CODE_2026.get(message["error"].get("code"), name)
        validate_definition(message, name, revision)
    elif "method" in message and "id" not in message:
        validate_definition(message, _NOTIFICATION_BY_METHOD.get(message["method"], "ServerNotification"), revision)
    else:
        raise ValueError(f"not a server message: {sorted(message)}")


def _result_by_shape(result: dict[str, Any]) -> str | None:
    return next((name for key, name in _RESULT_BY_KEY if key in result), None)


def _schema_path(revision: str) -> Path:
    return KIT / "mcp" / "schema" / revision / "schema.json"


@cache
def _schema(revision: str) -> dict[str, Any]:
    return json.loads(_schema_path(revision).read_text(encoding="utf-8"))


@cache
def _validator(revision: str, name: str, *pointer: str) -> jsonschema.protocols.Validator:
    """A validator for ``#/$defs/<name>[/pointer…]`` (``#/definitions/…`` for draft-07 schemas)."""
    schema = _schema(revision)
    defs = "$defs" if "$defs" in schema else "definitions"
    if name not in schema[defs]:
        raise KeyError(f"{revision} defines no {name!r}")
    uri = f"urn:mcp-schema:{revision}"
    registry: Registry[Any] = Registry().with_resource(uri, Resource.from_contents(schema))
    cls = jsonschema.validators.validator_for(schema)
    return cls({"$ref": "/".join((f"{uri}#", defs, name, *pointer))}, registry=registry)


def check_if_kit(message: dict[str, Any], revision: str, *, method: str | None = None) -> None:
    """:func:`validate_server_message` when the kit's schemas are there; nothing otherwise.

    For tests whose subject is behaviour (a transport rule, a tool's answer): without the kit
    they still run and assert that behaviour, only the extra schema check is left out. Tests
    whose subject *is* the schema skip with :data:`SKIP_REASON` instead.
    """
    if kit_available(revision if revision in ("2026-07-28", "2025-11-25", "2025-06-18")
                     else "2026-07-28"):
        validate_server_message(message, revision, method=method)
