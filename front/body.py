"""A request's body and its client, for both surfaces: the body bounded in size and in time, and
a client that goes away told apart from a failure of ours (issue 9).

Litestar's own ``Request.stream`` raises its ``InternalServerException`` when the client goes
away mid-body, which rendered and logged as our 500; :func:`read_body` reads the ASGI messages
itself and raises :class:`ClientGone` instead, which the endpoints log with
:data:`CLIENT_CLOSED_STATUS`. :func:`while_connected` does the same for a call answered as JSON
once the body is read, and :func:`disconnected` is what both it and an SSE stream wait on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from litestar import Request
from litestar.types import Receive

from front.shedding import slow_body

__all__ = ["read_body", "while_connected", "disconnected", "BodyTooLarge", "ClientGone",
           "BODY_READ_SECONDS", "CLIENT_CLOSED_STATUS"]

T = TypeVar("T")

#: Seconds the whole body may take to arrive (a client trickling it would otherwise hold a
#: place under the in-flight ceiling for as long as it liked).
BODY_READ_SECONDS = 30.0

#: The status logged for a client that closed its connection before its body was read
#: (nginx's "client closed request"); nothing is sent, since nobody is there to read it.
CLIENT_CLOSED_STATUS = 499


class BodyTooLarge(Exception):
    """The body grew past its limit (a chunked body declares no Content-Length)."""


class ClientGone(Exception):
    """The client closed the connection before its body was read."""


async def read_body(request: Request[Any, Any, Any], limit: int) -> bytes:
    """The request's body, at most ``limit`` bytes.

    Raises:
        BodyTooLarge: past ``limit`` bytes (the rest is not read).
        ClientGone: the client disconnected before the last chunk.
        TimeoutError: the body took longer than :data:`BODY_READ_SECONDS`.
    """
    chunks: list[bytes] = []
    size = 0
    with slow_body(request.scope):
        async with asyncio.timeout(BODY_READ_SECONDS):
            while True:
                message = await request.receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise BodyTooLarge
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)


async def while_connected(receive: Receive, work: Coroutine[Any, Any, T]) -> T:
    """``work``'s result, once the request's body has been read; when the client disconnects
    first, ``work`` is cancelled (and awaited, so its cleanup, such as stopping a worker's job,
    runs) and :class:`ClientGone` raised. A JSON answer has no stream to notice the client's
    going, so without this a wait ran out its seconds for nobody (issue 9).
    """
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(disconnected(receive))
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        raise ClientGone
    return task.result()


async def disconnected(receive: Receive) -> None:
    """Return once the client has disconnected (a message of the body left unread is skipped)."""
    while (await receive())["type"] != "http.disconnect":
        pass
