"""The REST API v1 on the one call pipeline (issue 8), through a real uvicorn, arq worker and the
official MCP Python SDK beside it: every tool returns the same object on both surfaces, errors
are the spec section 5 envelope with the DESIGN.md section 5.5 statuses, a key has one RL_API
budget across both, and a worker tool streams as SSE or answers a long poll."""

from __future__ import annotations

import asyncio
import gzip
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from front.rest.endpoints import REST_ROUTES
from shared.auth.keys import create_key
from shared.auth.permissions import Permission
from shared.errors import ErrorCode, RETRYABLE, STATUS
from shared.ingest.importer import import_paths
from shared.tenancy.store import create_identity, set_tenant_policy
from shared.tools.registry import TOOLS
from tests.conftest import ROOT, running_front, running_worker, settings_for
from tests.e2e.harness import sdk_client
from tests.e2e.transport_kit import keyed_identity

DEMO = ROOT / "demo" / "brightwell.mbox"
SIGNING_SECRET = "test-signing-secret-of-32-characters-at-least"


@pytest.fixture
async def demo(db_url, conn):
    """The demo mailbox imported through the importer, an identity key and a tenant key, a front
    and a worker."""
    tenant_id, identity_id, _, token = await keyed_identity(conn, "desk@pylota.example")
    _, tenant_token = await create_key(conn, tenant_id=tenant_id, identity_id=None,
                                       permissions=list(Permission))
    summary = await import_paths(conn, None, identity_id, [DEMO])
    assert summary.imported > 5 and not summary.failed
    await set_tenant_policy(conn, tenant_id, allow_signed_requests=True)
    settings = settings_for(db_url, pm_stream_heartbeat_seconds=0.3, pm_embedder="hash",
                            pm_signing_secret=SIGNING_SECRET, pm_web_bot_auth="on")
    async with running_front(settings) as url, running_worker(settings):
        async with httpx.AsyncClient(base_url=url.removesuffix("/mcp"), timeout=30) as http:
            yield {"url": url, "http": http, "token": token, "tenant_token": tenant_token,
                   "tenant_id": tenant_id, "identity_id": identity_id}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


#: Fields that differ by call whatever the surface: the instant a search was served at, wall
#: times (deep search's ``seconds``), and what the signing tools make anew each time (a token, a
#: signature, their expiry).
VOLATILE = {"as_of", "seconds", "assertion", "expires_at", "headers.Signature",
            "headers.Signature-Input"}


def without_clock(result: Any, prefix: str = "") -> Any:
    """``result`` without its :data:`VOLATILE` fields, at any depth (``seconds`` wherever it is)."""
    if isinstance(result, dict):
        return {k: without_clock(v, f"{prefix}{k}.") for k, v in result.items()
                if f"{prefix}{k}" not in VOLATILE and k != "seconds"}
    if isinstance(result, list):
        return [without_clock(v, prefix) for v in result]
    return result


async def test_every_tool_returns_the_same_object_over_mcp_and_rest(demo, conn):
    http, idn = demo["http"], demo["identity_id"]
    message_id, thread_id = await conn.fetchrow(
        "SELECT id, thread_id FROM messages WHERE identity_id = $1 ORDER BY id LIMIT 1", idn)
    since = (datetime.now(timezone.utc) - timedelta(days=1)).isoformat()
    with_file, attachment_id = await conn.fetchrow(
        "SELECT message_id, id FROM attachments ORDER BY id LIMIT 1")
    cases: dict[str, tuple[dict[str, Any], str, str, dict[str, Any]]] = {
        "mail_list_identities": ({"limit": 5}, "GET", "/v1/identities", {"limit": 5}),
        "mail_list_threads": ({"needs_reply_gte": 0.5, "limit": 3}, "GET",
                              f"/v1/identities/{idn}/threads",
                              {"needs_reply_gte": "0.5", "limit": "3"}),
        "mail_update_labels": ({"message_id": message_id, "labels_add": ["handled"],
                                "read": True}, "PATCH", f"/v1/messages/{message_id}",
                               {"labels_add": ["handled"], "read": True}),
        "mail_search": ({"q": "invoice", "mode": "keyword"}, "POST",
                        f"/v1/identities/{idn}/search", {"q": "invoice", "mode": "keyword"}),
        "mail_get_thread": ({"thread_id": thread_id}, "GET", f"/v1/threads/{thread_id}", {}),
        "mail_get_message": ({"message_id": message_id, "include_headers": True}, "GET",
                             f"/v1/messages/{message_id}", {"include_headers": "true"}),
        "mail_get_attachment_text": (
            {"message_id": with_file, "attachment_id": attachment_id, "pages": "1-2"}, "GET",
            f"/v1/messages/{with_file}/attachments/{attachment_id}/text", {"pages": "1-2"}),
        "mail_find_related": ({"message_id": message_id, "limit": 3}, "GET",
                              f"/v1/messages/{message_id}/related", {"limit": "3"}),
        "mail_search_contacts": ({"q": "bright"}, "GET", f"/v1/identities/{idn}/contacts",
                                 {"q": "bright"}),
        "mail_wait": ({"since": since, "timeout_seconds": 5}, "GET",
                      f"/v1/identities/{idn}/wait", {"since": since, "timeout": "5"}),
        "mail_sign_assertion": ({"audience": "https://shop.example"}, "POST",
                                f"/v1/identities/{idn}/assertions",
                                {"audience": "https://shop.example"}),
        "mail_sign_http_request": ({"url": "https://shop.example/"}, "POST",
                                   f"/v1/identities/{idn}/http-signatures",
                                   {"url": "https://shop.example/"}),
        "mail_get_usage": ({}, "GET", "/v1/usage", {}),
        "mail_send": ({"idempotency_key": "same-send", "to": ["jo@example.com"],
                       "subject": "Hello", "text": "Hi."}, "POST",
                      f"/v1/identities/{idn}/messages",
                      {"to": ["jo@example.com"], "subject": "Hello", "text": "Hi."}),
        "mail_reply": ({"message_id": message_id, "idempotency_key": "same-reply",
                        "text": "Thanks."}, "POST", f"/v1/messages/{message_id}/reply",
                       {"text": "Thanks."}),
        "mail_forward": ({"message_id": message_id, "idempotency_key": "same-forward",
                          "to": ["bo@example.net"]}, "POST",
                         f"/v1/messages/{message_id}/forward", {"to": ["bo@example.net"]}),
        "mail_deep_search": ({"question": "When is the invoice due?", "max_steps": 4}, "POST",
                             f"/v1/identities/{idn}/deep-search",
                             {"question": "When is the invoice due?", "max_steps": 4}),
    }
    assert set(cases) == {t.name for t in TOOLS}, "every tool needs its REST case here"
    async with sdk_client(demo["url"], demo["token"]) as client:
        for name, (arguments, method, path, rest_args) in cases.items():
            over_mcp = await client.call_tool(name, arguments)
            assert not over_mcp.is_error, (name, over_mcp.content)
            headers = auth(demo["token"])
            if "idempotency_key" in arguments:
                # The send tools: REST takes the key as a header, and the same key replays
                # MCP's message, so both bodies are one message (200, deduplicated on REST).
                headers["Idempotency-Key"] = arguments["idempotency_key"]
            if method == "GET":
                response = await http.get(path, params=rest_args, headers=headers)
            else:
                response = await http.request(method, path, json=rest_args, headers=headers)
            route = next(r for r in REST_ROUTES if (r.tool, r.method) == (name, method))
            # a send replaying MCP's key answers with the route's replay status
            expected = route.replay_status if "idempotency_key" in arguments else route.status
            assert response.status_code == expected, (name, response.text)
            assert response.headers["content-type"] == "application/json"
            over_rest, mcp_body = response.json(), dict(over_mcp.structured_content)
            if "idempotency_key" in arguments:
                replayed = (mcp_body.pop("deduplicated"), over_rest.pop("deduplicated"))
                assert replayed == (False, True), name
            assert without_clock(over_rest) == without_clock(mcp_body), name


async def test_errors_are_the_envelope_with_the_codes_status(demo):
    http = demo["http"]
    missing = await http.get("/v1/identities", headers=auth("pmk_live_nope"))
    assert missing.status_code == STATUS[ErrorCode.UNAUTHENTICATED] == 401
    assert missing.headers["www-authenticate"].startswith('Bearer realm="pylota-mail"')
    assert missing.json()["error"]["code"] == "unauthenticated"

    bad = await http.post(f"/v1/identities/{demo['identity_id']}/search",
                          json={"q": "x", "limit": 99}, headers=auth(demo["token"]))
    assert bad.status_code == 400
    error = bad.json()["error"]
    assert error["code"] == "invalid_request" and error["details"] == {"path": "limit"}
    assert "1 to 25" in error["fix"] and error["request_id"].startswith("req_")
    assert bad.headers["x-request-id"] == error["request_id"]

    search_url = f"/v1/identities/{demo['identity_id']}/search"
    not_json = await http.post(search_url, content=b"{", headers={
        **auth(demo["token"]), "content-type": "application/json"})
    assert not_json.status_code == 400 and not_json.json()["error"]["details"] == {"path": "body"}
    # A body labelled as something else is refused as POST /mcp refuses it (it was read as JSON
    # whatever it said); a +json type and parameters are JSON.
    for label in ("application/x-www-form-urlencoded", "text/plain", None):
        labelled = await http.post(search_url, content=b'{"q": "x"}', headers={
            **auth(demo["token"]), **({"content-type": label} if label else {})})
        assert labelled.status_code == 415, label
        error = labelled.json()["error"]
        assert error["code"] == "invalid_request" and error["details"] == {"header": "Content-Type"}
        assert "Content-Type: application/json" in error["fix"]
    for label in ("application/json; charset=utf-8", "Application/Merge-Patch+JSON"):
        labelled = await http.post(search_url, content=b'{"q": "x", "mode": "keyword"}',
                                   headers={**auth(demo["token"]), "content-type": label})
        assert labelled.status_code == 200, label

    elsewhere = await http.get("/v1/messages/msg_01J9Z3Z3Z3Z3Z3Z3Z3Z3Z3Z3Z3",
                               headers=auth(demo["token"]))
    assert elsewhere.status_code == 404
    assert elsewhere.json()["error"]["code"] == "message_not_found"

    unknown = await http.get("/v1/nothing-here", headers=auth(demo["token"]))
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "invalid_request"

    twice = await http.post(f"/v1/identities/{demo['identity_id']}/search",
                            json={"q": "x", "identity": "someone"}, headers=auth(demo["token"]))
    assert twice.status_code == 400 and twice.json()["error"]["details"] == {"path": "identity"}

    # a renamed query parameter is named as the caller wrote it (found by an attack)
    long_wait = await http.get(f"/v1/identities/{demo['identity_id']}/wait",
                               params={"timeout": 61}, headers=auth(demo["token"]))
    error = long_wait.json()["error"]
    assert long_wait.status_code == 400 and error["details"] == {"path": "timeout"}
    assert "timeout_seconds" not in error["message"] + error["fix"]
    assert "Give timeout as" in error["fix"]
    # the tool's name for it is not taken beside it, and an unknown parameter's fix lists the
    # endpoint's names (found by a new user)
    wait = f"/v1/identities/{demo['identity_id']}/wait"
    tools_name = await http.get(wait, params={"timeout_seconds": 2}, headers=auth(demo["token"]))
    assert tools_name.status_code == 400
    assert tools_name.json()["error"]["details"] == {"path": "timeout_seconds"}
    assert tools_name.json()["error"]["fix"] == "Pass ?timeout=… instead of ?timeout_seconds=…."
    bogus = (await http.get(wait, params={"bogus": 1}, headers=auth(demo["token"]))).json()
    assert bogus["error"]["details"] == {"path": "bogus"}
    assert "timeout" in bogus["error"]["fix"] and "timeout_seconds" not in bogus["error"]["fix"]


async def test_requests_no_route_takes_write_their_log_line(demo, capfd):
    """A 404 or 405 of the API answered with a request id but wrote no ``request`` line (found by
    an attack); the path, which may hold anything, is not logged."""
    http = demo["http"]
    capfd.readouterr()
    unknown = await http.get("/v1/nothing-here-secret", headers=auth(demo["token"]))
    not_allowed = await http.delete("/v1/usage", headers=auth(demo["token"]))
    captured = capfd.readouterr()
    logs = captured.out + captured.err
    lines = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    requests = {line["request_id"]: line for line in lines if line.get("event") == "request"}
    for response, status in ((unknown, 404), (not_allowed, 405)):
        assert response.status_code == status
        line = requests[response.headers["x-request-id"]]
        assert (line["status"], line["surface"], line["error_code"]) == (
            status, "rest", "invalid_request")
    assert "nothing-here-secret" not in logs


async def test_a_key_without_the_permission_gets_permission_denied(demo, conn):
    _, token = await create_key(conn, tenant_id=demo["tenant_id"],
                                identity_id=demo["identity_id"],
                                permissions=[Permission.IDENTITIES_READ])
    refused = await demo["http"].post(f"/v1/identities/{demo['identity_id']}/search",
                                      json={"q": "x"}, headers=auth(token))
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "permission_denied"
    assert "search:read" in refused.json()["error"]["fix"]


async def test_a_browser_page_elsewhere_cannot_call_the_rest_api(demo):
    """The REST API does not check ``Origin`` (README, PM_API_HOST): it needs a key in the
    ``Authorization`` header, which a browser adds to a cross-origin request only after a CORS
    preflight allows it, and no preflight is ever allowed."""
    path = f"/v1/identities/{demo['identity_id']}/search"
    preflight = await demo["http"].options(path, headers={
        "Origin": "https://evil.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert not any(name.lower().startswith("access-control-allow-")
                   for name in preflight.headers), preflight.headers
    # without the key a browser could send by itself, nothing is answered
    bare = await demo["http"].post(path, json={"q": "invoice"},
                                   headers={"Origin": "https://evil.example"})
    assert bare.status_code == 401 and "access-control-allow-origin" not in bare.headers


async def test_the_rest_status_filter_also_lists_identities_being_deleted(demo, conn):
    """Spec section 4.3, mail_list_identities: the tool's status enum offers active and paused,
    and "the REST filter also accepts deleting and deleted" (it was a 400: found by an attack).
    Without a filter, only identities that can act are listed, on both surfaces."""
    http, headers = demo["http"], auth(demo["tenant_token"])
    leaving = await create_identity(conn, demo["tenant_id"], "leaving@pylota.example")
    await conn.execute("UPDATE identities SET status = 'deleting' WHERE id = $1", leaving.id)

    def ids(response: httpx.Response) -> set[str]:
        assert response.status_code == 200, response.text
        return {i["id"] for i in response.json()["data"]}

    assert ids(await http.get("/v1/identities", headers=headers)) == {demo["identity_id"]}
    assert ids(await http.get("/v1/identities", params={"status": "deleting"},
                              headers=headers)) == {leaving.id}
    assert ids(await http.get("/v1/identities", params={"status": "deleted"},
                              headers=headers)) == set()
    bogus = await http.get("/v1/identities", params={"status": "gone"}, headers=headers)
    assert bogus.status_code == 400 and bogus.json()["error"]["details"] == {"path": "status"}
    document = (await http.get("/v1/openapi.json")).json()
    [status] = [p for p in document["paths"]["/v1/identities"]["get"]["parameters"]
                if p["name"] == "status"]
    assert status["schema"]["enum"] == ["active", "paused", "deleting", "deleted"]
    async with sdk_client(demo["url"], demo["tenant_token"]) as client:
        listed = await client.call_tool("mail_list_identities", {})
        refused = await client.call_tool("mail_list_identities", {"status": "deleting"})
    assert {i["id"] for i in listed.structured_content["data"]} == {demo["identity_id"]}
    assert refused.is_error and "status" in refused.content[0].text


async def test_tenant_search_and_identity_lookup(demo):
    http, headers = demo["http"], auth(demo["tenant_token"])
    found = await http.get("/v1/identities/lookup", params={"address": "DESK@pylota.example"},
                           headers=headers)
    assert found.status_code == 200 and found.json()["id"] == demo["identity_id"]
    nobody = await http.get("/v1/identities/lookup", params={"address": "x@y.example"},
                            headers=headers)
    assert nobody.status_code == 404 and nobody.json()["error"]["code"] == "identity_not_found"
    nul = await http.get("/v1/identities/lookup", params={"address": "desk\x00@pylota.example"},
                         headers=headers)  # was 404 identity_not_found (found by an attack)
    assert nul.status_code == 400 and nul.json()["error"]["details"] == {"path": "address"}
    twice = await http.get("/v1/identities/lookup?address=x@y.example&address=desk@pylota.example",
                           headers=headers)  # the first won (found by an attack)
    assert twice.status_code == 400 and twice.json()["error"]["details"] == {"path": "address"}
    tenant = await http.post(f"/v1/tenants/{demo['tenant_id']}/search",
                             json={"q": "invoice", "mode": "keyword"}, headers=headers)
    assert tenant.status_code == 200, tenant.text
    assert {h["identity_id"] for h in tenant.json()["hits"]} == {demo["identity_id"]}
    denied = await http.post(f"/v1/tenants/{demo['tenant_id']}/search", json={"q": "x"},
                             headers=auth(demo["token"]))
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "scope_denied"


async def test_wait_streams_as_sse_or_answers_a_long_poll(demo):
    http, path = demo["http"], f"/v1/identities/{demo['identity_id']}/wait"
    events: list[tuple[str, Any]] = []
    async with http.stream("GET", path, params={"timeout": "1"},
                           headers={**auth(demo["token"]), "Accept": "text/event-stream"}) as sse:
        assert sse.status_code == 200
        assert sse.headers["content-type"].startswith("text/event-stream")
        name = None
        async with asyncio.timeout(15):
            async for line in sse.aiter_lines():
                if line.startswith("event: "):
                    name = line[len("event: "):]
                elif line.startswith("data: "):
                    events.append((name, msgspec.json.decode(line[len("data: "):])))
    assert events[-1][0] == "result" and events[-1][1]["timed_out"] is True
    assert [e for e, _ in events[:-1]] and {e for e, _ in events[:-1]} == {"progress"}
    assert all(d["total"] == 1.0 for _, d in events[:-1])

    polled = await http.get(path, params={"timeout": "1"}, headers=auth(demo["token"]))
    assert polled.status_code == 200 and polled.json()["timed_out"] is True
    bad = await http.get(path, params={"timeout": "0"}, headers=auth(demo["token"]))
    # named as the caller wrote it, not by the tool's argument (timeout_seconds)
    assert bad.status_code == 400 and bad.json()["error"]["details"] == {"path": "timeout"}


async def test_one_rl_api_budget_across_both_surfaces(db_url, conn):
    _, identity_id, _, token = await keyed_identity(conn, "desk@acme.example")
    settings = settings_for(db_url, pm_rl_api_per_minute=4)
    async with running_front(settings) as url:
        async with httpx.AsyncClient(base_url=url.removesuffix("/mcp"), timeout=30) as http:
            for _ in range(2):
                assert (await http.get("/v1/identities", headers=auth(token))).status_code == 200
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            mcp_headers = {**auth(token), "MCP-Protocol-Version": "2025-11-25",
                           "Accept": "application/json, text/event-stream"}
            for _ in range(2):
                assert (await http.post("/mcp", json=ping, headers=mcp_headers)).status_code == 200
            rest = await http.get("/v1/identities", headers=auth(token))
            mcp = await http.post("/mcp", json=ping, headers=mcp_headers)
    assert rest.status_code == mcp.status_code == 429
    assert int(rest.headers["retry-after"]) >= 1 and int(mcp.headers["retry-after"]) >= 1
    error = rest.json()["error"]
    assert error["code"] == "rate_limited" and error["retryable"] is (ErrorCode.RATE_LIMITED in RETRYABLE)
    assert error["details"]["bucket"] == "RL_API" and error["details"]["retry_after"] >= 1
    assert mcp.json()["error"]["data"]["error"]["code"] == "rate_limited"


async def test_openapi_document_describes_every_endpoint(demo):
    document = (await demo["http"].get("/v1/openapi.json")).json()
    assert document["openapi"].startswith("3.1")
    operations = {(method.upper(), path) for path, item in document["paths"].items()
                  for method in item}
    assert ("POST", "/v1/identities/{identity_id}/search") in operations
    assert ("POST", "/v1/tenants/{tenant_id}/search") in operations
    assert ("GET", "/v1/identities/lookup") in operations
    tools = {op["tags"][0] for item in document["paths"].values() for op in item.values()}
    assert tools == {t.name for t in TOOLS}
    search = document["paths"]["/v1/identities/{identity_id}/search"]["post"]
    assert search["responses"]["200"]["content"]["application/json"]["schema"] == next(
        t.output_schema for t in TOOLS if t.name == "mail_search")
    assert "identity" not in search["requestBody"]["content"]["application/json"]["schema"][
        "properties"]


async def test_threads_listing_and_labels_over_rest(demo, conn):
    http, idn = demo["http"], demo["identity_id"]
    message_id, thread_id = await conn.fetchrow(
        "SELECT id, thread_id FROM messages WHERE identity_id = $1 ORDER BY id LIMIT 1", idn)
    tenant = auth(demo["tenant_token"])
    listed = await http.get(f"/v1/identities/{idn}/threads", params={"limit": "2"}, headers=tenant)
    assert listed.status_code == 200 and len(listed.json()["data"]) == 2
    assert listed.json()["next_cursor"]
    # a tenant key names the identity in the body of a PATCH (the path names the thread)
    marked = await http.patch(f"/v1/threads/{thread_id}", headers=tenant,
                              json={"identity": idn, "labels_add": ["needs_human"], "read": True})
    assert marked.status_code == 200, marked.text
    assert marked.json()["id"] == thread_id and "needs_human" in marked.json()["labels"]
    no_identity = await http.patch(f"/v1/threads/{thread_id}", headers=tenant, json={"read": True})
    assert no_identity.json()["error"]["details"] == {"path": "identity"}
    labelled = await http.get(f"/v1/identities/{idn}/threads", headers=tenant,
                              params={"label": "needs_human", "is_unread": "false"})
    assert [t["id"] for t in labelled.json()["data"]] == [thread_id]
    empty = await http.patch(f"/v1/messages/{message_id}", json={}, headers=auth(demo["token"]))
    assert empty.status_code == 400
    assert empty.json()["error"]["details"] == {"path": "labels_add"}
    twice = await http.patch(f"/v1/messages/{message_id}", headers=auth(demo["token"]),
                             json={"thread_id": thread_id, "read": False})
    assert twice.status_code == 400 and twice.json()["error"]["details"] == {"path": "thread_id"}
    document = (await http.get("/v1/openapi.json")).json()
    body = document["paths"]["/v1/messages/{message_id}"]["patch"]["requestBody"]["content"][
        "application/json"]["schema"]
    assert body["minProperties"] == 1 and "oneOf" not in body
    assert "message_id" not in body["properties"] and "thread_id" in body["properties"]


async def test_head_answers_as_get_without_the_content(demo):
    """RFC 9110 section 9.3.2: HEAD is GET without the content; it answered 405. It goes through
    the same admission: without a key, 401."""
    http = demo["http"]
    path = f"/v1/identities/{demo['identity_id']}/threads"
    got = await http.get(path, headers=auth(demo["token"]))
    head = await http.head(path, headers=auth(demo["token"]))
    anonymous = await http.head(path)
    document = await http.head("/v1/openapi.json")
    assert got.status_code == head.status_code == 200 and got.content
    assert head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"] == "application/json"
    assert anonymous.status_code == 401 and anonymous.content == b""
    assert document.status_code == 200 and int(document.headers["content-length"]) > 1000
    # a method an endpoint does not take still says which ones it does (RFC 9110 section 15.5.6)
    refused = await http.delete(path, headers=auth(demo["token"]))
    assert refused.status_code == 405
    assert {"GET", "HEAD"} <= set(refused.headers["allow"].split(", "))


async def test_two_authorization_headers_are_refused_on_both_surfaces(demo, conn):
    """The first of two keys won, where a proxy in front might read the other (found by an
    attack): 401 on REST and on POST /mcp, and nothing is charged to either key."""
    _, other = await create_key(conn, tenant_id=demo["tenant_id"], identity_id=None,
                                permissions=[Permission.IDENTITIES_READ])
    both = [("Authorization", f"Bearer {demo['token']}"), ("Authorization", f"Bearer {other}")]
    rest = await demo["http"].get("/v1/identities", headers=both)
    mcp = await demo["http"].post("/mcp", headers=[
        *both, ("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-06-18")], json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert rest.status_code == 401
    assert rest.json()["error"]["message"] == "The Authorization header is given 2 times."
    assert mcp.status_code == 401 and "2 times" in mcp.text
    # each key alone still works
    for token in (demo["token"], other):
        assert (await demo["http"].get("/v1/identities", headers=auth(token))).status_code == 200


async def test_a_body_that_cannot_be_read_says_why(demo):
    """JSON nested 2,000 deep, a gzip body and broken JSON all got "The body is not valid JSON."
    (found by an attack); MCP named the nesting limit."""
    http, path = demo["http"], f"/v1/identities/{demo['identity_id']}/search"
    headers = {**auth(demo["token"]), "Content-Type": "application/json"}
    deep = await http.post(path, content=b'{"q": ' + b"[" * 2000 + b"]" * 2000 + b"}",
                           headers=headers)
    gzipped = await http.post(path, content=gzip.compress(b'{"q": "invoice"}'),
                              headers={**headers, "Content-Encoding": "gzip"})
    broken = await http.post(path, content=b'{"q": "invoice"', headers=headers)
    plain = await http.post(path, content=b'{"q": "invoice"}',  # an empty one is no encoding
                            headers={**headers, "Content-Encoding": ""})
    assert plain.status_code == 200, plain.text
    assert deep.status_code == 400 and "nests deeper" in deep.json()["error"]["message"]
    assert gzipped.status_code == 415
    assert gzipped.json()["error"]["details"] == {"header": "Content-Encoding"}
    assert broken.status_code == 400
    assert broken.json()["error"]["message"].startswith("The body is not valid JSON (")
