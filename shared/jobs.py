"""The jobs workers run: one registry that the front enqueues from and the workers serve.

A :class:`JobSpec` is data, like a tool: its arq function name (a constant of
``shared.events``, registered with arq's explicit ``func(name=…)``), its queue, the Struct its
payload decodes into, the domain coroutine that does the work, and its deadline. Workers build
their function lists from :data:`JOBS` (``workers/runner.py``); tools hand the front a
:class:`JobRequest` naming one (``shared.tools.call``).

Two kinds of job:

- **call jobs** (``payload`` set) serve one tool call: ``run(env, payload, control)`` returns the
  tool's result Struct; the runner streams progress and the result or error to the caller.
- **drain jobs** (``payload`` None) empty a PostgreSQL work queue: ``run(env)`` returns how many
  items it did. Each is enqueued under one fixed job id (arq's dedupe key), so at most one is
  queued or running per deployment and ticks never pile up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from redis.asyncio import Redis

from shared.config import Settings
from shared.control import Control
from shared.db import Database
from shared.deepsearch import Backend, DeepSearchRequest, DeepSearchResult, deep_search
from shared.embeddings.embedder import Embedder
from shared.embeddings.store import embed_pending
from shared.events import (JOB_DEEP_SEARCH, JOB_DELIVER, JOB_EMBED, JOB_EXTRACT, JOB_MAIL_WAIT,
                           JOB_PURGE_SEND_KEYS, NewMail, Queue, ran_key)
from shared.extract.limits import WALL_SECONDS
from shared.extract.store import extract_pending, with_text_status
from shared.mail.waiting import WaitRequest, wait_for_message
from shared.outbound.delivery import RelayConfig, deliver_due
from shared.outbound.dkim_signing import DkimSigner
from shared.outbound.idempotency import purge
from shared.pubsub import Subscriptions
from shared.search.semantic import SemanticEngine
from shared.tenancy.store import AGENTIC_SECONDS

__all__ = ["JobEnv", "JobSpec", "JobRequest", "JOBS", "JOBS_BY_NAME", "EMBED_RUN_MESSAGES",
           "EMBED_RUN_SECONDS",
           "DEADLINE_GRACE_SECONDS", "DELIVER_RUN_MESSAGES", "PURGE_EVERY_SECONDS",
           "EXTRACT_RUN_FILES", "EXTRACT_RUN_SECONDS"]

#: Seconds past a call job's own seconds before the runner ends it as too slow; arq's timeout is
#: a job's deadline plus twice this, and a front gives up on a started job after its seconds
#: plus twice this.
DEADLINE_GRACE_SECONDS = 2.0
#: Messages one embedding drain run embeds at most, so a run ends and the next picks up what
#: arrived meanwhile.
EMBED_RUN_MESSAGES = 1_000
#: Seconds after which an embedding drain run ends with its current batch: the batch worker runs
#: one job at a time, and after an import a run of EMBED_RUN_MESSAGES took 409 s on a loaded
#: machine, holding back sends and attachment text for minutes (found by a new user).
EMBED_RUN_SECONDS = 20.0
#: Messages one delivery drain run tries at most, so a run ends and the next one (and the
#: other batch jobs) get their turn.
DELIVER_RUN_MESSAGES = 50
#: Attachments one extraction drain run reads at most: each takes a sandbox's start-up (a
#: fraction of a second) and at most ``WALL_SECONDS``, so a run of hostile files ends within
#: half an hour, and the next run (and the other batch jobs, one at a time) get their turn.
EXTRACT_RUN_FILES = 50
#: Seconds after which an extraction run claims no more files: the batch worker runs one job at
#: a time, and a run of 50 slow files (each up to WALL_SECONDS) held deliveries queued behind it
#: for 25 minutes (found by an attack). The drain ticker starts the next run.
EXTRACT_RUN_SECONDS = 60.0
#: Seconds between two purges of expired idempotency keys (``shared.outbound.idempotency``
#: keeps keys 24 hours; purging hourly is plenty).
PURGE_EVERY_SECONDS = 3600


@dataclass(frozen=True, slots=True)
class JobEnv:
    """What a job may use, built once per worker process.

    ``new_mail`` is the worker's one subscription to every identity's new-mail channel;
    ``engine`` (the semantic engine of ``settings.pm_embedder``, warmed at start on interactive
    workers) and ``backend`` (``shared.deepsearch.backend_for``) serve deep search;
    ``embedder`` is loaded on batch workers only (None where it could not load); ``dkim`` is the
    batch workers' DKIM signer (None when ``PM_DKIM_DOMAIN`` is empty), built at start-up.
    """

    db: Database
    redis: Redis
    settings: Settings
    new_mail: Subscriptions[NewMail]
    engine: SemanticEngine
    backend: Backend
    embedder: Embedder | None = None
    dkim: DkimSigner | None = None


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One kind of job (see the module docstring)."""

    name: str
    queue: Queue
    run: Callable[..., Awaitable[Any]]
    deadline_seconds: float
    payload: type[msgspec.Struct] | None = None


@dataclass(frozen=True, slots=True)
class JobRequest:
    """What a worker tool's handler returns: the job to run, its payload, and the seconds the
    work may take (at most the job's ``deadline_seconds``)."""

    job: JobSpec
    payload: msgspec.Struct
    seconds: float


async def _wait(env: JobEnv, request: WaitRequest, control: Control) -> Any:
    result = await wait_for_message(env.db, env.new_mail, request, control,
                                    heartbeat=env.settings.pm_stream_heartbeat_seconds)
    if result.message is not None and result.message.attachments:
        # The Message object's "attachments with text status", as mail_get_message shows it.
        async with env.db.acquire() as conn:
            await with_text_status(conn, [result.message])
    return result


async def _deep_search(env: JobEnv, request: DeepSearchRequest, control: Control
                       ) -> DeepSearchResult:
    # One progress report per agentic step (spec section 2.6: progress = step, total = max_steps).
    return await deep_search(env.db, env.engine, request, backend=env.backend,
                             progress=control.progress, checkpoint=control.checkpoint)


async def _embed(env: JobEnv) -> int:
    if env.embedder is None:  # the model could not load: messages stay queued
        return 0
    return await embed_pending(env.db, env.embedder, batch=env.settings.pm_embed_batch,
                               limit=EMBED_RUN_MESSAGES, seconds=EMBED_RUN_SECONDS)


async def _deliver(env: JobEnv) -> int:
    lease = env.settings.pm_smtp_lease_seconds
    return await deliver_due(env.db, RelayConfig.from_settings(env.settings), dkim=env.dkim,
                             limit=DELIVER_RUN_MESSAGES, lease_seconds=lease if lease > 0 else None)


async def _extract(env: JobEnv) -> int:
    # The sandbox, one file at a time, never in the front or the importer (shared.extract).
    return await extract_pending(env.db, limit=EXTRACT_RUN_FILES, seconds=EXTRACT_RUN_SECONDS)


async def _purge_send_keys(env: JobEnv) -> int:
    # Ticks come every few seconds; the marker key lets one purge an hour through, whichever
    # batch worker takes the tick.
    if not await env.redis.set(ran_key(env.settings.pm_namespace, JOB_PURGE_SEND_KEYS), b"1",
                               nx=True, ex=PURGE_EVERY_SECONDS):
        return 0
    async with env.db.acquire() as conn:
        return await purge(conn)


JOBS: tuple[JobSpec, ...] = (
    # mail_wait waits at most 60 s (spec section 7).
    JobSpec(name=JOB_MAIL_WAIT, queue="interactive", run=_wait, deadline_seconds=60.0,
            payload=WaitRequest),
    # One run embeds for EMBED_RUN_SECONDS (and one batch); 30 minutes is a stuck run.
    JobSpec(name=JOB_EMBED, queue="batch", run=_embed, deadline_seconds=1800.0),
    # One run tries DELIVER_RUN_MESSAGES, each bounded by three relay timeouts (1.5 min by
    # default); a run cut short leaves its message to the lease, and the next run goes on.
    JobSpec(name=JOB_DELIVER, queue="batch", run=_deliver, deadline_seconds=1800.0),
    # A run reads EXTRACT_RUN_FILES, or what EXTRACT_RUN_SECONDS allow, each killed after
    # WALL_SECONDS; a worker killed mid-file leaves that file claimable again
    # (shared.extract.store).
    JobSpec(name=JOB_EXTRACT, queue="batch", run=_extract,
            deadline_seconds=EXTRACT_RUN_FILES * (WALL_SECONDS + 5)),
    JobSpec(name=JOB_PURGE_SEND_KEYS, queue="batch", run=_purge_send_keys,
            deadline_seconds=600.0),
    # mail_deep_search runs at most 30 s (spec section 7); each call's own seconds are its
    # max_seconds, lowered to the tenant's limit by the tool.
    JobSpec(name=JOB_DEEP_SEARCH, queue="interactive", run=_deep_search,
            deadline_seconds=float(AGENTIC_SECONDS[-1]), payload=DeepSearchRequest),
)


#: The registered jobs by arq function name.
JOBS_BY_NAME: dict[str, JobSpec] = {job.name: job for job in JOBS}
