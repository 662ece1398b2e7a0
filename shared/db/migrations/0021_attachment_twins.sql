-- Attachments by their bytes: an attachment stored again (a forward carries the original's,
-- and a forward of 400 files cost the batch workers 100 s of extraction: found by an attack)
-- takes the text already read from its twin of the same identity (shared/extract/store.py).
-- Owner: shared/mail/store.py (attachments).
CREATE INDEX attachments_sha256 ON attachments (sha256);
