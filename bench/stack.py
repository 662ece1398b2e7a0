"""A throwaway Pylota Mail stack for the relevance command and the benchmark.

It creates its own database on the PostgreSQL of ``--admin-dsn``, sets it up with the ``pylota``
CLI exactly as a user would (migrate, tenants, identities, keys, import), starts the real front
(``pylota serve``), the batch worker (``pylota worker --batch``) and, when asked, an interactive
worker (``pylota worker``, which runs mail_deep_search) as processes, and speaks MCP to the front
over HTTP (legacy era, JSON responses). Server-side durations come from the front's ``tool_call``
log lines (``duration_ms``, spec section 7). Redis database 9 and a namespace of the stack's own
(``PM_NAMESPACE``) keep its queues apart from test runs and other stacks on the same Redis.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from redis import Redis

from shared.events import workers_key

__all__ = ["Stack", "percentile"]

ROOT = Path(__file__).resolve().parents[1]


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (0..100) by nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    """One database, one front and one batch worker; use as a context manager."""

    def __init__(self, admin_dsn: str, *, redis_url: str = "redis://127.0.0.1:6379/9",
                 embedder: str = "onnx", database: str | None = None, root: Path = ROOT,
                 pythonpath: list[Path] = ()) -> None:
        """``database``: use (and keep) this existing database instead of a new one. ``root``:
        the checkout whose ``pylota`` runs (another commit's worktree, for a baseline), with
        ``pythonpath`` after it on the import path."""
        self.name = database or f"pylota_bench_{uuid.uuid4().hex[:8]}"
        self.admin_dsn = admin_dsn
        self.dsn = admin_dsn.rsplit("/", 1)[0] + "/" + self.name
        self.keep = database is not None
        self.namespace = f"bench-{self.name}"
        self.redis_url = redis_url
        self.env = {**os.environ, "DATABASE_URL": self.dsn, "REDIS_URL": redis_url,
                    "PM_NAMESPACE": self.namespace, "PM_EMBEDDER": embedder,
                    "PM_EMBED_POLL_SECONDS": "1", "PM_RL_API_PER_MINUTE": "100000",
                    "PM_RL_SEARCH_PER_MINUTE": "100000", "PM_RL_AGENTIC_PER_MINUTE": "100000",
                    "PM_API_HOST": "bench.pylota.test",
                    # no DKIM key lookups: these machines have no DNS to ask
                    "PM_DKIM_VERIFY": "false"}
        if pythonpath:
            self.env["PYTHONPATH"] = os.pathsep.join(map(str, pythonpath))
        self.root = root
        self.logs = Path(tempfile.mkdtemp(prefix="pylota-bench-"))
        self.processes: list[subprocess.Popen[bytes]] = []
        self.url = ""
        self._http = httpx.Client(timeout=120)

    # --- CLI and database -------------------------------------------------------------------

    def cli(self, *args: str) -> str:
        """Run ``pylota ARGS`` against the stack's database; returns stdout, raises on failure."""
        done = subprocess.run([sys.executable, "-m", "cli", *args], env=self.env, cwd=self.root,
                              capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(f"pylota {' '.join(args)} failed:\n{done.stderr}")
        return done.stdout.strip()

    def sql(self, query: str, *params: Any) -> list[asyncpg.Record]:
        """Rows of ``query`` on the stack's database (for scoring and waiting only)."""
        async def run() -> list[asyncpg.Record]:
            conn = await asyncpg.connect(self.dsn)
            try:
                return await conn.fetch(query, *params)
            finally:
                await conn.close()
        return asyncio.run(run())

    def mailbox(self, tenant: str, address: str, *paths: Path, mboxo: bool = False) -> dict[str, Any]:
        """Create ``tenant`` (once) and an identity at ``address``, import ``paths`` into it, and
        mint an identity key. Returns the identity id, the key token and the import summary.
        An identity that exists already (a reused database) is only given a new key."""
        if not self.sql("SELECT 1 FROM tenants WHERE name = $1", tenant):
            self.cli("tenants", "create", tenant)
        existing = self.sql("SELECT identity_id FROM identity_addresses WHERE address = $1", address)
        if existing:
            token = self.cli("keys", "create", "--tenant", tenant, "--identity", address,
                             "--permissions", "all")
            return {"identity_id": existing[0]["identity_id"], "token": token,
                    "import": {"imported": 0}}
        identity_id = self.cli("identities", "create", "--tenant", tenant, "--address", address)
        token = self.cli("keys", "create", "--tenant", tenant, "--identity", identity_id,
                         "--permissions", "all")
        summary = {}
        if paths:
            summary = json.loads(self.cli("import", "--identity", identity_id, "--json",
                                          "--no-progress", *(["--mboxo"] if mboxo else []),
                                          *map(str, paths)))
        return {"identity_id": identity_id, "token": token, "import": summary}

    # --- processes ----------------------------------------------------------------------------

    def __enter__(self) -> Stack:
        self.cli("migrate")
        return self

    def start(self, *, batch_worker: bool = True, interactive_worker: bool = False) -> None:
        """Start the front (and the batch worker, and an interactive worker) and wait until the
        front answers and the interactive worker beats."""
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}/mcp"
        self._spawn("front", "serve", "--port", str(port))
        if batch_worker:
            self._spawn("batch", "worker", "--batch")
        if interactive_worker:
            self._spawn("worker", "worker")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if self._http.post(self.url, json={}).status_code in (401, 400, 415):
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        else:
            raise RuntimeError(f"the front did not start; see {self.logs / 'front.log'}")
        if interactive_worker:
            self._wait_beating(deadline)

    def start_batch_worker(self) -> None:
        """Start one batch worker (``pylota worker --batch``) alone, without a front."""
        self._spawn("batch", "worker", "--batch")

    def stop(self) -> None:
        """Stop the processes started so far."""
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        self.processes.clear()

    def _wait_beating(self, deadline: float) -> None:
        """Wait until an interactive worker beats (it warms its model first)."""
        redis = Redis.from_url(self.redis_url)
        try:
            while not redis.zcount(workers_key(self.namespace, "interactive"), time.time(),
                                   "+inf"):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the worker did not start; see {self.logs / 'worker.log'}")
                time.sleep(0.2)
        finally:
            redis.close()

    def _spawn(self, name: str, *args: str) -> None:
        log = open(self.logs / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        self.processes.append(subprocess.Popen([sys.executable, "-m", "cli", *args],
                                               env=self.env, cwd=self.root, stdout=log, stderr=log))

    def wait_embedded(self, timeout: float = 3600) -> float:
        """Wait until the embedding queue is empty; returns the seconds waited."""
        started = time.monotonic()
        while self.sql("SELECT 1 FROM embedding_queue LIMIT 1"):
            if time.monotonic() - started > timeout:
                raise TimeoutError("embeddings did not finish")
            time.sleep(1)
        return time.monotonic() - started

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._http.close()
        if not self.keep:
            async def drop() -> None:
                admin = await asyncpg.connect(self.admin_dsn)
                try:
                    await admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
                finally:
                    await admin.close()
            asyncio.run(drop())

    # --- MCP ----------------------------------------------------------------------------------

    def call(self, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """``tools/call`` through the front; returns structuredContent, raises on a tool error."""
        response = self._http.post(self.url, headers={
            "Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25",
            "Accept": "application/json, text/event-stream"}, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}})
        body = response.json()
        if "error" in body:
            raise RuntimeError(f"{tool}: {body['error']}")
        result = body["result"]
        if result.get("isError"):
            raise RuntimeError(f"{tool}: {result['content'][0]['text']}")
        return result["structuredContent"]

    def durations(self, tool: str) -> list[float]:
        """Server-side ``duration_ms`` of every successful ``tool`` call so far, in order."""
        found = []
        for line in (self.logs / "front.log").read_text(errors="replace").splitlines():
            if '"tool_call"' in line:
                event = json.loads(line)
                if event.get("tool") == tool and event.get("outcome") == "ok":
                    found.append(float(event["duration_ms"]))
        return found
