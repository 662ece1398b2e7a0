"""``POST /mcp``: the request ladder of spec section 2.1, read top to bottom.

Each rung is an early return. The pure rungs live in :mod:`front.mcp.inbound`; authentication and
``RL_API`` need the database and Redis and run here, between parsing and era selection. Results
go out as JSON, or as an SSE stream scoped to the request (spec section 2.6):

* a tool that runs on a worker streams whenever the client accepts ``text/event-stream``: the
  front relays the job's progress (only with a progressToken), ``: keep-alive`` after
  ``pm_stream_heartbeat_seconds`` of silence, then the final response (DESIGN.md section 2);
* an inline call streams only once it reports progress for a request that carried a
  progressToken: until the first report the answer may still go out as plain JSON, so a quick
  call or a fast error costs no stream (PROTOCOL.md section 1.6).

A client that closes the stream cancels the work: the worker job is flagged and aborted, an
inline call is cancelled. On the legacy wire ``notifications/cancelled`` naming one of the
caller's own streaming requests does the same (spec section 2.3; a caller can only reach its own
requests, so one key cannot cancel another's work). On the modern wire it is acknowledged and
dropped, as the SDK does (PROTOCOL.md section 1.7).

Every request logs one ``request`` line (spec section 7): method, era, key id, identity id,
request id, HTTP status, duration, and the error code or rejection kind when there is one. A
failure outside a tool is still a JSON-RPC error with that line: PostgreSQL or Redis down is
503 with ``Retry-After`` and the ``unavailable`` envelope (-32603), anything else 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec
from litestar import Request, Response, route
from litestar.response import Stream

from front.admission import admit
from front.body import (BODY_READ_SECONDS, CLIENT_CLOSED_STATUS, BodyTooLarge, ClientGone,
                        read_body, while_connected)
from front.mcp import protocol as p
from front.mcp.dispatch import Failure, Reply, dispatch, tool_error, tool_result
from front.mcp.inbound import (
    MAX_BODY_BYTES, Rejection, RejectionKind, Route, check_method, check_origin,
    check_size_and_type, parse_body, reject, select_era,
)
from front.mcp.prompts import PromptSpec
from front.relay import MARGIN_SECONDS, START_SECONDS, Final, KeepAlive, Progress, follow, \
    stop_job
from front.resources import Resources
from front.sse import EventStream
from front.shedding import RETRY_AFTER_SECONDS, waiting
from shared.auth.keys import Principal
from shared.errors import ErrorCode, PylotaError, dependency_failure
from shared.events import inflight_key, queue_name
from shared.ids import Prefix, new_id
from shared.logs import get_logger
from shared.tools.call import Job

__all__ = ["mcp_routes", "method_not_allowed", "KEEP_ALIVE", "MCP_PATH"]

log = get_logger("front.mcp")

#: The one MCP endpoint's path (spec section 2.1).
MCP_PATH = "/mcp"
#: The SSE comment sent after a quiet heartbeat interval (spec section 2.6).
KEEP_ALIVE = b": keep-alive\n\n"
_ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "TRACE"]
#: Longest ``method`` value written to the request log (callers choose it before authenticating).
LOGGED_METHOD_CHARS = 64
#: Litestar adds "; charset=utf-8" to a text/* type itself (spec section 2.6 asks for it).
_SSE_MEDIA_TYPE = "text/event-stream"
_SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
_WWW_AUTHENTICATE = 'Bearer realm="pylota-mail", error="invalid_token"'


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response[bytes]:
    return Response(content=p.encode(body), status_code=status, media_type="application/json",
                    headers=headers)


def _sse(message: Any) -> bytes:
    # One JSON object on one data line: the conformance SSE parser reads line by line.
    return b"event: message\ndata: " + p.encode(message) + b"\n\n"


def _stream(frames: AsyncIterator[bytes]) -> Stream:
    return EventStream(frames, status_code=200, media_type=_SSE_MEDIA_TYPE, headers=_SSE_HEADERS)


def _admission_rejection(error: PylotaError, request_id: str, body_id: Any) -> Rejection:
    """Steps 5 and 6: 401 with ``WWW-Authenticate`` and the envelope, 403 for a suspended
    partner, 429 with ``Retry-After`` over RL_API, 503 when the key store or the buckets are
    down, 500 for anything else."""
    envelope = msgspec.to_builtins(error.envelope(request_id))
    if error.code is ErrorCode.RATE_LIMITED:
        return reject(RejectionKind.RATE_LIMITED, error.message, id=body_id, data=envelope,
                      headers=(("retry-after", str(error.details["retry_after"])),))
    if error.code is ErrorCode.PARTNER_SUSPENDED:
        return reject(RejectionKind.PARTNER_SUSPENDED, error.message, data=envelope, id=body_id)
    if error.code is ErrorCode.UNAVAILABLE:
        return reject(RejectionKind.UNAVAILABLE, error.message, data=envelope, id=body_id,
                      headers=(("retry-after", str(RETRY_AFTER_SECONDS)),))
    if error.code is ErrorCode.INTERNAL:
        return reject(RejectionKind.INTERNAL, error.message, data=envelope, id=body_id)
    return reject(RejectionKind.UNAUTHENTICATED, error.message, data=envelope, id=body_id,
                  headers=(("www-authenticate", _WWW_AUTHENTICATE),))


# --- Worker tools: relay a job's events -------------------------------------------------------


def _inflight(principal: Principal, request_id: Any) -> str:
    return inflight_key(principal.key_id, request_id)


async def _cancelled_notification(res: Resources, principal: Principal, route_: Route) -> None:
    """Legacy ``notifications/cancelled``: stop our streaming job if it is one of the caller's."""
    if route_.era != "legacy" or "requestId" not in route_.params:
        return
    with contextlib.suppress(Exception):  # best effort (spec section 2.3)
        found = await res.redis.get(_inflight(principal, route_.params["requestId"]))
        if found is not None:
            job_id, _, queue = found.decode().partition(" ")
            await stop_job(res, job_id, queue)


def _run_job(res: Resources, principal: Principal, route_: Route, job: Job,
             request_id: str, sse: bool) -> AsyncIterator[bytes | p.JSONRPCResponse]:
    """Run ``job`` (``front.relay``) and yield SSE frames (``sse``) or, at the end, the one final
    response; nothing at the end when the caller cancelled it. Stops the job when the client
    goes away, and reports how the call ended to :meth:`Job.finish`, however it ends."""
    # A stream lives for minutes, thousands at once (issue 14): it keeps the route without the
    # request's decoded params, and the key id rather than the caller's whole Principal.
    return _relay_job(res, msgspec.structs.replace(route_, params={}), job, request_id, sse,
                      _inflight(principal, route_.id))


async def _relay_job(res: Resources, route_: Route, job: Job, request_id: str, sse: bool,
                     inflight: str) -> AsyncIterator[bytes | p.JSONRPCResponse]:
    modern = route_.era == "modern"
    queue = queue_name(res.settings.pm_namespace, job.request.job.queue)
    outcome, error_code = "cancelled", None
    try:
        with contextlib.suppress(Exception):  # only notifications/cancelled needs it
            await res.redis.set(inflight, f"{request_id} {queue}", ex=int(
                START_SECONDS + job.request.seconds + MARGIN_SECONDS + 1))
        async for event in follow(res, job):
            if isinstance(event, Final):
                if isinstance(event.value, PylotaError):
                    outcome, error_code = "error", event.value.code.value
                    result = tool_error(event.value, request_id, modern)
                else:
                    outcome = "ok"
                    result = tool_result(event.value, modern)
                response = p.JSONRPCResponse(id=route_.id, result=result)
                yield _sse(response) if sse else response
            elif isinstance(event, Progress) and sse and route_.progress_token is not None:
                yield _sse(_progress(route_, event.progress, event.total, event.message))
            elif sse and isinstance(event, Progress | KeepAlive):
                yield KEEP_ALIVE  # a report the client did not ask for is still a sign of life
    finally:
        with contextlib.suppress(Exception):  # it expires anyway
            await res.redis.delete(inflight)
        job.finish(outcome, error_code)  # type: ignore[arg-type]


async def _last(frames: AsyncIterator[Any]) -> Any:
    """The last of ``frames`` (None when there is none)."""
    last = None
    async for last in frames:
        pass
    return last


def _progress(route_: Route, progress: float, total: float | None, message: str | None
              ) -> p.ProgressNotification:
    """``notifications/progress`` echoing the request's token with its JSON type (int or str)."""
    assert route_.progress_token is not None
    return p.ProgressNotification(params=p.ProgressNotificationParams(
        progress_token=route_.progress_token, progress=progress, total=total, message=message))


# --- Inline calls: JSON, or SSE once they report progress -------------------------------------

Outcome = Reply | Failure | Job | None


def _final_message(route_: Route, outcome: Reply | Failure) -> p.JSONRPCResponse | p.JSONRPCError:
    if isinstance(outcome, Failure):
        error = p.ErrorObject(code=outcome.code, message=outcome.message,
                              data=msgspec.UNSET if outcome.data is None else outcome.data)
        return p.JSONRPCError(id=route_.id, error=error)  # type: ignore[arg-type]
    return p.JSONRPCResponse(id=route_.id, result=outcome.result)  # type: ignore[arg-type]


class _Reporter:
    """The :class:`~shared.control.Control` of an inline call whose client asked for progress:
    each report becomes a ``notifications/progress`` frame. A client that goes away cancels
    the call's task, so the checkpoint itself has nothing to check."""

    def __init__(self, route_: Route, frames: asyncio.Queue[bytes | None]) -> None:
        self._route = route_
        self._frames = frames

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self._frames.put_nowait(_sse(_progress(self._route, progress, total, message)))

    async def checkpoint(self) -> None:
        return None

    def remaining(self) -> float:
        return float("inf")


async def _dispatch_reporting(res: Resources, prompts: Sequence[PromptSpec], principal: Principal,
                              route_: Route, request_id: str) -> Outcome | Stream:
    """Dispatch with a progress reporter; the outcome as is if the call ends before its first
    report, else an SSE stream of the reports, keep-alives and the final message.

    The reporter queues frames; the call's end queues ``None``, so one reader sees both in order.
    """
    frames: asyncio.Queue[bytes | None] = asyncio.Queue()
    task = asyncio.create_task(dispatch(res, prompts, principal, route_, request_id,
                                        control=_Reporter(route_, frames)))
    task.add_done_callback(lambda _: frames.put_nowait(None))
    try:
        first = await frames.get()
    except asyncio.CancelledError:
        task.cancel()
        raise
    if first is None:
        return task.result()
    heartbeat = res.settings.pm_stream_heartbeat_seconds

    async def relay() -> AsyncIterator[bytes]:
        try:
            frame: bytes | None = first
            while frame is not None:
                yield frame
                try:
                    frame = await asyncio.wait_for(frames.get(), timeout=heartbeat)
                except asyncio.TimeoutError:
                    frame = KEEP_ALIVE
            outcome = task.result()
            assert isinstance(outcome, Reply | Failure)  # only inline tools/call reports progress
            yield _sse(_final_message(route_, outcome))
        finally:
            task.cancel()  # the client went away: stop the call (no-op once it is done)

    return _stream(relay())


# --- The endpoint -----------------------------------------------------------------------------


async def _serve(request: Request[Any, Any, Any], res: Resources, prompts: Sequence[PromptSpec],
                 request_id: str, fields: dict[str, Any]) -> Response[Any]:
    """The ladder; fills ``fields`` (the request log line) as it learns the caller and method."""
    settings = res.settings
    headers = request.headers

    if (rejection := check_method(request.method)) is not None:
        return _rejected(rejection, fields)  # 405 + Allow: POST, or 204 for OPTIONS (step 1)
    if (rejection := check_origin(headers, settings.pm_api_host)) is not None:
        return _rejected(rejection, fields)  # 403, error without id (step 2)
    declared = headers.get("content-length")
    length = int(declared) if declared and declared.isdigit() else None
    if (rejection := check_size_and_type(length, headers.get("content-type"),
                                         request_id=request_id)) is not None:
        return _rejected(rejection, fields)  # 413 or 415 (step 3)
    try:
        raw = await read_body(request, MAX_BODY_BYTES)
    except TimeoutError:
        return _rejected(reject(RejectionKind.REQUEST_TIMEOUT,
                                f"The body did not arrive within {BODY_READ_SECONDS:g} seconds."),
                         fields)
    except BodyTooLarge:  # a chunked body past the limit
        too_large = check_size_and_type(MAX_BODY_BYTES + 1, "application/json",
                                        request_id=request_id)
        assert too_large is not None
        return _rejected(too_large, fields)
    body = parse_body(raw)
    if isinstance(body, Rejection):
        return _rejected(body, fields)  # 400 -32700 / -32600 (step 4)
    body_id = body.get("id")
    fields["method"] = body["method"][:LOGGED_METHOD_CHARS]
    try:
        principal = await admit(res, request.scope)
    except PylotaError as exc:
        return _rejected(_admission_rejection(exc, request_id, body_id), fields)  # steps 5, 6
    fields.update(key_id=principal.key_id, identity_id=principal.identity_id)
    routed = select_era(body, headers)
    if isinstance(routed, Rejection):
        return _rejected(routed, fields)  # era, mirrored headers, version (step 7)
    fields["era"] = routed.era

    if routed.is_notification:
        if routed.method == "notifications/cancelled":
            await _cancelled_notification(res, principal, routed)
        return Response(content=b"", status_code=202)  # step 9
    accepts_sse = "text/event-stream" in headers.get("accept", "")
    outcome: Outcome | Stream
    if accepts_sse and routed.progress_token is not None:
        outcome = await _dispatch_reporting(res, prompts, principal, routed, request_id)
    else:
        outcome = await dispatch(res, prompts, principal, routed, request_id)
    if isinstance(outcome, Stream):
        fields["streaming"] = True
        return outcome
    if isinstance(outcome, Job):
        frames = _run_job(res, principal, routed, outcome, request_id, sse=accepts_sse)
        if accepts_sse:
            fields["streaming"] = True
            return _stream(frames)  # type: ignore[arg-type]
        waiting(request.scope)
        final = await while_connected(request.receive, _last(frames))
        if final is None:  # cancelled by the caller: no JSON-RPC response is owed
            return Response(content=b"", status_code=202)
        return _json(final)
    assert outcome is not None  # dispatch returns None only for notifications
    if isinstance(outcome, Failure):
        fields["error_code"] = outcome.code
        return _json(_final_message(routed, outcome), outcome.http_status)
    return _json(_final_message(routed, outcome))


def _rejected(rejection: Rejection, fields: dict[str, Any]) -> Response[bytes]:
    fields["error_code"] = rejection.kind.value
    body = rejection.error_response()
    headers = dict(rejection.headers)
    if body is None:
        return Response(content=b"", status_code=rejection.http_status, headers=headers)
    return _json(body, rejection.http_status, headers)


def _failed(request_id: str, exc: Exception, fields: dict[str, Any]) -> Response[bytes]:
    """A failure outside a tool (spec section 2.4): still a JSON-RPC error, never a bare 500."""
    error = dependency_failure(exc) or PylotaError(ErrorCode.INTERNAL,
                                                   "The request failed unexpectedly.")
    kind = RejectionKind.UNAVAILABLE if error.code is ErrorCode.UNAVAILABLE \
        else RejectionKind.INTERNAL
    headers = (("retry-after", str(RETRY_AFTER_SECONDS)),) \
        if kind is RejectionKind.UNAVAILABLE else ()
    fields["exception"] = type(exc).__name__
    return _rejected(reject(kind, error.message, headers=headers,
                            data=msgspec.to_builtins(error.envelope(request_id))), fields)


def method_not_allowed(http_method: str) -> Response[bytes]:
    """405 with ``Allow: POST`` and its request line, for a method the route does not list
    (``PROPFIND``, ``CONNECT``): Litestar refuses those before the route runs, and its refusal
    was the REST API's (spec section 2.1 step 1: every other method is 405)."""
    request_id = new_id(Prefix.REQUEST)
    fields: dict[str, Any] = {"request_id": request_id,
                              "http_method": http_method[:LOGGED_METHOD_CHARS]}
    rejection = check_method(http_method)
    assert rejection is not None  # POST is always routed
    response = _rejected(rejection, fields)
    log.info("request", **fields, status=response.status_code, duration_ms=0.0)
    return response


def mcp_routes(prompts: Sequence[PromptSpec]) -> list[Any]:
    """The route handlers of the MCP surface, serving ``prompts``."""

    @route(MCP_PATH, http_method=_ALL_METHODS, include_in_schema=False)
    async def mcp_endpoint(request: Request[Any, Any, Any]) -> Response[Any]:
        """The one MCP endpoint (spec section 2.1): JSON, an SSE stream, or an empty 202."""
        res: Resources = request.app.state.resources
        request_id = new_id(Prefix.REQUEST)
        started = time.monotonic()
        fields: dict[str, Any] = {"request_id": request_id, "http_method": request.method}
        try:
            response = await _serve(request, res, prompts, request_id, fields)
        except ClientGone:
            fields["error_code"] = "client_closed"
            response = Response(content=b"", status_code=CLIENT_CLOSED_STATUS)
        except Exception as exc:  # noqa: BLE001 - rendered as a JSON-RPC error with its log line
            response = _failed(request_id, exc, fields)
        # A stream's line is written when it starts: its duration is the time to the first byte.
        log.info("request", **fields, status=response.status_code,
                 duration_ms=round((time.monotonic() - started) * 1000, 1))
        return response

    return [mcp_endpoint]
