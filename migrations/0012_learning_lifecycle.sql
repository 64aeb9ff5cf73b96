-- Learnings that stay true (issue 35): near-duplicates merged into one learning with
-- their confirmations, outdated learnings superseded, quality derived from feedback,
-- and every change of a learning's state in its append-only history. See
-- docs/learnings.md, "Lifecycle". Never edit once shipped; add a new numbered file.

-- The successor that replaced this learning (it leaves default search results).
-- (No foreign key: a successor is a later row, and `cairn store copy` copies rows in
-- order; the code checks that it exists.)
ALTER TABLE learnings ADD COLUMN superseded_by TEXT;
-- A person set quality_score (`cairn learnings rate`): evidence no longer moves it.
ALTER TABLE learnings ADD COLUMN rated INTEGER NOT NULL DEFAULT 0 CHECK (rated IN (0, 1));
-- Two issues said `wrong`: a person should review it (verifying clears the flag).
ALTER TABLE learnings ADD COLUMN flagged INTEGER NOT NULL DEFAULT 0 CHECK (flagged IN (0, 1));
-- When it was last recorded, confirmed by a merge, or found helpful: age counts from here.
ALTER TABLE learnings ADD COLUMN fresh_at TEXT;
UPDATE learnings SET fresh_at = created_at;
UPDATE learnings SET rated = 1
WHERE id IN (SELECT learning_id FROM learning_history WHERE event = 'rated');
CREATE INDEX learnings_superseded_by ON learnings(superseded_by);
-- A new learning with the same normal form as one of its project merges into it.
CREATE INDEX learnings_project_norm ON learnings(project_id, pattern_norm);

-- Another issue recorded the same lesson and it was merged here: one row per issue.
CREATE TABLE learning_confirmations (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    learning_id     TEXT NOT NULL REFERENCES learnings(id),
    issue_id        TEXT NOT NULL REFERENCES issues(id),
    agent_type      TEXT NOT NULL,      -- the session's agent type, or 'cli'
    actor           TEXT NOT NULL,
    similarity      REAL NOT NULL,      -- cosine of the two texts (1 for the same normal form)
    at              TEXT NOT NULL,
    UNIQUE (learning_id, issue_id)
);

-- The standing verdict of one issue on one learning (the latest wins; every verdict is
-- also in learning_history).
CREATE TABLE learning_feedback (
    learning_id     TEXT NOT NULL REFERENCES learnings(id),
    issue_id        TEXT NOT NULL REFERENCES issues(id),
    outcome         TEXT NOT NULL CHECK (outcome IN ('helped','not_relevant','wrong')),
    note            TEXT,
    agent_type      TEXT NOT NULL,
    actor           TEXT NOT NULL,
    at              TEXT NOT NULL,
    PRIMARY KEY (learning_id, issue_id)
);
CREATE INDEX learning_feedback_issue ON learning_feedback(issue_id);

-- The history takes the new events, the issue an event came from and the other
-- learning it names. SQLite cannot change a CHECK: the table is rebuilt with its ids
-- (they are the watermark other processes refresh by).
CREATE TABLE learning_history_v2 (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    learning_id     TEXT NOT NULL REFERENCES learnings(id),
    event           TEXT NOT NULL CHECK (event IN ('created','verified','rated','merged',
                        'supersedes','superseded','feedback','outcome','flagged','aged')),
    quality_before  INTEGER,
    quality_after   INTEGER NOT NULL,
    verified_before INTEGER,
    verified_after  INTEGER NOT NULL,
    actor           TEXT NOT NULL,
    note            TEXT,
    at              TEXT NOT NULL,
    issue_id        TEXT REFERENCES issues(id),   -- merged, feedback, outcome: which issue
    related_id      TEXT                          -- supersedes/superseded: the other learning
);
INSERT INTO learning_history_v2 (id, learning_id, event, quality_before, quality_after,
    verified_before, verified_after, actor, note, at)
SELECT id, learning_id, event, quality_before, quality_after, verified_before,
    verified_after, actor, note, at
FROM learning_history;
DROP TABLE learning_history;
ALTER TABLE learning_history_v2 RENAME TO learning_history;
CREATE INDEX learning_history_learning ON learning_history(learning_id, id);

-- Append-only, enforced by the database as well as by the code.
CREATE TRIGGER learning_history_no_update BEFORE UPDATE ON learning_history
BEGIN
    SELECT RAISE(ABORT, 'learning history is append-only: UPDATE refused');
END;
CREATE TRIGGER learning_history_no_delete BEFORE DELETE ON learning_history
BEGIN
    SELECT RAISE(ABORT, 'learning history is append-only: DELETE refused');
END;
CREATE TRIGGER learning_history_no_replace BEFORE INSERT ON learning_history
WHEN EXISTS (SELECT 1 FROM learning_history WHERE id = NEW.id)
BEGIN
    SELECT RAISE(ABORT, 'learning history is append-only: INSERT refused');
END;
