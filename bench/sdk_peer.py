"""The official-SDK peer of ``bench.calls``: our own domain functions served by ``mcp``'s
``MCPServer`` (stateless Streamable HTTP, JSON responses: its fastest configuration, see
``../shared/bench-peers/README.md``).

    DATABASE_URL=... REDIS_URL=... PEER_TOKEN=pmk_... python -m bench.sdk_peer --port 8122

It hosts ``mail_get_message``, ``mail_search`` and ``mail_list_identities`` by calling the very
``run`` functions our tools call (``shared.tools.messages``, ``search``, ``identities``) with a
:class:`~shared.tools.context.ToolContext` on a pool opened once in the server's lifespan, so the
database work per call is the same as ours and the ratio measures what differs: transport,
authentication, rate limits, argument validation and logging. The principal is resolved once at
start-up from ``PEER_TOKEN`` (the SDK server has no per-request auth of its own).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import msgspec
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from redis.asyncio import Redis

from shared.auth.keys import Principal, authenticate
from shared.config import Settings
from shared.db import Database, open_database
from shared.tools import identities, messages, search
from shared.tools.context import ToolContext


@dataclass
class _State:
    db: Database
    redis: Redis
    settings: Settings
    principal: Principal

    def ctx(self) -> ToolContext:
        return ToolContext(db=self.db, redis=self.redis, settings=self.settings,
                           principal=self.principal, request_id="peer")


def build(log_level: str) -> MCPServer:
    """The SDK server with the three tools."""
    @contextlib.asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[_State]:
        settings = Settings.from_env()
        db = await open_database(settings.database_url, size=settings.pm_db_pool_size,
                                 acquire_seconds=settings.pm_db_acquire_seconds)
        redis = Redis.from_url(settings.redis_url)
        async with db.acquire() as conn:
            principal = await authenticate(conn, f"Bearer {os.environ['PEER_TOKEN']}")
        try:
            yield _State(db, redis, settings, principal)
        finally:
            await db.close()
            await redis.aclose()

    mcp = MCPServer("sdk-peer", version="0.1.0", lifespan=lifespan, log_level=log_level)

    def state(ctx: Context) -> _State:
        return ctx.request_context.lifespan_context

    @mcp.tool()
    async def mail_get_message(message_id: str, ctx: Context) -> dict[str, Any]:
        """Read one message."""
        result = await messages.run(state(ctx).ctx(),
                                    messages.GetMessageArgs(message_id=message_id))
        return msgspec.to_builtins(result)

    @mcp.tool()
    async def mail_search(q: str, ctx: Context, mode: str = "keyword") -> dict[str, Any]:
        """Search mail."""
        result = await search.run(state(ctx).ctx(), search.SearchArgs(q=q, mode=mode))
        return msgspec.to_builtins(result)

    @mcp.tool()
    async def mail_list_identities(ctx: Context) -> dict[str, Any]:
        """List identities."""
        result = await identities.run(state(ctx).ctx(), identities.ListIdentitiesArgs())
        return msgspec.to_builtins(result)

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8122)
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args()
    mcp = build(args.log_level)
    app = mcp.streamable_http_app(stateless_http=True, json_response=True, host=args.host)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level.lower(),
                access_log=False)


if __name__ == "__main__":
    main()
