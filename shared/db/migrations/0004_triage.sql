-- Triage of each message: category, urgency, risk flags and whether a machine sent it (spec
-- section 4.3, the Message object's triage; mail_search's category:). Owner: shared/mail/triage.py.
-- Mail stored before this migration is triaged by `pylota triage backfill`.
CREATE TABLE message_triage (
    message_id   text PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    identity_id  text NOT NULL REFERENCES identities (id),
    category     text NOT NULL,
    urgency      text NOT NULL CHECK (urgency IN ('low', 'normal', 'high')),
    risk_flags   text[] NOT NULL DEFAULT '{}',
    automated    boolean NOT NULL
);
CREATE INDEX message_triage_category ON message_triage (identity_id, category);
