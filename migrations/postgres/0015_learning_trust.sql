-- PostgreSQL dialect of migrations/0015_learning_trust.sql (issue 56): held learnings,
-- supersession proposals, and the history events they record.
-- Never edit once shipped; add a new numbered file.

ALTER TABLE learnings ADD COLUMN held_at TEXT COLLATE "C";
ALTER TABLE learnings ADD COLUMN held_rules TEXT COLLATE "C";

CREATE TABLE learning_proposals (
    old_id          TEXT COLLATE "C" NOT NULL REFERENCES learnings(id),
    new_id          TEXT COLLATE "C" NOT NULL REFERENCES learnings(id),
    issue_id        TEXT COLLATE "C" NOT NULL REFERENCES issues(id),
    actor           TEXT COLLATE "C" NOT NULL,
    at              TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (old_id, new_id)
);
CREATE INDEX learning_proposals_new ON learning_proposals(new_id);
CREATE INDEX learning_proposals_issue ON learning_proposals(issue_id);

ALTER TABLE learning_history DROP CONSTRAINT learning_history_event_check;
ALTER TABLE learning_history ADD CONSTRAINT learning_history_event_check
    CHECK (event IN ('created','verified','rated','merged','supersedes','superseded',
                     'feedback','outcome','flagged','aged','archived','restored',
                     'proposed','rejected','unsuperseded','held','released'));
