"""Spam signals (``shared.mail.spam``) and how triage uses them; pure."""

from __future__ import annotations

from shared.mail.judged import Trust
from shared.mail.spam import SIGNALS, SPAM_SCORE, spam_signals
from shared.mail.triage import TriageInput, triage

SCAM = ("I am Barrister John Okoro, personal attorney to the late Mr. A. Smith, who left the sum"
        " of US$15.5 million. As next of kin you will receive 30% of the total sum once the"
        " transfer of the fund to your foreign account is complete. This is strictly"
        " confidential.")
AD = ("Consolidate your debt and refinance your mortgage at the lowest rates! 100% free quote,"
      " no obligation. Click here to pay your invoice balance due today.\n\nTo be removed from"
      " our mailing list reply with REMOVE in the subject.")
FIRST = Trust(verdict="none", known_sender=False, flags=["first_contact"])


def mail(subject: str, text: str, *, headers: list[tuple[str, str]] | None = None,
         trust: Trust | None = FIRST, sender: str = "offers@deals.example") -> TriageInput:
    return TriageInput(subject=subject, from_address=sender, from_name=None, reply_to=(),
                       headers=[("To", "desk@pylota.example"), *(headers or [])], text=text,
                       attachments=[], trust=trust)


def score(msg: TriageInput) -> float:
    return sum(spam_signals(subject=msg.subject, text=msg.text, headers=msg.headers,
                            from_address=msg.from_address, trust=msg.trust).values())


def test_a_scam_letter_on_a_bulk_list_is_spam_not_a_newsletter() -> None:
    result = triage(mail("Urgent business proposal", SCAM,
                         headers=[("List-Unsubscribe", "<mailto:leave@deals.example>")]))
    assert (result.category, result.automated, result.urgency) == ("spam", True, "low")


def test_an_advertisement_about_invoices_is_spam_not_billing() -> None:
    assert triage(mail("Pay less on your mortgage", AD)).category == "spam"
    # The same words from someone the mailbox wrote to are only an upstream mark away.
    known = Trust(verdict="none", known_sender=True, flags=[])
    assert triage(mail("Pay less on your mortgage", AD, trust=known)).category == "billing"
    assert triage(mail("Pay less", AD, trust=known, headers=[("X-Spam-Flag", "YES")])
                  ).category == "spam"


def test_ordinary_mail_scores_nothing() -> None:
    assert score(mail("Invoice INV-77120 for September", "Please find attached, thanks.",
                      headers=[("Date", "Mon, 02 Nov 2026 10:00:00 +0000"),
                               ("Message-ID", "<a1@client.example>")])) < 1
    assert triage(mail("Meeting on Tuesday?", "Could we meet at 10?")).category == "scheduling"


def test_failed_authentication_and_a_lookalike_domain_count() -> None:
    failed = Trust(verdict="fail", known_sender=False, flags=["dkim_fail", "lookalike_domain"])
    found = spam_signals(subject="Hello", text="Please see the new details.", headers=[],
                         from_address="a@x.example", trust=failed)
    assert {"auth_failed", "lookalike_domain"} <= set(found)
    assert sum(found.values()) >= SPAM_SCORE


def test_header_habits_of_bulk_mailers() -> None:
    found = spam_signals(
        subject="Rates are down                    ptjti", text="Hello.", from_address=None,
        trust=None, headers=[("Date", "Tue, 03 Sep 2002 10:03:14 -1900"),
                             ("Message-ID", "<000078f6546f$0000015d$00003265@smtp.example>"),
                             ("X-Mailer", "bNngf4C0mjSsqJIXFFxHjZeAH9ON5"),
                             ("Content-Type", "text/html")])
    assert {"subject_tracking_token", "malformed_date", "forged_mailer", "random_mailer",
            "html_only", "html_short"} <= set(found)
    no_zone = spam_signals(subject="Hi", text="Hi.", from_address=None, trust=None,
                           headers=[("Date", "Sat, 29 Jun 2002 22:02:47"),
                                    ("Message-ID", "<39895881_74317521>")])
    assert {"malformed_date", "malformed_message_id"} <= set(no_zone)


def test_a_reply_and_a_signature_count_against_spam() -> None:
    plain = score(mail("Re: free offer", AD))
    reply = score(mail("Re: free offer", AD, headers=[("In-Reply-To", "<a@x>")]))
    signed = score(mail("free offer", AD, headers=[("Content-Type", "multipart/signed")]))
    assert reply == plain + SIGNALS["reply"] and signed < plain
    assert SIGNALS["reply"] < 0 and SIGNALS["signed"] < 0
