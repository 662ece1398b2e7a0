"""The MCP request ladder (front/mcp/inbound.py): one section per rung, pass and fail for each.

Codes come from ``front.mcp.protocol``; bodies come from :func:`envelope`.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from front.mcp import inbound
from front.mcp.inbound import (
    MAX_BODY_BYTES,
    REJECTION_STATUS,
    Rejection,
    RejectionKind,
    Route,
    check_method,
    check_origin,
    check_size_and_type,
    decode_header_value,
    negotiate_legacy_version,
    parse_body,
    select_era,
)
from front.mcp.protocol import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LEGACY_DEFAULT,
    LEGACY_VERSIONS,
    METHOD_HEADER,
    METHOD_NOT_FOUND,
    MODERN_VERSION,
    NAME_HEADER,
    PARSE_ERROR,
    PROTOCOL_VERSION_HEADER,
    PROTOCOL_VERSION_META_KEY,
    SERVER_ERROR,
    SUPPORTED_VERSIONS,
    UNSUPPORTED_PROTOCOL_VERSION,
    encode,
)

API_HOST = "mail.pylota.example"
REQUEST_ID = "req_01J9Z4ZZZZZZZZZZZZZZZZZZZZ"
_ABSENT: Any = object()


def envelope(
    method: str = "tools/list",
    *,
    id: Any = 1,
    params: dict[str, Any] | None = None,
    version: str | None = MODERN_VERSION,
    **meta: Any,
) -> dict[str, Any]:
    """One JSON-RPC body. ``version`` puts a modern ``_meta`` in (None: none); ``id=_ABSENT`` makes a notification.

    ``meta`` adds ``_meta`` keys (``progressToken=…``), also without a modern version.
    """
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not _ABSENT:
        body["id"] = id
    params = dict(params or {})
    if version is not None:
        meta = {PROTOCOL_VERSION_META_KEY: version, CLIENT_CAPABILITIES_META_KEY: {}, **meta}
    if meta:
        params["_meta"] = meta
    if params or version is not None:
        body["params"] = params
    return body


def modern_headers(body: dict[str, Any], **extra: str) -> dict[str, str]:
    """The headers a correct modern client sends for ``body`` (lower-case names), plus ``extra``."""
    headers = {
        PROTOCOL_VERSION_HEADER: body["params"]["_meta"][PROTOCOL_VERSION_META_KEY],
        METHOD_HEADER: body["method"],
    }
    name_key = inbound.NAME_BEARING_METHODS.get(body["method"])
    if name_key is not None and name_key in body["params"]:
        headers[NAME_HEADER] = body["params"][name_key]
    headers.update(extra)
    return headers


def assert_rejected(result: object, kind: RejectionKind, code: int | None) -> Rejection:
    assert isinstance(result, Rejection), result
    assert result.kind is kind
    assert (result.http_status, result.code) == REJECTION_STATUS[kind]
    assert result.code == code
    return result


def route(result: object) -> Route:
    assert isinstance(result, Route), result
    return result


# --- The table ---------------------------------------------------------------------------------


def test_every_kind_has_a_status_and_the_table_is_read_only() -> None:
    assert set(REJECTION_STATUS) == set(RejectionKind)
    with pytest.raises(TypeError):
        REJECTION_STATUS[RejectionKind.INTERNAL] = (200, None)  # type: ignore[index]


def test_error_response_renders_id_null_and_omits_absent_data() -> None:
    rejection = inbound.reject(RejectionKind.PARSE_ERROR, "Parse error")
    rendered = json.loads(encode(rejection.error_response()))  # type: ignore[arg-type]
    assert rendered == {"jsonrpc": "2.0", "id": None, "error": {"code": PARSE_ERROR, "message": "Parse error"}}


# --- Rung 1: HTTP method -----------------------------------------------------------------------


def test_post_passes() -> None:
    assert check_method("POST") is None


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH", "HEAD", "post"])
def test_other_methods_are_405_with_allow_post(method: str) -> None:
    rejection = assert_rejected(check_method(method), RejectionKind.METHOD_NOT_ALLOWED, None)
    assert rejection.http_status == 405
    assert rejection.headers == (("allow", "POST"),)
    assert rejection.error_response() is None


def test_options_is_204_without_body() -> None:
    rejection = assert_rejected(check_method("OPTIONS"), RejectionKind.OPTIONS, None)
    assert rejection.http_status == 204
    assert rejection.error_response() is None


# --- Rung 2: Origin and Host -------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"origin": f"https://{API_HOST}"},
        {"host": API_HOST},
        {"host": "127.0.0.1:8123"},
        {"host": "localhost"},
        {"host": "LOCALHOST:80"},
        {"host": "[::1]:9000"},
        {"host": "[::1]"},
        {"host": "127.0.0.1:8123", "origin": "http://127.0.0.1:8123"},
        {"host": "localhost:8123", "origin": "http://localhost:8123"},
    ],
)
def test_allowed_origin_and_host_pass(headers: dict[str, str]) -> None:
    assert check_origin(headers, API_HOST) is None


@pytest.mark.parametrize(
    "origin", [f"http://{API_HOST}", "https://evil.example.com", "null", f"https://{API_HOST}:8443"]
)
def test_foreign_origin_is_403_without_id(origin: str) -> None:
    rejection = assert_rejected(check_origin({"origin": origin}, API_HOST), RejectionKind.FORBIDDEN_ORIGIN, SERVER_ERROR)
    assert rejection.http_status == 403
    assert rejection.id is None


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("127.0.0.1:8123", "http://127.0.0.1:9999"),  # another local server's page
        ("127.0.0.1:8123", "http://localhost:8123"),  # not the same origin
        ("evil.example.com", "http://evil.example.com"),  # rebinding: never a loopback Host
        (API_HOST, f"http://{API_HOST}"),  # the public host is https only
    ],
)
def test_origin_other_than_a_loopback_servers_own_is_403(host: str, origin: str) -> None:
    rejection = check_origin({"host": host, "origin": origin}, API_HOST)
    assert_rejected(rejection, RejectionKind.FORBIDDEN_ORIGIN, SERVER_ERROR)


@pytest.mark.parametrize("host", [API_HOST, f"{API_HOST}:8000", f"{API_HOST.upper()}:443",
                                  f"{API_HOST}.", f"{API_HOST}.:443", "localhost.:8000"])
def test_the_public_host_passes_with_or_without_a_port(host: str) -> None:
    """A client reaching a published port (compose's 8000) names it in Host (found by a new
    user: every request from another machine was 403)."""
    assert check_origin({"host": host}, API_HOST) is None


@pytest.mark.parametrize(
    "host", ["evil.example.com", "localhost.evil.example", "127.0.0.1.nip.io", "localhost:abc", "[::1]x", "127.0.0.2",
             f"{API_HOST}:80x", f"{API_HOST}.evil.example:8000", f"{API_HOST}:", f"{API_HOST}..",
             "."]
)
def test_foreign_host_is_403(host: str) -> None:
    rejection = assert_rejected(check_origin({"host": host}, API_HOST), RejectionKind.FORBIDDEN_HOST, SERVER_ERROR)
    assert rejection.http_status == 403


# --- Rung 3: size and type ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON", " application/json"]
)
def test_json_within_limit_passes(content_type: str) -> None:
    assert check_size_and_type(MAX_BODY_BYTES, content_type, request_id=REQUEST_ID) is None
    assert check_size_and_type(None, content_type, request_id=REQUEST_ID) is None


def test_over_7_mib_is_413_with_payload_too_large_envelope() -> None:
    assert MAX_BODY_BYTES == 7 * 1024 * 1024
    rejection = assert_rejected(
        check_size_and_type(MAX_BODY_BYTES + 1, "text/plain", request_id=REQUEST_ID),
        RejectionKind.PAYLOAD_TOO_LARGE,
        SERVER_ERROR,
    )
    assert rejection.http_status == 413
    assert rejection.id is None
    error = rejection.data["error"]
    assert error["code"] == "payload_too_large"
    assert error["request_id"] == REQUEST_ID
    assert error["retryable"] is False
    assert set(error) == {"code", "message", "retryable", "fix", "request_id", "details"}


@pytest.mark.parametrize("content_type", [None, "", "text/plain", "application/json-rpc", "multipart/form-data"])
def test_other_content_type_is_415(content_type: str | None) -> None:
    rejection = assert_rejected(
        check_size_and_type(10, content_type, request_id=REQUEST_ID), RejectionKind.UNSUPPORTED_MEDIA_TYPE, INVALID_REQUEST
    )
    assert rejection.http_status == 415
    assert rejection.id is None


# --- Rung 4: parse one JSON-RPC object ---------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        envelope(),
        envelope(id=0),
        envelope(id="abc"),
        envelope(id=_ABSENT, method="notifications/initialized", version=None),
        envelope(version=None),
    ],
)
def test_request_or_notification_passes(body: dict[str, Any]) -> None:
    assert parse_body(json.dumps(body).encode()) == body


@pytest.mark.parametrize(
    ("raw", "says"),
    [(b"", "not valid JSON"), (b"{", "not valid JSON"), (b"{'a': 1}", "not valid JSON (JSON is"),
     (b'{"a": "\xff"}', "not valid JSON"),
     (b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nests deeper"),
     (b"1" * 5000, "out of range"), (b"\xef\xbb\xbf{}", "not valid JSON")],
    ids=["empty", "truncated", "single-quotes", "bad-utf8", "deep-nesting", "huge-int", "bom"],
)
def test_malformed_json_is_400_parse_error(raw: bytes, says: str) -> None:
    # valid JSON nested too deep said "not valid JSON" (found by an attack)
    rejection = assert_rejected(parse_body(raw), RejectionKind.PARSE_ERROR, PARSE_ERROR)
    assert rejection.http_status == 400
    assert rejection.id is None
    assert rejection.message.startswith("Parse error: ") and says in rejection.message


@pytest.mark.parametrize("raw", [b"[]", b"[" + json.dumps(envelope()).encode() + b"]", b"1", b'"x"', b"null"])
def test_batch_or_non_object_is_400_invalid_request(raw: bytes) -> None:
    rejection = assert_rejected(parse_body(raw), RejectionKind.INVALID_REQUEST, INVALID_REQUEST)
    assert rejection.http_status == 400


@pytest.mark.parametrize(
    ("body", "echoed_id"),
    [
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, 1),  # a posted response
        ({"jsonrpc": "1.0", "id": 2, "method": "tools/list"}, 2),
        ({"id": 3, "method": "tools/list"}, 3),
        ({"jsonrpc": "2.0", "id": 4, "method": 5}, 4),
        ({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": []}, 5),
        ({"jsonrpc": "2.0", "id": None, "method": "tools/list"}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "tools/list"}, None),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}, None),
        ({"jsonrpc": "2.0", "method": "notifications/initialized", "params": "x"}, None),
        # ids are i64 (the spec's RequestId::Number): one past either end is not an id
        ({"jsonrpc": "2.0", "id": 2**63, "method": "tools/list"}, None),
        ({"jsonrpc": "2.0", "id": -(2**63) - 1, "method": "tools/list"}, None),
    ],
)
def test_object_that_is_not_jsonrpc_is_400_invalid_request(body: dict[str, Any], echoed_id: Any) -> None:
    rejection = assert_rejected(parse_body(json.dumps(body).encode()), RejectionKind.INVALID_REQUEST, INVALID_REQUEST)
    assert rejection.id == echoed_id


def test_the_largest_i64_ids_are_ids() -> None:
    for request_id in (2**63 - 1, -(2**63)):
        assert parse_body(json.dumps(envelope(id=request_id)).encode())["id"] == request_id


@given(st.binary(max_size=64))
def test_parse_body_never_raises(raw: bytes) -> None:
    result = parse_body(raw)
    if isinstance(result, Rejection):
        assert result.http_status == 400 and result.code in (PARSE_ERROR, INVALID_REQUEST)
    else:
        assert result["jsonrpc"] == "2.0" and isinstance(result["method"], str)


# --- Rung 7a: initialize ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "answered"),
    [("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2024-11-05", LEGACY_DEFAULT),
     (MODERN_VERSION, LEGACY_DEFAULT), (None, LEGACY_DEFAULT), (7, LEGACY_DEFAULT)],
)
def test_negotiate_legacy_version(requested: object, answered: str) -> None:
    assert negotiate_legacy_version(requested) == answered


@pytest.mark.parametrize("header", [{}, {PROTOCOL_VERSION_HEADER: "2025-11-25"}, {PROTOCOL_VERSION_HEADER: "1999-01-01"}])
def test_initialize_without_modern_markers_is_legacy(header: dict[str, str]) -> None:
    # id 0: the TypeScript v1 client's initialize id.
    body = envelope("initialize", id=0, version=None, params={"protocolVersion": MODERN_VERSION})
    result = route(select_era(body, header))
    assert (result.era, result.version, result.id, result.is_notification) == ("legacy", LEGACY_DEFAULT, 0, False)


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (envelope("initialize", version=None), {PROTOCOL_VERSION_HEADER: MODERN_VERSION}),
        (envelope("initialize"), {}),
        (envelope("initialize"), modern_headers(envelope("initialize"))),
    ],
)
def test_initialize_on_the_modern_wire_is_404_method_not_found(body: dict[str, Any], headers: dict[str, str]) -> None:
    rejection = assert_rejected(select_era(body, headers), RejectionKind.METHOD_NOT_FOUND, METHOD_NOT_FOUND)
    assert rejection.http_status == 404
    assert rejection.id == 1


# --- Rung 7b: legacy ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_legacy_request_with_legacy_header_passes(version: str) -> None:
    body = envelope("tools/call", version=None, params={"name": "mail_search"}, progressToken=0)
    result = route(select_era(body, {PROTOCOL_VERSION_HEADER: f" {version}\t"}))
    assert (result.era, result.version, result.method) == ("legacy", version, "tools/call")
    assert result.progress_token == 0 and type(result.progress_token) is int
    assert result.params == body["params"]


def test_legacy_notification_passes_with_header() -> None:
    body = envelope("notifications/initialized", id=_ABSENT, version=None)
    result = route(select_era(body, {PROTOCOL_VERSION_HEADER: "2025-11-25"}))
    assert result.is_notification and result.era == "legacy" and result.params == {}


@pytest.mark.parametrize(
    ("headers", "requested"),
    [({}, "2025-03-26"), ({PROTOCOL_VERSION_HEADER: "2025-03-26"}, "2025-03-26"),
     ({PROTOCOL_VERSION_HEADER: "v999.0.0"}, "v999.0.0")],
)
def test_legacy_without_served_header_is_400_unsupported(headers: dict[str, str], requested: str) -> None:
    rejection = assert_rejected(
        select_era(envelope(id=9, version=None), headers), RejectionKind.UNSUPPORTED_VERSION, UNSUPPORTED_PROTOCOL_VERSION
    )
    assert rejection.http_status == 400
    assert rejection.id == 9
    assert rejection.data == {"supported": list(SUPPORTED_VERSIONS), "requested": requested}
    # only a request that named no version is told which header it lacks (a new user's report)
    assert ("no MCP-Protocol-Version header" in rejection.message) == (headers == {})
    if not headers:
        assert "MCP-Protocol-Version: 2025-11-25" in rejection.message
        # the modern way names all it needs (it named the version alone, which then failed on
        # the missing capabilities: a new user's report)
        for needed in (PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY,
                       "MCP-Protocol-Version: 2026-07-28", "Mcp-Method"):
            assert needed in rejection.message


@pytest.mark.parametrize("token", [None, 1.5, True, [1], {"a": 1}])
def test_legacy_bad_progress_token_is_invalid_params(token: object) -> None:
    body = envelope(version=None, progressToken=token)
    assert_rejected(select_era(body, {PROTOCOL_VERSION_HEADER: "2025-11-25"}), RejectionKind.INVALID_PARAMS, INVALID_PARAMS)


# --- Rung 7c: modern, _meta shape ----------------------------------------------------------------


def test_modern_request_passes_and_keeps_progress_token_type() -> None:
    body = envelope("tools/call", id="r-1", params={"name": "mail_search"}, progressToken="progress-test-1")
    result = route(select_era(body, modern_headers(body)))
    assert (result.era, result.version, result.id, result.method) == ("modern", MODERN_VERSION, "r-1", "tools/call")
    assert result.progress_token == "progress-test-1"


def test_modern_request_with_id_zero_passes() -> None:
    body = envelope(id=0, progressToken=0)
    result = route(select_era(body, modern_headers(body)))
    assert result.id == 0 and not result.is_notification and result.progress_token == 0


def test_client_info_is_optional_and_accepted() -> None:
    body = envelope(**{CLIENT_INFO_META_KEY: {"name": "mcp", "version": "0.1.0"}})
    assert route(select_era(body, modern_headers(body))).era == "modern"


@pytest.mark.parametrize(
    "meta",
    [
        {PROTOCOL_VERSION_META_KEY: MODERN_VERSION},
        {CLIENT_CAPABILITIES_META_KEY: {}},
        {PROTOCOL_VERSION_META_KEY: MODERN_VERSION, CLIENT_CAPABILITIES_META_KEY: []},
        {PROTOCOL_VERSION_META_KEY: 20260728, CLIENT_CAPABILITIES_META_KEY: {}},
        {PROTOCOL_VERSION_META_KEY: MODERN_VERSION, CLIENT_CAPABILITIES_META_KEY: {}, "progressToken": 1.5},
        None,
    ],
)
def test_bad_meta_is_400_invalid_params(meta: dict[str, Any] | None) -> None:
    body = envelope(version=None)
    if meta is not None:
        body["params"] = {"_meta": meta}
    headers = {PROTOCOL_VERSION_HEADER: MODERN_VERSION, METHOD_HEADER: body["method"]}
    rejection = assert_rejected(select_era(body, headers), RejectionKind.INVALID_PARAMS, INVALID_PARAMS)
    assert rejection.http_status == 400
    assert rejection.id == 1
    assert rejection.message.startswith("Invalid params._meta")


def test_a_bad_progress_token_is_named_not_the_members_that_are_there() -> None:
    # it said "params._meta must carry … protocolVersion and … clientCapabilities" when both
    # were there (found by an attack)
    body = envelope(version=None)
    body["params"] = {"_meta": {PROTOCOL_VERSION_META_KEY: MODERN_VERSION,
                                CLIENT_CAPABILITIES_META_KEY: {}, "progressToken": 1.5}}
    headers = {PROTOCOL_VERSION_HEADER: MODERN_VERSION, METHOD_HEADER: body["method"]}
    rejection = assert_rejected(select_era(body, headers), RejectionKind.INVALID_PARAMS,
                                INVALID_PARAMS)
    assert rejection.message.startswith("Invalid params._meta.progressToken: Expected `int | str`")


# --- Rung 7d: modern, mirrored headers ----------------------------------------------------------


def test_conformance_header_modern_meta_unknown_is_header_mismatch() -> None:
    body = envelope(version="v999.0.0")
    headers = modern_headers(body, **{PROTOCOL_VERSION_HEADER: MODERN_VERSION})
    rejection = assert_rejected(select_era(body, headers), RejectionKind.HEADER_MISMATCH, HEADER_MISMATCH)
    assert rejection.http_status == 400
    assert rejection.id == 1


@pytest.mark.parametrize(
    "change",
    [
        {PROTOCOL_VERSION_HEADER: None},
        {PROTOCOL_VERSION_HEADER: "2025-11-25"},
        {METHOD_HEADER: None},
        {METHOD_HEADER: "TOOLS/LIST"},
        {METHOD_HEADER: "tools/call"},
    ],
)
def test_missing_or_different_header_is_header_mismatch(change: dict[str, str | None]) -> None:
    body = envelope()
    headers = {k: v for k, v in {**modern_headers(body), **change}.items() if v is not None}
    rejection = assert_rejected(select_era(body, headers), RejectionKind.HEADER_MISMATCH,
                                HEADER_MISMATCH)
    if METHOD_HEADER in change:
        state = "missing" if change[METHOD_HEADER] is None else "not the body's method"
        assert rejection.message == f"Mcp-Method header is {state}: send Mcp-Method: {body['method']}."


@pytest.mark.parametrize("method", ["tools/call", "prompts/get"])
@pytest.mark.parametrize(
    ("body_name", "header"),
    [
        ("mail_search", "mail_search"),
        ("mail_search", "  mail_search \t"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
    ],
)
def test_matching_mcp_name_passes(method: str, body_name: str, header: str) -> None:
    body = envelope(method, params={"name": body_name})
    assert route(select_era(body, modern_headers(body, **{NAME_HEADER: header}))).method == method


@pytest.mark.parametrize("method", ["tools/call", "prompts/get"])
@pytest.mark.parametrize(
    "header",
    [None, "mail_send", "MAIL_SEARCH", "=?base64?bWFpbF9zZWFyY2g?=", "=?BASE64?bWFpbF9zZWFyY2g=?=", "=?base64?!!?="],
)
def test_missing_or_different_mcp_name_is_header_mismatch(method: str, header: str | None) -> None:
    body = envelope(method, params={"name": "mail_search"})
    headers = modern_headers(body)
    if header is None:
        del headers[NAME_HEADER]
    else:
        headers[NAME_HEADER] = header
    rejection = assert_rejected(select_era(body, headers), RejectionKind.HEADER_MISMATCH,
                                HEADER_MISMATCH)
    # a missing header is said to be missing, not to differ (found by a new user)
    state = "missing" if header is None else "not params.name"
    assert rejection.message == f"Mcp-Name header is {state}: send the value of params.name in it."


def test_mcp_name_is_not_checked_for_other_methods_or_absent_names() -> None:
    body = envelope("tools/list")
    assert isinstance(select_era(body, modern_headers(body, **{NAME_HEADER: "anything"})), Route)
    nameless = envelope("tools/call")
    assert isinstance(select_era(nameless, modern_headers(nameless)), Route)


# --- Rung 7e: modern, version -------------------------------------------------------------------


def test_conformance_unknown_version_in_both_places_is_unsupported() -> None:
    body = envelope(version="v999.0.0")
    rejection = assert_rejected(
        select_era(body, modern_headers(body)), RejectionKind.UNSUPPORTED_VERSION, UNSUPPORTED_PROTOCOL_VERSION
    )
    assert rejection.http_status == 400
    assert rejection.id == 1
    assert rejection.data["requested"] == "v999.0.0"
    assert set(rejection.data["supported"]) <= set(SUPPORTED_VERSIONS)


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_legacy_version_with_modern_meta_is_unsupported(version: str) -> None:
    body = envelope(version=version)
    rejection = assert_rejected(
        select_era(body, modern_headers(body)), RejectionKind.UNSUPPORTED_VERSION, UNSUPPORTED_PROTOCOL_VERSION
    )
    assert rejection.data["requested"] == version


# --- Rung 7f: modern notifications ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (envelope("notifications/cancelled", id=_ABSENT, version=None, params={"requestId": 1}),
         {PROTOCOL_VERSION_HEADER: MODERN_VERSION}),
        (envelope("notifications/cancelled", id=_ABSENT), {}),
    ],
)
def test_modern_notification_needs_only_a_served_version(body: dict[str, Any], headers: dict[str, str]) -> None:
    result = route(select_era(body, headers))
    assert result.era == "modern" and result.is_notification


def test_modern_notification_with_unknown_version_is_unsupported() -> None:
    body = envelope("notifications/cancelled", id=_ABSENT, version="v999.0.0")
    rejection = assert_rejected(select_era(body, {}), RejectionKind.UNSUPPORTED_VERSION, UNSUPPORTED_PROTOCOL_VERSION)
    assert rejection.id is None


# --- Values: header decoding --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "decoded"),
    [
        ("=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界"),
        ("=?base64?IHBhZGRlZCA=?=", " padded "),
        ("plain", "plain"),
        ("=?base64??=", ""),
        ("=?base64?SGVsbG9=?=", None),  # non-canonical: padding bits set
        ("=?base64?SGVsbG8?=", None),  # missing padding
        ("=?base64?/w==?=", None),  # not UTF-8
        ("=?BASE64?SGVsbG8=?=", "=?BASE64?SGVsbG8=?="),  # markers are case-sensitive: not a sentinel
    ],
)
def test_decode_header_value(value: str, decoded: str | None) -> None:
    assert decode_header_value(value) == decoded


@given(st.text())
def test_decode_inverts_base64_sentinel(text: str) -> None:
    encoded = base64.b64encode(text.encode("utf-8")).decode("ascii")
    assert decode_header_value(f"=?base64?{encoded}?=") == text


def test_route_and_rejection_are_frozen() -> None:
    body = envelope()
    result = route(select_era(body, modern_headers(body)))
    with pytest.raises(AttributeError):
        result.era = "legacy"  # type: ignore[misc]
    assert msgspec.structs.asdict(result)["version"] == MODERN_VERSION
