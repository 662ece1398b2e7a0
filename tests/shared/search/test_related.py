"""Related messages (``shared.search.related``) and contact search (``shared.mail.contacts``)."""

from __future__ import annotations

from datetime import datetime, timezone

from shared.db import open_database
from shared.embeddings.embedder import HashEmbedder
from shared.embeddings.store import embed_pending
from shared.mail.contacts import search_contacts
from shared.search.related import find_related
from shared.search.semantic import SemanticEngine
from tests.shared.search.conftest import OWN, Mailbox


async def fill(box: Mailbox) -> None:
    await box.add("pcn", sender="parking@council.example", subject="Penalty Charge Notice",
                  body="PCN WK05123456 issued to vehicle AB12 CDE on Hill Street.",
                  date="Mon, 02 Nov 2026 10:00:00 +0000")
    await box.add("pcn-reply", sender=OWN, to="parking@council.example",
                  subject="Re: Penalty Charge Notice", body="We will appeal.",
                  date="Mon, 02 Nov 2026 12:00:00 +0000", in_reply_to="pcn")
    await box.add("photos", sender="driver@acme.example", subject="photos of the van",
                  body="Photos of AB12CDE parked while loading, for the appeal.",
                  date="Tue, 03 Nov 2026 10:00:00 +0000")
    await box.add("appeal", sender=OWN, to="parking@council.example", subject="Appeal: notice",
                  body="We appeal against PCN WK05123456: the van was loading.",
                  date="Wed, 04 Nov 2026 10:00:00 +0000")
    await box.add("council-other", sender="parking@council.example", subject="Parking permits",
                  body="Renew your residents' permits.", date="Thu, 05 Nov 2026 10:00:00 +0000")
    await box.add("council-same", sender="parking@council.example",
                  subject="Penalty charge notice: reminder", body="Payment is due.",
                  date="Fri, 06 Nov 2026 10:00:00 +0000")
    await box.add("phone-only", sender="x@other.example", subject="hello",
                  body="Call us on 020 7946 0018.", date="Sat, 07 Nov 2026 10:00:00 +0000")


async def related(box: Mailbox, engine: str = "off", limit: int = 10):
    found, degraded = await find_related(box.conn, SemanticEngine(engine, 1), box.identity_id,
                                         box.ids["pcn"], limit=limit)
    back = {v: k for k, v in box.ids.items()}
    return {back[r.hit.message_id]: r.reasons for r in found}, [back[r.hit.message_id] for r in found], degraded


async def test_shared_references_then_correspondent_and_subject(mailbox: Mailbox) -> None:
    await fill(mailbox)
    reasons, order, degraded = await related(mailbox)
    assert degraded  # the model is off: references and correspondents only
    assert "pcn-reply" not in reasons  # same thread
    assert order[0] == "appeal"  # the PCN number and the council with "notice"
    assert reasons["appeal"] == ["ref:WK05123456", "participant:parking@council.example",
                                 "subject:notice"]
    assert reasons["photos"] == ["ref:AB12CDE"]
    assert reasons["council-same"] == ["participant:parking@council.example", "subject:charge",
                                       "subject:notice", "subject:penalty"]
    assert "council-other" not in reasons and "phone-only" not in reasons
    assert len((await related(mailbox, limit=1))[1]) == 1


async def test_semantic_neighbours_add_similarity(mailbox: Mailbox, db_url: str) -> None:
    await fill(mailbox)
    pool = await open_database(db_url, size=2, acquire_seconds=5)
    await embed_pending(pool, HashEmbedder())
    await pool.close()
    found, degraded = await find_related(mailbox.conn, SemanticEngine("hash", 1),
                                         mailbox.identity_id, mailbox.ids["pcn"], limit=10)
    assert not degraded
    assert all(r.hit.semantic_score is not None for r in found)
    assert all(r.hit.thread_id != found[0].hit.thread_id or r is found[0] for r in found)


async def test_contacts_prefix_and_ranking(mailbox: Mailbox) -> None:
    await fill(mailbox)
    await mailbox.add("jo", sender="Jo Bloggs <jo@brightwell.example>", subject="hi", body="hi",
                      date=datetime.now(timezone.utc).strftime("%a, %d %b %Y %H:%M:%S +0000"))

    async def addresses(q: str) -> list[str]:
        found, _ = await search_contacts(mailbox.conn, mailbox.identity_id, q, offset=0, limit=10)
        return [c.address for c in found]

    assert await addresses("parking") == ["parking@council.example"]
    assert await addresses("Bloggs") == ["jo@brightwell.example"]  # a word of the name
    assert await addresses("@council") == ["parking@council.example"]
    assert await addresses("council") == ["parking@council.example"]  # a domain prefix
    assert await addresses("@parking") == []  # @ means the domain only
    assert await addresses("ouncil") == []  # prefixes, not substrings
    everyone = await addresses("")
    # sent-to and frequent first: parking@ has 4 inbound and 2 outbound messages
    assert everyone[0] == "parking@council.example"
    page, more = await search_contacts(mailbox.conn, mailbox.identity_id, "", offset=0, limit=1)
    assert len(page) == 1 and more


async def test_a_reference_too_many_messages_share_relates_nothing(mailbox: Mailbox) -> None:
    from shared.mail.refs import sharing_refs
    await fill(mailbox)
    pcn = mailbox.ids["pcn"]
    assert {(mailbox.mids([m]).pop(), v) for m, _, v in await sharing_refs(mailbox.conn, pcn)} == {
        ("appeal", "WK05123456"), ("photos", "AB12CDE")}
    assert {v for _, _, v in await sharing_refs(mailbox.conn, pcn, most=1)} == {
        "WK05123456", "AB12CDE"}
    await mailbox.add("photos-2", sender="driver@acme.example", subject="more photos",
                      body="AB12 CDE again.", date="Sun, 08 Nov 2026 10:00:00 +0000")
    assert {v for _, _, v in await sharing_refs(mailbox.conn, pcn, most=1)} == {"WK05123456"}
