"""``pylota suppressions``: an operator sees the addresses hard bounces suppressed and lifts one,
after which a send offers it to the relay again."""

from __future__ import annotations

import msgspec

from shared.outbound.suppression import HARD_BOUNCE, suppress, suppressed
from shared.tenancy.store import resolve_tenant
from tests.e2e.harness import pylota


async def test_list_and_lift_a_suppressed_address(db_url, conn):
    assert pylota(db_url, "tenants", "create", "acme").returncode == 0
    tenant = await resolve_tenant(conn, "acme")
    await suppress(conn, tenant.id, "Jo@Example.com", reason=HARD_BOUNCE, status="5.1.1",
                   diagnostic="smtp; 550 no such user", message_id=None)
    listed = pylota(db_url, "suppressions", "list", "--tenant", "acme", "--json")
    assert listed.returncode == 0, listed.stderr
    [entry] = msgspec.json.decode(listed.stdout)
    assert (entry["address"], entry["reason"], entry["status"]) == (
        "jo@example.com", HARD_BOUNCE, "5.1.1")
    lifted = pylota(db_url, "suppressions", "lift", "--tenant", "acme", "JO@example.com")
    assert lifted.returncode == 0 and "jo@example.com lifted" in lifted.stdout
    assert await suppressed(conn, tenant.id, ["jo@example.com"]) == set()
    again = pylota(db_url, "suppressions", "lift", "--tenant", "acme", "jo@example.com")
    assert again.returncode == 2 and "is not suppressed" in again.stderr
    empty = pylota(db_url, "suppressions", "list", "--tenant", "acme")
    assert empty.returncode == 0 and "no suppressed address" in empty.stdout
