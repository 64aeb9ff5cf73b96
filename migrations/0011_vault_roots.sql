-- The roots the vault follows (issue 34): every directory `cairn reindex DIR` indexed,
-- and every file `vault_update` indexed in a project, with its collection. A daemon
-- restores its watches from these rows after a restart; one daemon at a time follows a
-- root (the lease: `follower` and `heartbeat_at`), and reports what it sees here, so
-- that `cairn vault status` in another process shows it. See docs/vault.md, "Following".
-- Never edit once shipped; add a new numbered file.

CREATE TABLE vault_roots (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    root_key      TEXT NOT NULL,      -- `project:<id>` or `dir:<path>` (src/vault/identity.rs)
    prefix        TEXT NOT NULL,      -- the directory (or file) followed, relative to the root
    kind          TEXT NOT NULL,      -- 'dir' (cairn reindex) or 'file' (vault_update)
    collection    TEXT NOT NULL,
    dir           TEXT NOT NULL,      -- the root's canonical absolute directory where recorded
    added_at      TEXT NOT NULL,
    last_sync_at  TEXT,               -- when the last batch for it committed
    follower      TEXT,               -- `host:pid:start` of the process following it now
    state         TEXT,               -- watching | rescanning | not followed
    reason        TEXT,               -- why it is rescanning or not followed
    pending       INTEGER NOT NULL DEFAULT 0,  -- changes seen and not yet indexed
    heartbeat_at  TEXT,               -- when the follower last wrote this row
    UNIQUE (root_key, prefix, collection)
);

-- Directories indexed before this migration are followed from now on: a `dir:` root is
-- the directory that was reindexed. (A project's documents do not say which directory
-- was reindexed; `cairn reindex DIR` once records it.)
INSERT INTO vault_roots (root_key, prefix, kind, collection, dir, added_at)
SELECT root_key, '', 'dir', collection, substr(root_key, 5), min(indexed_at)
FROM vault_documents WHERE root_key LIKE 'dir:%'
GROUP BY root_key, collection
ORDER BY min(indexed_at);
