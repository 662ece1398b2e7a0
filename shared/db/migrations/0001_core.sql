-- Core schema: partners, tenants, identities, API keys, mail, contacts.
-- Ids are prefix_ + ULID text (DESIGN.md section 4); timestamps are timestamptz in UTC.

CREATE EXTENSION IF NOT EXISTS unaccent;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- unaccent is STABLE, so a generated column needs a configuration, not a function call.
DO $$ BEGIN
    CREATE TEXT SEARCH CONFIGURATION en_unaccent (COPY = english);
    ALTER TEXT SEARCH CONFIGURATION en_unaccent
        ALTER MAPPING FOR hword, hword_part, word WITH unaccent, english_stem;
EXCEPTION WHEN unique_violation THEN NULL;
END $$;

CREATE TABLE partners (
    id          text PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    status      text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tenants (
    id                   text PRIMARY KEY,
    partner_id           text REFERENCES partners (id),
    name                 text NOT NULL UNIQUE,
    mode                 text NOT NULL DEFAULT 'live' CHECK (mode IN ('live', 'test')),
    -- policy (spec section 4: agentic limits, max recipients; days follow time_zone)
    time_zone            text NOT NULL DEFAULT 'UTC',
    agentic_max_steps    integer NOT NULL DEFAULT 6 CHECK (agentic_max_steps BETWEEN 2 AND 10),
    agentic_max_seconds  integer NOT NULL DEFAULT 8 CHECK (agentic_max_seconds BETWEEN 3 AND 30),
    max_recipients       integer NOT NULL DEFAULT 49 CHECK (max_recipients BETWEEN 1 AND 147),
    created_at           timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE identities (
    id            text PRIMARY KEY,
    tenant_id     text NOT NULL REFERENCES tenants (id),
    display_name  text,
    purpose       text,
    status        text NOT NULL DEFAULT 'active'
                  CHECK (status IN ('active', 'paused', 'deleting', 'deleted')),
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX identities_tenant ON identities (tenant_id, id);

CREATE TABLE identity_addresses (
    address      text PRIMARY KEY,   -- addr-spec, lower-cased
    identity_id  text NOT NULL REFERENCES identities (id),
    state        text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'retiring')),
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX identity_addresses_identity ON identity_addresses (identity_id);

CREATE TABLE api_keys (
    id           text PRIMARY KEY,
    token_hash   bytea NOT NULL UNIQUE,   -- SHA-256 of the whole token; the token is never stored
    token_hint   text NOT NULL,           -- 'pmk_live_AbCd…' for listings
    name         text,
    level        text NOT NULL CHECK (level IN ('platform', 'partner', 'tenant', 'identity')),
    partner_id   text REFERENCES partners (id),
    tenant_id    text REFERENCES tenants (id),
    identity_id  text REFERENCES identities (id),
    permissions  text[] NOT NULL,
    mode         text NOT NULL DEFAULT 'live' CHECK (mode IN ('live', 'test')),
    expires_at   timestamptz,
    revoked_at   timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CHECK ((level = 'partner') = (partner_id IS NOT NULL AND tenant_id IS NULL)),
    CHECK ((level IN ('tenant', 'identity')) = (tenant_id IS NOT NULL)),
    CHECK ((level = 'identity') = (identity_id IS NOT NULL))
);

CREATE TABLE threads (
    id             text PRIMARY KEY,
    identity_id    text NOT NULL REFERENCES identities (id),
    subject        text NOT NULL DEFAULT '',
    -- subject with Re:/Fwd: prefixes and case removed, for the Re:/Fwd: fallback only
    subject_key    text NOT NULL DEFAULT '',
    first_at       timestamptz,
    last_at        timestamptz,
    message_count  integer NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX threads_identity_last ON threads (identity_id, last_at DESC);
CREATE INDEX threads_identity_subject ON threads (identity_id, subject_key);

-- Every Message-ID seen in an identity (a message's own, or one it references) and the thread
-- it belongs to, so that a reply threads whichever arrives first (RFC 5322 section 3.6.4).
CREATE TABLE thread_refs (
    identity_id  text NOT NULL REFERENCES identities (id),
    message_id   text NOT NULL,
    thread_id    text NOT NULL REFERENCES threads (id),
    PRIMARY KEY (identity_id, message_id)
);
CREATE INDEX thread_refs_thread ON thread_refs (thread_id);

CREATE TABLE messages (
    id               text PRIMARY KEY,
    identity_id      text NOT NULL REFERENCES identities (id),
    thread_id        text NOT NULL REFERENCES threads (id),
    rfc_message_id   text,                 -- Message-ID without angle brackets
    in_reply_to      text[] NOT NULL DEFAULT '{}',
    "references"     text[] NOT NULL DEFAULT '{}',
    subject          text NOT NULL DEFAULT '',
    from_address     text,                 -- addr-spec, lower-cased
    from_name        text,                 -- display name
    to_addresses     jsonb NOT NULL DEFAULT '[]',   -- [{"address", "name"}]
    cc_addresses     jsonb NOT NULL DEFAULT '[]',
    reply_to         jsonb NOT NULL DEFAULT '[]',
    sent_at          timestamptz,          -- the Date header, when it parses
    received_at      timestamptz NOT NULL DEFAULT now(),
    text             text NOT NULL DEFAULT '',
    new_text         text NOT NULL DEFAULT '',
    snippet          text NOT NULL DEFAULT '',
    headers          jsonb NOT NULL DEFAULT '[]',   -- [[name, value], ...] in order
    labels           text[] NOT NULL DEFAULT '{}',
    read             boolean NOT NULL DEFAULT false,
    direction        text NOT NULL DEFAULT 'inbound' CHECK (direction IN ('inbound', 'outbound')),
    status           text NOT NULL DEFAULT 'received'
                     CHECK (status IN ('received', 'queued', 'sent', 'failed', 'unparsed')),
    content_hash     bytea NOT NULL,       -- SHA-256 of the raw bytes
    dedupe_key       text NOT NULL,        -- Message-ID and SHA-256 of the normalised bytes
    parse_defects    text[] NOT NULL DEFAULT '{}',
    has_attachment   boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    tsv tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('en_unaccent', coalesce(subject, '')), 'A')
        || setweight(to_tsvector('en_unaccent', coalesce(from_name, '') || ' ' || coalesce(from_address, '')), 'B')
        || setweight(to_tsvector('en_unaccent', left(text, 200000)), 'C')
    ) STORED,
    UNIQUE (identity_id, dedupe_key)
);
CREATE INDEX messages_identity_time ON messages (identity_id, (coalesce(sent_at, received_at)) DESC, id DESC);
CREATE INDEX messages_thread ON messages (thread_id, (coalesce(sent_at, received_at)), id);
CREATE INDEX messages_identity_from ON messages (identity_id, from_address);
CREATE INDEX messages_tsv ON messages USING gin (tsv);
CREATE INDEX messages_rfc_id ON messages (identity_id, rfc_message_id);

CREATE TABLE raw_messages (
    message_id  text PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    raw         bytea NOT NULL
);

CREATE TABLE attachments (
    id            text PRIMARY KEY,
    message_id    text NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    part_index    integer NOT NULL,
    filename      text,
    content_type  text NOT NULL,
    disposition   text,
    content_id    text,
    size          integer NOT NULL,
    sha256        bytea NOT NULL,
    content       bytea NOT NULL          -- decoded bytes, byte-exact
);
CREATE INDEX attachments_message ON attachments (message_id, part_index);

CREATE TABLE contacts (
    identity_id     text NOT NULL REFERENCES identities (id),
    address         text NOT NULL,        -- addr-spec, lower-cased
    display_name    text,
    inbound_count   integer NOT NULL DEFAULT 0,
    outbound_count  integer NOT NULL DEFAULT 0,
    first_at        timestamptz,
    last_at         timestamptz,
    PRIMARY KEY (identity_id, address)
);
CREATE INDEX contacts_address_trgm ON contacts USING gin (address gin_trgm_ops);
