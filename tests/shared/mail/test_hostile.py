"""Hostile input found by attacking the importer: each case is stored or reported, in bounded time."""

from __future__ import annotations

import os
import time
from pathlib import Path

from shared.ingest.importer import import_paths
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
