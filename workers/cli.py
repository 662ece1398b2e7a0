"""``pylota worker``: run an arq worker on the interactive queue (or, with ``--batch``, the batch
queue that computes embeddings), or check one is alive."""

from __future__ import annotations

import asyncio
import sys

import click
from arq.worker import Worker, async_check_health

from shared.config import Settings
from workers.settings import batch_worker_settings, worker_settings

__all__ = ["worker"]


@click.command()
@click.option("--check", is_flag=True,
              help="Exit 0 when a worker refreshed its health key recently, else 1 (for health checks).")
@click.option("--batch", is_flag=True,
              help="Serve the batch queue (embeddings) instead of the interactive one.")
def worker(check: bool, batch: bool) -> None:
    """Run an arq worker (scale with more processes: `docker compose up --scale worker=N`)."""
    settings = Settings.from_env()
    options = batch_worker_settings(settings) if batch else worker_settings(settings)
    if check:
        sys.exit(asyncio.run(async_check_health(options["redis_settings"], None,
                                                options["queue_name"])))
    Worker(**options).run()
