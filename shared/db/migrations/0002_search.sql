-- Search: references extracted at ingest, the tenant's custom reference patterns, message
-- embeddings and the queue of messages waiting for one (issue 4; STACK.md section 1.4).
-- Owners: shared/search/refs.py (message_refs), shared/search/patterns.py (tenant_ref_patterns),
-- shared/embeddings/store.py (message_embeddings, embedding_queue).

-- custom: patterns of a tenant's policy (spec section 4.3, "booking references work when the
-- organisation defines a custom: pattern"): NAME -> a regular expression over the normalized value.
CREATE TABLE tenant_ref_patterns (
    tenant_id   text NOT NULL REFERENCES tenants (id),
    name        text NOT NULL CHECK (name ~ '^[a-z][a-z0-9_]{0,31}$'),
    pattern     text NOT NULL CHECK (length(pattern) BETWEEN 1 AND 200),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

-- One row per reference a message mentions (subject or text, quoted text included).
CREATE TABLE message_refs (
    message_id   text NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    identity_id  text NOT NULL REFERENCES identities (id),
    kind         text NOT NULL,   -- plate, invoice, order, claim, pcn, reference, amount, phone, custom:NAME
    value        text NOT NULL,   -- normalized: upper case, no spaces or dashes (refs.py)
    PRIMARY KEY (message_id, kind, value)
);
CREATE INDEX message_refs_value ON message_refs (identity_id, value);

-- One vector per message: float32 little-endian, L2-normalized, 4 * dim bytes. bytea works on any
-- PostgreSQL; real[] is ten times slower to load (STACK.md section 1.2).
CREATE TABLE message_embeddings (
    message_id   text PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    identity_id  text NOT NULL REFERENCES identities (id),
    model        text NOT NULL,
    dim          integer NOT NULL CHECK (dim > 0),
    vec          bytea NOT NULL CHECK (length(vec) = 4 * dim),
    -- grows with every write, so an in-memory index reloads only the rows after its last seq
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX message_embeddings_identity ON message_embeddings (identity_id, model, seq);

-- Messages waiting for an embedding; ingest adds, the batch worker drains (SKIP LOCKED).
CREATE TABLE embedding_queue (
    message_id   text PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    identity_id  text NOT NULL REFERENCES identities (id),
    queued_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX embedding_queue_time ON embedding_queue (queued_at, message_id);

-- Where the server has pgvector (the compose image), a vector column with an HNSW index mirrors
-- vec; elsewhere (Debian PostgreSQL 15) the numpy index reads vec.
DO $$ BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        CREATE EXTENSION IF NOT EXISTS vector;
        EXECUTE 'ALTER TABLE message_embeddings ADD COLUMN vec_v vector(384)';
        EXECUTE 'CREATE INDEX message_embeddings_hnsw ON message_embeddings'
                ' USING hnsw (vec_v vector_ip_ops)';
    END IF;
END $$;
