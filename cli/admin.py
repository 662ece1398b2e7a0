"""``pylota`` administration: migrations, tenants, identities, API keys, reindex."""

from __future__ import annotations

from typing import Any

import click

from cli.running import emit, run
from shared.auth.keys import KeyInfo, create_key, list_keys, revoke_key
from shared.auth.permissions import parse_permissions
from shared.config import Settings
from shared.db import connect, ensure_database, migrate
from shared.errors import ErrorCode, PylotaError
from shared.ingest.reindex import Reindexed, reindex as rederive
from shared.mail.patterns import set_pattern
from shared.tenancy import store as tenancy

__all__ = ["migrate_cmd", "tenants", "identities", "keys", "reindex"]


@click.command("migrate")
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

    applied = run(work)
    click.echo(f"applied {len(applied)} migration(s){': ' + ', '.join(map(str, applied)) if applied else ''}")


@click.group()
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

    tenant = run(work)
    emit(tenant, as_json, tenant.id)


@tenants.command("set-pattern")
@click.option("--tenant", required=True, help="Tenant id (ten_…) or name.")
@click.argument("name")
@click.argument("pattern")
def tenants_set_pattern(tenant: str, name: str, pattern: str) -> None:
    """Define the custom: reference pattern NAME (a regular expression over the upper-case value
    without spaces or dashes), e.g. booking '[A-Z]{3}[0-9]{3}'. Then custom:NAME:VALUE searches;
    run `pylota reindex` to find it in mail already stored."""
    async def work(settings: Settings) -> None:
        conn = await connect(settings.database_url)
        try:
            found = await tenancy.resolve_tenant(conn, tenant)
            await set_pattern(conn, found.id, name, pattern)
        finally:
            await conn.close()

    run(work)
    click.echo(f"custom:{name} set")


@tenants.command("set-policy")
@click.option("--tenant", required=True, help="Tenant id (ten_…) or name.")
@click.option("--agentic-max-steps", type=int,
              help="mail_deep_search's step limit, 2 to 10 (default and cap of max_steps).")
@click.option("--agentic-max-seconds", type=int,
              help="mail_deep_search's time limit in seconds, 3 to 30 (default and cap of "
                   "max_seconds).")
@click.option("--json", "as_json", is_flag=True, help="Print the tenant as JSON.")
def tenants_set_policy(tenant: str, agentic_max_steps: int | None,
                       agentic_max_seconds: int | None, as_json: bool) -> None:
    """Set a tenant's agentic limits: a mail_deep_search call without max_steps or max_seconds
    gets them, and a larger value is lowered to them (6 steps and 8 seconds unless changed).
    A limit not given stays as it is."""
    if agentic_max_steps is None and agentic_max_seconds is None:
        raise click.UsageError("Pass --agentic-max-steps, --agentic-max-seconds or both.")

    async def work(settings: Settings) -> tenancy.Tenant:
        conn = await connect(settings.database_url)
        try:
            found = await tenancy.resolve_tenant(conn, tenant)
            return await tenancy.set_agentic_limits(conn, found.id, max_steps=agentic_max_steps,
                                                    max_seconds=agentic_max_seconds)
        finally:
            await conn.close()

    changed = run(work)
    emit(changed, as_json, f"{changed.id}: agentic limits {changed.agentic_max_steps} steps, "
                           f"{changed.agentic_max_seconds} seconds")


@click.group()
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

    identity = run(work)
    emit(identity, as_json, identity.id)


@click.group()
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

    created = run(work)
    emit(created, as_json, created["token"])


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

    found = run(work)
    emit(found, as_json, "\n".join(
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

    revoked = run(work)
    emit(revoked, as_json, f"revoked {revoked.id}")


@click.command()
@click.option("--identity", help="Identity id (idn_…) or address; default: every identity.")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def reindex(identity: str | None, as_json: bool) -> None:
    """Derive references (ref:, custom:) and triage (category, urgency, risk flags) again for
    stored mail: after `pylota migrate` adds triage to an existing database, after
    `tenants set-pattern`, or after an upgrade changes the rules. Messages stay as they are."""
    async def work(settings: Settings) -> Reindexed:
        conn = await connect(settings.database_url)
        try:
            identity_id = (None if identity is None
                           else (await tenancy.resolve_identity(conn, identity)).id)
            return await rederive(conn, identity_id)
        finally:
            await conn.close()

    done = run(work)
    emit(done, as_json, f"read {done.messages} message(s): {done.recategorised} with a new "
                         f"category, {done.new_references} new reference(s)")

