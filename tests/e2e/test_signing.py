"""The agent identity tools end to end (issue 13), through a real uvicorn front: assertions and
signed requests over MCP and REST, verified by independent libraries (PyJWT, and the
``http-message-signatures`` RFC 9421 verifier) with the keys the front serves at ``/.well-known``;
the deployment switch, the workspace policy, key rotation from the CLI, and no token or
signature in the logs."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import jwt
import msgspec
import pytest
from http_message_signatures import HTTPMessageVerifier, algorithms
from http_message_signatures.exceptions import InvalidSignature

from shared.auth.keys import create_key
from shared.auth.permissions import Permission
from shared.signing.assertions import sign_assertion
from shared.tenancy.store import create_identity, create_tenant, set_tenant_policy
from tests.conftest import running_front, settings_for
from tests.e2e.harness import pylota, sdk_client
from tests.e2e.transport_kit import Wire
from tests.shared.signing.test_web_bot_auth import SECRET, DirectoryKeys

HOST = "mail.pylota.test"
AUDIENCE = "https://shop.example/agents"
CACHE = "public, max-age=300"


@pytest.fixture
async def desk(db_url, conn) -> dict[str, Any]:
    """A workspace with an accountable human and signed requests allowed, an identity, and an
    identity key and a tenant key."""
    tenant = await create_tenant(conn, "Acme Works")
    await set_tenant_policy(conn, tenant.id, accountable_human=True, allow_signed_requests=True)
    identity = await create_identity(conn, tenant.id, "buyer@acme.example",
                                     display_name="Acme Buyer")
    _, token = await create_key(conn, tenant_id=tenant.id, identity_id=identity.id,
                                permissions=[Permission.IDENTITIES_SIGN])
    _, tenant_token = await create_key(conn, tenant_id=tenant.id, identity_id=None,
                                       permissions=list(Permission))
    return {"db_url": db_url, "tenant_id": tenant.id, "identity_id": identity.id,
            "token": token, "tenant_token": tenant_token}


@pytest.fixture
async def front(desk) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    settings = settings_for(desk["db_url"], pm_signing_secret=SECRET, pm_web_bot_auth="on")
    async with running_front(settings) as url:
        async with httpx.AsyncClient(base_url=url.removesuffix("/mcp"), timeout=30) as http:
            yield http, url


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def served_jwks(http: httpx.AsyncClient) -> jwt.PyJWKSet:
    response = await http.get("/.well-known/jwks.json")  # no key: the document is public
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/jwk-set+json"
    assert response.headers["cache-control"] == CACHE
    return jwt.PyJWKSet.from_json(response.text)


def verify(keys: jwt.PyJWKSet, token: str, audience: str = AUDIENCE) -> dict[str, Any]:
    """Verify ``token`` with PyJWT (not the library that signed it) as a third party would."""
    kid = jwt.get_unverified_header(token)["kid"]
    key = next(k for k in keys.keys if k.key_id == kid)
    return jwt.decode(token, key, algorithms=["EdDSA"], audience=audience,
                      issuer=f"https://{HOST}", options={"require": ["exp", "iat", "jti"]})


async def test_assertions_over_mcp_and_rest_verify_against_the_served_jwks(desk, front, conn,
                                                                           monkeypatch):
    http, url = front
    async with sdk_client(url, desk["token"]) as client:
        called = await client.call_tool("mail_sign_assertion", {
            "audience": AUDIENCE, "expires_in": 120, "nonce": "challenge-1",
            "ext": {"order": {"id": 7}}})
    assert not called.is_error, called.content
    over_mcp = called.structured_content
    response = await http.post(f"/v1/identities/{desk['identity_id']}/assertions",
                               json={"audience": AUDIENCE}, headers=bearer(desk["tenant_token"]))
    assert response.status_code == 201, response.text
    over_rest = response.json()
    assert over_mcp["jwks_uri"] == over_rest["jwks_uri"] == f"https://{HOST}/.well-known/jwks.json"
    assert over_mcp["kid"] == over_rest["kid"]

    keys = await served_jwks(http)
    claims = verify(keys, over_mcp["assertion"])
    assert claims == {
        "iss": f"https://{HOST}", "sub": desk["identity_id"], "aud": AUDIENCE,
        "iat": claims["iat"], "exp": claims["iat"] + 120, "jti": claims["jti"],
        "email": "buyer@acme.example", "name": "Acme Buyer", "agent": True,
        "accountable_human": True, "workspace": {"id": desk["tenant_id"], "name": "Acme Works"},
        "nonce": "challenge-1", "ext": {"order": {"id": 7}}}
    again = verify(keys, over_rest["assertion"])
    assert again["sub"] == desk["identity_id"] and again["jti"] != claims["jti"]
    assert again["exp"] - again["iat"] == 300

    with pytest.raises(jwt.InvalidAudienceError):
        verify(keys, over_mcp["assertion"], audience="https://other.example")
    header, payload, signature = over_mcp["assertion"].split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged = base64.urlsafe_b64encode(
        json.dumps({**body, "sub": "idn_01J9Z3W7Q8M5K2N4P6R8T0V2X4"}).encode()).rstrip(b"=")
    with pytest.raises(jwt.InvalidSignatureError):
        verify(keys, f"{header}.{forged.decode()}.{signature}")
    past = await sign_assertion(  # the deployment's own key, ten minutes ago
        conn, secret=SECRET, api_host=HOST, identity_id=desk["identity_id"],
        address="buyer@acme.example", display_name=None, tenant_id=desk["tenant_id"],
        tenant_name="Acme Works", accountable_human=True, audience=AUDIENCE, expires_in=60,
        now=datetime.now(timezone.utc) - timedelta(minutes=10))
    with pytest.raises(jwt.ExpiredSignatureError):
        verify(await served_jwks(http), past.assertion)

    # Rotation from the CLI: new tokens take the new key, the old one stays published.
    monkeypatch.setenv("PM_SIGNING_SECRET", SECRET)
    rotated = pylota(desk["db_url"], "signing-keys", "rotate", "--purpose", "assertion")
    assert rotated.returncode == 0, rotated.stderr
    purpose, new_kid = rotated.stdout.split()
    assert purpose == "assertion" and new_kid != over_mcp["kid"]
    fresh = await http.post(f"/v1/identities/{desk['identity_id']}/assertions",
                            json={"audience": AUDIENCE}, headers=bearer(desk["token"]))
    assert fresh.json()["kid"] == new_kid
    keys = await served_jwks(http)
    assert {k.key_id for k in keys.keys} == {new_kid, over_mcp["kid"]}
    verify(keys, fresh.json()["assertion"])
    verify(keys, over_mcp["assertion"])


def as_headers(signed: dict[str, Any]) -> dict[str, str]:
    return signed["headers"]


async def test_signed_requests_verify_with_the_served_directory(desk, front):
    http, url = front
    target = "https://shop.example/cart/items?sku=42"
    async with sdk_client(url, desk["token"]) as client:
        called = await client.call_tool("mail_sign_http_request", {
            "url": target, "method": "POST", "components": ["@method", "@path", "@query"]})
    assert not called.is_error, called.content
    response = await http.post(f"/v1/identities/buyer@acme.example/http-signatures",
                               json={"url": "https://bücher.example/katalog"},
                               headers=bearer(desk["tenant_token"]))
    assert response.status_code == 200, response.text

    directory = await http.get("/.well-known/http-message-signatures-directory")
    assert directory.status_code == 200
    assert directory.headers["content-type"] == \
        "application/http-message-signatures-directory+json"
    assert directory.headers["cache-control"] == CACHE
    assert {"signature", "signature-input", "content-digest"} <= set(directory.headers)
    verifier = HTTPMessageVerifier(signature_algorithm=algorithms.ED25519,
                                   key_resolver=DirectoryKeys(directory.content))

    signed = called.structured_content
    assert set(signed["headers"]) == {"Signature-Agent", "From", "Signature-Input", "Signature"}
    assert signed["headers"]["From"] == "buyer@acme.example"
    (result,) = verifier.verify(httpx.Request("POST", target, headers=signed["headers"]),
                                expect_tag="web-bot-auth")
    assert result.covered_components['"@path"'] == "/cart/items"
    assert result.covered_components['"signature-agent";key="sig1"'] == f'"https://{HOST}"'
    with pytest.raises(InvalidSignature):
        verifier.verify(httpx.Request("POST", "https://shop.example/cart/other?sku=42",
                                      headers=signed["headers"]), expect_tag="web-bot-auth")
    (idn,) = verifier.verify(httpx.Request("GET", "https://bücher.example/katalog",
                                           headers=response.json()["headers"]),
                             expect_tag="web-bot-auth")
    assert idn.covered_components['"@authority"'] == "xn--bcher-kva.example"


async def test_the_deployment_switch_and_the_workspace_policy(desk, conn):
    arguments = {"url": "https://shop.example/"}
    path = f"/v1/identities/{desk['identity_id']}/http-signatures"
    off = settings_for(desk["db_url"], pm_signing_secret=SECRET)  # PM_WEB_BOT_AUTH off
    async with running_front(off) as url:
        async with httpx.AsyncClient(base_url=url.removesuffix("/mcp"), timeout=30) as http:
            wire = Wire(http, url, desk["token"])
            _, listed = await wire.legacy("tools/list")
            assert "mail_sign_http_request" in {t["name"] for t in listed[0]["result"]["tools"]}
            assert await tool_error(wire, "mail_sign_http_request", arguments) \
                == "web_bot_auth_disabled"
            refused = await http.post(path, json=arguments, headers=bearer(desk["token"]))
            assert refused.status_code == 403
            assert refused.json()["error"]["code"] == "web_bot_auth_disabled"

    await set_tenant_policy(conn, desk["tenant_id"], accountable_human=False,
                            allow_signed_requests=False)
    on = settings_for(desk["db_url"], pm_signing_secret=SECRET, pm_web_bot_auth="on")
    async with running_front(on) as url:
        async with httpx.AsyncClient(base_url=url.removesuffix("/mcp"), timeout=30) as http:
            wire = Wire(http, url, desk["token"])
            assert await tool_error(wire, "mail_sign_http_request", arguments) == "policy_denied"
            refused = await http.post(path, json=arguments, headers=bearer(desk["token"]))
            assert refused.status_code == 403 and refused.json()["error"]["code"] == \
                "policy_denied"
            token = (await http.post(f"/v1/identities/{desk['identity_id']}/assertions",
                                     json={"audience": AUDIENCE}, headers=bearer(desk["token"])
                                     )).json()["assertion"]
            assert verify(await served_jwks(http), token)["accountable_human"] is False


async def tool_error(wire: Wire, name: str, arguments: dict[str, Any]) -> str:
    _, messages = await wire.legacy("tools/call", {"name": name, "arguments": arguments})
    result = messages[0]["result"]
    assert result["isError"] is True
    return msgspec.json.decode(result["content"][0]["text"])["error"]["code"]


async def test_arguments_the_schema_cannot_check_and_a_missing_secret(desk):
    async with running_front(settings_for(desk["db_url"], pm_web_bot_auth="on")) as url:
        async with httpx.AsyncClient(base_url=url.removesuffix("/mcp"), timeout=30) as http:
            path = f"/v1/identities/{desk['identity_id']}/assertions"
            reserved = await http.post(path, json={"audience": AUDIENCE, "ext": {"sub": "x"}},
                                       headers=bearer(desk["token"]))
            assert reserved.status_code == 400
            assert reserved.json()["error"]["details"] == {"path": "ext"}
            unset = await http.post(path, json={"audience": AUDIENCE},
                                    headers=bearer(desk["token"]))
            assert unset.status_code == 503
            assert unset.json()["error"]["details"] == {"setting": "PM_SIGNING_SECRET"}
            assert unset.json()["error"]["retryable"] is False  # its fix: ask the operator
            jwks = await http.get("/.well-known/jwks.json")
            assert jwks.status_code == 200 and jwks.json() == {"keys": []}
            directory = await http.get("/.well-known/http-message-signatures-directory")
            assert directory.status_code == 503 and directory.headers["retry-after"]
            assert directory.json()["error"]["code"] == "unavailable"


async def test_tokens_and_signatures_are_never_logged(desk, front, capsys):
    http, url = front
    wire = Wire(http, url, desk["token"])
    secrets: list[str] = []
    for _ in range(2):
        _, messages = await wire.legacy("tools/call", {
            "name": "mail_sign_assertion", "arguments": {"audience": AUDIENCE}})
        secrets += messages[0]["result"]["structuredContent"]["assertion"].split(".")[1:]
        _, messages = await wire.legacy("tools/call", {
            "name": "mail_sign_http_request", "arguments": {"url": "https://shop.example/"}})
        headers = messages[0]["result"]["structuredContent"]["headers"]
        secrets += [headers["Signature"].split(":")[1], headers["Signature-Input"]]
    rest = await http.post(f"/v1/identities/{desk['identity_id']}/assertions",
                           json={"audience": AUDIENCE}, headers=bearer(desk["token"]))
    secrets += rest.json()["assertion"].split(".")[1:]
    rest = await http.post(f"/v1/identities/{desk['identity_id']}/http-signatures",
                           json={"url": "https://shop.example/"}, headers=bearer(desk["token"]))
    secrets.append(rest.json()["headers"]["Signature"].split(":")[1])
    directory = await http.get("/.well-known/http-message-signatures-directory")
    secrets.append(directory.headers["signature"].split(":")[1])
    logged = capsys.readouterr().err
    tool_lines = [json.loads(line) for line in logged.splitlines()
                  if line.startswith("{") and '"tool_call"' in line]
    assert {(line["tool"], line["surface"]) for line in tool_lines} == {
        ("mail_sign_assertion", "mcp"), ("mail_sign_http_request", "mcp"),
        ("mail_sign_assertion", "rest"), ("mail_sign_http_request", "rest")}
    assert "/.well-known/http-message-signatures-directory" in {
        json.loads(line).get("route") for line in logged.splitlines() if line.startswith("{")}
    assert all(s and s not in logged for s in secrets)
