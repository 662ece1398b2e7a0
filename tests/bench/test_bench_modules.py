"""The side-by-side benchmarks (issue 14) start: each prints its usage, and the SDK peer builds.

Benchmarks are never timed here; a full run is ``python -m bench.calls`` and so on (README,
"Performance").
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.stack import ROOT


@pytest.mark.parametrize("module", ["bench.calls", "bench.ingest", "bench.embed",
                                    "bench.streams", "bench.sdk_peer"])
def test_bench_module_prints_its_usage(module: str) -> None:
    done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


def test_the_sdk_peer_hosts_our_three_tools() -> None:
    from bench.sdk_peer import build
    server = build("WARNING")
    names = {tool.name for tool in server._tool_manager.list_tools()}
    assert names == {"mail_get_message", "mail_search", "mail_list_identities"}


def test_bench_streams_refuses_a_timeout_mail_wait_does_not_take() -> None:
    from bench.streams import parse_args
    assert parse_args(["--streams", "50"]).streams == 50
    with pytest.raises(SystemExit):
        parse_args(["--timeout", "61"])
