"""``shared.mail.compound``: the words inside the tokens the text search parser reads whole."""

from __future__ import annotations

from shared.mail.compound import MAX_TERMS_CHARS, index_terms


def test_paths_files_addresses_and_hosts_give_their_pieces_and_words() -> None:
    terms = index_terms(
        "[PATCH] mm/hugetlb.c: fix a leak", "jo@brightwell.example",
        "Please see Q3-report.xlsx and invoice_2291.pdf, then edit /etc/pylota/settings.toml.\n"
        "Plain words, a sum of 12 and no compound at all.", ["INV-77120.txt", None])
    lines = terms.split("\n")
    assert lines == [
        "INV-77120.txt", "INV-77120 txt",  # an attachment's file name, whole and in words
        "mm hugetlb.c", "mm hugetlb c",
        "jo brightwell.example", "jo brightwell example",
        "Q3-report xlsx", "invoice 2291 pdf",
        "etc pylota settings.toml", "etc pylota settings toml"]


def test_nothing_compound_gives_nothing_and_the_terms_are_bounded() -> None:
    assert index_terms("Lunch", None, "Team lunch on Friday? Yes.", []) == ""
    many = " ".join(f"dir{n}/file{n}.c" for n in range(20_000))
    assert 0 < len(index_terms("", None, many, [])) <= MAX_TERMS_CHARS
