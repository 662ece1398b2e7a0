"""``POST /mcp``: the request ladder of spec section 2.1, read top to bottom.

Each rung is an early return. The pure rungs live in :mod:`front.mcp.inbound`; authentication and
``RL_API`` need the database and Redis and run here, between parsing and era selection. Results
go out as JSON, or, for tools that run on a worker, as an SSE stream scoped to the request
(spec section 2.6, DESIGN.md section 2 "Streaming tools").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
from arq.jobs import Job
from litestar import Request, Response, route
from litestar.response import Stream
from redis.exceptions import RedisError

from front.mcp import protocol as p
from front.mcp.dispatch import Failure, Reply, StreamJob, dispatch, tool_error, tool_result
from front.mcp.inbound import (
    MAX_BODY_BYTES, Rejection, RejectionKind, Route, check_method, check_origin,
    check_size_and_type, parse_body, reject, select_era,
)
from shared.auth.keys import Principal, authenticate
from shared.errors import ErrorCode, PylotaError
from shared.events import INTERACTIVE_QUEUE, cancel_key
from shared.ids import Prefix, new_id
from shared.logs import get_logger

if TYPE_CHECKING:
    from front.app import Resources

__all__ = ["mcp_routes"]

log = get_logger("front.mcp")

#: Extra seconds past a streaming tool's own limit before the front gives up on its worker.
STREAM_MARGIN_SECONDS = 15.0
_ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]
_SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response[bytes]:
    return Response(content=p.encode(body), status_code=status, media_type="application/json",
                    headers=headers)


def _rejected(rejection: Rejection) -> Response[bytes]:
    body = rejection.error_response()
    headers = dict(rejection.headers)
    if body is None:
        return Response(content=b"", status_code=rejection.http_status, headers=headers)
    return _json(body, rejection.http_status, headers)


def _auth_rejection(error: PylotaError, request_id: str, body_id: Any) -> Rejection:
    envelope = msgspec.to_builtins(error.envelope(request_id))
    if error.code is ErrorCode.PARTNER_SUSPENDED:
        return Rejection(kind=RejectionKind.FORBIDDEN_ORIGIN, http_status=403, code=p.SERVER_ERROR,
                         message=error.message, data=envelope, id=body_id)
    if error.code is ErrorCode.UNAVAILABLE:
        return reject(RejectionKind.INTERNAL, error.message, data=envelope, id=body_id)
    return reject(RejectionKind.UNAUTHENTICATED, error.message, data=envelope, id=body_id,
                  headers=(("www-authenticate",
                            'Bearer realm="pylota-mail", error="invalid_token"'),))


async def _read_body(request: Request[Any, Any, Any]) -> bytes | None:
    """The body, or None when it grows past the limit (chunked bodies have no Content-Length)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _inflight_key(principal: Principal, request_id: Any) -> str:
    # Scoped by key: a caller can only ever name its own requests (spec section 2.3).
    return f"pylota:inflight:{principal.key_id}:{msgspec.json.encode(request_id).decode()}"


async def _cancel(res: Resources, job_id: str) -> None:
    await res.redis.set(cancel_key(job_id), b"1", ex=120)
    try:
        await Job(job_id, res.arq, _queue_name=INTERACTIVE_QUEUE).abort(timeout=0)
    except (asyncio.TimeoutError, RedisError):
        pass


async def _cancelled_notification(res: Resources, principal: Principal, route_: Route) -> None:
    """Legacy ``notifications/cancelled``: stop our streaming job if it is one of the caller's."""
    if route_.era != "legacy" or "requestId" not in route_.params:
        return
    job_id = await res.redis.get(_inflight_key(principal, route_.params["requestId"]))
    if job_id is not None:
        await _cancel(res, job_id.decode())


def _response(id_: Any, result: Any) -> p.JSONRPCResponse:
    return p.JSONRPCResponse(id=id_, result=result)


def _sse(message: Any) -> bytes:
    return b"event: message\ndata: " + p.encode(message) + b"\n\n"


async def _run_stream(res: Resources, principal: Principal, route_: Route, job: StreamJob,
                      request_id: str, sse: bool) -> AsyncIterator[bytes | Any]:
    """Enqueue ``job`` and yield SSE frames (``sse``) or, at the end, the one final response.

    Subscribes before enqueueing (no event lost); stops the job when the client goes away.
    """
    modern = route_.era == "modern"
    finished = False
    final: Any
    async with res.hub.listen(request_id) as queue:
        try:
            try:
                await res.redis.set(_inflight_key(principal, route_.id), request_id,
                                    ex=int(job.timeout_seconds + STREAM_MARGIN_SECONDS))
                queued = await res.arq.enqueue_job(job.function, request_id, job.payload,
                                                   _job_id=request_id,
                                                   _queue_name=INTERACTIVE_QUEUE)
            except RedisError:
                queued = None
            final = tool_error(PylotaError(ErrorCode.UNAVAILABLE, "The job queue is unavailable."),
                               request_id, modern)
            if queued is not None:
                async for frame in _frames(res, queue, route_, job, request_id, sse):
                    if isinstance(frame, p.CallToolResult):
                        final = frame
                        break
                    yield frame
            finished = True
            yield _sse(_response(route_.id, final)) if sse else _response(route_.id, final)
        finally:
            if not finished:
                with anyio.CancelScope(shield=True):
                    await _cancel(res, request_id)
                    log.info("tool_call", tool=job.tool, key_id=principal.key_id,
                             request_id=request_id, outcome="cancelled")


async def _frames(res: Resources, queue: asyncio.Queue, route_: Route, job: StreamJob,
                  request_id: str, sse: bool) -> AsyncIterator[bytes | p.CallToolResult]:
    """SSE frames (progress, keep-alive) for one job's events, ending with its CallToolResult."""
    modern = route_.era == "modern"
    heartbeat = res.settings.pm_stream_heartbeat_seconds
    deadline = time.monotonic() + job.timeout_seconds + STREAM_MARGIN_SECONDS
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            yield tool_error(PylotaError(
                ErrorCode.UNAVAILABLE, "No worker answered in time.",
                fix="Retry; if it keeps failing, check that a worker is running."),
                request_id, modern)
            return
        try:
            event = await asyncio.wait_for(queue.get(), timeout=min(heartbeat, remaining))
        except asyncio.TimeoutError:
            # A missed pub/sub event must not hang the stream: the worker stores its result.
            stored = await Job(request_id, res.arq, _queue_name=INTERACTIVE_QUEUE).result_info()
            if stored is not None and isinstance(stored.result, dict):
                yield tool_result(stored.result, modern)
                return
            if sse:
                yield b": keep-alive\n\n"
            continue
        if event.kind == "progress":
            if sse and route_.progress_token is not None:
                yield _sse(p.ProgressNotification(params=p.ProgressNotificationParams(
                    progress_token=route_.progress_token, progress=event.progress or 0.0,
                    total=event.total, message=event.message)))
        elif event.kind == "result" and event.result is not None:
            log.info("tool_call", tool=job.tool, request_id=request_id, outcome="ok")
            yield tool_result(event.result, modern)
            return
        else:
            yield tool_error(PylotaError(ErrorCode.INTERNAL, "The job failed."), request_id, modern)
            return


@route("/mcp", http_method=_ALL_METHODS, include_in_schema=False)
async def mcp_endpoint(request: Request[Any, Any, Any]) -> Response[Any]:
    """The one MCP endpoint (spec section 2.1). Returns JSON, an SSE stream, or an empty 202."""
    res: Resources = request.app.state.resources
    settings = res.settings
    request_id = new_id(Prefix.REQUEST)
    headers = request.headers

    if (rejection := check_method(request.method)) is not None:
        return _rejected(rejection)  # 405 + Allow: POST, or 204 for OPTIONS (step 1)
    if (rejection := check_origin(headers, settings.pm_api_host)) is not None:
        return _rejected(rejection)  # 403, error without id (step 2)
    declared = headers.get("content-length")
    length = int(declared) if declared and declared.isdigit() else None
    if (rejection := check_size_and_type(length, headers.get("content-type"),
                                         request_id=request_id)) is not None:
        return _rejected(rejection)  # 413 or 415 (step 3)
    raw = await _read_body(request)
    if raw is None:  # a chunked body past the limit
        return _rejected(check_size_and_type(MAX_BODY_BYTES + 1, "application/json",
                                             request_id=request_id))  # type: ignore[arg-type]
    body = parse_body(raw)
    if isinstance(body, Rejection):
        return _rejected(body)  # 400 -32700 / -32600 (step 4)
    body_id = body.get("id")
    started = time.monotonic()
    try:
        async with res.pool.acquire() as conn:
            principal = await authenticate(conn, headers.get("authorization"))
        await res.limits.charge("RL_API", principal.key_id)
    except PylotaError as exc:
        if exc.code is ErrorCode.RATE_LIMITED:  # step 6
            return _rejected(reject(
                RejectionKind.RATE_LIMITED, exc.message, id=body_id,
                data=msgspec.to_builtins(exc.envelope(request_id)),
                headers=(("retry-after", str(exc.details["retry_after"])),)))
        return _rejected(_auth_rejection(exc, request_id, body_id))  # step 5
    routed = select_era(body, headers)
    if isinstance(routed, Rejection):
        return _rejected(routed)  # era, mirrored headers, version (step 7)
    log_fields = {"method": routed.method, "era": routed.era, "key_id": principal.key_id,
                  "identity_id": principal.identity_id, "request_id": request_id}

    if routed.is_notification:
        if routed.method == "notifications/cancelled":
            await _cancelled_notification(res, principal, routed)
        log.info("request", **log_fields, status=202)
        return Response(content=b"", status_code=202)
    outcome = await dispatch(res, principal, routed, request_id)
    if isinstance(outcome, StreamJob):
        accepts_sse = "text/event-stream" in headers.get("accept", "")
        log.info("request", **log_fields, status=200, streaming=accepts_sse)
        frames = _run_stream(res, principal, routed, outcome, request_id, sse=accepts_sse)
        if accepts_sse:
            return Stream(frames, media_type="text/event-stream; charset=utf-8",
                          headers=_SSE_HEADERS)
        final = None
        async for final in frames:
            pass
        return _json(final)
    duration_ms = round((time.monotonic() - started) * 1000, 1)
    if isinstance(outcome, Failure):
        log.info("request", **log_fields, status=outcome.http_status, error_code=outcome.code,
                 duration_ms=duration_ms)
        error = p.ErrorObject(code=outcome.code, message=outcome.message,
                              data=msgspec.UNSET if outcome.data is None else outcome.data)
        return _json(p.JSONRPCError(id=routed.id, error=error), outcome.http_status)
    assert isinstance(outcome, Reply)
    log.info("request", **log_fields, status=200, duration_ms=duration_ms)
    return _json(_response(routed.id, outcome.result))


def mcp_routes() -> list[Any]:
    """The route handlers of the MCP surface."""
    return [mcp_endpoint]
