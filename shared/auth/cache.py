"""Authenticated keys kept in a front's memory, forgotten on every change (issue 14).

Reading the key was one PostgreSQL round trip on every request, as costly as the tool's own read.
A :class:`KeyCache` keeps what :func:`~shared.auth.keys.read_key` returned, by the SHA-256 of the
token (never the token), and decides every request afresh from it with
:func:`~shared.auth.keys.admit_key`, so an expiry takes effect on time without PostgreSQL.

It is correct only while it hears every change: migration 0016 makes PostgreSQL announce each
change to ``api_keys``, ``partners``, ``tenants``, ``identities`` and ``identity_addresses`` on the
channel :data:`CHANNEL`, and the cache listens on a connection of its own. Then:

* a notification empties the cache (changes are operator actions, rare; one rule is simplest);
* a read that started before a notification is not kept (a generation counter), so a key read
  just before its revocation cannot come back after the notification emptied the cache;
* while the listening connection is down (PostgreSQL restarting, a network cut) the cache is
  empty and unused, and every request reads its key as before; it is emptied again once the
  connection is back, since changes made meanwhile were not heard. A connection that died
  silently is found by a check every :data:`CHECK_SECONDS` that may take :data:`PING_SECONDS`.

So a revocation, suspension or any other change takes effect when its notification reaches the
front: PostgreSQL sends it as the change commits, milliseconds on one network (the README states
the bound the tests hold it to). Unknown keys are never kept: a caller guessing keys cannot fill
the memory, which is bounded anyway by :data:`MAX_KEYS`.

``last_used_at`` is still written at most once a minute per key
(:data:`~shared.auth.keys.LAST_USED_RESOLUTION`), for cached keys too.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import datetime, timezone

import asyncpg

from shared.auth.keys import (KeyRecord, Principal, admit_key, bearer_token, hash_token, note_use,
                              read_key, use_is_stale)
from shared.db import Database
from shared.errors import ErrorCode, PylotaError
from shared.logs import get_logger

__all__ = ["KeyCache", "CHANNEL", "MAX_KEYS", "CHECK_SECONDS", "PING_SECONDS", "RECONNECT_DELAYS",
           "APPLICATION_NAME"]

log = get_logger("shared.auth.cache")

#: The channel migration 0016's triggers notify on.
CHANNEL = "pylota_auth"
#: Most keys one front keeps; past it the oldest kept is dropped (it is read again when used).
MAX_KEYS = 10_000
#: How often the listening connection is checked, and the longest a check may take: a
#: silently dead connection (no FIN, no RST) goes unnoticed, and a change unheard, for at most
#: their sum, 2 s.
CHECK_SECONDS = 1.0
PING_SECONDS = 1.0
#: Seconds between attempts to listen again after the connection is lost, the last repeated.
RECONNECT_DELAYS = (0.5, 1.0, 2.0, 5.0)
#: The listening connection's ``application_name`` (``pg_stat_activity`` shows it).
APPLICATION_NAME = "pylota key cache"
#: Longest wait to open the listening connection.
CONNECT_SECONDS = 5.0


@dataclass(slots=True)
class _Entry:
    record: KeyRecord
    #: ``last_used_at`` as this front last read or wrote it.
    used_at: datetime | None


class KeyCache:
    """The keys one front has authenticated; see the module docstring."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._entries: dict[bytes, _Entry] = {}
        self._generation = 0
        self._listening = False
        self._listened = False  # whether the current attempt got to listen
        self._task: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        """How many keys are kept now."""
        return len(self._entries)

    @property
    def listening(self) -> bool:
        """Whether changes are being heard, so kept keys are used."""
        return self._listening

    async def start(self) -> None:
        """Start listening in the background (returns at once; PostgreSQL may be down)."""
        self._task = asyncio.create_task(self._listen_forever(), name="key-cache")

    async def stop(self) -> None:
        """Stop listening and forget every key."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._forget(listening=False)

    async def authenticate(self, db: Database, authorization: str | None) -> Principal:
        """:func:`shared.auth.keys.authenticate`, from memory when the key is kept.

        Raises:
            PylotaError: as :func:`~shared.auth.keys.authenticate`; ``unavailable`` when the key
                must be read and PostgreSQL cannot be reached.
        """
        token = bearer_token(authorization)
        digest = hash_token(token)
        now = datetime.now(timezone.utc)
        entry = self._entries.get(digest) if self._listening else None
        if entry is None:
            generation = self._generation
            async with db.acquire() as conn:
                record = await read_key(conn, digest)
            if record is None:
                raise PylotaError(ErrorCode.UNAUTHENTICATED, "This API key is not known.")
            entry = _Entry(record, record.last_used_at)
            # Kept only if no change was announced since the read began (module docstring).
            if self._listening and generation == self._generation:
                self._keep(digest, entry)
        principal = admit_key(entry.record, token, now)
        if use_is_stale(entry.used_at, now):
            entry.used_at = now  # the calls that follow meanwhile do not write it again
            async with db.acquire() as conn:
                await note_use(conn, entry.record.key_id)
        return principal

    def _keep(self, digest: bytes, entry: _Entry) -> None:
        if len(self._entries) >= MAX_KEYS:
            del self._entries[next(iter(self._entries))]
        self._entries[digest] = entry

    def _forget(self, *, listening: bool) -> None:
        self._generation += 1
        self._entries.clear()
        self._listening = listening

    def _heard(self, *_: object) -> None:
        self._forget(listening=self._listening)

    async def _listen_forever(self) -> None:
        attempt = 0
        down_logged = False  # one line an outage: at its start, not at each retry
        while True:
            self._listened = False
            try:
                await self._listen()
                error = "ConnectionLost"
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any loss: read keys from PostgreSQL
                error = type(exc).__name__
            self._forget(listening=False)
            if self._listened or not down_logged:
                log.warning("key_cache_not_listening", error=error)
                down_logged = True
            attempt = 0 if self._listened else attempt + 1
            await asyncio.sleep(RECONNECT_DELAYS[min(attempt, len(RECONNECT_DELAYS) - 1)])

    async def _listen(self) -> None:
        """Listen until the connection is lost; raises when it cannot be opened, or a check
        fails or takes longer than :data:`PING_SECONDS`."""
        conn = await asyncpg.connect(self._dsn, timeout=CONNECT_SECONDS,
                                     server_settings={"application_name": APPLICATION_NAME})
        lost = asyncio.Event()
        try:
            conn.add_termination_listener(lambda _conn: lost.set())
            await conn.add_listener(CHANNEL, self._heard)
            # Changes made while nobody listened were not heard: start from nothing.
            self._forget(listening=True)
            self._listened = True
            log.info("key_cache_listening")
            while not lost.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(CHECK_SECONDS):
                        await lost.wait()
                if not lost.is_set():
                    async with asyncio.timeout(PING_SECONDS):
                        await conn.fetchval("SELECT 1")
        finally:
            self._forget(listening=False)
            conn.terminate()
