-- Attached email (message/rfc822, .eml) now has a reader (shared/extract/forwarded.py); those
-- skipped as unsupported_type before it are queued again, and the batch workers read them.
-- Owner: shared/extract/store.py (attachment_texts).
UPDATE attachment_texts t
SET status = 'pending', reason = NULL, kind = NULL, attempts = 0, claimed_at = NULL,
    queued_at = now(), extracted_at = NULL
FROM attachments a
WHERE a.id = t.attachment_id AND t.status = 'skipped' AND t.reason = 'unsupported_type'
  AND (lower(a.content_type) = 'message/rfc822' OR lower(a.filename) LIKE '%.eml');
