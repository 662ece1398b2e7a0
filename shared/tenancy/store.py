"""Owner of ``partners``, ``tenants``, ``identities`` and ``identity_addresses``.

Functions take the connection first so that the caller owns the transaction. Rows leave as
Structs. Addresses are addr-specs stored lower-cased (RFC 5321 section 2.4 lets the local part be
case-sensitive, but no mail system in use relies on it, and lookups must be stable), with an
internationalised domain as its A-label (IDNA 2008 with UTS 46 mapping, ``idna``): the form a
relay without SMTPUTF8 writes in RCPT TO and our own sent mail carries in From
(:func:`canonical_address`). The local part is ASCII: mail from any other could not be sent.

Reach (spec section 3): a partner's tenants are those whose ``partner_id`` is the partner (a
tenant with no partner belongs to none); a key of one mode (``live``/``test``) reaches only
tenants of that mode (L4). :func:`platform_tenant_ids` and :func:`partner_tenant_ids` answer
both rules in one query each.
"""

from __future__ import annotations

import re
from datetime import datetime

import asyncpg
import idna
import msgspec

from shared.errors import ErrorCode, PylotaError, invalid
from shared.ids import Prefix, is_id, new_id
from shared.header_text import plain_text

__all__ = [
    "Partner", "Tenant", "Identity", "KeyStanding", "create_partner", "resolve_partner",
    "set_partner_status", "list_partners", "list_tenants", "create_tenant", "get_tenant", "resolve_tenant",
    "set_tenant_policy", "create_identity", "resolve_identity", "list_identities",
    "identity_of_address", "identity_statuses", "partner_tenant_ids", "platform_tenant_ids",
    "tenant_mode", "identity_tenant_id", "identity_addresses", "key_standing", "STANDING_COLUMNS",
    "OWN_IDENTITY_COLUMN", "own_identity", "address_domains",
    "set_agentic_limits", "AGENTIC_STEPS", "AGENTIC_SECONDS", "canonical_address",
]

#: The range a tenant's agentic step limit may take, and ``mail_deep_search``'s ``max_steps``
#: (spec section 4.3; the tenants table checks it too).
AGENTIC_STEPS = range(2, 11)
#: The range of a tenant's agentic time limit in seconds, and of ``max_seconds``.
AGENTIC_SECONDS = range(3, 31)


class Partner(msgspec.Struct, frozen=True, kw_only=True):
    """A reseller or integrator whose keys reach its own tenants; ``status`` is ``active`` or
    ``suspended`` (then its keys and its tenants' keys are refused, spec section 3)."""

    id: str
    name: str
    status: str
    created_at: datetime


class Tenant(msgspec.Struct, frozen=True, kw_only=True):
    """A workspace and its policy (time zone, agentic limits, recipient cap, and the signing
    tools' policy: whether an accountable human stands behind its agents, whether they may sign
    HTTP requests)."""

    id: str
    name: str
    partner_id: str | None
    mode: str
    time_zone: str
    agentic_max_steps: int
    agentic_max_seconds: int
    max_recipients: int
    accountable_human: bool
    allow_signed_requests: bool
    created_at: datetime


class KeyStanding(msgspec.Struct, frozen=True, kw_only=True):
    """What authentication needs to know beside the key row: the status of the key's partner
    (its own, or its tenant's; None when there is none) and the mode of its tenant (None for a
    key without a tenant, or when the tenant is gone)."""

    partner_status: str | None
    tenant_mode: str | None


class Identity(msgspec.Struct, frozen=True, kw_only=True):
    """A mailbox: ``addresses`` are its active then retiring addr-specs."""

    id: str
    tenant_id: str
    display_name: str | None
    purpose: str | None
    status: str
    addresses: list[str]
    created_at: datetime


_TENANT_COLUMNS = ("id, name, partner_id, mode, time_zone, agentic_max_steps,"
                   " agentic_max_seconds, max_recipients, accountable_human,"
                   " allow_signed_requests, created_at")
_PARTNER_COLUMNS = "id, name, status, created_at"

_IDENTITY_SELECT = """
SELECT i.id, i.tenant_id, i.display_name, i.purpose, i.status, i.created_at,
       coalesce(array_agg(a.address ORDER BY a.state, a.created_at)
                FILTER (WHERE a.address IS NOT NULL), '{}') AS addresses
FROM identities i LEFT JOIN identity_addresses a ON a.identity_id = i.id
"""


async def create_partner(conn: asyncpg.Connection, name: str) -> Partner:
    """Create an active partner named ``name``.

    Raises:
        PylotaError: ``invalid_request`` (path ``name``) when the name is empty or taken.
    """
    if not name.strip():
        raise invalid("name", "The partner name is empty.", "Pass a non-empty NAME.")
    plain_text("name", name)
    try:
        row = await conn.fetchrow(
            f"INSERT INTO partners (id, name) VALUES ($1, $2) RETURNING {_PARTNER_COLUMNS}",
            new_id(Prefix.PARTNER), name.strip())
    except asyncpg.UniqueViolationError as exc:
        raise invalid("name", f"A partner named {name!r} exists already.",
                      "Choose another name, or use the existing partner.") from exc
    return Partner(**dict(row))


async def resolve_partner(conn: asyncpg.Connection, ref: str) -> Partner:
    """Find a partner by id or by name.

    Raises:
        PylotaError: ``invalid_request`` (path ``partner``) when none matches.
    """
    row = await conn.fetchrow(
        f"SELECT {_PARTNER_COLUMNS} FROM partners WHERE id = $1 OR name = $1", ref)
    if row is None:
        raise invalid("partner", f"No partner {ref!r}.",
                      "Pass a partner id (par_…) or name; `pylota partners create NAME` makes one.")
    return Partner(**dict(row))


async def set_partner_status(conn: asyncpg.Connection, partner_id: str, status: str) -> Partner:
    """Set the partner's status to ``active`` or ``suspended``; from the next request on, a
    suspended partner's keys and its tenants' keys get ``partner_suspended`` (spec section 3).

    Raises:
        PylotaError: ``invalid_request`` (path ``partner``) when there is no such partner, or
            (``status``) for another status.
    """
    if status not in ("active", "suspended"):
        raise invalid("status", f"Unknown partner status {status!r}.",
                      "Use active or suspended.")
    row = await conn.fetchrow(
        f"UPDATE partners SET status = $2 WHERE id = $1 RETURNING {_PARTNER_COLUMNS}",
        partner_id, status)
    if row is None:
        raise invalid("partner", f"No partner {partner_id!r}.",
                      "Pass a partner id (par_…) from `pylota partners list`.")
    return Partner(**dict(row))


async def list_partners(conn: asyncpg.Connection) -> list[Partner]:
    """Every partner, oldest first."""
    rows = await conn.fetch(f"SELECT {_PARTNER_COLUMNS} FROM partners ORDER BY created_at, id")
    return [Partner(**dict(r)) for r in rows]


async def list_tenants(conn: asyncpg.Connection) -> list[Tenant]:
    """Every tenant, oldest first."""
    rows = await conn.fetch(f"SELECT {_TENANT_COLUMNS} FROM tenants ORDER BY created_at, id")
    return [Tenant(**dict(r)) for r in rows]


async def create_tenant(conn: asyncpg.Connection, name: str, *, time_zone: str = "UTC",
                        mode: str = "live", partner_id: str | None = None) -> Tenant:
    """Create a tenant named ``name``, of ``partner_id`` when given (its partner's keys then
    reach it, spec section 3).

    Raises:
        PylotaError: ``invalid_request`` when the name is taken, the time zone is unknown, or
            (path ``partner``) the partner does not exist.
    """
    if not name.strip():
        raise invalid("name", "The tenant name is empty.", "Pass a non-empty NAME.")
    plain_text("name", name)
    known = await conn.fetchval("SELECT true FROM pg_timezone_names WHERE name = $1", time_zone)
    if not known:
        raise invalid("time_zone", f"Unknown time zone {time_zone!r}.",
                      "Use an IANA zone name such as Europe/London.")
    try:
        row = await conn.fetchrow(
            f"INSERT INTO tenants (id, name, time_zone, mode, partner_id)"
            f" VALUES ($1, $2, $3, $4, $5) RETURNING {_TENANT_COLUMNS}",
            new_id(Prefix.TENANT), name.strip(), time_zone, mode, partner_id,
        )
    except asyncpg.UniqueViolationError as exc:
        raise invalid("name", f"A tenant named {name!r} exists already.",
                      "Choose another name, or use the existing tenant.") from exc
    except asyncpg.ForeignKeyViolationError as exc:
        raise invalid("partner", f"No partner {partner_id!r}.",
                      "Pass a partner id (par_…) from `pylota partners list`.") from exc
    return Tenant(**dict(row))


async def set_tenant_policy(conn: asyncpg.Connection, tenant_id: str, *,
                            accountable_human: bool | None = None,
                            allow_signed_requests: bool | None = None) -> Tenant:
    """Change the signing tools' policy of ``tenant_id``; None leaves a value as it is.

    ``accountable_human`` is what mail_sign_assertion's ``accountable_human`` claim says;
    ``allow_signed_requests`` false makes mail_sign_http_request ``policy_denied`` (spec
    section 4.3).

    Raises:
        PylotaError: ``invalid_request`` (path ``tenant``) when there is no such tenant.
    """
    row = await conn.fetchrow(
        f"""UPDATE tenants SET accountable_human = coalesce($2, accountable_human),
                  allow_signed_requests = coalesce($3, allow_signed_requests)
            WHERE id = $1 RETURNING {_TENANT_COLUMNS}""",
        tenant_id, accountable_human, allow_signed_requests)
    if row is None:
        raise invalid("tenant", f"No tenant {tenant_id!r}.",
                      "Pass a tenant id (ten_…) or name; `pylota tenants create NAME` makes one.")
    return Tenant(**dict(row))


async def get_tenant(conn: asyncpg.Connection, tenant_id: str) -> Tenant | None:
    """Return the tenant with ``tenant_id``, or None."""
    row = await conn.fetchrow(f"SELECT {_TENANT_COLUMNS} FROM tenants WHERE id = $1", tenant_id)
    return Tenant(**dict(row)) if row else None


async def resolve_tenant(conn: asyncpg.Connection, ref: str) -> Tenant:
    """Find a tenant by id or by name.

    Raises:
        PylotaError: ``invalid_request`` (path ``tenant``) when none matches.
    """
    row = await conn.fetchrow(
        f"SELECT {_TENANT_COLUMNS} FROM tenants WHERE id = $1 OR name = $1", ref)
    if row is None:
        raise invalid("tenant", f"No tenant {ref!r}.",
                      "Pass a tenant id (ten_…) or name; `pylota tenants create NAME` makes one.")
    return Tenant(**dict(row))


async def set_agentic_limits(conn: asyncpg.Connection, tenant_id: str, *,
                             max_steps: int | None = None, max_seconds: int | None = None
                             ) -> Tenant:
    """Set the tenant's agentic limits (spec section 4.3: ``mail_deep_search``'s ``max_steps``
    and ``max_seconds`` default to them and are lowered to them); None keeps a limit as it is.

    Raises:
        PylotaError: ``invalid_request`` (path ``max_steps`` or ``max_seconds``) outside
            :data:`AGENTIC_STEPS` or :data:`AGENTIC_SECONDS`, or when there is no such tenant.
    """
    if max_steps is not None and max_steps not in AGENTIC_STEPS:
        raise invalid("max_steps", f"{max_steps} steps is outside 2 to 10.",
                      "Pass a step limit from 2 to 10.")
    if max_seconds is not None and max_seconds not in AGENTIC_SECONDS:
        raise invalid("max_seconds", f"{max_seconds} seconds is outside 3 to 30.",
                      "Pass a time limit from 3 to 30 seconds.")
    row = await conn.fetchrow(
        f"UPDATE tenants SET agentic_max_steps = coalesce($2, agentic_max_steps),"
        f" agentic_max_seconds = coalesce($3, agentic_max_seconds) WHERE id = $1"
        f" RETURNING {_TENANT_COLUMNS}", tenant_id, max_steps, max_seconds)
    if row is None:
        raise invalid("tenant", f"No tenant {tenant_id!r}.", "Pass a tenant id (ten_…) or name.")
    return Tenant(**dict(row))


async def create_identity(conn: asyncpg.Connection, tenant_id: str, address: str, *,
                          display_name: str | None = None, purpose: str | None = None) -> Identity:
    """Create an identity in ``tenant_id`` with one active ``address``.

    Raises:
        PylotaError: ``invalid_request`` when the address is malformed or already in use.
    """
    addr = canonical_address(address)
    if display_name is not None:
        # shown by mail_list_identities and signed into assertions' name claim as it is
        plain_text("display_name", display_name)
    identity_id = new_id(Prefix.IDENTITY)
    try:
        async with conn.transaction():
            if await identity_of_address(conn, addr) is not None:  # kept in its U-label form
                raise asyncpg.UniqueViolationError("address")
            await conn.execute(
                "INSERT INTO identities (id, tenant_id, display_name, purpose)"
                " VALUES ($1, $2, $3, $4)", identity_id, tenant_id, display_name, purpose)
            await conn.execute(
                "INSERT INTO identity_addresses (address, identity_id) VALUES ($1, $2)",
                addr, identity_id)
    except asyncpg.UniqueViolationError as exc:
        raise invalid("address", f"{addr} belongs to an identity already.",
                      "Use that identity, or pick another address.") from exc
    found = await _identity_where(conn, "i.id = $1", identity_id)
    assert found is not None  # just inserted in this connection
    return found


async def _identity_where(conn: asyncpg.Connection, where: str, *args: object) -> Identity | None:
    row = await conn.fetchrow(f"{_IDENTITY_SELECT} WHERE {where} GROUP BY i.id", *args)
    return Identity(**dict(row)) if row else None


def canonical_address(address: str) -> str:
    """``address`` as identity addresses are stored (module docstring): lower case, the domain
    as its A-label, so ``Info@Bücher.example`` is ``info@xn--bcher-kva.example``.

    Raises:
        PylotaError: ``invalid_request`` (path ``address``) for no addr-spec, a local part
            outside printable ASCII, or a domain IDNA refuses.
    """
    local, at, domain = address.strip().lower().rpartition("@")
    if not at or not local or not domain or "@" in local \
            or any(c.isspace() or not c.isprintable() for c in address.strip()):
        raise invalid("address", f"{address[:254]!r} is not an addr-spec.",
                      "Pass an address such as agent@example.com.")
    if not local.isascii():
        raise invalid("address", f"The part before the @ of {address[:254]!r} is not ASCII: "
                      "mail from it could not be sent (no relay is asked for SMTPUTF8).",
                      "Pick a local part of ASCII letters, digits and . _ - +.")
    if domain.isascii():
        # No IDNA mapping (underscores stay, as in test domains), but a host name's shape: a
        # trailing dot, an empty or over-long label, a label edged with "-" or an xn-- label
        # that is no A-label made identities that never received mail (found by an attack).
        labels = domain.split(".")
        if len(domain) > 253 or not all(_ASCII_LABEL.fullmatch(label) for label in labels) \
                or not all(_a_label(label) for label in labels if label.startswith("xn--")):
            raise invalid("address", f"{domain[:254]!r} is not a domain name.",
                          "Pass an address such as agent@example.com, without a trailing dot.")
        return f"{local}@{domain}"
    try:
        ascii_domain = idna.encode(domain, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError) as exc:
        raise invalid("address", f"{domain[:254]!r} is not a domain name: {exc}",
                      "Pass an address such as agent@example.com.") from exc
    return f"{local}@{ascii_domain.lower()}"


_ASCII_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


def _a_label(label: str) -> bool:
    try:
        idna.decode(label)
    except (idna.IDNAError, UnicodeError):
        return False
    return True


def _lookup_forms(address: str) -> list[str]:
    """Every stored form ``address`` may have: as given (lower case), its canonical form, and
    the domain's U-label, which identities created before the canonical form kept."""
    given = address.strip().lower()
    forms = [given]
    local, _, domain = given.rpartition("@")
    for convert in (lambda d: idna.encode(d, uts46=True).decode("ascii"), idna.decode):
        try:
            forms.append(f"{local}@{convert(domain).lower()}")
        except (idna.IDNAError, UnicodeError):
            pass
    return list(dict.fromkeys(forms))


async def identity_of_address(conn: asyncpg.Connection, address: str) -> Identity | None:
    """The identity owning an active or retiring ``address`` (case-insensitive, and an
    internationalised domain in either of its forms), or None."""
    return await _identity_where(
        conn, "i.id = (SELECT identity_id FROM identity_addresses WHERE address = any($1::text[])"
              " LIMIT 1)", _lookup_forms(address))


async def resolve_identity(conn: asyncpg.Connection, ref: str, *,
                           tenant_ids: list[str] | None = None, for_key: bool = False) -> Identity:
    """Find an identity by id (``idn_…``) or by one of its addresses.

    Args:
        ref: the id or address.
        tenant_ids: when given, only identities of these tenants match (key scope, spec section 3).
        for_key: the caller is a tool call, so the error speaks of the key and of
            mail_list_identities; otherwise of the ``pylota`` commands.

    Raises:
        PylotaError: ``identity_not_found`` when nothing in scope matches; scope failures look
            the same as a missing identity (spec section 3).
    """
    if is_id(ref, Prefix.IDENTITY):
        found = await _identity_where(conn, "i.id = $1", ref)
    else:
        found = await identity_of_address(conn, ref)
    if found is None or (tenant_ids is not None and found.tenant_id not in tenant_ids):
        if for_key:
            raise PylotaError(
                ErrorCode.IDENTITY_NOT_FOUND, f"No identity {ref!r} that this key can use.",
                fix="Call mail_list_identities and pass one of its ids or addresses as identity.")
        if found is not None:  # the operator's command line: saying where it is leaks nothing
            raise PylotaError(
                ErrorCode.IDENTITY_NOT_FOUND, f"The identity {ref!r} belongs to another tenant "
                f"({found.tenant_id}).",
                fix="Name its own tenant, or another identity of this one "
                    "(`pylota identities list --tenant TENANT`).")
        raise PylotaError(
            ErrorCode.IDENTITY_NOT_FOUND, f"No identity {ref!r}.",
            fix="Give an identity id (idn_…) or an address it owns; create one with "
                "`pylota identities create`.")
    return found


async def list_identities(conn: asyncpg.Connection, *, tenant_ids: list[str] | None,
                          identity_id: str | None, status: str | None, purpose: str | None,
                          after_id: str | None, limit: int) -> list[Identity]:
    """Identities visible to a key, ordered by id, at most ``limit`` after ``after_id``.

    ``tenant_ids`` None means every tenant (platform keys); ``identity_id`` limits to one.
    Without ``status``, only identities that can act (active or paused) are listed; deleting and
    deleted ones only when ``status`` asks for them (REST's filter, spec section 4.3).
    """
    rows = await conn.fetch(
        f"""{_IDENTITY_SELECT}
        WHERE ($1::text[] IS NULL OR i.tenant_id = any($1::text[]))
          AND ($2::text IS NULL OR i.id = $2)
          AND CASE WHEN $3::text IS NULL THEN i.status IN ('active', 'paused')
                   ELSE i.status = $3 END
          AND ($4::text IS NULL OR i.purpose = $4)
          AND ($5::text IS NULL OR i.id > $5)
        GROUP BY i.id ORDER BY i.id LIMIT $6""",
        tenant_ids, identity_id, status, purpose, after_id, limit,
    )
    return [Identity(**dict(r)) for r in rows]


async def identity_statuses(conn: asyncpg.Connection, tenant_id: str) -> dict[str, str]:
    """Every identity of ``tenant_id`` and its status, by id."""
    rows = await conn.fetch("SELECT id, status FROM identities WHERE tenant_id = $1 ORDER BY id",
                            tenant_id)
    return {r["id"]: r["status"] for r in rows}


async def partner_tenant_ids(conn: asyncpg.Connection, partner_id: str | None, *,
                             mode: str) -> list[str]:
    """The tenants of ``mode`` whose partner is ``partner_id``; none for None (spec section 3:
    a tenant with no partner never matches a partner key; L4: a key reaches only its mode)."""
    rows = await conn.fetch("SELECT id FROM tenants WHERE partner_id = $1 AND mode = $2"
                            " ORDER BY id", partner_id, mode)
    return [r["id"] for r in rows]


async def platform_tenant_ids(conn: asyncpg.Connection, *, mode: str) -> list[str]:
    """Every tenant of ``mode``: what a platform key of that mode reaches (spec section 3, L4).

    One id per tenant: fine for thousands of tenants; a deployment with far more would scope
    platform keys in SQL instead of by list.
    """
    rows = await conn.fetch("SELECT id FROM tenants WHERE mode = $1 ORDER BY id", mode)
    return [r["id"] for r in rows]


async def tenant_mode(conn: asyncpg.Connection, tenant_id: str) -> str | None:
    """``live`` or ``test`` for ``tenant_id``; None when there is no such tenant."""
    return await conn.fetchval("SELECT mode FROM tenants WHERE id = $1", tenant_id)


async def identity_tenant_id(conn: asyncpg.Connection, identity_id: str) -> str | None:
    """The tenant of ``identity_id``; None when there is no such identity."""
    return await conn.fetchval("SELECT tenant_id FROM identities WHERE id = $1", identity_id)


async def identity_addresses(conn: asyncpg.Connection, identity_id: str) -> set[str]:
    """The identity's addr-specs, active and retiring."""
    rows = await conn.fetch(
        "SELECT address FROM identity_addresses WHERE identity_id = $1", identity_id)
    return {r["address"] for r in rows}


#: :func:`key_standing` as two columns of a query on ``api_keys k`` (``partner_status``,
#: ``tenant_mode``), so that authentication reads a key and its standing in one round trip.
STANDING_COLUMNS = """(SELECT p.status FROM partners p
        WHERE p.id = coalesce(k.partner_id, (SELECT t.partner_id FROM tenants t
                                             WHERE t.id = k.tenant_id))) AS partner_status,
    (SELECT t.mode FROM tenants t WHERE t.id = k.tenant_id) AS tenant_mode"""


#: An identity key's own identity as one jsonb column of the key's statement (``k``):
#: authentication reads it with the key, so the identity costs no second round trip.
OWN_IDENTITY_COLUMN = f"""(SELECT to_jsonb(own) FROM ({_IDENTITY_SELECT}
        WHERE i.id = k.identity_id GROUP BY i.id) own) AS own_identity"""


def own_identity(value: dict[str, object] | None) -> Identity | None:
    """The :class:`Identity` of :data:`OWN_IDENTITY_COLUMN`'s value (None stays None)."""
    return None if value is None else msgspec.convert(value, Identity)


async def key_standing(conn: asyncpg.Connection, *, partner_id: str | None,
                       tenant_id: str | None) -> KeyStanding:
    """The partner status and tenant mode a key's authentication checks, in one query: the
    status of ``partner_id``, else of the partner of ``tenant_id``; the mode of ``tenant_id``."""
    row = await conn.fetchrow(
        """SELECT (SELECT p.status FROM partners p
                   WHERE p.id = coalesce($1, (SELECT t.partner_id FROM tenants t
                                              WHERE t.id = $2))) AS partner_status,
                  (SELECT t.mode FROM tenants t WHERE t.id = $2) AS tenant_mode""",
        partner_id, tenant_id)
    return KeyStanding(partner_status=row["partner_status"], tenant_mode=row["tenant_mode"])


async def address_domains(conn: asyncpg.Connection, tenant_id: str) -> list[str]:
    """The domains of the active and retiring addresses of ``tenant_id``'s identities that can
    act (not deleting or deleted), sorted (``shared.plans``: the custom_domains allowance)."""
    rows = await conn.fetch(
        """SELECT DISTINCT split_part(a.address, '@', 2) AS domain
           FROM identity_addresses a JOIN identities i ON i.id = a.identity_id
           WHERE i.tenant_id = $1 AND i.status IN ('active', 'paused') ORDER BY 1""", tenant_id)
    return [r["domain"] for r in rows]
