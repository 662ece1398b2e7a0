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


def test_plans_set_allowances_top_ups_and_usage(db_url):
    assert pylota(db_url, "tenants", "create", "Acme").returncode == 0
    assert pylota(db_url, "identities", "create", "--tenant", "Acme",
                  "--address", "desk@acme.example").returncode == 0
    free = pylota(db_url, "tenants", "set-plan", "--tenant", "Acme", "free")
    assert free.returncode == 0 and free.stdout.strip() == "plan free (Free) set"
    assert pylota(db_url, "tenants", "set-allowance", "--tenant", "Acme", "sends",
                  "10").returncode == 0
    assert pylota(db_url, "tenants", "set-allowance", "--tenant", "Acme", "storage_gb",
                  "unlimited").returncode == 0
    topped = pylota(db_url, "tenants", "top-up", "--tenant", "Acme", "--note", "launch",
                    "sends", "5")
    assert topped.returncode == 0 and topped.stdout.strip() == "sends: +5"
    usage = msgspec.json.decode(pylota(db_url, "tenants", "usage", "--tenant", "Acme",
                                       "--json").stdout)
    assert usage["plan"]["id"] == "free"
    assert usage["allowances"]["sends"]["granted"] == 15
    assert usage["allowances"]["storage_gb"]["unlimited"] is True
    assert usage["allowances"]["inboxes"] == {
        "granted": 3, "used": 1, "remaining": 2, "unlimited": False, "period": None,
        "resets_at": None, "enforced": False}
    assert [t["note"] for t in usage["topups"]] == ["launch"]
    text = pylota(db_url, "tenants", "usage", "--tenant", "Acme").stdout
    assert text.startswith("plan free (Free)\n") and "sends: 0 used of 15, resets " in text
    back = pylota(db_url, "tenants", "set-allowance", "--tenant", "Acme", "sends", "plan")
    assert back.returncode == 0
    again = msgspec.json.decode(pylota(db_url, "tenants", "usage", "--tenant", "Acme",
                                       "--json").stdout)
    assert again["allowances"]["sends"]["granted"] == 105

    wrong = pylota(db_url, "tenants", "set-plan", "--tenant", "Acme", "gold")
    assert wrong.returncode == 2 and "free" in wrong.stderr
    bad = pylota(db_url, "tenants", "set-allowance", "--tenant", "Acme", "sends", "lots")
    assert bad.returncode == 2 and "unlimited" in bad.stderr
