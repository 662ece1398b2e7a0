-- Key levels, test mode and the agent identity policy (issue 13).

-- Workspace policy of the signing tools (spec section 4.3). Both are off until an operator says
-- otherwise: a token must not claim a person stands behind an agent unless the workspace says
-- one does, and a workspace opts in before its agents may sign HTTP requests (policy_denied).
-- Owner: shared/tenancy/store.py.
ALTER TABLE tenants
    ADD COLUMN accountable_human boolean NOT NULL DEFAULT false,
    ADD COLUMN allow_signed_requests boolean NOT NULL DEFAULT false;
-- A partner key's reach: the tenants of one partner in one mode (spec section 3, L4).
CREATE INDEX tenants_partner_mode ON tenants (partner_id, mode) WHERE partner_id IS NOT NULL;

-- When a key was last used, to the minute: written at most once a minute per key, so a busy
-- key costs one UPDATE a minute, not one per request. Owner: shared/auth/keys.py.
ALTER TABLE api_keys
    ADD COLUMN last_used_at timestamptz,
    -- DESIGN.md section 5.2: platform and partner keys can never hold these permissions
    ADD CONSTRAINT api_keys_wide_permissions CHECK (
        level NOT IN ('platform', 'partner')
        OR NOT (permissions && ARRAY['identities:sign', 'usage:read']::text[]));
CREATE INDEX api_keys_partner ON api_keys (partner_id) WHERE partner_id IS NOT NULL;
