"""Per-key rate-limit buckets on Redis (DESIGN.md section 5.3), with the ``limits`` library.

The buckets are shared by every interface and every front, so a key has one budget whichever way
it calls. The server never sleeps on a limit: an exhausted bucket raises ``rate_limited`` with
``details.retry_after`` (seconds) and ``details.reset_at``.

**Leases** (issue 14: a Redis round trip on every call was as costly as the tool's own read). A
key calling a front fast takes several units from Redis at once and spends them in memory: one
for the call and one for each of its calls waiting meanwhile, and, when its last lease ran out,
as many more as it made calls in :data:`LEASE_SECONDS` at its recent rate; at most
:data:`MAX_LEASE` and at most a :data:`LEASE_SHARE`-th of the bucket. The rate is measured over
windows of at least :data:`LEASE_SECONDS` (one lease of a fast key lasts a few milliseconds, and
a rate over less is noise), and only two windows in a row that the key kept calling through
count (a window longer than twice that held a pause): the units a lease takes ahead are dropped
when the key stops, and a burst of calls shorter than two windows then wasted up to a lease of
its budget each time (found by an attack: a third of a 600-a-minute budget). The units are charged in
Redis when taken, so every front together still never lets more calls through than the limit;
units a front has not spent within :data:`LEASE_HOLD_SECONDS` are dropped (they are held longer
than they are sized for, so that calls a busy event loop resumes late still find them), which
costs a key at most one lease of its budget each time it stops calling fast; a key calling in
bursts takes what each burst asks for. When a lease does not fit what is left, one unit is asked
for instead, so the last calls before the limit are counted exactly. Each bucket is its own
counter in Redis, whatever its limit.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Literal

from limits import RateLimitItemPerMinute
from limits.aio.storage import RedisStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from redis.exceptions import RedisError

from shared.config import Settings
from shared.errors import ErrorCode, PylotaError

__all__ = ["Bucket", "RateLimits", "LEASE_SECONDS", "LEASE_HOLD_SECONDS", "MAX_LEASE",
           "LEASE_SHARE", "WARM_KEY"]

Bucket = Literal["RL_API", "RL_SEARCH", "RL_AGENTIC", "RL_SEND", "RL_SIGN"]

#: Seconds of a key's expected calls one lease covers, and how long its units stay spendable.
LEASE_SECONDS = 0.05
#: Seconds a lease's units stay spendable; after it, the units left are dropped.
LEASE_HOLD_SECONDS = 1.0
#: Most units one lease takes.
MAX_LEASE = 64
#: A lease takes at most this fraction (1/N) of the bucket's limit.
LEASE_SHARE = 50
#: The key id :meth:`RateLimits.warm` charges: not a key's (ids are ``key_`` and a ULID).
WARM_KEY = "warm-up"
#: Most (bucket, key) leases one process keeps; past it, expired ones are dropped first.
MAX_LEASES = 10_000


@dataclass(slots=True)
class _Lease:
    """Units of one key's bucket taken from Redis and not spent yet."""

    units: int = 0
    #: ``time.monotonic()`` after which the units left are dropped.
    expires: float = 0.0
    #: Calls of the key since :attr:`since`, the window its next :attr:`rate` is measured over.
    calls: int = 0
    since: float = 0.0
    #: Calls a second over the last window that closed (0 when it held a pause).
    last_rate: float = 0.0
    #: The rate leases are sized by: :attr:`last_rate` when the window before it had one too.
    rate: float = 0.0
    #: Calls waiting for the lease being taken now (:attr:`taking`, True once it is taken).
    waiting: int = 0
    taking: asyncio.Future[bool] | None = None


class RateLimits:
    """The buckets of one process, on the Redis at ``settings.redis_url``."""

    def __init__(self, settings: Settings) -> None:
        storage = RedisStorage(f"async+{settings.redis_url}", implementation="redispy",
                               key_prefix=f"{settings.pm_namespace}:rl")
        self._limiter = SlidingWindowCounterRateLimiter(storage)
        self._items: dict[str, RateLimitItemPerMinute] = {
            "RL_API": RateLimitItemPerMinute(settings.pm_rl_api_per_minute),
            "RL_SEARCH": RateLimitItemPerMinute(settings.pm_rl_search_per_minute),
            "RL_AGENTIC": RateLimitItemPerMinute(settings.pm_rl_agentic_per_minute),
            "RL_SEND": RateLimitItemPerMinute(settings.pm_rl_send_per_minute),
            "RL_SIGN": RateLimitItemPerMinute(settings.pm_rl_sign_per_minute),
        }
        self._leases: dict[tuple[str, str], _Lease] = {}

    async def warm(self) -> None:
        """Open the limiter's Redis connection and load its script, so the first call does not
        (one unit of the bucket of :data:`WARM_KEY`, which no key has).

        Raises:
            PylotaError: ``unavailable`` when Redis is down.
        """
        try:
            await self._limiter.hit(self._items["RL_API"], WARM_KEY)
        except (RedisError, OSError) as exc:
            raise PylotaError(ErrorCode.UNAVAILABLE, "The rate-limit store is unreachable.") from exc

    async def charge(self, bucket: Bucket, key_id: str) -> None:
        """Take one unit from ``bucket`` for ``key_id`` (from this process's lease when it
        holds one: see the module docstring).

        Raises:
            PylotaError: ``rate_limited`` when the bucket is empty; ``unavailable`` when Redis is
                down.
        """
        item = self._items[bucket]
        lease = self._lease(bucket, key_id)
        alone = False  # set once a lease this call waited for failed: it then asks by itself
        while True:
            now = time.monotonic()
            if lease.units > 0 and now < lease.expires:
                lease.units -= 1
                lease.calls += 1
                return
            if lease.taking is None or alone:
                break
            lease.waiting += 1
            try:
                alone = not await asyncio.shield(lease.taking)
            finally:
                lease.waiting -= 1
        taking = None
        if lease.taking is None:
            taking = lease.taking = asyncio.get_running_loop().create_future()
        elapsed = now - lease.since
        if elapsed >= LEASE_SECONDS:
            rate = lease.calls / elapsed if elapsed < 2 * LEASE_SECONDS else 0.0
            # Two windows in a row: a burst shorter than that wastes nothing at its end.
            lease.rate = rate if rate and lease.last_rate else 0.0
            lease.last_rate, lease.calls, lease.since = rate, 0, now
        units = 0
        try:
            units = await self._take(item, bucket, key_id, self._lease_size(item, lease))
        finally:
            if taking is not None:
                taking.set_result(units > 0)
                lease.taking = None
        if units == 0:
            await self._refuse(bucket, item, key_id)
        lease.units, lease.expires = units - 1, time.monotonic() + LEASE_HOLD_SECONDS
        lease.calls += 1

    def _lease(self, bucket: Bucket, key_id: str) -> _Lease:
        found = self._leases.get((bucket, key_id))
        if found is None:
            if len(self._leases) >= MAX_LEASES:
                now = time.monotonic()
                self._leases = {k: v for k, v in self._leases.items()
                                if v.expires > now or v.taking is not None}
                if len(self._leases) >= MAX_LEASES:
                    self._leases.clear()  # only a flood of keys gets here: start afresh
            found = self._leases[(bucket, key_id)] = _Lease()
        return found

    @staticmethod
    def _lease_size(item: RateLimitItemPerMinute, lease: _Lease) -> int:
        """Units to take: one for this call and one for each call waiting now (demand that is
        there), plus, when the last lease ran out, the whole calls the key is expected to make in
        :data:`LEASE_SECONDS` at its :attr:`_Lease.rate`; within :data:`MAX_LEASE` and the
        bucket's share. A key whose calls come in bursts with pauses between them thus takes
        what each burst asks for and wastes nothing."""
        cap = min(MAX_LEASE, max(1, item.amount // LEASE_SHARE))
        expected = math.floor(lease.rate * LEASE_SECONDS) if lease.units <= 0 else 0
        return max(1, min(cap, 1 + lease.waiting + expected))

    async def _take(self, item: RateLimitItemPerMinute, bucket: Bucket, key_id: str,
                    size: int) -> int:
        """Charge ``size`` units in Redis, or one when those do not fit; the units charged
        (0: not even one)."""
        try:
            # The bucket names the counter: two buckets of the same limit are two counters.
            if await self._limiter.hit(item, bucket, key_id, cost=size):
                return size
            if size > 1 and await self._limiter.hit(item, bucket, key_id):
                return 1
        except (RedisError, OSError) as exc:
            raise PylotaError(ErrorCode.UNAVAILABLE, "The rate-limit store is unreachable.") from exc
        return 0

    async def _refuse(self, bucket: Bucket, item: RateLimitItemPerMinute, key_id: str) -> None:
        """Raise ``rate_limited`` with when to retry."""
        try:
            stats = await self._limiter.get_window_stats(item, bucket, key_id)
        except (RedisError, OSError) as exc:
            raise PylotaError(ErrorCode.UNAVAILABLE, "The rate-limit store is unreachable.") from exc
        retry_after = max(1, math.ceil(stats.reset_time - time.time()))
        reset_at = datetime.fromtimestamp(stats.reset_time, timezone.utc)
        raise PylotaError(
            ErrorCode.RATE_LIMITED, f"{bucket} allows {item.amount} calls a minute for this key.",
            details={"bucket": bucket, "retry_after": retry_after,
                     "reset_at": reset_at.isoformat().replace("+00:00", "Z")},
        )
