"""SSE responses whose body is sent by the request's own task (spec section 2.6; issue 14).

Litestar's ``Stream`` sends its body from a second task of an anyio task group while the first
waits for the client's ``http.disconnect``: per open stream a task group, three cancel scopes
and a task handle with its event, about 6 KB of the front's memory (tracemalloc, 150 to 300
open ``mail_wait`` streams). A front holds thousands of streams, so :class:`EventStream` is a
``Stream`` whose body is sent by the request's task itself, with one plain task waiting for the
disconnect. When the client goes away, that task cancels the body's scope, so the iterator is
cancelled where it waits and its ``finally`` runs (the job is stopped) as with ``Stream``. The
scope is the standard library's ``asyncio.timeout(None)``, moved to now: its cancellation is
delivered once, so cleanup that awaits is not cut short, and it costs a few hundred bytes less
per open stream than an anyio ``CancelScope`` (issue 14).

Used by ``front.mcp.transport`` and ``front.rest.routes``; no I/O of its own beyond ASGI.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable
from typing import Any

from litestar.response import Stream
from litestar.response.base import ASGIResponse
from litestar.types import Empty, Receive, Scope, Send
from litestar.utils.scope.state import ScopeState

from front.body import disconnected

__all__ = ["EventStream"]


class EventStream(Stream):
    """A :class:`~litestar.response.Stream` of ``bytes`` frames sent without a task group (a head
request gets the head alone, as with ``Stream``)."""

    def to_asgi_response(self, *args: Any, **kwargs: Any) -> Any:
        """Litestar's streaming response (status, headers, cookies, background), with the body
        sent by :class:`_Relayed`."""
        return _Relayed(super().to_asgi_response(*args, **kwargs))


class _Relayed:
    """The ASGI app of one :class:`EventStream`: ``ASGIResponse.__call__`` (head, body, then the
    background task) with its body sent by this task."""

    __slots__ = ("_response", "_scope")

    def __init__(self, response: ASGIResponse) -> None:
        self._response: ASGIResponse | None = response
        self._scope: asyncio.Timeout | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # What the stream no longer needs once its head is sent is let go, since it may live for
        # minutes: the request's headers, decoded and cached in the scope by Litestar when the
        # handler read them (about 1.7 KB; Litestar decodes them anew from the raw scope if
        # anything asks later), and the response's own headers and cookies.
        ScopeState.from_scope(scope).headers = Empty
        response, self._response = self._response, None
        assert response is not None, "an EventStream is sent once"
        await response.start_response(send=send)
        frames: AsyncIterable[bytes] = response.iterator  # type: ignore[attr-defined]
        background, head = response.background, response.is_head_response
        del response
        if head:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            listening = asyncio.create_task(disconnected(receive))
            listening.add_done_callback(self._on_disconnect)
            try:
                async with asyncio.timeout(None) as self._scope:
                    async for frame in frames:
                        await send({"type": "http.response.body", "body": frame,
                                    "more_body": True})
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
            except TimeoutError:
                pass  # the client went away: nobody is left to send to
            finally:
                self._scope = None
                listening.remove_done_callback(self._on_disconnect)
                listening.cancel()
        if background is not None:
            await background()

    def _on_disconnect(self, listening: asyncio.Task[None]) -> None:
        if not listening.cancelled():
            listening.exception()  # a failed receive also means the client cannot be served
            if self._scope is not None:
                self._scope.reschedule(-1.0)  # expire at once: cancels the body where it waits
