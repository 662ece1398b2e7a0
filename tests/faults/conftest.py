"""Fixtures of the fault suite: a Redis of the test's own, a relay to PostgreSQL, and the real
``pylota`` processes, all stopped when the test ends (see ``tests/faults/kit.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.faults.kit import OwnRedis, Relay, Service, start_front, start_worker


@pytest.fixture
async def own_redis() -> AsyncIterator[OwnRedis]:
    server = OwnRedis()
    await server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def relay() -> AsyncIterator[Relay]:
    relayed = Relay()
    await relayed.start()
    try:
        yield relayed
    finally:
        await relayed.cut()


class Services:
    """Starts ``pylota`` processes for one test, each logging to its own file; kills what is
    still running at the end."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self.started: list[Service] = []

    async def front(self, env: dict[str, str]) -> tuple[Service, str]:
        front, base = await start_front(env, self._folder / f"front-{len(self.started)}.log")
        self.started.append(front)
        return front, base

    async def worker(self, env: dict[str, str], *, batch: bool = False) -> Service:
        worker = await start_worker(env, self._folder / f"worker-{len(self.started)}.log",
                                    batch=batch)
        self.started.append(worker)
        return worker

    async def stack(self, env: dict[str, str], *, batch: bool = False
                    ) -> tuple[Service, str, list[Service]]:
        """A front and an interactive worker (and a batch worker), started side by side:
        the front, its base URL and the workers."""
        started = await asyncio.gather(self.front(env), self.worker(env),
                                       *([self.worker(env, batch=True)] if batch else []))
        (front, base), *workers = started
        return front, base, workers


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    launched = Services(tmp_path)
    try:
        yield launched
    finally:
        for service in launched.started:
            service.kill()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """A client with no connection limit of its own (a burst must reach the server whole)."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(60),
                                 limits=httpx.Limits(max_connections=None,
                                                     max_keepalive_connections=None)) as client:
        yield client
