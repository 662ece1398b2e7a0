"""Building blocks for end-to-end tests: a tenant with identities and keys, the CLI, SDK clients."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx2
import msgspec
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from front.mcp.inbound import negotiate_legacy_version
from shared.auth.keys import create_key
from shared.auth.permissions import Permission
from shared.tenancy.store import create_identity, create_tenant
from tests.mcp_schema import check_if_kit

ROOT = Path(__file__).resolve().parents[2]


async def tenant_with_identity(conn: asyncpg.Connection, address: str,
                               permissions: list[Permission] | None = None,
                               tenant_name: str = "acme") -> tuple[str, str, str]:
    """Create a tenant, an identity at ``address`` and an identity key.

    Returns ``(tenant_id, identity_id, token)``.
    """
    tenant = await create_tenant(conn, tenant_name)
    identity = await create_identity(conn, tenant.id, address)
    _, token = await create_key(conn, tenant_id=tenant.id, identity_id=identity.id,
                                permissions=permissions or list(Permission))
    return tenant.id, identity.id, token


def pylota(db_url: str, *args: str, redis_url: str = "redis://127.0.0.1:6379/0"
           ) -> subprocess.CompletedProcess[str]:
    """Run the ``pylota`` command as a user would, against ``db_url``."""
    # No DKIM key lookups: the tests' machines have no DNS to ask.
    env = {**os.environ, "DATABASE_URL": db_url, "REDIS_URL": redis_url, "PM_DKIM_VERIFY": "false"}
    return subprocess.run([sys.executable, "-m", "cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


class _Checked(httpx2.AsyncByteStream):
    """A response body passed through unchanged while each JSON-RPC message in it (one JSON
    body, or SSE ``data:`` lines) is validated against the schema of its revision."""

    def __init__(self, inner: httpx2.AsyncByteStream, sse: bool, revision: str,
                 method: str | None, errors: list[str]) -> None:
        self._inner, self._sse, self._revision, self._method = inner, sse, revision, method
        self._errors = errors
        self._buffer = b""

    def _check(self, raw: bytes) -> None:
        message = msgspec.json.decode(raw)
        try:
            check_if_kit(message, self._revision,
                                    method=self._method if "id" in message else None)
        except Exception as exc:  # collected, then asserted when the client closes
            self._errors.append(f"{self._revision} {self._method}: {exc}"[:2000])

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._buffer += chunk
            if self._sse:
                *lines, self._buffer = self._buffer.split(b"\n")
                for line in lines:
                    if line.startswith(b"data: "):
                        self._check(line[len(b"data: "):])
            yield chunk
        if not self._sse and self._buffer.strip():
            self._check(self._buffer)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CheckingTransport(httpx2.AsyncHTTPTransport):
    """Validates every message the server sends (issue 3: every emitted message, any client)."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__()
        self.errors = errors

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        if request.method != "POST" or response.status_code == 202:
            return response
        body = msgspec.json.decode(request.content) if request.content else {}
        method = body.get("method") if isinstance(body, dict) else None
        revision = request.headers.get("mcp-protocol-version") or negotiate_legacy_version(
            (body.get("params") or {}).get("protocolVersion"))
        sse = response.headers.get("content-type", "").startswith("text/event-stream")
        return httpx2.Response(
            response.status_code, headers=response.headers, request=request,
            extensions=response.extensions,
            stream=_Checked(response.stream, sse, revision, method, self.errors))


@contextlib.asynccontextmanager
async def sdk_client(url: str, token: str, mode: str = "legacy") -> AsyncIterator[Client]:
    """The official MCP Python SDK connected with a bearer key; on exit, asserts that every
    message the server sent it validated against the official schema of its revision."""
    errors: list[str] = []
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(30, read=120),
                                  transport=_CheckingTransport(errors)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            yield client
    assert errors == [], errors
