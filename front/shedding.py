"""Load shedding: past a ceiling of requests in progress, answer 503 at once (issue 9).

A front that accepts every request queues them on its pool and its two cores without bound:
under a burst, every caller waits longer and longer, and nothing else is served. The ASGI
middleware :class:`Shedding` counts the requests this process is **working on** — from arrival
until their response starts, except while a body is slow to arrive; a stream that has
started answering (an SSE relay), or a request waiting for a worker's job to answer it as JSON
(:func:`waiting`), no longer counts — and, past ``pm_max_in_flight``, answers 503 with
``Retry-After`` straight away, without reading the body: a JSON-RPC error (-32603, ``data`` the
``unavailable`` envelope, ``id: null``) on ``/mcp``, the REST error envelope elsewhere (spec
section 2.4; DESIGN.md section 5.5). Each refusal writes its ``request`` log line. Once its key
is known, a request counts against that key's share too (:func:`claim`): one key's burst can
take at most ``pm_max_in_flight_per_key`` of the ceiling, and is told 429 past it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import msgspec
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from shared.errors import ErrorCode, PylotaError
from shared.ids import Prefix, new_id
from shared.logs import get_logger

__all__ = ["Shedding", "claim", "waiting", "slow_body", "RETRY_AFTER_SECONDS", "SLOW_BODY_SECONDS"]

log = get_logger("front.shedding")

#: ``Retry-After`` of a shed request: one second is about how long a burst takes to drain.
RETRY_AFTER_SECONDS = 1
#: Where a request's scope holds its :class:`_Slot`.
_SLOT = "pylota.shedding.slot"
#: Seconds a request may wait for more of its body before it stops counting until it arrives.
SLOW_BODY_SECONDS = 0.5
#: A request's states: counted, waiting past SLOW_BODY_SECONDS for its body (not counted),
#: released.
_COUNTED, _READING, _DONE = 0, 1, 2


def _refusal(path: str, request_id: str) -> bytes:
    error = PylotaError(ErrorCode.UNAVAILABLE, "The server is at capacity.",
                        fix="Retry after the Retry-After seconds.")
    envelope = msgspec.to_builtins(error.envelope(request_id))
    if path == "/mcp":
        return msgspec.json.encode({"jsonrpc": "2.0", "id": None, "error": {
            "code": -32603, "message": error.message, "data": envelope}})
    return msgspec.json.encode(envelope)


class Shedding:
    """ASGI middleware refusing work past ``ceiling`` requests in progress, of which one API key
    may hold ``per_key`` (:func:`claim`)."""

    def __init__(self, app: ASGIApp, ceiling: int, per_key: int) -> None:
        self.app = app
        self.ceiling = ceiling
        self.per_key = per_key
        self.working = 0
        self.by_key: dict[str, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.working >= self.ceiling:
            request_id = new_id(Prefix.REQUEST)
            body = _refusal(scope["path"], request_id)
            await send({"type": "http.response.start", "status": 503, "headers": [
                (b"content-type", b"application/json"),
                (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
                (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            log.info("request", request_id=request_id, http_method=scope.get("method"),
                     path=scope["path"], status=503, error_code="shed")
            return
        slot = _Slot(self)

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                slot.release()
            await send(message)

        scope[_SLOT] = slot  # type: ignore[literal-required]
        try:
            await self.app(scope, receive, sending)
        finally:
            slot.release()


class _Slot:
    """One request's place under the ceiling: counted, paused while its body is slow to arrive
    (:func:`slow_body`), or released. A small object rather than closures, since an open stream
    holds it for as long as it lives (issue 14's memory per stream)."""

    __slots__ = ("_shedding", "_state", "_key")

    def __init__(self, shedding: Shedding) -> None:
        self._shedding = shedding
        self._state = _COUNTED
        self._key: str | None = None
        shedding.working += 1

    def claim(self, key_id: str) -> bool:
        """Count this request against ``key_id`` too; False when the key holds its share."""
        if self._state == _DONE or self._key is not None:
            return True
        by_key = self._shedding.by_key
        if by_key.get(key_id, 0) >= self._shedding.per_key:
            return False
        by_key[key_id] = by_key.get(key_id, 0) + 1
        self._key = key_id
        return True

    def release(self) -> None:
        if self._state == _COUNTED:
            self._shedding.working -= 1
        self._state = _DONE
        if self._key is not None:
            by_key = self._shedding.by_key
            if by_key[self._key] <= 1:
                del by_key[self._key]
            else:
                by_key[self._key] -= 1
            self._key = None

    def pause(self) -> None:
        if self._state == _COUNTED:
            self._state = _READING
            self._shedding.working -= 1

    def resume(self) -> None:
        if self._state == _READING:
            self._state = _COUNTED
            self._shedding.working += 1


@contextlib.contextmanager
def slow_body(scope: Scope) -> Iterator[None]:
    """Around the reading of a request's body: past :data:`SLOW_BODY_SECONDS` the request stops
    counting until its body has arrived. A client sending its body slowly costs the front
    nothing while it waits; counted, a hundred such clients with no key shed every other request
    for the 30 s each may take (found by an attack). A burst's bodies arrive within that."""
    slot = scope.get(_SLOT)
    if slot is None:
        yield
        return
    slow = asyncio.get_running_loop().call_later(SLOW_BODY_SECONDS, slot.pause)
    try:
        yield
    finally:
        slow.cancel()
        slot.resume()


def claim(scope: Scope, key_id: str) -> None:
    """Count the request against API key ``key_id`` until it stops counting at all: one key
    may hold ``pm_max_in_flight_per_key`` of the front's requests in progress. A key's burst
    within its rate limits took the whole ceiling, and other tenants' requests got 503 (found
    by an attack); now its own requests past its share get 429.

    Raises:
        PylotaError: ``rate_limited`` (``details.limit``, ``details.retry_after``) past the
            key's share.
    """
    slot = scope.get(_SLOT)
    if slot is not None and not slot.claim(key_id):
        limit = slot._shedding.per_key
        raise PylotaError(
            ErrorCode.RATE_LIMITED,
            f"This key already has {limit} requests in progress on this server.",
            fix=f"Send at most {limit} requests at once; retry after the Retry-After seconds.",
            details={"limit": limit, "retry_after": RETRY_AFTER_SECONDS})


def waiting(scope: Scope) -> None:
    """Stop counting this request as work in progress: it now waits for a worker's job (a long
    poll, or a job answered as JSON), which costs the front next to nothing for up to a minute.
    Counted, 100 such waits would have shed every other request until they ended."""
    slot = scope.get(_SLOT)
    if slot is not None:
        slot.release()
