"""Which workers are alive, as this front sees it (DESIGN.md section 2, step 6).

Workers push their entry in the queue's worker set two heartbeats ahead
(``workers/process.py``). :class:`WorkerWatch` reads the interactive set every half heartbeat
— one Redis call per front, however many streams it holds — and

- answers :meth:`capacity` (how many jobs the live workers run at once, 0 when none is alive),
  so the front refuses a call no worker can take instead of queueing it to rot;
- puts :data:`WORKER_GONE` into the listener of every stream whose job runs on a worker that
  stopped beating, so a call on a worker killed with SIGKILL ends within about two heartbeats
  and a half, never at its own deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from shared.config import Settings
from shared.events import workers_key
from shared.logs import get_logger
from shared.pubsub import Listener

__all__ = ["WorkerWatch", "WORKER_GONE", "WorkerGone"]

log = get_logger("front.watch")


class WorkerGone:
    """The marker a stream gets when the worker running its job stopped beating."""

    def __repr__(self) -> str:
        return "WORKER_GONE"


WORKER_GONE: Final = WorkerGone()


class WorkerWatch:
    """See the module docstring."""

    def __init__(self, redis: Redis, settings: Settings) -> None:
        self._redis = redis
        self._key = workers_key(settings.pm_namespace, "interactive")
        self._interval = settings.pm_job_heartbeat_seconds / 2
        self._alive: dict[str, int] = {}
        self._known = False
        self._watched: dict[str, list[Listener[Any]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Read the worker set once, then keep reading it in the background."""
        await self._refresh()
        self._task = asyncio.create_task(self._loop(), name="worker-watch")

    async def stop(self) -> None:
        """Stop reading."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _refresh(self) -> None:
        try:
            members = await self._redis.zrangebyscore(self._key, time.time(), "+inf")
        except (RedisError, OSError):
            self._known = False  # Redis down: streams learn it from their own event feed
            return
        alive: dict[str, int] = {}
        for member in members:
            worker_id, _, max_jobs = member.decode().partition(":")
            alive[worker_id] = int(max_jobs or 0)
        self._alive, self._known = alive, True
        for worker_id, listeners in self._watched.items():
            if worker_id not in alive:
                for listener in listeners:
                    listener.put(WORKER_GONE)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            await self._refresh()

    def capacity(self) -> int | None:
        """Jobs the live interactive workers run at once, as last read; None when the set could
        not be read."""
        return sum(self._alive.values()) if self._known else None

    async def fresh_capacity(self) -> int | None:
        """:meth:`capacity` read again now: a worker that started since the last read counts."""
        await self._refresh()
        return self.capacity()

    def watch(self, worker_id: str, listener: Listener[Any]) -> None:
        """Put :data:`WORKER_GONE` into ``listener`` if ``worker_id`` stops beating, until
        :meth:`forget`."""
        self._watched.setdefault(worker_id, []).append(listener)
        if self._known and worker_id not in self._alive:
            listener.put(WORKER_GONE)

    def forget(self, worker_id: str, listener: Listener[Any]) -> None:
        """Stop watching ``worker_id`` for ``listener`` (no-op when it was not)."""
        listeners = self._watched.get(worker_id)
        if listeners is not None and listener in listeners:
            listeners.remove(listener)
            if not listeners:
                del self._watched[worker_id]
