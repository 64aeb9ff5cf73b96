-- The work trail: the hash-chained, append-only record of each issue (findings,
-- phase claims and verdicts, comments), status history, sub-task blocks, PRs,
-- coverage, test health, agent runs and their events. Never edit once shipped.

-- One append-only chain per issue. `hash` = sha256 of the canonical JSON of
-- {actor, body, category, created_at, id, issue_id, kind, position, prev_hash}
-- (see src/trail/chain.rs). The first record's prev_hash is 64 zeros.
CREATE TABLE trail_records (
    id          TEXT PRIMARY KEY,               -- f-<hex>, pc-<hex>, pv-<hex>, c-<hex>
    issue_id    TEXT NOT NULL REFERENCES issues(id),
    position    INTEGER NOT NULL CHECK (position >= 1),
    kind        TEXT NOT NULL,                  -- finding | comment
    category    TEXT,                           -- findings: test_result, ..., phase_completion, phase_verdict
    body        TEXT NOT NULL,                  -- canonical JSON object
    actor       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL,
    UNIQUE (issue_id, position)
);
CREATE INDEX trail_records_issue_kind ON trail_records(issue_id, kind, category);

-- Append-only, enforced by the database as well as by the code.
CREATE TRIGGER trail_records_no_update BEFORE UPDATE ON trail_records
BEGIN
    SELECT RAISE(ABORT, 'trail records are append-only: UPDATE refused');
END;
CREATE TRIGGER trail_records_no_delete BEFORE DELETE ON trail_records
BEGIN
    SELECT RAISE(ABORT, 'trail records are append-only: DELETE refused');
END;
-- INSERT OR REPLACE deletes without firing DELETE triggers: refuse any insert that is
-- not the next link of its chain (next position, prev_hash = the last record's hash).
CREATE TRIGGER trail_records_append_only BEFORE INSERT ON trail_records
WHEN EXISTS (SELECT 1 FROM trail_records WHERE id = NEW.id)
  OR NEW.position <> COALESCE(
        (SELECT max(position) FROM trail_records WHERE issue_id = NEW.issue_id), 0) + 1
  OR NEW.prev_hash <> COALESCE(
        (SELECT hash FROM trail_records WHERE issue_id = NEW.issue_id
         ORDER BY position DESC LIMIT 1),
        '0000000000000000000000000000000000000000000000000000000000000000')
BEGIN
    SELECT RAISE(ABORT, 'trail records are append-only: an insert must be the next link of its chain');
END;

-- The head of each chain, written in the same transaction as every append, so a
-- record removed from the end of a chain is detected too.
CREATE TABLE trail_heads (
    issue_id   TEXT PRIMARY KEY REFERENCES issues(id),
    position   INTEGER NOT NULL,
    hash       TEXT NOT NULL
);

-- The orchestrator's "processed" flag lives here, not in the immutable record.
CREATE TABLE finding_processing (
    finding_id    TEXT PRIMARY KEY REFERENCES trail_records(id),
    processed_at  TEXT NOT NULL,
    processed_by  TEXT NOT NULL
);

-- Every status change of an issue made through the trail vocabulary.
CREATE TABLE issue_status_history (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    issue_id     TEXT NOT NULL REFERENCES issues(id),
    from_status  TEXT NOT NULL,
    to_status    TEXT NOT NULL,
    reason       TEXT,
    actor        TEXT NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE INDEX issue_status_history_issue ON issue_status_history(issue_id, id);

-- A parent blocked by its open sub-tasks, and the status it returns to.
CREATE TABLE subtask_blocks (
    parent_id        TEXT PRIMARY KEY REFERENCES issues(id),
    previous_status  TEXT NOT NULL,
    created_at       TEXT NOT NULL
);

CREATE TABLE pull_requests (
    id              TEXT PRIMARY KEY,            -- pr_<hex>
    issue_id        TEXT NOT NULL REFERENCES issues(id),
    status          TEXT NOT NULL CHECK (status IN ('open','approved','rejected','superseded')),
    branch_name     TEXT NOT NULL,
    base_branch     TEXT NOT NULL,
    diff            TEXT NOT NULL,
    files           TEXT NOT NULL,               -- JSON [{path, additions, deletions, status}]
    additions       INTEGER NOT NULL,
    deletions       INTEGER NOT NULL,
    gate_results    TEXT NOT NULL,               -- JSON array
    risk_score      INTEGER NOT NULL,
    risk_level      TEXT NOT NULL,
    risk_factors    TEXT NOT NULL,               -- JSON array of strings
    review_reason   TEXT,
    fix_instructions TEXT,
    reviewed_by     TEXT,
    reviewed_at     TEXT,
    created_by      TEXT NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE INDEX pull_requests_issue ON pull_requests(issue_id, created_at);

CREATE TABLE coverage (
    project_id  TEXT NOT NULL REFERENCES projects(id),
    file_path   TEXT NOT NULL,
    concept     TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('covered','has_issues')),
    ticket_id   TEXT,
    notes       TEXT,
    issue_id    TEXT REFERENCES issues(id),      -- the session that recorded it
    actor       TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (project_id, file_path, concept)
);

CREATE TABLE test_health (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    issue_id            TEXT NOT NULL REFERENCES issues(id),
    test_count          INTEGER NOT NULL,
    test_files_changed  INTEGER,
    tests_added         INTEGER,
    tests_removed       INTEGER,
    execution_time_ms   INTEGER,
    actor               TEXT NOT NULL,
    created_at          TEXT NOT NULL
);
CREATE INDEX test_health_issue ON test_health(issue_id, id);

CREATE TABLE runs (
    id               TEXT PRIMARY KEY,
    issue_id         TEXT NOT NULL REFERENCES issues(id),
    outcome          TEXT NOT NULL,              -- success | error_* | incomplete
    is_error         INTEGER NOT NULL,
    error            TEXT,
    cost_usd         REAL,
    duration_ms      INTEGER,
    num_turns        INTEGER,
    session_id       TEXT,
    model            TEXT,
    event_count      INTEGER NOT NULL,
    malformed_lines  INTEGER NOT NULL,
    source           TEXT NOT NULL,
    ingested_at      TEXT NOT NULL
);
CREATE INDEX runs_issue ON runs(issue_id, ingested_at);

CREATE TABLE run_events (
    run_id         TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq            INTEGER NOT NULL,             -- 1-based order within the run
    line           INTEGER NOT NULL,             -- line of the log it came from
    event_type     TEXT NOT NULL,
    event_subtype  TEXT,
    payload        TEXT NOT NULL,                -- JSON
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX run_events_type ON run_events(run_id, event_type, event_subtype);
