"""arq worker settings: the interactive and the batch queue, with resources built once in
``on_startup``.

Interactive jobs (mail_wait) sit on their own queue with a short poll delay, because arq workers
poll and the delay is added to every wait's start (STACK.md section 4). Batch work (embeddings)
runs on the batch queue with arq's default poll delay, one job at a time per worker, so it never
competes with interactive jobs for the two cores (STACK.md section 1.1).
"""

from __future__ import annotations

from typing import Any

import asyncio

from arq import cron
from arq.connections import RedisSettings
from redis.asyncio import Redis

from shared.config import Settings
from shared.db import create_pool
from shared.embeddings.embedder import EmbedderUnavailable, load_embedder
from shared.events import batch_queue, interactive_queue
from shared.logs import configure, get_logger
from workers.embeddings import embed_queue
from workers.wait import mail_wait

__all__ = ["worker_settings", "batch_worker_settings"]

log = get_logger("workers")


async def startup(ctx: dict[str, Any]) -> None:
    settings: Settings = ctx.get("settings") or Settings.from_env()
    configure(settings.pm_log_level)
    ctx["settings"] = settings
    ctx["pool"] = await create_pool(settings.database_url, max_size=20)
    # Its own client (not arq's), so pub/sub and cancel checks never wait on job bookkeeping.
    ctx["redis"] = Redis.from_url(settings.redis_url)
    log.info("worker_started", queue=interactive_queue(settings.pm_namespace))


async def batch_startup(ctx: dict[str, Any]) -> None:
    await startup(ctx)
    settings: Settings = ctx["settings"]
    try:
        ctx["embedder"] = await asyncio.to_thread(load_embedder, settings.pm_embedder,
                                                  settings.pm_embed_threads)
    except EmbedderUnavailable as exc:
        # Messages stay queued; semantic search reports degraded until a worker can embed.
        ctx["embedder"] = None
        log.error("embedder_unavailable", reason=str(exc))
    log.info("batch_worker_started", queue=batch_queue(settings.pm_namespace),
             embedder=settings.pm_embedder)


async def shutdown(ctx: dict[str, Any]) -> None:
    await ctx["pool"].close()
    await ctx["redis"].aclose()


def worker_settings(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for :class:`arq.worker.Worker` from ``settings``."""
    return {
        "functions": [mail_wait],
        "queue_name": interactive_queue(settings.pm_namespace),
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


def batch_worker_settings(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for :class:`arq.worker.Worker` on the batch queue (embeddings)."""
    period = max(1, min(60, settings.pm_embed_poll_seconds))
    return {
        "functions": [],
        # arq makes a cron job's id from its name and tick, under its global "arq:job:" keys;
        # the namespace in the name keeps two deployments on one Redis from taking each
        # other's ticks.
        "cron_jobs": [cron(embed_queue, name=f"cron:{settings.pm_namespace}:embed_queue",
                           second=set(range(0, 60, period)), run_at_startup=True,
                           keep_result=0)],
        "queue_name": batch_queue(settings.pm_namespace),
        "redis_settings": RedisSettings.from_dsn(settings.redis_url),
        "on_startup": batch_startup,
        "on_shutdown": shutdown,
        "ctx": {"settings": settings},
        "max_jobs": 1,
        # A run embeds at most MESSAGES_PER_RUN messages, about a minute on 2 cores.
        "job_timeout": 1800,
        "keep_result": 0,
        "max_tries": 1,
    }
