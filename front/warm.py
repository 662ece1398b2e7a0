"""Warming a front before it serves, so that its first call costs what later calls do.

Issue 14 measured the first ``mail_search`` after start at 850-900 ms against 10-90 ms for later
ones: the query-embedding model loaded on that call (``shared.search.semantic``, about 0.7 s for
ONNX), and each first use of a pooled PostgreSQL connection opened it (TCP, the TLS probe,
authentication, the codecs). :func:`warm` does both in the app's lifespan, before uvicorn accepts
connections, bounded by :data:`WARM_SECONDS`. It is best-effort: a front still starts when
PostgreSQL or Redis is down (``front.resources``) and the lazy paths then do the work on first use.
"""

from __future__ import annotations

import asyncio
import contextlib

from front.resources import Resources
from shared.logs import get_logger
from shared.search.semantic import engine_for

__all__ = ["warm", "WARM_SECONDS", "WARM_CONNECTIONS"]

log = get_logger("front.warm")

#: Longest the start-up waits for the warm-up; what is not warm by then warms on first use.
WARM_SECONDS = 10.0
#: Pooled PostgreSQL connections opened at start-up (at most the pool's size): enough for the
#: first burst of calls.
WARM_CONNECTIONS = 4


async def warm(resources: Resources) -> None:
    """Open :data:`WARM_CONNECTIONS` database connections and a Redis one, and load the
    semantic engine (model and index choice). Never raises."""
    try:
        async with asyncio.timeout(WARM_SECONDS):
            async with contextlib.AsyncExitStack() as held:
                count = min(WARM_CONNECTIONS, resources.db.pool.get_max_size())
                conns = [await held.enter_async_context(resources.db.acquire())
                         for _ in range(count)]
                await resources.redis.ping()
                await engine_for(resources.settings).ready(conns[0])
    except Exception as exc:  # noqa: BLE001 - start anyway; first use warms what is left
        log.warning("warm_up_incomplete", error=type(exc).__name__)
