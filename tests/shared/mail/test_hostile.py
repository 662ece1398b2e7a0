"""Hostile input found by attacking the importer: each case is stored or reported, in bounded time."""

from __future__ import annotations

import base64
import os
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared.ingest.importer import import_paths
from shared.ingest.pipeline import ingest_raw
from shared.mail import budget
from shared.mail.budget import MAX_PARAMS, MAX_PARTS, MAX_RECIPIENTS, Budgeted, apply_budget
from shared.mail.parse import MAX_MSG_IDS, parse_message
from shared.mail.sources import iter_sources
from shared.tenancy.store import create_identity, create_tenant


def test_nul_bytes_in_names_filenames_and_ids_become_replacement_characters():
    raw = (b'From: "Nu\x00ll" <nul@b.example>\r\nTo: a\x00b@x.example\r\nSubject: s\r\n'
           b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
           b"Content-Type: text/plain\r\n\r\nhi\r\n--b\r\n"
           b"Content-Type: application/x-\x00odd; name=x\r\nContent-ID: <a\x00b@x>\r\n"
           b"Content-Disposition: attachment; filename*=utf-8''a%00b.txt\r\n\r\ndata\r\n--b--\r\n")
    parsed = parse_message(raw)
    texts = [parsed.from_.name, *(a.address for a in parsed.to)]
    for att in parsed.attachments:
        texts += [att.filename, att.content_type, att.content_id or ""]
    assert parsed.from_.name == "Nu\ufffdll"
    assert all("\x00" not in t for t in texts)
    assert parsed.attachments[0].content == b"data"


def test_undecodable_filename_is_recorded_as_a_defect():
    raw = (b"From: a@x.example\r\nSubject: s\r\nMIME-Version: 1.0\r\n"
           b"Content-Type: application/octet-stream\r\n"
           b"Content-Disposition: attachment; filename=\"\xff\xfe.bin\"\r\n\r\nxx\r\n")
    parsed = parse_message(raw)
    assert parsed.attachments[0].filename.endswith(".bin")
    assert any(d.startswith("filename:") for d in parsed.defects)


def test_a_huge_references_field_is_linear_and_trimmed():
    ids = " ".join(f"<r{i}@x.example>" for i in range(100_000)).encode()
    raw = b"From: a@x.example\r\nSubject: s\r\nReferences: " + ids + b"\r\n\r\nbody\r\n"
    started = time.monotonic()
    parsed = parse_message(raw)
    assert time.monotonic() - started < 20
    assert len(parsed.references) == MAX_MSG_IDS
    assert parsed.references[0] == "r0@x.example" and parsed.references[-1] == "r99999@x.example"


def test_a_pathological_separator_line_is_body_text(tmp_path: Path):
    box = tmp_path / "evil.mbox"
    box.write_bytes(b"From a@b Mon Jan  1 00:00:00 2024\nSubject: one\n\n"
                    + b"From a " + b"Mon Jan 1 1:00 " * 40_000 + b"\n\nbody\n")
    started = time.monotonic()
    items = list(iter_sources([box]))
    assert time.monotonic() - started < 5
    assert len(items) == 1 and items[0].raw is not None


def test_fifos_and_symlink_loops_are_reported_not_followed(tmp_path: Path):
    maildir = tmp_path / "md"
    (maildir / "cur").mkdir(parents=True)
    (maildir / "new").mkdir()
    (maildir / "cur" / "1.eml").write_bytes(b"From: a@x.example\r\nSubject: s\r\n\r\nb\r\n")
    os.mkfifo(maildir / "new" / "pipe")
    (maildir / "cur" / "loop").symlink_to(maildir)
    items = list(iter_sources([maildir]))
    assert [(Path(i.origin).name, i.problem) for i in items] == [
        ("1.eml", None), ("pipe", "not a regular file")]


async def test_one_bad_message_never_stops_an_import(conn, tmp_path: Path):
    tenant = await create_tenant(conn, "acme")
    identity = await create_identity(conn, tenant.id, "desk@acme.example")
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.eml").write_bytes(b"From: a@x.example\r\nSubject: first\r\n\r\nok\r\n")
    (folder / "b.eml").write_bytes(b'From: "Nu\x00ll" <nul@b.example>\r\nSubject: nul\r\n\r\nx\r\n')
    (folder / "c.eml").write_bytes(b"From: c@x.example\r\nSubject: third\r\n\r\nok\r\n")
    summary = await import_paths(conn, None, identity.id, [folder])
    assert (summary.imported, summary.duplicates, summary.failed) == (3, 0, [])
    assert await conn.fetchval("SELECT count(*) FROM raw_messages") == 3


async def test_deeply_nested_multiparts_are_stored_with_their_raw_bytes(conn, tmp_path: Path):
    tenant = await create_tenant(conn, "acme")
    identity = await create_identity(conn, tenant.id, "desk@acme.example")
    head = b"From: a@x.example\r\nSubject: deep\r\nMIME-Version: 1.0\r\n"
    raw = head + b"".join(b"Content-Type: multipart/mixed; boundary=b%d\r\n\r\n--b%d\r\n" % (i, i)
                          for i in range(5_000))
    (tmp_path / "deep.eml").write_bytes(raw)
    summary = await import_paths(conn, None, identity.id, [tmp_path])
    assert summary.imported == 1 and summary.failed == []
    assert await conn.fetchval("SELECT raw FROM raw_messages") == raw
    assert len(summary.with_defects) == 1


def _random_text(n: int, alphabet: str, seed: int) -> str:
    import random
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


HOSTILE = {
    "amount of 5,000 digits": b"Subject: pay\r\n\r\nTotal: \xc2\xa3" + b"1" * 5000,
    "purchase order of 4,000 digits": b"Subject: po\r\n\r\nPO-" + _random_text(4000, "0123456789", 1).encode(),
    "invoice of 4,000 spaced digits": b"Subject: inv\r\n\r\nINVOICE " + " ".join(_random_text(4000, "0123456789", 2)).encode(),
    "subject of 3,000 random characters": b"Subject: " + _random_text(3000, "abcdefghijklmnopqrstuvwxyz0123456789", 3).encode() + b"\r\n\r\nx",
    "Message-ID of 3,000 characters": b"Message-ID: <" + b"a" * 3000 + b"@x.example>\r\nSubject: id\r\n\r\nx",
    "References of a 3,000-character id": b"References: <" + b"r" * 3000 + b"@x.example>\r\nSubject: Re: id\r\n\r\nx",
    "sender with a 3,000-character local part": b"From: " + b"l" * 3000 + b"@x.example\r\nSubject: from\r\n\r\nx",
    "display name of 100,000 characters": b'From: "' + b"a" * 100_000 + b'" <x@ex.example>\r\nSubject: name\r\n\r\nx',
    "display name holding 100,000 characters around an @": b'From: "' + b"a" * 50_000 + b"@" + b"b" * 50_000 + b'" <x@ex.example>\r\nSubject: n\r\n\r\nx',
    "subject of a megabyte of Re:": b"Subject: " + b"Re: " * 250_000 + b"\r\n\r\nx",
}


async def test_hostile_messages_are_all_stored_and_the_import_goes_on(conn, tmp_path: Path):
    """Each case once crashed an import or took tens of seconds (attack report, issue 4)."""
    tenant = await create_tenant(conn, "acme")
    identity = await create_identity(conn, tenant.id, "desk@acme.example")
    box = tmp_path / "hostile.mbox"
    with box.open("wb") as out:
        for n, raw in enumerate(HOSTILE.values()):
            out.write(b"From x@y Mon Jan  1 00:00:00 2024\n"
                      + f"Message-ID: <h{n}@x.example>\n".encode() * (b"Message-ID" not in raw)
                      + raw.replace(b"\r\n", b"\n") + b"\n\n")
    started = time.monotonic()
    summary = await import_paths(conn, None, identity.id, [box])
    elapsed = time.monotonic() - started
    assert (summary.imported, summary.failed) == (len(HOSTILE), []), summary
    assert await conn.fetchval("SELECT count(*) FROM message_triage") == len(HOSTILE)
    assert elapsed < 60, f"{elapsed:.0f} s for {len(HOSTILE)} messages"
    longest = await conn.fetchrow(
        "SELECT max(length(subject)) AS subject, max(length(from_name)) AS name FROM messages")
    assert longest["subject"] <= 1000 and longest["name"] <= 256


# The parse budget (issue 9, item 7) ---------------------------------------------------------------

#: Bounds of one hostile message through parse and store. Each took 15 to 155 s and up to 284 MB
#: before the budget; now each takes well under 2 s here. The bounds are generous so that a loaded
#: machine never makes the test flaky.
SECONDS_PER_MESSAGE = 10
PEAK_BYTES = 100 * 1024 * 1024


def _rfc2231_continuations(n: int = 20_000) -> bytes:
    params = "".join(f";\r\n filename*{i}*=abcdefghijklmnop" for i in range(n)).encode()
    return (b"From: Ann <ann@x.example>\r\nTo: desk@acme.example\r\nSubject: params\r\n"
            b"Date: Mon, 1 Jan 2024 00:00:00 +0000\r\nMIME-Version: 1.0\r\n"
            b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
            b"Content-Type: text/plain\r\n\r\nthe first part\r\n--b\r\n"
            b"Content-Type: application/octet-stream\r\nContent-Disposition: attachment"
            + params + b"\r\n\r\nxx\r\n--b--\r\n")


def _attachments(n: int = 10_000) -> bytes:
    parts = b"".join(b"--b\r\nContent-Type: application/octet-stream\r\n"
                     b"Content-Disposition: attachment; filename=\"f%d.bin\"\r\n\r\nx%d\r\n" % (i, i)
                     for i in range(n))
    return (b"From: Ann <ann@x.example>\r\nTo: desk@acme.example\r\nSubject: parts\r\n"
            b"Date: Mon, 1 Jan 2024 00:00:00 +0000\r\nMIME-Version: 1.0\r\n"
            b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
            b"Content-Type: text/plain\r\n\r\nthe first part\r\n" + parts + b"--b--\r\n")


def _recipients(n: int = 10_000) -> bytes:
    to = ",\r\n ".join(f'"Person {i}" <p{i}@y.example>' for i in range(n)).encode()
    return (b"From: Ann <ann@x.example>\r\nTo: " + to + b"\r\nSubject: recipients\r\n"
            b"Date: Mon, 1 Jan 2024 00:00:00 +0000\r\n\r\nthe first part\r\n")


def _nested(n: int = 5_000) -> bytes:
    return (b"From: Ann <ann@x.example>\r\nSubject: nested\r\nDate: Mon, 1 Jan 2024 00:00:00 +0000\r\n"
            b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=top\r\n\r\n--top\r\n"
            b"Content-Type: text/plain\r\n\r\nthe first part\r\n--top\r\n"
            + b"".join(b"Content-Type: multipart/mixed; boundary=b%d\r\n\r\n--b%d\r\n" % (i, i)
                       for i in range(n))
            + b"Content-Type: text/plain\r\n\r\nthe innermost part\r\n")


def _header_block(n: int = 100_000) -> bytes:
    junk = b"".join(b"X-Junk-%d: value number %d\r\n" % (i, i) for i in range(n))
    return (b"From: Ann <ann@x.example>\r\nTo: desk@acme.example\r\n" + junk
            + b"Subject: headers\r\nDate: Mon, 1 Jan 2024 00:00:00 +0000\r\n\r\nthe first part\r\n")


BUDGET_CASES = {
    "20,000 RFC 2231 continuations": (_rfc2231_continuations, "MAX_PARAMS"),
    "10,000 attachments": (_attachments, "MAX_PARTS"),
    "10,000 recipients": (_recipients, "MAX_RECIPIENTS"),
    "5,000 nested multiparts": (_nested, "MAX_DEPTH"),
    "100,000 header fields (3 MB)": (_header_block, "MAX_HEADER_FIELDS"),
}


@pytest.mark.parametrize("case", list(BUDGET_CASES))
async def test_hostile_mail_is_stored_in_bounded_time_and_memory(conn, case: str, capsys):
    build, limit = BUDGET_CASES[case]
    raw = build()
    tenant = await create_tenant(conn, "acme")
    identity = await create_identity(conn, tenant.id, "desk@acme.example")
    tracemalloc.start()
    started = time.monotonic()
    try:
        outcome, defects = await ingest_raw(conn, None, identity.id, raw)
        elapsed = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    with capsys.disabled():
        print(f"\n{case}: {len(raw) // 1024} KB stored in {elapsed:.2f} s, peak {peak / 2**20:.0f} MB")
    assert elapsed < SECONDS_PER_MESSAGE, f"{case}: {elapsed:.1f} s"
    assert peak < PEAK_BYTES, f"{case}: {peak / 2**20:.0f} MB"
    assert any(d.startswith("budget:") and limit in d for d in defects), defects
    assert await conn.fetchval("SELECT raw FROM raw_messages WHERE message_id = $1",
                               outcome.message_id) == raw
    row = await conn.fetchrow("SELECT subject, from_address, sent_at, text, status, parse_defects"
                              " FROM messages WHERE id = $1", outcome.message_id)
    # What still parses cheaply is kept: subject, sender, date and the first part's text.
    assert row["status"] == "received"
    assert row["from_address"] == "ann@x.example" and row["subject"]
    assert row["sent_at"] == datetime(2024, 1, 1, tzinfo=UTC)
    assert row["text"].startswith("the first part")
    assert any(limit in d for d in row["parse_defects"])


def test_budget_limits_keep_what_they_promise():
    parsed = parse_message(_recipients())
    assert len(parsed.to) == MAX_RECIPIENTS
    assert parsed.to[-1].address == f"p{MAX_RECIPIENTS - 1}@y.example"
    parsed = parse_message(_attachments())
    assert len(parsed.attachments) == MAX_PARTS - 1  # the text part is the first of the parts
    assert parsed.attachments[0].filename == "f0.bin" and parsed.attachments[0].content == b"x0"
    [attachment] = parse_message(_rfc2231_continuations()).attachments
    assert attachment.filename == "abcdefghijklmnop" * MAX_PARAMS
    assert parse_message(_header_block()).subject == "headers"  # past the cut, still read


def test_a_message_within_the_budget_is_parsed_from_its_own_bytes():
    raw = _attachments(MAX_PARTS - 1)
    assert apply_budget(raw) == Budgeted(raw=raw, defects=[])
    assert not any(d.startswith("budget:") for d in parse_message(raw).defects)


def test_a_message_chain_too_deep_for_the_parser_keeps_its_header():
    raw = (b"From: Ann <ann@x.example>\r\nSubject: chain\r\nDate: Mon, 1 Jan 2024 00:00:00 +0000\r\n"
           + b"Content-Type: message/rfc822\r\n\r\n" * 3_000 + b"\r\nbody\r\n")
    parsed = parse_message(raw)
    assert (parsed.subject, parsed.from_.address) == ("chain", "ann@x.example")
    assert any("attached messages (message/*)" in d for d in parsed.defects)
    assert not any(d.startswith("body unreadable") for d in parsed.defects)


def test_attached_messages_nested_past_the_limit_leave_the_text_before_them():
    """300 nested message/rfc822 headers in 10 KB ran the parser out of stack, and the text
    part before them, its words and its risk flags, was lost (found by an attack)."""
    chain = b"Content-Type: message/rfc822\r\n\r\n" * 300
    raw = (b"From: Ann <ann@x.example>\r\nTo: desk@acme.example\r\nSubject: invoice\r\n"
           b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n"
           b"--B\r\nContent-Type: text/plain\r\n\r\nPlease update our bank details. quinceword\r\n"
           b"--B\r\nContent-Type: message/rfc822\r\n\r\n" + chain + b"deep\r\n--B--\r\n")
    parsed = parse_message(raw)
    assert "quinceword" in parsed.text
    assert len(parsed.attachments) == 1
    assert not any(d.startswith("body unreadable") for d in parsed.defects)


def test_a_huge_html_body_is_rendered_in_part():
    row = '<tr><td><a href="https://shop.example/i/%d">Item %d</a></td><td>12.00</td></tr>'
    html = ("<table>" + "".join(row % (i, i) for i in range(30_000)) + "</table>").encode()
    raw = b"From: a@x.example\r\nSubject: big\r\nContent-Type: text/html\r\n\r\n" + html
    started = time.monotonic()
    parsed = parse_message(raw)
    assert time.monotonic() - started < SECONDS_PER_MESSAGE
    assert parsed.text.startswith("Item 0")
    assert any("MAX_HTML_CHARS" in d for d in parsed.defects)


def _large(attachment_bytes: int) -> bytes:
    body = base64.encodebytes(b"\0" * attachment_bytes)
    return (b"From: Ann <ann@x.example>\r\nTo: desk@acme.example\r\nSubject: large\r\n"
            b"Date: Mon, 1 Jan 2024 00:00:00 +0000\r\nMIME-Version: 1.0\r\n"
            b"Content-Type: multipart/mixed; boundary=b\r\n\r\n"
            b"--b\r\nContent-Type: text/plain\r\n\r\nthe first part\r\n"
            b"--b\r\nContent-Type: application/pdf\r\n"
            b"Content-Disposition: attachment; filename=\"small.pdf\"\r\n"
            b"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQ=\r\n"
            b"--b\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Disposition: attachment; filename=\"large.bin\"\r\n"
            b"Content-Transfer-Encoding: base64\r\n\r\n" + body + b"--b--\r\n")


def test_a_message_past_the_parsed_bytes_is_parsed_up_to_the_part_that_ends_past_them(
        monkeypatch):
    """The email package holds a message several times over while parsing (a 108 MB message
    took 840 MB): past MAX_PARSED_BYTES the parts that end before it are parsed and the rest is
    only in the raw copy; a message within it, and a body that is no multipart, as the rule says."""
    monkeypatch.setattr(budget, "MAX_PARSED_BYTES", 64 * 1024)
    raw = _large(200 * 1024)
    parsed = parse_message(raw)
    assert parsed.text.startswith("the first part") and parsed.subject == "large"
    assert [a.filename for a in parsed.attachments] == ["small.pdf"]
    assert any("MAX_PARSED_BYTES" in d for d in parsed.defects)
    assert [a.filename for a in parse_message(_large(10 * 1024)).attachments] == [
        "small.pdf", "large.bin"]
    plain = (b"From: a@x.example\r\nSubject: long\r\n\r\n" + b"word " * 40_000)
    cut = parse_message(plain)
    assert cut.text.startswith("word") and len(cut.text) < 64 * 1024
    assert any("MAX_PARSED_BYTES" in d for d in cut.defects)
