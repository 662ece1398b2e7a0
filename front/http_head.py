"""uvicorn's HTTP/1.1 protocol with a bound on each request's head: its size and how long it takes.

uvicorn's httptools protocol keeps every header byte a client sends until the head ends, and
waits for it for ever: five connections each sending a 20 MB header field raised the front by
100 MB, held until the client let go, and hundreds of connections that sent half a head, or
nothing, stayed open indefinitely; a complete request with a 40 MB header was served, past the
7 MiB body limit (found by an attack). The front is meant to face clients directly (compose
publishes it), so it bounds what a reverse proxy would:

- a head (request line and header fields) of more than :data:`MAX_HEAD_BYTES` is answered 431
  (RFC 6585 section 5) and the connection closed (after :data:`LINGER_SECONDS` in which what
  the client still sends is dropped unread);
- a head not complete within :data:`HEAD_SECONDS` of the connection opening, or of its first
  byte after an earlier request, ends the connection (nothing is answered: no request was read);
- the trailer fields of a chunked body count with their request's head (past the bound the
  connection is closed: the request is already being served, so there is no room for a 431).

Idle keep-alive connections between requests are closed by uvicorn itself (``timeout_keep_alive``,
5 s). Bodies have their own bounds (``front.body``).
"""

from __future__ import annotations

import asyncio
from typing import Final

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["BoundedHead", "MAX_HEAD_BYTES", "HEAD_SECONDS"]

#: Largest request head read, in bytes: a bearer key and every header a client sends fit many
#: times over.
MAX_HEAD_BYTES: Final = 64 * 1024
#: Longest wait for a request's head to be complete, in seconds.
HEAD_SECONDS: Final = 10.0
#: Seconds a refused connection stays open, its input dropped, so that the 431 reaches the client.
LINGER_SECONDS: Final = 1.0

_TOO_LARGE_TEXT: Final = f"The request's head exceeds {MAX_HEAD_BYTES:,} bytes.".encode()
_TOO_LARGE: Final = (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                     b"content-type: text/plain; charset=utf-8\r\n"
                     b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                     % (len(_TOO_LARGE_TEXT), _TOO_LARGE_TEXT))


class _HeadTooLarge(Exception):
    """Raised from a parser callback to stop reading a head past :data:`MAX_HEAD_BYTES`."""


class BoundedHead(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` with the module's two bounds on each request head.

    Two counts, each from a request's first byte: the bytes read while its head is incomplete
    (a single endless field grows inside the parser, which hands it over only when it ends),
    and the bytes the parser hands over (the request target and each field, and the trailer
    fields of a chunked body, which uvicorn keeps with the headers; this one also sees a head
    that came whole in one large read, and a pipelined request behind one still answering).
    A second attack found the gaps of the first alone: 40 MB of trailers went in with no key,
    at 25 times their size in memory.
    """

    _in_head = True
    _read_bytes = 0  # read while the current request's head is incomplete
    _head_bytes = 0  # handed over by the parser for the current request, trailers included
    _head_timer: asyncio.TimerHandle | None = None
    _too_large = False
    _refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # dropped unread until the linger ends
        super().data_received(data)
        if self._in_head and not self._refused and not self.transport.is_closing():
            self._read_bytes += len(data)
            if self._read_bytes > MAX_HEAD_BYTES:
                self._refuse()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._start_head()

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._stop_timer()
        super().on_headers_complete()

    def send_400_response(self, msg: str) -> None:
        # uvicorn answers any error raised in a parser callback with a 400: ours is a 431.
        if self._too_large:
            self._refuse()
        else:
            super().send_400_response(msg)

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > MAX_HEAD_BYTES:
            self._too_large = True
            raise _HeadTooLarge

    def _refuse(self) -> None:
        self._refused = True
        self._stop_timer()
        if not self._in_head or (self.cycle is not None and not self.cycle.response_complete):
            # Trailers of a request already being served, or a request behind one still being
            # answered: no room for an answer of our own.
            self.transport.close()
            return
        # Closing at once with the client's bytes unread would reset the connection and lose
        # the answer: send it, end our side, and drop what still comes for a moment.
        self.transport.write(_TOO_LARGE)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def _start_head(self) -> None:
        self._in_head, self._read_bytes, self._head_bytes = True, 0, 0
        self._stop_timer()
        self._head_timer = self.loop.call_later(HEAD_SECONDS, self._head_too_slow)

    def _stop_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self._in_head:
            self.transport.close()
