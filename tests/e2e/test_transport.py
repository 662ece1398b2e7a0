"""The transport contract of spec section 2 against a real uvicorn, with raw HTTP.

Every JSON-RPC message the server sends here is validated against the official schema of the
exchange's revision (:class:`tests.e2e.transport_kit.Wire`). Codes come from their one home.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import msgspec
import pytest
from arq.connections import ArqRedis
from arq.jobs import Job

from front import body
from front.shedding import SLOW_BODY_SECONDS
from front.mcp import protocol as p
from front.mcp.inbound import ALLOW, MAX_BODY_BYTES
from front.mcp import transport
from front.mcp.protocol import LEGACY_DEFAULT, MODERN_VERSION, SUPPORTED_VERSIONS
from front.mcp.prompts import PROMPTS, user_text
from shared import guide
from shared.auth.permissions import Permission
from shared.errors import MAX_ERROR_TEXT, ErrorCode
from shared.events import inflight_key, interactive_queue
from shared.tools.context import ToolContext
from shared.tools.registry import READ_ONLY, TOOLS, ToolSpec
from tests.conftest import REDIS_URL, running_front, running_worker, settings_for
from tests.e2e.conformance.fixtures import NoArgs
from tests.e2e.transport_kit import Wire, keyed_identity


SECRET = "s3cr3t-planted-in-arguments"


#: How long the reporter stays silent: many heartbeats (0.2 s), so that an event loop stalled by
#: a loaded machine still sends a keep-alive before the next report (at 0.6 s, a CI run on a
#: loaded machine once sent none).
SILENT_SECONDS = 1.5


async def slow_reporter(ctx: ToolContext, args: NoArgs) -> list[p.TextContent]:
    """Reports once, then stays silent past the test heartbeat, then answers."""
    await ctx.control.progress(1.0, 2.0, "first step")
    await asyncio.sleep(SILENT_SECONDS)
    await ctx.control.progress(2.0, 2.0, None)
    return [p.TextContent(text="done")]


REPORTER = ToolSpec(name="slow_reporter", title="Slow reporter", description="Test tool.",
                    args=NoArgs, result=None,
                    permission=Permission.IDENTITIES_READ, annotations=READ_ONLY,
                    handler=slow_reporter)


@pytest.fixture
async def stack(db_url, conn):
    """A front (heartbeat 0.2 s) serving the product's tools plus :data:`REPORTER`."""
    _, identity_id, key_id, token = await keyed_identity(conn)
    settings = settings_for(db_url, pm_stream_heartbeat_seconds=0.2)
    async with running_front(settings, tools=(*TOOLS, REPORTER), prompts=PROMPTS) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            yield Wire(http, url, token), identity_id, key_id, settings


def error_of(messages: list[dict]) -> dict:
    assert len(messages) == 1 and "error" in messages[0], messages
    return messages[0]["error"]


# --- Spec section 2.1: the ladder, in order ---------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH", "HEAD", "TRACE",
                                    "PROPFIND", "CONNECT"])
async def test_methods_other_than_post_are_405_with_allow_post(stack, method):
    # PROPFIND and CONNECT got the REST API's 405 and Allow list (found by an attack)
    wire, *_ = stack
    response = await wire.http.request(method, wire.url, headers=wire.headers())
    assert response.status_code == 405
    assert response.headers["allow"] == ALLOW
    assert "openapi" not in response.text


@pytest.mark.parametrize(("path", "status"), [("/mcp", b"408"), ("/v1/identities/{}/search", b"400")])
async def test_a_body_that_stops_arriving_is_refused(stack, monkeypatch, path, status):
    """MCP answers 408 (spec section 2.1); REST an ``invalid_request`` on ``body``: before, a REST
    body could trickle in for as long as its client liked, holding a place under the ceiling."""
    monkeypatch.setattr(body, "BODY_READ_SECONDS", 0.5)
    wire, identity_id, *_ = stack
    host, port = wire.url.removeprefix("http://").split("/")[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"POST {path.format(identity_id)} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                 f"Authorization: Bearer {wire.token}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: 100\r\n\r\n{{\"jsonrpc\"".encode())
    await writer.drain()
    async with asyncio.timeout(10):
        status_line = await reader.readline()
    writer.close()
    assert status_line.split()[1] == status


async def _send_half_a_body_and_leave(url: str, path: str, token: str) -> None:
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}"
                 f"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                 f"{{\"jsonrpc\"".encode())
    await writer.drain()
    writer.close()
    await writer.wait_closed()


async def test_a_client_leaving_mid_body_is_logged_as_gone_not_as_our_failure(stack, capsys):
    """A client that closes its connection before sending its whole body is logged 499
    ``client_closed`` on both surfaces: it was logged as our 500 (found by an attack)."""
    wire, identity_id, *_ = stack
    base = wire.url.removesuffix("/mcp")
    await _send_half_a_body_and_leave(wire.url, "/mcp", wire.token)
    await _send_half_a_body_and_leave(wire.url, f"/v1/identities/{identity_id}/search",
                                      wire.token)
    lines: list[dict] = []
    async with asyncio.timeout(10):
        while len(lines) < 2:
            await asyncio.sleep(0.05)
            lines += [json.loads(line) for line in capsys.readouterr().err.splitlines()
                      if line.startswith("{") and '"request"' in line]
    assert [(line["status"], line["error_code"]) for line in lines] == [(499, "client_closed")] * 2
    assert not any("exception" in line for line in lines)
    assert (await wire.http.get(f"{base}/v1/identities",
                                headers={"authorization": f"Bearer {wire.token}"})).status_code == 200


async def test_clients_sending_their_bodies_slowly_do_not_fill_the_in_flight_ceiling(db_url, conn):
    """A request counts against PM_MAX_IN_FLIGHT once its body has arrived: before, a hundred
    connections with no key, each sending its body a byte at a time, shed every other request
    for the 30 s each may take (found by an attack)."""
    *_, token = await keyed_identity(conn, "slow@acme.example")
    async with running_front(settings_for(db_url, pm_max_in_flight=2)) as url, \
            httpx.AsyncClient(timeout=30) as http:
        host, port = url.removeprefix("http://").split("/")[0].split(":")
        slow = []
        for _ in range(5):
            _, writer = await asyncio.open_connection(host, int(port))
            writer.write(f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: "
                         f"application/json\r\nContent-Length: 100\r\n\r\n{{".encode())
            await writer.drain()
            slow.append(writer)
        await asyncio.sleep(SLOW_BODY_SECONDS + 0.5)
        wire = Wire(http, url, token)
        response, messages = await wire.legacy("ping", id=1)
        for writer in slow:
            writer.close()
    assert response.status_code == 200, response.text
    assert messages == [{"jsonrpc": "2.0", "id": 1, "result": {}}]


async def test_options_is_204_without_a_cors_grant(stack):
    wire, *_ = stack
    response = await wire.http.options(wire.url, headers={"origin": "https://mail.pylota.test"})
    assert response.status_code == 204
    assert not any(h.startswith("access-control-") for h in response.headers)


async def test_foreign_origin_is_403_with_an_error_without_id(stack):
    wire, *_ = stack
    response, messages = await wire.legacy("ping", id=5, origin="https://evil.example")
    assert response.status_code == 403
    assert messages[0]["id"] is None


async def test_body_over_7_mib_is_413_with_the_payload_too_large_envelope(stack):
    wire, *_ = stack
    response = await wire.post(b"{" + b" " * MAX_BODY_BYTES + b"}")
    assert response.status_code == 413
    [message] = Wire.messages(response, LEGACY_DEFAULT)
    assert message["id"] is None
    assert message["error"]["code"] == p.SERVER_ERROR
    assert message["error"]["data"]["error"]["code"] == ErrorCode.PAYLOAD_TOO_LARGE


async def test_other_content_type_is_415(stack):
    wire, *_ = stack
    response = await wire.post(b"{}", headers={**wire.headers(), "content-type": "text/plain"})
    assert response.status_code == 415
    assert error_of(Wire.messages(response, LEGACY_DEFAULT))["code"] == p.INVALID_REQUEST


@pytest.mark.parametrize(("raw", "code"), [(b"{not json", p.PARSE_ERROR),
                                           (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]',
                                            p.INVALID_REQUEST),
                                           (b'"ping"', p.INVALID_REQUEST)])
async def test_malformed_body_batch_or_non_object_is_400(stack, raw, code):
    wire, *_ = stack
    response = await wire.post(raw)
    assert response.status_code == 400
    assert error_of(Wire.messages(response, LEGACY_DEFAULT))["code"] == code


@pytest.mark.parametrize("token", [None, "pmk_live_unknown"])
async def test_missing_or_unknown_key_is_401_with_www_authenticate(stack, token):
    wire, *_ = stack
    anonymous = Wire(wire.http, wire.url, token)
    response, messages = await anonymous.legacy("ping", id=9)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == \
        'Bearer realm="pylota-mail", error="invalid_token"'
    error = error_of(messages)
    assert messages[0]["id"] == 9
    assert error["code"] == p.SERVER_ERROR
    assert error["data"]["error"]["code"] == ErrorCode.UNAUTHENTICATED


async def test_suspended_partners_keys_are_403_partner_suspended(stack, conn):
    wire, identity_id, *_ = stack
    await conn.execute("INSERT INTO partners (id, name, status) VALUES ('par_x', 'p', 'suspended')")
    await conn.execute("UPDATE tenants SET partner_id = 'par_x' WHERE id ="
                       " (SELECT tenant_id FROM identities WHERE id = $1)", identity_id)
    response, messages = await wire.legacy("ping")
    assert response.status_code == 403
    assert error_of(messages)["data"]["error"]["code"] == ErrorCode.PARTNER_SUSPENDED


async def test_over_rl_api_is_429_with_retry_after_and_the_rate_limited_envelope(db_url, conn):
    *_, token = await keyed_identity(conn)
    async with running_front(settings_for(db_url, pm_rl_api_per_minute=2)) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            wire = Wire(http, url, token)
            for _ in range(2):
                assert (await wire.legacy("ping"))[0].status_code == 200
            response, messages = await wire.legacy("ping", id=3)
    assert response.status_code == 429
    assert int(response.headers["retry-after"]) >= 1
    error = error_of(messages)
    assert messages[0]["id"] == 3
    assert error["data"]["error"]["code"] == ErrorCode.RATE_LIMITED
    assert error["data"]["error"]["details"]["retry_after"] == int(response.headers["retry-after"])


async def test_notification_is_202_with_no_body(stack):
    wire, *_ = stack
    body = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    response = await wire.post(body, headers=wire.headers(mcp_protocol_version=LEGACY_DEFAULT))
    assert response.status_code == 202
    assert response.content == b""


# --- Spec section 2.2: the modern era ---------------------------------------------------------


async def test_discover_returns_versions_capabilities_instructions_and_cache_fields(stack):
    wire, *_ = stack
    response, [message] = await wire.modern("server/discover")
    result = message["result"]
    assert response.status_code == 200
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == list(SUPPORTED_VERSIONS)
    assert result["capabilities"] == {"tools": {"listChanged": False},
                                      "prompts": {"listChanged": False}}
    assert result["instructions"] == guide.INSTRUCTIONS
    assert result["cacheScope"] == "private" and result["ttlMs"] > 0
    assert result["_meta"][p.SERVER_INFO_META_KEY]["name"] == "pylota-mail"


@pytest.mark.parametrize("method", ["tools/list", "prompts/list"])
async def test_modern_lists_are_complete_and_privately_cacheable(stack, method):
    wire, *_ = stack
    _, [message] = await wire.modern(method)
    assert message["result"]["resultType"] == "complete"
    assert message["result"]["cacheScope"] == "private"
    assert isinstance(message["result"]["ttlMs"], int)


@pytest.mark.parametrize("headers", [{"mcp_method": "tools/list"},
                                     {"mcp_protocol_version": "2025-11-25"},
                                     {"mcp_name": "mail_search"}])
async def test_mirrored_header_mismatch_is_400_header_mismatch(stack, headers):
    wire, *_ = stack
    response, messages = await wire.modern("tools/call", {"name": "mail_list_identities"},
                                           **headers)
    assert response.status_code == 400
    assert error_of(messages)["code"] == p.HEADER_MISMATCH


async def test_base64_mcp_name_is_decoded_before_comparing(stack):
    wire, *_ = stack
    encoded = "=?base64?" + __import__("base64").b64encode(b"mail_list_identities").decode() + "?="
    response, [message] = await wire.modern("tools/call", {"name": "mail_list_identities"},
                                            mcp_name=encoded)
    assert response.status_code == 200, message
    assert "result" in message


async def test_unsupported_modern_version_is_400_with_supported_and_requested(stack):
    wire, *_ = stack
    response, messages = await wire.modern(
        "tools/list", meta={p.PROTOCOL_VERSION_META_KEY: "2099-01-01"},
        mcp_protocol_version="2099-01-01")
    assert response.status_code == 400
    error = error_of(messages)
    assert error["code"] == p.UNSUPPORTED_PROTOCOL_VERSION
    assert error["data"] == {"supported": list(SUPPORTED_VERSIONS), "requested": "2099-01-01"}


@pytest.mark.parametrize("method", ["initialize", "ping", "resources/list"])
async def test_modern_unknown_method_initialize_and_ping_are_404(stack, method):
    wire, *_ = stack
    response, messages = await wire.modern(method)
    assert response.status_code == 404
    assert error_of(messages)["code"] == p.METHOD_NOT_FOUND


async def test_modern_meta_without_client_capabilities_is_400_invalid_params(stack):
    wire, *_ = stack
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
            "params": {"_meta": {p.PROTOCOL_VERSION_META_KEY: MODERN_VERSION}}}
    response = await wire.post(body, headers=wire.headers(mcp_protocol_version=MODERN_VERSION,
                                                          mcp_method="tools/list"))
    assert response.status_code == 400
    assert error_of(Wire.messages(response, MODERN_VERSION))["code"] == p.INVALID_PARAMS


# --- Spec section 2.3: the legacy era ---------------------------------------------------------


@pytest.mark.parametrize(("asked", "answered"), [("2025-06-18", "2025-06-18"),
                                                 ("2025-11-25", "2025-11-25"),
                                                 (MODERN_VERSION, LEGACY_DEFAULT),
                                                 ("2024-11-05", LEGACY_DEFAULT)])
async def test_initialize_negotiates_a_legacy_version(stack, asked, answered):
    wire, *_ = stack
    response, [message] = await wire.legacy(
        "initialize", {"protocolVersion": asked, "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}, version=answered)
    result = message["result"]
    assert response.status_code == 200
    assert "mcp-session-id" not in response.headers
    assert result["protocolVersion"] == answered
    assert result["serverInfo"] == {"name": "pylota-mail", "title": "Pylota Mail",
                                    "version": "1.0.0"}
    assert result["instructions"] == guide.INSTRUCTIONS
    assert "resultType" not in result


async def test_legacy_request_with_unsupported_header_version_is_400(stack):
    wire, *_ = stack
    response, messages = await wire.legacy("tools/list", version="2025-03-26")
    assert response.status_code == 400
    assert error_of(messages)["data"]["requested"] == "2025-03-26"


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
async def test_legacy_errors_are_http_200(stack, version):
    wire, *_ = stack
    response, messages = await wire.legacy("server/discover", version=version)
    assert response.status_code == 200
    assert error_of(messages)["code"] == p.METHOD_NOT_FOUND
    response, messages = await wire.legacy("tools/call", {"name": "no_such_tool"},
                                           version=version)
    assert response.status_code == 200
    assert error_of(messages)["code"] == p.INVALID_PARAMS


async def test_modern_unknown_tool_is_a_json_rpc_error_with_http_200(stack):
    # Spec section 2.4: only an unknown *method* changes the status (404) in the modern era.
    wire, *_ = stack
    response, messages = await wire.modern("tools/call", {"name": "no_such_tool"})
    assert response.status_code == 200
    assert error_of(messages) == {"code": p.INVALID_PARAMS, "message": "Unknown tool: no_such_tool"}


async def test_what_an_error_quotes_of_the_input_is_cut(stack):
    """An unknown 10,000-character tool name, and a label of 600,000 characters that mail_search
    quoted in its error, came back whole into the model's context (found by an attack)."""
    wire, *_ = stack
    _, messages = await wire.legacy("tools/call", {"name": "t" * 10_000})
    assert error_of(messages)["message"] == "Unknown tool: " + "t" * 127 + "…"
    _, messages = await wire.legacy("prompts/get", {"name": "p" * 10_000})
    assert error_of(messages)["message"] == "Unknown prompt: " + "p" * 127 + "…"
    _, messages = await wire.legacy("m" * 600_000)
    assert error_of(messages)["message"] == "Method not found: " + "m" * 127 + "…"
    _, [message] = await wire.legacy("tools/call", {"name": "mail_search", "arguments": {
        "q": "x", "labels": ["a" * 600_000]}})
    result = message["result"]
    assert result["isError"]
    error = json.loads(result["content"][0]["text"])["error"]
    assert error["code"] == "invalid_request" and error["details"]["path"].startswith("labels")
    assert len(error["message"]) <= MAX_ERROR_TEXT and len(error["fix"]) <= MAX_ERROR_TEXT
    assert len(result["content"][0]["text"]) < 4 * MAX_ERROR_TEXT


@pytest.mark.parametrize("method", ["tools/call", "prompts/get"])
async def test_a_call_without_a_name_is_told_params_name_is_required(stack, method):
    # it was "Unknown tool: None" (found by an attack)
    wire, *_ = stack
    for params in ({}, {"name": 5}, {"name": None}):
        response, messages = await wire.legacy(method, params)
        assert response.status_code == 200
        error = error_of(messages)
        assert error["code"] == p.INVALID_PARAMS
        assert error["message"].startswith("params.name is required")


async def test_legacy_ping_answers_an_empty_result_and_keeps_id_zero(stack):
    wire, *_ = stack
    _, [message] = await wire.legacy("ping", id=0)
    assert message == {"jsonrpc": "2.0", "id": 0, "result": {}}


# --- Spec sections 2.6, 4.2: results, progress, SSE -------------------------------------------


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_structured_content_is_an_object_mirrored_in_the_text_block(stack, era):
    wire, *_ = stack
    call = wire.modern if era == "modern" else wire.legacy
    _, [message] = await call("tools/call", {"name": "mail_list_identities", "arguments": {}})
    result = message["result"]
    assert isinstance(result["structuredContent"], dict)
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert len(result["content"][0]["text"].encode()) <= 96 * 1024


@pytest.mark.parametrize(("era", "token"), [("legacy", 7), ("legacy", "p-1"),
                                            ("modern", 0), ("modern", "p-2")])
async def test_progress_streams_over_sse_echoing_the_tokens_json_type(stack, era, token):
    wire, *_ = stack
    params = {"name": REPORTER.name, "arguments": {}}
    if era == "modern":
        response, messages = await wire.modern("tools/call", params, meta={"progressToken": token})
    else:
        params["_meta"] = {"progressToken": token}
        response, messages = await wire.legacy("tools/call", params)
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-accel-buffering"] == "no"
    *notes, final = messages
    assert [n["params"]["progress"] for n in notes] == [1.0, 2.0]
    assert all(type(n["params"]["progressToken"]) is type(token)
               and n["params"]["progressToken"] == token for n in notes)
    assert final["result"]["content"] == [{"type": "text", "text": "done"}]
    # The call was silent for SILENT_SECONDS with a 0.2 s heartbeat.
    assert ": keep-alive" in response.text


async def test_no_progress_token_means_one_json_response(stack):
    wire, *_ = stack
    response, messages = await wire.legacy("tools/call", {"name": REPORTER.name, "arguments": {}})
    assert response.headers["content-type"] == "application/json"
    assert len(messages) == 1 and "result" in messages[0]


async def test_no_sse_in_accept_means_json_even_with_a_progress_token(stack):
    wire, *_ = stack
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": REPORTER.name, "_meta": {"progressToken": 1}}}
    response = await wire.post(body, headers={**wire.headers(mcp_protocol_version=LEGACY_DEFAULT),
                                              "accept": "application/json"})
    assert response.headers["content-type"] == "application/json"
    assert "result" in Wire.messages(response, LEGACY_DEFAULT)[0]


async def test_legacy_cancelled_notification_stops_the_callers_own_wait_job(stack):
    wire, identity_id, key_id, settings = stack
    arq = ArqRedis.from_url(REDIS_URL)
    async with running_worker(settings):
        body = {"jsonrpc": "2.0", "id": 42, "method": "tools/call",
                "params": {"name": "mail_wait", "arguments": {"timeout_seconds": 30}}}
        headers = wire.headers(mcp_protocol_version=LEGACY_DEFAULT)
        async with asyncio.timeout(15):
            async with wire.http.stream("POST", wire.url, content=msgspec.json.encode(body),
                                        headers=headers) as stream:
                lines = stream.aiter_lines()
                assert (await anext(lines)).startswith(":")  # the job is running
                # the key names the job and its queue: "job_id queue"
                job_id = (await arq.get(inflight_key(key_id, 42))).decode().split(" ")[0]
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": 42, "reason": "user"}}
                assert (await wire.post(cancel, headers=headers)).status_code == 202
                rest = [line async for line in lines]
    assert not any(line.startswith("data:") for line in rest)  # no response after a cancel
    job = Job(job_id, arq, _queue_name=interactive_queue(settings.pm_namespace))
    async with asyncio.timeout(10):  # well before the wait's own 30 s
        while (info := await job.result_info()) is None:
            await asyncio.sleep(0.05)
    await arq.aclose()
    assert not isinstance(info.result, dict)  # stopped (aborted or cancelled), no wait result


# --- Spec sections 3, 6, 7: filtering, prompt, logs -------------------------------------------


async def test_tools_are_filtered_by_permission_and_others_are_unknown(db_url, conn):
    *_, token = await keyed_identity(conn, permissions=[Permission.IDENTITIES_READ])
    async with running_front(settings_for(db_url)) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            wire = Wire(http, url, token)
            _, [listed] = await wire.legacy("tools/list")
            _, hidden = await wire.legacy("tools/call", {"name": "mail_search",
                                                         "arguments": {"q": "x"}})
            _, missing = await wire.legacy("tools/call", {"name": "mail_nothing"})
    assert [t["name"] for t in listed["result"]["tools"]] == ["mail_list_identities"]
    assert error_of(hidden) == {"code": p.INVALID_PARAMS, "message": "Unknown tool: mail_search"}
    assert error_of(missing)["code"] == p.INVALID_PARAMS


async def test_prompt_goal_line_drops_control_characters_and_is_cut_to_500(stack):
    wire, *_ = stack
    goal = "find\x00 the\x1b invoice " + "x" * 600
    _, [message] = await wire.legacy("prompts/get", {"name": guide.PROMPT_NAME,
                                                     "arguments": {"goal": goal}})
    text = message["result"]["messages"][0]["content"]["text"]
    line = text.rsplit("\n", 1)[1]
    assert line == "Your current goal: " + ("find the invoice " + "x" * 600)[:500]
    _, [plain] = await wire.legacy("prompts/get", {"name": guide.PROMPT_NAME})
    assert plain["result"]["messages"] == [msgspec.to_builtins(m) for m in user_text(
        guide.prompt_text(None))]


async def test_logs_have_one_line_per_request_and_call_and_never_arguments(stack, capfd):
    wire, identity_id, key_id, settings = stack
    await wire.legacy("tools/call", {"name": "mail_search", "arguments": {"q": SECRET}})
    await wire.modern("tools/call", {"name": "mail_list_identities",
                                     "arguments": {"purpose": SECRET}})
    await wire.legacy("tools/call", {"name": "mail_list_identities",
                                     "arguments": {"limit": SECRET}})
    captured = capfd.readouterr()
    logs = captured.out + captured.err
    assert SECRET not in logs
    lines = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    calls = [line for line in lines if line.get("event") == "tool_call"]
    requests = [line for line in lines if line.get("event") == "request"
                and line.get("method") == "tools/call"]
    assert len(calls) == 3 and len(requests) == 3
    for line in calls:
        assert {"method", "tool", "key_id", "identity_id", "duration_ms", "outcome"} <= set(line)
        assert line["key_id"] == key_id and line["identity_id"] == identity_id
    search = next(line for line in calls if line["tool"] == "mail_search")
    from shared.logs import query_hash
    assert search["query_hash"] == query_hash(settings.pm_hash_key, SECRET)
    invalid = next(line for line in calls if line["outcome"] == "error"
                   and line["tool"] == "mail_list_identities")
    assert invalid["error_code"] == ErrorCode.INVALID_REQUEST


async def test_an_anonymous_callers_method_is_cut_in_the_log(stack, capfd):
    wire, *_ = stack
    anonymous = Wire(wire.http, wire.url, None)
    response = await anonymous.post({"jsonrpc": "2.0", "id": 1, "method": "M" * 100_000})
    assert response.status_code == 401
    captured = capfd.readouterr()
    lines = [json.loads(line) for line in (captured.out + captured.err).splitlines()
             if line.startswith("{")]
    [request] = [line for line in lines if line.get("event") == "request"]
    assert request["method"] == "M" * transport.LOGGED_METHOD_CHARS


async def test_a_nul_character_in_any_argument_is_invalid_request_naming_it(stack):
    wire, *_ = stack
    _, [message] = await wire.legacy("tools/call", {"name": "mail_search",
                                                    "arguments": {"q": "a\u0000b"}})
    result = message["result"]
    assert result["isError"] is True
    error = json.loads(result["content"][0]["text"])["error"]
    assert (error["code"], error["details"]["path"]) == (ErrorCode.INVALID_REQUEST, "q")


async def test_an_integral_float_is_an_integer(stack):
    # JSON Schema's "integer" accepts 10.0; the handler must see the int 10.
    wire, *_ = stack
    _, [message] = await wire.legacy("tools/call", {"name": "mail_search",
                                                    "arguments": {"q": "x", "limit": 10.0}})
    assert "isError" not in message["result"], message["result"]["content"][0]["text"]


@pytest.mark.parametrize("method", ["tools/list", "prompts/list"])
async def test_a_list_cursor_is_invalid_params_because_lists_have_one_page(stack, method):
    wire, *_ = stack
    response, messages = await wire.legacy(method, {"cursor": "page-2"})
    assert response.status_code == 200
    assert error_of(messages)["code"] == p.INVALID_PARAMS


@pytest.mark.parametrize(("arguments", "path", "hint"), [
    ({"q": "van", "query": "van"}, "query", "takes only: q, identity"),
    ({"q": "van", "after": "2026-09-01"}, "after", "e.g. 2026-09-01T00:00:00Z"),
    ({"q": "van", "mode": "fast"}, "mode", 'Use one of "keyword", "semantic", "hybrid" for mode.'),
    ({"q": "van", "limit": 99}, "limit", "Give limit as a whole number from 1 to 25."),
    ({"q": "van", "include_quarantined": "yes"}, "include_quarantined", "true or false"),
    ({"q": "van", "identity_ids": ["idn_1"], "scope": "tenant"}, "identity_ids[0]",
     "as an id as the API returned it (idn_ and 26 letters and digits), not a name"),
    ({"q": "van", "labels": ["x"] * 11}, "labels", "at most 10 items"),
    ({"q": "van", "limit": "5"}, "limit", "Give limit as a whole number from 1 to 25."),
    ({"q": "van", "after": 1700000000}, "after", "e.g. 2026-09-01T00:00:00Z"),
    ({"q": "van", "include_quarantined": 1}, "include_quarantined", "true or false"),
])
async def test_argument_errors_name_the_field_and_a_concrete_fix(stack, arguments, path, hint):
    wire, *_ = stack
    _, [message] = await wire.legacy("tools/call", {"name": "mail_search", "arguments": arguments})
    error = json.loads(message["result"]["content"][0]["text"])["error"]
    assert error["details"]["path"] == path
    assert hint in error["fix"]


@pytest.mark.parametrize(("tool", "arguments", "path", "hint"), [
    ("mail_get_usage", {"x": 1}, "x", "mail_get_usage takes no arguments."),
    ("mail_search_contacts", {"q": ""}, "q", "Give q as a string of 1 to 100 characters."),
    ("mail_search", {"q": "", "scope": "tenant", "identity_ids": [
        "idn_01J9Z3AAAAAAAAAAAAAAAAAAAA", "idn_01J9Z3AAAAAAAAAAAAAAAAAAAA"]},
     "identity_ids[1]", "List each item of identity_ids once."),
])
async def test_fixes_fit_the_schema_found_by_an_attack(stack, tool, arguments, path, hint):
    """A tool without arguments said it "takes only: ." and an empty q that it wanted "at most
    100 characters"; a list whose schema says uniqueItems took an item twice."""
    wire, *_ = stack
    _, [message] = await wire.legacy("tools/call", {"name": tool, "arguments": arguments})
    error = json.loads(message["result"]["content"][0]["text"])["error"]
    assert (error["code"], error["details"]["path"]) == (ErrorCode.INVALID_REQUEST, path)
    assert hint in error["fix"]


@pytest.mark.parametrize(("arguments", "path"), [
    ({"q": "", "after": "0001-01-01T00:00:00+14:00"}, "after"),
    ({"q": "", "before": "9999-12-31T23:59:59-14:00"}, "before"),
    ({"q": "", "labels": ["ok", ""]}, "labels[1]"),
    ({"q": "", "labels": ["%"]}, "labels[0]"),
])
async def test_search_filters_out_of_range_or_malformed_are_invalid_request(stack, arguments, path):
    wire, *_ = stack
    _, [message] = await wire.legacy("tools/call", {"name": "mail_search", "arguments": arguments})
    error = json.loads(message["result"]["content"][0]["text"])["error"]
    assert (error["code"], error["details"]["path"], error["retryable"]) == (
        ErrorCode.INVALID_REQUEST, path, False)
