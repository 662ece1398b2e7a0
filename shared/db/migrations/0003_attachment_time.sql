-- Messages with attachments, newest first per identity (issue 4 latency): has:attachment, type:
-- and filename: (compile.py tests has_attachment before probing attachments) walk only these,
-- instead of every message of the mailbox (a tenth of them carry attachments).
-- Owner: shared/search/compile.py.
CREATE INDEX messages_identity_attachment_time
    ON messages (identity_id, (coalesce(sent_at, received_at)) DESC, id DESC)
    WHERE has_attachment;
