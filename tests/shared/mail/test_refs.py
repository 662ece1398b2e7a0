"""Reference extraction and lookup forms (``shared.mail.refs``): pure, no database."""

from __future__ import annotations

import pytest

from shared.mail.refs import MAX_REF_CHARS, MAX_REFS, TEXT_CHARS, extract_refs, lookup_forms, normalize

EXTRACTED = [
    ("Vehicle AB12 CDE was seen", ("plate", "AB12CDE")),
    ("plate ab12cde", ("plate", "AB12CDE")),
    ("Invoice INV-2026-0042 attached", ("invoice", "INV20260042")),
    ("invoice no. 55123", ("invoice", "55123")),
    ("Order #A-77 shipped", ("order", "A77")),
    ("purchase order: PO 4471", ("order", "PO4471")),
    ("Claim no. CLM 88-1234", ("claim", "CLM881234")),
    ("PCN: WK05123456", ("pcn", "WK05123456")),
    ("Penalty Charge Notice WK05123457", ("pcn", "WK05123457")),
    ("Our ref: XK-99-17", ("reference", "XK9917")),
    ("Total £1,234.50 due", ("amount", "GBP1234.50")),
    ("Total £1,234.50 due", ("amount", "1234.50")),
    ("costs $20", ("amount", "USD20.00")),
    ("EUR 99.9 only", ("amount", "EUR99.90")),
    ("99.90 EUR only", ("amount", "EUR99.90")),
    ("Call +44 20 7946 0018", ("phone", "+442079460018")),
    ("Call +44 20 7946 0018", ("phone", "02079460018")),
    ("Call (020) 7946-0018", ("phone", "02079460018")),
    # numbers without their keyword: a capitals prefix names the kind
    ("Our purchase order number is PO-44817.", ("order", "PO44817")),
    ("Please quote PO-44817 on the invoice", ("order", "PO44817")),
    ("Please quote PO-44817 on the invoice", ("order", "44817")),
    ("Re: INV-2026-0042", ("invoice", "INV20260042")),
    ("see CLM/5531", ("claim", "CLM5531")),
    ("Ticket KT09917332 issued", ("reference", "KT09917332")),
    # older UK plates and French plates, in capitals
    ("Van A123 BCD is ready", ("plate", "A123BCD")),
    ("Van ABC 123D is ready", ("plate", "ABC123D")),
    ("Van AB-123-CD is ready", ("plate", "AB123CD")),
    # North American numbers
    ("Call (415) 555-0134", ("phone", "+14155550134")),
    ("Call 415.555.0134", ("phone", "4155550134")),
    ("Call +1 415 555 0134", ("phone", "4155550134")),
]


@pytest.mark.parametrize(("text", "ref"), EXTRACTED, ids=[f"{t}->{r[1]}" for t, r in EXTRACTED])
def test_extracts(text: str, ref: tuple[str, str]) -> None:
    assert ref in extract_refs("", text)


@pytest.mark.parametrize("text", ["order of events", "claim it back", "PCN", "Call 12345",
                                  "year 2026", "version 1.2.3", "AB12CDEF", "about 300 people",
                                  "q3 for the board", "a123 bcd", "UTF-8", "on 2026-11-30",
                                  "ab-123-cd", "Po-44817",
                                  # patches: hashes, index lines, #defines, shell arguments
                                  "index 22550f7..cd14fec 100644",
                                  "index 0000000..1080b96", "#define RFC1001_PORT 139",
                                  "#define CIFS_PORT 445", "echo $1 > out", "a_ab12cde_b"])
def test_does_not_extract(text: str) -> None:
    assert extract_refs("", text) == []


def test_subject_counts_and_order_is_first_seen() -> None:
    refs = extract_refs("Claim 7781", "PCN WK05123456, claim 7781 again")
    assert refs == [("claim", "7781"), ("pcn", "WK05123456")]


def test_a_keyed_number_is_not_also_a_bare_reference() -> None:
    refs = extract_refs("Penalty charge notice PCN KT09917332", "")
    assert ("pcn", "KT09917332") in refs and {kind for kind, _ in refs} == {"pcn"}


def test_custom_patterns_match_whole_normalized_values() -> None:
    patterns = {"booking": "[A-Z]{3}[0-9]{3}"}
    assert ("custom:booking", "XKA123") in extract_refs("", "booking xka-123 ok", patterns)
    assert ("custom:booking", "XKA123") in extract_refs("", "it is XKA 123", patterns)
    assert not [r for r in extract_refs("", "XKA1234 and AXKA123", patterns)
                if r[0] == "custom:booking"]


def test_at_most_max_refs() -> None:
    text = " ".join(f"invoice {n}" for n in range(1000, 1000 + 3 * MAX_REFS))
    assert len(extract_refs("", text)) == MAX_REFS


@pytest.mark.parametrize(("typed", "finds"), [
    ("AB12 CDE", "AB12CDE"),
    ("inv-2026-0042", "INV20260042"),
    ("#55123", "55123"),
    ("£1,234.5", "GBP1234.50"),
    ("1234.50", "1234.50"),
    ("+44 20 7946 0018", "02079460018"),
    ("020 7946 0018", "+442079460018"),
    ("+1 415 555 0134", "4155550134"),
    ("PO-44817", "PO44817"),
])
def test_lookup_forms(typed: str, finds: str) -> None:
    assert finds in lookup_forms(normalize(typed))


def test_a_bare_integer_is_not_an_amount() -> None:
    assert lookup_forms("500") == ["500"]


def test_only_the_start_of_a_huge_text_is_read() -> None:
    text = "x" * TEXT_CHARS + " invoice 5512"
    assert extract_refs("", text) == []
    assert extract_refs("", text[-20:]) == [("invoice", "5512")]


@pytest.mark.parametrize("text", [
    "Total: £" + "1" * 5000,
    "Total: $" + "7" * 4400,
    "£1" + ",000" * 3000,
    "PO-" + "4" * 4000,
    "INVOICE " + " ".join("7" * 4000),
])
def test_huge_numbers_are_not_references(text: str) -> None:
    assert all(len(value) <= MAX_REF_CHARS for _, value in extract_refs("", text))


def test_a_custom_pattern_never_yields_a_huge_value() -> None:
    refs = extract_refs("", "see ABC" + "1" * 4000, {"booking": "[A-Z]{3}[0-9]+"})
    assert not [r for r in refs if r[0] == "custom:booking"]
