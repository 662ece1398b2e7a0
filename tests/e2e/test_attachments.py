"""Attachment text end to end (issue 11): mail imported with ``pylota import`` as a user would,
a real batch worker (arq, its drain ticker, the sandbox) extracting it, and the official MCP
Python SDK reading it through a real uvicorn front: mail_get_message's text status,
mail_get_attachment_text's pages (validated against its outputSchema), and mail_search finding
words that only an attachment holds.

The batch worker's drain tick is set to a minute, so text that is ready within seconds proves
that the import woke the extraction drain."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import msgspec
from jsonschema import Draft202012Validator

from shared.extract.limits import WALL_SECONDS
from shared.tools.registry import TOOLS
from tests.conftest import NAMESPACE, REDIS_URL, ROOT, running_front, running_worker, settings_for
from tests.e2e.harness import sdk_client
from tests.e2e.transport_kit import keyed_identity
from tests.shared.extract import documents
from tests.shared.extract.sandboxes import sandbox_pids
from tests.shared.extract.test_formats import TIKA

DESK = "desk@acme.example"
OCTET = "application/octet-stream"
#: The kit's image-only PDF: ready with one empty page (no OCR).
IMAGE_ONLY = "testPDF_Version.11.x.PDFA-1b.pdf"
OUTPUT = {t.name: Draft202012Validator(t.output_schema) for t in TOOLS if t.output_schema}


def eml(path: Path, subject: str, files: list[tuple[str, str, bytes]]) -> Path:
    """Write a message carrying ``files`` (filename, content type, bytes) to ``path``."""
    message = EmailMessage()
    message["From"] = "Ann Archer <ann@example.net>"
    message["To"] = DESK
    message["Subject"] = subject
    message["Message-ID"] = f"<{path.stem}@example.net>"
    message["Date"] = "Mon, 30 Nov 2026 10:00:00 +0000"
    message.set_content("The documents are attached.")
    for filename, content_type, content in files:
        maintype, subtype = content_type.split("/")
        message.add_attachment(content, maintype=maintype, subtype=subtype, filename=filename)
    path.write_bytes(message.as_bytes())
    return path


def pylota_import(db_url: str, path: Path) -> None:
    """``pylota import`` of ``path`` into the desk, in this test run's namespace (so that its
    wake reaches this run's batch worker)."""
    env = {**os.environ, "DATABASE_URL": db_url, "REDIS_URL": REDIS_URL,
           "PM_NAMESPACE": NAMESPACE, "PM_DKIM_VERIFY": "false"}
    done = subprocess.run([sys.executable, "-m", "cli", "import", "--identity", DESK,
                           "--no-progress", str(path)], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def body(result: Any, tool: str) -> dict[str, Any]:
    assert not result.is_error, result.content
    OUTPUT[tool].validate(result.structured_content)
    return result.structured_content


async def settled(client: Any, message_id: str, seconds: float) -> list[dict[str, Any]]:
    """The message's attachments once none is ``pending`` (read with mail_get_message)."""
    async with asyncio.timeout(seconds):
        while True:
            message = body(await client.call_tool("mail_get_message",
                                                  {"message_id": message_id}),
                           "mail_get_message")
            if all(a["text_status"] != "pending" for a in message["attachments"]):
                return message["attachments"]
            await asyncio.sleep(0.2)


async def message_id_of(conn, subject: str) -> str:
    return await conn.fetchval("SELECT id FROM messages WHERE subject = $1", subject)


async def test_the_kits_office_files_give_their_text_after_a_batch_worker(db_url, conn, kit,
                                                                          tmp_path):
    _, _, _, token = await keyed_identity(conn, DESK)
    folder = kit / "corpus" / "attachments" / "tika"
    names = sorted([*TIKA, IMAGE_ONLY])
    assert len(names) == 12 and all((folder / n).is_file() for n in names)
    # Half as the generic type mailers use for unknown files: told by extension and magic bytes.
    files = [(n, OCTET if i % 2 else "application/x-unknown", (folder / n).read_bytes())
             for i, n in enumerate(names)]
    settings = settings_for(db_url, pm_embedder="hash", pm_embed_poll_seconds=60)
    async with running_front(settings) as url, running_worker(settings, batch=True):
        started = time.monotonic()
        pylota_import(db_url, eml(tmp_path / "office-files.eml", "Office files", files))
        message_id = await message_id_of(conn, "Office files")
        async with sdk_client(url, token) as client:
            attachments = await settled(client, message_id, 60)
            woken_within = time.monotonic() - started
            assert [a["filename"] for a in attachments] == names
            texts: dict[str, dict[str, Any]] = {}
            for attachment in attachments:
                texts[attachment["filename"]] = body(await client.call_tool(
                    "mail_get_attachment_text",
                    {"message_id": message_id, "attachment_id": attachment["id"]}),
                    "mail_get_attachment_text")
            odt = next(a["id"] for a in attachments if a["filename"] == "testOpenOffice2.odt")
            found = body(await client.call_tool("mail_search",
                                                {"q": "NeoOffice", "mode": "keyword"}),
                         "mail_search")
    # The drain ticks once a minute: ready well before, so the import woke it.
    assert woken_within < 45
    assert {n: t["status"] for n, t in texts.items()} == {n: "ready" for n in names}
    given = 0
    for name, expected in TIKA.items():
        got = texts[name]
        assert got["truncated"] is False and got["total_pages"] >= 1
        assert [p["page"] for p in got["pages"]] == list(range(1, min(3, got["total_pages"]) + 1))
        for page, words in expected.items():
            if page > 3:
                continue
            for word in words:
                assert word in got["pages"][page - 1]["text"], (name, page, word)
        given += 1
    assert given == 11
    assert (texts[IMAGE_ONLY]["pages"], texts[IMAGE_ONLY]["total_pages"]) == (
        [{"page": 1, "text": ""}], 1)
    assert [h["message_id"] for h in found["hits"]] == [message_id]
    assert found["hits"][0]["why"]["matched"] == ["NeoOffice"]
    assert found["hits"][0]["why"]["attachments"] == [odt]


async def test_hostile_attachments_end_final_within_the_limit_and_the_worker_goes_on(
        db_url, conn, tmp_path):
    _, _, _, token = await keyed_identity(conn, DESK)
    files = [
        ("bomb.docx", OCTET, documents.zip_bomb_docx()),
        ("loop.pdf", "application/pdf", documents.pdf(["loop"], kids_loop=True)),
        # a 200 MB declared part: a zip whose directory declares it, never inflated
        ("declared.xlsx", OCTET, documents.zip_bomb_docx(expanded_bytes=200 * 1024 * 1024)),
        ("locked.pdf", "application/pdf",
         documents.encrypted_pdf("Salary figures", user_password="hunter2")),
        ("after.docx", OCTET, documents.docx_file([["Still read after them"]])),
    ]
    settings = settings_for(db_url, pm_embedder="hash", pm_embed_poll_seconds=60)
    async with running_front(settings) as url, running_worker(settings, batch=True):
        pylota_import(db_url, eml(tmp_path / "hostile.eml", "Hostile files", files))
        message_id = await message_id_of(conn, "Hostile files")
        async with sdk_client(url, token) as client:
            # Each file within its own limit, one after the other.
            attachments = await settled(client, message_id, len(files) * (WALL_SECONDS + 5))
            results = {a["filename"]: body(await client.call_tool(
                "mail_get_attachment_text",
                {"message_id": message_id, "attachment_id": a["id"]}), "mail_get_attachment_text")
                for a in attachments}
    assert {n: (r["status"], r["reason"]) for n, r in results.items()} == {
        "bomb.docx": ("skipped", "compression_ratio"),
        "loop.pdf": ("unavailable", "corrupt"),
        "declared.xlsx": ("skipped", "uncompressed_size"),
        "locked.pdf": ("unavailable", "encrypted"),
        "after.docx": ("ready", None),
    }
    assert all(r["pages"] == [] and r["total_pages"] is None
               for n, r in results.items() if n != "after.docx")
    assert results["after.docx"]["pages"] == [{"page": 1, "text": "Still read after them"}]
    spent = await conn.fetchval(
        "SELECT max(extract(epoch FROM extracted_at - claimed_at)) FROM attachment_texts")
    assert spent < WALL_SECONDS


async def test_pages_ranges_and_errors_through_the_sdk(db_url, conn, tmp_path):
    _, _, _, token = await keyed_identity(conn, DESK)
    long_pages = [f"Page {n} " + "x" * 40_000 for n in range(1, 6)]
    files = [("long.pdf", "application/pdf", documents.pdf(long_pages)),
             ("photo.png", "image/png", b"\x89PNG\r\n\x1a\n" + bytes(64))]
    settings = settings_for(db_url, pm_embedder="hash", pm_embed_poll_seconds=60)
    async with running_front(settings) as url, running_worker(settings, batch=True):
        pylota_import(db_url, eml(tmp_path / "long.eml", "Long file", files))
        message_id = await message_id_of(conn, "Long file")
        async with sdk_client(url, token) as client:
            long_id, png_id = [a["id"] for a in await settled(client, message_id, 60)]

            async def text(**args: Any) -> Any:
                return await client.call_tool("mail_get_attachment_text",
                                              {"message_id": message_id, **args})

            first = body(await text(attachment_id=long_id), "mail_get_attachment_text")
            every = body(await text(attachment_id=long_id, pages="1-5"),
                         "mail_get_attachment_text")
            fifth = body(await text(attachment_id=long_id, pages="5"), "mail_get_attachment_text")
            beyond = body(await text(attachment_id=long_id, pages="6-9"),
                          "mail_get_attachment_text")
            photo = body(await text(attachment_id=png_id), "mail_get_attachment_text")
            backwards = await text(attachment_id=long_id, pages="3-1")
            other = await text(attachment_id=png_id.lower())  # not the id pattern
            missing = await client.call_tool("mail_get_attachment_text", {
                "message_id": "msg_" + "0" * 26, "attachment_id": long_id})
            unknown = await text(attachment_id="att_" + "0" * 26)
    # Each page cut to 32,000 characters; three such pages (96,000 bytes) fit in 96 KB
    # (98,304 bytes), five do not: the last two are dropped.
    for result in (first, every):
        assert result["total_pages"] == 5 and result["truncated"] is True
        assert [p["page"] for p in result["pages"]] == [1, 2, 3]
        for page in result["pages"]:
            assert len(page["text"]) == 32_000 and page["text"].endswith("…")
            assert page["text_truncated"] is True
        assert len(msgspec.json.encode(result)) <= 96 * 1024
    assert fifth["pages"][0]["page"] == 5 and fifth["pages"][0]["text"].startswith("Page 5 x")
    assert (beyond["pages"], beyond["total_pages"], beyond["truncated"]) == ([], 5, False)
    assert (photo["status"], photo["reason"], photo["pages"]) == ("skipped", "unsupported_type",
                                                                 [])
    errors = {}
    for name, result in (("backwards", backwards), ("other", other), ("missing", missing),
                         ("unknown", unknown)):
        assert result.is_error, name
        errors[name] = msgspec.json.decode(result.content[0].text)["error"]["code"]
    assert errors == {"backwards": "invalid_request", "other": "invalid_request",
                      "missing": "message_not_found", "unknown": "attachment_not_found"}


async def test_a_batch_worker_killed_mid_file_leaves_it_to_the_next_worker(db_url, conn,
                                                                           tmp_path):
    await keyed_identity(conn, DESK)
    settings = settings_for(db_url, pm_embedder="hash", pm_embed_poll_seconds=1)
    pylota_import(db_url, eml(tmp_path / "slow.eml", "Slow file",
                              [("slow.pdf", "application/pdf", documents.slow_pdf())]))
    env = {**os.environ, "DATABASE_URL": db_url, "REDIS_URL": REDIS_URL,
           "PM_NAMESPACE": NAMESPACE, "PM_EMBEDDER": "hash", "PM_EMBED_POLL_SECONDS": "1"}
    worker = subprocess.Popen([sys.executable, "-m", "cli", "worker", "--batch"], env=env,
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # ``pylota worker --batch`` claims the file and starts its sandbox: then it is killed.
        async with asyncio.timeout(60):
            while not (await conn.fetchval("SELECT attempts FROM attachment_texts") == 1
                       and sandbox_pids(worker.pid)):
                assert worker.poll() is None, "the worker exited"
                await asyncio.sleep(0.05)
    finally:
        worker.send_signal(signal.SIGKILL)
        await asyncio.to_thread(worker.wait)
    async with asyncio.timeout(10):
        while sandbox_pids(worker.pid):
            await asyncio.sleep(0.05)
    row = await conn.fetchrow("SELECT status, attempts FROM attachment_texts")
    assert (row["status"], row["attempts"]) == ("pending", 1)
    # The next worker claims it again (the dead one's drain run released by its ticker) and
    # ends it within the per-file limit.
    async with running_worker(settings, batch=True):
        async with asyncio.timeout(WALL_SECONDS + 60):
            while await conn.fetchval("SELECT status FROM attachment_texts") == "pending":
                await asyncio.sleep(0.2)
    row = await conn.fetchrow("SELECT status, reason, attempts FROM attachment_texts")
    assert row["attempts"] == 2
    assert (row["status"], row["reason"]) in {("ready", None), ("unavailable", "timeout"),
                                              ("unavailable", "cpu_time")}


async def test_mail_wait_shows_each_attachments_text_status(db_url, conn, tmp_path):
    _, _, _, token = await keyed_identity(conn, DESK)
    settings = settings_for(db_url, pm_embedder="hash")
    files = [("plan.pdf", "application/pdf", documents.pdf(["The plan"]))]
    async with running_front(settings) as url, running_worker(settings):
        async with sdk_client(url, token) as client:
            # since: before the import, so the wait finds the message however the two interleave
            since = datetime.now(timezone.utc).isoformat()
            waiting = asyncio.create_task(client.call_tool(
                "mail_wait", {"subject_contains": "Waited plan", "since": since,
                              "timeout_seconds": 30}))
            await asyncio.to_thread(pylota_import, db_url,
                                    eml(tmp_path / "wait.eml", "Waited plan", files))
            got = body(await waiting, "mail_wait")
    # No batch worker runs here: the text is queued, not extracted.
    assert [(a["filename"], a["text_status"]) for a in got["message"]["attachments"]] == [
        ("plan.pdf", "pending")]
