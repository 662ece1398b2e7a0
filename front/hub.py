"""One pub/sub connection per front process, fanned out to per-request queues.

A per-request PubSub holds a pool connection for the whole stream and exhausted the pool in
STACK.md section 3's measurements; one pattern subscription to every job channel, read by one task,
avoids that. A request registers its queue *before* its job is enqueued, so no event is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import msgspec
from redis.asyncio import Redis

from shared.events import JobEvent, job_channel
from shared.logs import get_logger

__all__ = ["Hub"]

log = get_logger("front.hub")


class Hub:
    """Routes job events from Redis to the requests waiting on them."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._queues: dict[str, asyncio.Queue[JobEvent]] = {}
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def start(self) -> None:
        """Subscribe and start the reader task; returns once subscribed."""
        self._task = asyncio.create_task(self._read(), name="pubsub-hub")
        await self._ready.wait()

    async def stop(self) -> None:
        """Stop the reader task."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _read(self) -> None:
        while True:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.psubscribe(job_channel("*"))
                self._ready.set()
                async for raw in pubsub.listen():
                    if raw.get("type") != "pmessage":
                        continue
                    channel = raw["channel"].decode() if isinstance(raw["channel"], bytes) \
                        else raw["channel"]
                    queue = self._queues.get(channel)
                    if queue is not None:
                        queue.put_nowait(msgspec.json.decode(raw["data"], type=JobEvent))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a lost Redis connection: reconnect, streams fall back
                log.warning("pubsub_reconnect", error=type(exc).__name__)
                self._ready.set()
                await asyncio.sleep(0.5)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()

    @contextlib.asynccontextmanager
    async def listen(self, job_id: str) -> AsyncIterator[asyncio.Queue[JobEvent]]:
        """Register a queue for ``job_id``'s channel for the duration of the block."""
        channel = job_channel(job_id)
        queue: asyncio.Queue[JobEvent] = asyncio.Queue()
        self._queues[channel] = queue
        try:
            yield queue
        finally:
            self._queues.pop(channel, None)
