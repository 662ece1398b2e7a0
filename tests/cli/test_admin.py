"""The admin commands as a user runs them: output on stdout, errors on stderr with the fix."""

from __future__ import annotations

import msgspec
import pytest

from shared.auth.keys import authenticate
from shared.auth.permissions import KeyLevel, Permission
from shared.errors import ErrorCode, PylotaError
from tests.e2e.harness import pylota


async def test_tenant_identity_and_key_by_name(db_url, conn):
    tenant = pylota(db_url, "tenants", "create", "Acme Fleet")
    assert tenant.returncode == 0, tenant.stderr
    tenant_id = tenant.stdout.strip()
    assert tenant_id.startswith("ten_") and len(tenant_id) == 30

    identity = pylota(db_url, "identities", "create", "--tenant", "Acme Fleet",
                      "--address", "Desk@Acme.Example", "--json")
    assert identity.returncode == 0, identity.stderr
    created = msgspec.json.decode(identity.stdout)
    assert created["tenant_id"] == tenant_id
    assert created["addresses"] == ["desk@acme.example"]

    key = pylota(db_url, "keys", "create", "--tenant", tenant_id, "--identity",
                 "desk@acme.example", "--permissions", "search:read,messages:read")
    assert key.returncode == 0, key.stderr
    lines = key.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pmk_live_")
    principal = await authenticate(conn, f"Bearer {lines[0]}")
    assert principal.level is KeyLevel.IDENTITY
    assert principal.identity_id == created["id"]
    assert principal.permissions == {Permission.SEARCH_READ, Permission.MESSAGES_READ}
    stored = await conn.fetchval("SELECT count(*) FROM api_keys WHERE token_hint LIKE 'pmk_live_%'")
    assert stored == 1
    assert await conn.fetchval(
        "SELECT count(*) FROM api_keys WHERE position($1::bytea in token_hash) > 0",
        lines[0].encode()) == 0

    as_json = msgspec.json.decode(pylota(db_url, "keys", "create", "--tenant", "Acme Fleet",
                                         "--permissions", "all", "--json").stdout)
    assert as_json["token"].startswith("pmk_live_")
    assert as_json["identity_id"] is None
    assert set(as_json["permissions"]) == {p.value for p in Permission}


def test_errors_name_the_field_and_the_fix(db_url):
    assert pylota(db_url, "tenants", "create", "Acme").returncode == 0
    again = pylota(db_url, "tenants", "create", "Acme")
    assert again.returncode == 2
    assert "exists already" in again.stderr and "fix:" in again.stderr

    zone = pylota(db_url, "tenants", "create", "Other", "--time-zone", "Mars/Olympus")
    assert zone.returncode == 2 and "Unknown time zone" in zone.stderr

    address = pylota(db_url, "identities", "create", "--tenant", "Acme", "--address", "not-an-address")
    assert address.returncode == 2 and "is not an addr-spec" in address.stderr

    missing = pylota(db_url, "identities", "create", "--tenant", "Nope", "--address", "a@b.example")
    assert missing.returncode == 2 and "No tenant 'Nope'" in missing.stderr

    perms = pylota(db_url, "keys", "create", "--tenant", "Acme", "--permissions", "mail:everything")
    assert perms.returncode == 2
    assert "--permissions" in perms.stderr and "messages:read" in perms.stderr
    assert perms.stdout == ""


def test_import_reports_an_unknown_identity(db_url, tmp_path):
    eml = tmp_path / "one.eml"
    eml.write_bytes(b"From: a@b.example\r\nSubject: hi\r\n\r\nbody\r\n")
    done = pylota(db_url, "import", "--identity", "ghost@nowhere.example", str(eml))
    assert done.returncode == 2
    assert "No identity 'ghost@nowhere.example'" in done.stderr
    assert "pylota identities create" in done.stderr and "mail_list_identities" not in done.stderr


async def test_keys_list_and_revoke(db_url, conn):
    assert pylota(db_url, "tenants", "create", "Acme").returncode == 0
    token = pylota(db_url, "keys", "create", "--tenant", "Acme", "--permissions", "search:read").stdout.strip()
    listed = msgspec.json.decode(pylota(db_url, "keys", "list", "--tenant", "Acme", "--json").stdout)
    assert len(listed) == 1 and token.startswith(listed[0]["token_hint"].rstrip("…"))
    assert token not in pylota(db_url, "keys", "list", "--tenant", "Acme").stdout
    revoked = pylota(db_url, "keys", "revoke", listed[0]["id"])
    assert revoked.returncode == 0 and revoked.stdout.strip() == f"revoked {listed[0]['id']}"
    with pytest.raises(PylotaError) as raised:
        await authenticate(conn, f"Bearer {token}")
    assert raised.value.code is ErrorCode.KEY_REVOKED
    missing = pylota(db_url, "keys", "revoke", "key_nope")
    assert missing.returncode == 2 and "No key 'key_nope'" in missing.stderr


async def test_set_policy_sets_the_agentic_limits_and_refuses_outside_their_range(db_url, conn):
    assert pylota(db_url, "tenants", "create", "Acme").returncode == 0
    steps = pylota(db_url, "tenants", "set-policy", "--tenant", "Acme", "--agentic-max-steps", "4")
    assert steps.returncode == 0, steps.stderr
    assert "4 steps, 8 seconds" in steps.stdout
    both = pylota(db_url, "tenants", "set-policy", "--tenant", "Acme", "--agentic-max-steps",
                  "10", "--agentic-max-seconds", "30", "--json")
    assert both.returncode == 0, both.stderr
    shown = msgspec.json.decode(both.stdout)
    assert (shown["agentic_max_steps"], shown["agentic_max_seconds"]) == (10, 30)
    assert await conn.fetchrow("SELECT agentic_max_steps, agentic_max_seconds FROM tenants"
                               " WHERE name = 'Acme'") == (10, 30)
    refused = pylota(db_url, "tenants", "set-policy", "--tenant", "Acme",
                     "--agentic-max-seconds", "31")
    assert refused.returncode == 2 and "outside 3 to 30" in refused.stderr
    assert "fix:" in refused.stderr
    nothing = pylota(db_url, "tenants", "set-policy", "--tenant", "Acme")
    assert nothing.returncode == 2 and "--agentic-max-steps" in nothing.stderr
    assert await conn.fetchval("SELECT agentic_max_seconds FROM tenants WHERE name = 'Acme'") == 30
