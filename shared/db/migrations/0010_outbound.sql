-- Outbound mail (issue 12): the send tools' idempotency keys, the delivery state of every
-- message they queue (per message and per recipient), and the suppression list fed by bounces.
-- The message itself is a row of messages (direction outbound, status queued -> sent | failed).

-- One row per (identity, idempotency_key) of mail_send, mail_reply and mail_forward. The primary
-- key is what makes two concurrent calls with one key queue exactly one message: the second
-- INSERT waits for the first transaction and then finds its row (spec section 4.3).
-- Kept at least 24 hours; `shared.outbound.idempotency.purge` deletes older rows.
-- Owner: shared/outbound/idempotency.py.
CREATE TABLE send_requests (
    identity_id      text NOT NULL REFERENCES identities (id),
    idempotency_key  text NOT NULL,
    request_hash     bytea NOT NULL,          -- SHA-256 of the tool name and its arguments
    message_id       text REFERENCES messages (id) ON DELETE CASCADE,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (identity_id, idempotency_key)
);
CREATE INDEX send_requests_created ON send_requests (created_at);

-- Delivery of one queued message to the relay. `sending` rows carry a lease: a worker that dies
-- mid-delivery leaves the row to be claimed again once lease_until has passed (at-least-once).
-- Owner: shared/outbound/outbox.py.
CREATE TABLE outbound_messages (
    message_id       text PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    identity_id      text NOT NULL REFERENCES identities (id),
    tenant_id        text NOT NULL REFERENCES tenants (id),
    rfc_message_id   text NOT NULL,           -- the Message-ID, the relay's dedupe key
    mail_from        text NOT NULL,           -- envelope sender (RFC 5321 MAIL FROM)
    kind             text NOT NULL CHECK (kind IN ('transactional', 'marketing', 'auto_reply')),
    metadata         jsonb NOT NULL DEFAULT '{}',
    flags            text[] NOT NULL DEFAULT '{}',
    status           text NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'sending', 'sent', 'deferred', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_until      timestamptz,
    last_reply       text,                    -- the relay's last reply, or what went wrong
    signed           bytea,                   -- the bytes as first offered (DKIM-signed), re-sent
                                              -- unchanged on every later attempt
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbound_messages_due ON outbound_messages (next_attempt_at)
    WHERE status IN ('queued', 'deferred', 'sending');
CREATE INDEX outbound_messages_rfc_id ON outbound_messages (rfc_message_id);

-- Each envelope recipient (To, Cc and Bcc; Bcc appears nowhere else).
CREATE TABLE outbound_recipients (
    message_id  text NOT NULL REFERENCES outbound_messages (message_id) ON DELETE CASCADE,
    address     text NOT NULL,                -- addr-spec, domain as A-label
    field       text NOT NULL CHECK (field IN ('to', 'cc', 'bcc')),
    status      text NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'sent', 'failed', 'suppressed', 'bounced')),
    last_reply  text,
    PRIMARY KEY (message_id, address)
);

-- Addresses a tenant no longer sends to: a hard bounce (RFC 3464 Action: failed, Status 5.x.x)
-- puts an address here, and delivery skips it from then on. Owner: shared/outbound/suppression.py.
CREATE TABLE suppressions (
    tenant_id    text NOT NULL REFERENCES tenants (id),
    address      text NOT NULL,               -- addr-spec, lower-cased, domain as A-label
    reason       text NOT NULL,
    status       text,                        -- the DSN's status code, such as 5.1.1
    diagnostic   text,                        -- the DSN's Diagnostic-Code
    message_id   text,                        -- the message whose bounce added it
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, address)
);
