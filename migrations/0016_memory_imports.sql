-- What `cairn import` recorded from the agents' memory and rule files (CLAUDE.md,
-- AGENTS.md, .cursor/rules/*.mdc, ...), so a second import changes nothing and a rule
-- removed from its file is archived; and the candidate learnings `cairn run ingest
-- --propose` found in run logs, which wait for a person and are never searched.
-- See docs/agents.md, "Import and export". Numbered 0016: 0015 is the learnings' trust
-- levels (issue 56). Never edit once shipped; add a new numbered file.

-- One imported file of a project: the issue its learnings are recorded on (one issue
-- per file, so the same rule in three files is one learning with confirmations).
CREATE TABLE memory_sources (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id      TEXT NOT NULL REFERENCES projects(id),
    path            TEXT NOT NULL,                  -- absolute path of the file
    client          TEXT NOT NULL,                  -- claude-code, codex, cursor, gemini-cli, copilot, agents
    issue_id        TEXT NOT NULL REFERENCES issues(id),
    imported_at     TEXT NOT NULL,
    UNIQUE (project_id, path)
);

-- One item (a bullet, a paragraph) of a source and the learning it went into.
CREATE TABLE memory_items (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    source_id       INTEGER NOT NULL REFERENCES memory_sources(id),
    pattern_norm    TEXT NOT NULL,                  -- the item's normal form (learnings.pattern_norm)
    learning_id     TEXT NOT NULL REFERENCES learnings(id),
    line            INTEGER NOT NULL,               -- 1-based line where the item starts
    git_commit      TEXT,                           -- the file's last commit, if in git
    imported_at     TEXT NOT NULL,
    removed_at      TEXT,                           -- the item left its file (then archived if no other source holds it)
    UNIQUE (source_id, pattern_norm)
);
CREATE INDEX memory_items_learning ON memory_items(learning_id);

-- A lesson found in a run log, held for a person: `cairn learnings candidates`.
CREATE TABLE learning_candidates (
    id              TEXT PRIMARY KEY,               -- cand_<hex>
    issue_id        TEXT NOT NULL REFERENCES issues(id),
    run_id          TEXT NOT NULL,
    pattern         TEXT NOT NULL,
    context         TEXT,
    evidence        TEXT NOT NULL,                  -- the error and the fix, as the log shows them
    status          TEXT NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending','accepted','rejected')),
    learning_id     TEXT REFERENCES learnings(id),  -- when accepted
    created_at      TEXT NOT NULL,
    decided_by      TEXT,
    decided_at      TEXT,
    UNIQUE (run_id, pattern)
);
CREATE INDEX learning_candidates_status ON learning_candidates(status, created_at);
