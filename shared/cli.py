"""The ``pylota`` command: administration, import, and the two processes.

Admin commands (``migrate``, ``import``, ``tenants``, ``identities``, ``keys``,
``embeddings``) live here. ``serve``
and ``worker`` belong to ``front`` and ``workers``; they are loaded by name when invoked (click's
lazy-group pattern), so this domain package never imports the front or the workers.

Every command reads settings with :meth:`Settings.from_env`; errors print the message and the fix
on stderr and exit with status 2.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec

from shared.auth.keys import KeyInfo, create_key, list_keys, revoke_key
from shared.auth.permissions import parse_permissions
from shared.config import Settings, SettingsError
from shared.db import connect, ensure_database, migrate
from shared.errors import ErrorCode, PylotaError
from shared.tenancy import store as tenancy

T = TypeVar("T")

#: Commands owned by other packages: name -> "module:attribute".
_LAZY = {"serve": "front.cli:serve", "worker": "workers.cli:worker"}


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *_LAZY])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in _LAZY:
            module, _, attr = _LAZY[name].partition(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


#: Fixes worded for this command line where the domain's own fix speaks to an MCP client.
_CLI_FIX = {
    ErrorCode.IDENTITY_NOT_FOUND: "Check the id or address; `pylota identities create --tenant "
                                  "TENANT --address ADDRESS` makes a new identity.",
}


def _run(work: Callable[[Settings], Awaitable[T]]) -> T:
    try:
        settings = Settings.from_env()
        return asyncio.run(work(settings))
    except SettingsError as exc:
        click.echo(f"error: {exc}", err=True)
    except PylotaError as exc:
        click.echo(f"error: {exc.message}\nfix: {_CLI_FIX.get(exc.code, exc.fix)}", err=True)
    sys.exit(2)


def _emit(obj: Any, as_json: bool, text: str) -> None:
    click.echo(msgspec.json.encode(obj).decode() if as_json else text)


@click.group(cls=_Group)
def main() -> None:
    """Pylota Mail: business email for AI agents over MCP."""


@main.command("migrate")
def migrate_cmd() -> None:
    """Create the database if missing and apply migrations (idempotent; safe to run from two
    processes at once)."""

    async def work(settings: Settings) -> list[int]:
        try:
            await ensure_database(settings.database_url)
        except OSError as exc:
            raise PylotaError(ErrorCode.UNAVAILABLE, f"PostgreSQL is not reachable: {exc}",
                              fix="Check DATABASE_URL and that PostgreSQL is running.") from exc
        conn = await connect(settings.database_url)
        try:
            return await migrate(conn)
        finally:
            await conn.close()

    applied = _run(work)
    click.echo(f"applied {len(applied)} migration(s){': ' + ', '.join(map(str, applied)) if applied else ''}")


@main.group()
def tenants() -> None:
    """Manage tenants (workspaces)."""


@tenants.command("create")
@click.argument("name")
@click.option("--time-zone", default="UTC", show_default=True, help="IANA zone for date operators.")
@click.option("--test-mode", is_flag=True, help="A test tenant: its keys are pmk_test_….")
@click.option("--json", "as_json", is_flag=True, help="Print the tenant as JSON.")
def tenants_create(name: str, time_zone: str, test_mode: bool, as_json: bool) -> None:
    """Create a tenant called NAME and print its id."""

    async def work(settings: Settings) -> tenancy.Tenant:
        conn = await connect(settings.database_url)
        try:
            return await tenancy.create_tenant(conn, name, time_zone=time_zone,
                                               mode="test" if test_mode else "live")
        finally:
            await conn.close()

    tenant = _run(work)
    _emit(tenant, as_json, tenant.id)


@tenants.command("set-pattern")
@click.option("--tenant", required=True, help="Tenant id (ten_…) or name.")
@click.argument("name")
@click.argument("pattern")
def tenants_set_pattern(tenant: str, name: str, pattern: str) -> None:
    """Define the custom: reference pattern NAME (a regular expression over the upper-case value
    without spaces or dashes), e.g. booking '[A-Z]{3}[0-9]{3}'. Then custom:NAME:VALUE searches;
    run `pylota reindex` to find it in mail already stored."""
    from shared.search.patterns import set_pattern

    async def work(settings: Settings) -> None:
        conn = await connect(settings.database_url)
        try:
            found = await tenancy.resolve_tenant(conn, tenant)
            await set_pattern(conn, found.id, name, pattern)
        finally:
            await conn.close()

    _run(work)
    click.echo(f"custom:{name} set")


@main.group()
def identities() -> None:
    """Manage identities (mailboxes)."""


@identities.command("create")
@click.option("--tenant", required=True, help="Tenant id (ten_…) or name.")
@click.option("--address", required=True, help="The mailbox address, e.g. agent@example.com.")
@click.option("--name", "display_name", help="Display name.")
@click.option("--json", "as_json", is_flag=True, help="Print the identity as JSON.")
def identities_create(tenant: str, address: str, display_name: str | None, as_json: bool) -> None:
    """Create an identity with one address and print its id."""

    async def work(settings: Settings) -> tenancy.Identity:
        conn = await connect(settings.database_url)
        try:
            found = await tenancy.resolve_tenant(conn, tenant)
            return await tenancy.create_identity(conn, found.id, address,
                                                 display_name=display_name)
        finally:
            await conn.close()

    identity = _run(work)
    _emit(identity, as_json, identity.id)


@main.group()
def keys() -> None:
    """Manage API keys."""


@keys.command("create")
@click.option("--tenant", required=True, help="Tenant id (ten_…) or name.")
@click.option("--identity", help="Identity id (idn_…) or address: makes an identity key.")
@click.option("--permissions", required=True,
              help="Comma-separated, e.g. identities:read,messages:read,search:read; or 'all'.")
@click.option("--name", help="A label for the key.")
@click.option("--json", "as_json", is_flag=True, help="Print id, token and scope as JSON.")
def keys_create(tenant: str, identity: str | None, permissions: str, name: str | None,
                as_json: bool) -> None:
    """Create an API key and print its token (shown once) alone on stdout."""
    try:
        perms = parse_permissions(permissions)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--permissions") from None

    async def work(settings: Settings) -> dict[str, Any]:
        conn = await connect(settings.database_url)
        try:
            found = await tenancy.resolve_tenant(conn, tenant)
            identity_id = None
            if identity is not None:
                identity_id = (await tenancy.resolve_identity(
                    conn, identity, tenant_ids=[found.id])).id
            key_id, token = await create_key(conn, tenant_id=found.id, identity_id=identity_id,
                                             permissions=perms, name=name)
            return {"id": key_id, "token": token, "tenant_id": found.id,
                    "identity_id": identity_id, "permissions": [p.value for p in perms]}
        finally:
            await conn.close()

    created = _run(work)
    _emit(created, as_json, created["token"])


@keys.command("list")
@click.option("--tenant", required=True, help="Tenant id (ten_…) or name.")
@click.option("--json", "as_json", is_flag=True, help="Print the keys as JSON.")
def keys_list(tenant: str, as_json: bool) -> None:
    """List a tenant's keys (ids and token hints; tokens are never stored)."""

    async def work(settings: Settings) -> list[KeyInfo]:
        conn = await connect(settings.database_url)
        try:
            return await list_keys(conn, (await tenancy.resolve_tenant(conn, tenant)).id)
        finally:
            await conn.close()

    found = _run(work)
    _emit(found, as_json, "\n".join(
        f"{k.id}  {k.token_hint}  {k.level}  {','.join(k.permissions)}"
        f"{'  revoked' if k.revoked_at else ''}" for k in found))


@keys.command("revoke")
@click.argument("key_id")
@click.option("--json", "as_json", is_flag=True, help="Print the revoked key as JSON.")
def keys_revoke(key_id: str, as_json: bool) -> None:
    """Revoke KEY_ID: its next request gets 401 key_revoked."""

    async def work(settings: Settings) -> KeyInfo:
        conn = await connect(settings.database_url)
        try:
            return await revoke_key(conn, key_id)
        finally:
            await conn.close()

    revoked = _run(work)
    _emit(revoked, as_json, f"revoked {revoked.id}")


@main.command("import")
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
    from redis.asyncio import Redis

    from shared.mail.importer import ImportSummary, import_paths

    async def work(settings: Settings) -> ImportSummary:
        conn = await connect(settings.database_url)
        redis = Redis.from_url(settings.redis_url)
        try:
            found = await tenancy.resolve_identity(conn, identity)
            return await import_paths(conn, redis, found.id, paths, mboxrd=not mboxo,
                                      progress=not no_progress)
        finally:
            await redis.aclose()
            await conn.close()

    summary = _run(work)
    if as_json:
        click.echo(msgspec.json.encode(summary).decode())
        return
    click.echo(f"imported {summary.imported}, duplicates {summary.duplicates}, "
               f"failed {len(summary.failed)}, stored with parse defects "
               f"{len(summary.with_defects)} (listed by --json)")
    for failure in summary.failed:
        click.echo(f"  failed: {failure.origin}: {failure.reason}")


@main.group()
def embeddings() -> None:
    """Embeddings for semantic search (computed by `pylota worker --batch`)."""


@embeddings.command("backfill")
@click.option("--identity", help="Identity id (idn_…) or address; default: every identity.")
@click.option("--now", "inline", is_flag=True,
              help="Embed here and wait, instead of leaving the queue to the batch workers.")
def embeddings_backfill(identity: str | None, inline: bool) -> None:
    """Queue every message without a vector of the configured model (PM_EMBEDDER), e.g. mail
    imported before embeddings existed or before a model change."""
    from shared.db import create_pool
    from shared.embeddings.embedder import EmbedderUnavailable, load_embedder
    from shared.embeddings.store import embed_pending, enqueue_missing

    async def work(settings: Settings) -> str:
        try:
            embedder = load_embedder(settings.pm_embedder, settings.pm_embed_threads)
        except EmbedderUnavailable as exc:
            raise PylotaError(ErrorCode.UNAVAILABLE, f"The embedding model is unavailable: {exc}",
                              fix="Install the packages the README lists, or set PM_EMBEDDER.") from exc
        if embedder is None:
            raise PylotaError(ErrorCode.INVALID_REQUEST, "PM_EMBEDDER is off: nothing to compute.",
                              fix="Set PM_EMBEDDER=onnx.")
        pool = await create_pool(settings.database_url, max_size=2)
        try:
            async with pool.acquire() as conn:
                identity_id = (None if identity is None
                               else (await tenancy.resolve_identity(conn, identity)).id)
                queued = await enqueue_missing(conn, embedder.model, identity_id)
            done = await embed_pending(pool, embedder, batch=settings.pm_embed_batch) if inline else None
        finally:
            await pool.close()
        parts = [f"queued {queued} message(s) for {embedder.model}"]
        if done is not None:
            parts.append(f"embedded {done}")
        return ", ".join(parts)

    click.echo(_run(work))


@main.command()
@click.option("--identity", help="Identity id (idn_…) or address; default: every identity.")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def reindex(identity: str | None, as_json: bool) -> None:
    """Derive references (ref:, custom:) and triage (category, urgency, risk flags) again for
    stored mail: after `pylota migrate` adds triage to an existing database, after
    `tenants set-pattern`, or after an upgrade changes the rules. Messages stay as they are."""
    from shared.search.indexing import reindex as rederive

    async def work(settings: Settings):
        conn = await connect(settings.database_url)
        try:
            identity_id = (None if identity is None
                           else (await tenancy.resolve_identity(conn, identity)).id)
            return await rederive(conn, identity_id)
        finally:
            await conn.close()

    done = _run(work)
    _emit(done, as_json, f"read {done.messages} message(s): {done.recategorised} with a new "
                         f"category, {done.new_references} new reference(s)")


if __name__ == "__main__":
    main()
