"""One contract for every :class:`~shared.embeddings.embedder.Embedder` (STYLE.md section 2)."""

from __future__ import annotations

import numpy as np
import pytest

from shared.embeddings.embedder import (DIM, MAX_TOKENS, EmbedderUnavailable, HashEmbedder,
                                        OnnxEmbedder, load_embedder)


@pytest.fixture(scope="module", params=["hash", "onnx"])
def embedder(request: pytest.FixtureRequest):
    try:
        return load_embedder(request.param, threads=2)
    except EmbedderUnavailable as exc:
        pytest.skip(f"the ONNX model is not installed: {exc}")


def test_unit_vectors_of_the_declared_shape(embedder) -> None:
    vectors = embedder.embed(["Invoice overdue", "", "x" * 50_000])
    assert vectors.shape == (3, embedder.dim) == (3, DIM)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[[0, 2]], axis=1), 1.0, atol=1e-5)


def test_deterministic_and_batch_independent(embedder) -> None:
    texts = ["the parking fine for the van", "lunch on friday?"]
    together = embedder.embed(texts)
    alone = np.vstack([embedder.embed([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-4)
    assert np.allclose(embedder.embed(texts), together)


def test_related_texts_are_closer_than_unrelated(embedder) -> None:
    a, b, c = embedder.embed(["the invoice for March is overdue",
                              "reminder: the March invoice is overdue, please pay",
                              "photos from the company picnic"])
    assert float(a @ b) > float(a @ c) + 0.2


def test_no_vectors_for_no_texts(embedder) -> None:
    assert embedder.embed([]).shape[0] == 0


def test_the_onnx_model_finds_paraphrases() -> None:
    try:
        model = load_embedder("onnx")
    except EmbedderUnavailable as exc:
        pytest.skip(str(exc))
    query, right, wrong = model.embed(["the mailing list archive link is broken",
                                       "pipermail is down, the archives cannot be reached",
                                       "patch: fix a typo in the README"])
    assert float(query @ right) > float(query @ wrong)
    assert model.model != HashEmbedder.model


def test_off_and_unknown_names() -> None:
    assert load_embedder("off") is None
    with pytest.raises(ValueError):
        load_embedder("bert")


def test_a_short_message_is_one_chunk_as_before(embedder) -> None:
    assert embedder.split("Invoice", "please pay by Friday", 8) == ["Invoice\nplease pay by Friday"]
    assert embedder.split("Invoice", "", 8) == ["Invoice\n"]


def test_a_long_message_is_cut_into_led_windows_the_model_reads_whole(embedder) -> None:
    words = [f"word{i}" for i in range(3_000)]
    chunks = embedder.split("Subject of the patch", " ".join(words), 8)
    assert 2 <= len(chunks) <= 8
    assert all(c.startswith("Subject of the patch\n") for c in chunks)
    # consecutive windows share some text, and the first window starts at the start
    bodies = [c.split("\n", 1)[1].split() for c in chunks]
    assert bodies[0][0] == "word0"
    assert all(set(a) & set(b) for a, b in zip(bodies, bodies[1:]))
    seen = [w for body in bodies for w in body]
    assert seen.index(bodies[-1][-1]) > 0 and len(set(seen)) > len(bodies[0])
    if isinstance(embedder, OnnxEmbedder):
        counter = embedder._counter
        assert all(len(counter.encode(c).ids) <= MAX_TOKENS for c in chunks)
    # no more than the limit, and at least one
    assert len(embedder.split("s", " ".join(words), 2)) == 2
    assert len(embedder.split("s", " ".join(words), 1)) == 1


def test_every_window_is_reached_when_the_limit_allows(embedder) -> None:
    body = " ".join(f"w{i}" for i in range(600))
    chunks = embedder.split("s", body, 100)
    assert chunks[-1].split()[-1] == "w599"
    assert len(chunks) < 100


def test_a_long_subject_is_cut_so_the_window_keeps_room(embedder) -> None:
    chunks = embedder.split("subject " * 200, "body " * 2_000, 3)
    assert len(chunks) == 3 and all("body" in c for c in chunks)
