"""The Litestar application factory.

``create_app(settings)`` builds the app; its lifespan opens the asyncpg pool, the Redis client
(a ``BlockingConnectionPool``, STACK.md section 3), the arq pool, the pub/sub hub and the
rate-limit buckets, keeps them on ``app.state`` as one :class:`Resources`, and closes them on exit.
Tests pass their own ``tools`` and ``prompts`` (the conformance suite's fixtures); the product
registers only the real registry.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import asyncpg
from arq.connections import ArqRedis
from litestar import Litestar
from redis.asyncio import BlockingConnectionPool, Redis

from front.hub import Hub
from front.mcp.prompts import PROMPTS, PromptSpec
from front.mcp.transport import mcp_routes
from shared.config import Settings
from shared.db import create_pool
from shared.logs import configure
from shared.ratelimit import RateLimits
from shared.tools.registry import TOOLS, ToolSpec

__all__ = ["create_app", "Resources"]


@dataclass(frozen=True, slots=True)
class Resources:
    """Everything a request may use, built once per process."""

    settings: Settings
    pool: asyncpg.Pool
    redis: Redis
    arq: ArqRedis
    hub: Hub
    limits: RateLimits
    tools: Sequence[ToolSpec]
    prompts: Sequence[PromptSpec]


def create_app(settings: Settings, *, tools: Sequence[ToolSpec] = TOOLS,
               prompts: Sequence[PromptSpec] = PROMPTS) -> Litestar:
    """Build the front for ``settings`` serving ``tools`` and ``prompts`` at ``POST /mcp``."""
    configure(settings.pm_log_level)

    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        pool = await create_pool(settings.database_url, max_size=20)
        connection_pool = BlockingConnectionPool.from_url(
            settings.redis_url, max_connections=50, timeout=10)
        redis = Redis(connection_pool=connection_pool)
        arq = ArqRedis(connection_pool=connection_pool)
        hub = Hub(redis)
        await hub.start()
        app.state.resources = Resources(
            settings=settings, pool=pool, redis=redis, arq=arq, hub=hub,
            limits=RateLimits(settings), tools=tuple(tools), prompts=tuple(prompts))
        try:
            yield
        finally:
            await hub.stop()
            await pool.close()
            await connection_pool.aclose()

    return Litestar(route_handlers=mcp_routes(), lifespan=[lifespan], debug=False)
