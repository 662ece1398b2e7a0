"""Trust: how far a message's sender can be believed, and the ``message_trust`` table this module
owns (spec section 4.3: the Message object's "trust (verdict, known_sender, flags)"; "Check trust
and risk_flags before acting on any request in the message").

Computed at ingest in two steps, so that no DNS lookup runs inside the message's transaction:

1. :func:`authenticate` (before the transaction) decides the ``verdict`` from the message alone:

   - from the trusted block of Authentication-Results fields (``shared.mail.auth_results``: the
     topmost fields whose authserv-id the operator trusts, never one the sender wrote), when
     there is one; else
   - from the DKIM signatures, verified with dkimpy through the policy's resolver
     (``shared.mail.signatures``), when the policy has one; else the verdict is ``none``.

   ``pass`` means the From domain is authenticated: DMARC passed, or a DKIM signature (``d=``)
   or SPF (``smtp.mailfrom``) passed for a domain aligned with it (same organizational domain,
   RFC 7489 section 3.1 relaxed alignment). ``fail`` means DMARC failed, or, with nothing aligned
   passing, a DKIM signature or SPF failed (``dkim_fail``, ``spf_fail``, ``dmarc_fail`` say
   which). ``none`` is everything else: nothing checked, only neutral or error results, or a pass
   for some other domain (an ESP's signature) that says nothing of the From domain.

2. :func:`assess` (inside it, after the message and its contacts are stored) adds what the
   mailbox knows of the sender, from ``shared.mail.contacts``:

   - ``known_sender``: the mailbox has written to the sender's address (a contact with outbound
     mail), or the sender is the mailbox itself (for mail that arrived from outside, only when
     authenticated: anyone can write the mailbox's address in From);
   - ``first_contact``: not a known sender, and no mail was exchanged with that address before
     this message's date;
   - ``lookalike_domain``: the sender's domain imitates the mailbox's own domain or a domain it
     has written to (``shared.mail.domains.lookalike_of`` gives the rule).

Both answer as of when they run: at ingest, or at the last ``pylota reindex``, which recomputes
trust for stored mail with :func:`rejudge` and keeps the DKIM checks ingest made (a key rotated
away since would make a good signature look unverifiable).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from shared.config import Settings
from shared.mail.auth_results import AuthResults, trusted_results
from shared.mail.contacts import Contact, contacts_by_address, written_domains
from shared.mail.domains import domain_of, lookalike_of, organizational_domain
from shared.mail.judged import Trust, Verdict
from shared.mail.parse import BARE_CR_DEFECT
from shared.mail.signatures import DkimCheck, DnsResolver, TxtResolver, verify_dkim
from shared.mail.store import StoredContent, raw_of
from shared.tenancy.store import identity_addresses

__all__ = ["FLAGS", "VERDICTS", "Trust", "TrustPolicy", "Authentication", "Correspondence",
           "authenticate", "authentication_from", "judge", "correspondence_of", "assess",
           "save_trust", "trust_of", "checked_dkim", "judged_by", "rejudge", "TRUST_COLUMN", "trust_from"]

#: Verdicts, and what each means.
VERDICTS: dict[str, str] = {
    "pass": "the From domain is authenticated (DMARC, or aligned DKIM or SPF, passed)",
    "fail": "authentication failed: DMARC, or DKIM or SPF with nothing aligned passing",
    "none": "not authenticated either way (nothing checked, or nothing about the From domain)",
}

#: Trust flags, in the order they are listed, and what each means.
FLAGS: dict[str, str] = {
    "dkim_fail": "a DKIM signature did not verify and none did",
    "spf_fail": "SPF failed: the sending server is not allowed for the envelope domain",
    "dmarc_fail": "DMARC failed for the From domain",
    "first_contact": "no mail was exchanged with this address before, and the mailbox never "
                     "wrote to it",
    "lookalike_domain": "the sender's domain imitates the mailbox's own domain or one it wrote to",
    "duplicate_fields": "From or Subject appears more than once (RFC 5322 allows one), or a bare "
                        "CR splits the header: what is shown may not be what was signed, so "
                        "the message is not authenticated",
}
#: Fields RFC 5322 section 3.6 allows once, whose second copy could hide an unsigned one: a DKIM
#: verifier signs the last copy (RFC 6376 section 5.4.2), readers show the first.
_ONCE = frozenset({"from", "subject"})


@dataclass(frozen=True)
class TrustPolicy:
    """What ingest may believe: the authserv-ids whose Authentication-Results count (the
    operator's border servers, and our own SMTP listener's), and the resolver DKIM keys are
    looked up with (None: DKIM is not verified, the verdict comes from those fields alone)."""

    trusted_authserv_ids: frozenset[str] = frozenset()
    resolver: TxtResolver | None = field(default=None, compare=False)
    #: Our own SMTP listener's authserv-id: believed only in the field the listener writes, at
    #: the top under its one Received field (``shared.mail.auth_results.trusted_results``).
    own_authserv_id: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> TrustPolicy:
        """The policy of a deployment for mail that did not come through our own listener
        (``pylota import``): ``PM_TRUSTED_AUTHSERV_IDS`` and the DNS for DKIM keys unless
        ``PM_DKIM_VERIFY`` is off, never the listener's own id (an imported message carrying
        it at its top was believed: found by an attack). The listener adds its id itself.
        Build it once per process: the resolver caches."""
        trusted = {i.strip().lower() for i in settings.pm_trusted_authserv_ids.split(",")
                   if i.strip()}
        return cls(trusted_authserv_ids=frozenset(trusted),
                   resolver=DnsResolver() if settings.pm_dkim_verify else None)

    def trusted_block(self, headers: Sequence[tuple[str, str]]) -> list[AuthResults]:
        """The Authentication-Results fields this policy believes in ``headers``."""
        return trusted_results(headers, self.trusted_authserv_ids, own_id=self.own_authserv_id)


class Authentication(msgspec.Struct, frozen=True, kw_only=True):
    """What the message alone says: the ``verdict``, its ``flags`` (``*_fail``), and the
    ``details`` it came from (stored as the row's ``details``: ``source`` is
    ``authentication-results``, ``dkim`` or None; ``results`` or ``dkim`` list the checks)."""

    verdict: Verdict
    flags: list[str]
    details: dict[str, Any]


class Correspondence(msgspec.Struct, frozen=True, kw_only=True):
    """What the mailbox knows of a sender: its own addresses, its contacts by address, and the
    domains it trusts (its own and those it wrote to)."""

    own: set[str]
    contacts: dict[str, Contact]
    references: set[str]


def _aligned(domain: str, from_domain: str) -> bool:
    org = organizational_domain(domain) if domain else None
    return org is not None and org == organizational_domain(from_domain)


def _ordered(flags: Iterable[str]) -> list[str]:
    present = set(flags)
    return [f for f in FLAGS if f in present]


def _from_results(block: list[AuthResults], from_domain: str) -> Authentication:
    results = [r for fieldset in block for r in fieldset.results]
    by = {m: [r for r in results if r.method == m] for m in ("dmarc", "dkim", "spf")}
    # A DMARC pass speaks for the domain it names (header.from), which must be the From domain
    # read here: a second From address or field let one domain's pass vouch for another's.
    dmarc_pass = any(r.result == "pass" and from_domain
                     and (r.properties.get("header.from") or "").lower() == from_domain
                     for r in by["dmarc"])
    aligned_pass = any(
        r.result == "pass" and _aligned(r.properties.get("header.d")
                                        or domain_of(r.properties.get("header.i")), from_domain)
        for r in by["dkim"]) or any(
        r.result == "pass" and _aligned(domain_of(r.properties.get("smtp.mailfrom")), from_domain)
        for r in by["spf"])
    flags = []
    if any(r.result == "fail" for r in by["dmarc"]):
        flags.append("dmarc_fail")
    if any(r.result == "fail" for r in by["dkim"]) and not any(
            r.result == "pass" for r in by["dkim"]):
        flags.append("dkim_fail")
    if any(r.result == "fail" for r in by["spf"]):
        flags.append("spf_fail")
    if "dmarc_fail" in flags:
        verdict: Verdict = "fail"
    elif aligned_pass or dmarc_pass:
        verdict = "pass"
    else:
        verdict = "fail" if flags else "none"
    details = {"source": "authentication-results",
               "authserv_id": block[0].authserv_id,
               "results": [{"method": r.method, "result": r.result,
                            **({"domain": d} if (d := r.properties.get("header.d")
                                                 or r.properties.get("smtp.mailfrom")
                                                 or r.properties.get("header.from")) else {})}
                           for r in results]}
    return Authentication(verdict=verdict, flags=_ordered(flags), details=details)


def _from_dkim(checks: Sequence[DkimCheck], from_domain: str) -> Authentication:
    details = {"source": "dkim", "dkim": [msgspec.to_builtins(c) for c in checks]}
    if any(c.result == "pass" and _aligned(c.domain, from_domain) for c in checks):
        return Authentication(verdict="pass", flags=[], details=details)
    if any(c.result == "fail" for c in checks) and not any(c.result == "pass" for c in checks):
        return Authentication(verdict="fail", flags=["dkim_fail"], details=details)
    return Authentication(verdict="none", flags=[], details=details)


def authentication_from(headers: Sequence[tuple[str, str]], from_address: str | None,
                        policy: TrustPolicy, dkim: Sequence[DkimCheck] | None) -> Authentication:
    """The verdict of a message from its header fields and, when no trusted
    Authentication-Results field exists, from ``dkim`` (checks already made; None when DKIM
    was not verified). Pure."""
    from_domain = domain_of(from_address)
    block = policy.trusted_block(headers)
    if block:
        auth = _from_results(block, from_domain)
    elif dkim is not None:
        auth = _from_dkim(dkim, from_domain)
    else:
        auth = Authentication(verdict="none", flags=[], details={"source": None})
    names = [n.lower() for n, _ in headers]
    if any(names.count(n) > 1 for n in _ONCE):
        return _unauthenticated(auth)
    return auth


def _unauthenticated(auth: Authentication) -> Authentication:
    return Authentication(verdict="fail" if auth.verdict == "fail" else "none",
                          flags=_ordered([*auth.flags, "duplicate_fields"]), details=auth.details)



async def authenticate(raw: bytes, headers: Sequence[tuple[str, str]], from_address: str | None,
                       policy: TrustPolicy, *, defects: Sequence[str] = ()) -> Authentication:
    """Step 1 of the module docstring for one raw message. Looks DKIM keys up (only when no
    trusted Authentication-Results field decides, the message is signed, and the policy has a
    resolver); run it outside any transaction. Never raises for bad mail or a failing DNS."""
    dkim = None
    if policy.resolver is not None and not policy.trusted_block(headers):
        if any(n.lower() == "dkim-signature" for n, _ in headers):
            dkim = await verify_dkim(raw, policy.resolver)
    auth = authentication_from(headers, from_address, policy, dkim)
    if BARE_CR_DEFECT in defects:
        # dkimpy reads a bare CR as part of a line, the email package as a line break: a From
        # or Subject hidden behind one is shown, unsigned, beside the signed one it hides
        return _unauthenticated(auth)
    return auth


async def correspondence_of(conn: asyncpg.Connection, identity_id: str,
                            addresses: list[str] | None) -> Correspondence:
    """What ``identity_id`` knows of the senders ``addresses`` (every contact when None)."""
    own = await identity_addresses(conn, identity_id)
    contacts = await contacts_by_address(conn, identity_id, addresses)
    references = {domain_of(a) for a in own} | await written_domains(conn, identity_id)
    return Correspondence(own=own, contacts=contacts, references=references - {""})


def judge(auth: Authentication, sender: str | None, when: datetime,
          known: Correspondence, *, outbound: bool = True) -> Trust:
    """The trust of a message from ``sender`` (addr-spec) dated ``when``. ``outbound``: it is
    stored as the identity's own mail; inbound mail naming the mailbox itself as its sender is
    the mailbox's own only when authenticated (a stranger can write any From). Pure."""
    flags = list(auth.flags)
    if sender is not None and sender in known.own and (outbound or auth.verdict == "pass"):
        return Trust(verdict=auth.verdict, known_sender=True, flags=_ordered(flags))
    contact = known.contacts.get(sender) if sender else None
    known_sender = contact is not None and contact.outbound_count > 0
    if not known_sender and (contact is None or contact.first_at is None
                             or contact.first_at >= when):
        flags.append("first_contact")
    if sender and not known_sender and lookalike_of(domain_of(sender), known.references):
        flags.append("lookalike_domain")
    return Trust(verdict=auth.verdict, known_sender=known_sender, flags=_ordered(flags))


async def assess(conn: asyncpg.Connection, identity_id: str, message_id: str,
                 auth: Authentication, sender: str | None, when: datetime, *,
                 outbound: bool) -> Trust:
    """Step 2 at ingest: judge the stored message ``message_id`` and store its trust."""
    known = await correspondence_of(conn, identity_id, [sender] if sender else [])
    trust = judge(auth, sender, when, known, outbound=outbound)
    await save_trust(conn, identity_id, [(message_id, trust, auth.details)])
    return trust


async def save_trust(conn: asyncpg.Connection, identity_id: str,
                     rows: Iterable[tuple[str, Trust, dict[str, Any]]]) -> None:
    """Store (or replace) the trust and its details of each ``(message_id, trust, details)``."""
    await conn.executemany(
        """INSERT INTO message_trust (message_id, identity_id, verdict, known_sender, flags,
                                      details)
           VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (message_id) DO UPDATE SET verdict = excluded.verdict,
             known_sender = excluded.known_sender, flags = excluded.flags,
             details = excluded.details""",
        [(mid, identity_id, t.verdict, t.known_sender, t.flags, details)
         for mid, t, details in rows])


#: :func:`trust_of` of one message as a column of a query on ``messages m`` (an anonymous
#: record, NULL when none is stored); :func:`trust_from` reads it.
TRUST_COLUMN = """(SELECT ROW(t.verdict, t.known_sender, t.flags)
    FROM message_trust t WHERE t.message_id = m.id) AS trust"""


def trust_from(value: tuple | None) -> Trust | None:
    """The :class:`Trust` of a :data:`TRUST_COLUMN` value."""
    if value is None:
        return None
    verdict, known_sender, flags = value
    return Trust(verdict=verdict, known_sender=known_sender, flags=list(flags))


async def trust_of(conn: asyncpg.Connection, message_ids: list[str]) -> dict[str, Trust]:
    """The stored trust of each of ``message_ids`` that has one (mail stored before trust
    existed has none until ``pylota reindex``)."""
    rows = await conn.fetch(
        "SELECT message_id, verdict, known_sender, flags FROM message_trust"
        " WHERE message_id = any($1::text[])", message_ids)
    return {r["message_id"]: Trust(verdict=r["verdict"], known_sender=r["known_sender"],
                                   flags=list(r["flags"])) for r in rows}


async def judged_by(conn: asyncpg.Connection, identity_id: str | None, authserv_id: str
                    ) -> set[str]:
    """Messages of ``identity_id`` (or of all identities) whose stored verdict came from
    Authentication-Results written by ``authserv_id``: for ``pylota reindex``, the mail our own
    listener judged, whose field it may believe again (and no imported mail's)."""
    rows = await conn.fetch(
        "SELECT message_id FROM message_trust WHERE ($1::text IS NULL OR identity_id = $1)"
        " AND details->>'source' = 'authentication-results' AND details->>'authserv_id' = $2",
        identity_id, authserv_id.lower())
    return {r["message_id"] for r in rows}


async def checked_dkim(conn: asyncpg.Connection, identity_id: str | None
                       ) -> dict[str, list[DkimCheck]]:
    """The DKIM checks stored for messages of ``identity_id`` (or of all identities), by message
    id: those whose verdict came from DKIM verified at ingest."""
    rows = await conn.fetch(
        "SELECT message_id, details->'dkim' AS dkim FROM message_trust"
        " WHERE ($1::text IS NULL OR identity_id = $1) AND details->>'source' = 'dkim'",
        identity_id)
    return {r["message_id"]: msgspec.convert(r["dkim"] or [], list[DkimCheck]) for r in rows}


async def rejudge(conn: asyncpg.Connection, message: StoredContent, policy: TrustPolicy,
                  known: Correspondence, checked: dict[str, list[DkimCheck]]
                  ) -> tuple[Trust, dict[str, Any]]:
    """The trust of a stored message again (for ``pylota reindex``) and its details.

    ``known`` is :func:`correspondence_of` the message's identity with every contact, ``checked``
    :func:`checked_dkim`: DKIM checks made before are kept, unless the DNS did not answer then;
    a signed message without such checks is verified now when the policy has a resolver (its raw
    bytes read from the store).
    """
    dkim = checked.get(message.id)
    if dkim is not None and any(c.result == "temperror" for c in dkim):
        dkim = None  # the DNS did not answer at ingest: ask again
    if dkim is None and policy.resolver is not None and any(
            n.lower() == "dkim-signature" for n, _ in message.headers) and not policy.trusted_block(
            message.headers):
        raw = await raw_of(conn, message.id)
        dkim = await verify_dkim(raw, policy.resolver) if raw is not None else None
    auth = authentication_from(message.headers, message.from_address, policy, dkim)
    if BARE_CR_DEFECT in message.defects:
        auth = _unauthenticated(auth)
    return judge(auth, message.from_address, message.date, known,
                 outbound=message.outbound), auth.details
