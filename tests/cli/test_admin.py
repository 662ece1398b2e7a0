"""The admin commands as a user runs them: output on stdout, errors on stderr with the fix;
partners, keys of every level, tenant policy and signing keys (issue 13)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import asyncpg
import msgspec
import pytest

from shared.auth.keys import authenticate
from shared.auth.permissions import KeyLevel, Permission
from shared.errors import ErrorCode, PylotaError
from tests.conftest import _drop_db, _dsn, new_db_name
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

    # PostgreSQL out of reach is no fault of the input: exit 1, as when it goes away mid-way.
    down = pylota("postgresql://postgres@127.0.0.1:1/none", "tenants", "create", "Later")
    assert down.returncode == 1 and "PostgreSQL is not reachable" in down.stderr
    # A wrong URL, a missing database and one never migrated are the input's fault: exit 2 with
    # the fix, never a traceback (each printed one: a new user's report).
    bad = pylota("postgresq://postgres@127.0.0.1:5432/none", "tenants", "list")
    assert bad.returncode == 2 and "DATABASE_URL must start with postgresql://" in bad.stderr, bad.stderr
    assert "postgres@" not in bad.stderr  # the URL may hold a password: never printed
    port = pylota("postgresql://postgres@127.0.0.1:port/none", "tenants", "list")
    assert port.returncode == 2 and "not a PostgreSQL URL" in port.stderr, port.stderr
    missing = pylota(db_url.rsplit("/", 1)[0] + "/pylota_no_such_db", "tenants", "list")
    assert missing.returncode == 2 and "pylota migrate" in missing.stderr, missing.stderr
    for done in (bad, missing):
        assert "Traceback" not in done.stderr


def test_an_import_of_which_nothing_is_mail_exits_1(db_url, tmp_path):
    """Every input failed (a folder of notes, a wrong path inside a maildir): the summary says so
    and the command exits 1, so a script sees it (it exited 0: a new user's report). One mail
    among the failures is a partial import, which exits 0 and lists the failures."""
    assert pylota(db_url, "tenants", "create", "acme").returncode == 0
    assert pylota(db_url, "identities", "create", "--tenant", "acme", "--address",
                  "desk@acme.example").returncode == 0
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "SOURCES.md").write_text("# Where this mail came from\n")
    done = pylota(db_url, "import", "--identity", "desk@acme.example", "--no-progress", str(notes))
    assert done.returncode == 1, done.stderr
    assert "imported 0, duplicates 0, failed 1" in done.stdout
    assert "not a mail message" in done.stdout
    (notes / "one.eml").write_bytes(b"From: a@b.example\r\nSubject: hi\r\n\r\nbody\r\n")
    partial = pylota(db_url, "import", "--identity", "desk@acme.example", "--no-progress",
                     str(notes))
    assert partial.returncode == 0, partial.stderr
    assert "imported 1, duplicates 0, failed 1" in partial.stdout
    # an empty folder or maildir holds no mail either (it exited 0: a new user's report)
    empty = tmp_path / "Maildir"
    for sub in ("cur", "new", "tmp"):
        (empty / sub).mkdir(parents=True)
    nothing = pylota(db_url, "import", "--identity", "desk@acme.example", "--no-progress",
                     str(empty))
    assert nothing.returncode == 1, nothing.stderr
    assert "imported 0, duplicates 0, failed 0" in nothing.stdout and "no mail found" in nothing.stdout


def test_import_reports_an_unknown_identity(db_url, tmp_path):
    eml = tmp_path / "one.eml"
    eml.write_bytes(b"From: a@b.example\r\nSubject: hi\r\n\r\nbody\r\n")
    done = pylota(db_url, "import", "--identity", "ghost@nowhere.example", str(eml))
    assert done.returncode == 2
    assert "No identity 'ghost@nowhere.example'" in done.stderr
    assert "pylota identities create" in done.stderr and "mail_list_identities" not in done.stderr
    # stderr is no terminal here: no progress bar fragments before the error (a new user's
    # report: "\rimporting: 0msg" in a log)
    assert "\r" not in done.stderr and "importing" not in done.stderr


async def test_keys_list_and_revoke(db_url, conn):
    assert pylota(db_url, "tenants", "create", "Acme").returncode == 0
    token = pylota(db_url, "keys", "create", "--tenant", "Acme", "--permissions", "search:read").stdout.strip()
    listed = msgspec.json.decode(pylota(db_url, "keys", "list", "--tenant", "Acme", "--json").stdout)
    assert len(listed) == 1 and token.startswith(listed[0]["token_hint"].rstrip("…"))
    assert token not in pylota(db_url, "keys", "list", "--tenant", "Acme").stdout
    # the expiry shows in the plain listing too (a new user found it only with --json)
    pylota(db_url, "keys", "create", "--tenant", "Acme", "--permissions", "search:read",
           "--expires", "30d")
    expiring = [line for line in pylota(db_url, "keys", "list", "--tenant", "Acme").stdout
                .splitlines() if "expires" in line]
    assert len(expiring) == 1 and re.search(r"  expires \d{4}-\d\d-\d\dT\d\d:\d\dZ$", expiring[0])
    listed = [k for k in msgspec.json.decode(
        pylota(db_url, "keys", "list", "--tenant", "Acme", "--json").stdout)
        if k["expires_at"] is None]
    revoked = pylota(db_url, "keys", "revoke", listed[0]["id"])
    assert revoked.returncode == 0 and revoked.stdout.strip() == f"revoked {listed[0]['id']}"
    with pytest.raises(PylotaError) as raised:
        await authenticate(conn, f"Bearer {token}")
    assert raised.value.code is ErrorCode.KEY_REVOKED
    missing = pylota(db_url, "keys", "revoke", "key_nope")
    assert missing.returncode == 2 and "No key 'key_nope'" in missing.stderr


async def test_partners_suspension_and_keys_of_every_level(db_url, conn):
    partner = pylota(db_url, "partners", "create", "Reseller", "--json")
    assert partner.returncode == 0, partner.stderr
    partner_id = msgspec.json.decode(partner.stdout)["id"]
    tenant = pylota(db_url, "tenants", "create", "Shop", "--partner", "Reseller", "--json")
    assert msgspec.json.decode(tenant.stdout)["partner_id"] == partner_id
    assert pylota(db_url, "identities", "create", "--tenant", "Shop",
                  "--address", "desk@shop.example").returncode == 0

    made = {}
    for level, scope in (("platform", []), ("partner", ["--partner", "Reseller"]),
                         ("tenant", ["--tenant", "Shop"]),
                         ("identity", ["--identity", "desk@shop.example"])):
        created = pylota(db_url, "keys", "create", "--level", level, *scope, "--permissions",
                         "all", "--name", f"{level} key", "--json")
        assert created.returncode == 0, (level, created.stderr)
        made[level] = msgspec.json.decode(created.stdout)
        principal = await authenticate(conn, f"Bearer {made[level]['token']}")
        assert principal.level is KeyLevel(level)
    for level in ("platform", "partner"):  # 'all' is what the level may hold
        assert set(made[level]["permissions"]) == {p.value for p in Permission} - {
            "identities:sign", "usage:read"}
    assert made["partner"]["partner_id"] == partner_id
    assert made["identity"]["tenant_id"] == made["tenant"]["tenant_id"]

    assert pylota(db_url, "partners", "suspend", partner_id).stdout.strip() == \
        f"suspended {partner_id}"
    for level in ("partner", "tenant", "identity"):
        with pytest.raises(PylotaError) as raised:
            await authenticate(conn, f"Bearer {made[level]['token']}")
        assert raised.value.code is ErrorCode.PARTNER_SUSPENDED
    await authenticate(conn, f"Bearer {made['platform']['token']}")
    listed = msgspec.json.decode(pylota(db_url, "partners", "list", "--json").stdout)
    assert [p["status"] for p in listed] == ["suspended"]
    assert pylota(db_url, "partners", "resume", "Reseller").returncode == 0
    await authenticate(conn, f"Bearer {made['partner']['token']}")

    platform = pylota(db_url, "keys", "list", "--level", "platform").stdout
    assert "platform key" in platform and "used 20" in platform  # used just now, to the minute
    assert made["platform"]["token"] not in platform
    by_partner = msgspec.json.decode(pylota(db_url, "keys", "list", "--partner", "Reseller",
                                            "--json").stdout)
    assert [k["id"] for k in by_partner] == [made["partner"]["id"]]


async def test_test_mode_and_expiry_of_wide_keys(db_url, conn):
    created = msgspec.json.decode(pylota(
        db_url, "keys", "create", "--level", "platform", "--permissions", "search:read",
        "--test-mode", "--expires", "30d", "--json").stdout)
    assert created["token"].startswith("pmk_test_") and created["mode"] == "test"
    expires = datetime.fromisoformat(created["expires_at"])
    assert abs(expires - datetime.now(timezone.utc) - timedelta(days=30)) < timedelta(minutes=5)
    assert (await authenticate(conn, f"Bearer {created['token']}")).mode == "test"
    at = pylota(db_url, "keys", "create", "--level", "platform", "--permissions", "search:read",
                "--expires", "2099-01-01T00:00:00Z", "--json")
    assert msgspec.json.decode(at.stdout)["expires_at"].startswith("2099-01-01T00:00:00")


KEY_ERRORS = [
    # the names as written, not Python's (a new user saw [<Permission.IDENTITIES_SIGN: …>])
    (["--level", "platform", "--permissions", "identities:sign"],
     "platform keys cannot hold identities:sign."),
    (["--level", "partner", "--permissions", "all"], "needs --partner"),
    (["--level", "platform", "--tenant", "Acme", "--permissions", "all"], "takes no --tenant"),
    (["--permissions", "all"], "--level platform"),
    (["--tenant", "Acme", "--test-mode", "--permissions", "all"], "tenant's mode"),
    (["--tenant", "Acme", "--permissions", "all", "--expires", "2020-01-01T00:00:00Z"],
     "in the past"),
    (["--tenant", "Acme", "--permissions", "all", "--expires", "soon"], "duration"),
    (["--tenant", "Acme", "--permissions", "all", "--expires", "2030-01-01T00:00:00"],
     "no offset"),
    # past a century: a usage error, not OverflowError or asyncpg's DataError (found by an attack)
    (["--tenant", "Acme", "--permissions", "all", "--expires", "99999999999d"], "a century"),
    (["--tenant", "Acme", "--permissions", "all", "--expires", "3000000d"], "a century"),
    (["--tenant", "Acme", "--permissions", "all", "--expires", "9999-12-31T23:59:59-14:00"],
     "a century"),
]


def test_key_creation_errors_say_what_to_change(db_url):
    assert pylota(db_url, "tenants", "create", "Acme").returncode == 0
    for arguments, complaint in KEY_ERRORS:
        refused = pylota(db_url, "keys", "create", *arguments)
        assert refused.returncode == 2 and complaint in refused.stderr, (arguments,
                                                                        refused.stderr)
        assert refused.stdout == ""


def test_tenant_policy_and_signing_key_rotation(db_url, monkeypatch):
    assert pylota(db_url, "tenants", "create", "Acme").returncode == 0
    policy = pylota(db_url, "tenants", "set-policy", "--tenant", "Acme", "--signed-requests")
    assert policy.stdout.strip().endswith(
        "accountable_human=false  signed_requests=true  agentic limits 6 steps, 8 seconds")
    both = msgspec.json.decode(pylota(db_url, "tenants", "set-policy", "--tenant", "Acme",
                                      "--accountable-human", "--json").stdout)
    assert (both["accountable_human"], both["allow_signed_requests"]) == (True, True)

    monkeypatch.delenv("PM_SIGNING_SECRET", raising=False)
    unset = pylota(db_url, "signing-keys", "rotate")
    assert unset.returncode == 2 and "PM_SIGNING_SECRET" in unset.stderr
    monkeypatch.setenv("PM_SIGNING_SECRET", "s" * 40)
    first = pylota(db_url, "signing-keys", "rotate", "--json")
    assert first.returncode == 0, first.stderr
    keys = msgspec.json.decode(first.stdout)
    assert {k["purpose"] for k in keys} == {"assertion", "http_signature"}
    again = pylota(db_url, "signing-keys", "rotate", "--purpose", "http_signature").stdout.split()
    assert again[0] == "http_signature"
    assert again[1] not in {k["kid"] for k in keys}


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
    assert nothing.returncode == 2 and "at least one policy option" in nothing.stderr
    assert await conn.fetchval("SELECT agentic_max_seconds FROM tenants WHERE name = 'Acme'") == 30


def test_tenants_and_identities_are_listed(db_url):
    # a new user found no way to see what exists (3 December 2026)
    acme = pylota(db_url, "tenants", "create", "Acme").stdout.strip()
    beta = pylota(db_url, "tenants", "create", "Beta", "--time-zone", "Europe/Paris",
                  "--test-mode").stdout.strip()
    desk = pylota(db_url, "identities", "create", "--tenant", "Acme",
                  "--address", "desk@acme.example").stdout.strip()
    ops = pylota(db_url, "identities", "create", "--tenant", beta,
                 "--address", "ops@beta.example", "--name", "Beta Ops").stdout.strip()
    tenants = pylota(db_url, "tenants", "list")
    assert tenants.returncode == 0, tenants.stderr
    assert tenants.stdout.splitlines() == [f"{acme}  live  UTC  Acme",
                                           f"{beta}  test  Europe/Paris  Beta"]
    listed = msgspec.json.decode(pylota(db_url, "identities", "list", "--json").stdout)
    assert [(i["id"], i["tenant_id"], i["addresses"]) for i in listed] == [
        (desk, acme, ["desk@acme.example"]), (ops, beta, ["ops@beta.example"])]
    only = pylota(db_url, "identities", "list", "--tenant", "Beta")
    assert only.stdout.splitlines() == [f"{ops}  {beta}  active  ops@beta.example  Beta Ops"]
    missing = pylota(db_url, "identities", "list", "--tenant", "Nope")
    assert missing.returncode == 2 and "Nope" in missing.stderr


async def test_a_database_never_migrated_says_run_migrate():
    """A database made by hand and never migrated printed UndefinedTableError's traceback for
    every command (a new user's report)."""
    name = new_db_name("bare")
    admin = await asyncpg.connect(_dsn("postgres"))
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    try:
        done = pylota(_dsn(name), "tenants", "create", "acme")
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert "no Pylota tables" in done.stderr and "pylota migrate" in done.stderr
    finally:
        await _drop_db(name)


def test_an_identity_of_another_tenant_is_named_as_such(db_url):
    """keys create --tenant sandbox --identity desk@acme.example said "No identity" of an
    identity that exists in another tenant (a new user's report)."""
    for name in ("acme", "sandbox"):
        assert pylota(db_url, "tenants", "create", name).returncode == 0
    assert pylota(db_url, "identities", "create", "--tenant", "acme", "--address",
                  "desk@acme.example").returncode == 0
    done = pylota(db_url, "keys", "create", "--tenant", "sandbox", "--identity",
                  "desk@acme.example", "--permissions", "messages:read")
    assert done.returncode == 2 and "belongs to another tenant" in done.stderr, done.stderr
