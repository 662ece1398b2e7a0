"""``pylota import``: bring .eml files, mbox files and maildir folders into one identity.

Three stages overlap (issue 14: parsing on one core while the other idled, and 26 statements and
a commit a message, made the import 5x slower than ``notmuch new``):

1. The main process reads the messages off disk in order (``shared.mail.sources``) and hands them
   in chunks of :data:`CHUNK_MESSAGES` to ``workers`` processes, which parse, strip quotes, draft
   triage and extract references (``shared.ingest.prepare.prepare_all``); at most
   :data:`CHUNKS_IN_FLIGHT` chunks per worker, and :data:`BYTES_IN_FLIGHT`, wait or run at once.
2. Results come back in the order read and gather into batches of ``batch`` messages (or
   :data:`BATCH_BYTES` of raw mail), each stored in one transaction
   (``shared.ingest.batch.ingest_batch``): a batch threads, de-duplicates, judges and triages
   exactly as its messages would one at a time.
3. While a batch is stored, the workers prepare the next ones.

A batch the database refuses is rolled back and its messages stored one at a time
(``shared.ingest.pipeline.ingest_raw``), so one bad message never costs the others; a message
that fails then too is reported, and the import goes on. An interrupted import keeps the batches
it committed, and running it again only counts duplicates. ``workers=None`` prepares in the main
process (no pool); if a worker dies, the rest of the import is prepared there too.

Workers are started with ``fork`` when the import begins: they inherit the parse and triage
modules the main process has imported (a spawned worker would spend half a second importing them
again) and nothing runs in them but :func:`~shared.ingest.prepare.prepare_all`.

The import's commits do not wait for their WAL flush (``synchronous_commit = off`` for the
session while it runs): waiting for one fsync per commit was a third of an import's time
(issue 14). Nothing can be corrupted or half-stored that way; a PostgreSQL crash during an import
may lose its last fraction of a second of batches, which running it again stores (it counts
what it had already as duplicates), as it would for an import interrupted at that point.

The tenant's ``custom:`` reference patterns are read once, when the import starts.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import asyncpg
import msgspec
from redis.asyncio import Redis

from shared.config import Settings
from shared.ingest.batch import ingest_batch
from shared.ingest.pipeline import ingest_raw
from shared.ingest.prepare import Prepared, prepare_all
from shared.logs import get_logger
from shared.mail.patterns import identity_patterns
from shared.mail.sources import SourceItem, iter_sources
from shared.mail.store import StoreOutcome
from shared.mail.trust import TrustPolicy

__all__ = ["ImportSummary", "Report", "import_paths", "DEFAULT_BATCH", "CHUNK_MESSAGES",
           "CHUNKS_IN_FLIGHT", "BYTES_IN_FLIGHT", "BATCH_BYTES"]

log = get_logger("shared.ingest")

#: Messages stored per transaction unless the caller says otherwise: ``PM_IMPORT_BATCH``'s default.
DEFAULT_BATCH = Settings().pm_import_batch
#: Most bytes of raw mail in one batch: a batch of large messages commits sooner.
BATCH_BYTES = 32 * 1024 * 1024
#: Messages a worker prepares per task: enough to make the hand-over cheap, few enough to keep
#: every worker busy to the end.
CHUNK_MESSAGES = 16
#: Chunks per worker handed out ahead of the store (queued or running).
CHUNKS_IN_FLIGHT = 4
#: Most bytes of raw mail handed out ahead of the store (one chunk always goes, however large).
BYTES_IN_FLIGHT = 64 * 1024 * 1024


class Report(msgspec.Struct, frozen=True):
    """Where a message came from (``file`` or ``file#n``) and what went wrong with it."""

    origin: str
    reason: str


class ImportSummary(msgspec.Struct, kw_only=True):
    """One import: counts, files or messages not stored (``failed``), and messages stored
    although they parsed imperfectly (``with_defects``, with their first defect)."""

    imported: int = 0
    duplicates: int = 0
    failed: list[Report] = []
    with_defects: list[Report] = []


class _Entry(msgspec.Struct):
    """One item read, on its way: its prepared form, or why it is not stored."""

    item: SourceItem
    prepared: Prepared | None = None
    problem: str | None = None


async def import_paths(conn: asyncpg.Connection, redis: Redis | None, identity_id: str,
                       paths: Iterable[Path], *, mboxrd: bool = True,
                       on_message: Callable[[], None] | None = None,
                       trust_policy: TrustPolicy = TrustPolicy(),
                       namespace: str | None = None, workers: int | None = None,
                       batch: int = DEFAULT_BATCH) -> ImportSummary:
    """Import every message under ``paths`` into ``identity_id`` (module docstring).

    Args:
        mboxrd: unescape ``>From `` lines in mbox bodies (mboxrd); False reads them as is.
        on_message: called once per message read, when it is stored, counted as a duplicate or
            reported, for a progress display.
        trust_policy: what ingest believes and verifies (``shared.mail.trust``).
        namespace: the deployment's ``PM_NAMESPACE``, to wake the batch workers' attachment
            text extraction as messages with attachments arrive (``shared.ingest.pipeline``).
        workers: processes that prepare messages (``PM_IMPORT_WORKERS``); None prepares them
            in this process.
        batch: messages stored per transaction (``PM_IMPORT_BATCH``), at least 1.
    """
    await conn.execute("SET synchronous_commit = off")
    pool = None if workers is None else ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("fork"))
    try:
        importer = _Importer(conn, redis, identity_id, pool, on_message=on_message,
                             trust_policy=trust_policy, namespace=namespace,
                             batch=max(1, batch), workers=workers or 1)
        summary = await importer.run(iter_sources(list(paths), mboxrd=mboxrd))
        await _refresh_statistics(conn, summary.imported)
        return summary
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if not conn.is_closed():
            await conn.execute("RESET synchronous_commit")


#: The tables an import fills that searches and listings read.
_LOADED_TABLES = ("messages", "message_triage", "message_refs", "attachments", "threads",
                  "thread_refs", "message_trust", "contacts")


async def _refresh_statistics(conn: asyncpg.Connection, imported: int) -> None:
    """ANALYZE what a bulk load filled (PostgreSQL's "Populating a Database", 14.4.8), when it
    changed as much as autovacuum's own analyze threshold asks for (50 rows and 10 %): with the
    statistics of an empty table the planner read 6,046 new messages in a nested loop, and
    ``-category:spam`` took 0.7-0.9 s instead of 0.02 s until autovacuum came round (minutes
    later, or never where it is off). About 0.5 s for 7,000 messages."""
    if imported < 50:
        return
    reltuples = await conn.fetchval("SELECT reltuples FROM pg_class"
                                    " WHERE oid = 'messages'::regclass")
    if reltuples < 0 or imported >= 0.1 * reltuples:
        await conn.execute(f"ANALYZE {', '.join(_LOADED_TABLES)}")


class _Importer:
    def __init__(self, conn: asyncpg.Connection, redis: Redis | None, identity_id: str,
                 pool: ProcessPoolExecutor | None, *, on_message: Callable[[], None] | None,
                 trust_policy: TrustPolicy, namespace: str | None, batch: int,
                 workers: int) -> None:
        self.conn, self.redis, self.identity_id, self.pool = conn, redis, identity_id, pool
        self.on_message = on_message
        self.trust_policy, self.namespace = trust_policy, namespace
        self.batch, self.workers = batch, workers
        self.summary = ImportSummary()
        self.patterns: dict[str, str] = {}

    async def run(self, items: Iterator[SourceItem]) -> ImportSummary:
        self.patterns = await identity_patterns(self.conn, self.identity_id)
        in_flight: deque[tuple[list[SourceItem], Future | None, int]] = deque()
        pending: list[_Entry] = []
        pending_bytes = 0
        exhausted = False
        storing: asyncio.Task | None = None
        try:
            while True:
                while not exhausted and len(in_flight) < CHUNKS_IN_FLIGHT * self.workers and (
                        not in_flight or sum(size for *_, size in in_flight) < BYTES_IN_FLIGHT):
                    chunk = _take(items, CHUNK_MESSAGES)
                    exhausted = len(chunk) < CHUNK_MESSAGES
                    if chunk:
                        in_flight.append(self._submit(chunk))
                if not in_flight:
                    break
                chunk, future, _ = in_flight.popleft()
                for entry in await self._prepared(chunk, future):
                    pending.append(entry)
                    pending_bytes += len(entry.item.raw or b"")
                    if len(pending) >= self.batch or pending_bytes >= BATCH_BYTES:
                        # One batch is stored at a time, in order; while it is, the loop goes
                        # on handing messages to the workers and gathering the next batch.
                        if storing is not None:
                            await storing
                        storing = asyncio.create_task(self._store(pending))
                        pending, pending_bytes = [], 0
            if storing is not None:
                await storing
            await self._store(pending)
        finally:
            if storing is not None and not storing.done():
                storing.cancel()
                await asyncio.gather(storing, return_exceptions=True)
        return self.summary

    def _submit(self, chunk: list[SourceItem]) -> tuple[list[SourceItem], Future | None, int]:
        raws = [i.raw for i in chunk if _usable(i)]
        size = sum(map(len, raws))
        if self.pool is None or not raws:
            return chunk, None, size
        try:
            return chunk, self.pool.submit(_prepare_encoded, raws, self.patterns), size
        except BrokenProcessPool:
            return chunk, None, size

    async def _prepared(self, chunk: list[SourceItem], future: Future | None) -> list[_Entry]:
        raws = [i.raw for i in chunk if _usable(i)]
        results: list[Prepared | None]
        if future is None:
            results = prepare_all(raws, self.patterns) if raws else []
        else:
            try:
                results = _RESULTS.decode(await asyncio.wrap_future(future))
            except BrokenProcessPool:
                # A worker died (out of memory, a crash in a parser's C code): prepare the rest
                # here, as an import without workers would.
                log.warning("import_workers_lost")
                self.pool = None
                results = prepare_all(raws, self.patterns)
        prepared = iter(results)
        entries = []
        for item in chunk:
            if item.raw is None:
                entries.append(_Entry(item, problem=item.problem or "unreadable"))
            elif not item.raw.strip():
                entries.append(_Entry(item, problem="empty message"))
            else:
                entries.append(_Entry(item, prepared=next(prepared)))
        return entries

    async def _store(self, entries: list[_Entry]) -> None:
        ready = [e for e in entries if e.prepared is not None]
        stored: dict[int, StoreOutcome] = {}
        if ready:
            try:
                outcomes = await ingest_batch(
                    self.conn, self.redis, self.identity_id,
                    [(e.item.raw, e.prepared) for e in ready], trust_policy=self.trust_policy,
                    namespace=self.namespace)
                stored = {id(e): o for e, o in zip(ready, outcomes)}
            except asyncpg.PostgresError as exc:
                log.warning("import_batch_refused", messages=len(ready),
                            error=type(exc).__name__)
        for entry in entries:
            if entry.problem is not None:
                self.summary.failed.append(Report(entry.item.origin, entry.problem))
            elif id(entry) in stored:
                self._count(entry, stored[id(entry)].duplicate, entry.prepared.parsed.defects)
            else:
                await self._one(entry)
            if self.on_message is not None:
                self.on_message()

    async def _one(self, entry: _Entry) -> None:
        """One message the one-at-a-time way (its batch was refused, or it could not be
        prepared)."""
        try:
            outcome, defects = await ingest_raw(
                self.conn, self.redis, self.identity_id, entry.item.raw,
                trust_policy=self.trust_policy, namespace=self.namespace)
        except asyncpg.PostgresError as exc:
            # The server refused this message in a way ingest does not foresee; the rest
            # of the import goes on. A lost connection is not a PostgresError and stops it.
            self.summary.failed.append(Report(entry.item.origin,
                                              f"storage failed: {type(exc).__name__}"))
            return
        self._count(entry, outcome.duplicate, defects)

    def _count(self, entry: _Entry, duplicate: bool, defects: list[str]) -> None:
        if duplicate:
            self.summary.duplicates += 1
            return
        self.summary.imported += 1
        if defects:
            self.summary.with_defects.append(Report(entry.item.origin, defects[0]))


#: A chunk's results cross from the workers as MessagePack (msgspec): 60 % of pickle's cost.
_RESULTS = msgspec.msgpack.Decoder(list[Prepared | None])
_ENCODER = msgspec.msgpack.Encoder()


def _prepare_encoded(raws: list[bytes], patterns: dict[str, str]) -> bytes:
    """:func:`~shared.ingest.prepare.prepare_all` on a worker, its results encoded."""
    return _ENCODER.encode(prepare_all(raws, patterns))


def _usable(item: SourceItem) -> bool:
    return item.raw is not None and bool(item.raw.strip())


def _take(items: Iterator[SourceItem], n: int) -> list[SourceItem]:
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) == n:
            break
    return chunk
