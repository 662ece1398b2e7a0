"""Idempotency keys of the send tools (shared.outbound.idempotency) under concurrency, on real
PostgreSQL: one key queues exactly one message, and it is delivered once."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import msgspec

from shared.outbound.delivery import deliver_due
from shared.outbound.idempotency import KEEP, purge, request_hash
from shared.outbound.model import ReplyRequest, SendRequest
from shared.outbound.send import send_message
from tests.shared.outbound.conftest import Relay

CALLS = 100


def request(**overrides: object) -> SendRequest:
    values: dict[str, object] = {"idempotency_key": "retry me", "to": ["jo@example.com"],
                                 "subject": "Invoice 42", "text": "Attached."}
    values.update(overrides)
    return msgspec.convert(values, SendRequest)


async def test_concurrent_calls_with_one_key_store_and_deliver_one_message(
        pool, conn, sender, relay: Relay):
    async with asyncio.timeout(120):
        results = await asyncio.gather(*(send_message(pool, None, sender, request())
                                         for _ in range(CALLS)))
    assert len({r.message.id for r in results}) == 1
    assert sorted(r.deduplicated for r in results) == [False] + [True] * (CALLS - 1)
    for table in ("messages", "send_requests", "outbound_messages", "threads"):
        assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 1, table
    async with asyncio.timeout(30):
        # several workers at once still deliver it once
        attempts = await asyncio.gather(*(deliver_due(pool, relay.config()) for _ in range(4)))
    assert sum(attempts) == 1
    assert len(relay.received) == 1


def test_the_hash_ignores_who_and_which_key_but_not_what():
    base = request()
    assert request_hash("mail_send", base) == request_hash(
        "mail_send", request(identity="desk@acme.example", idempotency_key="other"))
    # a default given explicitly is the same request
    assert request_hash("mail_send", base) == request_hash("mail_send",
                                                           request(kind="transactional"))
    assert request_hash("mail_send", base) != request_hash("mail_send", request(text="Other."))
    reply = ReplyRequest(message_id="msg_01J9Z3AAAAAAAAAAAAAAAAAAAA", idempotency_key="retry me",
                         text="Attached.")
    assert request_hash("mail_reply", reply) != request_hash("mail_forward", reply)


async def test_keys_are_kept_a_day_then_purged(pool, conn, sender):
    old = await send_message(pool, None, sender, request(idempotency_key="old"))
    await send_message(pool, None, sender, request(idempotency_key="new"))
    await conn.execute("UPDATE send_requests SET created_at = now() - interval '25 hours'"
                       " WHERE idempotency_key = 'old'")
    assert await purge(conn, older_than=timedelta(minutes=1)) == 1  # never less than KEEP
    assert KEEP == timedelta(hours=24)
    keys = [r["idempotency_key"] for r in await conn.fetch("SELECT idempotency_key FROM send_requests")]
    assert keys == ["new"]
    again = await send_message(pool, None, sender, request(idempotency_key="old"))
    assert not again.deduplicated and again.message.id != old.message.id
