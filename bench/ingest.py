"""``pylota import`` against ``notmuch new`` on the same maildir, side by side.

    python -m bench.ingest [--rounds 3] [--limit 2000] [--statements]

The maildir is the SpamAssassin public corpus (6,046 messages, made once from the kit's mbox
files with ``../shared/bench-peers/mbox_to_maildir.py``; ``--limit N`` takes its first N
messages, ``--limit 0`` all of them). Each round runs, interleaved, ``notmuch new`` on a fresh
Xapian database (the kit's ``notmuch_ingest.sh``, ``RUNS=1``) and then ``pylota import`` into a
fresh PostgreSQL database (made and migrated untimed, as ``bench.stack`` does), and prints both
wall times and the ratio notmuch / ours (above 1: we are faster). Needs notmuch
(``apt-get install notmuch``).

``--statements`` also imports the maildir once in this process (``import_paths`` with the CLI's
workers and batch size) and prints the PostgreSQL statements sent per message, the PostgreSQL
backend's CPU and this process's CPU per message, so a change in either shows.

Target (issue 14): ours >= 2x notmuch. Only ratios inside one run count.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import resource
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


def statements(admin_dsn: str, maildir: Path) -> None:
    """Import ``maildir`` in this process into a fresh database, counting every asyncpg
    ``execute``/``fetch*``/``executemany`` (BEGIN and COMMIT included), and print them per
    message with the backend's and this process's CPU per message."""
    import asyncpg.connection

    counts: collections.Counter[str] = collections.Counter()
    conn_cls = asyncpg.connection.Connection
    orig_execute, orig__execute, orig_many = (conn_cls.execute, conn_cls._execute,
                                              conn_cls.executemany)

    async def execute(self, query, *args, **kwargs):  # noqa: ANN001, ANN202
        if not args:
            counts[" ".join(query.split())[:72]] += 1
        return await orig_execute(self, query, *args, **kwargs)

    async def _execute(self, query, *args, **kwargs):  # noqa: ANN001, ANN202
        counts[" ".join(query.split())[:72]] += 1
        return await orig__execute(self, query, *args, **kwargs)

    async def executemany(self, command, args, **kwargs):  # noqa: ANN001, ANN202
        counts[" ".join(command.split())[:72]] += 1
        return await orig_many(self, command, args, **kwargs)

    with Stack(admin_dsn, embedder="off") as stack:
        stack.cli("tenants", "create", "bench")
        identity = stack.cli("identities", "create", "--tenant", "bench", "--address",
                             "ingest@bench.test")
        os.environ.update(stack.env)
        from shared.config import Settings
        from shared.db import connect
        from shared.ingest.importer import import_paths
        from shared.mail.trust import TrustPolicy
        settings = Settings.from_env()

        async def run() -> tuple[int, float, float, float]:
            conn = await connect(stack.dsn)
            try:
                pid = await conn.fetchval("SELECT pg_backend_pid()")
                backend, ours, workers = _cpu(pid), time.process_time(), _children_cpu()
                conn_cls.execute, conn_cls._execute, conn_cls.executemany = (
                    execute, _execute, executemany)
                try:
                    summary = await import_paths(
                        conn, None, identity, [maildir],
                        trust_policy=TrustPolicy.from_settings(settings),
                        workers=settings.pm_import_workers or os.cpu_count() or 1,
                        batch=settings.pm_import_batch)
                finally:
                    conn_cls.execute, conn_cls._execute, conn_cls.executemany = (
                        orig_execute, orig__execute, orig_many)
                # The pool's processes have exited (import_paths waits for them): their CPU
                # is in this process's children's.
                return (summary.imported + summary.duplicates, _cpu(pid) - backend,
                        time.process_time() - ours, _children_cpu() - workers)
            finally:
                await conn.close()

        n, backend, ours, workers = asyncio.run(run())
    total = sum(counts.values())
    print(f"\nstatements: {total} for {n} messages ({total / n:.2f} a message); CPU a message:"
          f" workers {workers / n * 1000:.2f} ms, importing process {ours / n * 1000:.2f} ms,"
          f" PostgreSQL backend {backend / n * 1000:.2f} ms")
    for query, count in counts.most_common(12):
        print(f"  {count:6d}  {query}")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=2000,
                        help="first N messages of the corpus (0: all 6,046)")
    parser.add_argument("--import-arg", action="append", default=[],
                        help="extra argument for pylota import (repeatable)")
    parser.add_argument("--statements", action="store_true",
                        help="also count PostgreSQL statements and CPU per message (in process)")
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
    if args.statements:
        statements(args.admin_dsn, maildir)


if __name__ == "__main__":
    main()
