"""Organizational domains, "within" and lookalike domains (``shared.mail.domains``); pure."""

from __future__ import annotations

import pytest

from shared.mail.domains import (
    MIN_TYPO_CHARS, is_within, lookalike_of, normalize_domain, organizational_domain,
)


def test_organizational_domains_follow_the_public_suffix_list() -> None:
    assert organizational_domain("mail.acme.co.uk") == "acme.co.uk"
    assert organizational_domain("Accounts.Example.COM.") == "example.com"
    assert organizational_domain("co.uk") is None
    assert organizational_domain("") is None


def test_within_means_equal_or_below_and_never_a_public_suffix() -> None:
    assert is_within("accounts.example.com", "example.com")
    assert is_within("example.com", "EXAMPLE.com")
    assert not is_within("example.com", "accounts.example.com")
    assert not is_within("badexample.com", "example.com")
    assert not is_within("evil.co.uk", "co.uk")
    assert not is_within("example.com", "com")


def test_punycode_is_read_as_unicode() -> None:
    assert normalize_domain("xn--pple-43d.com") == "аpple.com"  # Cyrillic а


REFERENCES = ["acme-corp.com", "paypal.com", "microsoft.com", "acme.example", "bt.com"]


@pytest.mark.parametrize(("sender", "imitated"), [
    ("paypa1.com", "paypal.com"),            # 1 for l
    ("xn--pypal-4ve.com", "paypal.com"),     # Cyrillic а
    ("rnicrosoft.com", "microsoft.com"),     # rn for m
    ("acmecorp.com", "acme-corp.com"),       # one deletion
    ("acme-crop.com", "acme-corp.com"),      # two letters swapped
    ("acme-corp.co", "acme-corp.com"),       # another suffix, one edit away
    ("acme-corp.com.login-check.net", "acme-corp.com"),  # the real name as labels
    ("mail.acme.exarnple", "acme.example"),
])
def test_lookalikes(sender: str, imitated: str) -> None:
    assert lookalike_of(sender, REFERENCES) == imitated


@pytest.mark.parametrize("sender", [
    "paypal.com", "mail.paypal.com", "accounts.acme-corp.com",  # the organization itself
    "bp.com",        # one edit from bt.com, but too short to say
    "example.org", "python.org", "acme-cars.com",
])
def test_not_lookalikes(sender: str) -> None:
    assert len("bt.com") < MIN_TYPO_CHARS
    assert lookalike_of(sender, REFERENCES) is None
