"""mail_deep_search's front half (``shared.tools.deep_search``) through the one call pipeline
(``shared.tools.call.call_tool``) on real PostgreSQL and Redis: the tenant's agentic policy gives
the defaults and caps (a larger value is lowered, a value outside 2–10 or 3–30 is refused), the
scope is mail_search's (the same errors for the same arguments), RL_AGENTIC is charged, and the
job it hands back carries the tenant's time zone and ``custom:`` patterns. No worker runs here:
the e2e tests run the job."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from shared.auth.keys import Principal, authenticate, create_key
from shared.auth.permissions import Permission
from shared.deepsearch import DeepSearchRequest
from shared.errors import ErrorCode, PylotaError
from shared.events import JOB_DEEP_SEARCH
from shared.ids import Prefix, new_id
from shared.logs import configure, query_hash
from shared.mail.patterns import set_pattern
from shared.ratelimit import RateLimits
from shared.tenancy.store import create_identity, create_tenant, set_agentic_limits
from shared.tools.call import CallEnv, Job, call_tool
from shared.tools.registry import TOOLS
from shared.tools.scope import MAX_SCOPE_IDENTITIES
from tests.conftest import database, settings_for

QUESTION = "What is the budget for the Q3 offsite?"


#: RL_AGENTIC of the fixture's pipeline (a failed call is charged too, as every call is).
AGENTIC_PER_MINUTE = 50


@pytest.fixture
async def env(db_url, redis) -> AsyncIterator[CallEnv]:
    settings = settings_for(db_url, pm_rl_agentic_per_minute=AGENTIC_PER_MINUTE)
    configure(settings.pm_log_level)  # JSON lines, as the front writes them
    async with database(db_url) as db:
        yield CallEnv(db=db, redis=redis, limits=RateLimits(settings), settings=settings,
                      tools=TOOLS)


@pytest.fixture
async def tenant(conn) -> dict[str, Any]:
    """A tenant in Europe/London with two identities, an identity key and a tenant key."""
    made = await create_tenant(conn, "acme", time_zone="Europe/London")
    desk = await create_identity(conn, made.id, "desk@acme.example")
    sales = await create_identity(conn, made.id, "sales@acme.example")
    _, identity_token = await create_key(conn, tenant_id=made.id, identity_id=desk.id,
                                         permissions=[Permission.SEARCH_READ])
    _, tenant_token = await create_key(conn, tenant_id=made.id, identity_id=None,
                                       permissions=[Permission.SEARCH_READ])
    return {"id": made.id, "desk": desk.id, "sales": sales.id,
            "identity_key": await authenticate(conn, f"Bearer {identity_token}"),
            "tenant_key": await authenticate(conn, f"Bearer {tenant_token}")}


async def call(env: CallEnv, principal: Principal, arguments: dict[str, Any],
               tool: str = "mail_deep_search") -> Any:
    return await call_tool(env, principal, tool, arguments, request_id=new_id(Prefix.REQUEST),
                           surface="mcp", method="tools/call")


async def job_of(env: CallEnv, principal: Principal, **arguments: Any
                 ) -> tuple[Job, DeepSearchRequest]:
    outcome = await call(env, principal, {"question": QUESTION, **arguments})
    assert isinstance(outcome, Job), outcome
    outcome.finish("ok")
    assert outcome.request.job.name == JOB_DEEP_SEARCH
    assert isinstance(outcome.request.payload, DeepSearchRequest)
    return outcome, outcome.request.payload


async def test_the_job_carries_the_identity_the_tenants_zone_and_patterns_and_default_budgets(
        env, tenant, conn):
    await set_pattern(conn, tenant["id"], "booking", "[A-Z]{3}[0-9]{3}")
    job, request = await job_of(env, tenant["identity_key"])
    assert request == DeepSearchRequest(
        question=QUESTION, identity_ids=[tenant["desk"]], time_zone="Europe/London",
        patterns={"booking": "[A-Z]{3}[0-9]{3}"}, max_steps=6, max_seconds=8)
    assert job.request.seconds == 8.0  # the worker's time is the call's max_seconds


@pytest.mark.parametrize(("asked", "expected"), [
    ({}, (3, 5)),                                   # the policy is the default
    ({"max_steps": 10, "max_seconds": 30}, (3, 5)),  # a larger value is lowered, not refused
    ({"max_steps": 2, "max_seconds": 4}, (2, 4)),    # a smaller one is kept
    ({"max_steps": 3.0}, (3, 5)),                   # JSON Schema's integer admits 3.0
])
async def test_the_tenants_agentic_limits_are_default_and_cap(env, tenant, conn, asked,
                                                              expected):
    await set_agentic_limits(conn, tenant["id"], max_steps=3, max_seconds=5)
    job, request = await job_of(env, tenant["identity_key"], **asked)
    assert (request.max_steps, request.max_seconds) == expected
    assert job.request.seconds == expected[1]


@pytest.mark.parametrize(("arguments", "path"), [
    ({"max_steps": 1}, "max_steps"), ({"max_steps": 11}, "max_steps"),
    ({"max_seconds": 2}, "max_seconds"), ({"max_seconds": 31}, "max_seconds"),
    ({"max_steps": 4.5}, "max_steps"), ({"max_seconds": "8"}, "max_seconds"),
    ({"question": ""}, "question"), ({"question": "x" * 1025}, "question"),
    ({"question": QUESTION, "mode": "keyword"}, "mode"),
])
async def test_out_of_range_budgets_and_bad_questions_are_invalid_request(env, tenant,
                                                                         arguments, path):
    outcome = await call(env, tenant["identity_key"], {"question": QUESTION, **arguments})
    assert isinstance(outcome, PylotaError)
    assert outcome.code is ErrorCode.INVALID_REQUEST
    assert outcome.details == {"path": path}


def test_the_agentic_limits_refuse_what_the_schema_refuses():
    spec = next(t for t in TOOLS if t.name == "mail_deep_search")
    properties = spec.input_schema["properties"]
    assert (properties["max_steps"]["minimum"], properties["max_steps"]["maximum"]) == (2, 10)
    assert (properties["max_seconds"]["minimum"], properties["max_seconds"]["maximum"]) == (3, 30)
    assert "default" not in properties["max_steps"] and "default" not in properties["max_seconds"]


async def test_set_agentic_limits_refuses_outside_the_range_and_keeps_what_is_not_given(
        tenant, conn):
    with pytest.raises(PylotaError) as refused:
        await set_agentic_limits(conn, tenant["id"], max_steps=11)
    assert refused.value.details == {"path": "max_steps"}
    with pytest.raises(PylotaError):
        await set_agentic_limits(conn, tenant["id"], max_seconds=2)
    changed = await set_agentic_limits(conn, tenant["id"], max_seconds=12)
    assert (changed.agentic_max_steps, changed.agentic_max_seconds) == (6, 12)


async def test_tenant_scope_searches_the_tenants_identities_or_those_named(env, tenant):
    _, everyone = await job_of(env, tenant["tenant_key"], scope="tenant")
    assert everyone.identity_ids == sorted([tenant["desk"], tenant["sales"]])
    _, named = await job_of(env, tenant["tenant_key"], scope="tenant",
                            identity_ids=[tenant["sales"]])
    assert named.identity_ids == [tenant["sales"]]
    _, one = await job_of(env, tenant["tenant_key"], identity="sales@acme.example")
    assert one.identity_ids == [tenant["sales"]]


@pytest.mark.parametrize("tool", ["mail_search", "mail_deep_search"])
async def test_scope_errors_are_mail_searchs(env, tenant, conn, tool):
    text = {"mail_search": "q", "mail_deep_search": "question"}[tool]

    async def error(principal: Principal, **arguments: Any) -> PylotaError:
        outcome = await call(env, principal, {text: QUESTION, **arguments}, tool)
        assert isinstance(outcome, PylotaError), outcome
        return outcome

    denied = await error(tenant["identity_key"], scope="tenant")
    assert denied.code is ErrorCode.SCOPE_DENIED
    needs_identity = await error(tenant["tenant_key"])
    assert (needs_identity.code, needs_identity.details) == (ErrorCode.INVALID_REQUEST,
                                                             {"path": "identity"})
    other = await create_tenant(conn, "elsewhere")
    stranger = await create_identity(conn, other.id, "x@elsewhere.example")
    outside = await error(tenant["tenant_key"], scope="tenant", identity_ids=[stranger.id])
    assert outside.code is ErrorCode.IDENTITY_NOT_FOUND
    not_mine = await error(tenant["identity_key"], identity="x@elsewhere.example")
    assert not_mine.code is ErrorCode.IDENTITY_NOT_FOUND
    without_tenant_scope = await error(tenant["tenant_key"], identity_ids=[tenant["desk"]])
    assert without_tenant_scope.details == {"path": "identity_ids"}
    for n in range(MAX_SCOPE_IDENTITIES - 1):  # with desk and sales: one more than allowed
        await create_identity(conn, tenant["id"], f"box{n}@acme.example")
    too_large = await error(tenant["tenant_key"], scope="tenant")
    assert too_large.code is ErrorCode.SCOPE_TOO_LARGE


async def test_rl_agentic_is_charged_per_call(env, tenant):
    for _ in range(AGENTIC_PER_MINUTE):
        await job_of(env, tenant["identity_key"])
    limited = await call(env, tenant["identity_key"], {"question": QUESTION})
    assert isinstance(limited, PylotaError) and limited.code is ErrorCode.RATE_LIMITED
    assert limited.details["bucket"] == "RL_AGENTIC"


async def test_the_call_logs_the_questions_hash_and_never_the_question(env, tenant, capfd):
    secret = "What did the secret-7731 memo say?"
    outcome = await call(env, tenant["identity_key"], {"question": secret})
    assert isinstance(outcome, Job)
    outcome.finish("ok")
    logs = capfd.readouterr()
    assert secret not in logs.out + logs.err
    [line] = [json.loads(line) for line in (logs.out + logs.err).splitlines()
              if line.startswith("{") and '"tool_call"' in line]
    assert line["tool"] == "mail_deep_search"
    assert line["query_hash"] == query_hash(env.settings.pm_hash_key, secret)


async def test_a_tenant_keys_call_logs_the_identity_it_acted_for(env, tenant, capfd):
    """Spec section 7: each call logs its identity ID. A tenant key has none of its own, so the
    line named none, even for a read of one identity's mail (found by an attack); it names the
    identity the call resolved, and none when the call failed before resolving one."""
    outcome = await call(env, tenant["tenant_key"], {"question": QUESTION,
                                                    "identity": "sales@acme.example"})
    assert isinstance(outcome, Job)
    outcome.finish("ok")
    searched = await call(env, tenant["tenant_key"], {"q": "budget", "identity": tenant["desk"]},
                          tool="mail_search")
    refused = await call(env, tenant["tenant_key"], {"q": "budget"}, tool="mail_search")
    assert isinstance(refused, PylotaError)
    assert not isinstance(searched, PylotaError)
    logs = capfd.readouterr()
    lines = [json.loads(line) for line in (logs.out + logs.err).splitlines()
             if line.startswith("{") and '"tool_call"' in line]
    assert [(line["tool"], line["identity_id"]) for line in lines] == [
        ("mail_deep_search", tenant["sales"]), ("mail_search", tenant["desk"]),
        ("mail_search", None)]
