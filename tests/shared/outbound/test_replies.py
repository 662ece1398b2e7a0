"""Who a reply goes to (shared.outbound.replies): Reply-To safety, reply-all, automated mail."""

from __future__ import annotations

import pytest

from shared.errors import ErrorCode, PylotaError
from shared.mail.model import Address
from shared.mail.records import HeaderField
from shared.outbound.addresses import MAX_PER_LIST, Mailbox
from shared.outbound.replies import (REPLY_TO_OTHER_DOMAIN, automated_reason, reply_addressing,
                                     sender_for)
from tests.shared.outbound.test_compose import parent

OWN = ["desk@acme.example", "sales@acme.example"]


def addrs(*items: str) -> list[Address]:
    return [Address(address=a) for a in items]


def test_a_reply_goes_to_the_sender_from_the_address_written_to():
    got = reply_addressing(parent(to=addrs("sales@acme.example", "bo@example.net")), OWN,
                           reply_all=False)
    assert got.sender == "sales@acme.example"
    assert got.to == [Mailbox(address="jo@example.com", name="Jo")] and got.cc == []
    assert got.flags == []


def test_reply_to_is_honoured_and_flagged_on_another_domain():
    same = reply_addressing(parent(reply_to=addrs("help@mail.example.com")), OWN, reply_all=False)
    assert [b.address for b in same.to] == ["help@mail.example.com"] and same.flags == []
    other = reply_addressing(parent(reply_to=addrs("collect@elsewhere.example")), OWN,
                             reply_all=False)
    assert [b.address for b in other.to] == ["collect@elsewhere.example"]
    assert other.flags == [REPLY_TO_OTHER_DOMAIN]


def test_reply_to_our_own_or_unusable_addresses_falls_back_to_from():
    got = reply_addressing(parent(reply_to=addrs("DESK@acme.example", "nonsense")), OWN,
                           reply_all=False)
    assert [b.address for b in got.to] == ["jo@example.com"] and got.flags == []


def test_replies_go_to_addresses_as_the_parent_spelled_them():
    """The store lower-cases addr-specs, but a local part may be case-sensitive (RFC 5321
    section 2.4): a reply went to a gmane token lower-cased (found by a new user)."""
    token = "JustinMattock-Re5JQEeQqe8AvxtiuMwx3w@public.gmane.org"
    got = reply_addressing(parent(
        from_=Address(address=token.lower(), name="Justin"),
        to=addrs("desk@acme.example"), cc=addrs("bo.smith@example.net"),
        headers=[HeaderField("From", f"Justin Mattock <{token}>"),
                 HeaderField("To", "Desk <DESK@acme.example>"),
                 HeaderField("CC", "=?utf-8?q?B=C3=B6?= <Bo.Smith@Example.NET>")]),
        OWN, reply_all=True)
    assert [b.address for b in got.to] == [token]
    assert [b.address for b in got.cc] == ["Bo.Smith@example.net"]  # domains lower-cased
    assert got.sender == "desk@acme.example"


def test_reply_all_adds_to_and_cc_minus_ours_never_bcc():
    got = reply_addressing(parent(to=addrs("desk@acme.example", "bo@example.net"),
                                  cc=addrs("sales@acme.example", "cy@example.org",
                                           "jo@example.com")),
                           OWN, reply_all=True)
    assert got.sender == "desk@acme.example"
    assert [b.address for b in got.to] == ["jo@example.com"]
    assert [b.address for b in got.cc] == ["bo@example.net", "cy@example.org"]


def test_a_reply_to_our_own_message_goes_to_its_recipients():
    ours = parent(from_=Address(address="sales@acme.example"), direction="outbound",
                  to=addrs("jo@example.com"), cc=addrs("bo@example.net", "desk@acme.example"))
    got = reply_addressing(ours, OWN, reply_all=True)
    assert got.sender == "sales@acme.example"
    assert [b.address for b in got.to] == ["jo@example.com"]
    assert [b.address for b in got.cc] == ["bo@example.net"]


def test_received_mail_that_names_us_as_its_sender_is_not_answered_as_our_own():
    """Mail that arrived (direction inbound) with our own address in From: anyone can write
    that From (found by an attack through the SMTP listener). Answered as our own, the reply
    went to the recipients the forger chose, unflagged; it is received mail, whose From is
    ours and so left out, which leaves nobody to reply to."""
    forged = parent(from_=Address(address="desk@acme.example"), direction="inbound",
                    to=addrs("target@other.example"), cc=addrs("more@other.example"))
    with pytest.raises(PylotaError) as caught:
        reply_addressing(forged, OWN, reply_all=True)
    assert caught.value.details["path"] == "message_id"
    # With a Reply-To elsewhere it goes there, flagged as any redirect is.
    redirected = parent(from_=Address(address="desk@acme.example"), direction="inbound",
                        to=addrs("sales@acme.example"), reply_to=addrs("collect@evil.example"))
    got = reply_addressing(redirected, OWN, reply_all=False)
    assert [b.address for b in got.to] == ["collect@evil.example"]
    assert got.flags == [REPLY_TO_OTHER_DOMAIN]
    assert got.sender == "sales@acme.example"  # the address it was written to, not its From


def test_a_reply_all_past_the_list_limit_names_reply_all():
    """The caller wrote no cc, so an error on ``cc`` with "Keep cc to 49 addresses" could not
    be followed (found by an attack)."""
    crowd = addrs(*(f"p{i}@example.org" for i in range(MAX_PER_LIST + 1)))
    with pytest.raises(PylotaError) as caught:
        reply_addressing(parent(cc=crowd), OWN, reply_all=True)
    assert caught.value.code is ErrorCode.TOO_MANY_RECIPIENTS
    assert caught.value.details == {"path": "reply_all", "limit": MAX_PER_LIST}
    assert "without reply_all" in caught.value.fix
    assert reply_addressing(parent(cc=crowd), OWN, reply_all=False).cc == []


def test_nobody_to_reply_to_is_an_error_on_message_id():
    with pytest.raises(PylotaError) as caught:
        reply_addressing(parent(from_=None, reply_to=[]), OWN, reply_all=True)
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.details["path"] == "message_id"
    assert caught.value.message == "This message has no address a reply could go to."


def test_a_sender_mail_cannot_go_to_is_named():
    """"No address a reply could go to" for mail from jörg@bücher.example read as mail without a
    sender (found by an attack)."""
    with pytest.raises(PylotaError) as caught:
        reply_addressing(parent(from_=Address(address="jörg@bücher.example"), reply_to=[]), OWN,
                         reply_all=False)
    assert caught.value.details["path"] == "message_id"
    assert caught.value.message.startswith(
        "This message's reply address 'jörg@bücher.example' is not one mail can be sent to")
    assert "SMTPUTF8" in caught.value.message


def test_the_sender_of_a_forward_follows_the_same_rule():
    assert sender_for(parent(to=addrs("x@example.com"), cc=addrs("SALES@acme.example")),
                      OWN) == "sales@acme.example"
    assert sender_for(parent(), ["other@acme.example"]) == "other@acme.example"


@pytest.mark.parametrize(("headers", "sender", "reason"), [
    ([("Auto-Submitted", "auto-replied")], "jo@example.com", "Auto-Submitted"),
    ([("Auto-Submitted", "no")], "jo@example.com", None),
    ([("Precedence", "bulk")], "jo@example.com", "Precedence"),
    ([("List-Id", "<dev.example.com>")], "jo@example.com", "mailing list"),
    ([("Content-Type", "multipart/report; report-type=delivery-status")], "jo@example.com",
     "report"),
    ([], "MAILER-DAEMON@example.com", "robot"),
    ([], "no-reply@example.com", "robot"),
    ([], "owner-dev@example.com", "robot"),
    ([], "dev-request@example.com", "robot"),
    ([], "jo@example.com", None),
])
def test_automated_mail_gets_no_auto_reply(headers, sender, reason):
    found = automated_reason(parent(from_=Address(address=sender.lower()),
                                    headers=[HeaderField(n, v) for n, v in headers]))
    assert (found is None) if reason is None else (reason in found)
