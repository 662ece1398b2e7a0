"""Real MCP clients against the real server (issue 3 acceptance, DESIGN.md section 6).

* the official Python SDK ``mcp`` 2.3.0 in all three modes: ``auto`` (probes
  ``server/discover``), ``legacy`` (``initialize``) and ``2026-07-28`` (pinned, no probe);
* the TypeScript client v2 ``@modelcontextprotocol/client`` in the legacy era, in auto mode and
  pinned to 2026-07-28 (tests/e2e/js/client.mts, run by Node 22);
* ``@modelcontextprotocol/inspector --cli`` in both eras, listing tools and calling one.

Each lists the tools and calls ``mail_list_identities``, whose answer names the identity made
here, so a client that silently got nothing fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys

import pytest

from front.mcp.protocol import LEGACY_DEFAULT, MODERN_VERSION
from shared import guide
from shared.ingest.importer import import_paths
from shared.tools.registry import TOOLS
from tests.conftest import running_front, settings_for
from tests.e2e.harness import sdk_client
from tests.e2e.transport_kit import ROOT, keyed_identity, run_node

ADDRESS = "clients@acme.example"
PRODUCT_TOOLS = [t.name for t in TOOLS]


@pytest.fixture
async def served(db_url, conn):
    """The product front and an identity key; yields ``(url, token, identity_id)``."""
    _, identity_id, _, token = await keyed_identity(conn, ADDRESS)
    async with running_front(settings_for(db_url)) as url:
        yield url, token, identity_id


def assert_lists_the_identity(structured: dict, identity_id: str) -> None:
    [identity] = structured["data"]
    assert identity["id"] == identity_id
    assert ADDRESS in json.dumps(identity)


@pytest.mark.parametrize(("mode", "version"), [("auto", MODERN_VERSION),
                                               ("legacy", LEGACY_DEFAULT),
                                               ("2026-07-28", MODERN_VERSION)])
async def test_python_sdk_lists_tools_and_calls_one(served, mode, version):
    url, token, identity_id = served
    async with sdk_client(url, token, mode=mode) as client:  # validates every server message
        tools = await client.list_tools()
        result = await client.call_tool("mail_list_identities", {})
        assert client.protocol_version == version
    assert [t.name for t in tools.tools] == PRODUCT_TOOLS
    assert not result.is_error
    assert_lists_the_identity(result.structured_content, identity_id)


@pytest.mark.parametrize(("mode", "version"), [("legacy", LEGACY_DEFAULT),
                                               ("auto", MODERN_VERSION),
                                               ("2026-07-28", MODERN_VERSION)])
async def test_typescript_client_v2_lists_tools_and_calls_one(served, tmp_path, mode, version, js):
    tools = js
    url, token, identity_id = served
    # Node resolves packages beside the script: give it the installed node_modules.
    (tmp_path / "node_modules").symlink_to(tools.root / "node_modules")
    script = shutil.copy(ROOT / "tests/e2e/js/client.mts", tmp_path / "client.mts")
    code, out, err = await run_node(tools, str(script), url, token, mode, timeout=60)
    assert code == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert report["protocolVersion"] == version
    assert report["instructions"] == guide.INSTRUCTIONS
    assert report["tools"] == PRODUCT_TOOLS
    assert not report["result"].get("isError")
    assert_lists_the_identity(report["result"]["structuredContent"], identity_id)


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_inspector_cli_lists_tools_and_calls_one(served, era, js):
    tools = js
    url, token, identity_id = served
    cli = [str(tools.root / "node_modules/.bin/inspector"), "--cli", url, "--transport", "http",
           "--protocol-era", era, "--header", f"Authorization: Bearer {token}", "--format", "json"]
    code, out, err = await run_node(tools, *cli, "--method", "tools/list", timeout=90)
    assert code == 0, err
    # The CLI prints {"result": <the JSON-RPC result>}.
    assert [t["name"] for t in json.loads(out)["result"]["tools"]] == PRODUCT_TOOLS
    code, out, err = await run_node(tools, *cli, "--method", "tools/call",
                                    "--tool-name", "mail_list_identities",
                                    "--tool-args-json", "{}", timeout=90)
    assert code == 0, err
    assert_lists_the_identity(json.loads(out)["result"]["structuredContent"], identity_id)


async def test_the_readmes_python_example_runs_as_written(served, conn, tmp_path):
    """The README's Python client example, run as a user would (its own process, the key in
    ``KEY``), against the demo mailbox: it prints the subject of the first hit."""
    url, token, identity_id = served
    summary = await import_paths(conn, None, identity_id, [ROOT / "demo" / "brightwell.mbox"])
    assert summary.imported > 5
    readme = (ROOT / "README.md").read_text()
    [example] = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert "http://127.0.0.1:8000/mcp" in example
    script = tmp_path / "example.py"
    script.write_text(example.replace("http://127.0.0.1:8000/mcp", url))
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(script), env={**os.environ, "KEY": token},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()[-2000:]
    assert "Invoice INV-77120" in out.decode()
