"""``pylota reindex`` gives mail stored before migration 0018 the words inside its compound
tokens (``shared.mail.compound``), so a search by one finds it."""

from __future__ import annotations

from shared.ingest.pipeline import ingest_raw
from shared.ingest.reindex import reindex
from shared.tenancy.store import create_identity, create_tenant


async def test_reindex_indexes_the_words_inside_paths_of_older_mail(conn):
    tenant = await create_tenant(conn, "acme")
    identity_id = (await create_identity(conn, tenant.id, "desk@acme.example")).id
    outcome, _ = await ingest_raw(conn, None, identity_id, (
        b"From: dev@kernel.example\r\nTo: desk@acme.example\r\nSubject: [PATCH] mm/hugetlb.c\r\n"
        b"Message-ID: <p@kernel.example>\r\n\r\nA fix.\r\n"))

    async def found(word: str) -> bool:
        return await conn.fetchval(
            "SELECT tsv @@ plainto_tsquery('en_unaccent', $2) FROM messages WHERE id = $1",
            outcome.message_id, word)

    assert await found("hugetlb")
    await conn.execute("UPDATE messages SET terms = ''")  # as stored before migration 0018
    assert not await found("hugetlb")
    assert (await reindex(conn, identity_id)).messages == 1
    assert await found("hugetlb")
    assert await conn.fetchval("SELECT terms FROM messages") == (
        "mm hugetlb.c\nmm hugetlb c\ndev kernel.example\ndev kernel example")
