-- Learnings no agent can poison (issue 56): an agent's supersession of a learning it did
-- not write is a proposal a person (or independent evidence) accepts; a learning whose
-- text directs the reader to act dangerously is held for a person; every supersession
-- can be undone. See docs/learnings.md, "Trust" and docs/security.md, "Memory
-- poisoning". Never edit once shipped; add a new numbered file.

-- When the text was held for a person (NULL: served), and the rules it matched.
ALTER TABLE learnings ADD COLUMN held_at TEXT;
ALTER TABLE learnings ADD COLUMN held_rules TEXT;

-- An agent's pending proposal that `new_id` supersede `old_id`: `old_id` stays in
-- circulation until a person or independent evidence accepts it (the row then goes,
-- and the history of both keeps what happened).
CREATE TABLE learning_proposals (
    old_id          TEXT NOT NULL REFERENCES learnings(id),
    new_id          TEXT NOT NULL REFERENCES learnings(id),
    issue_id        TEXT NOT NULL REFERENCES issues(id),   -- the proposer's issue
    actor           TEXT NOT NULL,
    at              TEXT NOT NULL,
    PRIMARY KEY (old_id, new_id)
);
CREATE INDEX learning_proposals_new ON learning_proposals(new_id);
CREATE INDEX learning_proposals_issue ON learning_proposals(issue_id);

-- The history takes `proposed`, `rejected`, `unsuperseded`, `held` and `released`.
-- SQLite cannot change a CHECK: the table is rebuilt with its ids (the watermark other
-- processes refresh by) and its guards.
CREATE TABLE learning_history_v4 (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    learning_id     TEXT NOT NULL REFERENCES learnings(id),
    event           TEXT NOT NULL CHECK (event IN ('created','verified','rated','merged',
                        'supersedes','superseded','feedback','outcome','flagged','aged',
                        'archived','restored','proposed','rejected','unsuperseded',
                        'held','released')),
    quality_before  INTEGER,
    quality_after   INTEGER NOT NULL,
    verified_before INTEGER,
    verified_after  INTEGER NOT NULL,
    actor           TEXT NOT NULL,
    note            TEXT,
    at              TEXT NOT NULL,
    issue_id        TEXT REFERENCES issues(id),
    related_id      TEXT
);
INSERT INTO learning_history_v4 (id, learning_id, event, quality_before, quality_after,
    verified_before, verified_after, actor, note, at, issue_id, related_id)
SELECT id, learning_id, event, quality_before, quality_after, verified_before,
    verified_after, actor, note, at, issue_id, related_id
FROM learning_history;
DROP TABLE learning_history;
ALTER TABLE learning_history_v4 RENAME TO learning_history;
CREATE INDEX learning_history_learning ON learning_history(learning_id, id);

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
