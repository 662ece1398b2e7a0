"""What a tool handler gets besides its arguments."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
from redis.asyncio import Redis

from shared.auth.keys import Principal
from shared.config import Settings

__all__ = ["ToolContext"]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Resources and caller of one tool call: pool, Redis, settings, principal, request id."""

    pool: asyncpg.Pool
    redis: Redis
    settings: Settings
    principal: Principal
    request_id: str
