"""``pylota import`` against ``notmuch new`` on the same maildir, side by side.

    python -m bench.ingest [--rounds 3] [--limit 2000]

The maildir is the SpamAssassin public corpus (6,046 messages, made once from the kit's mbox
files with ``../shared/bench-peers/mbox_to_maildir.py``; ``--limit N`` takes its first N
messages, ``--limit 0`` all of them). Each round runs, interleaved, ``notmuch new`` on a fresh
Xapian database (the kit's ``notmuch_ingest.sh``, ``RUNS=1``) and then ``pylota import`` into a
fresh PostgreSQL database (made and migrated untimed, as ``bench.stack`` does), and prints both
wall times and the ratio notmuch / ours (above 1: we are faster). Needs notmuch
(``apt-get install notmuch``).

Target (issue 14): ours >= 2x notmuch. Only ratios inside one run count.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.peers import KIT, machine, peers_dir, sa_maildir
from bench.stack import Stack


def notmuch_seconds(maildir: Path, kit: Path = KIT) -> float:
    """Wall seconds of one ``notmuch new`` on a fresh database (the kit's script)."""
    done = subprocess.run(["bash", str(peers_dir(kit) / "notmuch_ingest.sh"), str(maildir)],
                          env={**os.environ, "RUNS": "1", "REPS": "1", "NM_QUERIES": "razor"},
                          capture_output=True, text=True, timeout=3600, check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["new_s"][0])


def ours_seconds(admin_dsn: str, maildir: Path, extra: list[str]) -> tuple[float, dict]:
    """Wall seconds of ``pylota import`` of ``maildir`` into a fresh database, and its summary."""
    with Stack(admin_dsn, embedder="off") as stack:
        stack.cli("tenants", "create", "bench")
        identity = stack.cli("identities", "create", "--tenant", "bench", "--address",
                             "ingest@bench.test")
        started = time.perf_counter()
        out = stack.cli("import", "--identity", identity, "--json", "--no-progress", *extra,
                        str(maildir))
        return time.perf_counter() - started, json.loads(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=2000,
                        help="first N messages of the corpus (0: all 6,046)")
    parser.add_argument("--import-arg", action="append", default=[],
                        help="extra argument for pylota import (repeatable)")
    parser.add_argument("--kit", type=Path, default=KIT)
    parser.add_argument("--admin-dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args(argv)
    if shutil.which("notmuch") is None:
        sys.exit("notmuch is not installed: apt-get install -y notmuch")
    maildir = sa_maildir(args.kit, args.limit or None)
    count = len(os.listdir(maildir / "new"))
    print(f"bench.ingest: {machine()}; {count} messages in {maildir}", flush=True)
    print("\n| round | notmuch new s | pylota import s | ours msg/s | notmuch / ours |")
    print("| --- | --- | --- | --- | --- |", flush=True)
    ratios = []
    for r in range(1, args.rounds + 1):
        peer = notmuch_seconds(maildir, args.kit)
        ours, summary = ours_seconds(args.admin_dsn, maildir, args.import_arg)
        ratios.append(peer / ours)
        print(f"| {r} | {peer:.1f} | {ours:.1f} | {count / ours:.0f} | {peer / ours:.2f}x |"
              f"  imported {summary.get('imported')}, failed {len(summary.get('failed', []))}",
              flush=True)
    if ratios:
        print(f"\nmedian notmuch / ours: {statistics.median(ratios):.2f}x (target >= 2x)")
    print(f"load average at the end: {machine()}")


if __name__ == "__main__":
    main()
