"""One contract for every :class:`~shared.embeddings.index.VectorIndex`: numpy on the suite's
PostgreSQL 15 (no pgvector), pgvector on an embedded PostgreSQL 18 (STACK.md section 1.4)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from shared.db import open_database
from shared.embeddings.embedder import HashEmbedder
from shared.embeddings import index as index_module
from shared.embeddings.index import choose_index
from shared.embeddings.store import coverage, embed_pending, enqueue_missing, queue_length
from shared.ingest.pipeline import ingest_raw
from shared.tenancy.store import create_identity, create_tenant
from tests.shared.search.conftest import mail

TEXTS = {
    "fine": "parking fine for the delivery van on hill street",
    "fine2": "appeal against the parking fine issued to our van",
    "lunch": "team lunch on friday at the noodle bar",
    "invoice": "invoice for march consulting work attached",
}


@pytest.fixture
async def stack(backend_url: tuple[str, str]):
    backend, url = backend_url
    pool = await open_database(url, size=4, acquire_seconds=5)
    async with pool.acquire() as conn:
        tenant = await create_tenant(conn, "acme")
        one = (await create_identity(conn, tenant.id, "one@acme.example")).id
        two = (await create_identity(conn, tenant.id, "two@acme.example")).id
        ids = {}
        for key, text in TEXTS.items():
            outcome, _ = await ingest_raw(conn, None, one, mail(f"{key}@x", subject="", body=text))
            ids[key] = outcome.message_id
        outcome, _ = await ingest_raw(conn, None, two, mail("other@x", body=TEXTS["fine"]))
        ids["other"] = outcome.message_id
    embedder = HashEmbedder()
    assert await embed_pending(pool, embedder, batch=2) == 5
    async with pool.acquire() as conn:
        index = await choose_index(conn)
        assert index.name == backend
        yield {"conn": conn, "index": index, "one": one, "two": two, "ids": ids,
               "embedder": embedder, "pool": pool}
    await pool.close()


async def nearest(s, text: str, identities: list[str] | None = None, *, k: int = 10,
                  as_of: datetime | None = None, where: str | None = None,
                  params: list | None = None) -> list[tuple[str, float]]:
    vector = s["embedder"].embed([text])[0]
    return await s["index"].nearest(
        s["conn"], identity_ids=identities or [s["one"]], model=s["embedder"].model,
        vector=vector, as_of=as_of or datetime.now(timezone.utc), k=k, where=where, params=params)


async def test_ranks_by_cosine_best_first(stack) -> None:
    found = await nearest(stack, "parking fine van")
    names = {v: k for k, v in stack["ids"].items()}
    assert [names[i] for i, _ in found[:2]] == ["fine", "fine2"] or \
           [names[i] for i, _ in found[:2]] == ["fine2", "fine"]
    scores = [s for _, s in found]
    assert scores == sorted(scores, reverse=True) and -1.0 <= scores[-1] <= scores[0] <= 1.0001
    assert len(found) == 4


async def test_k_and_identity_scope(stack) -> None:
    assert len(await nearest(stack, "fine", k=1)) == 1
    other = await nearest(stack, "fine", [stack["two"]])
    assert [i for i, _ in other] == [stack["ids"]["other"]]
    both = await nearest(stack, "fine", [stack["one"], stack["two"]])
    assert len(both) == 5


async def test_as_of_leaves_out_later_mail(stack) -> None:
    before = datetime.now(timezone.utc) - timedelta(days=1)
    assert await nearest(stack, "fine", as_of=before) == []


async def test_where_filters_by_sql(stack) -> None:
    found = await nearest(stack, "fine", where="m.id <> $1", params=[stack["ids"]["fine"]])
    assert stack["ids"]["fine"] not in {i for i, _ in found} and len(found) == 3


async def test_new_and_re_embedded_vectors_are_seen(stack) -> None:
    conn = stack["conn"]
    assert len(await nearest(stack, "fine")) == 4  # fills the numpy cache
    outcome, _ = await ingest_raw(conn, None, stack["one"], mail("new@x", body="van fine again"))
    await embed_pending(stack["pool"], stack["embedder"])
    assert outcome.message_id in {i for i, _ in await nearest(stack, "fine")}
    # a model change queues everything again; re-embedding replaces rows, never duplicates them
    assert await enqueue_missing(conn, stack["embedder"].model) == 0
    assert await enqueue_missing(conn, "another-model") == 6
    assert await embed_pending(stack["pool"], stack["embedder"]) == 6
    found = await nearest(stack, "fine")
    assert len(found) == len({i for i, _ in found}) == 5
    assert await queue_length(conn) == 0
    assert await coverage(conn, [stack["one"]], stack["embedder"].model) == 1.0
    assert await coverage(conn, [stack["one"]], "another-model") == 0.0


async def test_a_filter_is_met_whether_the_nearest_pass_it_or_not(stack, monkeypatch) -> None:
    # The numpy index checks its PROBE nearest first and reads the whole filter only when too
    # few of them pass; both ways must give the same answer as reading the filter whole.
    monkeypatch.setattr(index_module, "PROBE", 2)
    monkeypatch.setattr(index_module, "PROBE_PER_RESULT", 1)
    names = {v: k for k, v in stack["ids"].items()}
    selective = await nearest(stack, "parking fine van", k=1, where="m.id = $1",
                              params=[stack["ids"]["lunch"]])
    assert [names[i] for i, _ in selective] == ["lunch"]
    broad = await nearest(stack, "parking fine van", k=1, where="m.id <> $1",
                          params=[stack["ids"]["lunch"]])
    assert [names[i] for i, _ in broad] in (["fine"], ["fine2"])
    every = await nearest(stack, "parking fine van", k=3, where="true")
    assert len(every) == 3
