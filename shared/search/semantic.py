"""The process's semantic search engine: the embedder for query texts and the vector index.

One :class:`SemanticEngine` per process and ``PM_EMBEDDER`` value (:func:`engine_for`). It loads
the model on first use, in a thread (about 0.5 s for ONNX; on a machine where no process has
built the int8 model yet, building it takes about 5 s more), and picks the vector index once
(pgvector when migration 0002 added ``vec_v``, else numpy). When the model cannot load,
:meth:`SemanticEngine.ready` returns the reason and every later call returns it at once: search
answers with keyword results and ``degraded: true`` (spec section 4.3). Query texts are embedded
in a thread, never in the event loop (STACK.md section 5).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np

from shared.config import Settings
from shared.embeddings.embedder import Embedder, EmbedderUnavailable, load_embedder
from shared.embeddings.index import NumpyIndex, VectorIndex, choose_index
from shared.logs import get_logger

__all__ = ["SemanticEngine", "engine_for"]

log = get_logger("shared.search.semantic")


class SemanticEngine:
    """Embedder plus vector index, loaded lazily; see the module docstring."""

    def __init__(self, embedder_name: str, threads: int, cache: str = "") -> None:
        self._name = embedder_name
        self._threads = threads
        self._cache = cache
        self._lock = asyncio.Lock()
        self._loaded = False
        self._problem: str | None = None
        self.embedder: Embedder | None = None
        self.index: VectorIndex | None = None
        self._numpy = NumpyIndex()

    async def ready(self, conn: asyncpg.Connection) -> str | None:
        """None when semantic search can run, else why not (model off or not loadable)."""
        async with self._lock:
            if not self._loaded:
                try:
                    self.embedder = await asyncio.to_thread(load_embedder, self._name,
                                                            self._threads, self._cache)
                    if self.embedder is None:
                        self._problem = "semantic search is off (PM_EMBEDDER=off)"
                except EmbedderUnavailable as exc:
                    self._problem = f"the embedding model is unavailable: {exc}"
                    log.error("embedder_unavailable", reason=str(exc))
                self.index = await choose_index(conn, self._numpy)
                self._loaded = True
                log.info("semantic_engine", embedder=self._name, index=self.index.name,
                         problem=self._problem)
        return self._problem

    async def embed_query(self, text: str) -> np.ndarray:
        """The unit vector of ``text`` (call :meth:`ready` first)."""
        assert self.embedder is not None
        matrix = await asyncio.to_thread(self.embedder.embed, [text])
        return matrix[0]

    async def nearest(self, conn: asyncpg.Connection, *, identity_ids: list[str],
                      vector: np.ndarray, as_of: datetime, k: int, where: str | None = None,
                      params: list[Any] | None = None) -> list[tuple[str, float]]:
        """The index's nearest messages to ``vector`` among the current model's vectors."""
        assert self.embedder is not None and self.index is not None
        return await self.index.nearest(conn, identity_ids=identity_ids, model=self.embedder.model,
                                        vector=vector, as_of=as_of, k=k, where=where,
                                        params=params)


_ENGINES: dict[tuple[str, int, str], SemanticEngine] = {}


def engine_for(settings: Settings) -> SemanticEngine:
    """The process's engine for ``settings.pm_embedder`` (created once, loaded on first use)."""
    key = (settings.pm_embedder, settings.pm_embed_threads, settings.pm_model_cache)
    if key not in _ENGINES:
        _ENGINES[key] = SemanticEngine(*key)
    return _ENGINES[key]
