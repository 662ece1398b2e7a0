"""What a tool handler gets besides its arguments."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncpg
from redis.asyncio import Redis

from shared.auth.keys import Principal
from shared.config import Settings

__all__ = ["Progress", "ToolContext", "no_progress"]

Progress = Callable[[float, "float | None", "str | None"], Awaitable[None]]
"""``await progress(progress, total, message)``: report one step of a long call (spec section
2.6). ``progress`` must increase from call to call; ``total`` and ``message`` may be None."""


async def no_progress(progress: float, total: float | None, message: str | None) -> None:
    """The reporter of a call whose client did not ask for progress: reports go nowhere."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Resources and caller of one tool call: pool, Redis, settings, principal, request id.

    ``progress`` reaches the client as ``notifications/progress`` only when the request carried a
    progressToken and accepts an SSE response; otherwise it is :func:`no_progress`. A handler
    reports when it has something to say and never needs to know which.
    """

    pool: asyncpg.Pool
    redis: Redis
    settings: Settings
    principal: Principal
    request_id: str
    progress: Progress = no_progress
