-- The Colibri vocabulary: hash-chained thought records per task (a task is an issue),
-- audit sessions with their frozen Merkle trees, and full-text search over issues.
-- Never edit once shipped; add a new numbered file.

-- One append-only thought chain per task. `hash` = SHA-256 of
-- JSON.stringify({task_id, type, content, previous_hash, recorded_at, recorded_by})
-- with exactly these stored values (see src/colibri/thoughts.rs). The thought id shown
-- to agents is "Θ-" followed by `id` (at least 4 digits).
CREATE TABLE thought_records (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    issue_id        TEXT NOT NULL REFERENCES issues(id),
    task_ref        TEXT NOT NULL,      -- the task_id string that was hashed
    chain_position  INTEGER NOT NULL CHECK (chain_position >= 1),
    type            TEXT NOT NULL
                    CHECK (type IN ('reflection','decision','discovery','risk','blockers')),
    content         TEXT NOT NULL,
    branch          TEXT,
    commit_sha      TEXT,
    tests_run       TEXT NOT NULL DEFAULT '[]',   -- JSON string[]
    blockers        TEXT NOT NULL DEFAULT '[]',   -- JSON string[]
    metadata        TEXT,                         -- JSON object or NULL
    previous_hash   TEXT,                         -- NULL for the first record
    hash            TEXT NOT NULL,
    recorded_at     TEXT NOT NULL,
    recorded_by     TEXT NOT NULL,
    UNIQUE (issue_id, chain_position)
);
CREATE INDEX thought_records_type ON thought_records(type);

CREATE TRIGGER thought_records_no_update BEFORE UPDATE ON thought_records
BEGIN
    SELECT RAISE(ABORT, 'thought records are append-only: UPDATE refused');
END;
CREATE TRIGGER thought_records_no_delete BEFORE DELETE ON thought_records
BEGIN
    SELECT RAISE(ABORT, 'thought records are append-only: DELETE refused');
END;

-- The head of each thought chain, written with every append, so that records removed
-- from the end of a chain are detected too.
CREATE TABLE thought_heads (
    issue_id        TEXT PRIMARY KEY REFERENCES issues(id),
    chain_position  INTEGER NOT NULL,
    hash            TEXT NOT NULL
);

-- Audit sessions. Shown to agents as "A-" followed by `id` (at least 4 digits).
CREATE TABLE audit_sessions (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    issue_id        TEXT NOT NULL REFERENCES issues(id),
    auditor_id      TEXT NOT NULL,
    reason          TEXT,
    scope           TEXT NOT NULL CHECK (scope IN ('shallow','deep')),
    started_at      TEXT NOT NULL,
    -- Set once by merkle_finalize, never changed afterwards.
    merkle_root     TEXT,
    tree_depth      INTEGER,
    leaf_count      INTEGER,
    finalized_task  TEXT REFERENCES issues(id),   -- merkle_finalize's task_id filter
    finalized_at    TEXT
);

-- The leaves frozen by merkle_finalize, in tree order.
CREATE TABLE audit_merkle_leaves (
    session_id  INTEGER NOT NULL REFERENCES audit_sessions(id),
    position    INTEGER NOT NULL,          -- 1-based leaf index
    chain       TEXT NOT NULL,             -- thought | trail
    record_id   TEXT NOT NULL,             -- Θ-0001 or a trail record id
    hash        TEXT NOT NULL,
    PRIMARY KEY (session_id, position)
);

CREATE TRIGGER audit_sessions_frozen BEFORE UPDATE ON audit_sessions
WHEN OLD.finalized_at IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'audit session is finalized: UPDATE refused');
END;

-- Full-text search over issue titles and descriptions (task_list's `search`), kept in
-- sync with the issues table by triggers.
CREATE VIRTUAL TABLE issues_fts USING fts5(
    title, description,
    content = 'issues', content_rowid = 'rowid',
    tokenize = 'unicode61 remove_diacritics 2'
);
INSERT INTO issues_fts(issues_fts) VALUES ('rebuild');

CREATE TRIGGER issues_fts_insert AFTER INSERT ON issues
BEGIN
    INSERT INTO issues_fts(rowid, title, description)
    VALUES (NEW.rowid, NEW.title, NEW.description);
END;
CREATE TRIGGER issues_fts_delete AFTER DELETE ON issues
BEGIN
    INSERT INTO issues_fts(issues_fts, rowid, title, description)
    VALUES ('delete', OLD.rowid, OLD.title, OLD.description);
END;
CREATE TRIGGER issues_fts_update AFTER UPDATE OF title, description ON issues
BEGIN
    INSERT INTO issues_fts(issues_fts, rowid, title, description)
    VALUES ('delete', OLD.rowid, OLD.title, OLD.description);
    INSERT INTO issues_fts(rowid, title, description)
    VALUES (NEW.rowid, NEW.title, NEW.description);
END;
