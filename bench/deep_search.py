"""Score mail_deep_search's agent on the QA kit's dev items, by the rule of ``qa/README.md``.

    python -m bench.deep_search [--kit ../shared] [--database NAME] [--verbose]

Creates a database on the PostgreSQL of ``--admin-dsn`` and drops it at the end (or uses and
keeps ``--database``, importing only when it has no identities), imports both kit mailboxes (``notmuch-lkml``, ``notmuch-default``) into
one identity each with ``shared.ingest.importer.import_paths`` (what ``pylota import`` runs),
embeds them with the real ONNX model (``embed_pending`` with ``load_embedder("onnx", 2)``), then
asks each item of ``qa/dev.jsonl`` of its mailbox through ``shared.deepsearch.deep_search`` with
the default budgets (6 steps, 8 seconds) and the built-in backend, as the worker job runs it.

Scoring (``qa/README.md``): cited ``msg_`` ids are mapped to their RFC 5322 Message-IDs; an
answerable item is correct when the status is ``answered``, the answer matches one of its
``answer_patterns`` and one cited id is in ``evidence``; an unanswerable item when the status is
``insufficient_evidence``. Citation precision (micro) counts, over answered items, the cited ids
in ``evidence`` or ``also_supports`` (none for an unanswerable item). Seconds are wall time of
each call. The embedding and ranking threshold constants were set on these dev items only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import asyncpg

from bench.stack import ROOT, percentile
from shared.db import connect, migrate, open_database
from shared.deepsearch import BuiltinBackend, DeepSearchRequest, deep_search
from shared.embeddings.embedder import load_embedder
from shared.embeddings.store import embed_pending
from shared.ingest.importer import import_paths
from shared.search.semantic import SemanticEngine
from shared.tenancy.store import create_identity, create_tenant, list_identities

MAILBOXES = ("notmuch-lkml", "notmuch-default")


def correct(item: dict[str, Any], status: str, answer: str, cited: list[str]) -> bool:
    """The kit's rule (qa/README.md, "Scoring")."""
    if item["kind"] == "unanswerable":
        return status == "insufficient_evidence"
    return (status == "answered"
            and any(re.search(p, answer or "", re.I) for p in item["answer_patterns"])
            and bool(set(cited) & set(item["evidence"])))


async def _prepare(admin_dsn: str, database: str | None, kit: Path) -> tuple[str, dict[str, str]]:
    name = database or f"pylota_deep_{int(time.time())}"
    dsn = admin_dsn.rsplit("/", 1)[0] + "/" + name
    admin = await asyncpg.connect(admin_dsn)
    try:
        if not await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    conn = await connect(dsn)
    try:
        await migrate(conn)
        known = await list_identities(conn, tenant_ids=None, identity_id=None, status=None,
                                      purpose=None, after_id=None, limit=10)
        boxes = {i.addresses[0].split("@")[0]: i.id for i in known}
        if not boxes:
            tenant = await create_tenant(conn, "qa")
            for box in MAILBOXES:
                identity = await create_identity(conn, tenant.id, f"{box}@qa.example")
                summary = await import_paths(conn, None, identity.id,
                                             [kit / "corpus/mailboxes" / box / "maildir"])
                print(f"imported {box}: {summary.imported} messages, "
                      f"{summary.duplicates} duplicates, {len(summary.failed)} failed")
                boxes[box] = identity.id
    finally:
        await conn.close()
    pool = await open_database(dsn, size=4, acquire_seconds=10)
    try:
        embedder = load_embedder("onnx", 2)
        assert embedder is not None
        started = time.monotonic()
        done = await embed_pending(pool, embedder)
        if done:
            print(f"embedded {done} messages in {time.monotonic() - started:.0f} s")
    finally:
        await pool.close()
    return dsn, boxes


async def _run(args: argparse.Namespace) -> None:
    items = [json.loads(line) for line in
             (args.kit / "qa/dev.jsonl").read_text().splitlines() if line.strip()]
    if args.only:
        items = [i for i in items if i["id"] in args.only]
    dsn, boxes = await _prepare(args.admin_dsn, args.database, args.kit)
    pool = await open_database(dsn, size=4, acquire_seconds=10)
    engine = SemanticEngine("onnx", 2)
    backend = BuiltinBackend()
    rows: list[dict[str, Any]] = []
    try:
        async with pool.acquire() as conn:
            header = {r["id"]: r["rfc_message_id"] for r in await conn.fetch(
                "SELECT id, rfc_message_id FROM messages")}
            await engine.ready(conn)  # load the model before timing, as a warm worker has it

        async def progress(step: int, total: int, message: str) -> None:
            if args.verbose:
                print(f"    [{step}/{total}] {message}")

        async def checkpoint() -> None:
            return None

        for item in items:
            request = DeepSearchRequest(question=item["question"],
                                        identity_ids=[boxes[item["mailbox"]]], time_zone="UTC")
            began = time.monotonic()
            result = await deep_search(pool, engine, request, backend=backend,
                                       progress=progress, checkpoint=checkpoint)
            seconds = time.monotonic() - began
            cited = [header.get(e.message_id, "?") for e in result.evidence]
            support = set(item["evidence"]) | set(item["also_supports"])
            good = correct(item, result.status, result.answer, cited)
            rows.append({"item": item, "status": result.status, "correct": good,
                         "cited": cited, "supported": [c in support for c in cited],
                         "seconds": seconds})
            if args.verbose or not good:
                print(f"{item['id']} {item['kind']:12} hops={item['hops']} {result.status:22} "
                      f"{'ok ' if good else 'BAD'} {seconds:.2f}s  {item['question']}")
                print(f"    answer: {result.answer[:600]}")
                print(f"    cited: {[(c, s) for c, s in zip(cited, rows[-1]['supported'])]}")
                for step in result.trace:
                    print(f"    {step.step} {step.action} {step.seconds:.2f}s {step.hits} {step.detail}")
    finally:
        await pool.close()
        if not args.database:
            admin = await asyncpg.connect(args.admin_dsn)
            try:
                await admin.execute(f'DROP DATABASE IF EXISTS "{dsn.rsplit("/", 1)[1]}" WITH (FORCE)')
            finally:
                await admin.close()
    _report(rows)


def _report(rows: list[dict[str, Any]]) -> None:
    def share(selected: list[dict[str, Any]]) -> str:
        if not selected:
            return "n/a"
        return f"{sum(r['correct'] for r in selected) / len(selected):.3f} ({sum(r['correct'] for r in selected)}/{len(selected)})"

    answerable = [r for r in rows if r["item"]["kind"] != "unanswerable"]
    unanswerable = [r for r in rows if r["item"]["kind"] == "unanswerable"]
    flags = [s for r in rows if r["status"] == "answered" for s in r["supported"]]
    per_item = [sum(r["supported"]) / len(r["supported"]) for r in rows
                if r["status"] == "answered" and r["supported"]]
    seconds = [r["seconds"] for r in rows]
    print()
    print("| measure | value |")
    print("| --- | --- |")
    print(f"| accuracy, all items | {share(rows)} |")
    print(f"| accuracy, answerable | {share(answerable)} |")
    print(f"| accuracy, one-hop | {share([r for r in answerable if r['item']['hops'] == 1])} |")
    print(f"| accuracy, multi-hop | {share([r for r in answerable if r['item']['hops'] > 1])} |")
    print(f"| correctness, unanswerable | {share(unanswerable)} |")
    print(f"| citation precision, micro | "
          f"{sum(flags) / len(flags) if flags else 0:.3f} ({sum(flags)}/{len(flags)}) |")
    print(f"| citation precision, macro | {sum(per_item) / len(per_item) if per_item else 0:.3f} |")
    print(f"| seconds p50 / p95 | {percentile(seconds, 50):.2f} / {percentile(seconds, 95):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kit", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--admin-dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--database", help="Use (and keep) this database; import if empty.")
    parser.add_argument("--only", nargs="*", help="Item ids to run (default: all).")
    parser.add_argument("--verbose", action="store_true", help="Print every item and step.")
    asyncio.run(_run(parser.parse_args()))


if __name__ == "__main__":
    main()
