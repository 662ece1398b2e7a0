-- Attachments by their bytes: before a batch worker reads a file, it looks for the result of
-- the same bytes read for the same identity (a forward carries the original's files, and a
-- forward of 400 cost the batch workers 100 s of extraction again: found by an attack).
-- Owner: shared/mail/store.py (attachments); the lookup: shared/extract/store.py.
CREATE INDEX attachments_sha256 ON attachments (sha256, id);
