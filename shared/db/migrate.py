"""Numbered SQL migrations, applied in order under an advisory lock.

Files are ``migrations/NNNN_name.sql``. Each runs in its own transaction together with its row in
``schema_migrations``; the session-level advisory lock makes two ``pylota migrate`` processes
started at once apply each file exactly once (the second waits, then finds nothing to do).
Numbers need not be contiguous and are never reused: there is no 12 (the number went to work that
never landed), and a database records the numbers it applied.
"""

from __future__ import annotations

import re
from importlib import resources

import asyncpg

__all__ = ["migrate", "available", "ensure_database"]

#: Arbitrary but fixed key of the migration advisory lock.
_LOCK_KEY = 0x50_594C_4F54  # "PYLOT"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def available() -> list[tuple[int, str, str]]:
    """Return ``(version, name, sql)`` for every migration file, in version order."""
    found = []
    for entry in resources.files("shared.db.migrations").iterdir():
        if m := _NAME.match(entry.name):
            found.append((int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    return sorted(found)


async def migrate(conn: asyncpg.Connection) -> list[int]:
    """Apply the migrations ``conn``'s database lacks; return the versions applied."""
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        applied = []
        for version, name, sql in available():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name
                )
            applied.append(version)
        return applied
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)


async def ensure_database(dsn: str) -> bool:
    """Create the database named in ``dsn`` when it does not exist; True when it was created.

    Connects to the server's ``postgres`` database to do so, which needs the CREATEDB privilege.
    """
    try:
        conn = await asyncpg.connect(dsn)
    except asyncpg.InvalidCatalogNameError:
        pass
    else:
        await conn.close()
        return False
    base, _, rest = dsn.rpartition("/")
    name, _, query = rest.partition("?")
    admin = await asyncpg.connect(f"{base}/postgres" + (f"?{query}" if query else ""))
    try:
        quoted = '"' + name.replace('"', '""') + '"'
        await admin.execute(f"CREATE DATABASE {quoted}")
    except asyncpg.DuplicateDatabaseError:
        return False
    finally:
        await admin.close()
    return True
