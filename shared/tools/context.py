"""What a tool handler gets besides its arguments."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from shared.auth.keys import Principal
from shared.config import Settings
from shared.control import UNSTOPPABLE, Control
from shared.db import Database

__all__ = ["ToolContext"]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Resources and caller of one inline tool call.

    ``control.progress`` reaches the client as ``notifications/progress`` only when the request
    carried a progressToken and accepts an SSE response; otherwise reports go nowhere. A handler
    reports when it has something to say and never needs to know which.
    """

    db: Database
    redis: Redis
    settings: Settings
    principal: Principal
    request_id: str
    control: Control = UNSTOPPABLE
