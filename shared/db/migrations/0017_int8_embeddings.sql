-- The ONNX embedder runs real int8 matrix products (issue 14): its vectors are stored under the
-- model all-minilm-l6-v2-int8pc, made once from the model all-minilm-l6-v2-int8 shipped before
-- (shared/embeddings/quantized.py; cosine 0.98-0.99 to the old vectors, but vectors of two models
-- are never compared). Owner: shared/embeddings/store.py (message_embeddings, embedding_queue).

-- Every message with a vector of the old model is queued again; the batch workers replace its
-- vectors (all its chunks) with the new model's. Until then the old vectors stay, unused by
-- search, and `pylota embeddings status` counts the message as not embedded yet.
INSERT INTO embedding_queue (message_id, identity_id)
SELECT message_id, identity_id FROM message_embeddings
WHERE model = 'all-minilm-l6-v2-int8' AND chunk = 0
ON CONFLICT DO NOTHING;
