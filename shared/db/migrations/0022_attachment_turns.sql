-- Each identity's files take turns in the attachment text queue: one first-in, first-out queue
-- let a 50 KB message of 499 text files hold another tenant's contract for 90 s, and four
-- slow PDFs for two minutes (found by an attack). A file queued while its identity already
-- has N pending gets turn N; workers take the lowest turn first, then the oldest.
-- Owner: shared/extract/store.py (attachment_texts).
ALTER TABLE attachment_texts ADD COLUMN turn integer NOT NULL DEFAULT 0;
DROP INDEX attachment_texts_pending;
CREATE INDEX attachment_texts_pending ON attachment_texts (turn, queued_at, attachment_id)
    WHERE status = 'pending';
CREATE INDEX attachment_texts_pending_identity ON attachment_texts (identity_id)
    WHERE status = 'pending';
