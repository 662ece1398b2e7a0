-- Chunked embeddings (issues 10 and 14): a long message gets up to MAX_CHUNKS vectors, one per
-- window of 256 tokens, each led by its subject; its similarity to a query is its best chunk's.
-- Owner: shared/embeddings/store.py (message_embeddings, embedding_queue).

-- Every vector stored before is its message's chunk 0 (subject and the start of the text), which
-- is what the chunked embedder computes first: those rows stay valid as they are.
ALTER TABLE message_embeddings ADD COLUMN chunk smallint NOT NULL DEFAULT 0 CHECK (chunk >= 0);
ALTER TABLE message_embeddings DROP CONSTRAINT message_embeddings_pkey;
ALTER TABLE message_embeddings ADD PRIMARY KEY (message_id, chunk);
-- Coverage and progress count messages, that is their chunk 0 rows, from the index alone.
CREATE INDEX message_embeddings_heads ON message_embeddings (identity_id, model) WHERE chunk = 0;

-- A message longer than one window (about 1,000 characters of English with its subject) gets
-- its further chunks when the batch workers embed it again: queue those that have a vector.
INSERT INTO embedding_queue (message_id, identity_id)
SELECT m.id, m.identity_id FROM messages m
JOIN message_embeddings e ON e.message_id = m.id
WHERE length(coalesce(nullif(btrim(m.new_text), ''), m.text)) > 800
ON CONFLICT DO NOTHING;
