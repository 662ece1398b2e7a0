"""The extra-header allowlist (shared.outbound.headers, spec section 4.3 ``headers``)."""

from __future__ import annotations

import pytest

from shared.errors import ErrorCode, PylotaError
from shared.outbound.headers import extra_headers


def test_allowed_names_match_case_insensitively():
    fields = extra_headers({"x-campaign": "spring", "X-Ticket_ID-2": "T-9", "importance": "high",
                            "PRIORITY": "urgent", "Sensitivity": "private",
                            "keywords": "a, b", "Comments": "hi", "organization": "Acme"})
    assert fields == [("x-campaign", "spring"), ("X-Ticket_ID-2", "T-9"), ("Importance", "high"),
                      ("Priority", "urgent"), ("Sensitivity", "private"), ("Keywords", "a, b"),
                      ("Comments", "hi"), ("Organization", "Acme")]


@pytest.mark.parametrize("name", ["Bcc", "From", "Message-ID", "Reply-To", "Received", "X-",
                                  "X-Bad Name", "X-ü", "Content-Type", "Return-Path", "Xylophone",
                                  "X-Foo\n", "X-" + "A" * 75])
def test_other_names_are_not_allowed(name):
    with pytest.raises(PylotaError) as caught:
        extra_headers({name: "value"})
    assert caught.value.code is ErrorCode.HEADER_NOT_ALLOWED
    assert caught.value.details["header"] == name
    assert caught.value.details["path"] == f"headers.{name}"  # named as every argument error


def test_a_name_twice_in_two_cases_is_refused():
    with pytest.raises(PylotaError) as caught:
        extra_headers({"X-Tag": "a", "x-tag": "b"})
    assert caught.value.code is ErrorCode.HEADER_NOT_ALLOWED
    assert caught.value.details["path"] == "headers.x-tag"


@pytest.mark.parametrize(("name", "value"), [("Importance", "urgent"), ("Priority", "high"),
                                             ("Sensitivity", "secret"), ("Importance", "High")])
def test_enums_are_checked(name, value):
    with pytest.raises(PylotaError) as caught:
        extra_headers({name: value})
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.details["path"] == f"headers.{name}"
    assert "[" not in caught.value.message  # the values listed as words, not a Python list


@pytest.mark.parametrize("value", ["a\r\nBcc: evil@example.net", "a\nb", "a\rb", "a\x00b"])
def test_a_value_cannot_start_another_field(value):
    with pytest.raises(PylotaError) as caught:
        extra_headers({"X-Note": value})
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.details["path"] == "headers.X-Note"
