"""Embeddings of messages for semantic search (STACK.md sections 1 and 5).

- ``embedder``: the :class:`~shared.embeddings.embedder.Embedder` interface, the offline ONNX
  MiniLM model and a deterministic hash embedder for tests.
- ``store``: owns ``message_embeddings`` and ``embedding_queue``; ingest queues, the batch worker
  and ``pylota embeddings backfill`` drain.
- ``index``: the :class:`~shared.embeddings.index.VectorIndex` interface, exact numpy search per
  identity and pgvector where the extension exists.

The front embeds only the short query text (in a thread); message texts are embedded on workers.
"""

__all__: list[str] = []
