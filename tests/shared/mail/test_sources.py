"""``shared.mail.sources``: files, mbox (mboxo/mboxrd, gzip) and maildir on disk to raw messages."""

from __future__ import annotations

import csv
import gzip
import hashlib
import os
from pathlib import Path

import pytest

from shared.mail import sources
from shared.mail.sources import (LINK_OUTSIDE, NOT_MAIL, OUTLOOK_MSG, TOO_LARGE, SourceItem,
                                 iter_sources)


def _raws(items: list[SourceItem]) -> list[bytes]:
    assert all(item.problem is None for item in items), [i.problem for i in items]
    return [item.raw for item in items if item.raw is not None]


# Our fixtures ------------------------------------------------------------------------------------


def test_single_file_is_one_message(fixtures: Path) -> None:
    path = fixtures / "latin1_euro.eml"
    assert list(iter_sources([path])) == [SourceItem(str(path), path.read_bytes(), None)]


def test_mbox_unescaped_body_from_line_does_not_split(fixtures: Path) -> None:
    items = list(iter_sources([fixtures / "unescaped_from.mbox"]))
    origin = str(fixtures / "unescaped_from.mbox")
    assert [item.origin for item in items] == [f"{origin}#1", f"{origin}#2"]
    first, second = _raws(items)
    # The separator is dropped, the empty line before the next separator too, and the body's
    # "From time to time" line (after an empty line, but not separator-shaped) stays.
    assert first == (
        b"From: alice@example.com\nSubject: one\nMessage-ID: <one@example.com>\n\nHello\n\n"
        b"From time to time we meet.\n"
    )
    assert second.startswith(b"From: bob@example.com\n")


def test_mboxrd_unescapes_one_level_and_keeps_crlf(fixtures: Path) -> None:
    first, second = _raws(list(iter_sources([fixtures / "mboxrd.mbox"])))
    assert first.endswith(b"\r\n\r\nFrom the start\r\n>From quoted\r\n> From not escaped\r\n")
    # The second separator has an 8-bit sender (\xe9), which must still count as a separator.
    assert second.startswith(b"From: emilie@example.com\r\n")


def test_mboxo_leaves_escapes_alone(fixtures: Path) -> None:
    first, _ = _raws(list(iter_sources([fixtures / "mboxrd.mbox"], mboxrd=False)))
    assert b"\r\n>From the start\r\n>>From quoted\r\n" in first


def test_gzip_mbox_is_read(tmp_path: Path, fixtures: Path) -> None:
    packed = tmp_path / "box.mbox.gz"
    packed.write_bytes(gzip.compress((fixtures / "unescaped_from.mbox").read_bytes()))
    plain = _raws(list(iter_sources([fixtures / "unescaped_from.mbox"])))
    assert _raws(list(iter_sources([packed]))) == plain


def test_mbox_detected_by_first_line_without_suffix(tmp_path: Path, fixtures: Path) -> None:
    path = tmp_path / "archive"
    path.write_bytes((fixtures / "unescaped_from.mbox").read_bytes())
    assert [item.origin for item in iter_sources([path])] == [f"{path}#1", f"{path}#2"]


def test_maildir_reads_cur_and_new_skips_tmp_and_dotfiles(fixtures: Path) -> None:
    items = list(iter_sources([fixtures / "maildir"]))
    assert [Path(item.origin).relative_to(fixtures) for item in items] == [
        Path("maildir/cur/1700000000.1.host_2,S"),
        Path("maildir/new/1700000001.2.host"),
    ]
    assert b"Subject: maildir 1\n" in _raws(items)[0]


def test_directory_walk_is_sorted_and_recursive(fixtures: Path) -> None:
    origins = [item.origin for item in iter_sources([fixtures])]
    assert origins == sorted(origins)
    assert str(fixtures / "maildir/new/1700000001.2.host") in origins
    assert str(fixtures / "maildir/tmp/1700000002.3.host") not in origins


def test_not_mail_and_unreadable_become_problems(tmp_path: Path, fixtures: Path) -> None:
    missing = tmp_path / "missing.eml"
    bad_gzip = tmp_path / "broken.mbox.gz"
    bad_gzip.write_bytes(b"not gzip at all")
    empty = tmp_path / "empty.eml"
    empty.write_bytes(b"\n\n")
    items = list(iter_sources([fixtures / "not_mail.md", missing, bad_gzip, empty]))
    assert [(item.raw, item.problem) for item in items[:1]] == [(None, NOT_MAIL)]
    assert items[1].raw is None and items[1].problem.startswith("unreadable: ")
    assert items[2].origin == str(bad_gzip) and items[2].problem.startswith("unreadable: ")
    assert items[3] == SourceItem(str(empty), None, "empty file")


def test_a_fifo_or_device_named_directly_is_not_read(tmp_path: Path) -> None:
    """Named on the command line, a FIFO blocked the import for ever and /dev/zero filled the
    memory; they were refused only inside a folder (found by an attack)."""
    fifo = tmp_path / "pipe.eml"
    os.mkfifo(fifo)
    items = list(iter_sources([fifo, Path("/dev/zero")]))
    assert [(item.origin, item.problem) for item in items] == [
        (str(fifo), "not a regular file"), ("/dev/zero", "not a regular file")]


def test_a_link_out_of_the_folder_imported_is_not_followed(tmp_path: Path) -> None:
    """A maildir holding links to a secret file and to /etc imported them as mail that API keys
    then read (found by an attack); links inside the folder, and a link named directly, are
    followed."""
    secret = tmp_path / "app.env"
    secret.write_bytes(b"DB_PASSWORD: hunter2\n")
    box = tmp_path / "Maildir"
    (box / "cur").mkdir(parents=True)
    (box / "new").mkdir()
    (box / "cur" / "1.host:2,S").write_bytes(b"Subject: kept\n\nbody\n")
    (box / "cur" / "2.host:2,S").symlink_to(secret)
    (box / "new" / "etc").symlink_to("/etc")
    (box / "new" / "broken").symlink_to(tmp_path / "nothing")
    (box / "new" / "loop").symlink_to(box / "new" / "loop")
    (box / "new" / "same").symlink_to(box / "cur" / "1.host:2,S")
    items = list(iter_sources([box]))
    assert [(Path(i.origin).name, i.problem) for i in items if i.problem] == [
        ("2.host:2,S", LINK_OUTSIDE), ("broken", LINK_OUTSIDE), ("etc", LINK_OUTSIDE),
        ("loop", LINK_OUTSIDE)]
    assert [i.raw for i in items if i.raw] == [b"Subject: kept\n\nbody\n"] * 2
    named = tmp_path / "named.eml"
    named.symlink_to(secret)
    assert [i.raw for i in iter_sources([named])] == [b"DB_PASSWORD: hunter2\n"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_is_a_problem(tmp_path: Path) -> None:
    path = tmp_path / "secret.eml"
    path.write_bytes(b"Subject: x\n\nbody\n")
    path.chmod(0)
    [item] = iter_sources([path])
    assert item.raw is None and item.problem == "unreadable: Permission denied"


def test_envelope_line_without_date_is_a_single_message(tmp_path: Path) -> None:
    # Saved messages often start with "From user@host" and no date: mail, but not an mbox.
    path = tmp_path / "saved.eml"
    path.write_bytes(b"From someone@example.com\r\nSubject: hi\r\n\r\nbody\r\n")
    assert _raws(list(iter_sources([path]))) == [path.read_bytes()]


# The kit's corpus --------------------------------------------------------------------------------

# Expected message counts, from each folder's SOURCES.md (and for the cpython file, its note: a
# reader that requires a full From_ line yields 1 message, not 2).
MBOX_COUNTS = {
    "cpython/mailbox_01.mbox": 1,
    "mime4j-rlug/mbox.rlug.mbox": 5,
    "notmuch-default/notmuch-default.mbox": 53,
    "notmuch-lkml/notmuch-lkml.mbox": 210,
    "perceval/mbox__mbox_complex.mbox": 2,
    "perceval/mbox__mbox_iso8859_encoding.mbox": 1,
    "perceval/mbox__mbox_multipart.mbox": 2,
    "perceval/mbox__mbox_no_fields.mbox": 6,
    "perceval/mbox__mbox_single.mbox": 1,
    "perceval/mbox__mbox_unixfrom_encoding.mbox": 1,
    "perceval/mbox__mbox_unknown_encoding.mbox": 1,
    "perceval/pipermail__pipermail_2015_november.mbox": 4,
    "perceval/pipermail__pipermail_2016_april.mbox": 3,
    "perceval/pipermail__pipermail_2016_march.mbox": 1,
    "tika/complex.mbox": 3,
    "tika/simple.mbox": 2,
    "tika/quoted.mbox": 1,
    "tika/testMBOX_complex.mbox": 1,
    "spamassassin-public/easy-ham-1.mbox.gz": 2500,
    "spamassassin-public/easy-ham-2.mbox.gz": 1400,
    "spamassassin-public/hard-ham-1.mbox.gz": 250,
    "spamassassin-public/spam-1.mbox.gz": 500,
    "spamassassin-public/spam-2.mbox.gz": 1396,
}


def test_kit_mboxes_split_into_documented_counts(corpus: Path) -> None:
    counts = {
        name: len(_raws(list(iter_sources([corpus / "mailboxes" / name]))))
        for name in MBOX_COUNTS
    }
    assert counts == MBOX_COUNTS


def test_cpython_mbox_keeps_unquoted_from_in_body(corpus: Path) -> None:
    [raw] = _raws(list(iter_sources([corpus / "mailboxes/cpython/mailbox_01.mbox"])))
    assert raw.startswith(b"From: foo\n")
    assert raw.endswith(b"\n\nFrom time to time\n")


def test_kit_maildirs(corpus: Path) -> None:
    lkml = _raws(list(iter_sources([corpus / "mailboxes/notmuch-lkml/maildir"])))
    default = _raws(list(iter_sources([corpus / "mailboxes/notmuch-default/maildir"])))
    assert (len(lkml), len(default)) == (210, 53)


def test_lkml_mbox_gives_back_the_maildir_bytes(corpus: Path) -> None:
    # The kit's mbox was made from the maildir (CRLF -> LF, mboxrd escaping); reading it as mboxrd
    # must give back exactly the maildir files' bytes (they are LF already).
    folder = corpus / "mailboxes/notmuch-lkml"
    maildir = sorted(_raws(list(iter_sources([folder / "maildir"]))))
    mbox = sorted(_raws(list(iter_sources([folder / "notmuch-lkml.mbox"]))))
    assert mbox == maildir
    # One body line in it is mboxrd-escaped; read as mboxo, exactly that message differs.
    mboxo = sorted(_raws(list(iter_sources([folder / "notmuch-lkml.mbox"], mboxrd=False))))
    assert len(set(mboxo) - set(maildir)) == 1


def test_spamassassin_mbox_messages_match_upstream_md5(corpus: Path) -> None:
    """The SpamAssassin parts are mboxo: read that way, every message that had no envelope line
    upstream (so nothing was dropped) has its upstream MD5; read as mboxrd, the two whose bodies
    contain ``>From `` lines lose a ``>`` and differ."""
    folder = corpus / "mailboxes/spamassassin-public"
    with (folder / "MANIFEST.tsv").open(newline="") as manifest:
        rows = {(r["mbox_file"], int(r["index"])): r for r in csv.DictReader(manifest, delimiter="\t")}
    for mboxrd, expected_mismatches in ((False, 0), (True, 2)):
        matched = mismatched = 0
        for path in sorted(folder.glob("*.mbox.gz")):
            for index, raw in enumerate(_raws(list(iter_sources([path], mboxrd=mboxrd)))):
                if rows[(path.name, index)]["changes"] != "envelope_synth":
                    continue  # the envelope line was upstream's, or upstream bytes were changed
                if hashlib.md5(raw).hexdigest() == rows[(path.name, index)]["upstream_md5"]:
                    matched += 1
                else:
                    mismatched += 1
        assert (matched + mismatched, mismatched) == (591, expected_mismatches)


def test_kit_singles_all_give_an_item(corpus: Path) -> None:
    items = list(iter_sources([corpus / "singles"]))
    problems = {Path(i.origin).relative_to(corpus / "singles").as_posix(): i.problem
                for i in items if i.problem}
    # The licence/readme files, two header-less mime4j bodies, a headerless digest, and an Outlook
    # .msg (binary OLE, not RFC 5322) are not mail; every other file gives raw bytes.
    assert problems["spamscope-mail-parser/mail_outlook_1.eml"] == OUTLOOK_MSG
    assert set(problems.values()) == {NOT_MAIL, OUTLOOK_MSG}
    assert {name for name in problems if not name.endswith(("SOURCES.md", "COPYING"))} == {
        "cpython-test_email/msg_19.txt",
        "mime4j/mimetools-testmsgs/ARTISTIC-LICENSE.txt",
        "mime4j/mimetools-testmsgs/README.txt",
        "mime4j/testmsgs/malformedHeader-noheader.msg",
        "mime4j/testmsgs/malformedHeaderStartsBody-noheader.msg",
        "spamscope-mail-parser/mail_outlook_1.eml",
    }
    # 36 files start with an envelope line and are read as one-message mboxes. Known limit of
    # mboxo: notmuch/insert/mbox-attachment.eml carries a git format-patch attachment whose
    # unescaped "From <sha> Mon Sep 17 00:00:00 2001" line has the separator's shape, so it splits.
    split = [i.origin for i in items if i.origin.endswith("/mbox-attachment.eml#2")]
    assert len(split) == 1
    assert len(items) - len(problems) == 504


MESSAGE = b"From: a@x.example\nSubject: %s\nMessage-ID: <%s@x>\n\nhello\n"
SEPARATOR = b"From a@x Mon Sep  1 10:00:00 2026\n"


def test_a_message_over_the_limit_is_reported_and_its_neighbours_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small gzip file of one huge message (the attack report's 204 KB of 200 MB of NULs) is
    read no further than MAX_MESSAGE_BYTES, one line in pieces, and reported; the messages
    around it are imported."""
    monkeypatch.setattr(sources, "MAX_MESSAGE_BYTES", 256 * 1024)
    monkeypatch.setattr(sources, "_PIECE_BYTES", 16 * 1024)
    bomb = b"From: a@x.example\nMessage-ID: <bomb@x>\n\n" + b"\0" * (1024 * 1024) + b"\n"
    path = tmp_path / "bomb.mbox.gz"
    path.write_bytes(gzip.compress(SEPARATOR + MESSAGE % (b"one", b"1") + b"\n" + SEPARATOR
                                   + bomb + b"\n" + SEPARATOR + MESSAGE % (b"three", b"3")))
    items = list(iter_sources([path]))
    assert [i.origin.rsplit("#", 1)[1] for i in items] == ["1", "2", "3"]
    assert items[0].raw == MESSAGE % (b"one", b"1") and items[2].raw == MESSAGE % (b"three", b"3")
    assert items[1].raw is None and items[1].problem == TOO_LARGE
    assert "MAX_MESSAGE_BYTES" in TOO_LARGE and "not imported" in TOO_LARGE

    single = tmp_path / "huge.eml"
    single.write_bytes(bomb)
    [item] = iter_sources([single])
    assert item.raw is None and item.problem == TOO_LARGE


def test_a_long_line_is_read_whole_and_its_pieces_split_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "_PIECE_BYTES", 1024)
    # a line cut right before its newline, then what looks like a separator: it follows a
    # non-empty line, so it is body text (a cut-off "\n" is not an empty line)
    body = b"x" * 1024 + b"\n" + SEPARATOR + b"y" * 5000 + b"\n"
    message = b"From: a@x.example\nMessage-ID: <long@x>\n\n" + body
    path = tmp_path / "long.mbox"
    path.write_bytes(SEPARATOR + message)
    [item] = iter_sources([path])
    assert item.raw == message


def test_an_empty_mbox_is_reported(tmp_path: Path) -> None:
    # it was passed over in silence: "imported 0, failed 0" (found by an attack)
    for name, content in (("empty.mbox", b""), ("blank.mbox", b"\n\n")):
        path = tmp_path / name
        path.write_bytes(content)
        assert list(iter_sources([path])) == [
            SourceItem(str(path), None, "no messages: the mbox file is empty")]


def test_a_message_of_many_short_lines_is_read_in_memory_near_its_size(tmp_path: Path) -> None:
    """30 million lines of "x" in a 61 KB .mbox.gz took 4.3 GB: one bytes object a line
    (found by an attack). A million lines (2 MB) now take a few MB."""
    import tracemalloc

    path = tmp_path / "lines.mbox.gz"
    with gzip.open(path, "wb") as out:
        out.write(b"From a@b Mon Jan  1 00:00:00 2024\nFrom: a@b.example\nSubject: x\n\n"
                  + b"x\n" * 1_000_000)
    tracemalloc.start()
    try:
        [item] = list(iter_sources([path]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert item.raw is not None and item.raw.count(b"\nx") == 1_000_000
    assert peak < 12 * 1024 * 1024, peak
