"""Server-side latency of mail_search at 100,000 messages, through the real MCP front.

    python -m bench.latency [--messages 100000] [--rounds 5] [--kit ../shared]

Builds a fresh database with the ``pylota`` CLI: a synthetic mailbox (``bench.synthetic``) and the
real SpamAssassin public corpus (``--mboxo``: those mbox files do not escape ``>From``), each in its
own identity. Vectors come from the hash embedder (``PM_EMBEDDER=hash``), since embedding 100,000
messages with the ONNX model takes about 1.5 hours on 2 cores (STACK.md section 1.1); the index,
storage and fusion work is the same, and the ONNX query embedding it leaves out is measured apart
and printed. Then every query of :data:`QUERIES` runs ``--rounds`` times in each mode, and the
front's own ``duration_ms`` (its ``tool_call`` log lines) gives p50 and p99 per mode and mailbox.
Targets (issue 4, 2 cores, 100k messages): keyword p99 <= 150 ms, hybrid p99 <= 300 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import asyncpg

from bench.stack import ROOT, Stack, percentile
from bench.synthetic import write_mailbox

#: What agents type: plain words, phrases, operators, references and combinations.
QUERIES = [
    "invoice overdue", "parking fine appeal", "delivery van", "refund", "meeting tomorrow",
    '"payment reminder"', "contract renewal price", "from:@{domain}", "insurance claim damage",
    "warehouse stock report", "has:attachment invoice", "type:pdf", "after:2025-06-01 order",
    "before:2024-06-01 delivery", "newer_than:365d urgent", "ref:{ref}", "quote OR proposal",
    "budget -quarterly", "in:inbound is:unread support", "password login portal",
    "hotel flight travel", "", "status update", "customer feedback review",
    "garage repair vehicle", "schedule friday", "question access website", "signed agreement",
    "damage photo", "booking confirmed", "category:billing overdue", "category:claims",
]
MODES = ("keyword", "semantic", "hybrid")


def _onnx_query_ms() -> float | None:
    try:
        from shared.embeddings.embedder import EmbedderUnavailable, load_embedder
        model = load_embedder("onnx")
    except EmbedderUnavailable:
        return None
    times = []
    for query in QUERIES * 3:
        started = time.perf_counter()
        model.embed([query or "x"])
        times.append((time.perf_counter() - started) * 1000)
    return percentile(times, 50)


def _filled(admin_dsn: str, database: str) -> bool:
    """Whether ``database`` exists and holds the synthetic mailbox of an earlier run."""
    async def check() -> bool:
        try:
            conn = await asyncpg.connect(admin_dsn.rsplit("/", 1)[0] + "/" + database)
        except (OSError, asyncpg.PostgresError):
            return False
        try:
            return bool(await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM identity_addresses"
                " WHERE address = 'synthetic@bench.example')"))
        except asyncpg.UndefinedTableError:
            return False
        finally:
            await conn.close()
    return asyncio.run(check())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kit", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--admin-dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--database", help="Keep the mailboxes in this database: the first run "
                        "fills it, later runs reuse it instead of generating and importing again.")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pylota-synthetic-"))
    filled = bool(args.database) and _filled(args.admin_dsn, args.database)
    if not filled:
        started = time.monotonic()
        threads = write_mailbox(work / "synthetic.mbox", args.messages)
        size = (work / "synthetic.mbox").stat().st_size / 2**20
        print(f"generated {args.messages} messages in {threads} threads ({size:.0f} MiB)"
              f" in {time.monotonic() - started:.0f} s")
    spam = sorted((args.kit / "corpus/mailboxes/spamassassin-public").glob("*.mbox.gz"))
    with Stack(args.admin_dsn, embedder="hash", database=args.database) as stack:
        boxes = {}
        for name, paths in (("synthetic", [] if filled else [work / "synthetic.mbox"]),
                            ("spamassassin", spam)):
            started = time.monotonic()
            boxes[name] = stack.mailbox("bench", f"{name}@bench.example", *paths, mboxo=True)
            took = time.monotonic() - started
            imported = boxes[name]["import"]["imported"]
            print(f"imported {name}: {imported} messages in {took:.0f} s ({imported / took:.0f}/s)")
        stack.start()
        print(f"embedded (hash) in {stack.wait_embedded():.0f} s")
        stack.sql("VACUUM ANALYZE")  # the steady state autovacuum reaches after a bulk import
        rows: list[tuple[str, str, list[float]]] = []
        timed: list[tuple[float, tuple[str, str, str]]] = []
        for name, box in boxes.items():
            domain = stack.sql("SELECT split_part(from_address, '@', 2) AS d FROM messages"
                               " WHERE identity_id = $1 AND direction = 'inbound'"
                               " GROUP BY 1 ORDER BY count(*) DESC LIMIT 1", box["identity_id"])[0]["d"]
            ref = (stack.sql("SELECT value FROM message_refs WHERE identity_id = $1 LIMIT 1",
                             box["identity_id"]) or [{"value": "AB12CDE"}])[0]["value"]
            queries = [q.format(domain=domain, ref=ref) for q in QUERIES]
            for query in queries:  # warm the caches (numpy vectors, PostgreSQL buffers) once
                stack.call(box["token"], "mail_search", {"q": query, "mode": "hybrid"})
            for mode in MODES:
                before = len(stack.durations("mail_search"))
                for _ in range(args.rounds):
                    for query in queries:
                        stack.call(box["token"], "mail_search", {"q": query, "mode": mode})
                durations = stack.durations("mail_search")[before:]
                rows.append((name, mode, durations))
                timed += zip(durations, [(name, mode, q) for _ in range(args.rounds) for q in queries])
    print()
    print("| mailbox | mode | calls | p50 ms | p99 ms | max ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, mode, durations in rows:
        print(f"| {name} | {mode} | {len(durations)} | {percentile(durations, 50):.1f} | "
              f"{percentile(durations, 99):.1f} | {max(durations):.1f} |")
    print("\nslowest calls:")
    for took, (name, mode, query) in sorted(timed, reverse=True)[:8]:
        print(f"  {took:6.1f} ms  {name} {mode} {query!r}")
    onnx = _onnx_query_ms()
    if onnx is not None:
        print(f"\nONNX query embedding (not in the hash-vector numbers above): p50 {onnx:.1f} ms")


if __name__ == "__main__":
    main()
