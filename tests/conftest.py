"""Shared fixtures: the team kit, real PostgreSQL databases, Redis, a uvicorn front and an arq worker.

Every test run builds one template database by running the migrations; each test that asks for
``db_url`` gets its own ``CREATE DATABASE … TEMPLATE`` copy, so tests never see each other's rows.
Nothing of our own storage is mocked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import hypothesis
import pytest
import uvicorn
from redis.asyncio import Redis

from shared.config import Settings
from shared.db import Database, connect, migrate, open_database

ROOT = Path(__file__).resolve().parents[1]

# Hypothesis's per-example deadline (200 ms) is a timing assertion, which these tests never make
# (speed is measured in bench/): on a loaded two-core machine a pure function's example once
# took 257 ms and failed the run.
hypothesis.settings.register_profile("pylota", deadline=None)
hypothesis.settings.load_profile("pylota")
ADMIN_DSN = os.environ.get("PYLOTA_TEST_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("PYLOTA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
#: Every database a test makes is named ``{prefix}_{kind}_{random}``, so a run can share a server
#: with databases it must never touch.
DB_PREFIX = os.environ.get("PYLOTA_TEST_DB_PREFIX", "pylota")
#: Queues of this test run: a worker of another run or deployment on the same Redis never
#: takes its jobs.
NAMESPACE = f"pylota-test-{uuid.uuid4().hex[:8]}"


def kit_path() -> Path | None:
    """The team kit (``PYLOTA_KIT``, default ``../shared`` beside the repository), if present."""
    path = Path(os.environ.get("PYLOTA_KIT", ROOT.parent / "shared"))
    return path if (path / "corpus").is_dir() else None


@pytest.fixture(scope="session")
def kit() -> Path:
    """The team kit's path; skips the test with the reason when the kit is absent."""
    path = kit_path()
    if path is None:
        pytest.skip("team kit not found: set PYLOTA_KIT to the kit folder (default ../shared)")
    return path


def new_db_name(kind: str) -> str:
    """A new database name of this run: :data:`DB_PREFIX`, ``kind`` and 12 random hex digits."""
    return f"{DB_PREFIX}_{kind}_{uuid.uuid4().hex[:12]}"


def _dsn(name: str) -> str:
    return ADMIN_DSN.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(scope="session")
async def template_db() -> AsyncIterator[str]:
    """A migrated database used as the template of every test database."""
    name = new_db_name("tpl")
    admin = await asyncpg.connect(ADMIN_DSN)
    await admin.execute(f'CREATE DATABASE "{name}"')
    conn = await connect(_dsn(name))
    await migrate(conn)
    await conn.close()
    try:
        yield name
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def _fresh_db(template: str) -> tuple[str, str]:
    name = new_db_name("t")
    admin = await asyncpg.connect(ADMIN_DSN)
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    finally:
        await admin.close()
    return name, _dsn(name)


async def _drop_db(name: str) -> None:
    admin = await asyncpg.connect(ADMIN_DSN)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture
async def db_url(template_db: str) -> AsyncIterator[str]:
    """A fresh migrated database for one test."""
    name, dsn = await _fresh_db(template_db)
    yield dsn
    await _drop_db(name)


@pytest.fixture
async def conn(db_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection (with the project's codecs) to the test's own database."""
    c = await connect(db_url)
    yield c
    await c.close()


@pytest.fixture(scope="session")
async def redis() -> AsyncIterator[Redis]:
    """A client of the real Redis."""
    client = Redis.from_url(REDIS_URL)
    await client.ping()
    yield client
    await client.aclose()


def free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def settings_for(db_url: str, **overrides: object) -> Settings:
    """Settings of a test stack on ``db_url`` and the test Redis."""
    values: dict[str, object] = {"database_url": db_url, "redis_url": REDIS_URL,
                                 "pm_namespace": NAMESPACE,
                                 "pm_api_host": "mail.pylota.test",
                                 "pm_hash_key": "test-hash-key", "pm_log_level": "info"}
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def running_front(settings: Settings, **app_kwargs: object) -> AsyncIterator[str]:
    """Serve ``create_app(settings)`` on a real uvicorn; yields the ``/mcp`` URL."""
    from front.app import create_app
    from front.http_head import BoundedHead

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings, **app_kwargs), host="127.0.0.1",
                                           port=port, log_level="warning", lifespan="on",
                                           http=BoundedHead))  # as `pylota serve` runs it
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(15):
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        async with asyncio.timeout(15):
            await task


@contextlib.asynccontextmanager
async def running_worker(settings: Settings, *, batch: bool = False) -> AsyncIterator[None]:
    """Run a real worker process's loop (``workers.process.serve``, arq inside) in this process:
    the interactive queue (mail_wait, mail_deep_search), or with ``batch`` the batch queue
    (embeddings). Returns once this worker beats in Redis, so a front sees it (the worker set
    may still list a worker an earlier test killed: only a new live member counts)."""
    from shared.events import workers_key
    from workers.process import serve

    stop = asyncio.Event()
    queue = "batch" if batch else "interactive"
    key = workers_key(settings.pm_namespace, queue)
    redis = Redis.from_url(settings.redis_url)
    before = set(await redis.zrange(key, 0, -1))
    task = asyncio.create_task(serve(settings, queue, stop))
    try:
        async with asyncio.timeout(30):
            while not set(await redis.zrangebyscore(key, time.time(), "+inf")) - before:
                if task.done():
                    task.result()
                await asyncio.sleep(0.02)
        yield
    finally:
        await redis.aclose()
        stop.set()
        async with asyncio.timeout(15):
            await task


@contextlib.asynccontextmanager
async def database(db_url: str, size: int = 4) -> AsyncIterator[Database]:
    """A :class:`~shared.db.Database` on ``db_url`` for the block."""
    db = await open_database(db_url, size=size, acquire_seconds=5)
    try:
        yield db
    finally:
        await db.close()
