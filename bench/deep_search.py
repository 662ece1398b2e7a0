"""Score mail_deep_search on the QA kit's dev items through the real front and workers, by the
rule of ``qa/README.md``.

    python -m bench.deep_search [--kit ../shared] [--admin-dsn DSN] [--database NAME]
                                [--only ID …] [--mode legacy|2026-07-28] [--verbose]

Sets up a stack with the ``pylota`` CLI as a user would (``bench.stack``): ``pylota migrate`` on
a new database (or ``--database``, kept, imported only once), a tenant ``qa`` with one identity
per kit mailbox (``notmuch-lkml``, ``notmuch-default``) filled by ``pylota import`` and an
identity key each. It starts ``pylota serve``, ``pylota worker --batch`` (which embeds every
message with the ONNX model) and ``pylota worker`` (which runs deep search, its model warmed at
start), waits until the embedding queue is empty, then asks each item of ``qa/dev.jsonl`` of its
mailbox with the official MCP Python SDK (``mcp``, a test extra: ``pip install -e '.[test]'``),
one call at a time, with the tenant's default budgets (6 steps, 8 seconds) and the built-in
backend, and a progress callback (each call must report one notification per step).

Scoring (``qa/README.md``): cited ``msg_`` ids (the evidence items) are mapped to their RFC 5322
Message-IDs; an answerable item is correct when the status is ``answered``, the answer matches
one of its ``answer_patterns`` and one cited id is in ``evidence``; an unanswerable item when the
status is ``insufficient_evidence``. Citation precision (micro) counts, over answered items, the
cited ids in ``evidence`` or ``also_supports`` (none for an unanswerable item). Seconds are the
client's wall time of each ``tools/call``: front, queue, worker and relay (the agent's own share,
``usage.seconds``, is printed beside them). The load average of the machine is printed before
and after, since the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.stack import ROOT, Stack, percentile

MAILBOXES = ("notmuch-lkml", "notmuch-default")


def correct(item: dict[str, Any], status: str, answer: str, cited: list[str]) -> bool:
    """The kit's rule (qa/README.md, "Scoring")."""
    if item["kind"] == "unanswerable":
        return status == "insufficient_evidence"
    return (status == "answered"
            and any(re.search(p, answer or "", re.I) for p in item["answer_patterns"])
            and bool(set(cited) & set(item["evidence"])))


async def _ask(url: str, token: str, items: list[dict[str, Any]], mode: str
               ) -> list[dict[str, Any]]:
    """Ask ``items`` one at a time over MCP; each answer with its progress and wall seconds."""
    answers = []
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(30, read=60)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            for item in items:
                progress: list[tuple[float, float | None, str | None]] = []

                async def on_progress(value: float, total: float | None,
                                      message: str | None) -> None:
                    progress.append((value, total, message))

                began = time.monotonic()
                result = await client.call_tool("mail_deep_search",
                                                {"question": item["question"]},
                                                progress_callback=on_progress)
                seconds = time.monotonic() - began
                if result.is_error:
                    raise RuntimeError(f"{item['id']}: {result.content[0].text}")
                answers.append({"item": item, "body": result.structured_content,
                                "progress": progress, "seconds": seconds})
    return answers


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (5 min: {five:.1f})"


def _run(args: argparse.Namespace) -> None:
    items = [json.loads(line) for line in
             (args.kit / "qa/dev.jsonl").read_text().splitlines() if line.strip()]
    if args.only:
        items = [i for i in items if i["id"] in args.only]
    rows: list[dict[str, Any]] = []
    with Stack(args.admin_dsn, database=args.database) as stack:
        boxes = {name: stack.mailbox("qa", f"{name}@qa.example",
                                     args.kit / "corpus/mailboxes" / name / "maildir")
                 for name in MAILBOXES}
        for name, box in boxes.items():
            print(f"imported {name}: {box['import'].get('imported', 0)} messages")
        stack.start(interactive_worker=True)
        print(f"embedded in {stack.wait_embedded():.0f} s")
        header = {r["id"]: r["rfc_message_id"] for r in stack.sql(
            "SELECT id, rfc_message_id FROM messages")}
        print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
              f"{os.cpu_count()} cores, load {_load()} before")
        for name in MAILBOXES:
            asked = [i for i in items if i["mailbox"] == name]
            if asked:
                rows += asyncio.run(_ask(stack.url, boxes[name]["token"], asked, args.mode))
        print(f"load {_load()} after")
    for row in rows:
        item, body = row["item"], row["body"]
        cited = [header.get(e["message_id"], "?") for e in body["evidence"]]
        support = set(item["evidence"]) | set(item["also_supports"])
        row.update(status=body["status"], cited=cited, supported=[c in support for c in cited],
                   correct=correct(item, body["status"], body["answer"], cited))
        steps = [t["step"] for t in body["trace"]]
        if [p for p, _, _ in row["progress"]] != steps:
            print(f"{item['id']}: progress {row['progress']} does not match the trace {steps}")
        if args.verbose or not row["correct"]:
            print(f"{item['id']} {item['kind']:12} hops={item['hops']} {body['status']:22} "
                  f"{'ok ' if row['correct'] else 'BAD'} {row['seconds']:.2f}s  "
                  f"{item['question']}")
            print(f"    answer: {body['answer'][:600]}")
            print(f"    cited: {list(zip(cited, row['supported']))}")
            for step in body["trace"]:
                print(f"    {step['step']} {step['action']} {step['seconds']:.2f}s {step['hits']} "
                      f"{step['detail']}")
    _report(rows)


def _report(rows: list[dict[str, Any]]) -> None:
    def share(selected: list[dict[str, Any]]) -> str:
        if not selected:
            return "n/a"
        good = sum(r["correct"] for r in selected)
        return f"{good / len(selected):.3f} ({good}/{len(selected)})"

    answerable = [r for r in rows if r["item"]["kind"] != "unanswerable"]
    unanswerable = [r for r in rows if r["item"]["kind"] == "unanswerable"]
    flags = [s for r in rows if r["status"] == "answered" for s in r["supported"]]
    per_item = [sum(r["supported"]) / len(r["supported"]) for r in rows
                if r["status"] == "answered" and r["supported"]]
    seconds = [r["seconds"] for r in rows]
    agent = [r["body"]["usage"]["seconds"] for r in rows]
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
    print(f"| of which the agent (usage.seconds) p50 / p95 | {percentile(agent, 50):.2f} / "
          f"{percentile(agent, 95):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kit", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--admin-dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--database", help="Use (and keep) this database; import if empty.")
    parser.add_argument("--only", nargs="*", help="Item ids to run (default: all).")
    parser.add_argument("--mode", default="legacy", choices=("legacy", "2026-07-28"),
                        help="MCP era of the SDK client.")
    parser.add_argument("--verbose", action="store_true", help="Print every item and step.")
    _run(parser.parse_args())


if __name__ == "__main__":
    main()
