-- from:@domain as an index lookup (issue 4 latency): a domain nobody wrote from made "newest
-- first" walk every message of the mailbox (200 ms at 100,000). Owner: shared/search/compile.py.
CREATE INDEX messages_identity_sender_domain
    ON messages (identity_id, (split_part(from_address, '@', -1)));
