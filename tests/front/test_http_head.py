"""Each request head is bounded in size and time (front.http_head), on a real uvicorn as
``pylota serve`` runs it: a 20 MB header field was held in memory until its client let go, and
connections that sent half a head, or nothing, stayed open for good (found by an attack)."""

from __future__ import annotations

import asyncio
import contextlib
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


async def test_trailers_and_a_head_in_one_read_count_with_the_head(front):
    """A second attack: 40 MB of trailer fields after a chunked body went in with no key (25
    times their size in memory), and a 110 KB head sent in one write was served. Trailers past
    the bound close the connection (their request is already being served); a head that large
    is 431."""
    host, port = front.split(":")
    trailers = b"".join(b"t%d: x\r\n" % n for n in range(20_000))  # about 200 KB
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"POST /mcp HTTP/1.1\r\nHost: " + front.encode() + b"\r\nContent-Type: "
                 b"application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n0\r\n"
                 + trailers)
    with contextlib.suppress(ConnectionError):
        await writer.drain()
    async with asyncio.timeout(5):
        try:
            got = await reader.read()
        except ConnectionError:
            got = b""
    assert got == b"", got[:200]  # closed, nothing served
    writer.close()

    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(request(front, extra=b"X-Pad: " + b"p" * 110_000 + b"\r\n"))
    await writer.drain()
    async with asyncio.timeout(5):
        got = await reader.read()
    assert got.startswith(b"HTTP/1.1 431 "), got[:200]
    writer.close()


async def test_late_body_bytes_are_no_new_head(front):
    """The body of a REST request answered 401 before it was read is no head of a next
    request: a stray 431 followed the 401 (found by an attack)."""
    host, port = front.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    body = b'{"q":"' + b"y" * 2_000_000 + b'"}'
    head = (b"POST /v1/identities/idn_01J9Z3AAAAAAAAAAAAAAAAAAAA/search HTTP/1.1\r\nHost: "
            + front.encode() + b"\r\nAuthorization: Bearer pmk_live_nothing\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
    writer.write(head + body[:1000])
    await writer.drain()
    first = await answer(reader)
    assert first.split(b" ", 2)[1] == b"401"
    writer.write(body[1000:])
    await writer.drain()
    await asyncio.sleep(0.3)
    writer.write(request(front))
    await writer.drain()
    async with asyncio.timeout(5):
        rest = await reader.read(65_536)
    assert b" 431 " not in rest, rest[:300]
    writer.close()
