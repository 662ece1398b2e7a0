"""``pylota`` administration: migrations, partners, tenants (and their plans), identities, API
keys of every level, signing keys, reindex."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

import click

from cli.running import emit, run
from shared import plans
from shared.auth.keys import (KeyInfo, create_key, create_partner_key, create_platform_key,
                              list_keys, revoke_key)
from shared.auth.permissions import FORBIDDEN_FOR_LEVEL, KeyLevel, Permission, parse_permissions
from shared.config import Settings
from shared.db import connect, ensure_database, migrate
from shared.errors import ErrorCode, PylotaError
from shared.ingest.reindex import Reindexed, reindex as rederive
from shared.mail.patterns import set_pattern
from shared.mail.trust import TrustPolicy
from shared.signing import KeyPurpose, rotate_key
from shared.signing.keys import SigningKey
from shared.tenancy import store as tenancy

__all__ = ["migrate_cmd", "partners", "tenants", "identities", "keys", "signing_keys", "reindex"]


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
def partners() -> None:
    """Manage partners: their keys reach only their own tenants."""


@partners.command("create")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the partner as JSON.")
def partners_create(name: str, as_json: bool) -> None:
    """Create a partner called NAME and print its id."""

    async def work(settings: Settings) -> tenancy.Partner:
        conn = await connect(settings.database_url)
        try:
            return await tenancy.create_partner(conn, name)
        finally:
            await conn.close()

    partner = run(work)
    emit(partner, as_json, partner.id)


def _set_status(partner: str, status: str) -> tenancy.Partner:
    async def work(settings: Settings) -> tenancy.Partner:
        conn = await connect(settings.database_url)
        try:
            found = await tenancy.resolve_partner(conn, partner)
            return await tenancy.set_partner_status(conn, found.id, status)
        finally:
            await conn.close()

    return run(work)


@partners.command("suspend")
@click.argument("partner")
@click.option("--json", "as_json", is_flag=True, help="Print the partner as JSON.")
def partners_suspend(partner: str, as_json: bool) -> None:
    """Suspend PARTNER (id or name): from the next request on, its keys and its tenants' keys get
    403 partner_suspended."""
    done = _set_status(partner, "suspended")
    emit(done, as_json, f"suspended {done.id}")


@partners.command("resume")
@click.argument("partner")
@click.option("--json", "as_json", is_flag=True, help="Print the partner as JSON.")
def partners_resume(partner: str, as_json: bool) -> None:
    """Lift the suspension of PARTNER (id or name)."""
    done = _set_status(partner, "active")
    emit(done, as_json, f"resumed {done.id}")


@partners.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the partners as JSON.")
def partners_list(as_json: bool) -> None:
    """List the partners and their status."""

    async def work(settings: Settings) -> list[tenancy.Partner]:
        conn = await connect(settings.database_url)
        try:
            return await tenancy.list_partners(conn)
        finally:
            await conn.close()

    found = run(work)
    emit(found, as_json, "\n".join(f"{p.id}  {p.status}  {p.name}" for p in found))


@click.group()
def tenants() -> None:
    """Manage tenants (workspaces)."""


@tenants.command("create")
@click.argument("name")
@click.option("--time-zone", default="UTC", show_default=True, help="IANA zone for date operators.")
@click.option("--test-mode", is_flag=True, help="A test tenant: its keys are pmk_test_….")
@click.option("--partner", help="Partner id (par_…) or name: the partner's keys reach it.")
@click.option("--json", "as_json", is_flag=True, help="Print the tenant as JSON.")
def tenants_create(name: str, time_zone: str, test_mode: bool, partner: str | None,
                   as_json: bool) -> None:
    """Create a tenant called NAME and print its id."""

    async def work(settings: Settings) -> tenancy.Tenant:
        conn = await connect(settings.database_url)
        try:
            partner_id = None if partner is None else (
                await tenancy.resolve_partner(conn, partner)).id
            return await tenancy.create_tenant(conn, name, time_zone=time_zone,
                                               mode="test" if test_mode else "live",
                                               partner_id=partner_id)
        finally:
            await conn.close()

    tenant = run(work)
    emit(tenant, as_json, tenant.id)


@tenants.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the tenants as JSON.")
def tenants_list(as_json: bool) -> None:
    """List the tenants: id, live or test, time zone and name."""

    async def work(settings: Settings) -> list[tenancy.Tenant]:
        conn = await connect(settings.database_url)
        try:
            return await tenancy.list_tenants(conn)
        finally:
            await conn.close()

    found = run(work)
    emit(found, as_json, "\n".join(f"{t.id}  {t.mode}  {t.time_zone}  {t.name}" for t in found))


@tenants.command("set-policy")
@click.option("--tenant", required=True, help="Tenant id (ten_…) or name.")
@click.option("--accountable-human/--no-accountable-human", default=None,
              help="Whether an accountable human stands behind the workspace's agents (the "
                   "accountable_human claim of mail_sign_assertion).")
@click.option("--signed-requests/--no-signed-requests", default=None,
              help="Whether the workspace's agents may sign HTTP requests "
                   "(mail_sign_http_request; otherwise policy_denied).")
@click.option("--agentic-max-steps", type=int,
              help="mail_deep_search's step limit, 2 to 10 (default and cap of max_steps).")
@click.option("--agentic-max-seconds", type=int,
              help="mail_deep_search's time limit in seconds, 3 to 30 (default and cap of "
                   "max_seconds).")
@click.option("--json", "as_json", is_flag=True, help="Print the tenant as JSON.")
def tenants_set_policy(tenant: str, accountable_human: bool | None, signed_requests: bool | None,
                       agentic_max_steps: int | None, agentic_max_seconds: int | None,
                       as_json: bool) -> None:
    """Set a tenant's policy; options left out keep their value. The agentic limits are what a
    mail_deep_search call without max_steps or max_seconds gets, and a larger value is lowered
    to them (6 steps and 8 seconds unless changed)."""
    if (accountable_human, signed_requests, agentic_max_steps, agentic_max_seconds) == (
            None, None, None, None):
        raise click.UsageError("Pass at least one policy option; see --help.")

    async def work(settings: Settings) -> tenancy.Tenant:
        conn = await connect(settings.database_url)
        try:
            found = await tenancy.resolve_tenant(conn, tenant)
            async with conn.transaction():
                if accountable_human is not None or signed_requests is not None:
                    found = await tenancy.set_tenant_policy(
                        conn, found.id, accountable_human=accountable_human,
                        allow_signed_requests=signed_requests)
                if agentic_max_steps is not None or agentic_max_seconds is not None:
                    found = await tenancy.set_agentic_limits(
                        conn, found.id, max_steps=agentic_max_steps,
                        max_seconds=agentic_max_seconds)
            return found
        finally:
            await conn.close()

    done = run(work)
    emit(done, as_json, f"{done.id}  accountable_human={str(done.accountable_human).lower()}"
                        f"  signed_requests={str(done.allow_signed_requests).lower()}"
                        f"  agentic limits {done.agentic_max_steps} steps, "
                        f"{done.agentic_max_seconds} seconds")


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


@tenants.command("set-plan")
@click.option("--tenant", required=True, help="Tenant id (ten_…) or name.")
@click.argument("plan", type=click.Choice(list(plans.PLANS)))
def tenants_set_plan(tenant: str, plan: str) -> None:
    """Put the tenant on PLAN; grants set with set-allowance stay. `pylota tenants usage` shows
    the result."""
    async def work(settings: Settings) -> plans.Plan:
        conn = await connect(settings.database_url)
        try:
            return await plans.set_plan(conn, (await tenancy.resolve_tenant(conn, tenant)).id,
                                        plan)
        finally:
            await conn.close()

    chosen = run(work)
    click.echo(f"plan {chosen.id} ({chosen.name}) set")


@tenants.command("set-allowance")
@click.option("--tenant", required=True, help="Tenant id (ten_…) or name.")
@click.argument("allowance", type=click.Choice(list(plans.ALLOWANCES)))
@click.argument("granted")
def tenants_set_allowance(tenant: str, allowance: str, granted: str) -> None:
    """Grant the tenant GRANTED of ALLOWANCE instead of its plan's: a number (sends per day,
    triage per month, storage in GB), `unlimited`, or `plan` to go back to the plan's grant."""
    amount: float | None = None
    if granted not in ("unlimited", "plan"):
        try:
            amount = float(granted)
        except ValueError:
            raise click.BadParameter("give a number, unlimited or plan",
                                     param_hint="GRANTED") from None

    async def work(settings: Settings) -> None:
        conn = await connect(settings.database_url)
        try:
            found = (await tenancy.resolve_tenant(conn, tenant)).id
            if granted == "plan":
                await plans.clear_allowance(conn, found, allowance)
            else:
                await plans.set_allowance(conn, found, allowance, amount)
        finally:
            await conn.close()

    run(work)
    click.echo(f"{allowance}: {granted}")


@tenants.command("top-up")
@click.option("--tenant", required=True, help="Tenant id (ten_…) or name.")
@click.option("--note", help="Why (shown by mail_get_usage).")
@click.argument("allowance", type=click.Choice(list(plans.ALLOWANCES)))
@click.argument("amount", type=float)
def tenants_top_up(tenant: str, note: str | None, allowance: str, amount: float) -> None:
    """Add AMOUNT to the tenant's ALLOWANCE: sends for today, triage for this month, the others
    from now on. A send refused with billing_limit can then be retried with its idempotency_key."""
    async def work(settings: Settings) -> plans.TopUp:
        conn = await connect(settings.database_url)
        try:
            return await plans.top_up(conn, (await tenancy.resolve_tenant(conn, tenant)).id,
                                      allowance, amount, note=note)
        finally:
            await conn.close()

    added = run(work)
    click.echo(f"{added.allowance}: +{added.amount}")


@tenants.command("usage")
@click.option("--tenant", required=True, help="Tenant id (ten_…) or name.")
@click.option("--json", "as_json", is_flag=True, help="Print what mail_get_usage returns.")
def tenants_usage(tenant: str, as_json: bool) -> None:
    """Show the tenant's plan and, per allowance, granted, used and remaining (what
    mail_get_usage and GET /v1/usage return)."""
    async def work(settings: Settings) -> plans.Usage:
        conn = await connect(settings.database_url)
        try:
            return await plans.usage(conn, (await tenancy.resolve_tenant(conn, tenant)).id)
        finally:
            await conn.close()

    found = run(work)
    lines = [f"plan {found.plan.id} ({found.plan.name})"]
    for name in plans.ALLOWANCES:
        each: plans.AllowanceUsage = getattr(found.allowances, name)
        granted = "unlimited" if each.unlimited else f"{each.granted}"
        resets = f", resets {each.resets_at:%Y-%m-%d %H:%M} UTC" if each.resets_at else ""
        lines.append(f"{name}: {each.used} used of {granted}{resets}")
    emit(found, as_json, "\n".join(lines))


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


#: Identities read per statement by ``identities list`` (it reads them all, page by page).
_IDENTITY_PAGE = 500


@identities.command("list")
@click.option("--tenant", help="Only this tenant's (id ten_… or name).")
@click.option("--json", "as_json", is_flag=True, help="Print the identities as JSON.")
def identities_list(tenant: str | None, as_json: bool) -> None:
    """List the identities that can act (active or paused): id, tenant, status, addresses and
    display name."""

    async def work(settings: Settings) -> list[tenancy.Identity]:
        conn = await connect(settings.database_url)
        try:
            tenant_ids = None if tenant is None else [(await tenancy.resolve_tenant(conn,
                                                                                   tenant)).id]
            found: list[tenancy.Identity] = []
            while True:
                page = await tenancy.list_identities(
                    conn, tenant_ids=tenant_ids, identity_id=None, status=None, purpose=None,
                    after_id=found[-1].id if found else None, limit=_IDENTITY_PAGE)
                found.extend(page)
                if len(page) < _IDENTITY_PAGE:
                    return found
        finally:
            await conn.close()

    found = run(work)
    emit(found, as_json, "\n".join(
        f"{i.id}  {i.tenant_id}  {i.status}  {', '.join(i.addresses)}"
        + (f"  {i.display_name}" if i.display_name else "") for i in found))


@click.group()
def keys() -> None:
    """Manage API keys."""


#: The longest a key may be minted for (``--expires``): a century, well inside what Python and
#: PostgreSQL dates hold (``99999999999d`` raised OverflowError: found by an attack).
MAX_KEY_LIFETIME = timedelta(days=36_500)


class Expiry(click.ParamType):
    """``--expires``: a duration from now (``90m``, ``12h``, ``30d``) or an RFC 3339 instant with
    its offset (``2027-01-01T00:00:00Z``); it must lie in the future, and at most
    :data:`MAX_KEY_LIFETIME` ahead."""

    name = "expiry"
    _DURATION = re.compile(r"([1-9]\d*)([mhd])")
    _UNITS = {"m": "minutes", "h": "hours", "d": "days"}

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        now = datetime.now(timezone.utc)
        if found := self._DURATION.fullmatch(value.strip()):
            try:
                lifetime = timedelta(**{self._UNITS[found.group(2)]: int(found.group(1))})
            except OverflowError:
                lifetime = MAX_KEY_LIFETIME * 2
            at = now + min(lifetime, MAX_KEY_LIFETIME * 2)
        else:
            try:
                at = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                self.fail(f"{value!r} is neither a duration (90m, 12h, 30d) nor an RFC 3339 "
                          "instant", param, ctx)
            if at.tzinfo is None:
                self.fail(f"{value!r} has no offset; add Z or +01:00", param, ctx)
        if at <= now:
            self.fail(f"{value!r} is in the past", param, ctx)
        if at - now > MAX_KEY_LIFETIME:
            self.fail(f"{value!r} is more than {MAX_KEY_LIFETIME.days} days ahead; a key lives "
                      "at most a century (revoke it when it is no longer needed)", param, ctx)
        return at


def _level_of(level: str | None, partner: str | None, tenant: str | None,
              identity: str | None) -> KeyLevel:
    """The key level asked for: ``--level``, else the narrowest scope option given. Platform keys
    need ``--level platform`` said out loud, so a forgotten option never mints one."""
    inferred = (KeyLevel.IDENTITY if identity else KeyLevel.TENANT if tenant
                else KeyLevel.PARTNER if partner else None)
    chosen = KeyLevel(level) if level else inferred
    if chosen is None:
        raise click.UsageError("pass --tenant, --identity or --partner, or --level platform")
    allowed = {KeyLevel.PLATFORM: set(), KeyLevel.PARTNER: {"partner"},
               KeyLevel.TENANT: {"tenant"}, KeyLevel.IDENTITY: {"identity", "tenant"}}[chosen]
    given = {name for name, value in (("partner", partner), ("tenant", tenant),
                                      ("identity", identity)) if value is not None}
    if extra := sorted(given - allowed):
        raise click.UsageError(f"a {chosen} key takes no {', '.join(f'--{e}' for e in extra)}")
    needed = {KeyLevel.PARTNER: "partner", KeyLevel.TENANT: "tenant",
              KeyLevel.IDENTITY: "identity"}.get(chosen)
    if needed is not None and needed not in given:
        raise click.UsageError(f"a {chosen} key needs --{needed}")
    return chosen


@keys.command("create")
@click.option("--level", type=click.Choice([lv.value for lv in KeyLevel]),
              help="platform (every tenant), partner (the partner's tenants), tenant or identity; "
                   "default: the narrowest of --identity, --tenant, --partner given.")
@click.option("--partner", help="Partner id (par_…) or name: makes a partner key.")
@click.option("--tenant", help="Tenant id (ten_…) or name: makes a tenant key.")
@click.option("--identity", help="Identity id (idn_…) or address: makes an identity key.")
@click.option("--permissions", required=True,
              help="Comma-separated, e.g. identities:read,messages:read,search:read; or 'all' "
                   "(every permission the level may hold).")
@click.option("--name", help="A label for the key.")
@click.option("--expires", type=Expiry(),
              help="When the key stops working: 90m, 12h, 30d, or an instant such as "
                   "2027-01-01T00:00:00Z. Default: never.")
@click.option("--test-mode", is_flag=True,
              help="Platform and partner keys: a pmk_test_… key, which reaches test tenants only "
                   "(tenant and identity keys take their tenant's mode).")
@click.option("--json", "as_json", is_flag=True, help="Print id, token and scope as JSON.")
def keys_create(level: str | None, partner: str | None, tenant: str | None,
                identity: str | None, permissions: str, name: str | None,
                expires: datetime | None, test_mode: bool, as_json: bool) -> None:
    """Create an API key and print its token (shown once) alone on stdout."""
    chosen = _level_of(level, partner, tenant, identity)
    if test_mode and chosen in (KeyLevel.TENANT, KeyLevel.IDENTITY):
        raise click.UsageError("--test-mode is for platform and partner keys; a tenant or "
                               "identity key takes its tenant's mode")
    try:
        perms = (sorted(set(Permission) - FORBIDDEN_FOR_LEVEL[chosen])
                 if permissions.strip() == "all" else parse_permissions(permissions))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--permissions") from None
    mode = "test" if test_mode else "live"

    async def work(settings: Settings) -> dict[str, Any]:
        conn = await connect(settings.database_url)
        try:
            partner_id = tenant_id = identity_id = None
            if chosen is KeyLevel.PLATFORM:
                key_id, token = await create_platform_key(
                    conn, permissions=perms, mode=mode, name=name, expires_at=expires)
            elif chosen is KeyLevel.PARTNER:
                assert partner is not None
                partner_id = (await tenancy.resolve_partner(conn, partner)).id
                key_id, token = await create_partner_key(
                    conn, partner_id=partner_id, permissions=perms, mode=mode, name=name,
                    expires_at=expires)
            else:
                scope = None if tenant is None else [(await tenancy.resolve_tenant(conn,
                                                                                  tenant)).id]
                if identity is not None:
                    found = await tenancy.resolve_identity(conn, identity, tenant_ids=scope)
                    identity_id, tenant_id = found.id, found.tenant_id
                else:
                    assert scope is not None
                    tenant_id = scope[0]
                key_id, token = await create_key(conn, tenant_id=tenant_id,
                                                 identity_id=identity_id, permissions=perms,
                                                 name=name, expires_at=expires)
            return {"id": key_id, "token": token, "level": chosen.value,
                    "partner_id": partner_id, "tenant_id": tenant_id,
                    "identity_id": identity_id, "permissions": [p.value for p in perms],
                    "mode": token.split("_")[1],
                    "expires_at": expires.isoformat() if expires else None}
        finally:
            await conn.close()

    created = run(work)
    emit(created, as_json, created["token"])


@keys.command("list")
@click.option("--tenant", help="Tenant id (ten_…) or name: its tenant and identity keys.")
@click.option("--partner", help="Partner id (par_…) or name: its partner keys.")
@click.option("--level", type=click.Choice([lv.value for lv in KeyLevel]),
              help="Only keys of this level.")
@click.option("--json", "as_json", is_flag=True, help="Print the keys as JSON.")
def keys_list(tenant: str | None, partner: str | None, level: str | None,
              as_json: bool) -> None:
    """List keys (ids and token hints; tokens are never stored), every key unless filtered."""

    async def work(settings: Settings) -> list[KeyInfo]:
        conn = await connect(settings.database_url)
        try:
            tenant_id = None if tenant is None else (
                await tenancy.resolve_tenant(conn, tenant)).id
            partner_id = None if partner is None else (
                await tenancy.resolve_partner(conn, partner)).id
            return await list_keys(conn, tenant_id, partner_id=partner_id,
                                   level=KeyLevel(level) if level else None)
        finally:
            await conn.close()

    def line(k: KeyInfo) -> str:
        scope = k.identity_id or k.tenant_id or k.partner_id or "platform"
        used = k.last_used_at.strftime("%Y-%m-%dT%H:%MZ") if k.last_used_at else "never"
        state = ("  revoked" if k.revoked_at else
                 "  expired" if k.expires_at and k.expires_at <= datetime.now(timezone.utc)
                 else f"  expires {k.expires_at.strftime('%Y-%m-%dT%H:%MZ')}" if k.expires_at
                 else "")
        return (f"{k.id}  {k.token_hint}  {k.level}  {scope}  {','.join(k.permissions)}"
                f"  used {used}{f'  {k.name}' if k.name else ''}{state}")

    found = run(work)
    emit(found, as_json, "\n".join(line(k) for k in found))


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


@click.group("signing-keys")
def signing_keys() -> None:
    """Manage the deployment's signing keys (mail_sign_assertion, mail_sign_http_request)."""


@signing_keys.command("rotate")
@click.option("--purpose", type=click.Choice(["all", *(p.value for p in KeyPurpose)]),
              default="all", show_default=True,
              help="assertion (the JWKS), http_signature (the Web Bot Auth directory), or both.")
@click.option("--json", "as_json", is_flag=True, help="Print the new keys as JSON.")
def signing_keys_rotate(purpose: str, as_json: bool) -> None:
    """Make a new active signing key and retire the old one, which stays published until the
    last token or signature it made has expired (11 minutes). Prints the new kid(s)."""
    purposes = list(KeyPurpose) if purpose == "all" else [KeyPurpose(purpose)]

    async def work(settings: Settings) -> list[SigningKey]:
        conn = await connect(settings.database_url)
        try:
            return [await rotate_key(conn, p, settings.pm_signing_secret) for p in purposes]
        finally:
            await conn.close()

    rotated = run(work)
    emit(rotated, as_json, "\n".join(f"{k.purpose.value}  {k.kid}" for k in rotated))


@click.command()
@click.option("--identity", help="Identity id (idn_…) or address; default: every identity.")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def reindex(identity: str | None, as_json: bool) -> None:
    """Derive references (ref:, custom:), trust (verdict, known sender, flags) and triage
    (category, urgency, risk flags) again for stored mail: after `pylota migrate` adds them to an
    existing database, after `tenants set-pattern`, or after an upgrade changes the rules; and
    queue for text extraction the attachments of mail stored before attachment text existed
    (the batch workers extract them). Messages stay as they are."""

    async def work(settings: Settings) -> Reindexed:
        conn = await connect(settings.database_url)
        try:
            identity_id = (None if identity is None
                           else (await tenancy.resolve_identity(conn, identity)).id)
            return await rederive(conn, identity_id,
                                  trust_policy=TrustPolicy.from_settings(settings),
                                  listener_id=settings.pm_api_host)
        finally:
            await conn.close()

    done = run(work)
    emit(done, as_json, f"read {done.messages} message(s): {done.recategorised} with a new "
                         f"category, {done.new_references} new reference(s), "
                         f"{done.attachments_queued} attachment(s) queued for text extraction")

