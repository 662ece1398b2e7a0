"""The people a mailbox exchanges mail with: owner of the ``contacts`` table.

Ingest counts each message's correspondents (:func:`correspondents`): the sender of inbound
mail, the To and Cc recipients of outbound mail, never the identity's own addresses. A
:class:`ContactBook` counts a run of messages in memory, one after another, and writes the sums
in one statement (``shared.mail.store`` does, in the messages' transaction); loaded with the
contacts the run touches (:func:`contact_book`), it also says what the table holds after each
message, which trust reads (``shared.ingest.batch``). ``mail_search_contacts`` (spec
section 4.3) finds them by prefix of the display name (any word of it), address or domain
(:func:`search_contacts`), ranked by how often and how recently the mailbox exchanged mail with
them. Score: ``(inbound_count + 2 * outbound_count) * exp(-days since last_at / RECENCY_DAYS)`` — mail
the mailbox sent counts double, since writing to someone shows a real relationship.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

from shared.mail.model import Address, ParsedMessage

__all__ = ["Contact", "ContactBook", "contact_book", "correspondents", "contacts_by_address",
           "written_domains", "search_contacts", "RECENCY_DAYS"]

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


def correspondents(parsed: ParsedMessage, own: set[str], *, arrived: bool = False
                   ) -> tuple[bool, list[Address]]:
    """Whether ``parsed`` is outbound (its sender is one of ``own``, the identity's addr-specs,
    and it did not ``arrive`` from outside through the SMTP listener, where anyone can write any
    From), and the people it counts: the To and Cc recipients of outbound mail, the sender of
    inbound mail, never one of ``own``."""
    outbound = not arrived and parsed.from_ is not None and parsed.from_.address in own
    people = (parsed.to + parsed.cc) if outbound else ([parsed.from_] if parsed.from_ else [])
    return outbound, [p for p in people if p.address not in own]


def _split_part(address: str) -> str:
    # PostgreSQL's split_part(address, '@', 2), which written_domains reads.
    return (address.split("@") + [""])[1]


class ContactBook:
    """The contacts of one identity as a run of messages counts them, in memory.

    :meth:`count` does what one message's upsert does to each row (counts added, a display name
    replacing the stored one, ``first_at``/``last_at`` widened), in order, so :meth:`get` gives
    a row as the table would hold it after the messages counted so far (for the addresses the
    book was loaded with, :func:`contact_book`) and :meth:`save` writes the sums of the run in
    one statement, with the same result as one upsert per message.
    """

    def __init__(self, known: dict[str, Contact] | None = None,
                 written: set[str] | None = None) -> None:
        self.contacts: dict[str, Contact] = dict(known or {})
        #: Domains of the contacts written to (outbound mail), as :func:`written_domains`.
        self.written_domains: set[str] = set(written or ())
        self._sums: dict[str, list] = {}  # address -> [name, inbound, outbound, first, last]

    def count(self, people: list[Address], *, outbound: bool, when: datetime) -> None:
        """Count one message exchanged with each of ``people`` at ``when``."""
        inbound = 0 if outbound else 1
        for p in people:
            found = self.contacts.get(p.address)
            if found is None:
                found = self.contacts[p.address] = Contact(
                    address=p.address, name=None, domain=_split_part(p.address),
                    inbound_count=0, outbound_count=0, first_at=when, last_at=when)
            found.name = p.name if p.name is not None else found.name
            found.inbound_count += inbound
            found.outbound_count += 1 - inbound
            found.first_at = min(found.first_at or when, when)
            found.last_at = max(found.last_at or when, when)
            if outbound:
                self.written_domains.add(_split_part(p.address))
            sums = self._sums.setdefault(p.address, [None, 0, 0, when, when])
            sums[0] = p.name if p.name is not None else sums[0]
            sums[1] += inbound
            sums[2] += 1 - inbound
            sums[3], sums[4] = min(sums[3], when), max(sums[4], when)

    def get(self, address: str) -> Contact | None:
        """The contact at ``address`` after the messages counted so far."""
        return self.contacts.get(address)

    async def save(self, conn: asyncpg.Connection, identity_id: str) -> None:
        """Write what :meth:`count` counted (one upsert statement) and start a new sum."""
        if self._sums:
            await conn.executemany(
                """INSERT INTO contacts AS c (identity_id, address, display_name, inbound_count,
                                              outbound_count, first_at, last_at)
                   VALUES ($1, $2, $3, $4, $5, $6, $7)
                   ON CONFLICT (identity_id, address) DO UPDATE SET
                     display_name = coalesce(excluded.display_name, c.display_name),
                     inbound_count = c.inbound_count + excluded.inbound_count,
                     outbound_count = c.outbound_count + excluded.outbound_count,
                     first_at = least(c.first_at, excluded.first_at),
                     last_at = greatest(c.last_at, excluded.last_at)""",
                [(identity_id, address, *sums) for address, sums in self._sums.items()])
        self._sums = {}


async def contact_book(conn: asyncpg.Connection, identity_id: str,
                       addresses: list[str]) -> ContactBook:
    """A :class:`ContactBook` loaded with the contacts of ``identity_id`` at ``addresses`` and
    the domains it has written to."""
    return ContactBook(await contacts_by_address(conn, identity_id, addresses),
                       await written_domains(conn, identity_id))


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
