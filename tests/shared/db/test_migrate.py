"""``pylota migrate``: idempotent, and safe from two processes at once."""

from __future__ import annotations

import asyncio

import asyncpg

from shared.db import connect, ensure_database, migrate
from shared.db.migrate import available
from tests.conftest import ADMIN_DSN, _drop_db, _dsn, new_db_name
from tests.e2e.harness import pylota


async def test_two_processes_migrate_an_empty_database_once():
    name = new_db_name("m")
    dsn = _dsn(name)
    try:
        assert await ensure_database(dsn) is True
        assert await ensure_database(dsn) is False
        first, second = await asyncio.gather(
            asyncio.to_thread(pylota, dsn, "migrate"), asyncio.to_thread(pylota, dsn, "migrate"))
        assert first.returncode == second.returncode == 0, first.stderr + second.stderr
        outputs = sorted([first.stdout.strip(), second.stdout.strip()])
        versions = [v for v, _, _ in available()]
        assert outputs[0] == "applied 0 migration(s)"
        assert outputs[1].startswith(f"applied {len(versions)} migration(s)")
        conn = await connect(dsn)
        try:
            rows = await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")
            assert [r["version"] for r in rows] == versions
            assert await migrate(conn) == []
        finally:
            await conn.close()
    finally:
        await _drop_db(name)


async def test_migrate_creates_a_missing_database_from_the_cli():
    name = new_db_name("m")
    try:
        done = pylota(_dsn(name), "migrate")
        assert done.returncode == 0, done.stderr
        admin = await asyncpg.connect(ADMIN_DSN)
        try:
            assert await admin.fetchval("SELECT true FROM pg_database WHERE datname = $1", name)
        finally:
            await admin.close()
    finally:
        await _drop_db(name)


def test_migrate_names_the_problem_when_postgres_is_unreachable():
    done = pylota("postgresql://postgres@127.0.0.1:1/nothing", "migrate")
    assert done.returncode == 1  # out of reach: running it again may work (cli.running)
    assert "PostgreSQL is not reachable" in done.stderr
    assert "fix: Check DATABASE_URL" in done.stderr
