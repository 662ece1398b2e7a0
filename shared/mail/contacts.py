"""The people a mailbox exchanges mail with: owner of the ``contacts`` table.

Ingest counts each message's correspondents (:func:`count_contacts`, called by
``shared.mail.store`` in the message's transaction): the sender of inbound mail, the To and Cc
recipients of outbound mail, never the identity's own addresses. ``mail_search_contacts`` (spec
section 4.3) finds them by prefix of the display name (any word of it), address or domain
(:func:`search_contacts`), ranked by how often and how recently the mailbox exchanged mail with
them. Score: ``(inbound_count + 2 * outbound_count) * exp(-days since last_at / RECENCY_DAYS)`` — mail
the mailbox sent counts double, since writing to someone shows a real relationship.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

from shared.mail.model import Address

__all__ = ["Contact", "count_contacts", "contacts_by_address", "written_domains", "search_contacts",
           "RECENCY_DAYS"]

#: Days after which a contact's weight has fallen to 1/e.
RECENCY_DAYS = 180.0


class Contact(msgspec.Struct, kw_only=True):
    """Someone the mailbox exchanged mail with."""

    address: str
    name: str | None
    domain: str
    inbound_count: int
    outbound_count: int
    first_at: datetime | None
    last_at: datetime | None


async def count_contacts(conn: asyncpg.Connection, identity_id: str, people: list[Address], *,
                         outbound: bool, when: datetime) -> None:
    """Count one message exchanged with each of ``people`` at ``when``: inbound (they wrote) or
    ``outbound`` (the mailbox wrote to them). A display name replaces the stored one."""
    await conn.executemany(
        """INSERT INTO contacts AS c (identity_id, address, display_name, inbound_count,
                                      outbound_count, first_at, last_at)
           VALUES ($1, $2, $3, $4, $5, $6, $6)
           ON CONFLICT (identity_id, address) DO UPDATE SET
             display_name = coalesce(excluded.display_name, c.display_name),
             inbound_count = c.inbound_count + excluded.inbound_count,
             outbound_count = c.outbound_count + excluded.outbound_count,
             first_at = least(c.first_at, excluded.first_at),
             last_at = greatest(c.last_at, excluded.last_at)""",
        [(identity_id, p.address, p.name, 0 if outbound else 1, 1 if outbound else 0, when)
         for p in people])


async def contacts_by_address(conn: asyncpg.Connection, identity_id: str,
                              addresses: list[str] | None = None) -> dict[str, Contact]:
    """The contacts of ``identity_id`` with these addr-specs (every contact when None), keyed by
    address. ``shared.mail.trust`` reads ``outbound_count`` (the mailbox wrote to them) and
    ``first_at`` (the first mail exchanged) from them."""
    rows = await conn.fetch(
        """SELECT address, display_name, split_part(address, '@', 2) AS domain, inbound_count,
                  outbound_count, first_at, last_at
           FROM contacts WHERE identity_id = $1 AND ($2::text[] IS NULL OR address = any($2))""",
        identity_id, addresses)
    return {r["address"]: Contact(address=r["address"], name=r["display_name"], domain=r["domain"],
                                  inbound_count=r["inbound_count"],
                                  outbound_count=r["outbound_count"], first_at=r["first_at"],
                                  last_at=r["last_at"]) for r in rows}


async def written_domains(conn: asyncpg.Connection, identity_id: str) -> set[str]:
    """The domains of the contacts ``identity_id`` has written to (outbound mail)."""
    rows = await conn.fetch(
        "SELECT DISTINCT split_part(address, '@', 2) AS domain FROM contacts"
        " WHERE identity_id = $1 AND outbound_count > 0", identity_id)
    return {r["domain"] for r in rows}


def _prefix(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


async def search_contacts(conn: asyncpg.Connection, identity_id: str, q: str, *, offset: int,
                          limit: int) -> tuple[list[Contact], bool]:
    """Contacts of ``identity_id`` matching the prefix ``q`` (case-insensitive; a leading ``@``
    means a domain prefix only), best first, and whether more follow."""
    q = " ".join(q.lower().split())
    domain_only = q.startswith("@")
    prefix = _prefix(q.lstrip("@"))
    rows = await conn.fetch(
        f"""SELECT address, display_name, split_part(address, '@', 2) AS domain, inbound_count,
                   outbound_count, first_at, last_at
            FROM contacts
            WHERE identity_id = $1 AND (split_part(address, '@', 2) LIKE $2
                  {'' if domain_only else
                   "OR address LIKE $2 OR lower(display_name) LIKE $2"
                   " OR lower(display_name) LIKE '% ' || $2"})
            ORDER BY (inbound_count + 2 * outbound_count)
                     * exp(-least(50, greatest(0, extract(epoch FROM now()
                           - coalesce(last_at, now()))::float8 / 86400 / {RECENCY_DAYS}))) DESC,
                     address
            LIMIT $3 OFFSET $4""", identity_id, prefix, limit + 1, offset)
    found = [Contact(address=r["address"], name=r["display_name"], domain=r["domain"],
                     inbound_count=r["inbound_count"], outbound_count=r["outbound_count"],
                     first_at=r["first_at"], last_at=r["last_at"]) for r in rows]
    return found[:limit], len(found) > limit
