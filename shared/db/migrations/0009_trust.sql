-- Trust of each message: the authentication verdict, whether the mailbox wrote to the sender
-- before, and trust flags (spec section 4.3, mail_get_message: "trust (verdict, known_sender,
-- flags)"; issue 11). details holds what the verdict came from (the trusted
-- Authentication-Results, or the DKIM checks made at ingest). Owner: shared/mail/trust.py.
-- Mail stored before this migration gets its trust from `pylota reindex`.
CREATE TABLE message_trust (
    message_id    text PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    identity_id   text NOT NULL REFERENCES identities (id),
    verdict       text NOT NULL CHECK (verdict IN ('pass', 'fail', 'none')),
    known_sender  boolean NOT NULL,
    flags         text[] NOT NULL DEFAULT '{}',
    details       jsonb NOT NULL DEFAULT '{}'
);
