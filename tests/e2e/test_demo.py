"""``scripts/demo``, the README's first command, as a user runs it: it says it is running only
when its own front answers its own key (a fresh user's report of 3 December 2026: with another
server on the port it printed a key that did not work), and it leaves nothing running when it
fails."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import REDIS_URL, free_port

ROOT = Path(__file__).resolve().parents[2]


class _Answers(http.server.BaseHTTPRequestHandler):
    """Another server on the port that answers 200 to everything, as another clone's demo front
    on the same database answers this demo's key (a fresh user's report: the demo said it was
    running, with its own front stopped on the taken port and its workers left running)."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def taken_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def demo(db_url: str, state: Path, port: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PORT": str(port), "DATABASE_URL": db_url, "REDIS_URL": REDIS_URL,
           "PM_NAMESPACE": f"demo{uuid.uuid4().hex[:8]}", "DEMO_STATE": str(state)}
    return subprocess.run(["bash", str(ROOT / "scripts" / "demo")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def stop(state: Path) -> None:
    for pid_file in state.glob("*.pid"):
        try:
            os.kill(int(pid_file.read_text()), 15)
        except ProcessLookupError:
            pass


async def test_demo_fails_on_a_taken_port_and_runs_on_a_free_one(db_url: str, tmp_path: Path,
                                                                 taken_port: int) -> None:
    state = tmp_path / "state"
    try:
        failed = demo(db_url, state, taken_port)
        assert failed.returncode == 1, failed.stderr[-2000:]
        assert f"PORT={taken_port} is taken" in failed.stderr
        assert "is running" not in failed.stderr and failed.stdout == ""
        assert not list(state.glob("*.pid"))  # nothing was started
        # nor stored: the check comes before the import and the key (a fresh user's report:
        # it came after both, so each failed run left one more all-permission key)
        conn = await asyncpg.connect(db_url)
        try:
            assert await conn.fetchval("SELECT count(*) FROM api_keys") == 0
            assert await conn.fetchval("SELECT count(*) FROM messages") == 0
        finally:
            await conn.close()

        port = free_port()
        ran = demo(db_url, state, port)
        assert ran.returncode == 0, ran.stderr[-2000:]
        config = json.loads(ran.stdout)["mcpServers"]["pylota-mail"]
        assert config["url"] == f"http://127.0.0.1:{port}/mcp"
        assert config["type"] == "http"  # what Claude Code and VS Code call Streamable HTTP
        request = urllib.request.Request(
            config["url"], method="POST", headers={
                **config["headers"], "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-11-25"},
            data=b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200
            assert json.loads(answer.read()) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    finally:
        stop(state)
