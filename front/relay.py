"""Running a worker tool's job for one caller and relaying its events (DESIGN.md section 2).

:func:`follow` is the front half of the job runner (``workers/runner.py``), shared by MCP and
REST. It yields :class:`Progress` for each report, :data:`KEEP_ALIVE` after a heartbeat of
silence, and ends with one :class:`Final` (the tool's result object, or a
:class:`~shared.errors.PylotaError`) — or with nothing, when the caller cancelled the job (a
legacy ``notifications/cancelled``):

1. refuse at once, ``rate_limited``, when the caller's key already runs ``PM_JOBS_PER_KEY`` such
   calls (``front.key_jobs``), and ``unavailable`` when no interactive worker is alive or the
   live ones are all busy (queued and running jobs ≥ their capacity) — checked before the
   enqueue, and again after it by the job's rank in the queue, so a burst that passed the first
   check together is cut at capacity too: work beyond capacity is refused, not left to rot in
   the queue (issue 9);
2. listen on the job's channel, *then* enqueue (no event can be missed), with the request id as
   job id and an expiry, so a job no worker starts within :data:`START_SECONDS` is never run;
3. relay events until the result or error, ending with ``unavailable`` (retryable) when the job
   did not start in time, when its worker stops beating (``front.watch``), when it runs past its
   seconds plus :data:`MARGIN_SECONDS`, or when the event feed is lost (Redis down). A quiet
   stream also reads the job's stored result, in case its event was missed;
4. whenever the front gives up, or its caller goes away (the generator is closed), the job is
   told to stop: its cancel key is set, arq aborts it, and it leaves the queue (:func:`stop_job`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import Any, Final as Constant

import msgspec
from arq.jobs import Job as ArqJob
from arq.jobs import JobStatus
from arq.constants import abort_jobs_ss

from front import key_jobs
from front.resources import Resources
from front.watch import WorkerGone
from shared.errors import ErrorCode, PylotaError, dependency_failure
from shared.events import JobEvent, cancel_key, job_channel, publish_job_event, queue_name
from shared.jobs import DEADLINE_GRACE_SECONDS
from shared.pubsub import Lost
from shared.tools.call import Job

__all__ = ["follow", "Progress", "KeepAlive", "KEEP_ALIVE", "Final", "START_SECONDS",
           "MARGIN_SECONDS", "stop_job"]

#: Seconds a job may wait for a worker to start it; arq drops it after that.
START_SECONDS: Constant = 5.0
#: Seconds past a started job's own seconds before the front gives up on it (the runner's
#: deadline grace, twice: the runner reports a late job itself first).
MARGIN_SECONDS: Constant = 2 * DEADLINE_GRACE_SECONDS
#: How long the cancel key of a stopped job lives (longer than any job).
CANCEL_KEY_SECONDS: Constant = 120


@dataclass(frozen=True, slots=True)
class Progress:
    """One ``progress`` report of the job."""

    progress: float
    total: float | None
    message: str | None


class KeepAlive:
    """Nothing happened for a heartbeat; a stream sends ``: keep-alive``."""


KEEP_ALIVE: Constant = KeepAlive()


@dataclass(frozen=True, slots=True)
class Final:
    """How the call ended: the tool's result object, or the error."""

    value: dict[str, Any] | PylotaError


#: Seconds an abort stays in arq's abort set: workers read it at every poll (0.5 s), and the
#: longest job's deadline is far shorter, so an older one has done whatever it could.
ABORT_KEEP_SECONDS: Constant = 120


def _unavailable(message: str, fix: str = "Retry in a few seconds.") -> Final:
    return Final(PylotaError(ErrorCode.UNAVAILABLE, message, fix=fix))


def _ending(outcome: Any) -> Final | None:
    """The :class:`Final` of a stored ``{"result"}`` / ``{"error"}`` job outcome."""
    if isinstance(outcome, dict) and isinstance(outcome.get("result"), dict):
        return Final(outcome["result"])
    if isinstance(outcome, dict) and isinstance(outcome.get("error"), dict):
        return Final(_error(outcome["error"]))
    return None


def _error(body: dict[str, Any]) -> PylotaError:
    try:
        code = ErrorCode(body.get("code"))
    except ValueError:
        code = ErrorCode.INTERNAL
    return PylotaError(code, str(body.get("message") or "The job failed."),
                       fix=body.get("fix"), details=body.get("details") or {})


async def stop_job(res: Resources, job_id: str, queue: str) -> None:
    """Tell job ``job_id`` to stop: at its next checkpoint (cancel key) and through arq's abort
    (which also drops a job no worker started yet), and take it out of ``queue``, where it no
    longer counts against capacity. Never raises."""
    with contextlib.suppress(Exception):
        await res.redis.set(cancel_key(job_id), b"1", ex=CANCEL_KEY_SECONDS)
    with contextlib.suppress(Exception):
        # Out of the queue at once: arq keeps a job there until a worker ends it, and the
        # front counts the queue against the workers' capacity — a job of a worker killed
        # with SIGKILL would otherwise take a slot until its in-progress mark expired, after
        # the longest job deadline (issue 9).
        await res.redis.zrem(queue, job_id)
    with contextlib.suppress(Exception):
        await ArqJob(job_id, res.arq, _queue_name=queue).abort(timeout=0)
    with contextlib.suppress(Exception):
        # arq's abort set is never pruned (its workers' pruning asks for entries from the
        # future) and only the job's own worker takes an id out: a job stopped before a
        # worker started it stayed there for good (found by an attack).
        await res.redis.zremrangebyscore(abort_jobs_ss, "-inf",
                                         (time.time() - ABORT_KEEP_SECONDS) * 1000)
    with contextlib.suppress(Exception):
        await publish_job_event(res.redis, job_id, JobEvent(kind="cancelled"))


#: Jobs being stopped, and their keys' counts given back, in the background: held until done
#: (the event loop keeps only weak references to tasks).
_BACKGROUND: set[asyncio.Task[None]] = set()


def _background(work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    task = asyncio.create_task(work)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)
    return task


async def _give_back(res: Resources, namespace: str, key_id: str, job_id: str) -> None:
    with contextlib.suppress(Exception):  # Redis gone: the entry lapses with its score
        await key_jobs.give_back(res.redis, namespace, key_id, job_id)


async def follow(res: Resources, job: Job) -> AsyncIterator[Progress | KeepAlive | Final]:
    """Run ``job`` on a worker and yield its events; see the module docstring."""
    spec, job_id = job.request.job, job.request_id
    queue = queue_name(res.settings.pm_namespace, spec.queue)
    capacity = res.workers.capacity()
    if capacity == 0:  # as last read: a worker may have started since
        capacity = await res.workers.fresh_capacity()
    if capacity == 0:
        yield _unavailable("No worker is running to take this call.",
                           "Retry in a few seconds; if it keeps failing, start a worker "
                           "(pylota worker).")
        return
    heartbeat = res.settings.pm_stream_heartbeat_seconds
    seconds = job.request.seconds
    arq_job = ArqJob(job_id, res.arq, _queue_name=queue)
    done = False
    watched: str | None = None  # the worker running the job, once it said so
    namespace = res.settings.pm_namespace
    counted = False  # against the caller's key (front.key_jobs)
    with res.job_events.listen(job_channel(job_id)) as events:
        try:
            try:
                # Counted before the await: a cancellation landing after Redis stored the entry
                # must still give it back (giving back an absent entry does nothing). Found by
                # an attack: aborted calls left entries that locked the key out for a minute.
                counted = True
                await key_jobs.take(res.redis, namespace, job.key_id, job_id,
                                    seconds=START_SECONDS + seconds + MARGIN_SECONDS,
                                    limit=res.settings.pm_jobs_per_key)
                if capacity is not None and await res.redis.zcard(queue) >= capacity:
                    yield _unavailable("Every worker is busy.",
                                       "Retry in a few seconds, or start more workers.")
                    return
                queued = await res.arq.enqueue_job(
                    spec.name, job_id, msgspec.json.encode(job.request.payload), seconds,
                    _job_id=job_id, _queue_name=queue, _expires=START_SECONDS)
            except PylotaError as exc:
                yield Final(exc)
                return
            except Exception as exc:  # noqa: BLE001 - rendered as the call's end
                yield Final(dependency_failure(exc) or PylotaError(
                    ErrorCode.INTERNAL, "The job could not be queued."))
                return
            if queued is None:  # request ids are unique: a job with this id cannot exist
                yield Final(PylotaError(ErrorCode.INTERNAL, "The job id is taken."))
                return
            # The check above races with every other front's: past it, a burst would queue
            # far beyond capacity. Of the jobs in the queue (running ones included, oldest
            # first) only the first ``capacity`` may stay; a later one is refused, and
            # stopped on the way out (the finally below), never left to wait its turn.
            if capacity is not None and (
                    rank := await res.redis.zrank(queue, job_id)) is not None \
                    and rank >= capacity:
                yield _unavailable("Every worker is busy.",
                                   "Retry in a few seconds, or start more workers.")
                return
            started = False
            deadline = time.monotonic() + START_SECONDS
            quiet_since = time.monotonic()
            while True:
                now = time.monotonic()
                if now >= deadline:
                    if started:
                        yield _unavailable(f"The call did not finish within {seconds:g} s.")
                        return
                    # The started event may have been missed: ask arq.
                    status = await arq_job.status()
                    if status is JobStatus.complete:
                        if (ending := _ending((await arq_job.result_info()).result)):
                            done = True
                            yield ending
                            return
                    if status is not JobStatus.in_progress:
                        yield _unavailable("No worker started the call in time.",
                                           "Retry in a few seconds, or start more workers.")
                        return
                    started, deadline = True, now + seconds + MARGIN_SECONDS
                    continue
                # One timer per wait, on the listener: the next heartbeat or the deadline.
                event = await events.get(min(deadline, quiet_since + heartbeat) - now)
                if event is None:
                    if time.monotonic() >= deadline:
                        continue
                    stored = await arq_job.result_info()
                    if stored is not None and (ending := _ending(stored.result)):
                        done = True
                        yield ending
                        return
                    quiet_since = time.monotonic()
                    yield KEEP_ALIVE
                    continue
                if isinstance(event, Lost):
                    yield _unavailable("The connection to the job queue was lost.")
                    return
                if isinstance(event, WorkerGone):
                    yield _unavailable("The worker running this call stopped.")
                    return
                assert isinstance(event, JobEvent)
                if event.kind == "started":
                    started = True
                    deadline = time.monotonic() + seconds + MARGIN_SECONDS
                    if event.worker and watched is None:
                        watched = event.worker
                        res.workers.watch(watched, events)
                elif event.kind == "progress":
                    quiet_since = time.monotonic()
                    yield Progress(progress=event.progress or 0.0, total=event.total,
                                   message=event.message)
                elif event.kind == "result" and event.result is not None:
                    done = True
                    yield Final(event.result)
                    return
                elif event.kind == "error" and event.error is not None:
                    done = True
                    yield Final(_error(event.error))
                    return
                elif event.kind == "cancelled":
                    done = True  # stopped by its caller: no answer is owed
                    return
        except Exception as exc:  # noqa: BLE001 - Redis failed under us: end cleanly
            yield Final(dependency_failure(exc) or PylotaError(
                ErrorCode.INTERNAL, "Relaying the job failed."))
        finally:
            if watched is not None:
                res.workers.forget(watched, events)
            # Each in a task of its own, both started before anything is awaited here: a caller
            # cancelled meanwhile (its client went away) stops waiting for them but cannot cut
            # them short, nor keep the second from starting.
            stopping = None if done else _background(stop_job(res, job_id, queue))
            if counted:
                _background(_give_back(res, namespace, job.key_id, job_id))
            if stopping is not None:
                await asyncio.shield(stopping)
