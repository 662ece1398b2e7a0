"""The official MCP conformance suite against the real server, in both eras (issue 3 acceptance).

``@modelcontextprotocol/conformance`` (pinned in tests/e2e/js/package.json, installed by
``scripts/js-tools``) runs every scenario a revision requires, ``--requirements 2026-07-28`` and
``--requirements 2025-11-25``, against a real uvicorn serving the suite's fixture tools and
prompts (tests/e2e/conformance/fixtures.py, registered only here). The suite has no header option,
so a Node preload adds the bearer key (PROTOCOL.md section 3). The ``--expected-failures``
baseline of each revision lists only scenarios for features the product does not offer; the suite
exits non-zero for any other failure and for a baseline entry that passes (a stale entry).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import running_front, settings_for
from tests.e2e.conformance import fixtures
from tests.e2e.transport_kit import keyed_identity, run_node

pytestmark = pytest.mark.conformance

HERE = Path(__file__).parent / "conformance"


@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
async def test_official_conformance_suite_passes(revision: str, db_url: str, conn, tmp_path, js):
    tools = js
    *_, token = await keyed_identity(conn)
    # The suite sends a few hundred requests a run; RL_API has its own tests.
    settings = settings_for(db_url, pm_rl_api_per_minute=100_000)
    async with running_front(settings, tools=fixtures.TOOLS, prompts=fixtures.PROMPTS) as url:
        code, out, err = await run_node(
            tools, str(tools.bin("@modelcontextprotocol/conformance", "dist/index.js")),
            "server", "--url", url, "--requirements", revision,
            "--expected-failures", str(HERE / f"baseline-{revision}.yml"),
            "-o", str(tmp_path / "results"), timeout=300,
            MCP_CONFORMANCE_AUTH=f"Bearer {token}",
            UNDICI_PATH=str(tools.root / "node_modules" / "undici" / "index.js"),
            NODE_OPTIONS=f"--import {HERE / 'inject-auth.mjs'}")
    assert code == 0, f"conformance {revision} failed (exit {code}):\n{out[-20000:]}\n{err[-4000:]}"
