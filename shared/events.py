"""Names shared by the front, the workers and ingest: queues, job functions, pub/sub channels.

Like ``arq/constants.py``, every Redis name lives here so that no call site types one.
Pub/sub is at-most-once (STACK.md section 3); anything that must survive a missed event is also
stored (a job's result in arq, a message in PostgreSQL).
"""

from __future__ import annotations

import msgspec
from redis.asyncio import Redis

__all__ = [
    "interactive_queue", "batch_queue", "NewMail", "JobEvent",
    "new_mail_channel", "job_channel", "cancel_key", "publish_new_mail", "publish_job_event",
]


def interactive_queue(namespace: str) -> str:
    """arq queue for jobs a client waits on (mail_wait): served with a short poll delay.

    Queues carry the deployment's namespace (``PM_NAMESPACE``): a worker takes every job on its
    queue, so two deployments sharing one Redis would otherwise answer each other's calls from
    the wrong database. Channels and keys need no namespace: they hold ULIDs, unique everywhere.
    """
    return f"{namespace}:queue:interactive"


def batch_queue(namespace: str) -> str:
    """arq queue for background work (embeddings), with the namespace as above."""
    return f"{namespace}:queue:batch"


def new_mail_channel(identity_id: str) -> str:
    """Channel on which every stored message of ``identity_id`` is announced."""
    return f"pylota:newmail:{identity_id}"


def job_channel(job_id: str) -> str:
    """Channel carrying one streaming job's progress and result events."""
    return f"pylota:job:{job_id}"


def cancel_key(job_id: str) -> str:
    """Key whose presence tells a streaming job to stop at its next checkpoint."""
    return f"pylota:cancel:{job_id}"


class NewMail(msgspec.Struct, frozen=True):
    """Payload of a new-mail event."""

    message_id: str
    thread_id: str


class JobEvent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One event of a streaming job.

    ``kind`` is ``progress`` (``progress``, ``total``, ``message``), ``result`` (``result``: the
    tool's result object) or ``error`` (``error``: the error envelope).
    """

    kind: str
    progress: float | None = None
    total: float | None = None
    message: str | None = None
    result: dict | None = None
    error: dict | None = None


async def publish_new_mail(redis: Redis, identity_id: str, event: NewMail) -> None:
    """Announce a stored message."""
    await redis.publish(new_mail_channel(identity_id), msgspec.json.encode(event))


async def publish_job_event(redis: Redis, job_id: str, event: JobEvent) -> None:
    """Publish one streaming-job event."""
    await redis.publish(job_channel(job_id), msgspec.json.encode(event))
