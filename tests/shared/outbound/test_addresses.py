"""Recipient checks (shared.outbound.addresses): addr-specs, A-labels, names, counts."""

from __future__ import annotations

import pytest

from shared.errors import ErrorCode, PylotaError
from shared.outbound.addresses import (MAX_PER_LIST, Mailbox, check_counts, mailbox_of,
                                       own_mailbox, recipients)
from shared.outbound.model import Recipient


@pytest.mark.parametrize(("item", "expected"), [
    ("jo@example.com", Mailbox(address="jo@example.com")),
    ("a" * 64 + "@example.com", Mailbox(address="a" * 64 + "@example.com")),
    ("Jo@EXAMPLE.com", Mailbox(address="Jo@example.com")),
    ("Jo Lee <jo@example.com>", Mailbox(address="jo@example.com", name="Jo Lee")),
    ('"Lee, Jo" <jo@example.com>', Mailbox(address="jo@example.com", name="Lee, Jo")),
    ("ann@bücher.de", Mailbox(address="ann@xn--bcher-kva.de")),
    (Recipient(address="ann@Bücher.de", name="Ann Müller"),
     Mailbox(address="ann@xn--bcher-kva.de", name="Ann Müller")),
])
def test_accepted_recipients_leave_in_ascii(item, expected):
    assert mailbox_of("to[0]", item) == expected


@pytest.mark.parametrize("item", [
    "not an address", "jo@", "@example.com", "jo@localhost", "jo@[192.0.2.1]", "jö@example.com",
    "jo@example.com\r\nBcc: evil@example.net", "a@example.com, b@example.com",
    Recipient(address="Jo <jo@example.com>"),
    Recipient(address="jo@example.com", name="Jo\r\nBcc: evil@example.net"),
    "a" * 65 + "@example.com",  # RFC 5321 section 4.5.3.1.1: 64 octets (found by an attack)
])
def test_refused_recipients_name_their_path(item):
    with pytest.raises(PylotaError) as caught:
        mailbox_of("cc[3]", item)
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.details["path"] == "cc[3]"


def test_a_list_keeps_each_address_once():
    boxes = recipients("to", ["jo@example.com", "JO@example.com", "Jo <jo@Example.com>"])
    assert boxes == [Mailbox(address="jo@example.com")]


def test_counts_per_list_and_over_all_lists():
    many = [Mailbox(address=f"p{i}@example.com") for i in range(MAX_PER_LIST + 1)]
    with pytest.raises(PylotaError) as caught:
        check_counts({"to": many[:1], "cc": many}, 147)
    assert caught.value.code is ErrorCode.TOO_MANY_RECIPIENTS
    assert caught.value.details["path"] == "cc"
    lists = {"to": many[:20], "cc": many[20:40], "bcc": many[40:49]}
    assert check_counts(lists, 49) == 49
    with pytest.raises(PylotaError) as caught:
        check_counts(lists, 48)
    assert caught.value.code is ErrorCode.TOO_MANY_RECIPIENTS
    assert caught.value.details == {"limit": 48, "count": 49}
    # the same address in two lists is one recipient
    assert check_counts({"to": many[:1], "cc": many[:1]}, 1) == 1


def test_our_own_address_gets_an_a_label_and_a_safe_name():
    box = own_mailbox("desk@bücher.de", "Desk\r\nBcc: x")
    assert box == Mailbox(address="desk@xn--bcher-kva.de", name="DeskBcc: x")
