"""attachment_texts on a real database (shared.extract.store): queueing (ingest queues every
stored attachment), draining with several workers, workers killed in the middle of a file,
hostile files in the queue, reading pages, and the words left for search."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from email.message import EmailMessage
from pathlib import Path

import pytest

from shared.db import open_database
from shared.errors import ErrorCode, PylotaError
from shared.extract.limits import MAX_ATTEMPTS, Limits
from shared.extract.outcome import Reason, TextStatus
from shared.extract.store import (
    PageText, attachment_text, extract_pending, page_range, queue, queue_missing, text_statuses,
)
from shared.ingest.pipeline import ingest_raw
from shared.mail.store import message_attachment_ids
from shared.tenancy.store import create_identity, create_tenant
from tests.shared.extract import documents
from tests.shared.extract.sandboxes import sandbox_pids

ROOT = Path(__file__).resolve().parents[3]
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
OCTET = "application/octet-stream"


@pytest.fixture
async def identity_id(conn) -> str:
    tenant = await create_tenant(conn, "acme")
    return (await create_identity(conn, tenant.id, "desk@acme.example")).id


@pytest.fixture
async def pool(db_url):
    pool = await open_database(db_url, size=4, acquire_seconds=5)
    yield pool
    await pool.close()


_counter = iter(range(10**6))


async def mail_with(conn, identity_id: str, files: list[tuple[str, str, bytes]]
                    ) -> tuple[str, list[str]]:
    """Ingest a message carrying ``files`` (filename, content type, bytes); returns its id and
    its attachment ids in order."""
    message = EmailMessage()
    message["From"] = "Ann <ann@example.net>"
    message["To"] = "desk@acme.example"
    message["Subject"] = "Documents"
    message["Message-ID"] = f"<docs-{next(_counter)}@example.net>"
    message.set_content("Please find the documents attached.")
    for filename, content_type, content in files:
        maintype, subtype = content_type.split("/")
        message.add_attachment(content, maintype=maintype, subtype=subtype, filename=filename)
    outcome, _ = await ingest_raw(conn, None, identity_id, message.as_bytes())
    return outcome.message_id, await message_attachment_ids(conn, identity_id, outcome.message_id)


async def drained(pool, **kwargs) -> int:
    async with asyncio.timeout(120):
        return await extract_pending(pool, **kwargs)


async def test_queued_attachments_reach_a_final_status_and_read_page_by_page(conn, pool,
                                                                             identity_id):
    letter = documents.docx_file([["Decision letter", "Your claim is accepted."],
                                  ["Page two of the letter"]])
    message_id, (docx_id, png_id, pdf_id) = await mail_with(conn, identity_id, [
        ("letter.docx", DOCX, letter),
        ("photo.png", "image/png", b"\x89PNG\r\n\x1a\n" + bytes(64)),
        ("INVOICE.PDF", OCTET, documents.pdf(["Invoice total 120.50 EUR"])),
    ])
    # ingest queued each of them, in the message's transaction
    assert await text_statuses(conn, [docx_id, png_id, pdf_id]) == {
        docx_id: TextStatus.PENDING, png_id: TextStatus.PENDING, pdf_id: TextStatus.PENDING}
    assert await queue(conn, [docx_id]) == 0
    assert (await attachment_text(conn, identity_id, message_id, docx_id)).status \
        is TextStatus.PENDING

    assert await drained(pool) == 3

    text = await attachment_text(conn, identity_id, message_id, docx_id, 1, 3)
    assert (text.status, text.reason, text.total_pages) == (TextStatus.READY, None, 2)
    assert text.pages == [PageText(page=1, text="Decision letter\nYour claim is accepted."),
                          PageText(page=2, text="Page two of the letter")]
    second = await attachment_text(conn, identity_id, message_id, docx_id, 2, 2)
    assert [p.page for p in second.pages] == [2]
    beyond = await attachment_text(conn, identity_id, message_id, docx_id, 5, 9)
    assert (beyond.pages, beyond.total_pages) == ([], 2)

    invoice = await attachment_text(conn, identity_id, message_id, pdf_id)
    assert invoice.pages == [PageText(page=1, text="Invoice total 120.50 EUR")]
    photo = await attachment_text(conn, identity_id, message_id, png_id)
    assert (photo.status, photo.reason, photo.pages, photo.total_pages) == (
        TextStatus.SKIPPED, Reason.UNSUPPORTED_TYPE, [], None)
    assert await text_statuses(conn, [docx_id, png_id, "att_unknown"]) == {
        docx_id: TextStatus.READY, png_id: TextStatus.SKIPPED}


async def test_reading_outside_the_message_or_the_identity_is_not_found(conn, identity_id):
    message_id, [att_id] = await mail_with(conn, identity_id, [("a.txt", "text/plain", b"a")])
    other_message, [other_att] = await mail_with(conn, identity_id,
                                                 [("b.txt", "text/plain", b"b")])
    tenant = await create_tenant(conn, "other")
    stranger = (await create_identity(conn, tenant.id, "someone@other.example")).id

    with pytest.raises(PylotaError) as caught:
        await attachment_text(conn, stranger, message_id, att_id)
    assert caught.value.code is ErrorCode.MESSAGE_NOT_FOUND
    with pytest.raises(PylotaError) as caught:
        await attachment_text(conn, identity_id, message_id, other_att)
    assert caught.value.code is ErrorCode.ATTACHMENT_NOT_FOUND
    # never queued (mail stored before attachment text existed): pending, not an error
    assert (await attachment_text(conn, identity_id, other_message, other_att)).status \
        is TextStatus.PENDING


def test_page_ranges_follow_the_spec_pattern():
    assert page_range("1-3") == (1, 3)
    assert page_range("7") == (7, 7)
    assert page_range("999-999") == (999, 999)
    for bad in ("0", "3-1", "1-1000", "1,2", ""):
        with pytest.raises(PylotaError) as caught:
            page_range(bad)
        assert (caught.value.code, caught.value.details["path"]) == (
            ErrorCode.INVALID_REQUEST, "pages")


async def test_two_concurrent_drains_claim_each_attachment_once(conn, pool, identity_id):
    files = [(f"note{i}.txt", "text/plain", f"note number {i}".encode()) for i in range(8)]
    _, ids = await mail_with(conn, identity_id, files)

    first, second = await asyncio.gather(drained(pool), drained(pool))

    assert first + second == len(ids)
    rows = await conn.fetch("SELECT status, attempts, pages FROM attachment_texts")
    assert sorted(r["pages"][0] for r in rows) == sorted(f"note number {i}" for i in range(8))
    assert {(r["status"], r["attempts"]) for r in rows} == {("ready", 1)}


async def test_hostile_files_in_the_queue_end_final_and_the_drain_goes_on(conn, pool,
                                                                          identity_id):
    # A wall limit well above a small file's read even on a loaded machine (0.15 s quiet),
    # well below the slow PDF's read (5.7 s on a quiet machine, longer under load: 6 s let it
    # finish on a fast one); an input limit below the slow PDF's 3.4 MB would skip it.
    limits = Limits(wall_seconds=3.0, max_input_bytes=4_000_000)
    files = {
        "bomb.docx": documents.zip_bomb_docx(),
        "loop.pdf": documents.pdf(["loop"], kids_loop=True),
        "locked.pdf": documents.encrypted_pdf("secret", user_password="pw"),
        "slow.pdf": documents.slow_pdf(),
        "huge.txt": b"word " * 1_000_000,
        "good.docx": documents.docx_file([["Still extracted"]]),
    }
    message_id, ids = await mail_with(conn, identity_id,
                                      [(name, OCTET, content) for name, content in files.items()])

    assert await drained(pool, limits=limits) == len(files)

    got = {name: await attachment_text(conn, identity_id, message_id, att_id)
           for name, att_id in zip(files, ids)}
    assert {name: (t.status.value, t.reason.value if t.reason else None)
            for name, t in got.items()} == {
        "bomb.docx": ("skipped", "compression_ratio"),
        "loop.pdf": ("unavailable", "corrupt"),
        "locked.pdf": ("unavailable", "encrypted"),
        "slow.pdf": ("unavailable", "timeout"),
        "huge.txt": ("skipped", "too_large"),
        "good.docx": ("ready", None),
    }
    assert got["good.docx"].pages == [PageText(page=1, text="Still extracted")]


async def kill_mid_file(db_url: str, conn, attempts: int) -> None:
    """Start a worker process on the queue, wait until it has claimed the file (``attempts``
    counted) and started its sandbox, then kill it; its sandbox must die with it."""
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.shared.extract.drain", db_url, cwd=ROOT)
    try:
        async with asyncio.timeout(60):
            while not (await conn.fetchval("SELECT attempts FROM attachment_texts") == attempts
                       and sandbox_pids(worker.pid)):
                assert worker.returncode is None, "the worker ended before it was killed"
                await asyncio.sleep(0.05)
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        await worker.wait()
    async with asyncio.timeout(10):
        while sandbox_pids(worker.pid):
            await asyncio.sleep(0.05)


async def test_a_worker_killed_mid_file_leaves_it_for_the_next_until_max_attempts(
        db_url, conn, pool, identity_id):
    message_id, [att_id] = await mail_with(conn, identity_id,
                                           [("slow.pdf", OCTET, documents.slow_pdf())])

    await kill_mid_file(db_url, conn, attempts=1)
    row = await conn.fetchrow("SELECT status, attempts FROM attachment_texts")
    assert (row["status"], row["attempts"]) == ("pending", 1)

    await kill_mid_file(db_url, conn, attempts=MAX_ATTEMPTS)

    assert await drained(pool) == 1
    text = await attachment_text(conn, identity_id, message_id, att_id)
    assert (text.status, text.reason) == (TextStatus.UNAVAILABLE, Reason.INTERRUPTED)
    assert await conn.fetchval("SELECT attempts FROM attachment_texts") == MAX_ATTEMPTS + 1


async def test_ready_text_is_searchable_within_its_identity(conn, pool, identity_id):
    _, [att_id] = await mail_with(conn, identity_id, [
        ("policy.docx", DOCX, documents.docx_file([["The indemnity clause covers floods."]]))])
    await drained(pool)
    found = await conn.fetch(
        "SELECT attachment_id FROM attachment_texts WHERE identity_id = $1"
        " AND tsv @@ plainto_tsquery('en_unaccent', $2)", identity_id, "indemnity floods")
    assert [r["attachment_id"] for r in found] == [att_id]


async def test_queue_missing_queues_mail_stored_before(conn, identity_id):
    _, ids = await mail_with(conn, identity_id, [("a.txt", "text/plain", b"a"),
                                                 ("b.txt", "text/plain", b"b")])
    await conn.execute("DELETE FROM attachment_texts")  # as if stored before text existed
    assert await queue(conn, ids[:1]) == 1
    assert await queue_missing(conn, identity_id) == 1
    assert await queue_missing(conn) == 0


async def test_deleting_the_message_deletes_its_attachment_text(conn, identity_id):
    message_id, ids = await mail_with(conn, identity_id, [("a.txt", "text/plain", b"a")])
    await conn.execute("DELETE FROM messages WHERE id = $1", message_id)
    assert await conn.fetchval("SELECT count(*) FROM attachment_texts") == 0


async def test_attachments_of_real_mail_reach_their_text(conn, pool, identity_id, kit):
    # Real DOCX, PDF, ODT, DOC and an attached message inside e-mail
    # (corpus/attachments/tika/SOURCES.md, corpus/singles/SOURCES.md); the
    # bulletin PDF is sent as application/octet-stream.
    singles = kit / "corpus" / "singles"
    ids: list[str] = []
    for path in ("php-mime-mail-parser/issue274.eml", "php-mime-mail-parser/m0024.eml",
                 "spamscope-mail-parser/mail_test_2.eml"):
        outcome, _ = await ingest_raw(conn, None, identity_id, (singles / path).read_bytes())
        ids += await message_attachment_ids(conn, identity_id, outcome.message_id)
    assert await queue(conn, ids) == 0  # ingest queued them

    assert await drained(pool) == len(ids)

    rows = await conn.fetch(
        "SELECT a.filename, t.status, t.pages[1] AS first FROM attachment_texts t"
        " JOIN attachments a ON a.id = t.attachment_id")
    got = {r["filename"]: (r["status"], r["first"] or "") for r in rows}
    starts = {"Hello from SwiftMailer.docx": "Hello from SwiftMailer\u00a0!",
              "Hello from SwiftMailer.pdf": "Hello from SwiftMailer\u00a0!",
              "Hello from SwiftMailer.odt": "Hello from SwiftMailer\u00a0!",
              "Biodiversité de semaine en semaine.doc": "Biodiversité de semaine en semaine\n",
              "Bollettino.pdf": "BOLLETTINO METEOROLOGICO\nREGIONE AUTONOMA VALLE D'AOSTA",
              # a message attached as message/rfc822, base64-encoded
              "test-localhost.eml": "From: guest@localhost\nTo: guest@localhost\n"
                                    "Date: 2019-05-25 07:48 UTC\nSubject: test-localhost\n\n"}
    for name, start in starts.items():
        status, first = got[name]
        assert status == "ready" and first.startswith(start), (name, status)
    assert {name: status for name, (status, _) in got.items() if status != "ready"} == {
        "Cours-Tutoriels-Serge-Tahé-1568x268.png": "skipped",
        "intestazione.jpg": "skipped", "logometeo.jpg": "skipped"}


async def test_a_run_claims_no_file_after_its_seconds(conn, pool, identity_id):
    """A run past its seconds claims no more files, so the batch worker's other drains (the
    delivery of sent mail) get their turn: 50 slow files held deliveries for 25 minutes (found
    by an attack). The file in hand is finished; the next run takes the rest."""
    files = [(f"note{i}.txt", "text/plain", f"note number {i}".encode()) for i in range(3)]
    _, ids = await mail_with(conn, identity_id, files)
    assert await drained(pool, seconds=0.0) == 1
    assert await conn.fetchval(
        "SELECT count(*) FROM attachment_texts WHERE status = 'pending'") == 2
    assert await drained(pool, seconds=60.0) == 2


async def test_attached_email_skipped_before_its_reader_is_read_after_migration_0019(
        conn, pool, identity_id):
    forwarded = (b"From: Supplier <sales@supplier.example>\r\nSubject: Revised quote Q-4471\r\n"
                 b"\r\nThe revised total is 4,120.00 EUR.\r\n")
    _, [attachment_id] = await mail_with(conn, identity_id, [
        ("fwd.eml", "application/octet-stream", forwarded)])
    # as a store migrated before 0019 left it
    await conn.execute("UPDATE attachment_texts SET status = 'skipped', reason = 'unsupported_type',"
                       " attempts = 1 WHERE attachment_id = $1", attachment_id)
    migration = Path(__file__).parents[3] / "shared/db/migrations/0019_attached_mail_text.sql"
    await conn.execute(migration.read_text())
    assert await conn.fetchval("SELECT status FROM attachment_texts WHERE attachment_id = $1",
                               attachment_id) == "pending"
    assert await drained(pool) == 1
    row = await conn.fetchrow("SELECT status, kind, pages[1] AS first FROM attachment_texts"
                              " WHERE attachment_id = $1", attachment_id)
    assert (row["status"], row["kind"]) == ("ready", "eml")
    assert "Subject: Revised quote Q-4471" in row["first"] and "4,120.00 EUR" in row["first"]


async def test_bytes_the_identity_already_has_take_their_text_without_a_second_reading(
        conn, pool, identity_id, monkeypatch):
    """A forward carries the original's attachments again: 400 of them cost the batch workers
    100 s of extraction once more, and two copies of a PDF that timed out took 30 s each
    (found by attacks). The twin's result is taken; the sandbox reads only new bytes."""
    import shared.extract.store as extract_store

    read: list[str | None] = []
    sandboxed = extract_store.extract

    async def spy(content: bytes, **kwargs: object) -> object:
        read.append(kwargs.get("filename"))  # type: ignore[arg-type]
        return await sandboxed(content, **kwargs)

    monkeypatch.setattr(extract_store, "extract", spy)
    letter = documents.pdf(["Claim 4471 approved"])
    _, [first, odd] = await mail_with(conn, identity_id, [
        ("letter.pdf", "application/pdf", letter),
        ("data.bin", "application/octet-stream", b"\x00\x01binary")])
    assert await drained(pool) == 2 and sorted(read) == ["data.bin", "letter.pdf"]
    read.clear()
    _, [again, odd_again, new, twice] = await mail_with(conn, identity_id, [
        ("copy.pdf", "application/pdf", letter),
        # a type left unread is read again: its name may be what decided it
        ("data.txt", "text/plain", b"\x00\x01binary"),
        ("other.txt", "text/plain", b"something else"),
        ("other-again.txt", "text/plain", b"something else")])
    assert await drained(pool) == 4
    assert sorted(read) == ["data.txt", "other.txt"]  # the copies of read bytes are not read
    rows = {r["attachment_id"]: r for r in await conn.fetch("SELECT * FROM attachment_texts")}
    assert (rows[again]["status"], rows[again]["pages"]) == ("ready", rows[first]["pages"])
    assert rows[again]["tsv"] == rows[first]["tsv"]  # searchable as the original
    assert rows[twice]["pages"] == rows[new]["pages"] == ["something else"]
    # another identity's copy of the same bytes is read for it
    read.clear()
    other = (await create_identity(conn, (await create_tenant(conn, "beta")).id,
                                   "desk@beta.example")).id
    await mail_with(conn, other, [("letter.pdf", "application/pdf", letter)])
    assert await drained(pool) == 1 and read == ["letter.pdf"]


async def test_each_identitys_files_take_turns(conn, pool, identity_id):
    """One first-in, first-out queue let a message of 499 text files hold another tenant's
    contract for 90 s (found by an attack): files take turns by identity (migration 0022)."""
    await mail_with(conn, identity_id, [(f"f{n}.txt", "text/plain", f"file {n}".encode())
                                        for n in range(10)])
    other = (await create_identity(conn, (await create_tenant(conn, "beta")).id,
                                   "boss@beta.example")).id
    _, [contract] = await mail_with(conn, other, [("contract.txt", "text/plain", b"signed")])
    assert await drained(pool, limit=2) == 2
    assert await conn.fetchval("SELECT status FROM attachment_texts WHERE attachment_id = $1",
                               contract) == "ready"
    # and the first identity's files are still read oldest first
    assert await conn.fetchval(
        "SELECT a.filename FROM attachment_texts t JOIN attachments a ON a.id = t.attachment_id"
        " WHERE t.status = 'ready' AND t.identity_id = $1", identity_id) == "f0.txt"
