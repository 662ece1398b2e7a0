"""``pylota import`` and ``pylota embeddings``: bringing mail in, and its vectors.

The import's progress bar is drawn here, from the importer's per-message callback: the domain
(``shared.ingest``) never draws. The import summary ends with how long the batch workers will
take to embed what it queued (``shared.embeddings.store.progress``), and
``pylota embeddings status`` shows that per identity at any time.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
import msgspec
from redis.asyncio import Redis
from tqdm import tqdm

from cli.running import run
from shared.config import Settings
from shared.db import connect, open_database
from shared.embeddings.embedder import EmbedderUnavailable, load_embedder, model_name, onnx_model
from shared.embeddings.quantized import MODEL
from shared.embeddings.store import IdentityProgress, embed_pending, enqueue_missing, progress
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
    """Import .eml files, mbox files (.mbox, .mbx, .mbox.gz) and maildir folders, recursively."""
    async def work(settings: Settings) -> tuple[ImportSummary, str | None]:
        # A PostgreSQL that stops answering without closing the connection (a stalled network)
        # would otherwise hold the import for ever (found by an attack).
        conn = await connect(settings.database_url,
                             command_timeout=settings.pm_db_statement_timeout_seconds or None)
        redis = Redis.from_url(settings.redis_url)
        # disable=None: no bar when stderr is not a terminal (a log file got its \r fragments)
        bar = tqdm(unit="msg", desc="importing", file=sys.stderr, disable=True if no_progress else None,
                   dynamic_ncols=True)
        try:
            found = await tenancy.resolve_identity(conn, identity)
            summary = await import_paths(conn, redis, found.id, paths, mboxrd=not mboxo,
                                         on_message=lambda: bar.update(1),
                                         trust_policy=TrustPolicy.from_settings(settings),
                                         namespace=settings.pm_namespace,
                                         workers=settings.pm_import_workers or os.cpu_count() or 1,
                                         batch=settings.pm_import_batch)
            bar.close()
            model = model_name(settings.pm_embedder)
            embedding = None
            if model is not None and not as_json:
                state = await progress(conn, model, [found.id], batch=settings.pm_embed_batch)
                embedding = _embedding_line(state[0]) if state else None
            return summary, embedding
        finally:
            bar.close()
            await redis.aclose()
            await conn.close()

    summary, embedding = run(work)
    if as_json:
        click.echo(msgspec.json.encode(summary).decode())
    else:
        click.echo(f"imported {summary.imported}, duplicates {summary.duplicates}, "
                   f"failed {len(summary.failed)}, stored with parse defects "
                   f"{len(summary.with_defects)} (listed by --json)")
        for failure in summary.failed:
            click.echo(f"  failed: {failure.origin}: {failure.reason}")
        if embedding:
            click.echo(embedding)
    if not summary.imported and not summary.duplicates:
        if not summary.failed and not as_json:
            click.echo("  no mail found: the paths hold no file (an empty folder or maildir)")
        sys.exit(1)  # nothing of it was mail: a script must see it


def _duration(seconds: float | None) -> str:
    """``seconds`` as a person reads a time left: ``about 4 min``, ``under a minute``."""
    if seconds is None:
        return "unknown"
    if seconds < 60:
        return "under a minute"
    if seconds < 5400:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds / 3600:.1f} h"


def _rate(p: IdentityProgress) -> str:
    return "-" if p.per_second is None else f"{p.per_second:g} msg/s"


def _embedding_line(p: IdentityProgress) -> str:
    """The import summary's last line: what embedding still has to do for the identity."""
    if not p.queued:
        return f"embedding: {p.embedded} of {p.total} message(s) searchable by meaning"
    pace = (f"at the measured {_rate(p)}" if p.per_second is not None
            else "at a batch worker's usual pace (none has embedded recently)")
    # The identity's whole backlog, this import's messages and any earlier ones still waiting.
    return (f"embedding: {p.queued} of the identity's {p.total} message(s) wait for the batch "
            f"workers (`pylota worker --batch`), {_duration(p.seconds_left)} {pace}; see "
            "`pylota embeddings status`")


@click.group()
def embeddings() -> None:
    """Embeddings for semantic search (computed by `pylota worker --batch`)."""


@embeddings.command("status")
@click.option("--identity", help="Identity id (idn_…) or address; default: every identity with mail.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per identity.")
def embeddings_status(identity: str | None, as_json: bool) -> None:
    """Per identity: messages with a vector of the configured model (PM_EMBEDDER) out of all,
    how many wait in the queue, the batch workers' recent rate and the time left."""
    async def work(settings: Settings) -> tuple[list[IdentityProgress], dict[str, str]]:
        model = model_name(settings.pm_embedder)
        if model is None:
            raise PylotaError(ErrorCode.INVALID_REQUEST, "PM_EMBEDDER is off: nothing is embedded.",
                              fix="Set PM_EMBEDDER=onnx.")
        conn = await connect(settings.database_url)
        try:
            ids = (None if identity is None
                   else [(await tenancy.resolve_identity(conn, identity)).id])
            found = await progress(conn, model, ids, batch=settings.pm_embed_batch)
            # An id alone says little to a person with several mailboxes (a new user's report).
            addresses = {}
            for p in found:
                page = await tenancy.list_identities(
                    conn, tenant_ids=None, identity_id=p.identity_id, status=None, purpose=None,
                    after_id=None, limit=1)
                addresses[p.identity_id] = page[0].addresses[0] if page and page[0].addresses \
                    else "-"
            return found, addresses
        finally:
            await conn.close()

    found, addresses = run(work)
    if as_json:
        for p in found:
            click.echo(msgspec.json.encode(p).decode())
        return
    click.echo(f"{'identity':30}  {'address':30}  {'embedded / total':>17}  {'queued':>7}  "
               f"{'rate':>12}  time left")
    for p in found:
        left = "done" if not p.queued else _duration(p.seconds_left)
        click.echo(f"{p.identity_id:30}  {addresses[p.identity_id]:30}  "
                   f"{f'{p.embedded} / {p.total}':>17}  {p.queued:>7}  {_rate(p):>12}  {left}")


@embeddings.command("prepare")
def embeddings_prepare() -> None:
    """Build the int8 embedding model into PM_MODEL_CACHE now (about 5 s, offline; otherwise the
    first process that embeds builds it), load it to be sure (a damaged file is built again),
    and print its path."""
    async def work(settings: Settings) -> str:
        try:
            load_embedder("onnx", threads=1, cache=settings.pm_model_cache)
            path = onnx_model(settings.pm_model_cache)
        except EmbedderUnavailable as exc:
            raise PylotaError(ErrorCode.UNAVAILABLE, f"The embedding model cannot be built: {exc}",
                              fix="Install the packages the README lists, or set PM_MODEL_CACHE.",
                              retryable=False) from exc
        return f"{MODEL} {path}"

    click.echo(run(work))


@embeddings.command("backfill")
@click.option("--identity", help="Identity id (idn_…) or address; default: every identity.")
@click.option("--now", "inline", is_flag=True,
              help="Embed here and wait, instead of leaving the queue to the batch workers.")
def embeddings_backfill(identity: str | None, inline: bool) -> None:
    """Queue every message without a vector of the configured model (PM_EMBEDDER), e.g. mail
    imported before embeddings existed or before a model change."""
    async def work(settings: Settings) -> str:
        try:
            embedder = load_embedder(settings.pm_embedder, settings.pm_embed_threads,
                                     settings.pm_model_cache)
        except EmbedderUnavailable as exc:
            raise PylotaError(ErrorCode.UNAVAILABLE, f"The embedding model is unavailable: {exc}",
                              fix="Install the packages the README lists, or set PM_EMBEDDER.",
                              retryable=False) from exc
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
