"""shared.errors.dependency_failure: what counts as PostgreSQL or Redis failing (issue 9)."""

from __future__ import annotations

import asyncpg
from redis.exceptions import ConnectionError as RedisConnectionError

from shared.errors import ErrorCode, dependency_failure


def test_lost_connections_are_unavailable_and_bugs_are_not():
    lost = [ConnectionRefusedError(), asyncpg.ConnectionDoesNotExistError("gone"),
            RedisConnectionError("gone"),
            # a transaction's rollback after PostgreSQL went away mid-query raises this instead
            asyncpg.InterfaceError("cannot call Transaction.rollback(): the underlying "
                                   "connection is closed")]
    for exc in lost:
        found = dependency_failure(exc)
        assert found is not None and found.code is ErrorCode.UNAVAILABLE, exc
    for exc in (ValueError("x"), asyncpg.InterfaceError(
            "cannot call Connection.fetch(): the underlying connection has been released back "
            "to the pool")):
        assert dependency_failure(exc) is None, exc
