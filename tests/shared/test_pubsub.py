"""One pub/sub connection fanned out to listeners (shared.pubsub), on real Redis."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from shared.pubsub import LOST, WAKE_GRID_SECONDS, Subscriptions
from tests.conftest import free_port

#: Slack for the loop under a loaded machine, on top of the grid a wait may run late by.
SLACK_SECONDS = 0.5


@pytest.fixture
async def feed(redis: Redis) -> AsyncIterator[tuple[Subscriptions[bytes], str]]:
    prefix = f"pylota-test-pubsub:{uuid.uuid4().hex[:8]}:"
    subscriptions: Subscriptions[bytes] = Subscriptions(redis, prefix + "*", bytes)
    await subscriptions.start()
    assert subscriptions.connected
    yield subscriptions, prefix
    await subscriptions.stop()


async def published(redis: Redis, channel: str, *bodies: bytes) -> None:
    for body in bodies:
        await redis.publish(channel, body)


async def test_a_listener_gets_its_channels_messages_in_order_and_no_other(feed, redis):
    subscriptions, prefix = feed
    with subscriptions.listen(prefix + "a") as a, subscriptions.listen(prefix + "b") as b:
        await published(redis, prefix + "a", b"1", b"2", b"3")
        await published(redis, prefix + "b", b"x")
        assert [await a.get(5) for _ in range(3)] == [b"1", b"2", b"3"]
        assert await b.get(5) == b"x"
        assert await a.get(0.1) is None
        assert await b.get(0.1) is None


async def test_every_listener_of_a_channel_gets_each_message(feed, redis):
    subscriptions, prefix = feed
    with subscriptions.listen(prefix + "a") as first, subscriptions.listen(prefix + "a") as second:
        await published(redis, prefix + "a", b"1")
        assert (await first.get(5), await second.get(5)) == (b"1", b"1")


async def test_a_listener_that_left_gets_nothing_more(feed, redis):
    subscriptions, prefix = feed
    with subscriptions.listen(prefix + "a") as gone:
        pass
    with subscriptions.listen(prefix + "a") as staying:
        await published(redis, prefix + "a", b"1")
        assert await staying.get(5) == b"1"
    assert await gone.get(0) is None


async def test_a_wait_with_nothing_ends_with_none_never_early_and_at_most_a_grid_late(feed):
    subscriptions, prefix = feed
    loop = asyncio.get_running_loop()
    with subscriptions.listen(prefix + "quiet") as quiet:
        began = loop.time()
        async with asyncio.timeout(5):
            assert await quiet.get(0.3) is None
        took = loop.time() - began
    assert 0.3 <= took <= 0.3 + WAKE_GRID_SECONDS + SLACK_SECONDS


async def test_a_thousand_waits_ending_together_all_end_on_time(feed):
    subscriptions, prefix = feed
    loop = asyncio.get_running_loop()

    async def wait(n: int) -> float:
        with subscriptions.listen(f"{prefix}{n}") as listener:
            began = loop.time()
            assert await listener.get(0.2 + n % 7 * 0.01) is None
            return loop.time() - began - (0.2 + n % 7 * 0.01)

    async with asyncio.timeout(10):
        late = await asyncio.gather(*(wait(n) for n in range(1000)))
    assert min(late) >= 0
    assert max(late) <= WAKE_GRID_SECONDS + SLACK_SECONDS


async def test_a_message_wakes_a_waiting_reader_at_once(feed, redis):
    subscriptions, prefix = feed
    loop = asyncio.get_running_loop()
    with subscriptions.listen(prefix + "a") as listener:
        waiting = asyncio.ensure_future(listener.get(30))
        await asyncio.sleep(0.05)
        began = loop.time()
        await published(redis, prefix + "a", b"1")
        async with asyncio.timeout(5):
            assert await waiting == b"1"
        assert loop.time() - began < 5


async def test_what_comes_after_a_cancelled_read_is_kept_for_the_next(feed, redis):
    subscriptions, prefix = feed
    with subscriptions.listen(prefix + "a") as listener:
        waiting = asyncio.ensure_future(listener.get(30))
        await asyncio.sleep(0.01)
        waiting.cancel()
        await published(redis, prefix + "a", b"1")
        assert await listener.get(5) == b"1"


async def test_others_may_put_markers_into_a_listener(feed):
    subscriptions, prefix = feed
    marker = object()
    with subscriptions.listen(prefix + "a") as listener:
        asyncio.get_running_loop().call_later(0.05, listener.put, marker)
        assert await listener.get(5) is marker


async def test_with_redis_unreachable_a_listener_gets_lost_at_once():
    down = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.2)
    subscriptions: Subscriptions[bytes] = Subscriptions(down, "pylota-test-pubsub:*", bytes)
    await subscriptions.start()
    try:
        assert not subscriptions.connected
        with subscriptions.listen("pylota-test-pubsub:a") as listener:
            assert await listener.get(0) is LOST
    finally:
        await subscriptions.stop()
        await down.aclose()
