"""Every operator of the query language against stored mail on a real PostgreSQL
(``shared.search.compile`` through ``shared.search.keyword.where_sql``; spec sections 4.3, 6.1)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from shared.search.keyword import Filters, Scope, where_sql
from shared.mail.patterns import set_pattern
from shared.search.query import parse
from tests.shared.search.conftest import OWN, Mailbox

PATTERNS = {"booking": "[A-Z]{3}[0-9]{3}"}
SUMMER_MIDNIGHT = "Wed, 01 Jul 2026 23:30:00 +0000"  # 2 July 00:30 in London (BST)


@pytest.fixture
async def box(mailbox: Mailbox) -> Mailbox:
    await set_pattern(mailbox.conn, mailbox.tenant_id, "booking", PATTERNS["booking"])
    await mailbox.add("inv-1", subject="Invoice INV-2026-0042",
                      body="Please pay £1,234.50 by Friday. Questions: call 020 7946 0018.",
                      date="Mon, 02 Nov 2026 10:00:00 +0000",
                      attachment=("invoice-0042.pdf", "application/pdf", b"%PDF-1.4 fake"))
    await mailbox.add("reply-1", sender=OWN, to="Jo <jo@brightwell.example>",
                      subject="Re: Invoice INV-2026-0042", body="Paid, thanks.",
                      date="Tue, 03 Nov 2026 09:00:00 +0000", in_reply_to="inv-1")
    await mailbox.add("plate-1", sender="parking@council.example", subject="Penalty Charge Notice",
                      body="Vehicle ab12 cde received PCN WK05123456 on Hill Street.",
                      date="Tue, 10 Nov 2026 12:00:00 +0000")
    await mailbox.add("booking-1", sender="travel@trips.example", subject="Your trip",
                      body="Your reservation xka-123 is confirmed.", date=SUMMER_MIDNIGHT)
    await mailbox.add("news-1", sender="news@shop.example", subject="Big sale",
                      body="Everything must go.", date="Thu, 05 Nov 2026 08:00:00 +0000",
                      headers={"List-Id": "<offers.shop.example>"})
    await mailbox.add("ask-1", sender="Ann Lee <ann@clients.example>", subject="Change of dates",
                      body="Could we discuss a change of dates for the visit?",
                      date="Fri, 06 Nov 2026 15:00:00 +0000")
    await mailbox.add("noreply-1", sender="no-reply@service.example", subject="Your code",
                      body="Code 4411.", date="Sat, 07 Nov 2026 15:00:00 +0000")
    await mailbox.add("auto-1", sender="bob@brightwell.example", subject="Out of office",
                      body="I am away.", date="Sat, 07 Nov 2026 16:00:00 +0000",
                      headers={"Auto-Submitted": "auto-replied"})
    await mailbox.add("quoted", sender="bob@brightwell.example", subject="Fwd: payment",
                      body="See below.\n\n> Invoice INV-2026-0042 is attached.",
                      date="Sun, 08 Nov 2026 10:00:00 +0000")
    await mailbox.conn.execute("UPDATE messages SET labels = '{claims}' WHERE id = $1",
                               mailbox.ids["plate-1"])
    return mailbox


async def found(box: Mailbox, q: str) -> set[str]:
    scope = Scope(identity_ids=[box.identity_id], as_of=datetime.now(timezone.utc),
                  time_zone="Europe/London")
    where, params, _ = where_sql(scope, parse(q, custom_patterns=PATTERNS).root, Filters())
    rows = await box.conn.fetch(f"SELECT m.id FROM messages m WHERE {where}", *params)
    return box.mids(r["id"] for r in rows)


CASES = [
    ("from:jo@brightwell.example", {"inv-1"}),
    ("from:@brightwell.example", {"inv-1", "auto-1", "quoted"}),
    ("from:ann", {"ask-1"}),
    ('from:"ann lee"', {"ask-1"}),
    ("to:jo@brightwell.example", {"reply-1"}),
    ("participant:jo@brightwell.example", {"inv-1", "reply-1"}),
    ("to:@brightwell.example", {"reply-1"}),
    # LIKE's wildcards are letters like any other (to:@% matched every recipient)
    ("to:@%", set()),
    ("participant:@%.example", set()),
    ("to:@brightwell_example", set()),
    ('subject:"change of"', {"ask-1"}),
    # ref: plates, invoice and PCN numbers, amounts, phone numbers; spacing and case do not matter
    ("ref:AB12CDE", {"plate-1"}),
    ('ref:"ab12 cde"', {"plate-1"}),
    ("ref:WK05123456", {"plate-1"}),
    ("ref:inv-2026-0042", {"inv-1", "reply-1", "quoted"}),
    ("ref:£1,234.50", {"inv-1"}),
    ("ref:1234.50", {"inv-1"}),
    ("ref:+442079460018", {"inv-1"}),
    ('ref:"020 7946 0018"', {"inv-1"}),
    ("ref:XX99ZZZ", set()),
    ("custom:booking:XKA123", {"booking-1"}),
    ("custom:booking:xka-123", {"booking-1"}),
    # dates in the tenant's zone (Europe/London)
    ("after:2026-07-02 before:2026-07-03", {"booking-1"}),
    ("before:2026-07-02", set()),
    ("after:2026-07-01T23:00:00Z before:2026-07-02T00:00:00Z", {"booking-1"}),
    ("older_than:100d", {"booking-1"}),
    ("newer_than:100d -older_than:100d", {"inv-1", "reply-1", "plate-1", "news-1", "ask-1",
                                          "noreply-1", "auto-1", "quoted"}),
    ("has:attachment", {"inv-1"}),
    ("filename:invoice", {"inv-1"}),
    ("type:pdf", {"inv-1"}),
    ("type:image", set()),
    ("in:outbound", {"reply-1"}),
    ("is:read", {"reply-1"}),
    ("is:unread from:@brightwell.example", {"inv-1", "auto-1", "quoted"}),
    # needs a reply: inbound, last in its thread, not a list, auto-reply or no-reply sender
    ("is:needs_reply", {"plate-1", "booking-1", "ask-1", "quoted"}),
    ("label:claims", {"plate-1"}),
    ('"change of dates"', {"ask-1"}),
    ("invoice", {"inv-1", "reply-1", "quoted"}),
    ("invoice -from:@brightwell.example", {"reply-1"}),
    ("ref:AB12CDE OR custom:booking:XKA123", {"plate-1", "booking-1"}),
    ("invoice OR sale from:@shop.example", {"news-1"}),
    # categories from triage at ingest (shared.mail.triage)
    ("category:billing", {"inv-1", "reply-1", "quoted"}),
    ("category:legal", {"plate-1"}),
    ("category:newsletter", {"news-1"}),
    ("category:notification", {"noreply-1", "auto-1"}),
    ("category:spam", set()),
    ("category:billing -in:outbound", {"inv-1", "quoted"}),
    ("category:legal OR category:newsletter", {"plate-1", "news-1"}),
]


@pytest.mark.parametrize(("q", "expected"), CASES, ids=[c[0] for c in CASES])
async def test_operator_matches(box: Mailbox, q: str, expected: set[str]) -> None:
    assert await found(box, q) == expected


async def test_thread_operator(box: Mailbox) -> None:
    thread_id = await box.conn.fetchval("SELECT thread_id FROM messages WHERE id = $1",
                                        box.ids["inv-1"])
    assert await found(box, f"thread:{thread_id}") == {"inv-1", "reply-1"}


async def test_a_reply_takes_needs_reply_away(box: Mailbox) -> None:
    await box.add("answer", sender=OWN, to="ann@clients.example", subject="Re: Change of dates",
                  body="Yes.", date="Sat, 07 Nov 2026 09:00:00 +0000", in_reply_to="ask-1")
    assert "ask-1" not in await found(box, "is:needs_reply")
