-- Every change to what authenticating a key reads is announced on the channel `pylota_auth`, so
-- a front that keeps authenticated keys in memory forgets them at once (issue 14: the key
-- lookup was one PostgreSQL round trip on every request). Owner: shared/auth/cache.py.
--
-- Statement-level triggers: one notification per statement, however many rows it touched.
-- PostgreSQL delivers it when the transaction commits, and drops it when it rolls back.
CREATE FUNCTION pylota_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pylota_auth', TG_TABLE_NAME);
    RETURN NULL;
END;
$$;

-- Authentication writes last_used_at at most once a minute per key: that write is not a change
-- of standing, so only the other columns of api_keys announce.
CREATE TRIGGER api_keys_auth_changed
    AFTER UPDATE OF token_hash, level, partner_id, tenant_id, identity_id, permissions, mode,
                    expires_at, revoked_at ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION pylota_auth_changed();
CREATE TRIGGER api_keys_auth_removed
    AFTER DELETE OR TRUNCATE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION pylota_auth_changed();

-- A partner's status, a tenant's mode and partner, and an identity key's own identity (its
-- status and addresses) are read with the key.
CREATE TRIGGER partners_auth_changed
    AFTER UPDATE OR DELETE OR TRUNCATE ON partners
    FOR EACH STATEMENT EXECUTE FUNCTION pylota_auth_changed();
CREATE TRIGGER tenants_auth_changed
    AFTER UPDATE OR DELETE OR TRUNCATE ON tenants
    FOR EACH STATEMENT EXECUTE FUNCTION pylota_auth_changed();
CREATE TRIGGER identities_auth_changed
    AFTER UPDATE OR DELETE OR TRUNCATE ON identities
    FOR EACH STATEMENT EXECUTE FUNCTION pylota_auth_changed();
CREATE TRIGGER identity_addresses_auth_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON identity_addresses
    FOR EACH STATEMENT EXECUTE FUNCTION pylota_auth_changed();
