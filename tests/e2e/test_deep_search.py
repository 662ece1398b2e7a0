"""mail_deep_search end to end (issue 10): a real uvicorn front, real arq workers (in this process,
or ``pylota worker`` as a subprocess), real PostgreSQL and Redis, and real clients — the official
Python SDK in both eras and the TypeScript client v2.

* each agentic step is one ``notifications/progress`` (progress = step, total = max_steps, as
  lowered by the tenant's policy), the answer cites the message that states it, and the message
  that tells the reader what to answer never becomes the answer (spec section 7);
* REST streams the same call as SSE, or answers it when it ends (identity and tenant forms);
* closing the client mid-call stops the job on the worker: its arq in-progress key goes and no
  result or error is ever published;
* a worker killed with SIGKILL, a Redis outage or PostgreSQL lost under the worker end the call
  with a retryable ``unavailable`` tool error within max_seconds + 2 s, never a hang.

To hold a job mid-step where the test wants it, the worker's backend is the OpenAI-compatible
chat endpoint (``PM_LLM_BASE_URL``), served here by :class:`HeldChat`, which answers only when
released: the job is then inside its answer step, after every search and read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest
import uvicorn
from arq.constants import in_progress_key_prefix
from redis.asyncio import Redis

from shared.auth.keys import create_key
from shared.auth.permissions import Permission
from shared.events import JobEvent, job_channel, workers_key
from shared.tenancy.store import set_agentic_limits
from tests.conftest import NAMESPACE, ROOT, free_port, running_front, running_worker, settings_for
from tests.e2e.harness import sdk_client
from tests.e2e.test_jobs import start_worker
from tests.e2e.transport_kit import JS_SKIP_REASON, js_tools
from tests.faults.conftest import own_redis  # noqa: F401  (fixture)
from tests.faults.kit import Relay
from tests.shared.deepsearch.conftest import HIJACK, box  # noqa: F401  (fixture)
from tests.shared.search.conftest import Mailbox, mailbox  # noqa: F401  (fixture)

QUESTION = "What is the budget for the Q3 offsite?"
#: The liveness beat of the workers started here (PM_JOB_HEARTBEAT_SECONDS).
HEARTBEAT = 1.0
#: max_seconds of the calls that are stopped, killed or cut off: the bound is this plus 2 s.
MAX_SECONDS = 8

needs_js = pytest.mark.skipif(js_tools() is None, reason=JS_SKIP_REASON)


# --- The mailbox, keys and settings --------------------------------------------------------


async def tokens(box: Mailbox) -> tuple[str, str]:
    """An identity key and a tenant key of the mailbox's tenant."""
    _, identity_token = await create_key(box.conn, tenant_id=box.tenant_id,
                                         identity_id=box.identity_id,
                                         permissions=list(Permission))
    _, tenant_token = await create_key(box.conn, tenant_id=box.tenant_id, identity_id=None,
                                       permissions=list(Permission))
    return identity_token, tenant_token


def stack_settings(db_url: str, **overrides: Any):
    return settings_for(db_url, pm_embedder="hash", pm_stream_heartbeat_seconds=0.3,
                        pm_job_heartbeat_seconds=HEARTBEAT, **overrides)


def envelope(result: Any) -> dict[str, Any]:
    return msgspec.json.decode(result.content[0].text)["error"]


def assert_answered_from_the_real_budget(box: Mailbox, body: dict[str, Any]) -> None:
    assert body["status"] == "answered", body
    assert "12,000 EUR" in body["answer"]
    assert HIJACK not in body["answer"] and box.ids["inject"] not in body["answer"]
    assert [e["message_id"] for e in body["evidence"]] == [box.ids["offsite-1"]]
    assert body["evidence"][0]["message_id"] in body["answer"]


def assert_one_progress_per_step(progress: list[tuple[float, float | None, str | None]],
                                 body: dict[str, Any], max_steps: int) -> None:
    trace = body["trace"]
    assert [p for p, _, _ in progress] == [t["step"] for t in trace] == list(
        range(1, body["usage"]["steps"] + 1))
    assert {total for _, total, _ in progress} == {max_steps}
    first = trace[0]
    assert first["action"] == "search"
    mode, query = first["detail"].split(": ", 1)  # "hybrid: <q>"
    hits = f"{first['hits']} hit" + ("" if first["hits"] == 1 else "s")
    assert progress[0][2] == f"search ({mode}): {query} ({hits})"
    assert progress[-1][2].startswith("answer: ")


# --- A chat endpoint that answers when told ------------------------------------------------


class HeldChat:
    """``POST /v1/chat/completions`` that holds each request until :attr:`release` is set (then
    answers that the evidence is insufficient), or until its client goes away (:attr:`gone`)."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.release = asyncio.Event()
        self.gone = asyncio.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        while (await receive()).get("more_body"):
            pass
        self.asked.set()

        async def disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        released = asyncio.ensure_future(self.release.wait())
        left = asyncio.ensure_future(disconnect())
        done, pending = await asyncio.wait({released, left}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if left in done:
            self.gone.set()
            return
        body = json.dumps({"id": "chatcmpl-held", "object": "chat.completion", "model": "held",
                           "choices": [{"index": 0, "finish_reason": "stop", "message": {
                               "role": "assistant", "content": "INSUFFICIENT_EVIDENCE"}}],
                           "usage": {"total_tokens": 1}}).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


@pytest.fixture
async def held_chat() -> AsyncIterator[tuple[HeldChat, str]]:
    chat = HeldChat()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(chat, host="127.0.0.1", port=port, log_level="warning",
                                           timeout_graceful_shutdown=1))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(15):
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
    try:
        yield chat, f"http://127.0.0.1:{port}/v1"
    finally:
        chat.release.set()
        server.should_exit = True
        async with asyncio.timeout(15):
            await task


def held_settings(db_url: str, chat_url: str, **overrides: Any):
    """A stack whose worker asks the held chat endpoint, waiting longer than any test does."""
    return stack_settings(db_url, pm_llm_base_url=chat_url, pm_llm_model="held",
                          pm_llm_timeout_seconds=25.0, **overrides)


# --- Watching a job on Redis ---------------------------------------------------------------


class JobWatch:
    """Every job event published on ``redis`` while the block runs, by job id. Redis is shared
    with other test runs, so :meth:`job_id` picks the job a worker of this run started."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self.events: dict[str, list[JobEvent]] = {}
        self._ready = asyncio.Event()

    async def _listen(self) -> None:
        pubsub = self._redis.pubsub()
        await pubsub.psubscribe(job_channel("*"))
        try:
            async for message in pubsub.listen():
                if message["type"] == "psubscribe":
                    self._ready.set()
                    continue
                job_id = message["channel"].decode().removeprefix(job_channel(""))
                with contextlib.suppress(msgspec.DecodeError):  # another branch's events
                    event = msgspec.json.decode(message["data"], type=JobEvent)
                    self.events.setdefault(job_id, []).append(event)
        finally:
            await pubsub.aclose()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[JobWatch]:
        task = asyncio.create_task(self._listen())
        try:
            async with asyncio.timeout(5):
                await self._ready.wait()  # subscribed: no event of the call can be missed
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def job_id(self) -> str:
        """The one job started by a live worker of this run (``NAMESPACE``'s worker set)."""
        members = await self._redis.zrange(workers_key(NAMESPACE, "interactive"), 0, -1)
        ours = {m.decode().split(":")[0] for m in members}
        [job_id] = [job_id for job_id, events in self.events.items()
                    if any(e.kind == "started" and e.worker in ours for e in events)]
        return job_id

    async def wait_stopped(self, job_id: str, seconds: float) -> float:
        """Seconds until the job's arq in-progress key is gone (the worker left the job)."""
        began = time.monotonic()
        async with asyncio.timeout(seconds):
            while await self._redis.exists(in_progress_key_prefix + job_id):
                await asyncio.sleep(0.02)
        return time.monotonic() - began


@pytest.fixture
async def watch(redis) -> AsyncIterator[JobWatch]:
    async with JobWatch(redis).running() as watching:
        yield watching


# --- Progress, answer, hijack, policy ------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_one_progress_per_step_and_the_mail_that_hijacks_never_becomes_the_answer(
        box, mode):
    token, _ = await tokens(box)
    await set_agentic_limits(box.conn, box.tenant_id, max_steps=5)
    settings = stack_settings(box.dsn)
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async with running_front(settings) as url, running_worker(settings):
        async with sdk_client(url, token, mode) as client:
            # 10 asked, 5 allowed: lowered, not refused
            result = await client.call_tool("mail_deep_search",
                                            {"question": QUESTION, "max_steps": 10},
                                            progress_callback=on_progress)
            refused = await client.call_tool("mail_deep_search",
                                             {"question": QUESTION, "max_seconds": 31})
    assert not result.is_error, result.content
    body = result.structured_content
    assert_answered_from_the_real_budget(box, body)
    assert_one_progress_per_step(progress, body, max_steps=5)
    assert body["usage"]["steps"] <= 5
    assert refused.is_error and envelope(refused)["code"] == "invalid_request"
    assert envelope(refused)["details"] == {"path": "max_seconds"}


async def test_rest_streams_the_call_as_sse_or_answers_it_when_it_ends(box):
    token, tenant_token = await tokens(box)
    settings = stack_settings(box.dsn)
    async with running_front(settings) as url, running_worker(settings):
        base = url.removesuffix("/mcp")
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            streamed = await http.post(
                f"/v1/identities/{box.identity_id}/deep-search", json={"question": QUESTION},
                headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"})
            polled = await http.post(
                f"/v1/tenants/{box.tenant_id}/deep-search",
                json={"question": QUESTION, "max_steps": 4},
                headers={"Authorization": f"Bearer {tenant_token}"})
            denied = await http.post(
                f"/v1/tenants/{box.tenant_id}/deep-search", json={"question": QUESTION},
                headers={"Authorization": f"Bearer {token}"})
    assert streamed.status_code == 200
    assert streamed.headers["content-type"].startswith("text/event-stream")
    events = [(block.split("\n")[0].removeprefix("event: "),
               json.loads(block.split("\ndata: ", 1)[1]))
              for block in streamed.text.split("\n\n") if block.startswith("event: ")]
    assert [name for name, _ in events][-1] == "result"
    assert {name for name, _ in events[:-1]} == {"progress"}
    body = events[-1][1]
    assert_answered_from_the_real_budget(box, body)
    assert_one_progress_per_step([(e["progress"], e["total"], e["message"])
                                  for _, e in events[:-1]], body, max_steps=6)
    assert polled.status_code == 200 and polled.headers["content-type"] == "application/json"
    assert_answered_from_the_real_budget(box, polled.json())
    assert polled.json()["usage"]["steps"] <= 4
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "scope_denied"


@needs_js
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_typescript_client_gets_a_progress_callback_per_step(box, tmp_path, mode):
    token, _ = await tokens(box)
    settings = stack_settings(box.dsn)
    async with running_front(settings) as url, running_worker(settings):
        async with node_client(tmp_path, url, token, mode, {"question": QUESTION}) as node:
            lines = [line async for line in node.lines()]
    progress = [line["progress"] for line in lines if "progress" in line]
    [result] = [line["result"] for line in lines if "result" in line]
    assert not result.get("isError"), result
    body = result["structuredContent"]
    assert_answered_from_the_real_budget(box, body)
    assert_one_progress_per_step([(p["progress"], p.get("total"), p.get("message"))
                                  for p in progress], body, max_steps=6)


# --- Closing the client stops the job ------------------------------------------------------


def assert_stopped_quietly(watch: JobWatch, job_id: str, progress_at_close: int) -> None:
    """Nothing but at most one more step was reported after the close, and no answer at all."""
    events = watch.events[job_id]
    assert not [e for e in events if e.kind in ("result", "error")], events
    assert sum(e.kind == "progress" for e in events) <= progress_at_close + 1


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_closing_the_python_client_mid_call_stops_the_job(box, held_chat, watch, redis,
                                                                mode):
    chat, chat_url = held_chat
    token, _ = await tokens(box)
    settings = held_settings(box.dsn, chat_url)
    async with running_front(settings) as url, running_worker(settings):
        async with sdk_client(url, token, mode) as client:
            call = asyncio.create_task(client.call_tool(
                "mail_deep_search", {"question": QUESTION, "max_seconds": 30},
                progress_callback=lambda *_: asyncio.sleep(0)))
            async with asyncio.timeout(15):
                await chat.asked.wait()  # the job is inside its answer step
            job_id = await watch.job_id()
            assert await redis.exists(in_progress_key_prefix + job_id)
            reported = sum(e.kind == "progress" for e in watch.events[job_id])
            # leaving the block closes the client with the call in flight
        call.cancel()
        with contextlib.suppress(BaseException):
            await call
        took = await watch.wait_stopped(job_id, 5)
        async with asyncio.timeout(5):
            await chat.gone.wait()  # its request to the model was dropped with it
    assert took < 5
    assert_stopped_quietly(watch, job_id, reported)


@needs_js
async def test_closing_the_typescript_client_mid_call_stops_the_job(box, held_chat, watch, redis,
                                                                    tmp_path):
    chat, chat_url = held_chat
    token, _ = await tokens(box)
    settings = held_settings(box.dsn, chat_url)
    async with running_front(settings) as url, running_worker(settings):
        async with node_client(tmp_path, url, token, "legacy",
                               {"question": QUESTION, "max_seconds": 30}) as node:
            async with asyncio.timeout(30):
                await chat.asked.wait()
            job_id = await watch.job_id()
            reported = sum(e.kind == "progress" for e in watch.events[job_id])
            await node.say("close")
            lines = [line async for line in node.lines()]
        assert {"closed": True} in lines and not [line for line in lines if "result" in line]
        await watch.wait_stopped(job_id, 5)
        async with asyncio.timeout(5):
            await chat.gone.wait()
    assert_stopped_quietly(watch, job_id, reported)


# --- A killed worker, Redis down, PostgreSQL lost ------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_worker_killed_mid_call_ends_it_retryably_within_max_seconds_and_2(
        box, held_chat, mode):
    chat, chat_url = held_chat
    token, _ = await tokens(box)
    settings = held_settings(box.dsn, chat_url)
    worker = await start_worker(box.dsn, PM_LLM_BASE_URL=chat_url, PM_LLM_MODEL="held",
                                PM_LLM_TIMEOUT_SECONDS="25")
    try:
        async with running_front(settings) as url, sdk_client(url, token, mode) as client:
            began = time.monotonic()
            call = asyncio.create_task(client.call_tool(
                "mail_deep_search", {"question": QUESTION, "max_seconds": MAX_SECONDS},
                progress_callback=lambda *_: asyncio.sleep(0)))
            async with asyncio.timeout(15):
                await chat.asked.wait()
            worker.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            async with asyncio.timeout(MAX_SECONDS + 10):
                result = await call
            ended = time.monotonic()
    finally:
        worker.kill()
        worker.wait(10)
    assert result.is_error
    error = envelope(result)
    assert error["code"] == "unavailable" and error["retryable"] is True
    assert "worker" in error["message"]
    assert ended - began <= MAX_SECONDS + 2, f"ended {ended - began:.2f} s after the call"
    assert ended - killed <= HEARTBEAT + 2, f"ended {ended - killed:.2f} s after the kill"


async def test_a_redis_outage_mid_call_ends_it_retryably_never_a_hang(box, held_chat, own_redis):
    chat, chat_url = held_chat
    token, _ = await tokens(box)
    settings = held_settings(box.dsn, chat_url, redis_url=own_redis.url)
    async with running_front(settings) as url, running_worker(settings):
        async with sdk_client(url, token) as client:
            call = asyncio.create_task(client.call_tool(
                "mail_deep_search", {"question": QUESTION, "max_seconds": MAX_SECONDS},
                progress_callback=lambda *_: asyncio.sleep(0)))
            async with asyncio.timeout(15):
                await chat.asked.wait()
            own_redis.stop()  # SIGKILL
            down = time.monotonic()
            async with asyncio.timeout(MAX_SECONDS + 10):
                result = await call
            ended = time.monotonic()
        chat.release.set()  # let the orphaned job end before its worker stops
    assert result.is_error
    error = envelope(result)
    assert error["code"] == "unavailable" and error["retryable"] is True
    assert "job queue" in error["message"]
    assert ended - down <= MAX_SECONDS + 2, f"ended {ended - down:.2f} s after Redis went"


async def test_postgresql_lost_under_the_worker_ends_the_call_retryably(box):
    token, _ = await tokens(box)
    relay = Relay()  # cut for the worker; the front's PostgreSQL stays
    await relay.start()
    front_settings = stack_settings(box.dsn)
    worker_settings = stack_settings(relay.dsn(box.dsn), pm_db_acquire_seconds=2.0)
    try:
        async with running_front(front_settings) as url, running_worker(worker_settings):
            await relay.cut()
            async with sdk_client(url, token) as client:
                began = time.monotonic()
                async with asyncio.timeout(MAX_SECONDS + 10):
                    result = await client.call_tool(
                        "mail_deep_search", {"question": QUESTION, "max_seconds": MAX_SECONDS},
                        progress_callback=lambda *_: asyncio.sleep(0))
                ended = time.monotonic()
    finally:
        with contextlib.suppress(Exception):
            await relay.cut()
    assert result.is_error
    error = envelope(result)
    assert error["code"] == "unavailable" and error["retryable"] is True
    assert "database" in error["message"]  # the worker's failure, relayed
    assert ended - began <= MAX_SECONDS + 2, f"ended {ended - began:.2f} s after the call"


# --- The TypeScript client as a process ----------------------------------------------------


class NodeClient:
    """tests/e2e/js/deep_search.mts running: JSON lines out, commands in."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def lines(self) -> AsyncIterator[dict[str, Any]]:
        assert self.process.stdout is not None
        async with asyncio.timeout(60):
            while raw := await self.process.stdout.readline():
                if raw.strip().startswith(b"{"):
                    yield json.loads(raw)

    async def say(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command.encode() + b"\n")
        await self.process.stdin.drain()


@contextlib.asynccontextmanager
async def node_client(tmp_path, url: str, token: str, mode: str, arguments: dict[str, Any]
                      ) -> AsyncIterator[NodeClient]:
    tools = js_tools()
    assert tools is not None
    # Node resolves packages beside the script: give it the installed node_modules.
    (tmp_path / "node_modules").symlink_to(tools.root / "node_modules")
    script = shutil.copy(ROOT / "tests/e2e/js/deep_search.mts", tmp_path / "deep_search.mts")
    process = await asyncio.create_subprocess_exec(
        str(tools.node), str(script), url, token, mode, json.dumps(arguments),
        env=tools.env(), cwd=tools.root, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        yield NodeClient(process)
        async with asyncio.timeout(30):
            code = await process.wait()
        assert process.stderr is not None
        assert code == 0, (await process.stderr.read()).decode()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
