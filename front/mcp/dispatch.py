"""Methods of both eras (DESIGN.md section 5.1) and the tool-call path (spec sections 3-5).

``dispatch`` takes a route that passed the ladder and the caller's principal and returns what to
send: a result, a JSON-RPC error, or a :class:`StreamJob` for a tool that runs on a worker. It is
the one place that decides whether a method exists, and the one place that renders a
:class:`~shared.errors.PylotaError` as the ``isError`` envelope.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import msgspec

from front.mcp import protocol as p
from front.mcp.inbound import Route, negotiate_legacy_version
from shared import guide
from shared.auth.keys import Principal
from shared.errors import ErrorCode, PylotaError
from shared.logs import get_logger, query_hash
from shared.tools.context import Progress, ToolContext, no_progress
from shared.tools.registry import ToolSpec, output_schema, visible_to

if TYPE_CHECKING:
    from front.app import Resources

__all__ = ["Reply", "Failure", "StreamJob", "dispatch", "tool_result", "tool_error",
           "tool_entry", "SERVER_INFO", "CAPABILITIES", "LIST_TTL_MS"]

log = get_logger("front.mcp")

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


class StreamJob(msgspec.Struct, frozen=True, kw_only=True):
    """A worker tool call, checked and ready to enqueue (DESIGN.md section 2).

    ``log_fields`` are the tool-call log fields so far (spec section 7); the transport logs the
    call's line when the job ends, with ``started`` (``time.monotonic()``) for its duration.
    """

    tool: str
    function: str
    payload: bytes
    timeout_seconds: float
    log_fields: dict[str, Any]
    started: float


def _modern_meta() -> dict[str, Any]:
    return {p.SERVER_INFO_META_KEY: {"name": SERVER_INFO.name, "version": SERVER_INFO.version}}


def tool_entry(spec: ToolSpec) -> p.Tool:
    """The `tools/list` entry of ``spec``: all four hints explicit (spec section 4.1), outputSchema
    from the result Struct with every ``$ref`` inlined (4.2), none for a content tool."""
    a = spec.annotations
    return p.Tool(
        name=spec.name, title=spec.title, description=spec.description,
        input_schema=spec.input_schema,
        output_schema=None if spec.result is None else output_schema(spec.result),
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


def _validation_error(exc: msgspec.ValidationError, spec: ToolSpec) -> PylotaError:
    """One ``invalid_request`` naming the argument and how to fix it (spec section 5)."""
    # msgspec says "... - at `$.limit`"; the path is what a model needs to fix its call.
    message, _, where = str(exc).partition(" - at `")
    path = where.rstrip("`").removeprefix("$.").removeprefix("$") or "arguments"
    schema = spec.input_schema.get("properties", {}).get(path.split(".")[0].split("[")[0], {})
    if message.startswith("Object contains unknown field"):
        path = ".".join(p for p in (path if path != "arguments" else "",
                                     message.rsplit("`", 2)[-2]) if p)
        known = ", ".join(spec.input_schema.get("properties", {}))
        fix = f"Remove {path}; {spec.name} takes only: {known}."
    elif schema.get("format") == "date-time":
        fix = f"Give {path} as an RFC 3339 date-time with an offset, e.g. 2026-09-01T00:00:00Z."
    else:
        fix = _schema_fix(path, schema["items"] if "[" in path and "items" in schema else schema)
    return PylotaError(ErrorCode.INVALID_REQUEST, f"Invalid argument {path}: {message}.",
                       fix=fix, details={"path": path})


def _integral(value: Any) -> Any:
    """``value`` with every integral float (10.0) made an int, at any depth."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


def _schema_fix(path: str, schema: dict[str, Any]) -> str:
    """What a valid value of ``path`` looks like, read from its JSON Schema."""
    if "enum" in schema:
        return f"Use one of {', '.join(json.dumps(v) for v in schema['enum'])} for {path}."
    kind = schema.get("type")
    if kind in ("integer", "number"):
        low, high = schema.get("minimum"), schema.get("maximum")
        noun = "a whole number" if kind == "integer" else "a number"
        span = (f" from {low} to {high}" if low is not None and high is not None
                else f" of at least {low}" if low is not None
                else f" of at most {high}" if high is not None else "")
        return f"Give {path} as {noun}{span}."
    if kind == "boolean":
        return f"Give {path} as true or false."
    if kind == "string" and "pattern" in schema:
        return f"Give {path} as a string matching {schema['pattern']}."
    if kind == "string" and "maxLength" in schema:
        return f"Give {path} as a string of at most {schema['maxLength']} characters."
    if kind == "array" and "maxItems" in schema:
        return f"Give {path} as a list of at most {schema['maxItems']} items."
    return f"Correct {path} to match the tool's inputSchema."


def _elapsed_ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)


def _nul_path(value: Any, path: str = "") -> str | None:
    """The path of the first string holding U+0000, which JSON allows and PostgreSQL text does not."""
    if isinstance(value, str):
        return (path or "arguments") if "\x00" in value else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and "\x00" in key:
            return f"{path}.{key!r}".lstrip(".")
        if (found := _nul_path(item, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]")) is not None:
            return found.lstrip(".")
    return None


async def _call_tool(res: Resources, principal: Principal, route: Route, request_id: str,
                     progress: Progress) -> Reply | Failure | StreamJob:
    """``tools/call``: find the tool among those visible to the key, decode the arguments into its
    Struct once, charge its bucket, run it inline or hand back the worker job.

    Logs one ``tool_call`` line per inline call (spec section 7): method, tool, key id, identity
    id, request id, duration, outcome, error code and, for a call with a string ``q``, its
    ``query_hash``. Never the arguments.
    """
    name = route.params.get("name")
    arguments = route.params.get("arguments", {})
    modern = route.era == "modern"
    visible = {t.name: t for t in visible_to(principal, res.tools)}
    spec = visible.get(name) if isinstance(name, str) else None
    if spec is None:
        # A forbidden tool and a missing one get the same answer (spec section 3).
        return Failure(code=p.INVALID_PARAMS, message=f"Unknown tool: {name}")
    started = time.monotonic()
    fields: dict[str, Any] = {"method": route.method, "tool": spec.name,
                              "key_id": principal.key_id, "identity_id": principal.identity_id,
                              "request_id": request_id}
    if isinstance(arguments, dict) and isinstance(arguments.get("q"), str):
        fields["query_hash"] = query_hash(res.settings.pm_hash_key, arguments["q"])
    try:
        if not isinstance(arguments, dict):
            raise PylotaError(ErrorCode.INVALID_REQUEST, "arguments must be an object.",
                              fix="Pass the tool's arguments as a JSON object.",
                              details={"path": "arguments"})
        if (where := _nul_path(arguments)) is not None:
            raise PylotaError(ErrorCode.INVALID_REQUEST, f"{where} contains a NUL character.",
                              fix=f"Remove the \\u0000 characters from {where}.",
                              details={"path": where})
        try:
            # Strict: "5" is not an integer nor 1 a date-time, as the inputSchema says. JSON
            # Schema's integer does admit 10.0, which strict msgspec would refuse.
            args = msgspec.convert(_integral(arguments), spec.args, strict=True)
        except msgspec.ValidationError as exc:
            raise _validation_error(exc, spec) from None
        if spec.bucket is not None:
            await res.limits.charge(spec.bucket, principal.key_id)
        ctx = ToolContext(pool=res.pool, redis=res.redis, settings=res.settings,
                          principal=principal, request_id=request_id, progress=progress)
        outcome = await spec.handler(ctx, args)
        if spec.runs_on == "worker":
            return StreamJob(tool=spec.name, function=spec.name,
                             payload=msgspec.json.encode(outcome),
                             timeout_seconds=float(getattr(args, "timeout_seconds", 60)),
                             log_fields=fields, started=started)
        reply = Reply(tool_result(outcome, modern))
    except PylotaError as exc:
        log.info("tool_call", **fields, outcome="error", error_code=exc.code.value,
                 duration_ms=_elapsed_ms(started))
        return Reply(tool_error(exc, request_id, modern))
    except Exception as exc:  # noqa: BLE001 - any other failure is rendered, never raised
        log.error("tool_call", **fields, outcome="error", error_code=ErrorCode.INTERNAL.value,
                  exception=type(exc).__name__, duration_ms=_elapsed_ms(started))
        return Reply(tool_error(PylotaError(ErrorCode.INTERNAL, "The tool failed unexpectedly."),
                                request_id, modern))
    log.info("tool_call", **fields, outcome="ok", duration_ms=_elapsed_ms(started))
    return reply


def _get_prompt(res: Resources, route: Route) -> Reply | Failure:
    modern = route.era == "modern"
    name = route.params.get("name")
    spec = next((s for s in res.prompts if s.name == name), None)
    arguments = route.params.get("arguments") or {}
    if spec is None:
        return Failure(code=p.INVALID_PARAMS, message=f"Unknown prompt: {name}")
    if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
        return Failure(code=p.INVALID_PARAMS, message="Prompt arguments must be string values.")
    missing = [a.name for a in spec.arguments if a.required and a.name not in arguments]
    if missing:
        return Failure(code=p.INVALID_PARAMS, message=f"Missing prompt argument: {missing[0]}")
    return Reply(p.GetPromptResult(
        description=spec.description, messages=list(spec.render(arguments)),
        result_type="complete" if modern else None, meta=_modern_meta() if modern else None))


async def dispatch(res: Resources, principal: Principal, route: Route, request_id: str,
                   progress: Progress = no_progress) -> Reply | Failure | StreamJob | None:
    """Answer one routed message; None for a notification (202).

    ``progress`` is handed to an inline tool as ``ctx.progress``; the transport passes a reporter
    that streams ``notifications/progress`` when the request asked for progress and accepts SSE.
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
        prompts = [p.Prompt(name=s.name, title=s.title, description=s.description,
                            arguments=[p.PromptArgument(name=a.name, description=a.description,
                                                        required=a.required)
                                       for a in s.arguments]) for s in res.prompts]
        if modern:
            return Reply(p.ListPromptsResult(prompts=prompts, result_type="complete",
                                             ttl_ms=LIST_TTL_MS, cache_scope="private",
                                             meta=_modern_meta()))
        return Reply(p.ListPromptsResult(prompts=prompts))
    if method == "prompts/get":
        return _get_prompt(res, route)
    if method == "tools/call":
        return await _call_tool(res, principal, route, request_id, progress)
    return Failure(code=p.METHOD_NOT_FOUND, message=f"Method not found: {method}",
                   http_status=404 if modern else 200)
