-- Learnings: reusable patterns and gotchas recorded on an issue, shared with every later
-- agent. SQLite is the truth; the tantivy index under <index_dir>/learnings/ is derived
-- from it and caught up by `seq` (a learning's position in commit order). Never edit
-- once shipped; add a new numbered file.

CREATE TABLE learnings (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,  -- commit order; never reused
    id              TEXT NOT NULL UNIQUE,               -- lrn_<hex>
    issue_id        TEXT NOT NULL REFERENCES issues(id),
    project_id      TEXT NOT NULL REFERENCES projects(id), -- the issue's project when recorded
    pattern         TEXT NOT NULL,
    pattern_norm    TEXT NOT NULL,                      -- case/space/punctuation-folded, for duplicates
    context         TEXT,
    applies_to      TEXT NOT NULL DEFAULT '[]',         -- JSON string[] of path prefixes
    learning_type   TEXT NOT NULL DEFAULT 'pattern'
                    CHECK (learning_type IN ('convention','gotcha','pattern')),
    quality_score   INTEGER NOT NULL DEFAULT 50 CHECK (quality_score BETWEEN 0 AND 100),
    verified        INTEGER NOT NULL DEFAULT 0 CHECK (verified IN (0, 1)),
    created_by      TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (issue_id, pattern_norm)
);
CREATE INDEX learnings_project ON learnings(project_id);

-- Every change to a learning's standing (created, verified, rated). A row's id is the
-- watermark other processes use to refresh their cached quality and verified flags.
CREATE TABLE learning_history (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    learning_id     TEXT NOT NULL REFERENCES learnings(id),
    event           TEXT NOT NULL CHECK (event IN ('created','verified','rated')),
    quality_before  INTEGER,
    quality_after   INTEGER NOT NULL,
    verified_before INTEGER,
    verified_after  INTEGER NOT NULL,
    actor           TEXT NOT NULL,
    note            TEXT,
    at              TEXT NOT NULL
);
CREATE INDEX learning_history_learning ON learning_history(learning_id, id);
