"""Owner of ``tenant_plans``, ``tenant_allowances`` and ``allowance_topups``: a workspace's plan
and allowances (``mail_get_usage``, spec section 4.3), and the check that spends the send
allowance (DESIGN.md section 5.3: RL_SEND "plus the plan's daily send allowance").

Allowances (:data:`ALLOWANCES`) and how each is counted, always from the real data, by the
owner of that data, never from a counter kept here:

- ``inboxes``: identities that can act (active or paused; ``shared.tenancy.store``);
- ``sends``: envelope recipients (To, Cc and Bcc) of the messages the workspace queued since
  midnight in its time zone (``shared.outbound.outbox``); resets daily;
- ``triage``: messages received since the first of the month in its time zone, each triaged as
  it is stored (``shared.mail.store``); resets monthly;
- ``custom_domains``: distinct domains of its identities' addresses (``shared.tenancy.store``);
- ``storage_gb``: bytes of every stored message, as received or sent, in GB of 10^9 bytes
  (``shared.mail.store``);
- ``seats``: API keys that still authenticate (``shared.auth.keys``).

What is granted: the plan's grant (:data:`PLANS`; a tenant with no plan set is on
:data:`DEFAULT_PLAN`, unlimited), or the tenant's own grant where an operator set one
(:func:`set_allowance`), plus its top-ups (:func:`top_up`) — for an allowance that resets, those
made in the current period. ``None`` means unlimited.

Enforced: ``sends`` and ``storage_gb``, by :func:`charge_send`, the send tools'
``check_allowance`` hook (``shared.outbound.send``): it runs in the send's transaction, before
anything is stored, and ``billing_limit`` rolls the whole send back, so a retry with the same
idempotency key after a top-up sends. The other allowances are shown, not enforced.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import asyncpg
import msgspec

from shared.auth.keys import live_key_count
from shared.errors import ErrorCode, PylotaError, invalid
from shared.mail.store import received_since, stored_bytes
from shared.outbound.model import Sender
from shared.outbound.outbox import recipients_since
from shared.tenancy.store import address_domains, get_tenant, identity_statuses

__all__ = ["Allowance", "ALLOWANCES", "PERIODS", "ENFORCED", "GB", "Grants", "Plan", "PLANS",
           "DEFAULT_PLAN", "AllowanceUsage", "Allowances", "TopUp", "Usage", "set_plan",
           "set_allowance", "clear_allowance", "top_up", "usage", "charge_send"]

Allowance = Literal["inboxes", "sends", "triage", "custom_domains", "storage_gb", "seats"]
#: Every allowance, in the order the spec names them.
ALLOWANCES: tuple[Allowance, ...] = ("inboxes", "sends", "triage", "custom_domains",
                                     "storage_gb", "seats")
#: The allowances that reset, and how often; the others never do.
PERIODS: dict[str, Literal["day", "month"]] = {"sends": "day", "triage": "month"}
#: The allowances a spent grant blocks (``billing_limit``); the others are shown only.
ENFORCED: frozenset[str] = frozenset({"sends", "storage_gb"})
#: Bytes in the GB of ``storage_gb`` (decimal, as storage is sold).
GB = 10**9

Amount = int | float


class Grants(msgspec.Struct, frozen=True, kw_only=True):
    """What a plan grants of each allowance; null means unlimited. ``sends`` are per day,
    ``triage`` per month."""

    inboxes: Amount | None
    sends: Amount | None
    triage: Amount | None
    custom_domains: Amount | None
    storage_gb: Amount | None
    seats: Amount | None


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    """A plan of the catalog: its id, its name and its grants."""

    id: str
    name: str
    allowances: Grants


#: The plan of a tenant that has none set: self-hosted deployments limit nothing by default.
DEFAULT_PLAN = "unlimited"
#: The catalog. An operator may override any grant per tenant (``pylota tenants
#: set-allowance``), so these are starting points, not contracts.
PLANS: dict[str, Plan] = {plan.id: plan for plan in (
    Plan(id="unlimited", name="Unlimited", allowances=Grants(
        inboxes=None, sends=None, triage=None, custom_domains=None, storage_gb=None,
        seats=None)),
    Plan(id="free", name="Free", allowances=Grants(
        inboxes=3, sends=100, triage=1_000, custom_domains=1, storage_gb=1, seats=3)),
    Plan(id="team", name="Team", allowances=Grants(
        inboxes=25, sends=2_000, triage=50_000, custom_domains=5, storage_gb=50, seats=15)),
    Plan(id="business", name="Business", allowances=Grants(
        inboxes=250, sends=20_000, triage=500_000, custom_domains=50, storage_gb=500,
        seats=100)),
)}


class AllowanceUsage(msgspec.Struct, kw_only=True):
    """One allowance now. ``granted`` and ``remaining`` are null when ``unlimited``;
    ``remaining`` is never below 0. ``period`` (``day`` or ``month``, in the workspace's time
    zone) and ``resets_at`` are null for an allowance that never resets. ``enforced``: a call
    that would go past it fails with ``billing_limit``."""

    granted: Amount | None
    used: Amount
    remaining: Amount | None
    unlimited: bool
    period: Literal["day", "month"] | None
    resets_at: datetime | None
    enforced: bool


class Allowances(msgspec.Struct, kw_only=True):
    """Every allowance of the workspace."""

    inboxes: AllowanceUsage
    sends: AllowanceUsage
    triage: AllowanceUsage
    custom_domains: AllowanceUsage
    storage_gb: AllowanceUsage
    seats: AllowanceUsage


class TopUp(msgspec.Struct, kw_only=True):
    """An addition to one allowance's grant, counting now."""

    allowance: str
    amount: Amount
    note: str | None
    created_at: datetime


class Usage(msgspec.Struct, kw_only=True):
    """``mail_get_usage`` and ``GET /v1/usage``: the workspace's plan, its allowances, the
    top-ups counting now, and the catalog of plans. ``as_of`` is when it was counted."""

    tenant_id: str
    plan: Plan
    allowances: Allowances
    topups: list[TopUp]
    plans: list[Plan]
    as_of: datetime


class _Periods(msgspec.Struct, frozen=True, kw_only=True):
    day_start: datetime
    day_end: datetime
    month_start: datetime
    month_end: datetime

    def start(self, allowance: str) -> datetime | None:
        period = PERIODS.get(allowance)
        return None if period is None else self.day_start if period == "day" \
            else self.month_start

    def end(self, allowance: str) -> datetime | None:
        period = PERIODS.get(allowance)
        return None if period is None else self.day_end if period == "day" else self.month_end


def _amount(value: float) -> Amount:
    """``value`` as an int when it is whole (counts), else to 9 places (GB, to the byte)."""
    return int(value) if float(value).is_integer() else round(value, 9)


async def _periods(conn: asyncpg.Connection, tenant_id: str) -> _Periods:
    tenant = await get_tenant(conn, tenant_id)
    if tenant is None:
        raise invalid("tenant", f"No tenant {tenant_id!r}.", "Pass an existing tenant.")
    # PostgreSQL does the calendar: the zone names are its own (tenants are checked against
    # pg_timezone_names) and its arithmetic keeps local midnight across DST changes.
    row = await conn.fetchrow(
        """SELECT date_trunc('day', now(), $1) AS day_start,
                  (date_trunc('day', now(), $1) AT TIME ZONE $1 + interval '1 day')
                      AT TIME ZONE $1 AS day_end,
                  date_trunc('month', now(), $1) AS month_start,
                  (date_trunc('month', now(), $1) AT TIME ZONE $1 + interval '1 month')
                      AT TIME ZONE $1 AS month_end""", tenant.time_zone)
    return _Periods(**dict(row))


async def _plan_id(conn: asyncpg.Connection, tenant_id: str) -> str:
    found = await conn.fetchval("SELECT plan FROM tenant_plans WHERE tenant_id = $1", tenant_id)
    return found if found in PLANS else DEFAULT_PLAN


async def _granted(conn: asyncpg.Connection, tenant_id: str, periods: _Periods
                   ) -> tuple[Plan, dict[str, float | None], list[TopUp]]:
    """The plan, what is granted of each allowance now, and the top-ups counted in it."""
    plan = PLANS[await _plan_id(conn, tenant_id)]
    granted: dict[str, float | None] = {a: getattr(plan.allowances, a) for a in ALLOWANCES}
    for row in await conn.fetch(
            "SELECT allowance, granted FROM tenant_allowances WHERE tenant_id = $1", tenant_id):
        granted[row["allowance"]] = row["granted"]
    rows = await conn.fetch(
        """SELECT allowance, amount, note, created_at FROM allowance_topups
           WHERE tenant_id = $1 AND (allowance NOT IN ('sends', 'triage')
                                     OR (allowance = 'sends' AND created_at >= $2)
                                     OR (allowance = 'triage' AND created_at >= $3))
           ORDER BY created_at, id""", tenant_id, periods.day_start, periods.month_start)
    topups = [TopUp(allowance=r["allowance"], amount=_amount(r["amount"]), note=r["note"],
                    created_at=r["created_at"]) for r in rows]
    for topup in topups:
        grant = granted[topup.allowance]
        if grant is not None:
            granted[topup.allowance] = grant + topup.amount
    return plan, granted, topups


async def _used(conn: asyncpg.Connection, tenant_id: str, periods: _Periods
                ) -> dict[str, float]:
    statuses = await identity_statuses(conn, tenant_id)
    ids = list(statuses)
    return {
        "inboxes": sum(1 for s in statuses.values() if s in ("active", "paused")),
        "sends": await recipients_since(conn, tenant_id, periods.day_start),
        "triage": await received_since(conn, ids, periods.month_start),
        "custom_domains": len(await address_domains(conn, tenant_id)),
        "storage_gb": await stored_bytes(conn, ids) / GB,
        "seats": await live_key_count(conn, tenant_id),
    }


async def usage(conn: asyncpg.Connection, tenant_id: str) -> Usage:
    """The workspace's plan and every allowance's grant, use, remainder and reset, now.

    Raises:
        PylotaError: ``invalid_request`` (path ``tenant``) when the tenant does not exist.
    """
    periods = await _periods(conn, tenant_id)
    plan, granted, topups = await _granted(conn, tenant_id, periods)
    used = await _used(conn, tenant_id, periods)
    each = {}
    for name in ALLOWANCES:
        grant = granted[name]
        each[name] = AllowanceUsage(
            granted=None if grant is None else _amount(grant), used=_amount(used[name]),
            remaining=None if grant is None else _amount(max(grant - used[name], 0)),
            unlimited=grant is None, period=PERIODS.get(name), resets_at=periods.end(name),
            enforced=name in ENFORCED)
    return Usage(tenant_id=tenant_id, plan=plan, allowances=Allowances(**each), topups=topups,
                 plans=list(PLANS.values()), as_of=datetime.now(UTC))


async def charge_send(conn: asyncpg.Connection, sender: Sender, recipients: int,
                      message_bytes: int) -> None:
    """The send tools' ``check_allowance`` (``shared.outbound.send.SendAllowance``): refuse a
    message to ``recipients`` envelope recipients when it would take today's sends past the
    grant, or a message of ``message_bytes`` when storing it would take stored mail past the
    storage grant (before, only a full storage refused, so one large message overshot it).

    Runs inside the send's transaction. When either grant is finite it first locks the
    tenant's plan row, so concurrent sends of one workspace are counted one after another and
    never both take the last send; with unlimited grants it takes no lock.

    Raises:
        PylotaError: ``billing_limit`` (HTTP 402) with ``details`` ``allowance``, ``granted``,
            ``used``, ``requested`` and, for sends, ``resets_at``.
    """
    periods = await _periods(conn, sender.tenant_id)
    _, granted, _ = await _granted(conn, sender.tenant_id, periods)
    sends, storage = granted["sends"], granted["storage_gb"]
    if sends is None and storage is None:
        return
    await conn.execute("INSERT INTO tenant_plans (tenant_id, plan) VALUES ($1, $2)"
                       " ON CONFLICT DO NOTHING", sender.tenant_id, DEFAULT_PLAN)
    await conn.execute("SELECT 1 FROM tenant_plans WHERE tenant_id = $1 FOR UPDATE",
                       sender.tenant_id)
    later = "Nothing was stored or sent. Tell a person; after an upgrade or top-up, retry with " \
            "the same idempotency_key (the Idempotency-Key header over REST). mail_get_usage " \
            "shows what is left"
    if sends is not None:
        used = await recipients_since(conn, sender.tenant_id, periods.day_start)
        if used + recipients > sends:
            raise PylotaError(
                ErrorCode.BILLING_LIMIT,
                f"The plan's daily send allowance is spent: {used} of {_amount(sends)} sends "
                "used today." if used >= sends else
                f"The plan's daily send allowance cannot take this message: {used} of "
                f"{_amount(sends)} sends used today leaves {_amount(sends - used)}, and the "
                f"message has {recipients} recipients (one send each).",
                fix=f"{later} and when it resets.",
                details={"allowance": "sends", "granted": _amount(sends), "used": used,
                         "requested": recipients,
                         "resets_at": periods.day_end.isoformat().replace("+00:00", "Z")})
    if storage is not None:
        stored = await stored_bytes(conn, list(await identity_statuses(conn, sender.tenant_id)))
        if stored + message_bytes > storage * GB:
            raise PylotaError(
                ErrorCode.BILLING_LIMIT,
                f"The plan's storage cannot take this message: {_amount(stored / GB)} of "
                f"{_amount(storage)} GB used, and the message is {_amount(message_bytes / GB)} "
                "GB.", fix=f"{later}.",
                details={"allowance": "storage_gb", "granted": _amount(storage),
                         "used": _amount(stored / GB),
                         "requested": _amount(message_bytes / GB)})


def _known(allowance: str) -> Allowance:
    if allowance not in ALLOWANCES:
        raise invalid("allowance", f"No allowance {allowance!r}.",
                      f"Use one of: {', '.join(ALLOWANCES)}.")
    return allowance  # type: ignore[return-value]


async def set_plan(conn: asyncpg.Connection, tenant_id: str, plan: str) -> Plan:
    """Put ``tenant_id`` on ``plan`` (grants the tenant set itself stay).

    Raises:
        PylotaError: ``invalid_request`` (path ``plan``) for a plan not in :data:`PLANS`.
    """
    if plan not in PLANS:
        raise invalid("plan", f"No plan {plan!r}.", f"Use one of: {', '.join(PLANS)}.")
    await conn.execute(
        "INSERT INTO tenant_plans (tenant_id, plan) VALUES ($1, $2) ON CONFLICT (tenant_id)"
        " DO UPDATE SET plan = excluded.plan, updated_at = now()", tenant_id, plan)
    return PLANS[plan]


async def set_allowance(conn: asyncpg.Connection, tenant_id: str, allowance: str,
                        granted: float | None) -> None:
    """Grant ``tenant_id`` ``granted`` of ``allowance`` instead of its plan's (None: unlimited).

    Raises:
        PylotaError: ``invalid_request`` for an unknown allowance (path ``allowance``) or a
            negative grant (path ``granted``).
    """
    name = _known(allowance)
    if granted is not None and granted < 0:
        raise invalid("granted", "A grant cannot be negative.", "Pass 0 or more, or unlimited.")
    async with conn.transaction():
        await conn.execute("INSERT INTO tenant_plans (tenant_id, plan) VALUES ($1, $2)"
                           " ON CONFLICT DO NOTHING", tenant_id, DEFAULT_PLAN)
        await conn.execute(
            "INSERT INTO tenant_allowances (tenant_id, allowance, granted) VALUES ($1, $2, $3)"
            " ON CONFLICT (tenant_id, allowance) DO UPDATE SET granted = excluded.granted,"
            " updated_at = now()", tenant_id, name, granted)


async def clear_allowance(conn: asyncpg.Connection, tenant_id: str, allowance: str) -> None:
    """Give ``allowance`` back to the plan's grant for ``tenant_id``.

    Raises:
        PylotaError: ``invalid_request`` (path ``allowance``) for an unknown allowance.
    """
    await conn.execute("DELETE FROM tenant_allowances WHERE tenant_id = $1 AND allowance = $2",
                       tenant_id, _known(allowance))


async def top_up(conn: asyncpg.Connection, tenant_id: str, allowance: str, amount: float, *,
                 note: str | None = None) -> TopUp:
    """Add ``amount`` to ``allowance``'s grant: for ``sends`` today, for ``triage`` this month,
    for the others from now on. An unlimited allowance stays unlimited.

    Raises:
        PylotaError: ``invalid_request`` for an unknown allowance or an amount not above 0.
    """
    name = _known(allowance)
    if not amount > 0:
        raise invalid("amount", "A top-up must add more than 0.", "Pass a positive amount.")
    row = await conn.fetchrow(
        "INSERT INTO allowance_topups (tenant_id, allowance, amount, note) VALUES ($1, $2, $3, $4)"
        " RETURNING allowance, amount, note, created_at", tenant_id, name, amount, note)
    return TopUp(allowance=row["allowance"], amount=_amount(row["amount"]), note=row["note"],
                 created_at=row["created_at"])
