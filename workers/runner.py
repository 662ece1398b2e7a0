"""The one job runner: every job of ``shared.jobs.JOBS`` runs through here (DESIGN.md section 2).

:func:`functions` turns the registry into arq ``Function`` records, each registered under its
own name with ``func(name=…)`` and the job's deadline as arq's timeout, so a job past its
deadline is stopped by arq even if the domain code never checks.

A **call job** (one tool call) is enqueued by the front with its request id as job id and
``(job_id, payload, seconds)`` as arguments. The runner publishes ``started`` (naming this
worker, so the front can tell when the worker dies), the domain's ``progress`` reports, and then
exactly one ``result`` or ``error`` event — an exception, a deadline passed or a dependency lost
all end as ``error`` with the envelope, never as silence. It also returns
``{"result": …}`` or ``{"error": …}``, which arq stores, so a front that missed the event reads
it. A caller that went away stops the job at its next checkpoint (the cancel key, or arq's
abort), and then nothing more is published.

A **drain job** empties a PostgreSQL queue and returns how many items it did. While it runs,
its owner key (``shared.events.drain_owner_key``) names this worker, so that if the worker dies
mid-run another batch worker can tell the run is orphaned (``workers.process``).

Arguments are never logged: arq's own logger (which prints job arguments at INFO) is kept at
WARNING, and failures are logged here with the exception's type and where it was raised only.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from arq.worker import Function, func

from shared.control import Stopped
from shared.errors import ErrorCode, PylotaError, dependency_failure
from shared.events import JobEvent, Queue, cancel_key, drain_owner_key, publish_job_event
from shared.jobs import DEADLINE_GRACE_SECONDS, JOBS, JobEnv, JobSpec
from shared.logs import get_logger

__all__ = ["functions", "JobControl"]

log = get_logger("workers.runner")


class JobControl:
    """The :class:`shared.control.Control` of one call job: progress becomes ``progress``
    events, a checkpoint reads the job's cancel key."""

    def __init__(self, env: JobEnv, job_id: str, seconds: float) -> None:
        self._env = env
        self._job_id = job_id
        self._deadline = time.monotonic() + seconds

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        await publish_job_event(self._env.redis, self._job_id, JobEvent(
            kind="progress", progress=progress, total=total, message=message))

    async def checkpoint(self) -> None:
        if await self._env.redis.exists(cancel_key(self._job_id)):
            raise Stopped

    def remaining(self) -> float:
        return max(0.0, self._deadline - time.monotonic())


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else "?"


def _error_body(error: PylotaError) -> dict[str, Any]:
    return {"code": error.code.value, "message": error.message, "fix": error.fix,
            "details": error.details}


def _call_job(spec: JobSpec) -> Callable[..., Awaitable[dict[str, Any] | None]]:
    assert spec.payload is not None

    async def run(ctx: dict[str, Any], job_id: str, payload: bytes, seconds: float
                  ) -> dict[str, Any] | None:
        env: JobEnv = ctx["env"]
        started = time.monotonic()
        error: PylotaError | None = None
        try:
            await publish_job_event(env.redis, job_id,
                                    JobEvent(kind="started", worker=ctx["worker_id"]))
            request = msgspec.json.decode(payload, type=spec.payload)
            async with asyncio.timeout(seconds + DEADLINE_GRACE_SECONDS):
                result = await spec.run(env, request, JobControl(env, job_id, seconds))
        except Stopped:
            log.info("job", job=spec.name, job_id=job_id, outcome="cancelled",
                     duration_ms=round((time.monotonic() - started) * 1000, 1))
            return None
        except asyncio.CancelledError:
            # arq's abort (the front stopping a job it gave up on) or the worker shutting down:
            # arq must see the cancellation, and the job still leaves its line.
            log.info("job", job=spec.name, job_id=job_id, outcome="aborted",
                     duration_ms=round((time.monotonic() - started) * 1000, 1))
            raise
        except TimeoutError:
            error = PylotaError(ErrorCode.UNAVAILABLE,
                                f"The job did not finish within {seconds:g} s.")
        except PylotaError as exc:
            error = exc
        except Exception as exc:  # noqa: BLE001 - every failure ends the caller's call
            # Retryable for the caller: to it, the worker is a dependency that failed.
            error = dependency_failure(exc) or PylotaError(
                ErrorCode.UNAVAILABLE, "The job failed on its worker.",
                fix="Retry; if it keeps failing, report the request_id.")
            log.error("job_failed", job=spec.name, job_id=job_id, exception=type(exc).__name__,
                      where=_where(exc))
        outcome: dict[str, Any]
        if error is None:
            outcome = {"result": msgspec.to_builtins(result)}
            event = JobEvent(kind="result", result=outcome["result"])
        else:
            outcome = {"error": _error_body(error)}
            event = JobEvent(kind="error", error=outcome["error"])
        log.info("job", job=spec.name, job_id=job_id,
                 outcome="ok" if error is None else "error",
                 error_code=None if error is None else error.code.value,
                 duration_ms=round((time.monotonic() - started) * 1000, 1))
        try:
            await publish_job_event(env.redis, job_id, event)
        except Exception as exc:  # noqa: BLE001 - Redis gone: the front ends the call itself
            log.warning("job_event_lost", job=spec.name, job_id=job_id,
                        error=type(exc).__name__)
        return outcome

    return run


def _drain_job(spec: JobSpec) -> Callable[..., Awaitable[int]]:
    async def run(ctx: dict[str, Any]) -> int:
        env: JobEnv = ctx["env"]
        started = time.monotonic()
        owner = drain_owner_key(env.settings.pm_namespace, spec.name)
        try:
            await env.redis.set(owner, ctx["worker_id"])
            done = await spec.run(env)
        except Exception as exc:  # noqa: BLE001 - the next tick tries again
            log.error("drain_failed", job=spec.name, exception=type(exc).__name__,
                      where=_where(exc))
            return 0
        finally:
            with contextlib.suppress(Exception):
                await env.redis.delete(owner)
        if done:
            log.info("drained", job=spec.name, items=done,
                     duration_ms=round((time.monotonic() - started) * 1000, 1))
        return done

    return run


#: Seconds a call job's outcome is kept for a front that missed its event (longer than any
#: front waits past its job).
CALL_RESULT_SECONDS = 60


def functions(queue: Queue) -> list[Function]:
    """arq functions of every registered job on ``queue``.

    A drain job keeps no result: arq refuses to enqueue a job id while its result is kept, and
    a drain job's fixed id must be free again as soon as the run ends.
    """
    return [func(_call_job(spec) if spec.payload is not None else _drain_job(spec),
                 name=spec.name, timeout=spec.deadline_seconds + 2 * DEADLINE_GRACE_SECONDS,
                 keep_result=CALL_RESULT_SECONDS if spec.payload is not None else 0,
                 max_tries=1)
            for spec in JOBS if spec.queue == queue]
