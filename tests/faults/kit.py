"""Building blocks of the fault suite (issue 9): the real ``pylota serve`` and ``pylota worker``
as processes, a Redis server of the test's own that it stops and starts at will, and a TCP relay
to PostgreSQL that it cuts and restores — an outage of either, without touching the machine's
servers that everyone else's tests use.

* :class:`OwnRedis`: ``redis-server`` on a free port; :meth:`OwnRedis.stop` kills it (SIGKILL:
  an outage, not a shutdown) and :meth:`OwnRedis.start` brings it back on the same port, empty.
* :class:`Relay`: ``127.0.0.1:port`` → PostgreSQL; :meth:`Relay.cut` closes every connection
  through it and refuses new ones (to its clients, PostgreSQL is down), :meth:`Relay.restore`
  listens again.
* :class:`Service`: one ``pylota`` command running, its JSON log lines (stderr) in a file.
* :func:`start_front`, :func:`start_worker`: the commands as an operator starts them, returning
  once they answer (the front) or beat in Redis (a worker).
* :func:`eventually`: wait for a condition with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
from redis.asyncio import Redis
from redis.exceptions import RedisError

from shared.events import workers_key
from tests.conftest import ROOT, free_port

T = TypeVar("T")

#: The API host of the suite's fronts (the only Origin they accept is https://this).
API_HOST = "mail.pylota.test"
#: Exit codes of a process that stopped cleanly on SIGTERM: uvicorn shuts down, then raises the
#: signal it caught again (so it ends "killed by SIGTERM" after a graceful shutdown).
STOPPED = (0, -signal.SIGTERM)
#: The liveness beat of the suite's workers (PM_JOB_HEARTBEAT_SECONDS).
HEARTBEAT = 1.0


async def eventually(check: Callable[[], Awaitable[T | None] | T | None], within: float,
                     what: str, every: float = 0.05) -> T:
    """Call ``check`` until it returns something truthy (which is returned), failing the test
    with ``what`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if asyncio.iscoroutine(value) or isinstance(value, Awaitable):
            value = await value  # type: ignore[misc]
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {within:g} s: {what}")
        await asyncio.sleep(every)


class OwnRedis:
    """A ``redis-server`` of this test alone, on a fixed free port across restarts."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            import pytest

            pytest.skip("redis-server is not installed: the fault suite needs a Redis of its own")
        self._binary = binary
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        """Start the server and return once it answers PING."""
        self._process = subprocess.Popen(
            [self._binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = Redis.from_url(self.url)
        try:
            async def up() -> bool:
                assert self._process is not None and self._process.poll() is None, \
                    "redis-server exited"
                with contextlib.suppress(OSError, RedisError):
                    return bool(await client.ping())
                return False

            await eventually(up, 10, "redis-server answers PING")
        finally:
            await client.aclose()

    def stop(self) -> None:
        """Kill the server (its data goes with it: a restarted Redis is empty)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(10)

    def client(self) -> Redis:
        return Redis.from_url(self.url)


class Relay:
    """A TCP relay to PostgreSQL (``127.0.0.1:5432``) that can be cut and restored."""

    def __init__(self, upstream_port: int = 5432) -> None:
        self.port = free_port()
        self._upstream = upstream_port
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self._flowing = asyncio.Event()
        self._flowing.set()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await reader.read(65536):
                await self._flowing.wait()
                writer.write(data)
                await writer.drain()
        writer.close()

    def stall(self) -> None:
        """Stop passing bytes on, keeping every connection open (a stalled network)."""
        self._flowing.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream = await asyncio.open_connection("127.0.0.1", self._upstream)
        except OSError:
            writer.close()
            return
        pair = {writer, upstream}
        self._writers |= pair
        try:
            await asyncio.gather(self._pipe(reader, upstream), self._pipe(upstream_reader, writer))
        finally:
            self._writers -= pair

    async def start(self) -> None:
        """Listen (again) on :attr:`port`."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def cut(self) -> None:
        """Close every relayed connection and stop listening: connecting is refused."""
        self._flowing.set()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()

    def connections(self) -> int:
        """Connections relayed now."""
        return len(self._writers) // 2

    def dsn(self, db_url: str) -> str:
        """``db_url`` through this relay."""
        return db_url.replace(f"127.0.0.1:{self._upstream}", f"127.0.0.1:{self.port}")


class Service:
    """A running ``pylota`` command; its stderr (the JSON logs) goes to ``log_path``."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.process = subprocess.Popen([sys.executable, "-m", "cli", *argv], env=env, cwd=ROOT,
                                        stdout=self._log, stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        return self.process.poll() is None

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def lines(self) -> list[dict[str, Any]]:
        """The JSON log lines written so far."""
        found = []
        for line in self.text().splitlines():
            with contextlib.suppress(ValueError):
                value = json.loads(line)
                if isinstance(value, dict):
                    found.append(value)
        return found

    def events(self, event: str) -> list[dict[str, Any]]:
        return [line for line in self.lines() if line.get("event") == event]

    async def stop(self, sig: int = signal.SIGTERM, within: float = 15) -> int:
        """Send ``sig`` and wait up to ``within`` seconds for the exit; returns the exit code
        (fails the test, after a SIGKILL, when the process outlives the bound)."""
        if self.alive():
            self.process.send_signal(sig)
            try:
                await eventually(lambda: not self.alive(), within,
                                 f"{self.name} exits on signal {sig}")
            except AssertionError:
                self.process.kill()
                self.process.wait(10)
                raise
        self._log.close()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL, for clean-up (no bound asserted)."""
        if self.alive():
            self.process.kill()
            self.process.wait(10)
        self._log.close()


def stack_env(db_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of the suite's processes: a namespace of their own, the hash embedder,
    no DKIM lookups (the machines have no DNS), the suite's heartbeat, ``extra`` last."""
    return {**os.environ, "DATABASE_URL": db_url, "REDIS_URL": redis_url,
            "PM_NAMESPACE": f"pylota-fault-{uuid.uuid4().hex[:8]}", "PM_API_HOST": API_HOST,
            "PM_HASH_KEY": "test-hash-key", "PM_EMBEDDER": "hash", "PM_DKIM_VERIFY": "false",
            "PM_LOG_LEVEL": "info", "PM_JOB_HEARTBEAT_SECONDS": str(HEARTBEAT),
            "PM_STREAM_HEARTBEAT_SECONDS": "0.5", **extra}


async def start_front(env: dict[str, str], log_path: Path) -> tuple[Service, str]:
    """``pylota serve`` on a free port; returns it and its base URL once it answers."""
    port = free_port()
    front = Service("front", ["serve", "--host", "127.0.0.1", "--port", str(port)], env,
                    log_path)
    base = f"http://127.0.0.1:{port}"

    async def answers() -> bool:
        assert front.alive(), f"the front exited:\n{front.text()[-3000:]}"
        with contextlib.suppress(httpx.HTTPError):
            async with httpx.AsyncClient(timeout=2) as http:
                response = await http.post(f"{base}/mcp", content=b"{}", headers={
                    "content-type": "application/json"})
                return response.status_code < 500
        return False

    try:
        await eventually(answers, 30, "pylota serve answers", every=0.1)
    except BaseException:
        front.kill()
        raise
    return front, base


async def start_worker(env: dict[str, str], log_path: Path, *, batch: bool = False) -> Service:
    """``pylota worker`` (``--batch``); returns it once a new worker beats on its queue."""
    queue = "batch" if batch else "interactive"
    redis = Redis.from_url(env["REDIS_URL"])
    key = workers_key(env["PM_NAMESPACE"], queue)
    try:
        before = set(await redis.zrange(key, 0, -1))
        worker = Service(f"{queue} worker", ["worker", *(["--batch"] if batch else [])], env,
                         log_path)

        async def beats() -> bool:
            assert worker.alive(), f"the worker exited:\n{worker.text()[-3000:]}"
            return bool(set(await redis.zrangebyscore(key, time.time(), "+inf")) - before)

        try:
            await eventually(beats, 30, f"the {queue} worker beats", every=0.1)
        except BaseException:
            worker.kill()
            raise
    finally:
        await redis.aclose()
    return worker


def tool_error(message: dict[str, Any]) -> dict[str, Any] | None:
    """The error envelope of a ``tools/call`` response that is a tool error (the envelope is
    its text content, spec section 5), or None when the call succeeded."""
    result = message["result"]
    if not result.get("isError"):
        return None
    return json.loads(result["content"][0]["text"])["error"]


def no_traceback(service: Service) -> None:
    """The service's log holds no Python traceback."""
    assert "Traceback" not in service.text(), service.text()[-4000:]
