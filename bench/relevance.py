"""Score mail_search against the QA kit's relevance judgments through the real MCP front.

    python -m bench.relevance [--kit ../shared] [--admin-dsn postgresql://postgres@127.0.0.1:5432/postgres]

Imports the two kit mailboxes (``notmuch-lkml``, ``notmuch-default``) with ``pylota import``
into a fresh database, starts ``pylota serve`` and ``pylota worker --batch`` (ONNX embeddings),
waits until every message has a vector, then runs each judgment of ``qa/search-dev.jsonl`` in
the three modes (``limit`` 10, then 25) and prints recall@10, MRR@10 and recall@25 per judgment
kind and mode. Judged messages are matched by Message-ID, as the kit's README says. Targets
(issue 4): keyword judgments in keyword mode recall@10 >= 0.95, semantic judgments in semantic
mode >= 0.8.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.stack import ROOT, Stack

MODES = ("keyword", "semantic", "hybrid")
MAILBOXES = ("notmuch-lkml", "notmuch-default")


def _score(relevant: set[str], ranked: list[str]) -> tuple[float, float, float]:
    top10 = ranked[:10]
    recall10 = len(relevant & set(top10)) / len(relevant)
    recall25 = len(relevant & set(ranked[:25])) / len(relevant)
    mrr = next((1 / (i + 1) for i, mid in enumerate(top10) if mid in relevant), 0.0)
    return recall10, mrr, recall25


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kit", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--admin-dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--embedder", default="onnx", choices=("onnx", "hash"))
    parser.add_argument("--verbose", action="store_true", help="Print each judgment's scores.")
    args = parser.parse_args()
    judgments = [json.loads(line) for line in
                 (args.kit / "qa/search-dev.jsonl").read_text().splitlines() if line.strip()]
    with Stack(args.admin_dsn, embedder=args.embedder) as stack:
        boxes = {name: stack.mailbox("qa", f"{name}@qa.example",
                                     args.kit / "corpus/mailboxes" / name / "maildir")
                 for name in MAILBOXES}
        started = time.monotonic()
        stack.start()
        waited = stack.wait_embedded()
        print(f"imported {sum(b['import']['imported'] for b in boxes.values())} messages; "
              f"embedded in {waited:.0f} s ({time.monotonic() - started:.0f} s with start-up)")
        header = {r["id"]: r["rfc_message_id"] for r in stack.sql(
            "SELECT id, rfc_message_id FROM messages")}
        table: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        for item in judgments:
            box = boxes[item["mailbox"]]
            relevant = set(item["relevant"])
            for mode in MODES:
                result = stack.call(box["token"], "mail_search",
                                    {"q": item["query"], "mode": mode, "limit": 25})
                ranked = [header[h["message_id"]] for h in result["hits"]]
                if len(ranked) == 25 and result["next_cursor"] is None:
                    raise RuntimeError("a full page without a cursor")
                scores = _score(relevant, ranked)
                table.setdefault((item["mode"], mode), []).append(scores)
                if args.verbose:
                    print(f"  {item['id']} {item['mode']:8} {mode:8} recall@10 {scores[0]:.2f}"
                          f" mrr {scores[1]:.2f} degraded={result['degraded']} {item['query']!r}")
    print()
    print("| judgments | n | mode | recall@10 | MRR@10 | recall@25 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (kind, mode), rows in sorted(table.items()):
        n = len(rows)
        r10, mrr, r25 = (sum(r[i] for r in rows) / n for i in range(3))
        print(f"| {kind} | {n} | {mode} | {r10:.3f} | {mrr:.3f} | {r25:.3f} |")


if __name__ == "__main__":
    main()
