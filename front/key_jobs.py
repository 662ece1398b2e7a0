"""How many worker-tool calls (``mail_wait``, ``mail_deep_search``) one API key runs at once.

The interactive workers' slots are shared by every tenant (``PM_WORKER_MAX_JOBS`` a worker), and
a ``mail_wait`` holds one for up to 60 s while costing only one ``RL_API`` unit: one key opening
streams at 200 a minute held every slot, and every other tenant's waits and deep searches were
refused "Every worker is busy" (found by an attack). So a key runs at most ``PM_JOBS_PER_KEY``
such calls at once, counted across every front in Redis (:func:`~shared.events.key_jobs_key`):
each running call is a member scored by the time it is over at the latest, so a front that dies
holding some leaves nothing behind for longer than its calls could have run.

The count and the entry are taken in one transaction (``MULTI``); two fronts racing for a key's
last slot may both refuse, never both pass.
"""

from __future__ import annotations

import time

from redis.asyncio import Redis

from shared.errors import ErrorCode, PylotaError
from shared.events import key_jobs_key

__all__ = ["take", "give_back"]


async def take(redis: Redis, namespace: str, key_id: str, job_id: str, *, seconds: float,
               limit: int) -> None:
    """Count job ``job_id`` against ``key_id`` for at most ``seconds``.

    Raises:
        PylotaError: ``rate_limited`` (``details.limit``, ``details.retry_after`` 1 s) when the
            key already runs ``limit`` calls; the job is then not counted.
    """
    key, now = key_jobs_key(namespace, key_id), time.time()
    async with redis.pipeline(transaction=True) as pipe:
        pipe.zremrangebyscore(key, "-inf", now)
        pipe.zadd(key, {job_id: now + seconds})
        pipe.zcard(key)
        pipe.expire(key, int(seconds) + 1, gt=True)
        pipe.expire(key, int(seconds) + 1, nx=True)
        _, _, running, *_ = await pipe.execute()
    if running > limit:
        await redis.zrem(key, job_id)
        raise PylotaError(
            ErrorCode.RATE_LIMITED,
            f"This key already runs {limit} mail_wait and mail_deep_search calls at once.",
            fix="Wait for one of them to end before starting another, or cancel those you no "
                "longer need.",
            details={"limit": limit, "retry_after": 1})


async def give_back(redis: Redis, namespace: str, key_id: str, job_id: str) -> None:
    """Stop counting job ``job_id`` against ``key_id``."""
    await redis.zrem(key_jobs_key(namespace, key_id), job_id)
