-- Live mail before bulk loads in the embedding queue: one first-in, first-out queue for every
-- tenant made a message arriving over SMTP wait about 5 minutes behind another tenant's import
-- of 6,046 messages, unfindable by meaning meanwhile (found by a new user). Imports and
-- re-embedding (`pylota embeddings`) queue as bulk; workers take live rows first.
-- Owner: shared/embeddings/store.py (embedding_queue).
ALTER TABLE embedding_queue ADD COLUMN bulk boolean NOT NULL DEFAULT false;
-- What is queued now is the backlog of imports and of migrations 0013 and 0017.
UPDATE embedding_queue SET bulk = true;
DROP INDEX embedding_queue_time;
CREATE INDEX embedding_queue_turn ON embedding_queue (bulk, queued_at, message_id);
