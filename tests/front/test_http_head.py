"""Each request head is bounded in size and time (front.http_head), on a real uvicorn as
``pylota serve`` runs it: a 20 MB header field was held in memory until its client let go, and
connections that sent half a head, or nothing, stayed open for good (found by an attack)."""

from __future__ import annotations

import asyncio
import time

import pytest

from front import http_head
from tests.conftest import running_front, settings_for

PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


def request(host: str, *, extra: bytes = b"", body: bytes = PING) -> bytes:
    return (b"POST /mcp HTTP/1.1\r\nHost: " + host.encode() + b"\r\n"
            b"Content-Type: application/json\r\nMCP-Protocol-Version: 2025-11-25\r\n" + extra
            + b"Content-Length: %d\r\n\r\n" % len(body) + body)


async def answer(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    return head + await reader.readexactly(length)


@pytest.fixture
async def front(db_url, monkeypatch):
    monkeypatch.setattr(http_head, "HEAD_SECONDS", 0.5)
    async with running_front(settings_for(db_url)) as url:
        yield url.removeprefix("http://").removesuffix("/mcp")


async def test_a_head_past_the_limit_is_431_and_closed(front):
    host, port = front.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"POST /mcp HTTP/1.1\r\nHost: " + front.encode() + b"\r\nX-Big: ")
    writer.write(b"a" * 200_000)  # one header field, never ended
    await writer.drain()
    async with asyncio.timeout(5):
        got = await reader.read()
    assert got.startswith(b"HTTP/1.1 431 "), got[:200]
    assert got.endswith(b"The request's head exceeds 65,536 bytes.")
    writer.close()


async def test_a_head_not_ended_in_time_or_never_begun_is_closed(front):
    host, port = front.split(":")
    opened = time.monotonic()
    silent = await asyncio.open_connection(host, int(port))
    partial = await asyncio.open_connection(host, int(port))
    partial[1].write(b"POST /mcp HTTP/1.1\r\nHost: " + front.encode() + b"\r\n")
    for reader, writer in (silent, partial):
        async with asyncio.timeout(5):
            assert await reader.read() == b""  # closed, nothing answered
        writer.close()
    assert time.monotonic() - opened >= 0.5


async def test_requests_within_the_bounds_are_served_and_kept_alive(front):
    """A request with headers of 60 KB and a 2 MB body, then a second request on the same
    connection after a pause longer than HEAD_SECONDS (the wait between requests is the
    keep-alive's, not the head's), both answered."""
    host, port = front.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    padded = request(front, extra=b"X-Pad: " + b"p" * 60_000 + b"\r\n",
                     body=PING[:-1] + b"," + b'"_x":"' + b"y" * 2_000_000 + b'"}')
    writer.write(padded)
    first = await answer(reader)
    assert first.split(b" ", 2)[1] == b"401"  # read in full, answered (no key was sent)
    await asyncio.sleep(0.8)
    writer.write(request(front))
    second = await answer(reader)
    assert second.split(b" ", 2)[1] == b"401"
    writer.close()
