-- Plans and allowances (issue 11: mail_get_usage; issue 12: the send allowance). A tenant's plan
-- names its grants (the catalog is shared/plans.py::PLANS); an operator may override one grant
-- for one tenant, and top one up. What is used is never stored here: it is counted from the
-- real data (identities, stored messages, queued sends, API keys) by each table's owner.
-- Owner of all three tables: shared/plans.py.

-- A tenant without a row is on the default plan (unlimited).
CREATE TABLE tenant_plans (
    tenant_id   text PRIMARY KEY REFERENCES tenants (id),
    plan        text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- A grant set for one tenant instead of its plan's; granted NULL means unlimited.
CREATE TABLE tenant_allowances (
    tenant_id   text NOT NULL REFERENCES tenant_plans (tenant_id) ON DELETE CASCADE,
    allowance   text NOT NULL CHECK (allowance IN ('inboxes', 'sends', 'triage', 'custom_domains',
                                                   'storage_gb', 'seats')),
    granted     double precision CHECK (granted >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, allowance)
);

-- An addition to a grant: for an allowance that resets (sends daily, triage monthly) it counts
-- in the period it was made in; for the others, from then on.
CREATE TABLE allowance_topups (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (id),
    allowance   text NOT NULL CHECK (allowance IN ('inboxes', 'sends', 'triage', 'custom_domains',
                                                   'storage_gb', 'seats')),
    amount      double precision NOT NULL CHECK (amount > 0),
    note        text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX allowance_topups_tenant ON allowance_topups (tenant_id, allowance, created_at);

-- Today's sends of a tenant are counted on every send that a finite allowance limits.
CREATE INDEX outbound_messages_tenant_created ON outbound_messages (tenant_id, created_at);
