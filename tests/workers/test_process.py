"""The batch drain ticker (workers/process.py) on real Redis: a drain a call wakes is enqueued at
once, not at the next tick, and a run orphaned by a killed worker no longer holds its job id."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from arq.constants import in_progress_key_prefix, job_key_prefix, retry_key_prefix
from redis.asyncio import Redis

from shared.config import Settings
from shared.events import (JOB_DELIVER, drain_owner_key, queue_name, wake_drain, wake_key,
                           workers_key)
from shared.jobs import JOBS
from tests.conftest import NAMESPACE, settings_for
from workers.process import Beat, _tick, drain_job_id, worker_member

WAIT = 10


@contextlib.asynccontextmanager
async def ticking(redis: Redis, settings: Settings) -> AsyncIterator[None]:
    ticker = asyncio.create_task(_tick(redis, settings))
    try:
        yield
    finally:
        ticker.cancel()
        await asyncio.gather(ticker, return_exceptions=True)
        namespace = settings.pm_namespace
        for job in JOBS:
            job_id = drain_job_id(namespace, job.name)
            await redis.delete(job_key_prefix + job_id, in_progress_key_prefix + job_id,
                               retry_key_prefix + job_id, drain_owner_key(namespace, job.name))
        await redis.delete(queue_name(namespace, "batch"), wake_key(namespace),
                           workers_key(namespace, "batch"))


async def queued(redis: Redis, settings: Settings, name: str) -> bool:
    return await redis.zscore(queue_name(settings.pm_namespace, "batch"),
                              drain_job_id(settings.pm_namespace, name)) is not None


async def until_queued(redis: Redis, settings: Settings, name: str) -> None:
    async with asyncio.timeout(WAIT):
        while not await queued(redis, settings, name):
            await asyncio.sleep(0.02)


async def forget(redis: Redis, settings: Settings, name: str) -> None:
    """What a finished run leaves: its job id free and out of the queue."""
    job_id = drain_job_id(settings.pm_namespace, name)
    await redis.zrem(queue_name(settings.pm_namespace, "batch"), job_id)
    await redis.delete(job_key_prefix + job_id)


async def test_a_woken_drain_is_enqueued_at_once(db_url, redis):
    settings = settings_for(db_url, pm_namespace=f"{NAMESPACE}-wake", pm_embed_poll_seconds=60)
    async with ticking(redis, settings):
        await until_queued(redis, settings, JOB_DELIVER)  # the first tick enqueues every drain
        await forget(redis, settings, JOB_DELIVER)
        started = time.monotonic()
        await wake_drain(redis, settings.pm_namespace, JOB_DELIVER)
        await until_queued(redis, settings, JOB_DELIVER)
        assert time.monotonic() - started < 5  # the next tick is a minute away
        # a name that is no drain is dropped, and the list stays short however often it rings
        for _ in range(50):
            await wake_drain(redis, settings.pm_namespace, "no-such-job")
        assert await redis.llen(wake_key(settings.pm_namespace)) <= 8


async def test_a_run_orphaned_by_a_dead_worker_is_released(db_url, redis):
    settings = settings_for(db_url, pm_namespace=f"{NAMESPACE}-orphan", pm_embed_poll_seconds=1)
    namespace = settings.pm_namespace
    job_id = drain_job_id(namespace, JOB_DELIVER)
    alive = workers_key(namespace, "batch")
    # A run of a worker that still beats is left alone ...
    await redis.zadd(alive, {worker_member("living", 1): time.time() + 60})
    await redis.set(drain_owner_key(namespace, JOB_DELIVER), "living")
    await redis.set(in_progress_key_prefix + job_id, b"1", ex=1800)
    async with ticking(redis, settings):
        # enqueued means the tick has already decided about the run: it kept it
        await until_queued(redis, settings, JOB_DELIVER)
        assert await redis.exists(in_progress_key_prefix + job_id)
        await forget(redis, settings, JOB_DELIVER)
        # ... the run of one that stopped beating (killed) is released at the next tick
        await redis.set(drain_owner_key(namespace, JOB_DELIVER), "killed")
        await redis.set(retry_key_prefix + job_id, b"1", ex=1800)
        async with asyncio.timeout(WAIT):
            while await redis.exists(in_progress_key_prefix + job_id):
                await asyncio.sleep(0.02)
        assert not await redis.exists(retry_key_prefix + job_id)
        assert not await redis.exists(drain_owner_key(namespace, JOB_DELIVER))
        await until_queued(redis, settings, JOB_DELIVER)  # and enqueued afresh


async def test_the_beat_goes_on_while_a_job_holds_the_event_loop(db_url, redis):
    """A job doing CPU work on the worker's event loop for several beats (a deep search reading
    a huge message) no longer stops the beat, so the front does not take the worker for dead
    and fail its other calls (found by an attack); a stopped beat leaves the entry to expire."""
    settings = settings_for(db_url, pm_namespace=f"{NAMESPACE}-beat")
    key = workers_key(settings.pm_namespace, "interactive")
    member = worker_member("busy", 4)
    beat = Beat(settings.redis_url, key, member, 0.2)
    beat.start()
    try:
        async with asyncio.timeout(WAIT):
            while await redis.zscore(key, member) is None:
                await asyncio.sleep(0.02)
        time.sleep(1.5)  # the loop is held for over seven beats
        score = await redis.zscore(key, member)
        assert score is not None and score > time.time()  # still alive to the front
    finally:
        await beat.stop()
    assert (await redis.zscore(key, member) or 0) <= time.time() + 0.4
    await redis.delete(key)
