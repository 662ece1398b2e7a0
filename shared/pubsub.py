"""One Redis pub/sub connection per process, fanned out to per-subscriber queues.

A per-request ``PubSub`` holds a pool connection for its whole life and exhausted the pool in
STACK.md section 3's measurements; one pattern subscription read by one task avoids that. The
front uses it for job events (``pylota:job:*``), workers for new-mail events
(``pylota:newmail:*``). A subscriber registers its queue *before* doing what it listens for, so
no event is lost in between.

When the connection is lost, every queue gets :data:`LOST` at once (a stream can end cleanly with
a retryable error instead of hanging), and the reader reconnects with backoff; a queue registered
while disconnected gets :data:`LOST` immediately. Pub/sub is at-most-once: whoever sees
:data:`LOST` must assume it missed events.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Final, Generic, TypeVar

from redis.asyncio import Redis

from shared.logs import get_logger

__all__ = ["Subscriptions", "LOST", "Lost"]

log = get_logger("shared.pubsub")

T = TypeVar("T")

#: Seconds between reconnection attempts, doubling up to the last.
RECONNECT_DELAYS: Final = (0.2, 0.5, 1.0, 2.0)
#: Longest :meth:`Subscriptions.start` waits for the first subscription; a process starts even
#: while Redis is down, and serves streams once it is back.
START_SECONDS: Final = 2.0


class Lost:
    """The marker put into every queue when the connection drops."""

    def __repr__(self) -> str:
        return "LOST"


LOST: Final = Lost()


class Subscriptions(Generic[T]):
    """Routes messages of channels matching ``pattern`` to the queues listening on them.

    Args:
        redis: the process's client (one connection of its pool is held by the reader).
        pattern: a ``PSUBSCRIBE`` pattern such as ``pylota:job:*``.
        decode: turns a message body into a ``T``; a body it refuses (raises) is dropped.
    """

    def __init__(self, redis: Redis, pattern: str, decode: Callable[[bytes], T]) -> None:
        self._redis = redis
        self._pattern = pattern
        self._decode = decode
        self._queues: dict[str, set[asyncio.Queue[T | Lost]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()

    @property
    def connected(self) -> bool:
        """Whether the pattern subscription is live now."""
        return self._connected.is_set()

    async def start(self) -> None:
        """Start the reader; returns once subscribed, or after :data:`START_SECONDS`."""
        self._task = asyncio.create_task(self._read(), name=f"pubsub:{self._pattern}")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._connected.wait(), START_SECONDS)

    async def stop(self) -> None:
        """Stop the reader."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _lose_all(self) -> None:
        self._connected.clear()
        for queues in self._queues.values():
            for queue in queues:
                queue.put_nowait(LOST)

    async def _read(self) -> None:
        failures = 0
        while True:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.psubscribe(self._pattern)
                self._connected.set()
                failures = 0
                async for raw in pubsub.listen():
                    if raw.get("type") != "pmessage":
                        continue
                    channel = raw["channel"]
                    queues = self._queues.get(
                        channel.decode() if isinstance(channel, bytes) else channel)
                    if not queues:
                        continue
                    try:
                        event = self._decode(raw["data"])
                    except Exception:  # noqa: BLE001 - a malformed event must not stop the reader
                        log.warning("pubsub_bad_event", pattern=self._pattern)
                        continue
                    for queue in queues:
                        queue.put_nowait(event)
                raise ConnectionError("pub/sub stream ended")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure of the connection: reconnect
                if self._connected.is_set() or failures == 0:
                    log.warning("pubsub_lost", pattern=self._pattern, error=type(exc).__name__)
                self._lose_all()
                await asyncio.sleep(RECONNECT_DELAYS[min(failures, len(RECONNECT_DELAYS) - 1)])
                failures += 1
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()

    @contextlib.asynccontextmanager
    async def listen(self, channel: str) -> AsyncIterator[asyncio.Queue[T | Lost]]:
        """A queue receiving ``channel``'s messages (and :data:`LOST`) for the block."""
        queue: asyncio.Queue[T | Lost] = asyncio.Queue()
        self._queues.setdefault(channel, set()).add(queue)
        if not self.connected:
            queue.put_nowait(LOST)
        try:
            yield queue
        finally:
            listeners = self._queues.get(channel)
            if listeners is not None:
                listeners.discard(queue)
                if not listeners:
                    del self._queues[channel]
