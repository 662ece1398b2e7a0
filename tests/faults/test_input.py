"""Issue 9, defect 6: a date-time outside PostgreSQL's and Python's range once converted to UTC
(``0001-01-01T00:00:00+14:00`` is year 0, ``9999-12-31T23:59:59-23:59`` year 10000) is an
immediate ``invalid_request`` naming the argument — before, ``mail_wait``'s ``since`` crashed the
job on the worker with an asyncpg ``DataError``, the caller got ``unavailable`` after 17 s, and
the worker's traceback printed the value (spec section 7: arguments are never logged). The same
holds for ``mail_search``'s ``after`` and ``before`` and on REST."""

from __future__ import annotations

import time

import msgspec

from tests.e2e.transport_kit import Wire, keyed_identity
from tests.faults.kit import no_traceback, stack_env, tool_error

BAD = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-23:59"]
#: Bound on the refusal: it is the front's, before any job or query.
REFUSED_SECONDS = 1.0


async def test_dates_out_of_range_are_refused_at_once_and_never_logged(
        db_url, conn, own_redis, services, http):
    _, identity_id, _, token = await keyed_identity(conn, "desk@acme.example")
    env = stack_env(db_url, own_redis.url)
    front, base, (worker,) = await services.stack(env)
    wire = Wire(http, f"{base}/mcp", token)
    calls = [(tool, {name: value, **extra}, name) for value in BAD
             for tool, name, extra in (("mail_wait", "since", {"timeout_seconds": 5}),
                                       ("mail_search", "after", {"q": "invoice"}),
                                       ("mail_search", "before", {"q": "invoice"}))]
    for tool, arguments, name in calls:
        for ask in (wire.legacy, wire.modern):
            began = time.monotonic()
            response, messages = await ask("tools/call", {"name": tool, "arguments": arguments})
            took = time.monotonic() - began
            assert response.status_code == 200, response.text
            error = tool_error(messages[-1])
            assert error is not None, messages
            assert error["code"] == "invalid_request" and error["details"]["path"] == name, error
            assert took <= REFUSED_SECONDS, f"{tool} {name}: refused after {took:.2f} s"
    for value in BAD:
        began = time.monotonic()
        rest = await http.get(f"{base}/v1/identities/{identity_id}/wait",
                              params={"since": value, "timeout_seconds": 5},
                              headers={"authorization": f"Bearer {token}"})
        assert time.monotonic() - began <= REFUSED_SECONDS
        assert rest.status_code == 400, rest.text
        error = msgspec.json.decode(rest.content)["error"]
        assert error["code"] == "invalid_request" and error["details"]["path"] == "since"

    # a well-formed wait still works, and nothing logged a value or a traceback
    response, messages = await wire.legacy("tools/call", {
        "name": "mail_wait", "arguments": {"since": "2026-01-01T00:00:00Z",
                                           "timeout_seconds": 1}})
    assert tool_error(messages[-1]) is None, messages
    for service in (front, worker):
        no_traceback(service)
        text = service.text()
        for value in BAD:
            assert value[:10] not in text, f"{service.name} logged {value}"

