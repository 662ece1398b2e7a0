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
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from shared.auth.keys import create_key
from shared.auth.permissions import Permission
from shared.tenancy.store import create_identity, create_tenant

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
    env = {**os.environ, "DATABASE_URL": db_url, "REDIS_URL": redis_url}
    return subprocess.run([sys.executable, "-m", "shared.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


@contextlib.asynccontextmanager
async def sdk_client(url: str, token: str, mode: str = "legacy") -> AsyncIterator[Client]:
    """The official MCP Python SDK connected with a bearer key."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(30, read=120)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            yield client
