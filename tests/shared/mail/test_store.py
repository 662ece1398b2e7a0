"""Storing and threading messages in PostgreSQL (shared.mail.store), on real databases."""

from __future__ import annotations

import hashlib
import itertools

import pytest

from shared.ingest.pipeline import ingest_raw
from shared.tenancy.store import create_identity, create_tenant


def eml(mid: str | None, subject: str, *, refs: str = "", irt: str = "",
        sender: str = "ann@example.net", body: str = "hello", date: str = "Mon, 02 Nov 2026 10:00:00 +0000") -> bytes:
    lines = [f"From: Ann <{sender}>", "To: desk@acme.example", f"Subject: {subject}", f"Date: {date}"]
    if mid:
        lines.append(f"Message-ID: <{mid}>")
    if refs:
        lines.append(f"References: {refs}")
    if irt:
        lines.append(f"In-Reply-To: {irt}")
    return ("\r\n".join(lines) + "\r\n\r\n" + body + "\r\n").encode()


@pytest.fixture
async def identity_id(conn) -> str:
    tenant = await create_tenant(conn, "acme")
    return (await create_identity(conn, tenant.id, "desk@acme.example")).id


async def threads_of(conn, identity_id: str) -> list[set[str]]:
    rows = await conn.fetch("SELECT thread_id, array_agg(rfc_message_id) AS ids FROM messages"
                            " WHERE identity_id = $1 GROUP BY thread_id", identity_id)
    return sorted((set(r["ids"]) for r in rows), key=lambda s: sorted(s))


ROOT = eml("a@x", "Plan")
CHILD = eml("b@x", "Re: Plan", refs="<a@x>", irt="<a@x>")
GRANDCHILD = eml("c@x", "Re: Plan", refs="<a@x> <b@x>", irt="<b@x>")


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
async def test_threads_do_not_depend_on_arrival_order(conn, identity_id, order):
    for i in order:
        await ingest_raw(conn, None, identity_id, [ROOT, CHILD, GRANDCHILD][i])
    assert await threads_of(conn, identity_id) == [{"a@x", "b@x", "c@x"}]
    count = await conn.fetchval("SELECT message_count FROM threads")
    subject = await conn.fetchval("SELECT subject FROM threads")
    assert (count, subject) == (3, "Plan")


async def test_replies_to_a_missing_parent_share_a_thread(conn, identity_id):
    await ingest_raw(conn, None, identity_id, eml("r1@x", "Re: gone", irt="<gone@x>"))
    await ingest_raw(conn, None, identity_id, eml("r2@x", "Re: gone", refs="<gone@x>"))
    assert await threads_of(conn, identity_id) == [{"r1@x", "r2@x"}]


async def test_a_late_message_merges_two_threads(conn, identity_id):
    await ingest_raw(conn, None, identity_id, eml("p@x", "One"))
    await ingest_raw(conn, None, identity_id, eml("q@x", "Two"))
    assert len(await threads_of(conn, identity_id)) == 2
    await ingest_raw(conn, None, identity_id, eml("m@x", "Re: both", refs="<p@x> <q@x>"))
    assert await threads_of(conn, identity_id) == [{"p@x", "q@x", "m@x"}]
    assert await conn.fetchval("SELECT count(*) FROM threads") == 1
    assert await conn.fetchval("SELECT message_count FROM threads") == 3


async def test_subject_alone_never_joins_unrelated_threads(conn, identity_id):
    await ingest_raw(conn, None, identity_id, eml("s1@x", "Invoice"))
    await ingest_raw(conn, None, identity_id, eml("s2@x", "Invoice"))
    # a reply with headers follows its headers, not its subject
    await ingest_raw(conn, None, identity_id, eml("s3@x", "Re: Invoice", irt="<elsewhere@x>"))
    assert await threads_of(conn, identity_id) == [{"s1@x"}, {"s2@x"}, {"s3@x"}]


async def test_re_without_headers_falls_back_to_the_subject(conn, identity_id):
    await ingest_raw(conn, None, identity_id, eml("o1@x", "Van hire"))
    await ingest_raw(conn, None, identity_id, eml("o2@x", "RE: Fwd: van   HIRE"))
    assert await threads_of(conn, identity_id) == [{"o1@x", "o2@x"}]


async def test_a_stranger_never_joins_a_conversation_by_its_subject(conn, identity_id):
    """"Re: <subject>" with no In-Reply-To from someone outside the conversation joined it, and
    deep search then quoted the stranger's payment details as the thread's (found by an attack).
    Someone in it (From, To or Cc), or the identity itself, still joins by subject."""
    def on(day: str) -> str:
        return f"{day}, 0{3 if day == 'Tue' else 2} Nov 2026 10:00:00 +0000"

    await ingest_raw(conn, None, identity_id, eml("pcn@x", "Penalty charge notice",
                                                  sender="parking@council.example", date=on("Mon")))
    await ingest_raw(conn, None, identity_id, eml("fraud@x", "Re: Penalty charge notice",
                                                  sender="pay@evil.example", date=on("Mon")))
    await ingest_raw(conn, None, identity_id, eml("council@x", "RE: penalty charge notice",
                                                  sender="parking@council.example", date=on("Tue")))
    await ingest_raw(conn, None, identity_id, eml("ours@x", "Re: Penalty charge notice",
                                                  sender="desk@acme.example", date=on("Tue")))
    assert await threads_of(conn, identity_id) == [
        {"pcn@x", "council@x", "ours@x"}, {"fraud@x"}]
    # the stranger's own thread is joined by the stranger's next message without headers
    await ingest_raw(conn, None, identity_id, eml("fraud2@x", "Re: Penalty charge notice",
                                                  sender="pay@evil.example"))
    assert {"fraud@x", "fraud2@x"} in await threads_of(conn, identity_id)


async def test_not_a_msg_id_in_in_reply_to_joins_nothing(conn, identity_id):
    await ingest_raw(conn, None, identity_id, eml("y1@x", "[PATCH 1/2] one", irt="<yes>"))
    await ingest_raw(conn, None, identity_id, eml("y2@x", "[PATCH 2/2] two", irt="<yes>"))
    assert await threads_of(conn, identity_id) == [{"y1@x"}, {"y2@x"}]
    defects = await conn.fetchval("SELECT parse_defects FROM messages WHERE rfc_message_id = 'y1@x'")
    assert any("<yes>" in d for d in defects)


async def test_duplicates(conn, identity_id):
    first, _ = await ingest_raw(conn, None, identity_id, ROOT)
    again, _ = await ingest_raw(conn, None, identity_id, ROOT.replace(b"\r\n", b"\n"))
    assert again.duplicate and again.message_id == first.message_id
    other, _ = await ingest_raw(conn, None, identity_id, eml("a@x", "Plan", body="different"))
    assert not other.duplicate
    no_id = eml(None, "anonymous")
    assert not (await ingest_raw(conn, None, identity_id, no_id))[0].duplicate
    assert (await ingest_raw(conn, None, identity_id, no_id))[0].duplicate
    assert await conn.fetchval("SELECT count(*) FROM messages") == 3


async def test_direction_contacts_raw_and_attachments(conn, identity_id):
    attachment = bytes(range(256)) * 3
    import base64
    raw = (b"From: Desk <desk@acme.example>\r\nTo: Bo <bo@client.example>, ann@example.net\r\n"
           b"Subject: files\r\nMessage-ID: <out@acme.example>\r\nMIME-Version: 1.0\r\n"
           b"Content-Type: multipart/mixed; boundary=zz\r\n\r\n--zz\r\nContent-Type: text/plain\r\n\r\n"
           b"see attached\r\n--zz\r\nContent-Type: application/octet-stream\r\n"
           b"Content-Disposition: attachment; filename=data.bin\r\nContent-Transfer-Encoding: base64\r\n\r\n"
           + base64.encodebytes(attachment) + b"--zz--\r\n")
    outcome, _ = await ingest_raw(conn, None, identity_id, raw)
    row = await conn.fetchrow("SELECT direction, status, read, has_attachment FROM messages WHERE id = $1",
                              outcome.message_id)
    assert dict(row) == {"direction": "outbound", "status": "sent", "read": True, "has_attachment": True}
    stored = await conn.fetchrow("SELECT content, size, sha256, filename FROM attachments")
    assert stored["content"] == attachment and stored["size"] == 768
    assert stored["sha256"] == hashlib.sha256(attachment).digest()
    assert stored["filename"] == "data.bin"
    assert await conn.fetchval("SELECT raw FROM raw_messages") == raw
    await ingest_raw(conn, None, identity_id, eml("in@x", "hi", sender="bo@client.example"))
    contacts = {r["address"]: (r["inbound_count"], r["outbound_count"], r["display_name"])
                for r in await conn.fetch("SELECT * FROM contacts")}
    # the display name last seen wins
    assert contacts == {"bo@client.example": (1, 1, "Ann"), "ann@example.net": (0, 1, None)}


async def test_a_huge_text_is_read_up_to_the_limit_and_kept_whole(conn, identity_id):
    from shared.mail.store import READ_TEXT_CHARS, get_message

    body = "opening words\r\n" + "lorem ipsum dolor " * (READ_TEXT_CHARS // 18 + 1000) \
        + "\r\nzanzibarcode at the very end\r\n"
    outcome, _ = await ingest_raw(conn, None, identity_id, eml("huge@x", "Huge", body=body))
    record = await get_message(conn, identity_id, outcome.message_id, include_text=True)
    assert record is not None and record.text is not None
    assert len(record.text) == len(record.new_text) == READ_TEXT_CHARS
    assert record.text.startswith("opening words")
    stored = await conn.fetchval("SELECT length(text) FROM messages WHERE id = $1",
                                 outcome.message_id)
    assert stored > READ_TEXT_CHARS  # nothing stored is lost


@pytest.mark.parametrize(("stored", "wanted"), [
    ("x@xn--bcher-kva.example", "@bücher.example"),
    ("y@bücher.example", "@xn--bcher-kva.example"),
    ("y@bücher.example", "y@XN--BCHER-KVA.example"),
    ("z@mail.xn--bcher-kva.example", "@bücher.example"),
])
async def test_mail_wait_matches_a_domain_in_either_spelling(conn, identity_id, stored, wanted):
    # a sender stored as written never matched the other spelling of its domain, and the wait
    # ran out its timeout (found by a second attack)
    from shared.mail.store import MessageFilter, first_matching

    outcome, _ = await ingest_raw(conn, None, identity_id, eml("idn@x", "Hello", sender=stored))
    assert await first_matching(conn, identity_id, MessageFilter(from_=wanted)) \
        == outcome.message_id
    assert await first_matching(conn, identity_id, MessageFilter(from_="@other.example")) is None
