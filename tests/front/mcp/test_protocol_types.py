"""Our protocol types (front/mcp/protocol.py) against the official SDK models and JSON schemas.

Each sample is encoded with msgspec, validated with the ``mcp_types`` pydantic model of the same
name, dumped back and compared: a field the SDK does not know, or spells differently, is lost on
the way and fails the comparison (seed section 2.7: "the local types cannot drift"). The dump uses
``exclude_unset`` so that SDK defaults (``isError: false``, ``resultType``, ``ttlMs: 0``) are not
added to a legacy result that rightly leaves them out. The same samples are then validated against
the official schema of each revision they are sent in.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types
import msgspec
import pydantic
import pytest

from front.mcp import inbound
from front.mcp.protocol import (
    CLIENT_CAPABILITIES_META_KEY,
    HEADER_MISMATCH,
    INVALID_PARAMS,
    LEGACY_DEFAULT,
    MODERN_VERSION,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    SUPPORTED_VERSIONS,
    UNSUPPORTED_PROTOCOL_VERSION,
    CallToolResult,
    DiscoverResult,
    ErrorObject,
    GetPromptResult,
    Implementation,
    InitializeResult,
    JSONRPCError,
    JSONRPCResponse,
    ListPromptsResult,
    ListToolsResult,
    ProgressNotification,
    ProgressNotificationParams,
    Prompt,
    PromptArgument,
    PromptMessage,
    PromptsCapability,
    ServerCapabilities,
    TextContent,
    Tool,
    ToolAnnotations,
    ToolsCapability,
    decode_json,
    encode,
)
from tests.mcp_schema import SKIP_REASON, kit_available, validate_definition, validate_server_message

LEGACY_REVISIONS = ("2025-11-25", "2025-06-18")

SERVER_INFO = Implementation(name="pylota-mail", title="Pylota Mail", version="1.0.0")
CAPABILITIES = ServerCapabilities(tools=ToolsCapability(list_changed=False), prompts=PromptsCapability(list_changed=False))
MODERN_META = {SERVER_INFO_META_KEY: {"name": "pylota-mail", "version": "1.0.0"}}
TOOL = Tool(
    name="mail_search",
    title="Search mail",
    description="Search the mailbox.",
    input_schema={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    output_schema={"type": "object", "properties": {"hits": {"type": "array"}}},
    annotations=ToolAnnotations(
        title="Search mail", read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
)
BARE_TOOL = Tool(name="mail_wait", input_schema={"type": "object"})
PROMPT = Prompt(
    name="mail_search_strategy",
    title="Mail search strategy",
    description="How to find, read and cite email with the Pylota Mail tools.",
    arguments=[PromptArgument(name="goal", description="Optional: what you are trying to find or do.", required=False)],
)
ERROR_TEXT = '{"error":{"code":"message_not_found","message":"No such message."}}'

# (sample, SDK model, revisions whose schema it must satisfy)
SAMPLES: dict[str, tuple[msgspec.Struct, type[pydantic.BaseModel], tuple[str, ...]]] = {
    "initialize": (
        InitializeResult(
            protocol_version=LEGACY_DEFAULT, capabilities=CAPABILITIES, server_info=SERVER_INFO, instructions="Use it."
        ),
        mcp_types.InitializeResult,
        LEGACY_REVISIONS,
    ),
    "discover": (
        DiscoverResult(
            result_type="complete",
            supported_versions=list(SUPPORTED_VERSIONS),
            capabilities=CAPABILITIES,
            instructions="Use it.",
            ttl_ms=3_600_000,
            cache_scope="public",
            meta=MODERN_META,
        ),
        mcp_types.DiscoverResult,
        (MODERN_VERSION,),
    ),
    "tools/list legacy": (
        ListToolsResult(tools=[TOOL, BARE_TOOL]),
        mcp_types.ListToolsResult,
        LEGACY_REVISIONS,
    ),
    "tools/list modern": (
        ListToolsResult(tools=[TOOL], result_type="complete", ttl_ms=0, cache_scope="private", meta=MODERN_META),
        mcp_types.ListToolsResult,
        (MODERN_VERSION,),
    ),
    "tools/call legacy": (
        CallToolResult(content=[TextContent(text='{"hits":[]}')], structured_content={"hits": []}),
        mcp_types.CallToolResult,
        LEGACY_REVISIONS,
    ),
    "tools/call tool error": (
        CallToolResult(content=[TextContent(text=ERROR_TEXT)], is_error=True),
        mcp_types.CallToolResult,
        LEGACY_REVISIONS,
    ),
    "tools/call modern": (
        CallToolResult(
            content=[TextContent(text='{"hits":[]}')],
            structured_content={"hits": []},
            result_type="complete",
            meta=MODERN_META,
        ),
        mcp_types.CallToolResult,
        (MODERN_VERSION,),
    ),
    "prompts/list legacy": (ListPromptsResult(prompts=[PROMPT]), mcp_types.ListPromptsResult, LEGACY_REVISIONS),
    "prompts/list modern": (
        ListPromptsResult(prompts=[PROMPT], result_type="complete", ttl_ms=0, cache_scope="private", meta=MODERN_META),
        mcp_types.ListPromptsResult,
        (MODERN_VERSION,),
    ),
    "prompts/get legacy": (
        GetPromptResult(messages=[PromptMessage(role="user", content=TextContent(text="You can…"))]),
        mcp_types.GetPromptResult,
        LEGACY_REVISIONS,
    ),
    "prompts/get modern": (
        GetPromptResult(
            description="Mail search strategy",
            messages=[PromptMessage(role="user", content=TextContent(text="You can…"))],
            result_type="complete",
            meta=MODERN_META,
        ),
        mcp_types.GetPromptResult,
        (MODERN_VERSION,),
    ),
    "progress params": (
        ProgressNotificationParams(progress_token=0, progress=1, total=8, message="search: claim (7 hits)"),
        mcp_types.ProgressNotificationParams,
        (),
    ),
}

SCHEMA_NAME = {
    "initialize": "InitializeResult",
    "discover": "DiscoverResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
}

needs_kit = pytest.mark.skipif(not kit_available(), reason=SKIP_REASON)


def wire(message: msgspec.Struct) -> dict[str, Any]:
    """What goes on the wire, as JSON values."""
    return json.loads(encode(message))


def sdk_round_trip(message: dict[str, Any], model: type[pydantic.BaseModel]) -> dict[str, Any]:
    return model.model_validate(message).model_dump(mode="json", by_alias=True, exclude_unset=True)


# --- Against the official SDK models -------------------------------------------------------------


@pytest.mark.parametrize("name", SAMPLES)
def test_result_round_trips_through_the_sdk(name: str) -> None:
    sample, model, _ = SAMPLES[name]
    message = wire(sample)
    assert sdk_round_trip(message, model) == message
    assert msgspec.convert(message, type(sample)) == sample


def test_progress_notification_round_trips_through_the_sdk() -> None:
    message = wire(ProgressNotification(params=ProgressNotificationParams(progress_token="t1", progress=50, total=100)))
    assert sdk_round_trip(message, mcp_types.JSONRPCNotification) == message
    assert sdk_round_trip(message, mcp_types.ProgressNotification) == {k: v for k, v in message.items() if k != "jsonrpc"}


@pytest.mark.parametrize("request_id", [0, 7, "d1"])
def test_response_envelope_round_trips_and_keeps_the_id_type(request_id: int | str) -> None:
    message = wire(JSONRPCResponse(id=request_id, result=SAMPLES["tools/list modern"][0]))
    assert sdk_round_trip(message, mcp_types.JSONRPCResponse) == message
    assert type(message["id"]) is type(request_id)


@pytest.mark.parametrize(
    "error",
    [
        JSONRPCError(id=3, error=ErrorObject(code=INVALID_PARAMS, message="Unknown tool: x")),
        JSONRPCError(id=None, error=ErrorObject(code=HEADER_MISMATCH, message="m", data={"a": [1]})),
    ],
)
def test_error_envelope_round_trips_through_the_sdk(error: JSONRPCError) -> None:
    message = wire(error)
    assert "id" in message  # null when unknown, never absent
    assert sdk_round_trip(message, mcp_types.JSONRPCError) == message


def test_unsupported_version_data_is_the_sdk_shape() -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        PROTOCOL_VERSION_META_KEY: "v999.0.0", CLIENT_CAPABILITIES_META_KEY: {}}}}
    headers = {"mcp-protocol-version": "v999.0.0", "mcp-method": "tools/list"}
    rejection = inbound.select_era(body, headers)
    assert isinstance(rejection, inbound.Rejection)
    data = mcp_types.UnsupportedProtocolVersionErrorData.model_validate(rejection.data)
    assert (data.requested, data.supported) == ("v999.0.0", list(SUPPORTED_VERSIONS))


def test_absent_optionals_are_absent_not_null() -> None:
    assert wire(BARE_TOOL) == {"name": "mail_wait", "inputSchema": {"type": "object"}}
    assert wire(CallToolResult(content=[])) == {"content": []}
    assert wire(CAPABILITIES) == {"tools": {"listChanged": False}, "prompts": {"listChanged": False}}


def test_decode_json_keeps_big_integers_exact() -> None:
    assert decode_json(b'{"id": 9007199254740993}') == {"id": 9007199254740993}


# --- Against the official JSON schemas -----------------------------------------------------------


@needs_kit
@pytest.mark.parametrize("name", [name for name, (_, _, revisions) in SAMPLES.items() if revisions])
def test_result_validates_against_its_revisions(name: str) -> None:
    sample, _, revisions = SAMPLES[name]
    for revision in revisions:
        validate_definition(wire(sample), SCHEMA_NAME[name.split(" ")[0]], revision)


@needs_kit
@pytest.mark.parametrize("name", ["tools/list legacy", "tools/call legacy", "prompts/get legacy"])
def test_legacy_result_is_not_a_modern_result(name: str) -> None:
    # 2026-07-28 requires resultType: proves the schemas are really checked.
    with pytest.raises(Exception, match="resultType"):
        validate_definition(wire(SAMPLES[name][0]), SCHEMA_NAME[name.split(" ")[0]], MODERN_VERSION)


@needs_kit
@pytest.mark.parametrize("revision", [MODERN_VERSION, *LEGACY_REVISIONS])
def test_entities_validate(revision: str) -> None:
    for entity, name in [(TOOL, "Tool"), (BARE_TOOL, "Tool"), (PROMPT, "Prompt"), (SERVER_INFO, "Implementation"),
                         (CAPABILITIES, "ServerCapabilities"), (TextContent(text="x"), "TextContent")]:
        validate_definition(wire(entity), name, revision)


@needs_kit
@pytest.mark.parametrize("revision", [MODERN_VERSION, *LEGACY_REVISIONS])
@pytest.mark.parametrize("token", [0, "progress-test-1"])
def test_progress_notification_validates(revision: str, token: int | str) -> None:
    params = ProgressNotificationParams(progress_token=token, progress=0.5, message="step")
    validate_server_message(wire(ProgressNotification(params=params)), revision)


@needs_kit
@pytest.mark.parametrize("method", ["tools/list", "tools/call", "prompts/list", "prompts/get", "server/discover"])
def test_modern_responses_validate_by_method_and_by_shape(method: str) -> None:
    name = {"server/discover": "discover"}.get(method, f"{method} modern")
    message = wire(JSONRPCResponse(id=0, result=SAMPLES[name][0]))
    validate_server_message(message, MODERN_VERSION, method=method)
    validate_server_message(message, MODERN_VERSION)


@needs_kit
@pytest.mark.parametrize("revision", LEGACY_REVISIONS)
@pytest.mark.parametrize("method", ["initialize", "tools/list", "tools/call", "prompts/list", "prompts/get"])
def test_legacy_responses_validate(revision: str, method: str) -> None:
    name = "initialize" if method == "initialize" else f"{method} legacy"
    validate_server_message(wire(JSONRPCResponse(id="a", result=SAMPLES[name][0])), revision, method=method)


@needs_kit
def test_an_unknown_result_is_checked_against_the_envelope() -> None:
    validate_server_message({"jsonrpc": "2.0", "id": 1, "result": {}}, "2025-11-25")
    validate_server_message({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}}, MODERN_VERSION)
    with pytest.raises(Exception, match="resultType"):
        validate_server_message({"jsonrpc": "2.0", "id": 1, "result": {}}, MODERN_VERSION)


@needs_kit
@pytest.mark.parametrize("revision", [MODERN_VERSION, *LEGACY_REVISIONS])
def test_ladder_rejections_validate(revision: str) -> None:
    rejections = [
        inbound.parse_body(b"{"),
        inbound.parse_body(b"[]"),
        inbound.check_size_and_type(inbound.MAX_BODY_BYTES + 1, "application/json", request_id="req_1"),
        inbound.check_origin({"origin": "https://evil.example"}, "mail.pylota.example"),
        inbound.select_era({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, {}),
        inbound.select_era({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": {
            PROTOCOL_VERSION_META_KEY: MODERN_VERSION, CLIENT_CAPABILITIES_META_KEY: {}}}}, {}),
    ]
    codes = []
    for rejection in rejections:
        assert isinstance(rejection, inbound.Rejection)
        error = rejection.error_response()
        assert error is not None
        validate_server_message(wire(error), revision)
        codes.append(error.error.code)
    assert UNSUPPORTED_PROTOCOL_VERSION in codes and HEADER_MISMATCH in codes
