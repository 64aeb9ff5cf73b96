-- PostgreSQL dialect of migrations/0017_vault_root_files.sql: which files a followed
-- root indexes, as JSON text.

ALTER TABLE vault_roots ADD COLUMN files TEXT NOT NULL DEFAULT '{}';
