"""Cross-level isolation (issue 13), through a real uvicorn front over MCP and REST.

The matrix: every key level (platform live and test, partner, tenant, identity) × every
registered tool × every argument set of ``FOREIGN_CASES`` naming a place the key must not reach
(another partner's tenant, a tenant without partner, a tenant of the other mode, another tenant,
a sibling identity) × both surfaces. Each cell must be refused: ``*_not_found`` or
``scope_denied`` where the key's level may call the tool, -32602 (MCP) or 403
``permission_denied`` (REST) where it may not; and no cell's answer holds any string of the
place it named (subjects, bodies, file text, display names, tenant names). The test counts the
cells it ran against the count the table gives, and fails on a registered tool with no entry.

Beside the matrix: listings and the address lookup show each level only what it reaches,
``tools/list`` follows the level, and a suspended partner's keys and its tenants' keys (403
``partner_suspended``), an expired key and a revoked one (401) are refused by both surfaces.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest

from shared.auth.keys import authenticate, revoke_key
from shared.auth.permissions import KeyLevel
from shared.errors import STATUS, ErrorCode
from shared.tenancy.store import set_partner_status
from shared.tools.registry import TOOLS, ToolSpec
from tests.conftest import running_front, settings_for
from tests.e2e.scope_world import ACCEPTED_CODES, FOREIGN_CASES, KeyRow, World, build_world, \
    rest_call
from tests.e2e.transport_kit import Wire
from tests.shared.signing.test_web_bot_auth import SECRET

UNKNOWN_TOOL = -32602
#: Far above what the matrix spends, so no cell is refused for its rate.
GENEROUS = {f"pm_rl_{b}_per_minute": 100_000 for b in ("api", "search", "agentic", "send",
                                                       "sign")}


@pytest.fixture
async def world(db_url, conn) -> AsyncIterator[tuple[World, httpx.AsyncClient, str]]:
    built = await build_world(conn)
    settings = settings_for(db_url, pm_signing_secret=SECRET, pm_web_bot_auth="on", **GENEROUS)
    async with running_front(settings) as url:
        async with httpx.AsyncClient(base_url=url.removesuffix("/mcp"), timeout=30) as http:
            yield built, http, url


def may_call(key: KeyRow, tool: ToolSpec) -> bool:
    """The registry's rule: the tool's key levels (each key holds every permission its level
    may)."""
    return key.level in tool.levels


def cells(world: World) -> list[tuple[KeyRow, ToolSpec, dict[str, Any]]]:
    """Every (key, tool, arguments) of the matrix. A level that may not call a tool with no
    foreign arguments (mail_get_usage) still gets one call, with none."""
    missing = sorted(t.name for t in TOOLS if t.name not in FOREIGN_CASES)
    assert not missing, f"registered tools without FOREIGN_CASES entries: {missing}"
    found = []
    for key in world.keys:
        for tool in TOOLS:
            for foreign in key.foreign:
                arguments = FOREIGN_CASES[tool.name](key.own, foreign)
                if not arguments and not may_call(key, tool):
                    arguments = [{}]
                found += [(key, tool, a) for a in arguments]
    return found


def leaked(key: KeyRow, body: str) -> list[str]:
    return [s for place in key.foreign for s in place.secrets if s in body]


async def mcp_cell(wire: Wire, tool: str, arguments: dict[str, Any]) -> tuple[Any, str]:
    """The refusal of one MCP call: the JSON-RPC error code, or the tool error's code."""
    response, messages = await wire.legacy("tools/call", {"name": tool, "arguments": arguments})
    (message,) = [m for m in messages if "id" in m]
    if "error" in message:
        return message["error"]["code"], response.text
    result = message["result"]
    if not result.get("isError"):
        return "no error", response.text
    return msgspec.json.decode(result["content"][0]["text"])["error"]["code"], response.text


async def test_no_level_reaches_another_tenants_resources(world):
    built, http, url = world
    matrix = cells(built)
    failures: list[str] = []
    answered: Counter[tuple[str, str]] = Counter()
    for key, tool, arguments in matrix:
        allowed = may_call(key, tool)
        wire = Wire(http, url, key.token)
        code, body = await mcp_cell(wire, tool.name, arguments)
        answered[("mcp", str(code))] += 1
        if (code not in ACCEPTED_CODES) if allowed else (code != UNKNOWN_TOOL):
            failures.append(f"mcp {key.label} {tool.name} {arguments}: {code}")
        if secrets := leaked(key, body):
            failures.append(f"mcp {key.label} {tool.name} {arguments} leaked {secrets}")

        route, path, request = rest_call(tool.name, arguments)
        headers = {"Authorization": f"Bearer {key.token}", **request.pop("headers")}
        response = await http.request(route.method, path, headers=headers, **request)
        error = response.json().get("error", {}) if response.headers.get(
            "content-type", "").startswith("application/json") else {}
        code = error.get("code", f"status {response.status_code}")
        answered[("rest", code)] += 1
        expected = ACCEPTED_CODES if allowed else {ErrorCode.PERMISSION_DENIED.value}
        if code not in expected or response.status_code != STATUS[ErrorCode(code)]:
            failures.append(f"rest {key.label} {tool.name} {arguments}: "
                            f"{response.status_code} {code}")
        if secrets := leaked(key, response.text):
            failures.append(f"rest {key.label} {tool.name} {arguments} leaked {secrets}")
    assert not failures, "\n".join(failures)

    # The matrix is what the table says, and it is not small: every level met every tool.
    expected_cells = sum(
        max(len(FOREIGN_CASES[t.name](k.own, f)), 0 if may_call(k, t) else 1)
        for k in built.keys for t in TOOLS for f in k.foreign)
    assert len(matrix) == expected_cells
    assert sum(answered.values()) == 2 * len(matrix)
    pairs = {(k.label, t.name) for k, t, _ in matrix}
    assert pairs >= {(k.label, t.name) for k in built.keys for t in TOOLS
                     if t.name != "mail_get_usage" or not may_call(k, t)}
    print(f"\nisolation matrix: {len(built.keys)} keys x {len(TOOLS)} tools -> {len(matrix)} "
          f"cells x 2 surfaces = {2 * len(matrix)} calls: {dict(sorted(answered.items()))}")


async def test_each_level_lists_and_looks_up_only_what_it_reaches(world):
    built, http, url = world
    reach = {
        "platform": {"home", "sibling", "rival", "orphan"},
        "platform-test": {"sandbox"},
        "partner": {"home", "sibling"},
        "tenant": {"home", "sibling"},
        "identity": {"home"},
    }
    for key in built.keys:
        headers = {"Authorization": f"Bearer {key.token}"}
        listed = await http.get("/v1/identities", params={"limit": "100"}, headers=headers)
        assert listed.status_code == 200, listed.text
        expected = {built.places[name].identity_id for name in reach[key.label]}
        assert {i["id"] for i in listed.json()["data"]} == expected, key.label
        wire = Wire(http, url, key.token)
        _, messages = await wire.legacy("tools/call", {"name": "mail_list_identities",
                                                       "arguments": {}})
        assert {i["id"] for i in messages[0]["result"]["structuredContent"]["data"]} == expected
        for foreign in key.foreign:
            lookup = await http.get("/v1/identities/lookup", params={"address": foreign.address},
                                    headers=headers)
            assert lookup.status_code == 404, (key.label, foreign.name)
            assert lookup.json()["error"]["code"] == "identity_not_found"
            assert not leaked(key, lookup.text)


async def test_tools_list_follows_the_key_level(world):
    built, http, url = world
    for key in built.keys:
        _, messages = await Wire(http, url, key.token).legacy("tools/list")
        listed = {t["name"] for t in messages[0]["result"]["tools"]}
        assert listed == {t.name for t in TOOLS if key.level in t.levels}, key.label
        if key.level in (KeyLevel.PLATFORM, KeyLevel.PARTNER):
            assert not listed & {"mail_sign_assertion", "mail_sign_http_request",
                                 "mail_get_usage"}, key.label
        else:
            assert {"mail_sign_assertion", "mail_sign_http_request"} <= listed, key.label


async def test_suspension_expiry_and_revocation_on_both_surfaces(world, conn):
    built, http, url = world
    partner_id = await conn.fetchval("SELECT id FROM partners WHERE name = 'ours'")
    await set_partner_status(conn, partner_id, "suspended")
    await conn.execute("UPDATE api_keys SET expires_at = now() WHERE id = $1",
                       (await authenticate(conn, f"Bearer {built.key('platform').token}")).key_id)
    await revoke_key(conn, (await authenticate(
        conn, f"Bearer {built.key('platform-test').token}")).key_id)
    refused = {"partner": (403, "partner_suspended"), "tenant": (403, "partner_suspended"),
               "identity": (403, "partner_suspended"), "platform": (401, "key_expired"),
               "platform-test": (401, "key_revoked")}
    for key in built.keys:
        status, code = refused[key.label]
        response, messages = await Wire(http, url, key.token).legacy("tools/list")
        assert response.status_code == status, key.label
        assert messages[0]["error"]["data"]["error"]["code"] == code
        rest = await http.get("/v1/identities", headers={"Authorization": f"Bearer {key.token}"})
        assert (rest.status_code, rest.json()["error"]["code"]) == (status, code), key.label
