"""arq worker settings: the interactive queue, with resources built once in ``on_startup``.

Interactive jobs (mail_wait) sit on their own queue with a short poll delay, because arq workers
poll and the delay is added to every wait's start (STACK.md section 4).
"""

from __future__ import annotations

from typing import Any

from arq.connections import RedisSettings
from redis.asyncio import Redis

from shared.config import Settings
from shared.db import create_pool
from shared.events import INTERACTIVE_QUEUE
from shared.logs import configure, get_logger
from workers.wait import mail_wait

__all__ = ["worker_settings"]

log = get_logger("workers")


async def startup(ctx: dict[str, Any]) -> None:
    settings: Settings = ctx.get("settings") or Settings.from_env()
    configure(settings.pm_log_level)
    ctx["settings"] = settings
    ctx["pool"] = await create_pool(settings.database_url, max_size=20)
    # Its own client (not arq's), so pub/sub and cancel checks never wait on job bookkeeping.
    ctx["redis"] = Redis.from_url(settings.redis_url)
    log.info("worker_started", queue=INTERACTIVE_QUEUE)


async def shutdown(ctx: dict[str, Any]) -> None:
    await ctx["pool"].close()
    await ctx["redis"].aclose()


def worker_settings(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for :class:`arq.worker.Worker` from ``settings``."""
    return {
        "functions": [mail_wait],
        "queue_name": INTERACTIVE_QUEUE,
        "redis_settings": RedisSettings.from_dsn(settings.redis_url),
        "on_startup": startup,
        "on_shutdown": shutdown,
        "ctx": {"settings": settings},
        "allow_abort_jobs": True,
        "poll_delay": settings.pm_worker_poll_delay,
        "max_jobs": 200,
        # mail_wait is at most 60 s (spec section 7); the margin covers start-up.
        "job_timeout": 90,
        "keep_result": 300,
        "max_tries": 1,
    }
