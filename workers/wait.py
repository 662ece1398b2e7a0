"""The ``mail_wait`` job: waits on a worker and streams progress to the front (spec section 2.6)."""

from __future__ import annotations

from typing import Any

import msgspec

from shared.events import JobEvent, cancel_key, publish_job_event
from shared.tools.wait import WaitJob, wait_for

__all__ = ["mail_wait"]


async def mail_wait(ctx: dict[str, Any], job_id: str, payload: bytes) -> dict[str, Any] | None:
    """Run one wait; publish ``progress`` events, then one ``result`` event, and return the result
    (arq stores it, so a front that missed the event can read it). Returns None when cancelled."""
    job = msgspec.json.decode(payload, type=WaitJob)
    redis = ctx["redis"]

    async def progress(elapsed: float, total: float) -> None:
        await publish_job_event(redis, job_id, JobEvent(kind="progress", progress=elapsed,
                                                        total=total))

    async def cancelled() -> bool:
        return bool(await redis.exists(cancel_key(job_id)))

    result = await wait_for(ctx["pool"], redis, job,
                            heartbeat=ctx["settings"].pm_stream_heartbeat_seconds,
                            progress=progress, cancelled=cancelled)
    if result is None:
        return None
    body = msgspec.to_builtins(result)
    await publish_job_event(redis, job_id, JobEvent(kind="result", result=body))
    return body
