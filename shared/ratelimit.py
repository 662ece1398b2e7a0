"""Per-key rate-limit buckets on Redis (DESIGN.md section 5.3), with the ``limits`` library.

The buckets are shared by every interface, so a key has one budget whichever way it calls. The
server never sleeps on a limit: an exhausted bucket raises ``rate_limited`` with
``details.retry_after`` (seconds) and ``details.reset_at``.
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timezone
from typing import Literal

from limits import RateLimitItemPerMinute
from limits.aio.storage import RedisStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from redis.exceptions import RedisError

from shared.config import Settings
from shared.errors import ErrorCode, PylotaError

__all__ = ["Bucket", "RateLimits"]

Bucket = Literal["RL_API", "RL_SEARCH", "RL_AGENTIC", "RL_SEND", "RL_SIGN"]


class RateLimits:
    """The buckets of one process, on the Redis at ``settings.redis_url``."""

    def __init__(self, settings: Settings) -> None:
        storage = RedisStorage(f"async+{settings.redis_url}", implementation="redispy",
                               key_prefix="pylota:rl")
        self._limiter = SlidingWindowCounterRateLimiter(storage)
        self._items: dict[str, RateLimitItemPerMinute] = {
            "RL_API": RateLimitItemPerMinute(settings.pm_rl_api_per_minute),
            "RL_SEARCH": RateLimitItemPerMinute(settings.pm_rl_search_per_minute),
            "RL_AGENTIC": RateLimitItemPerMinute(settings.pm_rl_agentic_per_minute),
            "RL_SEND": RateLimitItemPerMinute(settings.pm_rl_send_per_minute),
            "RL_SIGN": RateLimitItemPerMinute(settings.pm_rl_sign_per_minute),
        }

    async def charge(self, bucket: Bucket, key_id: str) -> None:
        """Take one unit from ``bucket`` for ``key_id``.

        Raises:
            PylotaError: ``rate_limited`` when the bucket is empty; ``unavailable`` when Redis is
                down.
        """
        item = self._items[bucket]
        try:
            allowed = await self._limiter.hit(item, key_id)
            if allowed:
                return
            stats = await self._limiter.get_window_stats(item, key_id)
        except (RedisError, OSError) as exc:
            raise PylotaError(ErrorCode.UNAVAILABLE, "The rate-limit store is unreachable.") from exc
        retry_after = max(1, math.ceil(stats.reset_time - time.time()))
        reset_at = datetime.fromtimestamp(stats.reset_time, timezone.utc)
        raise PylotaError(
            ErrorCode.RATE_LIMITED, f"{bucket} allows {item.amount} calls a minute for this key.",
            details={"bucket": bucket, "retry_after": retry_after,
                     "reset_at": reset_at.isoformat().replace("+00:00", "Z")},
        )
