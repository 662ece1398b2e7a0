"""Ingest queues attachment text (shared.ingest.pipeline): every stored attachment is ``pending``
in the message's own transaction, a duplicate queues nothing, and the batch workers'
extraction drain is woken (``JOB_EXTRACT`` on the wake list) only when something was queued."""

from __future__ import annotations

from email.message import EmailMessage

from shared.events import JOB_EXTRACT, wake_key
from shared.extract.outcome import TextStatus
from shared.extract.store import text_statuses
from shared.ingest.pipeline import ingest_raw
from shared.ingest.reindex import reindex
from shared.mail.store import message_attachment_ids
from shared.tenancy.store import create_identity, create_tenant
from tests.conftest import NAMESPACE


def message(message_id: str, files: list[tuple[str, bytes]]) -> bytes:
    mail = EmailMessage()
    mail["From"] = "ann@example.net"
    mail["To"] = "desk@acme.example"
    mail["Subject"] = "Files"
    mail["Message-ID"] = f"<{message_id}@example.net>"
    mail.set_content("Attached.")
    for filename, content in files:
        mail.add_attachment(content, maintype="application", subtype="octet-stream",
                            filename=filename)
    return mail.as_bytes()


async def test_ingest_queues_every_attachment_and_wakes_the_drain(conn, redis):
    tenant = await create_tenant(conn, "acme")
    identity_id = (await create_identity(conn, tenant.id, "desk@acme.example")).id
    namespace = f"{NAMESPACE}-ingest-wake"
    key = wake_key(namespace)
    await redis.delete(key)
    try:
        raw = message("two-files", [("a.pdf", b"%PDF-1.4"), ("b.bin", b"\x00\x01")])
        outcome, _ = await ingest_raw(conn, redis, identity_id, raw, namespace=namespace)
        ids = await message_attachment_ids(conn, identity_id, outcome.message_id)
        assert await text_statuses(conn, ids) == {i: TextStatus.PENDING for i in ids}
        assert len(ids) == 2
        assert await redis.lrange(key, 0, -1) == [JOB_EXTRACT.encode()]

        await redis.delete(key)
        again, _ = await ingest_raw(conn, redis, identity_id, raw, namespace=namespace)
        assert again.duplicate
        plain, _ = await ingest_raw(conn, redis, identity_id, message("none", []),
                                    namespace=namespace)
        assert not plain.duplicate
        assert await redis.lrange(key, 0, -1) == []  # nothing new to extract: not woken
        assert await conn.fetchval("SELECT count(*) FROM attachment_texts") == 2
    finally:
        await redis.delete(key)


async def test_reindex_queues_attachments_of_mail_stored_before(conn):
    tenant = await create_tenant(conn, "acme")
    identity_id = (await create_identity(conn, tenant.id, "desk@acme.example")).id
    outcome, _ = await ingest_raw(conn, None, identity_id, message("old", [("a.pdf", b"%PDF")]))
    await conn.execute("DELETE FROM attachment_texts")  # stored before attachment text existed
    done = await reindex(conn, identity_id)
    assert (done.messages, done.attachments_queued) == (1, 1)
    ids = await message_attachment_ids(conn, identity_id, outcome.message_id)
    assert await text_statuses(conn, ids) == {ids[0]: TextStatus.PENDING}
    assert (await reindex(conn)).attachments_queued == 0
