"""mail_get_attachment_text's budgets at their boundaries (spec sections 4.2 and 4.3): a page of
32,000 characters is whole and one more is cut; pages are dropped from the end past 96 KB, the
first always kept; every cut result validates against the tool's outputSchema."""

from __future__ import annotations

import msgspec
import pytest
from jsonschema import Draft202012Validator

from shared.budget import RESULT_BYTES
from shared.tools.attachments import PAGE_CHARS, AttachmentPage, AttachmentTextResult, budget
from shared.tools.registry import TOOLS

SCHEMA = Draft202012Validator(next(t for t in TOOLS
                                   if t.name == "mail_get_attachment_text").output_schema)


def result(*texts: str) -> AttachmentTextResult:
    return AttachmentTextResult(
        status="ready", total_pages=len(texts), truncated=False,
        pages=[AttachmentPage(page=n, text=t) for n, t in enumerate(texts, 1)])


def cut(*texts: str) -> dict:
    out = result(*texts)
    budget(out)
    encoded = msgspec.json.encode(out)
    assert len(encoded) <= RESULT_BYTES
    decoded = msgspec.json.decode(encoded)
    SCHEMA.validate(decoded)
    return decoded


def test_a_page_of_exactly_32000_characters_is_whole():
    got = cut("a" * PAGE_CHARS)
    assert got["pages"] == [{"page": 1, "text": "a" * PAGE_CHARS}]
    assert got["truncated"] is False


def test_one_character_more_is_cut_to_32000_ending_with_an_ellipsis():
    got = cut("a" * (PAGE_CHARS + 1), "short")
    first, second = got["pages"]
    assert len(first["text"]) == PAGE_CHARS and first["text"] == "a" * (PAGE_CHARS - 1) + "…"
    assert first["text_truncated"] is True and "text_truncated" not in second
    assert got["truncated"] is True


def test_pages_that_take_the_result_over_96_kb_are_dropped_from_the_end():
    # Three pages of 32,000 two-byte characters: 128,000 bytes; one page more than fits.
    got = cut(*["é" * PAGE_CHARS] * 3)
    assert [p["page"] for p in got["pages"]] == [1]
    assert got["truncated"] is True and got["total_pages"] == 3
    # Three ASCII pages of 32,000 (96,000 bytes) fit within 96 KB (98,304 bytes).
    fits = cut(*["a" * PAGE_CHARS] * 3)
    assert [p["page"] for p in fits["pages"]] == [1, 2, 3] and fits["truncated"] is False


@pytest.mark.parametrize("text", ["\u0001" * PAGE_CHARS, ("\u0002x" * PAGE_CHARS)[:PAGE_CHARS]])
def test_one_page_that_encodes_over_96_kb_is_cut_to_fit(text):
    # Control characters escape to six bytes each in JSON: 32,000 of them are 192,000 bytes.
    got = cut(text)
    page = got["pages"][0]
    assert page["text_truncated"] is True and page["text"].endswith("…")
    assert got["truncated"] is True


def test_results_without_pages_validate():
    for status in ("pending", "unavailable", "skipped"):
        out = AttachmentTextResult(status=status, pages=[], total_pages=None, truncated=False,
                                   reason=None if status == "pending" else "encrypted")
        budget(out)
        SCHEMA.validate(msgspec.json.decode(msgspec.json.encode(out)))
