"""``pylota import``: bring .eml files, mbox files and maildir folders into one identity.

Each message is ingested in its own transaction, so one bad message never aborts the import and an
interrupted import keeps what it stored; running it again only counts duplicates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import asyncpg
import msgspec
from redis.asyncio import Redis

from shared.ingest.pipeline import ingest_raw
from shared.mail.sources import iter_sources
from shared.mail.trust import TrustPolicy

__all__ = ["ImportSummary", "Report", "import_paths"]


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


async def import_paths(conn: asyncpg.Connection, redis: Redis | None, identity_id: str,
                       paths: Iterable[Path], *, mboxrd: bool = True,
                       on_message: Callable[[], None] | None = None,
                       trust_policy: TrustPolicy = TrustPolicy(),
                       namespace: str | None = None) -> ImportSummary:
    """Import every message under ``paths`` into ``identity_id``.

    Args:
        mboxrd: unescape ``>From `` lines in mbox bodies (mboxrd); False reads them as is.
        on_message: called once per message read (stored or not), for a progress display.
        trust_policy: what ingest believes and verifies (``shared.mail.trust``).
        namespace: the deployment's ``PM_NAMESPACE``, to wake the batch workers' attachment
            text extraction as messages with attachments arrive (``shared.ingest.pipeline``).
    """
    summary = ImportSummary()
    for item in iter_sources(list(paths), mboxrd=mboxrd):
        if on_message is not None:
            on_message()
        if item.raw is None:
            summary.failed.append(Report(item.origin, item.problem or "unreadable"))
            continue
        if not item.raw.strip():
            summary.failed.append(Report(item.origin, "empty message"))
            continue
        try:
            outcome, defects = await ingest_raw(conn, redis, identity_id, item.raw,
                                                 trust_policy=trust_policy, namespace=namespace)
        except asyncpg.PostgresError as exc:
            # The server refused this message in a way ingest does not foresee; the rest
            # of the import goes on. A lost connection is not a PostgresError and stops it.
            summary.failed.append(Report(item.origin, f"storage failed: {type(exc).__name__}"))
            continue
        if outcome.duplicate:
            summary.duplicates += 1
        else:
            summary.imported += 1
            if defects:
                summary.with_defects.append(Report(item.origin, defects[0]))
    return summary
