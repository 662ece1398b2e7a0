-- Attachment text, page by page (issue 11; spec section 4.3, mail_get_attachment_text).
-- Owner: shared/extract/store.py. Ingest queues a row per attachment ('pending'); batch workers
-- claim pending rows (FOR UPDATE SKIP LOCKED, then a session advisory lock held while the file
-- is extracted outside any transaction) and store the result.
CREATE TABLE attachment_texts (
    attachment_id  text PRIMARY KEY REFERENCES attachments (id) ON DELETE CASCADE,
    identity_id    text NOT NULL REFERENCES identities (id),
    status         text NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'ready', 'unavailable', 'skipped')),
    reason         text,                -- shared/extract/outcome.py Reason; null when pending or ready
    kind           text,                -- detected format (shared/extract/detect.py), when known
    pages          text[] NOT NULL DEFAULT '{}',   -- page 1 first, each cut at MAX_PAGE_CHARS
    total_pages    integer CHECK (total_pages >= 0),   -- null until ready
    attempts       integer NOT NULL DEFAULT 0,     -- claims so far; a worker that died leaves it
    queued_at      timestamptz NOT NULL DEFAULT now(),
    claimed_at     timestamptz,
    extracted_at   timestamptz,
    -- the words of the first SEARCH_CHARS characters, for mail_search over attachment text
    tsv            tsvector,
    CHECK ((status = 'ready') = (total_pages IS NOT NULL)),
    CHECK ((status IN ('unavailable', 'skipped')) = (reason IS NOT NULL))
);
CREATE INDEX attachment_texts_pending ON attachment_texts (queued_at, attachment_id)
    WHERE status = 'pending';
CREATE INDEX attachment_texts_tsv ON attachment_texts USING gin (tsv);
CREATE INDEX attachment_texts_identity ON attachment_texts (identity_id) WHERE status = 'ready';
