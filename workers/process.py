"""A worker process: its resources, its liveness beat, and an arq worker that survives Redis.

:func:`serve` builds the process's :class:`~shared.jobs.JobEnv` once (PostgreSQL pool, Redis
client, the new-mail subscriptions, deep search's semantic engine and backend — on the
interactive queue the engine's model is loaded and run once at start — and on the batch queue
the embedding model), then runs an arq :class:`~arq.worker.Worker` on the queue's functions
(``workers.runner``). When Redis goes away arq's poll loop raises; instead of exiting,
:func:`serve` closes that worker and starts a new one with backoff (``RECONNECT_DELAYS``), so a
Redis restart costs the outage and nothing more (issue 9). It returns when ``stop`` is set (SIGTERM and SIGINT set it in ``pylota worker``).

Beside the arq worker, two small tasks run:

- the **liveness beat** (:class:`Beat`, on a thread of its own): every
  ``pm_job_heartbeat_seconds`` the worker pushes its entry in the
  queue's worker set (``shared.events.workers_key``) two beats into the future. The front reads
  the set to refuse work no worker can take, and to end the calls of a worker that stopped
  beating (a worker killed with SIGKILL) with a retryable error;
- on the batch queue, the **drain ticker**: every ``pm_embed_poll_seconds`` it enqueues each
  drain job under one fixed id, which arq refuses while that job is queued or running — so a
  long run never leaves a pile of ticks behind it (issue 8: 207 never-run ticks once waited).
  Between ticks it waits on the wake list (``shared.events.wake_key``), so a drain that a call
  asks for (delivery, after a send) is enqueued at once instead of at the next tick. Before it
  enqueues a drain, it releases a run orphaned by a worker that died in it (SIGKILL): arq would
  otherwise keep that run's job id taken until its in-progress mark expires, after the longest
  job deadline (half an hour), and the drain would not run at all meanwhile.

The batch queue's :class:`~shared.jobs.JobEnv` also holds the DKIM signer, built once at
start-up from ``PM_DKIM_*``; a key that cannot sign stops the worker there, naming the variable.
A batch worker also queues, once at start-up, the attachments of mail stored before attachment
text existed, for the extraction drain (``JOB_EXTRACT``) to read.

Arguments are never logged: arq's logger is held at WARNING (it prints job arguments at INFO).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any, Final

import msgspec
from arq.connections import ArqRedis, RedisSettings
from arq.constants import in_progress_key_prefix, job_key_prefix, retry_key_prefix
from arq.worker import Worker
from redis import Redis as SyncRedis
from redis.asyncio import Redis
from redis.exceptions import RedisError

from shared.config import Settings
from shared.db import Database, open_database
from shared.deepsearch import backend_for
from shared.embeddings.embedder import EmbedderUnavailable, load_embedder
from shared.errors import dependency_failure
from shared.extract.store import queue_missing
from shared.events import (NewMail, Queue, drain_owner_key, new_mail_channel, queue_name,
                           wake_key, workers_key)
from shared.jobs import JOBS, JobEnv
from shared.logs import configure, get_logger
from shared.outbound.dkim_signing import DkimSigner
from shared.pubsub import Subscriptions
from shared.search.semantic import SemanticEngine, engine_for
from workers.runner import functions

__all__ = ["serve", "Beat", "is_alive", "worker_member", "drain_job_id", "RECONNECT_DELAYS",
           "MAX_JOBS_BATCH"]

log = get_logger("workers")

#: Seconds between attempts to start an arq worker again after Redis went away.
RECONNECT_DELAYS: Final = (0.5, 1.0, 2.0, 5.0)
#: Jobs a batch worker runs at once: batch work is CPU-bound on two cores (STACK.md 1.1).
MAX_JOBS_BATCH: Final = 1
#: Workers that stopped beating this long ago are dropped from the worker set.
FORGET_SECONDS: Final = 3600
#: An arq worker that ran this long before failing starts again after the shortest delay.
HEALTHY_RUN_SECONDS: Final = 30.0


def _id_file(settings: Settings, queue: Queue) -> Path:
    """Where a worker writes its id, for ``pylota worker --check`` in the same container."""
    return Path(tempfile.gettempdir()) / f"pylota-worker-{settings.pm_namespace}-{queue}.id"


async def is_alive(settings: Settings, queue: Queue) -> bool:
    """Whether the worker that last started on this host for ``queue`` is beating (health check:
    False when it stopped, when it never started here, or when Redis is unreachable)."""
    try:
        worker_id = _id_file(settings, queue).read_text().strip()
    except OSError:
        return False
    redis = Redis.from_url(settings.redis_url)
    try:
        members = await redis.zrangebyscore(workers_key(settings.pm_namespace, queue),
                                            time.time(), "+inf")
    except (RedisError, OSError):
        return False
    finally:
        await redis.aclose()
    return any(m.decode().split(":")[0] == worker_id for m in members)


def worker_member(worker_id: str, max_jobs: int) -> str:
    """The worker set's member for a worker: its id and how many jobs it runs at once."""
    return f"{worker_id}:{max_jobs}"


def drain_job_id(namespace: str, job_name: str) -> str:
    """The one job id of a drain job in a deployment (arq job ids are global)."""
    return f"{namespace}:drain:{job_name}"


class Beat:
    """The liveness beat (module docstring), on a thread of its own with its own Redis
    connection: it says the process is alive, not that its event loop is idle. On the event loop
    it stopped while a job held the loop with CPU work for two beats (a deep search reading a
    30 MB message), and the front then failed every call the worker was running, other
    tenants' included (found by an attack). A killed process stops it as before; a job that
    never yields is still ended by its own deadline."""

    def __init__(self, redis_url: str, key: str, member: str, interval: float) -> None:
        self._redis_url, self._key, self._member, self._interval = redis_url, key, member, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="liveness-beat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    async def stop(self) -> None:
        """Stop beating (the entry then expires unless removed); returns once the thread ended."""
        self._stop.set()
        await asyncio.to_thread(self._thread.join)

    def _run(self) -> None:
        client = SyncRedis.from_url(self._redis_url, socket_timeout=self._interval,
                                    socket_connect_timeout=self._interval)
        try:
            while not self._stop.is_set():
                now = time.time()
                with contextlib.suppress(RedisError, OSError):
                    pipe = client.pipeline(transaction=False)
                    pipe.zadd(self._key, {self._member: now + 2 * self._interval})
                    pipe.zremrangebyscore(self._key, "-inf", now - FORGET_SECONDS)
                    pipe.execute()
                self._stop.wait(self._interval)
        finally:
            client.close()


async def _release_orphan(redis: Redis, settings: Settings, name: str) -> None:
    """Free drain ``name``'s job id when the worker running it no longer beats (see the module
    docstring): arq's in-progress, job and retry keys go, and the job leaves the queue."""
    namespace = settings.pm_namespace
    owner = await redis.get(drain_owner_key(namespace, name))
    if owner is None:
        return
    alive = await redis.zrangebyscore(workers_key(namespace, "batch"), time.time(), "+inf")
    if owner.decode() in {m.decode().split(":")[0] for m in alive}:
        return
    job_id = drain_job_id(namespace, name)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.delete(in_progress_key_prefix + job_id, job_key_prefix + job_id,
                    retry_key_prefix + job_id, drain_owner_key(namespace, name))
        pipe.zrem(queue_name(namespace, "batch"), job_id)
        await pipe.execute()
    log.warning("drain_released", job=name, dead_worker=owner.decode())


async def _tick(redis: Redis, settings: Settings) -> None:
    """Enqueue every batch drain job under its fixed id, each poll period, and a drain named on
    the wake list as soon as it is named."""
    period = max(1, min(60, settings.pm_embed_poll_seconds))
    arq = ArqRedis(connection_pool=redis.connection_pool)
    drains = [job.name for job in JOBS if job.queue == "batch" and job.payload is None]

    async def enqueue(name: str) -> None:
        await _release_orphan(redis, settings, name)
        await arq.enqueue_job(name, _job_id=drain_job_id(settings.pm_namespace, name),
                              _queue_name=queue_name(settings.pm_namespace, "batch"))

    while True:
        with contextlib.suppress(RedisError, OSError):
            for name in drains:
                await enqueue(name)
        until = time.monotonic() + period
        while (left := until - time.monotonic()) > 0:
            try:
                # Redis reads the timeout as decimal seconds; 0 would block for ever.
                woken = await redis.blpop([wake_key(settings.pm_namespace)],
                                          timeout=round(max(left, 0.01), 3))
                if woken is not None and (name := woken[1].decode()) in drains:
                    await enqueue(name)
            except (RedisError, OSError):
                await asyncio.sleep(left)


#: What the warm-up embeds, so the model's first real query does not pay for its first run.
_WARM_UP_TEXT = "warm up"


async def _warm(db: Database, engine: SemanticEngine) -> None:
    """Load the embedding model and the vector index, and run the model once, so the first deep
    search is as fast as the next. PostgreSQL being down only postpones it to the first call."""
    try:
        async with db.acquire() as conn:
            if await engine.ready(conn) is None:
                await engine.embed_query(_WARM_UP_TEXT)
    except Exception as exc:  # noqa: BLE001 - a dependency down: the first call loads it
        if dependency_failure(exc) is None:
            raise
        log.warning("warm_up_postponed", error=type(exc).__name__)


async def _queue_missing_texts(db: Database) -> None:
    """Queue for text extraction the attachments of mail stored before attachment text existed
    (``shared.extract.store.queue_missing``); the extraction drain then reads them. PostgreSQL
    being down only postpones it to ``pylota reindex`` or the next start."""
    try:
        async with db.acquire() as conn:
            queued = await queue_missing(conn)
    except Exception as exc:  # noqa: BLE001 - a dependency down: the next start queues them
        if dependency_failure(exc) is None:
            raise
        log.warning("attachment_texts_not_queued", error=type(exc).__name__)
        return
    if queued:
        log.info("attachment_texts_queued", attachments=queued)


async def _build_env(settings: Settings, queue: Queue) -> tuple[JobEnv, Redis]:
    # First, before anything is opened: a DKIM key that cannot sign stops start-up.
    dkim = DkimSigner.from_settings(settings) if queue == "batch" else None
    db = await open_database(settings.database_url, size=settings.pm_db_pool_size,
                             acquire_seconds=settings.pm_db_acquire_seconds,
                             statement_timeout_seconds=settings.pm_db_statement_timeout_seconds)
    redis = Redis.from_url(settings.redis_url)
    new_mail = Subscriptions(redis, new_mail_channel("*"),
                             lambda raw: msgspec.json.decode(raw, type=NewMail))
    await new_mail.start()
    embedder = None
    if queue == "batch":
        try:
            embedder = await asyncio.to_thread(load_embedder, settings.pm_embedder,
                                               settings.pm_embed_threads, settings.pm_model_cache)
        except EmbedderUnavailable as exc:
            # Messages stay queued; semantic search reports degraded until a worker can embed.
            log.error("embedder_unavailable", reason=str(exc))
    if queue == "batch":
        await _queue_missing_texts(db)
    engine = engine_for(settings)
    if queue == "interactive":  # deep search runs here
        await _warm(db, engine)
    return JobEnv(db=db, redis=redis, settings=settings, new_mail=new_mail, engine=engine,
                  backend=backend_for(settings), embedder=embedder, dkim=dkim), redis


def _redis_settings(settings: Settings) -> RedisSettings:
    # arq's own connection attempts: one, then serve()'s loop takes over with its backoff.
    redis = RedisSettings.from_dsn(settings.redis_url)
    redis.conn_retries, redis.conn_retry_delay = 1, 0.5
    return redis


def _arq_worker(settings: Settings, queue: Queue, ctx: dict[str, Any]) -> Worker:
    interactive = queue == "interactive"
    return Worker(
        functions=functions(queue), queue_name=queue_name(settings.pm_namespace, queue),
        redis_settings=_redis_settings(settings), ctx=ctx,
        handle_signals=False, allow_abort_jobs=True,
        poll_delay=settings.pm_worker_poll_delay if interactive else 0.5,
        max_jobs=settings.pm_worker_max_jobs if interactive else MAX_JOBS_BATCH,
        # A job cancelled by a shutdown ends there: its caller's call ended with the worker, and
        # a drain job is enqueued again by the next tick.
        max_tries=1, retry_jobs=False)


async def _close(worker: Worker) -> None:
    """Stop ``worker`` even when Redis is gone (arq's close() would raise halfway)."""
    worker.handle_sig(2)  # cancels its jobs and its main task
    with contextlib.suppress(BaseException):
        await asyncio.gather(*worker.tasks.values(), return_exceptions=True)
    pool = worker._pool  # noqa: SLF001 - arq has no public way to drop a dead pool
    if pool is not None:
        with contextlib.suppress(BaseException):
            await pool.delete(worker.health_check_key)
        with contextlib.suppress(BaseException):
            await pool.close(close_connection_pool=True)
        worker._pool = None  # noqa: SLF001


async def serve(settings: Settings, queue: Queue, stop: asyncio.Event) -> None:
    """Run a worker on ``queue`` until ``stop`` is set (see the module docstring)."""
    configure(settings.pm_log_level)
    logging.getLogger("arq").setLevel(logging.WARNING)
    env, redis = await _build_env(settings, queue)
    worker_id = uuid.uuid4().hex[:12]
    max_jobs = settings.pm_worker_max_jobs if queue == "interactive" else MAX_JOBS_BATCH
    member = worker_member(worker_id, max_jobs)
    beat = Beat(settings.redis_url, workers_key(settings.pm_namespace, queue), member,
                settings.pm_job_heartbeat_seconds)
    beat.start()
    stopping = asyncio.create_task(stop.wait())
    failures = 0
    log.info("worker_started", queue=queue, worker=worker_id)
    _id_file(settings, queue).write_text(worker_id)
    try:
        while not stop.is_set():
            began = time.monotonic()
            worker = _arq_worker(settings, queue, {"env": env, "worker_id": worker_id})
            running = asyncio.create_task(worker.async_run())
            ticker = asyncio.create_task(_tick(redis, settings)) if queue == "batch" else None
            done, _ = await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if ticker is not None:
                ticker.cancel()
            await _close(worker)
            with contextlib.suppress(BaseException):
                await running
            if stopping in done:
                break
            error = running.exception() if not running.cancelled() else None
            if time.monotonic() - began > HEALTHY_RUN_SECONDS:
                failures = 0
            delay = RECONNECT_DELAYS[min(failures, len(RECONNECT_DELAYS) - 1)]
            log.warning("worker_restarting", queue=queue, worker=worker_id,
                        error=type(error).__name__ if error else None, delay_seconds=delay)
            failures += 1
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
    finally:
        stopping.cancel()
        await beat.stop()
        with contextlib.suppress(BaseException):
            await redis.zrem(workers_key(settings.pm_namespace, queue), member)
        await env.new_mail.stop()
        await env.db.close()
        with contextlib.suppress(BaseException):
            await redis.aclose()
        log.info("worker_stopped", queue=queue, worker=worker_id)
