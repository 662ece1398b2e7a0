"""Worker tools end cleanly, never at their deadline (issue 8): a worker killed with SIGKILL
mid-``mail_wait`` ends the client's call — the official Python SDK, in both eras — with a
retryable ``unavailable`` tool error within the job heartbeat plus 2 s; with no worker running, a
call is refused at once instead of queued."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import httpx
from arq.constants import abort_jobs_ss
import msgspec
import pytest
from redis.asyncio import Redis

from front.relay import ABORT_KEEP_SECONDS
from shared.events import key_jobs_key, queue_name, workers_key
from tests.conftest import NAMESPACE, REDIS_URL, ROOT, running_front, running_worker, settings_for
from tests.e2e.harness import sdk_client
from tests.e2e.transport_kit import keyed_identity

#: The heartbeat the test chooses (PM_JOB_HEARTBEAT_SECONDS); the bound is this plus 2 s.
HEARTBEAT = 1.0


def envelope(result) -> dict:
    return msgspec.json.decode(result.content[0].text)["error"]


async def start_worker(db_url: str, **settings: str) -> subprocess.Popen:
    """``pylota worker`` as an operator starts it (``settings``: more environment variables),
    returning once it beats in Redis."""
    env = {**os.environ, "DATABASE_URL": db_url, "REDIS_URL": REDIS_URL,
           "PM_NAMESPACE": NAMESPACE, "PM_JOB_HEARTBEAT_SECONDS": str(HEARTBEAT),
           "PM_STREAM_HEARTBEAT_SECONDS": "0.2", "PM_EMBEDDER": "hash", **settings}
    process = subprocess.Popen([sys.executable, "-m", "cli", "worker"], env=env, cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    redis = Redis.from_url(REDIS_URL)
    try:
        async with asyncio.timeout(30):
            before = await redis.zcard(workers_key(NAMESPACE, "interactive"))
            while await redis.zcard(workers_key(NAMESPACE, "interactive")) <= before:
                assert process.poll() is None, "the worker exited"
                await asyncio.sleep(0.05)
    finally:
        await redis.aclose()
    return process


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_worker_killed_mid_wait_ends_the_call_retryably_within_the_heartbeat(
        db_url, conn, mode):
    _, _, _, token = await keyed_identity(conn, "desk@acme.example")
    settings = settings_for(db_url, pm_job_heartbeat_seconds=HEARTBEAT,
                            pm_stream_heartbeat_seconds=0.2)
    worker = await start_worker(db_url)
    try:
        async with running_front(settings) as url, sdk_client(url, token, mode) as client:
            waiting = asyncio.Event()

            async def on_progress(progress: float, total: float | None, message: str | None):
                waiting.set()  # the job is running on the worker

            call = asyncio.create_task(client.call_tool(
                "mail_wait", {"timeout_seconds": 30}, progress_callback=on_progress))
            async with asyncio.timeout(15):
                await waiting.wait()
            worker.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            async with asyncio.timeout(15):
                result = await call
            elapsed = time.monotonic() - killed
    finally:
        worker.kill()
        worker.wait(10)
    assert result.is_error
    error = envelope(result)
    assert error["code"] == "unavailable" and error["retryable"] is True
    assert "worker" in error["message"]
    assert elapsed <= HEARTBEAT + 2, f"ended {elapsed:.2f} s after the kill"


async def test_with_no_worker_a_wait_is_refused_at_once(db_url, conn):
    _, _, _, token = await keyed_identity(conn, "desk@acme.example")
    settings = settings_for(db_url, pm_namespace=f"{NAMESPACE}-noworker")
    async with running_front(settings) as url, sdk_client(url, token) as client:
        started = time.monotonic()
        result = await client.call_tool("mail_wait", {"timeout_seconds": 30})
        took = time.monotonic() - started
    assert result.is_error and envelope(result)["code"] == "unavailable"
    assert "No worker" in envelope(result)["message"]
    assert took < 2  # refused when asked, not after the 30 s or any deadline


async def _leave_mid_wait(url: str, request: bytes) -> None:
    """Send ``request`` on a raw connection, wait until its job is surely running, then go."""
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    _, writer = await asyncio.open_connection(host, int(port))
    writer.write(request)
    await writer.drain()
    await asyncio.sleep(1.0)
    writer.close()
    await writer.wait_closed()


async def test_waits_answered_as_json_neither_hold_the_ceiling_nor_outlive_their_client(
        db_url, conn, redis, capsys):
    """A wait answered as JSON (a REST long poll, or MCP without SSE) costs the front next to
    nothing, so it does not count against PM_MAX_IN_FLIGHT: three of them on a ceiling of 2
    leave the front answering (before, every other request got 503 until they ended). And when
    its client goes away, its job is stopped at once and its line says 499 ``client_closed``
    (before, the wait ran out its seconds on a worker for nobody)."""
    _, identity_id, _, token = await keyed_identity(conn, "desk@acme.example")
    settings = settings_for(db_url, pm_max_in_flight=2)
    auth = {"Authorization": f"Bearer {token}"}
    queue = queue_name(settings.pm_namespace, "interactive")
    async with running_front(settings) as url, running_worker(settings):
        base = url.removesuffix("/mcp")
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            polls = []
            for n in range(1, 4):  # each once the one before waits on its job
                polls.append(asyncio.create_task(http.get(
                    f"/v1/identities/{identity_id}/wait", params={"timeout": 3}, headers=auth)))
                async with asyncio.timeout(10):
                    while await redis.zcard(queue) < n:
                        await asyncio.sleep(0.02)
            meanwhile = await http.get("/v1/identities", headers=auth)
            answered = await asyncio.gather(*polls)
        assert meanwhile.status_code == 200, meanwhile.text
        assert [r.status_code for r in answered] == [200] * 3
        assert all(r.json()["timed_out"] for r in answered)

        # arq never prunes its abort set: stopping a job prunes what is past ABORT_KEEP_SECONDS
        stale, fresh = f"stale-{identity_id}", f"fresh-{identity_id}"
        await redis.zadd(abort_jobs_ss, {stale: (time.time() - ABORT_KEEP_SECONDS - 1) * 1000,
                                         fresh: time.time() * 1000})
        capsys.readouterr()
        host = base.removeprefix("http://")
        mcp = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "mail_wait", "arguments": {"timeout_seconds": 30}}})
        for request in (
                f"GET /v1/identities/{identity_id}/wait?timeout=30 HTTP/1.1\r\nHost: {host}\r\n"
                f"Authorization: Bearer {token}\r\n\r\n".encode(),
                f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/json\r\nAccept: application/json\r\n"
                f"MCP-Protocol-Version: 2025-11-25\r\n"
                f"Content-Length: {len(mcp)}\r\n\r\n".encode() + mcp):
            await _leave_mid_wait(url, request)
            began = time.monotonic()
            async with asyncio.timeout(5):
                while await redis.zcard(queue):
                    await asyncio.sleep(0.05)
            assert time.monotonic() - began < 3, "the abandoned wait's job was not stopped"
        assert await redis.zscore(abort_jobs_ss, stale) is None
        assert await redis.zrem(abort_jobs_ss, fresh) == 1
        lines = [msgspec.json.decode(line) for line in capsys.readouterr().err.splitlines()
                 if line.startswith("{") and '"request"' in line]
        assert [(line["status"], line.get("error_code")) for line in lines] == [
            (499, "client_closed")] * 2


async def test_one_key_runs_at_most_pm_jobs_per_key_waits_and_other_keys_still_wait(
        db_url, conn, redis):
    """Every tenant shares the workers' slots, and a mail_wait holds one for up to 60 s for one
    RL_API unit: one key holding 200 waits left every other tenant "Every worker is busy"
    (found by an attack). A key past PM_JOBS_PER_KEY is refused rate_limited (429 over REST,
    a tool error over MCP) while another key's wait runs; once one ends, the first key may
    wait again, and nothing is left counted."""
    _, identity_id, key_id, token = await keyed_identity(conn, "desk@acme.example")
    _, other_identity, _, other_token = await keyed_identity(conn, "x@other.example")
    settings = settings_for(db_url, pm_jobs_per_key=2)
    auth = {"Authorization": f"Bearer {token}"}
    queue = queue_name(settings.pm_namespace, "interactive")
    async with running_front(settings) as url, running_worker(settings):
        base = url.removesuffix("/mcp")
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            held = [asyncio.create_task(http.get(f"/v1/identities/{identity_id}/wait",
                                                 params={"timeout": 4}, headers=auth))
                    for _ in range(2)]
            async with asyncio.timeout(10):
                while await redis.zcard(queue) < 2:
                    await asyncio.sleep(0.02)
            refused = await http.get(f"/v1/identities/{identity_id}/wait",
                                     params={"timeout": 1}, headers=auth)
            async with sdk_client(url, token) as client:
                over_mcp = await client.call_tool("mail_wait", {"timeout_seconds": 1})
            other = await http.get(f"/v1/identities/{other_identity}/wait",
                                   params={"timeout": 1},
                                   headers={"Authorization": f"Bearer {other_token}"})
            assert [r.status_code for r in await asyncio.gather(*held)] == [200, 200]
            again = await http.get(f"/v1/identities/{identity_id}/wait", params={"timeout": 1},
                                   headers=auth)
    assert refused.status_code == 429, refused.text
    error = refused.json()["error"]
    assert error["code"] == "rate_limited" and error["details"]["limit"] == 2
    assert over_mcp.is_error and envelope(over_mcp)["code"] == "rate_limited"
    assert other.status_code == 200 and other.json()["timed_out"]
    assert again.status_code == 200 and again.json()["timed_out"]
    assert await redis.zcard(key_jobs_key(settings.pm_namespace, key_id)) == 0
