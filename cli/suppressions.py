"""``pylota suppressions``: the addresses a tenant no longer sends to, and lifting one.

A hard bounce puts an address on the list (``shared.outbound.suppression``); reports are not
authenticated, and a mailbox can start to work again, so an operator must be able to see the
list and take an address off it (a new user found no way to).
"""

from __future__ import annotations

import click

from cli.running import emit, run
from shared.config import Settings
from shared.db import connect
from shared.errors import invalid
from shared.outbound.suppression import Suppression, lift, list_suppressions
from shared.tenancy import store as tenancy

__all__ = ["suppressions"]


@click.group()
def suppressions() -> None:
    """List and lift a tenant's suppressed addresses (hard bounces)."""


@suppressions.command("list")
@click.option("--tenant", required=True, help="Tenant id (ten_…) or name.")
@click.option("--json", "as_json", is_flag=True, help="Print the entries as JSON.")
def suppressions_list(tenant: str, as_json: bool) -> None:
    """Every address the tenant does not send to, with the bounce that put it there."""

    async def work(settings: Settings) -> list[Suppression]:
        conn = await connect(settings.database_url)
        try:
            return await list_suppressions(conn, (await tenancy.resolve_tenant(conn, tenant)).id)
        finally:
            await conn.close()

    found = run(work)
    emit(found, as_json, "\n".join(
        f"{s.address}  {s.reason} {s.status or ''}  {s.created_at:%Y-%m-%d %H:%M}Z"
        for s in found) or "no suppressed address")


@suppressions.command("lift")
@click.option("--tenant", required=True, help="Tenant id (ten_…) or name.")
@click.argument("address")
def suppressions_lift(tenant: str, address: str) -> None:
    """Send to ADDRESS again: take it off the tenant's list."""

    async def work(settings: Settings) -> None:
        conn = await connect(settings.database_url)
        try:
            found = await tenancy.resolve_tenant(conn, tenant)
            if not await lift(conn, found.id, address):
                raise invalid("address", f"{address} is not suppressed for {found.name}.",
                              "See `pylota suppressions list --tenant TENANT`.")
        finally:
            await conn.close()

    run(work)
    click.echo(f"{address.strip().lower()} lifted: the next send offers it to the relay")
