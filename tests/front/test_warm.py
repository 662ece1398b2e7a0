"""Warming a front before it serves (front.warm): every step runs on a real PostgreSQL and Redis,
so a statement that changed shape fails here instead of being skipped quietly at start-up."""

from __future__ import annotations

import json

from front.resources import open_resources
from front.warm import WARM_CONNECTIONS, warm
from shared.logs import configure
from shared.tools.registry import TOOLS
from tests.conftest import settings_for


def logged(capsys) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().err.splitlines()]


async def test_warming_runs_every_step_and_leaves_the_connections_open(db_url, capsys):
    configure("info")
    settings = settings_for(db_url, pm_embedder="hash")
    async with open_resources(settings, TOOLS) as resources:
        capsys.readouterr()
        await warm(resources)
        assert "warm_up_incomplete" not in [line["event"] for line in logged(capsys)]
        assert resources.db.pool.get_size() >= WARM_CONNECTIONS
        # each warmed connection has prepared a search's hits statement (its snippets)
        async with resources.db.acquire() as conn:
            assert await conn.fetchval(
                "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE"
                " '%ts_headline%' AND statement NOT LIKE '%pg_prepared_statements%'") == 1


async def test_warming_never_stops_a_start_when_postgresql_is_down(capsys):
    configure("info")
    settings = settings_for("postgresql://postgres@127.0.0.1:1/nowhere", pm_embedder="hash")
    async with open_resources(settings, TOOLS) as resources:
        capsys.readouterr()
        await warm(resources)  # returns: the front starts and serves once PostgreSQL is back
        assert "warm_up_incomplete" in [line["event"] for line in logged(capsys)]
