"""`pylota --version` and the MCP serverInfo name one version (found by a new user: 0.1.0
against the 1.0.0 the spec's serverInfo gives)."""

from __future__ import annotations

import subprocess
import sys

from front.mcp.dispatch import SERVER_INFO
from tests.conftest import ROOT


def test_the_cli_and_server_info_name_the_same_version():
    printed = subprocess.run([sys.executable, "-m", "cli", "--version"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60).stdout
    assert printed.strip() == f"pylota, version {SERVER_INFO.version}"
    assert SERVER_INFO.version == "1.0.0"  # spec section 2 (initialize)
