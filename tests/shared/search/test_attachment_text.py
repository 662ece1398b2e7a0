"""Search over attachment text (``shared.search``): a word only in the ready text of an
attachment finds its message in every mode that ranks words, ``why`` names the attachments that
hold it, an exclusion excludes it, and text not yet extracted or of another identity finds
nothing."""

from __future__ import annotations

import asyncio

from shared.db import open_database
from shared.extract.store import extract_pending
from shared.ingest.pipeline import ingest_raw
from shared.tenancy.store import create_identity
from tests.shared.extract import documents
from tests.shared.search.conftest import Mailbox, mail
from tests.shared.search.test_engine import embed_all, hit, in_attachments, mids, search

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


async def extracted(box: Mailbox) -> None:
    pool = await open_database(box.dsn, size=2, acquire_seconds=5)
    try:
        async with asyncio.timeout(120):
            await extract_pending(pool)
    finally:
        await pool.close()


async def test_words_in_ready_attachment_text_find_the_message_and_why_says_so(mailbox: Mailbox):
    box = mailbox
    policy = documents.docx_file([["The indemnity clause covers flood damage."]])
    await box.add("letter", subject="Your policy", body="Please find your policy attached.",
                  attachment=("policy.docx", DOCX, policy))
    await box.add("talk", subject="Indemnity", body="We spoke about the indemnity on Monday.",
                  date="Tue, 03 Nov 2026 10:00:00 +0000")
    await box.add("pending", subject="Later", body="Another file.",
                  attachment=("later.txt", "application/octet-stream",
                              b"indemnity, not yet extracted"))
    # Another identity of the tenant holds the word in its attachment: never found here.
    other = await create_identity(box.conn, box.tenant_id, "other@acme.example")
    await ingest_raw(box.conn, None, other.id, mail(
        "elsewhere", to="other@acme.example", subject="x", body="y",
        attachment=("x.txt", "application/octet-stream", b"indemnity elsewhere")))
    await extracted(box)
    # "later.txt" stands for a file no worker has read yet.
    await box.conn.execute(
        "UPDATE attachment_texts SET status = 'pending', tsv = NULL, pages = '{}',"
        " total_pages = NULL WHERE attachment_id IN (SELECT id FROM attachments"
        " WHERE filename = 'later.txt')")
    await embed_all(box.dsn)
    attachment_id = await box.conn.fetchval(
        "SELECT id FROM attachments WHERE filename = 'policy.docx'")

    for mode in ("keyword", "hybrid"):
        found = await search(box, "indemnity", mode)
        assert mids(box, found)[:2] == ["talk", "letter"], mode  # its own text ranks first
        if mode == "keyword":  # hybrid adds semantic neighbours of every message
            assert mids(box, found) == ["talk", "letter"]
        assert in_attachments(found) == {box.ids["letter"]: [attachment_id]}
        assert hit(found, box.ids["letter"]).matched == ["indemnity"]
    phrase = await search(box, '"flood damage"', "keyword")
    assert mids(box, phrase) == ["letter"]
    assert in_attachments(phrase) == {box.ids["letter"]: [attachment_id]}
    assert mids(box, await search(box, "indemnity -flood", "keyword")) == ["talk"]
    assert mids(box, await search(box, "indemnity has:attachment", "keyword")) == ["letter"]
    assert in_attachments(await search(box, "policy", "keyword")) == {}


async def test_words_inside_file_names_and_paths_of_attachment_text_are_found(mailbox: Mailbox):
    """A forwarded email's text listing "Hello from SwiftMailer.docx" was not found by
    "SwiftMailer" (found by a new user): attachment text gets the words of its compound
    tokens, as a message's text does."""
    box = mailbox
    await box.add("fwd", subject="Fwd: files", body="See the attached mail.",
                  attachment=("old.txt", "text/plain",
                              b"Attachments: Hello from SwiftMailer.docx, src/quuxlib/init.c"))
    await extracted(box)
    for q in ("SwiftMailer", "quuxlib"):
        found = await search(box, q, "keyword")
        assert mids(box, found) == ["fwd"], q
        assert in_attachments(found) == {box.ids["fwd"]: [
            await box.conn.fetchval("SELECT id FROM attachments WHERE filename = 'old.txt'")]}
