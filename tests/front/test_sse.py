"""SSE responses sent by the request's own task (front.sse), on a real uvicorn with a raw client.

The body iterators here stand for the job relay: frames, a wait, and a ``finally`` whose cleanup
runs in a task of its own, shielded from the caller's cancellation (as ``front.relay`` stops a
job there).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from litestar import Litestar, Request, get

from front.sse import EventStream
from tests.conftest import free_port

#: How long each test's cleanup takes, under its shield.
CLEANUP_SECONDS = 0.3


class Probe:
    """What the server side of one test saw."""

    def __init__(self) -> None:
        self.cleaned = asyncio.Event()
        self.cleanup_began = asyncio.Event()
        self.cancelled = False
        self.cleanup: asyncio.Task[None] | None = None
        self.headers_read: list[str] = []


def app_for(probe: Probe) -> Litestar:
    async def frames(then_wait: bool) -> AsyncIterator[bytes]:
        try:
            yield b"data: 1\n\n"
            yield b"data: 2\n\n"
            if then_wait:
                await asyncio.sleep(60)
        except asyncio.CancelledError:
            probe.cancelled = True
            raise
        finally:
            probe.cleanup = asyncio.create_task(cleanup())
            await asyncio.shield(probe.cleanup)

    async def cleanup() -> None:
        probe.cleanup_began.set()
        await asyncio.sleep(CLEANUP_SECONDS)
        probe.cleaned.set()

    @get("/waits")
    async def waits(request: Request[Any, Any, Any]) -> EventStream:
        probe.headers_read.append(request.headers["x-probe"])
        return EventStream(frames(then_wait=True), media_type="text/event-stream",
                           headers={"Cache-Control": "no-store"})

    @get("/ends")
    async def ends() -> EventStream:
        return EventStream(frames(then_wait=False), media_type="text/event-stream")

    return Litestar([waits, ends])


@contextlib.asynccontextmanager
async def serving(app: Litestar) -> AsyncIterator[int]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(15):
        while not server.started:
            await asyncio.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        async with asyncio.timeout(15):
            await task


async def opened(port: int, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: t\r\nX-Probe: here\r\n\r\n".encode())
    return reader, writer


async def test_frames_go_out_in_order_with_the_head_then_the_end():
    probe = Probe()
    async with serving(app_for(probe)) as port:
        reader, writer = await opened(port, "/ends")
        async with asyncio.timeout(10):
            answer = await reader.read(-1)  # chunked: ends with the terminal chunk
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"content-type: text/event-stream" in head.lower()
    assert body.index(b"data: 1") < body.index(b"data: 2")
    assert body.endswith(b"0\r\n\r\n")
    assert probe.cleaned.is_set() and not probe.cancelled


async def test_a_client_going_away_cancels_the_body_where_it_waits_and_its_cleanup_runs():
    probe = Probe()
    async with serving(app_for(probe)) as port:
        reader, writer = await opened(port, "/waits")
        async with asyncio.timeout(10):
            while b"data: 2" not in await reader.read(4096):
                pass
        writer.close()
        async with asyncio.timeout(10):
            await probe.cleaned.wait()
    assert probe.cancelled
    assert probe.headers_read == ["here"]


async def test_a_client_going_away_during_the_cleanup_does_not_cut_it_short():
    probe = Probe()
    async with serving(app_for(probe)) as port:
        reader, writer = await opened(port, "/ends")
        async with asyncio.timeout(10):
            while b"data: 2" not in await reader.read(4096):
                pass
            await probe.cleanup_began.wait()
        writer.close()  # while the body's cleanup runs
        async with asyncio.timeout(10):
            await probe.cleaned.wait()
    assert not probe.cancelled
