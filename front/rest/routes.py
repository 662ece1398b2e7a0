"""The REST API v1: one endpoint per tool, on the same call pipeline as MCP (DESIGN.md section 2).

Each endpoint of ``front.rest.endpoints`` maps an HTTP method and path to a tool, and says
where the tool's arguments come from: path parameters (``identity_id`` becomes ``identity``), the
query string of a ``GET`` (values read from their text forms), the JSON body of a ``POST``,
request headers (``Idempotency-Key`` becomes ``idempotency_key``; required, and never also in
the body), and arguments the path fixes (``scope: "tenant"`` for
``/v1/tenants/{tenant_id}/search``). A handler only gathers those, admits the caller
(``front.admission``: the key and RL_API, one budget with MCP), calls
``shared.tools.call.call_tool`` and renders what it returns: the tool's result object as the
JSON body — the same object as MCP's ``structuredContent`` — or the error envelope with its
status (``front.rest.errors``). A worker tool streams as SSE when the client accepts
``text/event-stream`` (``event: progress`` / ``event: result`` / ``event: error`` and
``: keep-alive``), and is otherwise answered when it ends (long poll).

Caps are the MCP ones (the same argument types decode both), so REST never allows less.
Every request writes one ``request`` log line: surface, method, route, status, duration, key id,
request id and error code — never arguments.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import msgspec
from litestar import Request, Response, route
from litestar.datastructures import Headers

from front.admission import admit
from front.body import (BODY_READ_SECONDS, CLIENT_CLOSED_STATUS, BodyTooLarge, ClientGone,
                        read_body, while_connected)
from front.mcp.inbound import MAX_BODY_BYTES
from front.relay import Final, KeepAlive, Progress, follow
from front.resources import Resources
from front.rest.errors import error_response
from front.rest.endpoints import REST_ROUTES, RestRoute
from front.rest.openapi import openapi_document
from front.shedding import waiting
from front.sse import EventStream
from shared.auth.permissions import Permission
from shared.errors import ErrorCode, PylotaError, dependency_failure, invalid
from shared.ids import Prefix, new_id
from shared.logs import get_logger
from shared.tools.call import Answer, Job, UnknownTool, call_tool
from shared.tools.registry import ToolSpec
from shared.tools.scope import lookup_identity

__all__ = ["rest_routes", "OPENAPI_PATH", "LOOKUP_PATH"]

log = get_logger("front.rest")

#: Where the OpenAPI 3.1 document of this API is served.
OPENAPI_PATH = "/v1/openapi.json"
#: The identity lookup by address (spec section 3), served with ``mail_list_identities``.
LOOKUP_PATH = "/v1/identities/lookup"
_SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def _query_arguments(request: Request[Any, Any, Any], spec: ToolSpec, rest: RestRoute
                     ) -> dict[str, Any]:
    """The query string as tool arguments: repeated keys and list-typed arguments as lists."""
    lists = {name for name, prop in spec.input_schema.get("properties", {}).items()
             if prop.get("type") == "array"}
    out: dict[str, Any] = {}
    renamed = {argument: param for param, argument in rest.query.items()}
    for key, values in request.query_params.dict().items():
        if key in renamed:  # the tool's name for it, which this endpoint does not take
            raise invalid(key, f"{key} is called {renamed[key]} on this endpoint.",
                          f"Pass ?{renamed[key]}=… instead of ?{key}=….")
        name = rest.query.get(key, key)
        out[name] = values if name in lists or len(values) > 1 else values[0]
    return out


class _UnsupportedMediaType(PylotaError):
    """``invalid_request`` answered 415 (RFC 9110 section 15.5.16): a body that says it is not
    JSON, as ``POST /mcp`` refuses one."""

    @property
    def status(self) -> int:
        return 415


def _is_json(content_type: str | None) -> bool:
    """Whether ``content_type`` labels JSON: ``application/json`` or a ``+json`` type (RFC 6839
    section 3.1), parameters aside."""
    media_type = (content_type or "").partition(";")[0].strip(" \t").lower()
    return media_type == "application/json" or (media_type.startswith("application/")
                                                 and media_type.endswith("+json"))


async def _body_arguments(request: Request[Any, Any, Any]) -> dict[str, Any]:
    try:
        raw = await read_body(request, MAX_BODY_BYTES)
    except BodyTooLarge:
        raise PylotaError(ErrorCode.PAYLOAD_TOO_LARGE,
                          f"The request body is larger than {MAX_BODY_BYTES} bytes (7 MiB).",
                          fix="Send a smaller request: attachments count towards the limit.",
                          details={"limit_bytes": MAX_BODY_BYTES}) from None
    except TimeoutError:
        raise invalid("body", f"The body did not arrive within {BODY_READ_SECONDS:g} seconds.",
                      "Send the whole body at once.") from None
    if not raw.strip():
        return {}
    if not _is_json(request.headers.get("content-type")):
        raise _UnsupportedMediaType(
            ErrorCode.INVALID_REQUEST, "The body must be labelled Content-Type: application/json.",
            fix="Send the header Content-Type: application/json with the JSON body (curl -d "
                "alone labels it application/x-www-form-urlencoded).",
            details={"header": "Content-Type"})
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise _UnsupportedMediaType(
            ErrorCode.INVALID_REQUEST, f"Content-Encoding {encoding[:40]} is not taken.",
            fix="Send the body uncompressed, without Content-Encoding.",
            details={"header": "Content-Encoding"})
    try:
        body = msgspec.json.decode(raw)
    except RecursionError:
        raise invalid("body", "The body's JSON nests deeper than this server reads (about 1,000 "
                              "arrays or objects inside each other).",
                      "Flatten the body: no argument needs more than a few levels.") from None
    except (msgspec.DecodeError, ValueError) as exc:
        # msgspec says what and where (a byte offset, never the body's content): a lone
        # surrogate, bad UTF-8, an integer out of range, a missing brace (found by an attack:
        # all of them were "not valid JSON" alone)
        raise invalid("body", f"The body is not valid JSON ({exc}).",
                      "Send the arguments as one JSON object with Content-Type: "
                      "application/json.") from None
    if not isinstance(body, dict):
        raise invalid("body", "The body must be a JSON object.",
                      "Send the arguments as one JSON object.")
    return body


def _bound_arguments(rest: RestRoute, params: Mapping[str, Any], headers: Headers,
                     arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` with those the path, the route and the request headers give."""
    for name in (*rest.path_args.values(), *rest.fixed):
        if name in arguments:
            raise invalid(name, f"{name} is given by the URL path of this endpoint.",
                          f"Leave {name} out of the request.")
    from_headers: dict[str, str] = {}
    for header, bound in rest.headers.items():
        if bound.argument in arguments:
            raise invalid(bound.argument, f"{bound.argument} is given by the {header} header "
                                          "on this endpoint.",
                          f"Leave {bound.argument} out of the body; {bound.fix}")
        values = headers.getall(header, [])
        if not values:
            # Left to the tool's own check of its required argument, after the key's
            # permission: a key that may not send learns that first (_header_error).
            continue
        if len(values) > 1:
            # Which one counts would differ between proxies and us: a retry could send twice.
            raise PylotaError(ErrorCode.INVALID_REQUEST, f"The {header} header is given "
                              f"{len(values)} times.", fix=f"Send it once. {bound.fix}",
                              details={"header": header})
        from_headers[bound.argument] = values[0]
    return {**arguments, **{arg: params[p] for p, arg in rest.path_args.items()}, **rest.fixed,
            **from_headers}


def _header_error(rest: RestRoute, error: PylotaError, arguments: Mapping[str, Any]
                  ) -> PylotaError:
    """An invalid argument that came from a header, said of the header; one that came from a
    renamed query parameter (``timeout``), said of the parameter (it was named by the tool's
    argument, ``timeout_seconds``, which the caller never wrote: found by an attack)."""
    path = error.details.get("path") if error.code is ErrorCode.INVALID_REQUEST else None
    for header, bound in rest.headers.items():
        if path == bound.argument:
            given = bound.argument in arguments
            return PylotaError(ErrorCode.INVALID_REQUEST,
                               f"The {header} header is {'not valid' if given else 'required'}.",
                               fix=bound.fix, details={"header": header})
    for header, bound in rest.headers.items():
        # "mail_send requires: to, subject, idempotency_key": over REST that one is the header
        if bound.argument in (error.fix or ""):
            error = PylotaError(error.code, error.message,
                                fix=(error.fix or "").replace(bound.argument, f"the {header} header"),
                                details=error.details)
    for param, argument in rest.query.items():
        # the renamed parameter as the caller writes it: in the path of its own error, and in
        # the fix of any other ("mail_wait takes only: …, timeout_seconds"; found by a new user)
        if path == argument or argument in error.message + (error.fix or ""):
            details = {**error.details, "path": param} if path == argument else error.details
            return PylotaError(error.code, error.message.replace(argument, param),
                               fix=(error.fix or "").replace(argument, param) or None,
                               details=details)
    return error


def _json(value: Any, status: int, request_id: str) -> Response[bytes]:
    return Response(content=msgspec.json.encode(value), status_code=status,
                    media_type="application/json", headers={"x-request-id": request_id})


def _event(name: str, data: Any) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + msgspec.json.encode(data) + b"\n\n"


async def _sse(res: Resources, job: Job, request_id: str) -> AsyncIterator[bytes]:
    outcome, code = "cancelled", None
    try:
        async for event in follow(res, job):
            if isinstance(event, Progress):
                yield _event("progress", {"progress": event.progress, "total": event.total,
                                          "message": event.message})
            elif isinstance(event, KeepAlive):
                yield b": keep-alive\n\n"
            elif isinstance(event.value, PylotaError):
                outcome, code = "error", event.value.code.value
                yield _event("error", event.value.envelope(request_id))
            else:
                outcome = "ok"
                yield _event("result", event.value)
    finally:
        job.finish(outcome, code)  # type: ignore[arg-type]


async def _long_poll(res: Resources, job: Job, request_id: str) -> Response[bytes]:
    final: Final | None = None
    try:
        async for event in follow(res, job):
            if isinstance(event, Final):
                final = event
    finally:
        code = final.value.code.value if final and isinstance(final.value, PylotaError) else None
        job.finish("cancelled" if final is None else "error" if code else "ok", code)
    if final is None or isinstance(final.value, PylotaError):
        return error_response(final.value if final is not None else PylotaError(
            ErrorCode.UNAVAILABLE, "The call was cancelled."), request_id)
    return _json(final.value, 200, request_id)


async def _serve(request: Request[Any, Any, Any], request_id: str, fields: dict[str, Any], *,
                 rest: RestRoute) -> Response[Any]:
    res: Resources = request.app.state.resources
    principal = await admit(res, request.scope)
    fields.update(key_id=principal.key_id, identity_id=principal.identity_id)
    spec = next(t for t in res.tools if t.name == rest.tool)
    gathered = _query_arguments(request, spec, rest) if rest.method == "GET" \
        else await _body_arguments(request)
    arguments = _bound_arguments(rest, request.path_params, request.headers, gathered)
    outcome = await call_tool(res.calls, principal, rest.tool, arguments, request_id=request_id,
                              surface="rest", method=f"{rest.method} {rest.path}",
                              from_query=rest.method == "GET")
    if isinstance(outcome, UnknownTool):
        raise PylotaError(ErrorCode.PERMISSION_DENIED,
                          f"This key may not call {rest.tool}.",
                          fix=f"Use a key with the {spec.permission.value} permission (and, "
                              "where the tool needs it, a tenant or identity key).")
    if isinstance(outcome, PylotaError):
        raise _header_error(rest, outcome, arguments)
    if isinstance(outcome, Answer):
        replayed = rest.replay_status is not None and getattr(outcome.value, "deduplicated", False)
        return _json(msgspec.to_builtins(outcome.value),
                     rest.replay_status if replayed else rest.status, request_id)
    if "text/event-stream" in request.headers.get("accept", ""):
        fields["streaming"] = True
        return EventStream(_sse(res, outcome, request_id), status_code=200,
                      media_type="text/event-stream",  # Litestar adds the charset
                      headers={**_SSE_HEADERS, "x-request-id": request_id})
    waiting(request.scope)
    return await while_connected(request.receive, _long_poll(res, outcome, request_id))


Serve = Callable[[Request[Any, Any, Any], str, dict[str, Any]], Awaitable[Response[Any]]]


def _logged(path: str, method: str, serve: Serve, name: str) -> Any:
    """A route handler running ``serve`` with a request id, one ``request`` log line, and every
    failure rendered as the error envelope."""

    async def handle(request: Request[Any, Any, Any]) -> Response[Any]:
        request_id = new_id(Prefix.REQUEST)
        started = time.monotonic()
        fields: dict[str, Any] = {"surface": "rest", "request_id": request_id,
                                  "http_method": request.method, "route": path}
        try:
            response = await serve(request, request_id, fields)
        except ClientGone:
            fields["error_code"] = "client_closed"
            response = Response(content=b"", status_code=CLIENT_CLOSED_STATUS)
        except Exception as exc:  # noqa: BLE001 - every failure is the envelope
            error = dependency_failure(exc) or PylotaError(
                ErrorCode.INTERNAL, "The request failed unexpectedly.")
            if not isinstance(exc, PylotaError):
                fields["exception"] = type(exc).__name__
            fields["error_code"] = error.code.value
            response = error_response(error, request_id)
        log.info("request", **fields, status=response.status_code,
                 duration_ms=round((time.monotonic() - started) * 1000, 1))
        return response

    handle.__name__ = name
    # HEAD is GET without the content (RFC 9110 section 9.3.2; uvicorn leaves the body out).
    methods = [method, "HEAD"] if method == "GET" else [method]
    return route(path, http_method=methods, include_in_schema=False)(handle)


async def _lookup(request: Request[Any, Any, Any], request_id: str, fields: dict[str, Any]
                  ) -> Response[Any]:
    """``GET /v1/identities/lookup?address=…``: the identity owning an address (spec section 3)."""
    res: Resources = request.app.state.resources
    principal = await admit(res, request.scope)
    fields.update(key_id=principal.key_id, identity_id=principal.identity_id)
    if Permission.IDENTITIES_READ not in principal.permissions:
        raise PylotaError(ErrorCode.PERMISSION_DENIED, "This key may not read identities.",
                          fix="Use a key with the identities:read permission.")
    given = request.query_params.getall("address", [])
    if len(given) > 1:  # which one counts would differ between proxies and us (an attack)
        raise invalid("address", f"address is given {len(given)} times.", "Pass it once.")
    address = given[0] if given else None
    if not address or len(address) > 254:
        raise invalid("address", "address is required (at most 254 characters).",
                      "Pass ?address=desk@example.com.")
    if "\x00" in address:  # as every tool argument (shared.tools.call; found by an attack)
        raise invalid("address", "address contains a NUL character.",
                      "Remove the %00 from address.")
    async with res.db.acquire() as conn:
        found = await lookup_identity(conn, principal, address)
    return _json(msgspec.to_builtins(found), 200, request_id)


def rest_routes(tools: Sequence[ToolSpec]) -> list[Any]:
    """The route handlers of the REST API for the tools served, and its OpenAPI document."""
    served = {t.name for t in tools}
    routes = [r for r in REST_ROUTES if r.tool in served]
    document = openapi_document(routes, tools)

    @route(OPENAPI_PATH, http_method=["GET", "HEAD"], include_in_schema=False)
    async def openapi() -> Response[bytes]:
        """The OpenAPI 3.1 document of this API, generated from the tools' types."""
        return Response(content=msgspec.json.encode(document), media_type="application/json")

    handlers = [_logged(r.path, r.method, functools.partial(_serve, rest=r),
                        f"{r.method.lower()}_{r.tool}_{n}") for n, r in enumerate(routes)]
    if "mail_list_identities" in served:
        handlers.append(_logged(LOOKUP_PATH, "GET", _lookup, "get_identity_lookup"))
    return [*handlers, openapi]
