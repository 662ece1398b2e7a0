"""Each tool bucket of DESIGN.md section 5.3 is one per-key budget across MCP and REST (spec
section 7), through a real uvicorn front: calls alternate between the surfaces until the bucket's
configured limit, then both surfaces answer ``rate_limited`` with ``details.retry_after`` and
``details.reset_at`` (REST also with ``Retry-After``), at once, while another key and the
tools without that bucket go on.

A bucket whose tools are not registered yet is skipped here with that reason; it is held at its
limit at the ``shared.ratelimit`` level (``tests/shared/test_ratelimit.py``). RL_API has its own
test across both surfaces (``tests/e2e/test_rest.py``). The calls name another tenant's
identity (``FOREIGN_CASES``): a call refused for scope spends its bucket like any other, so the
same table drives every tool, and nothing is sent or signed.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import httpx
import msgspec
import pytest

from shared.tools.registry import TOOLS
from tests.conftest import running_front, settings_for
from tests.e2e.scope_world import ACCEPTED_CODES, FOREIGN_CASES, build_world, rest_call
from tests.e2e.test_isolation import mcp_cell
from tests.e2e.transport_kit import Wire
from tests.shared.signing.test_web_bot_auth import SECRET
from tests.shared.test_ratelimit import SETTING

LIMIT = 4


def check_refusal(details: dict, bucket: str, before: datetime) -> None:
    assert details["bucket"] == bucket
    assert 1 <= details["retry_after"] <= 60
    reset_at = datetime.fromisoformat(details["reset_at"].replace("Z", "+00:00"))
    assert before - timedelta(seconds=1) <= reset_at <= before + timedelta(seconds=61)


@pytest.mark.parametrize("bucket", ["RL_SEARCH", "RL_AGENTIC", "RL_SEND", "RL_SIGN"])
async def test_a_tool_bucket_is_one_budget_across_mcp_and_rest(db_url, conn, bucket):
    tools = [t for t in TOOLS if t.bucket == bucket]
    if not tools:
        pytest.skip(f"no registered tool charges {bucket} yet; tests/shared/test_ratelimit.py "
                    f"holds the bucket at its limit")
    world = await build_world(conn)
    key, other_key = world.key("tenant"), world.key("identity")
    rival = world.places["rival"]
    calls = itertools.cycle([(t.name, a) for t in tools
                             for a in FOREIGN_CASES[t.name](key.own, rival)])
    settings = settings_for(db_url, pm_signing_secret=SECRET, pm_web_bot_auth="on",
                            **{SETTING[bucket]: LIMIT})
    async with running_front(settings) as url:
        async with httpx.AsyncClient(base_url=url.removesuffix("/mcp"), timeout=30) as http:
            wire = Wire(http, url, key.token)
            auth = {"Authorization": f"Bearer {key.token}"}

            async def over_rest(tool: str, arguments: dict) -> httpx.Response:
                route, path, request = rest_call(tool, arguments)
                return await http.request(route.method, path,
                                          headers={**auth, **request.pop("headers")}, **request)

            for n in range(LIMIT):
                tool, arguments = next(calls)
                if n % 2 == 0:
                    code, _ = await mcp_cell(wire, tool, arguments)
                else:
                    code = (await over_rest(tool, arguments)).json()["error"]["code"]
                assert code in ACCEPTED_CODES, (n, tool, code)

            before = datetime.now(timezone.utc)
            tool, arguments = next(calls)
            _, messages = await wire.legacy("tools/call", {"name": tool, "arguments": arguments})
            result = messages[0]["result"]
            assert result["isError"] is True
            envelope = msgspec.json.decode(result["content"][0]["text"])["error"]
            assert envelope["code"] == "rate_limited" and envelope["retryable"] is True
            check_refusal(envelope["details"], bucket, before)

            refused = await over_rest(*next(calls))
            assert refused.status_code == 429
            error = refused.json()["error"]
            assert error["code"] == "rate_limited"
            check_refusal(error["details"], bucket, before)
            assert refused.headers["retry-after"] == str(error["details"]["retry_after"])

            # the budget is this key's and this bucket's only
            listed = await http.get("/v1/identities", headers=auth)
            assert listed.status_code == 200
            other = Wire(http, url, other_key.token)
            code, _ = await mcp_cell(other, *next(calls))
            assert code in ACCEPTED_CODES
