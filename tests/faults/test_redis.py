"""Issue 9, defects 2 and 3: Redis outages.

* ``pylota worker`` and ``pylota worker --batch`` survive Redis restarts (they reconnect with
  backoff, ``workers.process.RECONNECT_DELAYS``), and ``mail_wait`` is answered normally within a
  few seconds of each return — before, both exited with a ``ConnectionError`` traceback and every
  wait then failed after 17 s.
* A Redis outage during a wait ends the call with a final JSON-RPC message — the SSE stream's
  last frame, or the JSON body — carrying the retryable ``unavailable`` error, never a cut
  stream or Litestar's plain 500; the REST long poll ends with the ``unavailable`` envelope. A
  request that arrives during the outage is 503 with the JSON-RPC error and its log line.

Redis is the test's own (``tests/faults/kit.py``): killed and started again on the same port.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import msgspec
import pytest

from front.mcp.protocol import LEGACY_DEFAULT, MODERN_VERSION
from tests.e2e.transport_kit import Wire, keyed_identity
from tests.faults.kit import STOPPED, eventually, no_traceback, stack_env, tool_error

#: Bound on a wait being answered normally after Redis is back: the workers' longest backoff
#: step (``workers.process.RECONNECT_DELAYS``: 5 s once an outage lasts past 3.5 s, as the
#: mid-wait test's does), the worker's restart of arq and its first liveness beat, with room for
#: two loaded cores (10 s was missed once on a clean-clone CI run).
RECOVERY_SECONDS = 20.0
#: Bound on a call ending after Redis goes away mid-wait (the event feed is lost at once).
OUTAGE_END_SECONDS = 5.0


async def wait_answers(wire: Wire) -> bool:
    """A one-second ``mail_wait`` is answered normally (timed out, nothing arrived)."""
    response, messages = await wire.legacy("tools/call", {
        "name": "mail_wait", "arguments": {"timeout_seconds": 1}})
    if response.status_code != 200:
        return False
    result = messages[-1]["result"]
    return not result.get("isError") and result["structuredContent"]["timed_out"] is True


async def test_workers_survive_redis_restarts_and_waits_work_after(
        db_url, conn, own_redis, services, http):
    _, _, _, token = await keyed_identity(conn, "desk@acme.example")
    env = stack_env(db_url, own_redis.url, PM_EMBED_POLL_SECONDS="1")
    front, base, (worker, batch) = await services.stack(env, batch=True)
    wire = Wire(http, f"{base}/mcp", token)
    assert await wait_answers(wire)

    for outage in range(2):
        restarts = {w.name: len(w.events("worker_restarting")) for w in (worker, batch)}
        own_redis.stop()
        # each worker noticed the outage and is retrying, not exiting
        for w in (worker, batch):
            await eventually(lambda w=w: _restarting(w, restarts[w.name]), 10,
                             f"the {w.name} notices Redis went away")
        await own_redis.start()
        back = time.monotonic()
        await eventually(lambda: wait_answers(wire), RECOVERY_SECONDS,
                         f"mail_wait answered after Redis restart {outage + 1}", every=0.2)
        assert time.monotonic() - back <= RECOVERY_SECONDS
        assert worker.alive() and batch.alive()

    for w in (worker, batch):
        no_traceback(w)
        assert await w.stop() == 0
        assert w.events("worker_stopped")
    assert await front.stop() in STOPPED


def _restarting(worker, before: int) -> bool:
    """Whether ``worker`` logged a restart past its first ``before``; fails the test at once,
    with its log, when the worker exited instead."""
    assert worker.alive(), f"the {worker.name} exited:\n{worker.text()[-3000:]}"
    return len(worker.events("worker_restarting")) > before


async def running_jobs(redis) -> int:
    return len(await redis.keys("arq:in-progress:*"))


def sse_messages(text: str) -> list[dict]:
    return [msgspec.json.decode(line[len("data: "):]) for line in text.splitlines()
            if line.startswith("data: ")]


@pytest.mark.parametrize("surface", ["legacy-sse", "legacy-json", "modern-sse", "rest-json"])
async def test_a_redis_outage_mid_wait_ends_the_call_with_a_final_message(
        db_url, conn, own_redis, services, http, surface):
    _, identity_id, _, token = await keyed_identity(conn, "desk@acme.example")
    env = stack_env(db_url, own_redis.url)
    front, base, _ = await services.stack(env)
    accept = "application/json, text/event-stream" if surface.endswith("sse") \
        else "application/json"
    headers = {"authorization": f"Bearer {token}", "accept": accept,
               "content-type": "application/json"}
    arguments = {"timeout_seconds": 30}
    if surface == "rest-json":
        request = http.build_request("GET", f"{base}/v1/identities/{identity_id}/wait",
                                     params={"timeout": 30}, headers=headers)
    else:
        params: dict = {"name": "mail_wait", "arguments": arguments}
        if surface.startswith("modern"):
            params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                               "io.modelcontextprotocol/clientCapabilities": {}}
            headers.update({"mcp-protocol-version": MODERN_VERSION,
                            "mcp-method": "tools/call", "mcp-name": "mail_wait"})
        else:
            headers["mcp-protocol-version"] = LEGACY_DEFAULT
        request = http.build_request("POST", f"{base}/mcp", headers=headers,
                                     content=msgspec.json.encode({
                                         "jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                         "params": params}))
    redis = own_redis.client()
    try:
        call = asyncio.create_task(http.send(request))
        await eventually(lambda: running_jobs(redis), 10, "the wait runs on the worker")
    finally:
        await redis.aclose()
    own_redis.stop()
    down = time.monotonic()
    async with asyncio.timeout(OUTAGE_END_SECONDS + 5):
        response: httpx.Response = await call  # the whole body: the stream ended
    ended = time.monotonic() - down
    assert ended <= OUTAGE_END_SECONDS, f"ended {ended:.2f} s after Redis went away"

    if surface == "rest-json":
        assert response.status_code == 503 and response.headers["retry-after"] == "1"
        error = msgspec.json.decode(response.content)["error"]
    else:
        assert response.status_code == 200, response.text
        kind = response.headers["content-type"]
        assert kind.startswith("text/event-stream" if surface.endswith("sse")
                               else "application/json")
        messages = sse_messages(response.text) if surface.endswith("sse") \
            else [msgspec.json.decode(response.content)]
        final = messages[-1]  # the stream's last frame is the response
        assert final["jsonrpc"] == "2.0" and final["id"] == 7, final
        error = tool_error(final)
        assert error is not None, final
    assert error["code"] == "unavailable" and error["retryable"] is True, error

    # its request line is written; while Redis is down, a new request (ping: its RL_API charge
    # needs Redis) is a JSON-RPC error at once, with its line too
    assert error["request_id"] in {line["request_id"] for line in front.events("request")}
    wire = Wire(http, f"{base}/mcp", token)
    began = time.monotonic()
    response, messages = await wire.legacy("ping")
    assert time.monotonic() - began <= OUTAGE_END_SECONDS
    assert response.status_code == 503 and response.headers["retry-after"] == "1", response.text
    assert messages[0]["error"]["code"] == -32603
    refused = messages[0]["error"]["data"]["error"]
    assert refused["code"] == "unavailable" and refused["retryable"] is True
    assert refused["request_id"] in {line["request_id"] for line in front.events("request")}

    # with Redis back, the front serves waits again
    await own_redis.start()
    await eventually(lambda: wait_answers(wire), RECOVERY_SECONDS,
                     "mail_wait answered after Redis is back", every=0.2)
    no_traceback(front)
