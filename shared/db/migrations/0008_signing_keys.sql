-- Per-deployment signing keys of the agent identity tools (shared/signing/keys.py owns the table).
-- Ed25519 only. 'assertion' keys sign mail_sign_assertion's JWTs and are published in the JWKS;
-- 'http_signature' keys sign mail_sign_http_request's Web Bot Auth headers and are published in
-- the HTTP message signatures directory. Separate keys per purpose: the Web Bot Auth draft
-- advises against one key for two purposes.

CREATE TABLE signing_keys (
    kid          text PRIMARY KEY CHECK (kid ~ '^[A-Za-z0-9_-]{43}$'),  -- RFC 7638 thumbprint
    purpose      text NOT NULL CHECK (purpose IN ('assertion', 'http_signature')),
    public_key   bytea NOT NULL CHECK (length(public_key) = 32),   -- raw Ed25519 public key
    -- 12-byte nonce || AES-256-GCM(raw 32-byte private key) || 16-byte tag, under a key derived
    -- from PM_SIGNING_SECRET, with purpose and kid as associated data
    private_key  bytea NOT NULL CHECK (length(private_key) = 60),
    state        text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'retired')),
    created_at   timestamptz NOT NULL,
    retired_at   timestamptz,
    -- a retired key stays published until then: its last token or signature has expired
    drop_after   timestamptz,
    CHECK ((state = 'retired') = (retired_at IS NOT NULL AND drop_after IS NOT NULL))
);
-- one signing key per purpose at a time; also what makes two first signatures create one key
CREATE UNIQUE INDEX signing_keys_one_active ON signing_keys (purpose) WHERE state = 'active';
