-- The words inside compound tokens (paths, file names, addresses, host names), which the text
-- search parser reads whole: "hugetlb" found no message naming mm/hugetlb.c (issue 14's new
-- user). Owner: shared/mail/store.py (messages); the words come from shared/mail/compound.py.
-- Mail stored before this migration has none until `pylota reindex` runs.
ALTER TABLE messages ADD COLUMN terms text NOT NULL DEFAULT '';

-- A generated column cannot change its expression in place: tsv is made again with the terms
-- at the lowest weight, and its index with it.
ALTER TABLE messages DROP COLUMN tsv;
ALTER TABLE messages ADD COLUMN tsv tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('en_unaccent', coalesce(subject, '')), 'A')
    || setweight(to_tsvector('en_unaccent', coalesce(from_name, '') || ' ' || coalesce(from_address, '')), 'B')
    || setweight(to_tsvector('en_unaccent', left(text, 200000)), 'C')
    || setweight(to_tsvector('en_unaccent', terms), 'D')
) STORED;
CREATE INDEX messages_tsv ON messages USING gin (tsv);
