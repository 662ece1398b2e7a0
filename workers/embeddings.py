"""The ``embed_queue`` job of the batch queue: embed messages waiting in ``embedding_queue``.

Ingest queues every new message in PostgreSQL (``shared.search.indexing``); this job runs as an
arq cron every ``PM_EMBED_POLL_SECONDS`` (one job per tick across all batch workers: arq derives
the job id from the tick). Each run embeds at most :data:`MESSAGES_PER_RUN` messages, which bounds
its duration and so the ticks that queue up behind it (about a minute / the period); those go on
draining. Workers share the queue through ``SKIP LOCKED``, and a worker killed mid-run leaves its
batch queued for the next tick.
"""

from __future__ import annotations

from typing import Any

from shared.embeddings.store import embed_pending
from shared.logs import get_logger

__all__ = ["embed_queue", "MESSAGES_PER_RUN"]

#: Messages one run embeds at most (about a minute of the ONNX model on 2 cores).
MESSAGES_PER_RUN = 1_000

log = get_logger("workers.embeddings")


async def embed_queue(ctx: dict[str, Any]) -> int:
    """Embed queued messages; returns how many (0 when the model is unavailable: they stay queued)."""
    embedder = ctx.get("embedder")
    if embedder is None:
        return 0
    done = await embed_pending(ctx["pool"], embedder, batch=ctx["settings"].pm_embed_batch,
                               limit=MESSAGES_PER_RUN)
    if done:
        log.info("embedded", messages=done, model=embedder.model)
    return done
