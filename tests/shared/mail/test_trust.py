"""Trust at ingest and after ``pylota reindex`` (``shared.mail.trust``), on real databases: the
verdict from trusted Authentication-Results or from DKIM (signed with the run's key, served by
the test's resolver), known senders, first contacts and lookalike domains."""

from __future__ import annotations

import pytest

from shared.ingest.pipeline import ingest_raw
from shared.mail.auth_results import parse_auth_results
from shared.mail.judged import Trust
from shared.mail.trust import FLAGS, TrustPolicy, trust_of
from shared.ingest.reindex import reindex
from shared.tenancy.store import create_identity, create_tenant
from tests.conftest import settings_for

OURS = "mx.pylota.test"
DESK = "desk@pylota.example"


def eml(sender: str = "ann@acme.example", *, to: str = DESK, subject: str = "Hello",
        date: str = "Mon, 02 Nov 2026 10:00:00 +0000", body: str = "Hello there.",
        top: tuple[str, ...] = (), mid: str | None = None) -> bytes:
    lines = [*top, f"From: {sender}", f"To: {to}", f"Subject: {subject}", f"Date: {date}",
             f"Message-ID: <{mid or abs(hash((sender, to, subject, date, body, top)))}@t>"]
    return ("\r\n".join(lines) + "\r\n\r\n" + body + "\r\n").encode()


@pytest.fixture
async def identity_id(conn) -> str:
    tenant = await create_tenant(conn, "acme")
    return (await create_identity(conn, tenant.id, DESK)).id


async def trust_after(conn, identity_id: str, raw: bytes, **kwargs) -> Trust:
    outcome, defects = await ingest_raw(conn, None, identity_id, raw, **kwargs)
    assert not defects
    return (await trust_of(conn, [outcome.message_id]))[outcome.message_id]


def results(value: str) -> tuple[str, ...]:
    return (f"Authentication-Results: {OURS}; {value}", "Received: from out.acme.example")


POLICY = TrustPolicy(trusted_authserv_ids=frozenset({OURS}))


@pytest.mark.parametrize(("value", "verdict", "flags"), [
    ("spf=pass smtp.mailfrom=bounce@mail.acme.example; dkim=pass header.d=acme.example;"
     " dmarc=pass header.from=acme.example", "pass", []),
    ("dkim=pass header.d=acme.example", "pass", []),              # aligned DKIM
    ("spf=pass smtp.mailfrom=acme.example", "pass", []),          # aligned SPF
    ("dkim=pass header.d=esp.example", "none", []),               # another domain's signature
    ("spf=fail smtp.mailfrom=acme.example; dkim=pass header.d=acme.example", "pass",
     ["spf_fail"]),
    ("dkim=fail header.d=acme.example; spf=fail smtp.mailfrom=acme.example", "fail",
     ["dkim_fail", "spf_fail"]),
    ("dkim=pass header.d=acme.example; dmarc=fail header.from=acme.example", "fail",
     ["dmarc_fail"]),
    ("spf=softfail smtp.mailfrom=acme.example; dkim=neutral", "none", []),
    ("none", "none", []),
])
async def test_the_verdict_from_trusted_authentication_results(conn, identity_id, value, verdict,
                                                               flags) -> None:
    trust = await trust_after(conn, identity_id, eml(top=results(value)), trust_policy=POLICY)
    assert (trust.verdict, [f for f in trust.flags if f != "first_contact"]) == (verdict, flags)


async def test_a_field_the_sender_wrote_is_never_believed(conn, identity_id) -> None:
    forged = (f"Authentication-Results: {OURS}; none", "Received: from out.acme.example",
              f"Authentication-Results: {OURS}; dkim=pass header.d=acme.example;"
              " dmarc=pass header.from=acme.example")
    assert (await trust_after(conn, identity_id, eml(top=forged), trust_policy=POLICY)
            ).verdict == "none"
    other = (f"Authentication-Results: mx.other.example; dmarc=pass header.from=acme.example",)
    assert (await trust_after(conn, identity_id, eml(top=other, subject="2"),
                              trust_policy=POLICY)).verdict == "none"
    # Without a policy nothing is believed.
    assert (await trust_after(conn, identity_id, eml(
        top=results("dmarc=pass header.from=acme.example"), subject="3"))).verdict == "none"


async def test_the_verdict_from_dkim_verified_at_ingest(conn, identity_id, dkim_key,
                                                        resolver) -> None:
    dkim_key.publish(resolver, "acme.example")
    policy = TrustPolicy(resolver=resolver)
    good = dkim_key.sign(eml(subject="signed"), "acme.example")
    assert (await trust_after(conn, identity_id, good, trust_policy=policy)).verdict == "pass"
    tampered = dkim_key.sign(eml(subject="tampered"), "acme.example").replace(b"Hello there",
                                                                              b"Pay me now")
    bad = await trust_after(conn, identity_id, tampered, trust_policy=policy)
    assert (bad.verdict, "dkim_fail" in bad.flags) == ("fail", True)
    unaligned = dkim_key.sign(eml(subject="via esp"), "acme.example").replace(
        b"From: ann@acme.example", b"From: ann@other.example")
    assert (await trust_after(conn, identity_id, unaligned, trust_policy=policy)).verdict == "fail"
    dkim_key.publish(resolver, "esp.example")
    esp = dkim_key.sign(eml(subject="esp"), "esp.example")
    assert (await trust_after(conn, identity_id, esp, trust_policy=policy)).verdict == "none"
    assert (await trust_after(conn, identity_id, eml(subject="plain"), trust_policy=policy)
            ).verdict == "none"
    # A trusted field decides before DKIM, and then no key is looked up.
    asked = len(resolver.asked)
    both = TrustPolicy(trusted_authserv_ids=frozenset({OURS}), resolver=resolver)
    decided = dkim_key.sign(eml(subject="decided", top=results("dmarc=fail")), "acme.example")
    assert (await trust_after(conn, identity_id, decided, trust_policy=both)).verdict == "fail"
    assert len(resolver.asked) == asked


async def test_known_sender_and_first_contact(conn, identity_id) -> None:
    first = await trust_after(conn, identity_id, eml("bob@client.example"))
    assert (first.known_sender, first.flags) == (False, ["first_contact"])
    second = await trust_after(conn, identity_id, eml("bob@client.example", subject="again",
                                                     date="Tue, 03 Nov 2026 10:00:00 +0000"))
    assert (second.known_sender, second.flags) == (False, [])
    # The mailbox writes to Bob: from then on he is a known sender.
    mine = await trust_after(conn, identity_id, eml(DESK, to="bob@client.example",
                                                    subject="Re: again"))
    assert (mine.known_sender, mine.flags) == (True, [])
    third = await trust_after(conn, identity_id, eml("bob@client.example", subject="thanks",
                                                    date="Wed, 04 Nov 2026 10:00:00 +0000"))
    assert (third.known_sender, third.flags) == (True, [])


async def test_lookalike_domains_of_the_mailbox_and_its_correspondents(conn, identity_id) -> None:
    await ingest_raw(conn, None, identity_id, eml(DESK, to="jo@acme-corp.example"))
    fake_client = await trust_after(conn, identity_id, eml("jo@acrne-corp.example"))
    assert fake_client.flags == ["first_contact", "lookalike_domain"]
    fake_self = await trust_after(conn, identity_id, eml("it@pyl0ta.example"))
    assert "lookalike_domain" in fake_self.flags
    honest = await trust_after(conn, identity_id, eml("news@unrelated.example"))
    assert "lookalike_domain" not in honest.flags
    assert set(FLAGS) >= {*fake_client.flags, *fake_self.flags}


async def test_reindex_gives_stored_mail_its_trust_and_keeps_dkim_checks(conn, identity_id,
                                                                          dkim_key,
                                                                          resolver) -> None:
    dkim_key.publish(resolver, "acme.example")
    signed = await ingest_raw(conn, None, identity_id, dkim_key.sign(eml(), "acme.example"),
                              trust_policy=TrustPolicy(resolver=resolver))
    trusted = await ingest_raw(conn, None, identity_id,
                               eml(subject="results",
                                   top=results("dmarc=pass header.from=acme.example")),
                               trust_policy=POLICY)
    reply = await ingest_raw(conn, None, identity_id, eml(DESK, to="ann@acme.example",
                                                          subject="Re: Hello"))
    ids = [signed[0].message_id, trusted[0].message_id, reply[0].message_id]
    # The key is rotated away, and an old database has no trust at all for the other two.
    resolver.records.clear()
    await conn.execute("DELETE FROM message_trust WHERE message_id <> $1", ids[0])
    assert set(await trust_of(conn, ids)) == {ids[0]}
    await reindex(conn, trust_policy=TrustPolicy(trusted_authserv_ids=frozenset({OURS}),
                                                 resolver=resolver))
    after = await trust_of(conn, ids)
    assert [after[i].verdict for i in ids] == ["pass", "pass", "none"]
    # Ann was written to (the reply): she is now a known sender, and a first contact no more.
    assert after[ids[0]] == Trust(verdict="pass", known_sender=True, flags=[])
    assert resolver.asked == ["sel1._domainkey.acme.example."]  # ingest's lookup only
    # A signed message that was never checked is verified by the reindex.
    dkim_key.publish(resolver, "acme.example")
    await conn.execute("DELETE FROM message_trust")
    await reindex(conn, identity_id, trust_policy=TrustPolicy(resolver=resolver))
    assert (await trust_of(conn, [ids[0]]))[ids[0]].verdict == "pass"
    assert len(resolver.asked) == 2


# Found by an attack on mail_wait's verification codes, which need a "pass" -----------------------

OWN = TrustPolicy(own_authserv_id=OURS)


async def test_our_own_id_counts_only_where_our_listener_writes_it(conn, identity_id) -> None:
    """The listener writes its field at the top, under its one Received field; the same id
    below a second Received (an import of mail that never passed through it, carrying the
    sender's own) is not believed."""
    pass_ = f"Authentication-Results: {OURS}; dkim=pass header.d=acme.example"
    ours = ("Received: from out.acme.example by mx.pylota.test", pass_)
    assert (await trust_after(conn, identity_id, eml(top=ours, subject="1"),
                              trust_policy=OWN)).verdict == "pass"
    imported = ("Received: by mx.google.com", "Authentication-Results: mx.google.com; dmarc=fail",
                "Received: from out.acme.example", pass_)
    assert (await trust_after(conn, identity_id, eml(top=imported, subject="2"),
                              trust_policy=OWN)).verdict == "none"
    # a border MTA the operator names is believed as before
    assert (await trust_after(conn, identity_id, eml(top=imported, subject="3"),
                              trust_policy=POLICY)).verdict == "pass"


async def test_a_dmarc_pass_vouches_only_for_the_domain_it_names(conn, identity_id) -> None:
    other = results("dmarc=pass header.from=attacker.example")
    trust = await trust_after(conn, identity_id, eml("security@acme.example", top=other),
                              trust_policy=POLICY)
    assert trust.verdict == "none"
    own = results("dmarc=pass header.from=acme.example")
    assert (await trust_after(conn, identity_id, eml("security@acme.example", top=own,
                                                     subject="2"),
                              trust_policy=POLICY)).verdict == "pass"


async def test_a_second_from_or_subject_is_never_authenticated(conn, identity_id) -> None:
    """A DKIM verifier signs the last Subject, readers show the first: an unsigned one put on
    top of a signed message showed its own text with a pass."""
    signed = results("dkim=pass header.d=acme.example; dmarc=pass header.from=acme.example")
    raw = eml(top=(*signed, "Subject: Your verification code is 938271"))
    outcome, _ = await ingest_raw(conn, None, identity_id, raw, trust_policy=POLICY)
    trust = (await trust_of(conn, [outcome.message_id]))[outcome.message_id]
    assert trust.verdict == "none" and "duplicate_fields" in trust.flags
    assert set(trust.flags) <= set(FLAGS)


async def test_mail_arriving_from_outside_in_the_mailboxs_own_name_is_not_its_own(
        conn, identity_id) -> None:
    """Through the SMTP listener anyone can write the mailbox's address in From: such mail is
    inbound, not a known sender unless authenticated, and makes nobody a contact it wrote to
    (before, it was stored as sent mail and made its To a known sender)."""
    spoof = eml(DESK, to="ceo@attacker.example", subject="Re: wire instructions")
    outcome, _ = await ingest_raw(conn, None, identity_id, spoof, arrived=True)
    row = await conn.fetchrow("SELECT direction, status FROM messages WHERE id = $1",
                              outcome.message_id)
    assert (row["direction"], row["status"]) == ("inbound", "received")
    assert not (await trust_of(conn, [outcome.message_id]))[outcome.message_id].known_sender
    later = await trust_after(conn, identity_id, eml("ceo@attacker.example", subject="wire"))
    assert (later.known_sender, later.flags) == (False, ["first_contact"])
    # the same message imported from a sent folder is the mailbox's own
    sent, _ = await ingest_raw(conn, None, identity_id, eml(DESK, to="ceo@attacker.example",
                                                             subject="from my sent folder"))
    assert await conn.fetchval("SELECT direction FROM messages WHERE id = $1",
                               sent.message_id) == "outbound"


async def test_a_bare_cr_in_the_header_is_never_authenticated(conn, identity_id) -> None:
    """Fields behind a bare CR are read by the email package and not by dkimpy: what is shown
    may not be what was signed (found by an attack, through the listener; an import too)."""
    signed = results("dkim=pass header.d=acme.example; dmarc=pass header.from=acme.example")
    raw = b"X-Pad: x\rSubject: code 111111\r\r\n" + eml(top=signed)
    outcome, _ = await ingest_raw(conn, None, identity_id, raw, trust_policy=POLICY)
    trust = (await trust_of(conn, [outcome.message_id]))[outcome.message_id]
    assert trust.verdict == "none" and "duplicate_fields" in trust.flags
    await reindex(conn, trust_policy=POLICY)  # and a reindex, which reads no raw bytes, agrees
    trust = (await trust_of(conn, [outcome.message_id]))[outcome.message_id]
    assert trust.verdict == "none" and "duplicate_fields" in trust.flags


def test_an_authserv_id_among_bytes_outside_ascii_is_no_id() -> None:
    assert parse_auth_results(f"\u00a0{OURS}; dkim=pass") is None
    assert parse_auth_results(f"{OURS}; dkim=pass").authserv_id == OURS


async def test_import_never_believes_our_listeners_id_and_reindex_only_for_its_own_mail(
        conn, identity_id) -> None:
    """An imported message carrying our listener's id at its top was believed (found by a
    second attack): the deployment's policy for imports leaves the id out, and a reindex
    believes it again only for the mail the listener itself judged at ingest."""
    settings = settings_for("postgresql://unused/db", pm_api_host=OURS)
    forged = (f"Authentication-Results: {OURS}; dkim=pass header.d=acme.example",)
    imported, _ = await ingest_raw(conn, None, identity_id, eml(top=forged, subject="imported"),
                                   trust_policy=TrustPolicy.from_settings(settings))
    heard = ("Received: from out.acme.example by mx.pylota.test", *forged)
    listened, _ = await ingest_raw(conn, None, identity_id, eml(top=heard, subject="heard"),
                                   trust_policy=OWN, arrived=True)
    ids = [imported.message_id, listened.message_id]
    before = await trust_of(conn, ids)
    assert [before[i].verdict for i in ids] == ["none", "pass"]
    await reindex(conn, trust_policy=TrustPolicy.from_settings(settings), listener_id=OURS)
    after = await trust_of(conn, ids)
    assert [after[i].verdict for i in ids] == ["none", "pass"]
