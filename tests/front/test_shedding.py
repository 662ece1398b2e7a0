"""One key's share of the front's requests in progress (front.shedding.claim): a key's burst
within its rate limits took the whole PM_MAX_IN_FLIGHT ceiling, and other tenants' requests got
503 (found by an attack). Past its share a key's own requests get 429; the others still pass."""

from __future__ import annotations

import asyncio

import pytest

from front.shedding import Shedding, claim, waiting
from shared.errors import ErrorCode, PylotaError


class Held:
    """An ASGI app whose requests claim for the key in their ``x-key`` header, then wait to be let
    go (or wait for a job, ``x-wait``), then answer 200; a refused claim answers 429."""

    def __init__(self) -> None:
        self.go = asyncio.Event()

    async def __call__(self, scope, receive, send) -> None:
        headers = dict(scope["headers"])
        try:
            claim(scope, headers[b"x-key"].decode())
        except PylotaError as exc:
            assert exc.code is ErrorCode.RATE_LIMITED
            await send({"type": "http.response.start", "status": 429, "headers": []})
            await send({"type": "http.response.body", "body": str(exc.details).encode()})
            return
        if b"x-wait" in headers:
            waiting(scope)
        await self.go.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def call(shedding: Shedding, key: str, *, wait: bool = False) -> int:
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "http.request", "body": b""}

    headers = [(b"x-key", key.encode())] + ([(b"x-wait", b"1")] if wait else [])
    await shedding({"type": "http", "path": "/mcp", "method": "POST", "headers": headers},
                   receive, send)
    return sent[0]["status"]


async def test_a_key_past_its_share_gets_429_and_other_keys_still_pass() -> None:
    app = Held()
    shedding = Shedding(app, ceiling=5, per_key=2)
    greedy = [asyncio.create_task(call(shedding, "key_a")) for _ in range(2)]
    await asyncio.sleep(0.01)
    assert await call(shedding, "key_a") == 429  # its third, while two are in progress
    other = asyncio.create_task(call(shedding, "key_b"))
    await asyncio.sleep(0.01)
    assert shedding.working == 3 and shedding.by_key == {"key_a": 2, "key_b": 1}
    app.go.set()
    assert await asyncio.gather(*greedy, other) == [200, 200, 200]
    assert shedding.working == 0 and shedding.by_key == {}  # nothing left counted
    assert await call(shedding, "key_a") == 200


async def test_a_request_that_stops_counting_gives_its_keys_share_back() -> None:
    """A request waiting for a worker's job (a long poll) no longer counts against the ceiling,
    nor against its key's share."""
    app = Held()
    shedding = Shedding(app, ceiling=5, per_key=1)
    polls = [asyncio.create_task(call(shedding, "key_a", wait=True)) for _ in range(3)]
    await asyncio.sleep(0.01)
    assert shedding.working == 0 and shedding.by_key == {}
    app.go.set()
    assert await asyncio.gather(*polls) == [200, 200, 200]


@pytest.mark.parametrize("per_key", [0, -1])
def test_a_share_that_serves_nothing_is_refused_at_start(per_key: int) -> None:
    from shared.config import Settings, SettingsError

    with pytest.raises(SettingsError, match="PM_MAX_IN_FLIGHT_PER_KEY"):
        Settings(pm_max_in_flight_per_key=per_key)
