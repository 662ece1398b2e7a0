"""What the side-by-side benchmarks (``bench.calls``, ``bench.ingest``) share: the kit's peer
scripts (``../shared/bench-peers``), the SpamAssassin maildir they all read, the load
generator, and the machine's load.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.stack import ROOT

__all__ = ["KIT", "peers_dir", "sa_maildir", "load", "wait_port", "loadavg", "machine"]

#: The team kit (corpus, bench-peers), next to the checkout unless ``PYLOTA_KIT`` says otherwise.
KIT = Path(os.environ.get("PYLOTA_KIT", ROOT.parent / "shared"))
#: Where the SpamAssassin maildir is made once and reused by later runs.
CACHE = Path(os.environ.get("PYLOTA_BENCH_CACHE", "/tmp/pylota-bench-cache"))


def peers_dir(kit: Path = KIT) -> Path:
    """The kit's ``bench-peers`` folder."""
    return kit / "bench-peers"


def sa_maildir(kit: Path = KIT, limit: int | None = None) -> Path:
    """A maildir of the SpamAssassin public corpus (6,046 messages), made once with the kit's
    ``mbox_to_maildir.py``; with ``limit``, one of its first ``limit`` messages (by name)."""
    full = CACHE / "maildir-sa"
    if not (full / "new").is_dir() or not any((full / "new").iterdir()):
        shutil.rmtree(full, ignore_errors=True)
        full.parent.mkdir(parents=True, exist_ok=True)
        mboxes = sorted((kit / "corpus/mailboxes/spamassassin-public").glob("*.mbox.gz"))
        subprocess.run([sys.executable, str(peers_dir(kit) / "mbox_to_maildir.py"), str(full),
                        *map(str, mboxes)], check=True, stdout=subprocess.DEVNULL)
    names = sorted(os.listdir(full / "new"))
    if limit is None or limit >= len(names):
        return full
    subset = CACHE / f"maildir-sa-{limit}"
    if not (subset / "new").is_dir() or len(os.listdir(subset / "new")) != limit:
        shutil.rmtree(subset, ignore_errors=True)
        for sub in ("new", "cur", "tmp"):
            (subset / sub).mkdir(parents=True)
        for name in names[:limit]:
            os.link(full / "new" / name, subset / "new" / name)
    return subset


def load(url: str, *, era: str, tool: str, concurrency: int, seconds: float, warmup: float,
         token: str | None = None, args: dict[str, Any] | None = None,
         vary: list[str] = (), watch: dict[str, int] | None = None, label: str = "",
         kit: Path = KIT) -> dict[str, Any]:
    """One closed-loop run of the kit's ``mcp_load.py`` (raw HTTP/1.1 engine); its JSON line."""
    command = [sys.executable, str(peers_dir(kit) / "mcp_load.py"), url, "--era", era,
               "--tool", tool, "--args", json.dumps(args or {}), "-c", str(concurrency),
               "-d", str(seconds), "--warmup", str(warmup), "--engine", "raw", "--label", label]
    for spec in vary:
        command += ["--vary", spec]
    for name, pid in (watch or {}).items():
        command += ["--watch", f"{name}={pid}"]
    if token:
        command += ["--token", token]
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=seconds + warmup + 90, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def wait_port(port: int, timeout: float = 60) -> None:
    """Wait until something listens on 127.0.0.1:``port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} after {timeout:g} s")


def loadavg() -> str:
    """The 1, 5 and 15-minute load averages, as ``uptime`` prints them."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def machine() -> str:
    """Date, cores and load: the heading every bench prints."""
    return (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores,"
            f" load average {loadavg()}")
