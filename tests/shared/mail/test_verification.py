"""Verification codes and links for mail_wait (``shared.mail.verification``): extraction (pure),
and the rule that only an authenticated message from the expected domain gives one, on mail
ingested into a real database with its trust."""

from __future__ import annotations

import pytest

from shared.ingest.pipeline import ingest_raw
from shared.mail.judged import Trust
from shared.mail.store import get_message
from shared.mail.trust import TrustPolicy, trust_of
from shared.mail.verification import Verification, extract, names_sender, verification_of
from shared.tenancy.store import create_identity, create_tenant

PASSED = Trust(verdict="pass", known_sender=False, flags=["first_contact"])


@pytest.mark.parametrize(("subject", "text", "code"), [
    ("Your code", "Your verification code is 483920. It expires in 10 minutes.", "483920"),
    ("483920 is your Acme code", "Thanks for signing up.", "483920"),
    ("Sign in", "Enter this one-time code: 483 920", "483920"),
    ("Sign in", "OTP: 4839-2017", "48392017"),
    ("Sign in", "Use code K7XQ2P to finish signing in.", "K7XQ2P"),
    ("PIN reset", "Your new PIN is 8231.", "8231"),
    # Numbers that are not codes: inside links and dates, or far from any code word.
    ("Welcome", "Your code: https://a.example/123456 sent on 2026-11-02 at 10:30", None),
    ("Order 99812 shipped", "It leaves the warehouse today.", None),
])
def test_codes(subject: str, text: str, code: str | None) -> None:
    found = extract(subject, text)
    assert (found.code if found else None) == code


@pytest.mark.parametrize(("text", "link"), [
    ("Confirm your address:\nhttps://accounts.example.com/c/ab12?x=1.\n",
     "https://accounts.example.com/c/ab12?x=1"),
    ("[Verify my email](https://example.com/e/ZX81) or ignore this.", "https://example.com/e/ZX81"),
    ("Go to https://example.com/activate?token=ab12, then sign in.",
     "https://example.com/activate?token=ab12"),
    ("Visit https://example.com/news for news. Verify at http://example.com/verify", None),
])
def test_links(text: str, link: str | None) -> None:
    found = extract("Welcome", text)
    assert (found.link if found else None) == link


def test_from_names_the_domain_or_a_parent() -> None:
    assert names_sender("@example.com", "no-reply@accounts.example.com")
    assert names_sender("no-reply@example.com", "no-reply@example.com")
    assert names_sender("@EXAMPLE.com", "no-reply@example.com")
    assert not names_sender("@accounts.example.com", "no-reply@example.com")
    assert not names_sender("@example.com", "no-reply@example.com.evil.example")
    assert not names_sender("@com", "no-reply@example.com")
    assert not names_sender(None, "no-reply@example.com")


def test_only_a_passed_verdict_and_a_named_domain_give_a_code() -> None:
    args = {"sender": "no-reply@example.com", "subject": "Code", "new_text": "Code: 483920"}
    assert verification_of(**args, trust=PASSED, from_filter="@example.com") == Verification(
        code="483920", link=None)
    for trust in (None, Trust(verdict="none", known_sender=False, flags=[]),
                  Trust(verdict="fail", known_sender=False, flags=["dkim_fail"])):
        assert verification_of(**args, trust=trust, from_filter="@example.com") is None
    assert verification_of(**args, trust=PASSED, from_filter="@other.example") is None
    assert verification_of(**args, trust=PASSED, from_filter=None) is None
    assert verification_of(**{**args, "new_text": "Welcome aboard"}, trust=PASSED,
                           from_filter="@example.com") is None


SIGNUP = (b"From: Example <no-reply@accounts.example.com>\r\nTo: agent@pylota.example\r\n"
          b"Subject: Verify your email\r\nDate: Mon, 02 Nov 2026 10:00:00 +0000\r\n"
          b"Message-ID: <v1@accounts.example.com>\r\n\r\n"
          b"Your verification code is 483920.\r\n"
          b"Or confirm here: https://accounts.example.com/confirm?t=ab12\r\n"
          b"\r\nOn Sun, Nov 1, 2026, Example wrote:\r\n> Your verification code is 111111.\r\n")


@pytest.fixture
async def identity_id(conn) -> str:
    tenant = await create_tenant(conn, "acme")
    return (await create_identity(conn, tenant.id, "agent@pylota.example")).id


async def verification_after(conn, identity_id: str, raw: bytes, policy: TrustPolicy,
                             from_filter: str) -> Verification | None:
    outcome, _ = await ingest_raw(conn, None, identity_id, raw, trust_policy=policy)
    message = await get_message(conn, identity_id, outcome.message_id)
    trust = (await trust_of(conn, [outcome.message_id])).get(outcome.message_id)
    return verification_of(sender=message.from_.address, subject=message.subject,
                           new_text=message.new_text, trust=trust, from_filter=from_filter)


async def test_a_verification_mail_that_passed_gives_its_code_and_link(conn, identity_id,
                                                                       dkim_key, resolver) -> None:
    dkim_key.publish(resolver, "example.com")
    signed = dkim_key.sign(SIGNUP, "example.com")
    found = await verification_after(conn, identity_id, signed, TrustPolicy(resolver=resolver),
                                     "@example.com")
    # The quoted older code (111111) is not taken.
    assert found == Verification(code="483920", link="https://accounts.example.com/confirm?t=ab12")


async def test_a_verification_mail_that_failed_gives_nothing(conn, identity_id, dkim_key,
                                                             resolver) -> None:
    dkim_key.publish(resolver, "example.com")
    forged = dkim_key.sign(SIGNUP, "example.com").replace(b"483920", b"999999")
    assert await verification_after(conn, identity_id, forged, TrustPolicy(resolver=resolver),
                                    "@example.com") is None
    assert (await conn.fetchval("SELECT verdict FROM message_trust")) == "fail"


async def test_an_unauthenticated_verification_mail_gives_nothing(conn, identity_id,
                                                                   resolver) -> None:
    assert await verification_after(conn, identity_id, SIGNUP, TrustPolicy(resolver=resolver),
                                    "@example.com") is None
    assert (await conn.fetchval("SELECT verdict FROM message_trust")) == "none"


async def test_trusted_authentication_results_pass_it_too(conn, identity_id) -> None:
    raw = (b"Authentication-Results: mx.pylota.test; dkim=pass header.d=example.com;"
           b" dmarc=pass header.from=accounts.example.com\r\n") + SIGNUP
    policy = TrustPolicy(trusted_authserv_ids=frozenset({"mx.pylota.test"}))
    found = await verification_after(conn, identity_id, raw, policy, "no-reply@example.com")
    assert found is not None and found.code == "483920"
    assert await verification_after(conn, identity_id, raw.replace(b"v1@", b"v2@"), policy,
                                    "@elsewhere.example") is None
