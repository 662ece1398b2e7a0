"""asyncpg pool and single connections with the project's codecs.

One pool per process, made at start-up (asyncpg docs, "usage"); ``jsonb`` columns decode to
Python values through msgspec.
"""

from __future__ import annotations

import asyncpg
import msgspec

from shared.errors import ErrorCode, PylotaError

__all__ = ["create_pool", "connect"]


async def _init(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec(
        "jsonb", schema="pg_catalog", encoder=lambda v: msgspec.json.encode(v).decode(),
        decoder=msgspec.json.decode, format="text",
    )


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    """Open a pool on ``dsn``.

    Raises:
        PylotaError: ``unavailable`` when PostgreSQL cannot be reached.
    """
    try:
        return await asyncpg.create_pool(dsn, min_size=min_size, max_size=max_size, init=_init)
    except (OSError, asyncpg.PostgresError) as exc:
        raise PylotaError(ErrorCode.UNAVAILABLE, f"PostgreSQL is not reachable: {exc}",
                          fix="Check DATABASE_URL and that PostgreSQL is running.") from exc


async def connect(dsn: str) -> asyncpg.Connection:
    """Open one connection on ``dsn`` with the codecs (for the CLI).

    Raises:
        PylotaError: ``unavailable`` when PostgreSQL cannot be reached.
    """
    try:
        conn = await asyncpg.connect(dsn)
    except (OSError, asyncpg.PostgresError) as exc:
        raise PylotaError(ErrorCode.UNAVAILABLE, f"PostgreSQL is not reachable: {exc}",
                          fix="Check DATABASE_URL and that PostgreSQL is running.") from exc
    await _init(conn)
    return conn
