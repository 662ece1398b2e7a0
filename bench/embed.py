"""Messages embedded per second by one batch worker (``pylota worker --batch``, ONNX model).

    python -m bench.embed [--messages 600] [--rounds 2]

Imports the first ``--messages`` SpamAssassin messages into a throwaway database
(``bench.stack``; the import queues each one for embedding), then per round queues them all
again (``pylota embeddings backfill`` after deleting their vectors), starts one batch worker and
times the queue from its first embedded batch to empty: the worker's model load is left out,
the database work of claiming and saving batches is in. Prints messages per second per round.
``--in-process`` instead times ``shared.embeddings.store.embed_pending`` in this process, the
function the worker runs, without Redis or arq.

Target (issue 14): >= 2x the rate of main before the change (2026-12-02: see README).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from bench.peers import KIT, machine, sa_maildir
from bench.stack import Stack


def _queued(stack: Stack) -> int:
    return stack.sql("SELECT count(*) AS n FROM embedding_queue")[0]["n"]


def _requeue(stack: Stack) -> int:
    stack.sql("DELETE FROM message_embeddings")
    stack.cli("embeddings", "backfill")
    return _queued(stack)


def worker_rate(stack: Stack, timeout: float) -> tuple[float, int]:
    """Start one batch worker, time its drain of the queue, stop it: (messages/s, messages)."""
    total = _queued(stack)
    stack.start(batch_worker=True)
    try:
        deadline = time.monotonic() + timeout
        while (left := _queued(stack)) == total:  # the model loads, then the first batch
            if time.monotonic() > deadline:
                raise TimeoutError("the batch worker embedded nothing")
            time.sleep(0.05)
        started, first_left = time.monotonic(), left
        while left:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{left} messages still queued")
            time.sleep(0.05)
            left = _queued(stack)
        took = time.monotonic() - started
    finally:
        for process in stack.processes:
            process.terminate()
        for process in stack.processes:
            process.wait(timeout=30)
        stack.processes.clear()
    return first_left / took, first_left


def in_process_rate(stack: Stack) -> tuple[float, int]:
    """``embed_pending`` in this process with the configured batch: (messages/s, messages)."""
    from shared.config import Settings
    from shared.db import open_database
    from shared.embeddings.embedder import load_embedder

    async def run() -> tuple[float, int]:
        settings = Settings.from_env()
        embedder = load_embedder("onnx")
        embedder.embed(["warm up"])
        db = await open_database(stack.dsn, size=2, acquire_seconds=10)
        try:
            from shared.embeddings.store import embed_pending
            started = time.perf_counter()
            done = await embed_pending(db, embedder, batch=settings.pm_embed_batch)
            return done / (time.perf_counter() - started), done
        finally:
            await db.close()
    return asyncio.run(run())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--in-process", action="store_true",
                        help="time embed_pending here instead of a pylota worker --batch")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--kit", type=Path, default=KIT)
    parser.add_argument("--admin-dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args(argv)
    print(f"bench.embed: {machine()}", flush=True)
    maildir = sa_maildir(args.kit, args.messages)
    rates = []
    with Stack(args.admin_dsn, embedder="onnx") as stack:
        stack.mailbox("bench", "embed@bench.test", maildir)
        print("\n| round | messages | seconds | messages/s |")
        print("| --- | --- | --- | --- |", flush=True)
        for r in range(1, args.rounds + 1):
            if r > 1:
                _requeue(stack)
            rate, count = in_process_rate(stack) if args.in_process else \
                worker_rate(stack, args.timeout)
            rates.append(rate)
            print(f"| {r} | {count} | {count / rate:.1f} | {rate:.1f} |", flush=True)
    print(f"\nmedian {statistics.median(rates):.1f} messages/s; load average at the end: "
          f"{machine()}")


if __name__ == "__main__":
    main()
