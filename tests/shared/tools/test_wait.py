"""mail_wait's front half (``shared.tools.wait``) through the one call pipeline on real
PostgreSQL and Redis: ``from`` must be an address or an @domain, refused at once rather than
waited out (the attack report of 3 December 2026: ``@``, ``x`` and ``a@b@c`` each waited their
whole timeout for nothing). No worker runs here: the e2e tests run the wait."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from shared.auth.keys import Principal, authenticate, create_key
from shared.auth.permissions import Permission
from shared.errors import ErrorCode, PylotaError
from shared.ingest.pipeline import ingest_raw
from shared.ids import Prefix, new_id
from shared.mail.waiting import WaitRequest
from shared.ratelimit import RateLimits
from shared.tenancy.store import create_identity, create_tenant
from shared.tools.call import CallEnv, Job, call_tool
from shared.tools.registry import TOOLS
from tests.conftest import database, settings_for


@pytest.fixture
async def env(db_url, redis) -> AsyncIterator[CallEnv]:
    settings = settings_for(db_url)
    async with database(db_url) as db:
        yield CallEnv(db=db, redis=redis, limits=RateLimits(settings), settings=settings,
                      tools=TOOLS)


@pytest.fixture
async def principal(conn) -> Principal:
    tenant = await create_tenant(conn, "acme")
    desk = await create_identity(conn, tenant.id, "desk@acme.example")
    await create_identity(conn, tenant.id, "sales@acme.example")
    _, token = await create_key(conn, tenant_id=tenant.id, identity_id=desk.id,
                                permissions=[Permission.MESSAGES_READ])
    return await authenticate(conn, f"Bearer {token}")


async def wait(env: CallEnv, principal: Principal, sender: str) -> object:
    return await call_tool(env, principal, "mail_wait", {"from": sender, "timeout_seconds": 5},
                           request_id=new_id(Prefix.REQUEST), surface="mcp", method="tools/call")


@pytest.mark.parametrize("sender", ["billing@example.com", "@example.com", "@mail.example.co.uk",
                                   " Billing@Example.com "])
async def test_an_address_or_a_domain_is_waited_for(env, principal, sender):
    outcome = await wait(env, principal, sender)
    assert isinstance(outcome, Job), outcome
    outcome.finish("ok")
    assert isinstance(outcome.request.payload, WaitRequest)
    assert outcome.request.payload.wanted.from_ == sender


@pytest.mark.parametrize("sender", ["@", "@@", "a@b@c", "x", "billing", "a b@example.com",
                                    "@example..com", "@.com", ""])
async def test_anything_else_is_invalid_request_on_from(env, principal, sender):
    outcome = await wait(env, principal, sender)
    assert isinstance(outcome, PylotaError)
    assert outcome.code is ErrorCode.INVALID_REQUEST
    assert outcome.details == {"path": "from"}
    assert "@domain" in outcome.message and outcome.fix and "omit from" in outcome.fix


async def test_a_thread_of_another_identity_is_not_found_at_once(env, principal, conn):
    """A thread_id of another identity waited out its whole timeout, where every other tool
    answers thread_not_found (found by an attack)."""
    def mail(mid: str, to: str) -> bytes:
        return (f"From: jo@example.com\r\nTo: {to}\r\nSubject: Plan\r\n"
                f"Message-ID: <{mid}>\r\n\r\nShall we meet?\r\n").encode()

    ids = {r["address"]: r["identity_id"] for r in await conn.fetch(
        "SELECT address, identity_id FROM identity_addresses")}
    own, _ = await ingest_raw(conn, None, ids["desk@acme.example"], mail("a@x", "desk@acme.example"))
    other, _ = await ingest_raw(conn, None, ids["sales@acme.example"],
                                mail("b@x", "sales@acme.example"))

    async def wait_on(thread_id: str) -> object:
        return await call_tool(env, principal, "mail_wait",
                               {"thread_id": thread_id, "timeout_seconds": 5},
                               request_id=new_id(Prefix.REQUEST), surface="mcp",
                               method="tools/call")

    refused = await wait_on(other.thread_id)
    assert isinstance(refused, PylotaError) and refused.code is ErrorCode.THREAD_NOT_FOUND
    waited = await wait_on(own.thread_id)
    assert isinstance(waited, Job), waited
    waited.finish("ok")
    assert waited.request.payload.wanted.thread_id == own.thread_id
