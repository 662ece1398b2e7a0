"""Hostile files end unavailable or skipped within the per-file limit (shared.extract.sandbox):
a zip bomb, a looping page tree, encryption, an oversize file, a parser that runs too long in
wall time or CPU time, one that runs out of memory; and the next file still extracts."""

from __future__ import annotations

import asyncio
import io
import os
import time
import zipfile

import pytest

from shared.extract.detect import AttachmentType
from shared.extract.limits import DEFAULT_LIMITS, Limits
from shared.extract.outcome import Outcome, Reason, TextStatus
from shared.extract.sandbox import extract, run_sandboxed
from tests.shared.extract import documents
from tests.shared.extract.sandboxes import sandbox_pids

OCTET = "application/octet-stream"
#: Seconds a killed sandbox may take past its limit to be reaped and reported.
MARGIN = 5.0


async def timed(content: bytes, limits: Limits = DEFAULT_LIMITS,
                filename: str | None = None) -> tuple[Outcome, float]:
    started = time.monotonic()
    async with asyncio.timeout(limits.wall_seconds + MARGIN):
        outcome = await extract(content, content_type=OCTET, filename=filename, limits=limits)
    return outcome, time.monotonic() - started


def failed(outcome: Outcome) -> tuple[str, str | None]:
    return outcome.status.value, outcome.reason.value if outcome.reason else None


@pytest.fixture(scope="module")
def slow_pdf() -> bytes:
    return documents.slow_pdf()


async def test_a_zip_bomb_docx_is_skipped_from_its_directory():
    outcome, seconds = await timed(documents.zip_bomb_docx(), filename="bomb.docx")
    assert failed(outcome) == ("skipped", "compression_ratio")
    assert seconds < DEFAULT_LIMITS.wall_seconds


async def test_a_zip_declaring_too_much_in_total_is_skipped():
    limits = Limits(max_uncompressed_bytes=10_000)
    outcome, _ = await timed(documents.docx_file([["fine"]]), limits, "big.docx")
    assert failed(outcome) == ("skipped", "uncompressed_size")
    many = Limits(max_zip_members=3)
    outcome, _ = await timed(documents.docx_file([["fine"]]), many, "many.docx")
    assert failed(outcome) == ("skipped", "too_many_members")


async def test_a_pdf_whose_page_tree_loops_is_unavailable():
    outcome, seconds = await timed(documents.pdf(["loop"], kids_loop=True), filename="loop.pdf")
    assert failed(outcome) == ("unavailable", "corrupt")
    assert seconds < DEFAULT_LIMITS.wall_seconds


async def test_an_encrypted_pdf_is_unavailable_encrypted():
    content = documents.encrypted_pdf("Secret salary figures", user_password="hunter2")
    outcome, _ = await timed(content, filename="salaries.pdf")
    assert failed(outcome) == ("unavailable", "encrypted")
    assert outcome.pages == []


async def test_an_oversize_file_is_skipped_without_a_sandbox():
    content = b"%PDF-1.4\n" + bytes(DEFAULT_LIMITS.max_input_bytes)
    outcome, seconds = await timed(content, filename="huge.pdf")
    assert failed(outcome) == ("skipped", "too_large")
    assert seconds < 1


async def test_an_unsupported_type_is_skipped():
    outcome, _ = await timed(b"\x89PNG\r\n\x1a\n" + bytes(100), filename="photo.png")
    assert failed(outcome) == ("skipped", "unsupported_type")


async def test_too_many_pages_are_skipped():
    outcome, _ = await timed(documents.pdf(["a", "b", "c"]), Limits(max_pages=2))
    assert failed(outcome) == ("skipped", "too_many_pages")


async def test_a_parser_that_runs_past_the_wall_limit_is_killed(slow_pdf):
    limits = Limits(wall_seconds=2.0)
    outcome, seconds = await timed(slow_pdf, limits)
    assert failed(outcome) == ("unavailable", "timeout")
    assert limits.wall_seconds <= seconds < limits.wall_seconds + MARGIN


async def test_a_parser_that_uses_up_its_cpu_time_is_killed(slow_pdf):
    outcome, seconds = await timed(slow_pdf, Limits(cpu_seconds=1, wall_seconds=60.0))
    assert failed(outcome) == ("unavailable", "cpu_time")
    assert seconds < 30


async def test_a_parser_that_runs_out_of_memory_is_unavailable():
    # 16 MB of CJK text becomes far more than 100 MB of Python strings while it is cleaned.
    content = ("\u6f22\u5b57\u30c6\u30ad\u30b9\u30c8 " * 900_000).encode()
    outcome = await run_sandboxed(content, AttachmentType.TXT,
                                  Limits(memory_bytes=100 * 1024 * 1024))
    assert failed(outcome) == ("unavailable", "memory")


async def test_after_each_hostile_file_the_next_file_still_extracts(slow_pdf):
    # A wall limit well above a small file's read even on a loaded machine, well below the
    # slow PDF's 20 CPU seconds.
    limits = Limits(wall_seconds=6.0)
    hostile = [documents.zip_bomb_docx(), documents.pdf(["x"], kids_loop=True),
               documents.encrypted_pdf("x", user_password="pw"), slow_pdf]
    for content in hostile:
        bad, _ = await timed(content, limits)
        assert bad.status in (TextStatus.UNAVAILABLE, TextStatus.SKIPPED)
        good, _ = await timed(documents.pdf(["still working"]), limits)
        assert (good.status, good.pages) == (TextStatus.READY, ["still working"])


async def test_cancelling_the_caller_kills_the_sandbox(slow_pdf):
    task = asyncio.create_task(run_sandboxed(slow_pdf, AttachmentType.PDF, DEFAULT_LIMITS))
    async with asyncio.timeout(10):
        while not sandbox_pids(os.getpid()):
            await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sandbox_pids(os.getpid()) == []


def test_reasons_say_whether_a_file_was_skipped_or_unavailable():
    assert Outcome.failed(Reason.TOO_LARGE).status is TextStatus.SKIPPED
    assert Outcome.failed(Reason.TIMEOUT).status is TextStatus.UNAVAILABLE


async def test_a_parser_printing_the_broken_file_does_not_corrupt_its_result():
    """odfpy prints "SAX FAILED TO PARSE" and the file's content on stdout, where the sandbox's
    result leaves: a broken ODT ended "crashed" (found by an attack). It is corrupt."""
    source = zipfile.ZipFile(io.BytesIO(documents.odt_file([["fine"]])))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as broken:
        for item in source.infolist():
            data = b"<<< not xml at all" if item.filename == "content.xml" else \
                source.read(item.filename)
            broken.writestr(item, data)
    outcome, _ = await timed(out.getvalue(), filename="broken.odt")
    assert failed(outcome) == ("unavailable", "corrupt")


async def test_a_page_tree_past_the_pdf_librarys_own_cap_is_too_many_pages():
    """A /Count of 200,000 Kids trips pypdf's LimitReachedError: that is too many pages, not a
    corrupt file (found by an attack)."""
    kids = b" ".join([b"3 0 R"] * 200_000)
    content = documents.raw_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count 200000 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"])
    outcome, _ = await timed(content, filename="many.pdf")
    assert failed(outcome) == ("skipped", "too_many_pages")
