"""Every Redis name: queues, job names, pub/sub channels and keys (like ``arq/constants.py``).

Nothing else types a Redis name. Pub/sub is at-most-once (STACK.md section 3); anything that must
survive a missed event is also stored (a job's result in arq, a message in PostgreSQL).

Queues and the worker registry carry the deployment's namespace (``PM_NAMESPACE``): a worker
takes every job on its queue, so two deployments sharing one Redis would otherwise answer each
other's calls from the wrong database. Channels and keys holding a ULID need no namespace.
"""

from __future__ import annotations

import hashlib

from typing import Any, Literal

import msgspec
from redis.asyncio import Redis

__all__ = [
    "JOB_MAIL_WAIT", "JOB_EMBED", "JOB_DEEP_SEARCH", "Queue", "queue_name", "interactive_queue", "batch_queue",
    "workers_key", "NewMail", "JobEvent", "new_mail_channel", "job_channel", "cancel_key", "inflight_key",
    "publish_new_mail", "publish_new_mails", "publish_job_event",
    "JOB_DELIVER", "JOB_PURGE_SEND_KEYS", "JOB_EXTRACT", "wake_key", "wake_drain", "ran_key", "drain_owner_key",
    "key_jobs_key",
]

#: arq function name of the mail_wait job (registered with ``func(name=…)``, never inferred).
JOB_MAIL_WAIT = "mail_wait"
#: arq function name of the batch job that embeds queued messages.
JOB_EMBED = "embed_pending"
#: arq function name of the batch job that hands queued outbound mail to the SMTP relay.
JOB_DELIVER = "deliver_outbound"
#: arq function name of the batch job that deletes the send tools' expired idempotency keys.
JOB_PURGE_SEND_KEYS = "purge_send_keys"
#: arq function name of the batch job that extracts the text of queued attachments.
JOB_EXTRACT = "extract_attachments"
#: arq function name of the mail_deep_search job.
JOB_DEEP_SEARCH = "mail_deep_search"
#: Entries :func:`wake_drain` keeps in the wake list at most (it only needs to be non-empty).
_WAKE_ENTRIES = 8

Queue = Literal["interactive", "batch"]
"""Interactive jobs (a client waits on them) poll fast; batch jobs are background work."""


def queue_name(namespace: str, queue: Queue) -> str:
    """The arq queue of ``queue`` in deployment ``namespace``."""
    return f"{namespace}:queue:{queue}"


def interactive_queue(namespace: str) -> str:
    """arq queue for jobs a client waits on (mail_wait, mail_deep_search): a short poll delay."""
    return queue_name(namespace, "interactive")


def batch_queue(namespace: str) -> str:
    """arq queue for background work (embeddings, attachment text, delivery)."""
    return queue_name(namespace, "batch")


def workers_key(namespace: str, queue: Queue) -> str:
    """Sorted set of the workers serving ``queue``: member ``worker_id``, score the time (Unix
    seconds) until which the worker counts as alive. Each worker pushes its score forward every
    heartbeat; a worker killed with SIGKILL stops doing so, and the front sees it."""
    return f"{namespace}:workers:{queue}"


def new_mail_channel(identity_id: str) -> str:
    """Channel on which every stored message of ``identity_id`` is announced."""
    return f"pylota:newmail:{identity_id}"


def job_channel(job_id: str) -> str:
    """Channel carrying one streaming job's events."""
    return f"pylota:job:{job_id}"


def cancel_key(job_id: str) -> str:
    """Key whose presence tells a job to stop at its next checkpoint."""
    return f"pylota:cancel:{job_id}"


def inflight_key(key_id: str, jsonrpc_id: int | str) -> str:
    """Key naming the job of an API key's streaming request with the JSON-RPC id
    ``jsonrpc_id``, so a legacy ``notifications/cancelled`` can stop it. Scoped by key: a caller
    can only name its own requests (spec section 2.3). The key holds a digest of the id, not the
    id: a client chooses the id, up to the body's 7 MiB, and a key name that long for every
    stream it opens is Redis memory it could fill."""
    digest = hashlib.sha256(msgspec.json.encode(jsonrpc_id)).hexdigest()[:32]
    return f"pylota:inflight:{key_id}:{digest}"


class NewMail(msgspec.Struct, frozen=True):
    """Payload of a new-mail event."""

    message_id: str
    thread_id: str


class JobEvent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One event of a streaming job.

    ``kind`` is ``started`` (``worker``: the id of the worker running it), ``progress``
    (``progress``, ``total``, ``message``), ``result`` (``result``: the tool's result object) or
    ``error`` (``error``: ``{code, message, fix, details}`` of a
    :class:`~shared.errors.PylotaError`), all published by the job runner; or ``cancelled``,
    published by a front that stopped the job, so every relay of it ends without an answer.
    """

    kind: Literal["started", "progress", "result", "error", "cancelled"]
    worker: str | None = None
    progress: float | None = None
    total: float | None = None
    message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


async def publish_new_mail(redis: Redis, identity_id: str, event: NewMail) -> None:
    """Announce a stored message."""
    await redis.publish(new_mail_channel(identity_id), msgspec.json.encode(event))


async def publish_new_mails(redis: Redis, identity_id: str, events: list[NewMail]) -> None:
    """Announce stored messages, in order, in one round trip (a pipeline: ``pylota import``
    stores a batch at a time)."""
    async with redis.pipeline(transaction=False) as pipe:
        for event in events:
            pipe.publish(new_mail_channel(identity_id), msgspec.json.encode(event))
        await pipe.execute()


async def publish_job_event(redis: Redis, job_id: str, event: JobEvent) -> None:
    """Publish one streaming-job event."""
    await redis.publish(job_channel(job_id), msgspec.json.encode(event))


def wake_key(namespace: str) -> str:
    """List the batch workers' drain ticker waits on (``BLPOP``) between its ticks: a drain job
    name pushed here is enqueued at once instead of at the next tick."""
    return f"{namespace}:wake:batch"


def drain_owner_key(namespace: str, job_name: str) -> str:
    """Key naming the worker (its id) running drain ``job_name`` right now; absent between
    runs. A batch worker that finds it naming a worker that no longer beats releases the run
    that worker's death left behind (``workers.process``)."""
    return f"{namespace}:drain-owner:{job_name}"


def ran_key(namespace: str, job_name: str) -> str:
    """Key whose presence says drain ``job_name`` ran recently (it expires when the drain is due
    again), for drains that need not run every tick."""
    return f"{namespace}:ran:{job_name}"


def key_jobs_key(namespace: str, key_id: str) -> str:
    """Sorted set of the worker-tool calls API key ``key_id`` runs right now (job ids, scored by
    the time each one is over at the latest): ``front.key_jobs``."""
    return f"{namespace}:key-jobs:{key_id}"


async def wake_drain(redis: Redis, namespace: str, job_name: str) -> None:
    """Ask the batch workers to run the drain job ``job_name`` now (see :func:`wake_key`); the
    list is trimmed, so it stays small while no batch worker runs."""
    key = wake_key(namespace)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.lpush(key, job_name)
        pipe.ltrim(key, 0, _WAKE_ENTRIES - 1)
        await pipe.execute()
