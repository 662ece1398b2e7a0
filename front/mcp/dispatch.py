"""Methods of both eras (DESIGN.md section 5.1), and how a tool call's outcome is rendered.

``dispatch`` takes a route that passed the ladder and the caller's principal and returns what to
send: a result, a JSON-RPC error, or the :class:`~shared.tools.call.Job` of a tool that runs on
a worker (the transport streams it). It is the one place that decides whether a method exists,
and the one place that renders a :class:`~shared.errors.PylotaError` as the ``isError``
envelope. The tool call itself is ``shared.tools.call.call_tool``, the same for REST.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from front.mcp import protocol as p
from front.mcp.inbound import Route, negotiate_legacy_version
from front.mcp.prompts import PromptSpec
from front.resources import Resources
from shared import guide
from shared.auth.keys import Principal
from shared.control import UNSTOPPABLE, Control
from shared.errors import ErrorCode, PylotaError
from shared.tools.call import Answer, Job, UnknownTool, call_tool
from shared.tools.registry import ToolSpec, visible_to

__all__ = ["Reply", "Failure", "dispatch", "tool_result", "tool_error", "tool_entry",
           "SERVER_INFO", "CAPABILITIES", "LIST_TTL_MS"]

SERVER_INFO = p.Implementation(name="pylota-mail", title="Pylota Mail", version="1.0.0")
CAPABILITIES = p.ServerCapabilities(tools=p.ToolsCapability(list_changed=False),
                                    prompts=p.PromptsCapability(list_changed=False))
#: How long a modern client may cache a list or discover result (private: it depends on the key).
LIST_TTL_MS = 300_000


class Reply(msgspec.Struct, frozen=True):
    """A result to send in a JSON-RPC response."""

    result: Any


class Failure(msgspec.Struct, frozen=True, kw_only=True):
    """A JSON-RPC error. ``http_status`` is 200 except where spec section 2.4 says otherwise."""

    code: int
    message: str
    data: Any = None
    http_status: int = 200


def _modern_meta() -> dict[str, Any]:
    return {p.SERVER_INFO_META_KEY: {"name": SERVER_INFO.name, "version": SERVER_INFO.version}}


def tool_entry(spec: ToolSpec) -> p.Tool:
    """The `tools/list` entry of ``spec``: all four hints explicit (spec section 4.1), outputSchema
    from the result Struct with every ``$ref`` inlined (4.2), none for a content tool."""
    a = spec.annotations
    return p.Tool(
        name=spec.name, title=spec.title, description=spec.description,
        input_schema=spec.input_schema, output_schema=spec.output_schema,
        annotations=p.ToolAnnotations(title=spec.title, read_only_hint=a.read_only,
                                      destructive_hint=a.destructive,
                                      idempotent_hint=a.idempotent, open_world_hint=a.open_world),
    )


def tool_result(outcome: msgspec.Struct | dict[str, Any] | list[msgspec.Struct],
                modern: bool) -> p.CallToolResult:
    """A successful call (spec section 4.2).

    A result object becomes ``structuredContent`` plus the same object as compact JSON text. A
    list of content blocks (a tool registered with ``result=None``) is sent as the content, with
    no ``structuredContent``.

    Raises:
        TypeError: the outcome is neither an object nor content blocks (a tool bug, rendered by
            the caller as ``internal``), so ``structuredContent`` is never anything but an object.
    """
    meta = _modern_meta() if modern else None
    result_type: p.ResultType | None = "complete" if modern else None
    if isinstance(outcome, list):
        if not all(isinstance(block, p.CONTENT_BLOCK_TYPES) for block in outcome):
            raise TypeError("a content tool returned something other than content blocks")
        return p.CallToolResult(content=list(outcome), result_type=result_type, meta=meta)
    body = msgspec.to_builtins(outcome)
    if not isinstance(body, dict):
        raise TypeError(f"a tool result must be an object, not {type(body).__name__}")
    return p.CallToolResult(
        content=[p.TextContent(text=msgspec.json.encode(body).decode())], structured_content=body,
        result_type=result_type, meta=meta)


def tool_error(error: PylotaError, request_id: str, modern: bool) -> p.CallToolResult:
    """A tool execution error: the envelope as text, no structuredContent (spec section 5)."""
    return p.CallToolResult(
        content=[p.TextContent(text=msgspec.json.encode(error.envelope(request_id)).decode())],
        is_error=True, result_type="complete" if modern else None,
        meta=_modern_meta() if modern else None)


_NAME_REQUIRED = "params.name is required: the {kind}'s name as a string, as {lists} gives it."


def _shown(name: str) -> str:
    """An unknown name (tool, prompt or method) as asked, up to the 128 characters a name may
    have (MCP's guidance for tool names): a 10,000-character tool name and a 600,000-character
    method came back whole (found by attacks)."""
    return name if len(name) <= 128 else name[:127] + "…"


def _get_prompt(prompts: Sequence[PromptSpec], route: Route) -> Reply | Failure:
    modern = route.era == "modern"
    name = route.params.get("name")
    spec = next((s for s in prompts if s.name == name), None)
    arguments = route.params.get("arguments") or {}
    if not isinstance(name, str):
        return Failure(code=p.INVALID_PARAMS, message=_NAME_REQUIRED.format(kind="prompt",
                                                                             lists="prompts/list"))
    if spec is None:
        return Failure(code=p.INVALID_PARAMS, message=f"Unknown prompt: {_shown(name)}")
    if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
        return Failure(code=p.INVALID_PARAMS, message="Prompt arguments must be string values.")
    missing = [a.name for a in spec.arguments if a.required and a.name not in arguments]
    if missing:
        return Failure(code=p.INVALID_PARAMS, message=f"Missing prompt argument: {missing[0]}")
    return Reply(p.GetPromptResult(
        description=spec.description, messages=list(spec.render(arguments)),
        result_type="complete" if modern else None, meta=_modern_meta() if modern else None))


async def _call_tool(res: Resources, principal: Principal, route: Route, request_id: str,
                     control: Control) -> Reply | Failure | Job:
    """``tools/call`` through the one call pipeline, rendered for MCP (spec sections 3 and 5)."""
    modern = route.era == "modern"
    outcome = await call_tool(res.calls, principal, route.params.get("name"),
                              route.params.get("arguments", {}), request_id=request_id,
                              surface="mcp", method=route.method, control=control)
    if isinstance(outcome, UnknownTool):
        if not isinstance(outcome.name, str):
            return Failure(code=p.INVALID_PARAMS, message=_NAME_REQUIRED.format(
                kind="tool", lists="tools/list"))
        # A forbidden tool and a missing one get the same answer (spec section 3).
        return Failure(code=p.INVALID_PARAMS, message=f"Unknown tool: {_shown(outcome.name)}")
    if isinstance(outcome, PylotaError):
        return Reply(tool_error(outcome, request_id, modern))
    if isinstance(outcome, Answer):
        try:
            return Reply(tool_result(outcome.value, modern))
        except TypeError:
            return Reply(tool_error(PylotaError(ErrorCode.INTERNAL,
                                                "The tool failed unexpectedly."),
                                    request_id, modern))
    return outcome


async def dispatch(res: Resources, prompts: Sequence[PromptSpec], principal: Principal,
                   route: Route, request_id: str, control: Control = UNSTOPPABLE
                   ) -> Reply | Failure | Job | None:
    """Answer one routed message; None for a notification (202).

    ``control`` is handed to an inline tool; the transport passes one that streams
    ``notifications/progress`` when the request asked for progress and accepts SSE.
    """
    modern = route.era == "modern"
    method = route.method
    if route.is_notification:
        # notifications/cancelled is handled by the transport, which knows the caller's streams.
        return None
    if method == "initialize" and not modern:
        return Reply(p.InitializeResult(
            protocol_version=negotiate_legacy_version(route.params.get("protocolVersion")),
            capabilities=CAPABILITIES, server_info=SERVER_INFO, instructions=guide.INSTRUCTIONS))
    if method == "ping" and not modern:
        return Reply({})
    if method == "server/discover" and modern:
        return Reply(p.DiscoverResult(
            result_type="complete", supported_versions=list(p.SUPPORTED_VERSIONS),
            capabilities=CAPABILITIES, ttl_ms=LIST_TTL_MS, cache_scope="private",
            instructions=guide.INSTRUCTIONS, meta=_modern_meta()))
    if method in ("tools/list", "prompts/list") and route.params.get("cursor") is not None:
        # Both lists fit one page (DESIGN.md section 5.1), so no cursor of ours exists.
        return Failure(code=p.INVALID_PARAMS, message="Invalid cursor: lists have one page.")
    if method == "tools/list":
        tools = [tool_entry(t) for t in visible_to(principal, res.tools)]
        if modern:
            return Reply(p.ListToolsResult(tools=tools, result_type="complete",
                                           ttl_ms=LIST_TTL_MS, cache_scope="private",
                                           meta=_modern_meta()))
        return Reply(p.ListToolsResult(tools=tools))
    if method == "prompts/list":
        listed = [p.Prompt(name=s.name, title=s.title, description=s.description,
                           arguments=[p.PromptArgument(name=a.name, description=a.description,
                                                       required=a.required)
                                      for a in s.arguments]) for s in prompts]
        if modern:
            return Reply(p.ListPromptsResult(prompts=listed, result_type="complete",
                                             ttl_ms=LIST_TTL_MS, cache_scope="private",
                                             meta=_modern_meta()))
        return Reply(p.ListPromptsResult(prompts=listed))
    if method == "prompts/get":
        return _get_prompt(prompts, route)
    if method == "tools/call":
        return await _call_tool(res, principal, route, request_id, control)
    return Failure(code=p.METHOD_NOT_FOUND, message=f"Method not found: {_shown(method)}",
                   http_status=404 if modern else 200)
