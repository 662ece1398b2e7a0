"""``pylota import`` and ``pylota embeddings``: bringing mail in, and its vectors.

The import's progress bar is drawn here, from the importer's per-message callback: the domain
(``shared.ingest``) never draws.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import msgspec
from redis.asyncio import Redis
from tqdm import tqdm

from cli.running import run
from shared.config import Settings
from shared.db import connect, open_database
from shared.embeddings.embedder import EmbedderUnavailable, load_embedder
from shared.embeddings.store import embed_pending, enqueue_missing
from shared.errors import ErrorCode, PylotaError
from shared.ingest.importer import ImportSummary, import_paths
from shared.mail.trust import TrustPolicy
from shared.tenancy import store as tenancy

__all__ = ["import_cmd", "embeddings"]


@click.command("import")
@click.option("--identity", required=True, help="Identity id (idn_…) or address to import into.")
@click.option("--mboxo", is_flag=True,
              help="Read mbox files as mboxo: keep '>From ' body lines as they are.")
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.argument("paths", nargs=-1, required=True,
                type=click.Path(exists=True, path_type=Path))
def import_cmd(identity: str, mboxo: bool, no_progress: bool, as_json: bool,
               paths: tuple[Path, ...]) -> None:
    """Import .eml files, mbox files (.mbox, .mbox.gz) and maildir folders, recursively."""
    async def work(settings: Settings) -> ImportSummary:
        conn = await connect(settings.database_url)
        redis = Redis.from_url(settings.redis_url)
        bar = tqdm(unit="msg", desc="importing", file=sys.stderr, disable=no_progress,
                   dynamic_ncols=True)
        try:
            found = await tenancy.resolve_identity(conn, identity)
            return await import_paths(conn, redis, found.id, paths, mboxrd=not mboxo,
                                      on_message=lambda: bar.update(1),
                                      trust_policy=TrustPolicy.from_settings(settings),
                                      namespace=settings.pm_namespace)
        finally:
            bar.close()
            await redis.aclose()
            await conn.close()

    summary = run(work)
    if as_json:
        click.echo(msgspec.json.encode(summary).decode())
        return
    click.echo(f"imported {summary.imported}, duplicates {summary.duplicates}, "
               f"failed {len(summary.failed)}, stored with parse defects "
               f"{len(summary.with_defects)} (listed by --json)")
    for failure in summary.failed:
        click.echo(f"  failed: {failure.origin}: {failure.reason}")


@click.group()
def embeddings() -> None:
    """Embeddings for semantic search (computed by `pylota worker --batch`)."""


@embeddings.command("backfill")
@click.option("--identity", help="Identity id (idn_…) or address; default: every identity.")
@click.option("--now", "inline", is_flag=True,
              help="Embed here and wait, instead of leaving the queue to the batch workers.")
def embeddings_backfill(identity: str | None, inline: bool) -> None:
    """Queue every message without a vector of the configured model (PM_EMBEDDER), e.g. mail
    imported before embeddings existed or before a model change."""
    async def work(settings: Settings) -> str:
        try:
            embedder = load_embedder(settings.pm_embedder, settings.pm_embed_threads)
        except EmbedderUnavailable as exc:
            raise PylotaError(ErrorCode.UNAVAILABLE, f"The embedding model is unavailable: {exc}",
                              fix="Install the packages the README lists, or set PM_EMBEDDER.") from exc
        if embedder is None:
            raise PylotaError(ErrorCode.INVALID_REQUEST, "PM_EMBEDDER is off: nothing to compute.",
                              fix="Set PM_EMBEDDER=onnx.")
        db = await open_database(settings.database_url, size=2,
                                 acquire_seconds=settings.pm_db_acquire_seconds)
        try:
            async with db.acquire() as conn:
                identity_id = (None if identity is None
                               else (await tenancy.resolve_identity(conn, identity)).id)
                queued = await enqueue_missing(conn, embedder.model, identity_id)
            done = await embed_pending(db, embedder, batch=settings.pm_embed_batch) if inline else None
        finally:
            await db.close()
        parts = [f"queued {queued} message(s) for {embedder.model}"]
        if done is not None:
            parts.append(f"embedded {done}")
        return ", ".join(parts)

    click.echo(run(work))
