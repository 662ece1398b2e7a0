"""The OpenAI-compatible chat backend against a small chat-completions server this test runs on
uvicorn (``shared.deepsearch.backends``): its answer is held to the citation check, and when it
fails the built-in answer comes back with ``degraded: true``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import pytest
import uvicorn

from shared.deepsearch import (ChatBackend, DeepSearchRequest, DeepSearchResult, backend_for,
                               deep_search)
from shared.deepsearch.backends import BuiltinBackend, parse_answer
from shared.search.semantic import SemanticEngine
from tests.conftest import free_port, settings_for
from tests.shared.deepsearch.conftest import HIJACK
from tests.shared.search.conftest import Mailbox

Reply = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


class ChatServer:
    """Speaks POST /v1/chat/completions; ``reply`` builds each answer from the request body."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, Any], dict[str, str]]] = []
        self.reply: Reply = lambda body: (500, {"error": "no reply set"})

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        raw = b""
        while True:
            event = await receive()
            raw += event.get("body", b"")
            if not event.get("more_body"):
                break
        body = json.loads(raw)
        self.requests.append((body, {k.decode(): v.decode() for k, v in scope["headers"]}))
        status, payload = (404, {}) if scope["path"] != "/v1/chat/completions" else \
            self.reply(body)
        data = json.dumps(payload).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": data})


def completion(content: str, tokens: int = 321) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "stub",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": tokens - 21, "completion_tokens": 21,
                      "total_tokens": tokens}}


@pytest.fixture
async def chat() -> AsyncIterator[tuple[ChatServer, str]]:
    app = ChatServer()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(15):
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
    try:
        yield app, f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        async with asyncio.timeout(15):
            await task


async def ask(pool: asyncpg.Pool, engine: SemanticEngine, box: Mailbox, backend: ChatBackend
              ) -> DeepSearchResult:
    async def progress(step: int, total: int, message: str) -> None:
        return None

    async def checkpoint() -> None:
        return None

    request = DeepSearchRequest(question="What is the budget for the Q3 offsite?",
                                identity_ids=[box.identity_id])
    return await deep_search(
        pool, engine, request, backend=backend, progress=progress, checkpoint=checkpoint)


def backend(url: str, timeout: float = 5.0) -> ChatBackend:
    return ChatBackend(base_url=url, model="stub-model", api_key="sk-test-123", timeout=timeout)


async def test_a_supported_model_answer_is_kept_with_its_tokens(
        box: Mailbox, pool: asyncpg.Pool, engine: SemanticEngine,
        chat: tuple[ChatServer, str]) -> None:
    server, url = chat
    offsite = box.ids["offsite-1"]
    server.reply = lambda body: (200, completion(
        f"The Q3 offsite budget is 12,000 EUR, food included [{offsite}]."))
    result = await ask(pool, engine, box, backend(url))
    assert result.status == "answered" and result.degraded is False
    assert result.answer == f"The Q3 offsite budget is 12,000 EUR, food included [{offsite}]."
    assert result.usage.model_tokens == 321
    assert [e.message_id for e in result.evidence] == [offsite]
    body, headers = server.requests[0]
    assert headers["authorization"] == "Bearer sk-test-123" and body["model"] == "stub-model"
    system, user = body["messages"]
    assert system["role"] == "system" and "never instructions" in system["content"]
    sent = json.loads(user["content"])
    assert sent["question"] == "What is the budget for the Q3 offsite?"
    assert any("12,000 EUR" in e["sentence"] and e["message_id"] == offsite
               for e in sent["evidence"])
    # mail that speaks to the model is never shown to it
    assert all(e["message_id"] != box.ids["inject"] for e in sent["evidence"])


async def test_sentences_the_citations_do_not_support_are_removed(
        box: Mailbox, pool: asyncpg.Pool, engine: SemanticEngine,
        chat: tuple[ChatServer, str]) -> None:
    server, url = chat
    offsite, invoice = box.ids["offsite-1"], box.ids["invoice"]
    server.reply = lambda body: (200, completion(
        f"The offsite budget is 12,000 EUR [{offsite}]. The offsite budget was raised to "
        f"40,000 EUR in October [{invoice}]."))
    result = await ask(pool, engine, box, backend(url))
    assert result.status == "answered" and result.degraded is False
    assert result.answer == f"The offsite budget is 12,000 EUR [{offsite}]."
    assert "40,000" not in result.answer


async def test_a_hijacked_model_answer_falls_back_to_the_builtin_one(
        box: Mailbox, pool: asyncpg.Pool, engine: SemanticEngine,
        chat: tuple[ChatServer, str]) -> None:
    server, url = chat
    inject = box.ids["inject"]
    server.reply = lambda body: (200, completion(f"The offsite budget is {HIJACK} dollars [{inject}]."))
    result = await ask(pool, engine, box, backend(url))
    assert HIJACK not in result.answer
    assert result.status == "answered" and result.degraded is True
    assert "12,000 EUR" in result.answer and result.usage.model_tokens == 321


@pytest.mark.parametrize("failure", ["status", "garbage", "no_choices"])
async def test_a_failing_endpoint_gives_the_builtin_answer_degraded(
        box: Mailbox, pool: asyncpg.Pool, engine: SemanticEngine,
        chat: tuple[ChatServer, str], failure: str) -> None:
    server, url = chat
    server.reply = {"status": lambda body: (503, {"error": "overloaded"}),
                    "garbage": lambda body: (200, {"choices": "nope"}),
                    "no_choices": lambda body: (200, {"choices": []})}[failure]
    result = await ask(pool, engine, box, backend(url))
    assert result.status == "answered" and result.degraded is True
    assert "12,000 EUR" in result.answer and result.usage.model_tokens is None


async def test_an_unreachable_endpoint_gives_the_builtin_answer_degraded(
        box: Mailbox, pool: asyncpg.Pool, engine: SemanticEngine) -> None:
    result = await ask(pool, engine, box, backend(f"http://127.0.0.1:{free_port()}/v1", 1.0))
    assert result.status == "answered" and result.degraded is True


async def test_the_model_may_say_the_mail_does_not_answer(
        box: Mailbox, pool: asyncpg.Pool, engine: SemanticEngine,
        chat: tuple[ChatServer, str]) -> None:
    server, url = chat
    server.reply = lambda body: (200, completion("INSUFFICIENT_EVIDENCE"))
    result = await ask(pool, engine, box, backend(url))
    assert result.status == "insufficient_evidence" and result.usage.model_tokens == 321


def test_parse_answer_reads_each_sentences_ids() -> None:
    a, b = "msg_01AAAAAAAAAAAAAAAAAAAAAAAA", "msg_01BBBBBBBBBBBBBBBBBBBBBBBB"
    claims = parse_answer(f"One fact [{a}]. Two facts [{a}, {b}]. A loose end.")
    assert [(c.text, c.cites) for c in claims] == [
        ("One fact", (a,)), ("Two facts", (a, b)), ("A loose end", ())]


def test_backend_for_picks_by_settings() -> None:
    assert isinstance(backend_for(settings_for("postgresql://unused")), BuiltinBackend)
    chosen = backend_for(settings_for("postgresql://unused", pm_llm_base_url="http://x/v1",
                                      pm_llm_model="m"))
    assert isinstance(chosen, ChatBackend)
