"""One Redis pub/sub connection per process, fanned out to per-subscriber inboxes.

A per-request ``PubSub`` holds a pool connection for its whole life and exhausted the pool in
STACK.md section 3's measurements; one pattern subscription read by one task avoids that. The
front uses it for job events (``pylota:job:*``), workers for new-mail events
(``pylota:newmail:*``). A subscriber registers its :class:`Listener` *before* doing what it
listens for, so no event is lost in between.

When the connection is lost, every listener gets :data:`LOST` at once (a stream can end cleanly
with a retryable error instead of hanging), and the reader reconnects with backoff; a listener
registered while disconnected gets :data:`LOST` immediately. Pub/sub is at-most-once: whoever
sees :data:`LOST` must assume it missed events.

A front holds one listener per open stream, thousands at once (issue 14), so a listener is a
list and one future while its reader waits — not an ``asyncio.Queue`` (three deques and an
event, about 3 KB empty) read through ``asyncio.wait_for`` (a task, a future and a timer per
read) — and waits that end in the same :data:`WAKE_GRID_SECONDS` share one loop timer (a timer
costs about 0.5 KB under uvloop).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable
from typing import Any, Final, Generic, TypeVar

from redis.asyncio import Redis

from shared.logs import get_logger

__all__ = ["Subscriptions", "Listener", "LOST", "Lost"]

log = get_logger("shared.pubsub")

T = TypeVar("T")

#: Seconds between reconnection attempts, doubling up to the last.
RECONNECT_DELAYS: Final = (0.2, 0.5, 1.0, 2.0)
#: Waits of listeners end on a grid of this many seconds (never early), so those ending
#: together share one loop timer; it is the most a wait may run late.
WAKE_GRID_SECONDS: Final = 0.05
#: Longest :meth:`Subscriptions.start` waits for the first subscription; a process starts even
#: while Redis is down, and serves streams once it is back.
START_SECONDS: Final = 2.0


class Lost:
    """The marker put into every listener when the connection drops."""

    def __repr__(self) -> str:
        return "LOST"


LOST: Final = Lost()


def _wake(waiter: asyncio.Future[Any]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Listener(Generic[T]):
    """One subscriber's inbox: what is put into it, in order, for one reading task
    (``event = await listener.get(within)``).

    Use it as a context manager (``with feed.listen(channel) as events``): it is registered on
    its channel for the block. Others may put markers into it too (``front.watch`` puts
    ``WORKER_GONE``).
    """

    __slots__ = ("_items", "_waiter", "_feed", "_channel")

    def __init__(self, feed: Subscriptions[T], channel: str) -> None:
        self._items: list[Any] = []
        self._waiter: asyncio.Future[Any] | None = None
        self._feed = feed
        self._channel = channel

    def put(self, item: Any) -> None:
        """Hand ``item`` to the waiting reader, or keep it for the next :meth:`get`. Never
        blocks."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(item)
            self._waiter = None
        else:
            self._items.append(item)

    def get(self, within: float | None = None) -> asyncio.Future[Any]:
        """A future of the oldest item, waiting at most ``within`` seconds (forever when None)
        for one to come; its result is None when none came in time. One reader at a time; an
        item handed to a reader that is cancelled meanwhile goes with it.

        A future rather than a coroutine: a coroutine's frame would be one more object per
        waiting stream."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Any] = loop.create_future()
        if self._items:
            waiter.set_result(self._items.pop(0))
        else:
            self._waiter = waiter
            if within is not None:
                self._feed._wake_at(loop.time() + max(0.0, within), waiter)
        return waiter

    def __enter__(self) -> Listener[T]:
        self._feed._add(self._channel, self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._feed._remove(self._channel, self)


class Subscriptions(Generic[T]):
    """Routes messages of channels matching ``pattern`` to the listeners on them.

    Args:
        redis: the process's client (one connection of its pool is held by the reader).
        pattern: a ``PSUBSCRIBE`` pattern such as ``pylota:job:*``.
        decode: turns a message body into a ``T``; a body it refuses (raises) is dropped.
    """

    def __init__(self, redis: Redis, pattern: str, decode: Callable[[bytes], T]) -> None:
        self._redis = redis
        self._pattern = pattern
        self._decode = decode
        self._listeners: dict[str, list[Listener[T]]] = {}
        self._alarms: dict[int, list[asyncio.Future[Any]]] = {}  # grid slot -> its waiters
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
        for listeners in self._listeners.values():
            for listener in listeners:
                listener.put(LOST)

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
                    listeners = self._listeners.get(
                        channel.decode() if isinstance(channel, bytes) else channel)
                    if not listeners:
                        continue
                    try:
                        event = self._decode(raw["data"])
                    except Exception:  # noqa: BLE001 - a malformed event must not stop the reader
                        log.warning("pubsub_bad_event", pattern=self._pattern)
                        continue
                    for listener in listeners:
                        listener.put(event)
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

    def listen(self, channel: str) -> Listener[T]:
        """A :class:`Listener` receiving ``channel``'s messages (and :data:`LOST`) while it is
        entered (``with``)."""
        return Listener(self, channel)

    def _add(self, channel: str, listener: Listener[T]) -> None:
        self._listeners.setdefault(channel, []).append(listener)
        if not self.connected:
            listener.put(LOST)

    def _wake_at(self, when: float, waiter: asyncio.Future[Any]) -> None:
        """Wake ``waiter`` at loop time ``when``, rounded up to the grid."""
        slot = math.ceil(when / WAKE_GRID_SECONDS)
        waiters = self._alarms.get(slot)
        if waiters is None:
            waiters = self._alarms[slot] = []
            asyncio.get_running_loop().call_at(slot * WAKE_GRID_SECONDS, self._ring, slot)
        waiters.append(waiter)

    def _ring(self, slot: int) -> None:
        for waiter in self._alarms.pop(slot, ()):
            _wake(waiter)

    def _remove(self, channel: str, listener: Listener[T]) -> None:
        listeners = self._listeners.get(channel)
        if listeners is not None and listener in listeners:
            listeners.remove(listener)
            if not listeners:
                del self._listeners[channel]
