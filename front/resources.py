"""What every request of a front process may use, built once in the app's lifespan.

:func:`open_resources` opens the PostgreSQL pool (``shared.db.Database``: every acquire bounded),
one Redis ``BlockingConnectionPool`` shared by the client, arq and the job-event subscriptions
(STACK.md section 3), the rate-limit buckets, the worker watch, and the keys kept in memory
(``shared.auth.cache``, listening on a PostgreSQL connection of its own); :meth:`Resources.close`
closes them. Nothing here needs PostgreSQL or Redis to be up: a front starts during an outage
and serves as soon as they are back.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import msgspec
from arq.connections import ArqRedis
from redis.asyncio import BlockingConnectionPool, Redis

from front.watch import WorkerWatch
from shared.auth.cache import KeyCache
from shared.config import Settings
from shared.db import Database, open_database
from shared.events import JobEvent, job_channel
from shared.pubsub import Subscriptions
from shared.ratelimit import RateLimits
from shared.tools.call import CallEnv
from shared.tools.registry import ToolSpec

__all__ = ["Resources", "open_resources", "REDIS_WAIT_SECONDS"]

#: Longest a request waits for a free Redis connection before the call is ``unavailable``.
REDIS_WAIT_SECONDS = 10


@dataclass(frozen=True, slots=True)
class Resources:
    """The process's resources; ``calls`` is what the call pipeline needs of them."""

    settings: Settings
    db: Database
    redis: Redis
    arq: ArqRedis
    job_events: Subscriptions[JobEvent]
    workers: WorkerWatch
    limits: RateLimits
    keys: KeyCache
    calls: CallEnv

    @property
    def tools(self) -> Sequence[ToolSpec]:
        """The tools this front serves."""
        return self.calls.tools


@contextlib.asynccontextmanager
async def open_resources(settings: Settings, tools: Sequence[ToolSpec]
                         ) -> AsyncIterator[Resources]:
    """Open everything for the block, and close it after (see the module docstring)."""
    db = await open_database(settings.database_url, size=settings.pm_db_pool_size,
                             acquire_seconds=settings.pm_db_acquire_seconds,
                             statement_timeout_seconds=settings.pm_db_statement_timeout_seconds,
                             session_state=False)
    connections = BlockingConnectionPool.from_url(
        settings.redis_url, max_connections=settings.pm_redis_pool_size,
        timeout=REDIS_WAIT_SECONDS, socket_connect_timeout=2)
    redis = Redis(connection_pool=connections)
    arq = ArqRedis(connection_pool=connections)
    job_events: Subscriptions[JobEvent] = Subscriptions(
        redis, job_channel("*"), lambda raw: msgspec.json.decode(raw, type=JobEvent))
    workers = WorkerWatch(redis, settings)
    limits = RateLimits(settings)
    keys = KeyCache(settings.database_url)
    await job_events.start()
    await workers.start()
    await keys.start()
    try:
        yield Resources(settings=settings, db=db, redis=redis, arq=arq, job_events=job_events,
                        workers=workers, limits=limits, keys=keys,
                        calls=CallEnv(db=db, redis=redis, limits=limits, settings=settings,
                                      tools=tuple(tools)))
    finally:
        await keys.stop()
        await workers.stop()
        await job_events.stop()
        await db.close()
        await connections.aclose()
