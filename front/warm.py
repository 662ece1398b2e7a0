"""Warming a front before it serves, so that its first call costs what later calls do.

Issue 14 measured the first ``mail_search`` after start at 850-900 ms against 10-90 ms for later
ones: the query-embedding model loaded on that call (``shared.search.semantic``, about 0.7 s for
ONNX), and each first use of a pooled PostgreSQL connection opened it (TCP, the TLS probe,
authentication, the codecs). Once both were warm the first ``mail_get_message`` still took 4-5x
a warm one: asyncpg prepares a statement, and looks up the types of its columns, on its first
use on each connection, several round trips each, and the rate limiter opened its own Redis
connection and loaded its script. :func:`warm` opens the connections, loads the model, warms the
rate limiter and runs the statements of the most frequent calls once on each warmed connection
(matching no row: :func:`_prepare`), in the app's lifespan, before uvicorn accepts connections,
bounded by :data:`WARM_SECONDS`. It is best-effort: a front still starts when PostgreSQL or
Redis is down (``front.resources``) and the lazy paths then do the work on first use.
"""

from __future__ import annotations

import asyncio
import contextlib

from datetime import datetime, timezone

import asyncpg

from front.resources import Resources
from shared.auth.keys import read_key
from shared.logs import get_logger
from shared.mail.patterns import tenant_patterns
from shared.mail.reading import read_message
from shared.search.engine import run_search
from shared.search.keyword import Filters, Ranked, Scope, hit_details
from shared.search.query import parse
from shared.search.semantic import engine_for
from shared.tenancy.store import get_tenant, list_identities

__all__ = ["warm", "WARM_SECONDS", "WARM_CONNECTIONS"]

log = get_logger("front.warm")

#: Longest the start-up waits for the warm-up; what is not warm by then warms on first use.
WARM_SECONDS = 10.0
#: Pooled PostgreSQL connections opened at start-up (at most the pool's size): enough for the
#: first burst of calls.
WARM_CONNECTIONS = 4


async def warm(resources: Resources) -> None:
    """Open :data:`WARM_CONNECTIONS` database connections, a Redis one and the rate limiter's,
    load the semantic engine (model and index choice), and prepare the frequent statements on
    each warmed connection. Never raises."""
    try:
        async with asyncio.timeout(WARM_SECONDS):
            async with contextlib.AsyncExitStack() as held:
                count = min(WARM_CONNECTIONS, resources.db.pool.get_max_size())
                conns = [await held.enter_async_context(resources.db.acquire())
                         for _ in range(count)]
                await resources.redis.ping()
                await resources.limits.warm()
                await engine_for(resources.settings).ready(conns[0])
                for conn in conns:
                    await _prepare(conn)
            # A search takes its own connections; by the pool's order, warmed ones.
            for mode in ("keyword", "hybrid"):
                await run_search(resources.db, engine_for(resources.settings), _NOWHERE,
                                 parse(_WORD).root, Filters(), mode=mode, offset=0, limit=10,
                                 group_by_thread=False)
    except Exception as exc:  # noqa: BLE001 - start anyway; first use warms what is left
        log.warning("warm_up_incomplete", error=type(exc).__name__)


#: Ids that name nothing, and a scope of no identity: the warm-up's statements match no row.
_NO_IDENTITY, _NO_MESSAGE, _NO_TENANT = "idn_" + "0" * 26, "msg_" + "0" * 26, "ten_" + "0" * 26
_NOWHERE = Scope(identity_ids=[], as_of=datetime.now(timezone.utc), time_zone="UTC")
#: A one-word query: the shape of most searches.
_WORD = "warm"


async def _prepare(conn: asyncpg.Connection) -> None:
    """Run the statements of authentication, mail_get_message, mail_list_identities and a
    search's scope and hits once on ``conn``, so asyncpg has prepared them and learnt their
    types."""
    await read_key(conn, bytes(32))
    await read_message(conn, _NO_IDENTITY, _NO_MESSAGE)
    await list_identities(conn, tenant_ids=[_NO_TENANT], identity_id=None, status=None,
                          purpose=None, after_id=None, limit=1)
    await get_tenant(conn, _NO_TENANT)
    await tenant_patterns(conn, _NO_TENANT)
    # The hits' statement of a one-word search: the warm-up's own search finds no hit to read.
    await hit_details(conn, [Ranked(message_id=_NO_MESSAGE, thread_id="", score=0.0)],
                      parse(_WORD).root, "UTC")
