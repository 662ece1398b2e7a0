"""``pylota worker``: run the arq worker on the interactive queue, or check one is alive."""

from __future__ import annotations

import asyncio
import sys

import click
from arq.worker import Worker, async_check_health

from shared.config import Settings
from workers.settings import worker_settings

__all__ = ["worker"]


@click.command()
@click.option("--check", is_flag=True,
              help="Exit 0 when a worker refreshed its health key recently, else 1 (for health checks).")
def worker(check: bool) -> None:
    """Run an arq worker (scale with more processes: `docker compose up --scale worker=N`)."""
    options = worker_settings(Settings.from_env())
    if check:
        sys.exit(asyncio.run(async_check_health(options["redis_settings"], None,
                                                options["queue_name"])))
    Worker(**options).run()
