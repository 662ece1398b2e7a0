"""What a page is (shared.extract.pages): explicit breaks, else pages of about
VIRTUAL_PAGE_CHARS that lose no text; and the size limits on the result."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from shared.extract.limits import DEFAULT_LIMITS, VIRTUAL_PAGE_CHARS, Limits
from shared.extract.outcome import Reason, TextStatus
from shared.extract.pages import BREAK, Flow, clean, finish, paginate


def words(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_form_feeds_are_page_breaks():
    assert paginate(f"one\n{BREAK}two{BREAK}\nthree{BREAK}\n", DEFAULT_LIMITS) == [
        "one", "two", "three"]


def test_text_without_breaks_is_cut_at_paragraph_ends():
    paragraph = ("word " * 150).strip()  # 749 characters
    text = "\n\n".join([paragraph] * 12)
    pages = paginate(text, DEFAULT_LIMITS)
    assert len(pages) == 3
    assert all(len(p) <= VIRTUAL_PAGE_CHARS for p in pages)
    assert all(p.startswith("word") and p.endswith("word") for p in pages)
    assert words("".join(pages)) == words(text)


def test_a_text_without_any_separator_is_cut_hard_and_keeps_every_character():
    text = "x" * (2 * VIRTUAL_PAGE_CHARS + 5)
    assert [len(p) for p in paginate(text, DEFAULT_LIMITS)] == [
        VIRTUAL_PAGE_CHARS, VIRTUAL_PAGE_CHARS, 5]


@given(st.text(alphabet=st.sampled_from("ab \n\t"), max_size=3000),
       st.integers(min_value=20, max_value=400))
def test_virtual_pages_lose_no_text(text, size):
    pages = paginate(text, Limits(virtual_page_chars=size))
    assert all(len(p) <= size for p in pages)
    assert words("".join(pages)) == words(text)


def test_whitespace_only_text_has_no_pages():
    assert paginate(" \n\t\n", DEFAULT_LIMITS) == []


def test_clean_removes_what_postgresql_cannot_store():
    assert clean("a\x00b\r\nc\ud800d  \n\n\n\ne") == "ab\nc?d\n\ne"


def test_flow_never_opens_an_empty_page():
    flow = Flow()
    flow.page_break()
    flow.write("one")
    flow.page_break()
    flow.write("\n")
    flow.page_break()
    flow.write("two")
    assert flow.text() == f"one{BREAK}\ntwo"


def test_finish_cuts_long_pages_and_skips_over_the_limits():
    limits = Limits(max_page_chars=10, max_pages=2, max_text_chars=15)
    ready = finish(["a" * 12, "b"], "pdf", limits)
    assert (ready.status, ready.pages) == (TextStatus.READY, ["a" * 10, "b"])
    assert finish(["a"] * 3, "pdf", limits).reason is Reason.TOO_MANY_PAGES
    too_much = finish(["a" * 10, "b" * 10], "pdf", limits)
    assert (too_much.status, too_much.reason) == (TextStatus.SKIPPED, Reason.TOO_MUCH_TEXT)
