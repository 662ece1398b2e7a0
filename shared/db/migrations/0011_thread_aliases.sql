-- Thread ids that last (issue 11): when a new message joins two threads, they merge into the
-- oldest and the other ids become aliases of it, so an id a client kept (mail_get_thread,
-- thread:, mail_wait, mail_send's thread_id) keeps answering with the merged thread. An alias
-- always names a live thread: a later merge of that thread moves its aliases along.
-- Owner: shared/mail/store.py, beside threads and thread_refs (where threads merge).
CREATE TABLE thread_aliases (
    alias_id     text PRIMARY KEY,
    identity_id  text NOT NULL REFERENCES identities (id),
    thread_id    text NOT NULL REFERENCES threads (id),
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX thread_aliases_thread ON thread_aliases (thread_id);

-- mail_list_threads pages newest first on (last_at, id): the keyset its cursors hold.
CREATE INDEX threads_identity_last_id ON threads (identity_id, last_at DESC, id DESC);
DROP INDEX threads_identity_last;
