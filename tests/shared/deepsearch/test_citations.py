"""The citation check (``shared.deepsearch.citations``): pure, on hand-made messages."""

from __future__ import annotations

from datetime import datetime, timezone

from shared.deepsearch.citations import Claim, check_claims, supported
from shared.deepsearch.reading import ReadMessage

OFFSITE = ReadMessage(
    id="msg_01AAAAAAAAAAAAAAAAAAAAAAAA", thread_id="thr_01AAAAAAAAAAAAAAAAAAAAAAAA",
    rfc_message_id="offsite-1", in_reply_to=(), subject="Q3 offsite venue",
    from_name="Ann Example", from_address="ann@acme.example",
    date=datetime(2026, 9, 7, 23, 30, tzinfo=timezone.utc),
    own_text="We booked the Lakeside Hall for the Q3 offsite.\nThe offsite budget is 12,000 EUR.")
READ = {OFFSITE.id: OFFSITE}


def claim(text: str, *cites: str) -> Claim:
    return Claim(text=text, cites=cites or (OFFSITE.id,))


def test_a_verbatim_quote_with_its_sender_and_date_is_supported() -> None:
    assert supported(claim("Ann Example wrote on 7 September 2026: “The offsite budget is "
                           "12,000 EUR.”"), READ, "UTC")


def test_dates_are_read_in_the_time_zone_too() -> None:
    # 23:30 UTC on the 7th is the 8th in Berlin
    assert supported(claim("Ann Example wrote on 8 September 2026: “The offsite budget is "
                           "12,000 EUR.”"), READ, "Europe/Berlin")
    assert not supported(claim("Ann Example wrote on 9 September 2026: “The offsite budget is "
                               "12,000 EUR.”"), READ, "Europe/Berlin")


def test_a_quote_the_message_does_not_hold_is_removed() -> None:
    assert not supported(claim("Ann Example wrote: “The offsite budget is 15,000 EUR.”"), READ,
                         "UTC")


def test_a_paraphrase_is_supported_when_its_facts_are_in_the_message() -> None:
    assert supported(claim("The Q3 offsite budget is 12,000 EUR"), READ, "UTC")
    assert supported(claim("Ann booked the Lakeside Hall for the offsite"), READ, "UTC")


def test_a_number_name_or_identifier_the_message_lacks_is_removed() -> None:
    assert not supported(claim("The Q3 offsite budget is 99,000 EUR"), READ, "UTC")
    assert not supported(claim("Bob booked the Lakeside Hall for the offsite"), READ, "UTC")
    assert not supported(claim("The offsite is guarded by CONFIG_X86_X2APIC"), READ, "UTC")


def test_mostly_new_words_are_removed() -> None:
    assert not supported(claim("The offsite was cancelled because of storms and flooding"),
                         READ, "UTC")


def test_citing_nothing_or_a_message_not_read_is_removed() -> None:
    assert not supported(Claim(text="The offsite budget is 12,000 EUR", cites=()), READ, "UTC")
    assert not supported(claim("The offsite budget is 12,000 EUR", OFFSITE.id,
                               "msg_01BBBBBBBBBBBBBBBBBBBBBBBB"), READ, "UTC")


def test_check_claims_keeps_order_and_splits() -> None:
    good = claim("The offsite budget is 12,000 EUR")
    bad = claim("The offsite budget is 99,000 EUR")
    assert check_claims([bad, good, bad], READ, "UTC") == ([good], [bad, bad])
