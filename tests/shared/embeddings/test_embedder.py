"""One contract for every :class:`~shared.embeddings.embedder.Embedder` (STYLE.md section 2)."""

from __future__ import annotations

import numpy as np
import pytest

from shared.embeddings.embedder import (DIM, EmbedderUnavailable, HashEmbedder, OnnxEmbedder,
                                        load_embedder)


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
        model = OnnxEmbedder()
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
