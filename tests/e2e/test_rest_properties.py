"""A property-based run of the REST API from its own OpenAPI document (schemathesis): for inputs
generated from each operation's schema, valid and not, the real front answers no 5xx and nothing
that breaks the document (status codes, content types, response schemas).

The front runs on a real uvicorn in a thread of its own (schemathesis calls it synchronously),
over a real database with the demo mailbox imported. ``mail_wait`` is left out: a valid call
legitimately waits up to 60 s; tests/e2e/test_rest.py covers it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance, response_schema_conformance, status_code_conformance,
)

from front.app import create_app
from front.rest.endpoints import REST_ROUTES
from front.rest.openapi import openapi_document
from shared.auth.keys import create_key
from shared.auth.permissions import Permission
from shared.ingest.importer import import_paths
from shared.tools.registry import TOOLS
from tests.conftest import ROOT, free_port, settings_for
from tests.e2e.transport_kit import keyed_identity

SCHEMA = schemathesis.openapi.from_dict(openapi_document(REST_ROUTES, TOOLS)).exclude(
    tag="mail_wait")
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


@pytest.fixture(scope="module")
async def served(template_db: str) -> Iterator[tuple[str, str]]:
    from tests.conftest import _drop_db, _fresh_db
    from shared.db import connect

    name, dsn = await _fresh_db(template_db)
    conn = await connect(dsn)
    tenant_id, identity_id, _, token = await keyed_identity(conn, "desk@pylota.example")
    await import_paths(conn, None, identity_id, [ROOT / "demo" / "brightwell.mbox"])
    await create_key(conn, tenant_id=tenant_id, identity_id=None, permissions=list(Permission))
    await conn.close()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(
        create_app(settings_for(dsn, pm_embedder="hash", pm_rl_api_per_minute=100_000,
                                pm_rl_search_per_minute=100_000, pm_rl_sign_per_minute=100_000,
                                pm_signing_secret="property-test-signing-secret-0123456789",
                                pm_web_bot_auth="on")),
        host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    async with asyncio.timeout(15):
        while not server.started:
            await asyncio.sleep(0.05)
    yield f"http://127.0.0.1:{port}", token
    server.should_exit = True
    await asyncio.to_thread(thread.join, 15)
    await _drop_db(name)


@SCHEMA.parametrize()
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_no_5xx_and_no_response_outside_the_document(case, served):
    base_url, token = served
    case.call_and_validate(base_url=base_url, headers={"Authorization": f"Bearer {token}"},
                           checks=CHECKS, timeout=30)
