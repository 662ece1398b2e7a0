"""The process's PostgreSQL pool, with every wait bounded, and single connections for the CLI.

One pool per process, made at start-up (asyncpg docs, "usage"); ``jsonb`` columns decode to
Python values through msgspec. :class:`Database` wraps it so that no caller can wait for a
connection without a bound: an acquire that does not get one within ``acquire_seconds`` (all
connections busy, or PostgreSQL down) is ``unavailable``, retryable, instead of a request that
hangs. Callers hold **one** connection at a time: holding one while waiting for a second is how
a burst of searches once deadlocked the front (issue 9). The pool opens no connection at start,
so a process starts while PostgreSQL is down and serves as soon as it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg
import msgspec

from shared.errors import ErrorCode, PylotaError

__all__ = ["Database", "open_database", "connect", "DATABASE_UNAVAILABLE_FIX", "SESSION_SETTINGS"]

#: Longest wait for PostgreSQL to open one new connection.
CONNECT_SECONDS = 5.0
#: What to do when the database cannot serve a call.
DATABASE_UNAVAILABLE_FIX = "Retry in a few seconds; if it keeps failing, the database is down."


#: Settings of every connection. No JIT: PostgreSQL compiles a plan whose estimated cost passes
#: ``jit_above_cost``, and a search of 100 ``ref:`` alternatives spent 5.7 s compiling what ran
#: in 46 ms (measured on 6,046 messages once the tables had statistics); our statements are short.
SESSION_SETTINGS = {"jit": "off"}


async def _init(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec(
        "jsonb", schema="pg_catalog", encoder=lambda v: msgspec.json.encode(v).decode(),
        decoder=msgspec.json.decode, format="text",
    )


async def _no_session_reset(conn: asyncpg.Connection) -> None:
    """The pool's reset for processes that keep no session state (``session_state=False``).
    asyncpg rolls back a transaction left open (a cancelled call) and drops listeners before
    calling this; its default reset query (advisory unlocks, ``CLOSE ALL``, ``UNLISTEN *``,
    ``RESET ALL``) would clear nothing more for such a process, at one more round trip on every
    release (issue 14)."""


def _detached(conn: asyncpg.Connection) -> bool:
    """Whether the pool took ``conn`` back while its holder still held it: a lost connection.

    When PostgreSQL goes away, asyncpg hands the closed connection back to its pool by itself,
    and every later call on it raises ``InterfaceError`` ("released back to the pool"): the same
    error a use after release would raise, which is our bug. Inside its holder's block only the
    pool can have released the connection, so a detached one was lost (``unavailable``); a call
    on some other, stale connection leaves this one attached and stays ``internal``.
    """
    try:
        conn.is_closed()
    except asyncpg.InterfaceError:
        return True
    return False


class Database:
    """A pool whose :meth:`acquire` is bounded in time (see the module docstring)."""

    def __init__(self, pool: Database, *, acquire_seconds: float) -> None:
        self._pool = pool
        self.acquire_seconds = acquire_seconds

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection for the block.

        Raises:
            PylotaError: ``unavailable`` when no connection is free within ``acquire_seconds``,
                PostgreSQL cannot be reached, or the connection is lost under the block.
        """
        try:
            conn = await self._pool.acquire(timeout=self.acquire_seconds)
        except asyncio.TimeoutError:
            raise PylotaError(ErrorCode.UNAVAILABLE,
                              f"No database connection was free within {self.acquire_seconds:g} s.",
                              fix=DATABASE_UNAVAILABLE_FIX) from None
        except (OSError, asyncpg.PostgresConnectionError, asyncpg.CannotConnectNowError,
                asyncpg.TooManyConnectionsError) as exc:
            raise PylotaError(ErrorCode.UNAVAILABLE, "The database is unreachable.",
                              fix=DATABASE_UNAVAILABLE_FIX) from exc
        try:
            yield conn
        except asyncpg.InterfaceError as exc:
            if _detached(conn):
                raise PylotaError(ErrorCode.UNAVAILABLE, "The database connection was lost.",
                                  fix=DATABASE_UNAVAILABLE_FIX) from exc
            raise
        finally:
            await self._give_back(conn)

    @contextlib.asynccontextmanager
    async def acquire_free(self) -> AsyncIterator[asyncpg.Connection | None]:
        """A second connection for optional parallel work, or None when taking one would mean
        waiting for another caller to release theirs.

        This is how a caller already holding a connection may use another without hold-and-wait:
        it never waits for a release (it may wait for PostgreSQL to open a connection, bounded by
        the connect timeout), so no set of callers can deadlock on the pool (issue 9).
        """
        pool = self._pool
        if pool.get_size() - pool.get_idle_size() >= pool.get_max_size():
            yield None
            return
        # No timeout: asyncpg then takes a free holder without yielding to the event loop, so
        # nobody can take it between the check above and this acquire.
        try:
            conn = await pool.acquire()
        except (OSError, asyncpg.PostgresConnectionError, asyncpg.CannotConnectNowError,
                asyncpg.TooManyConnectionsError):
            yield None
            return
        try:
            yield conn
        except asyncpg.InterfaceError as exc:
            if _detached(conn):
                raise PylotaError(ErrorCode.UNAVAILABLE, "The database connection was lost.",
                                  fix=DATABASE_UNAVAILABLE_FIX) from exc
            raise
        finally:
            await self._give_back(conn)

    async def _give_back(self, conn: asyncpg.Connection) -> None:
        """Release ``conn`` to the pool. When PostgreSQL's loss reaches asyncpg while it
        releases, asyncpg has given the connection back itself and its own release raises
        ``InternalClientError`` on the free holder: there is nothing left to give back, and that
        error must not take the place of what the caller's block ended with (the loss,
        ``unavailable``; issue 9)."""
        try:
            await self._pool.release(conn)
        except asyncpg.InternalClientError as exc:
            if "free connection holder" not in str(exc):
                raise

    @property
    def pool(self) -> Database:
        """The asyncpg pool itself, for code that reads its size."""
        return self._pool

    async def close(self) -> None:
        """Close every connection (waits for those in use to come back)."""
        await self._pool.close()


async def open_database(dsn: str, *, size: int, acquire_seconds: float,
                        statement_timeout_seconds: float | None = None,
                        session_state: bool = True) -> Database:
    """A :class:`Database` of at most ``size`` connections on ``dsn``.

    Args:
        statement_timeout_seconds: PostgreSQL's ``statement_timeout`` for every statement on
            these connections (None: the server's), so that no query holds a connection for long.
        session_state: whether callers may leave session state on a connection they release
            (session advisory locks, ``LISTEN``, ``SET`` outside a transaction, held cursors),
            which each release then clears. The front passes False: its calls use transaction-
            scoped state only (``SET LOCAL``, ``pg_advisory_xact_lock``), so a release resets
            only a transaction left open.
    """
    server_settings = dict(SESSION_SETTINGS)
    if statement_timeout_seconds:
        server_settings["statement_timeout"] = str(int(statement_timeout_seconds * 1000))
    pool = await asyncpg.create_pool(dsn, min_size=0, max_size=size, init=_init,
                                     server_settings=server_settings,
                                     timeout=CONNECT_SECONDS,
                                     reset=None if session_state else _no_session_reset)
    return Database(pool, acquire_seconds=acquire_seconds)


async def connect(dsn: str, *, command_timeout: float | None = None) -> asyncpg.Connection:
    """Open one connection on ``dsn`` with the codecs (for the CLI and migrations).
    ``command_timeout``: seconds a statement may take before it raises ``TimeoutError`` (None:
    no limit), which also ends the wait on a PostgreSQL that stopped answering.

    Raises:
        PylotaError: ``unavailable`` when PostgreSQL cannot be reached; ``invalid_request`` when
            ``dsn`` is no PostgreSQL URL or names a database that does not exist (each printed
            a traceback: found by a new user).
    """
    try:
        conn = await asyncpg.connect(dsn, command_timeout=command_timeout,
                                     server_settings=SESSION_SETTINGS)
    except ValueError as exc:  # asyncpg's ClientConfigurationError, or int() of a bad port
        raise PylotaError(ErrorCode.INVALID_REQUEST, f"DATABASE_URL is not a PostgreSQL URL: {exc}",
                          fix="Write it as postgresql://USER@HOST:5432/DATABASE.") from exc
    except asyncpg.InvalidCatalogNameError as exc:
        raise PylotaError(ErrorCode.INVALID_REQUEST, f"The database of DATABASE_URL does not "
                          f"exist: {exc}", fix="Run `pylota migrate`, which creates it and its "
                          "tables, or check the database name in DATABASE_URL.") from exc
    except (OSError, asyncpg.PostgresError) as exc:
        raise PylotaError(ErrorCode.UNAVAILABLE, f"PostgreSQL is not reachable: {exc}",
                          fix="Check DATABASE_URL and that PostgreSQL is running.") from exc
    await _init(conn)
    return conn
