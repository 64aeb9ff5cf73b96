-- Core schema: projects, issues (a Colibri task is an issue), labels, dependencies,
-- agent profiles for tool scope. Never edit once shipped; add a new numbered file.

CREATE TABLE projects (
    id          TEXT PRIMARY KEY,               -- proj_<hex>
    slug        TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL,
    prefix      TEXT NOT NULL UNIQUE,           -- identifiers are PREFIX-N
    path        TEXT,                           -- absolute repository path, if any
    next_seq    INTEGER NOT NULL DEFAULT 1,
    settings    TEXT NOT NULL DEFAULT '{}',     -- JSON: gates, sensitive_paths, risk_thresholds, vault, ...
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE issues (
    id              TEXT PRIMARY KEY,           -- iss_<hex>
    project_id      TEXT NOT NULL REFERENCES projects(id),
    seq             INTEGER NOT NULL,
    identifier      TEXT NOT NULL UNIQUE,       -- PREFIX-N
    title           TEXT NOT NULL,
    description     TEXT NOT NULL DEFAULT '',
    status          TEXT NOT NULL DEFAULT 'todo'
                    CHECK (status IN ('backlog','todo','in_progress','blocked','review','done','cancelled')),
    priority        INTEGER NOT NULL DEFAULT 3 CHECK (priority BETWEEN 1 AND 4),
    parent_id       TEXT REFERENCES issues(id),
    progress        INTEGER NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
    assignee        TEXT NOT NULL DEFAULT 'unassigned',
    estimate_hours  REAL,
    blocked_reason  TEXT,
    size            TEXT,
    created_by      TEXT NOT NULL DEFAULT 'cli',
    updated_by      TEXT NOT NULL DEFAULT 'cli',
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (project_id, seq)
);
CREATE INDEX issues_project_status ON issues(project_id, status);
CREATE INDEX issues_parent ON issues(parent_id);

CREATE TABLE issue_labels (
    issue_id  TEXT NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    label     TEXT NOT NULL,
    PRIMARY KEY (issue_id, label)
);
CREATE INDEX issue_labels_label ON issue_labels(label);

CREATE TABLE issue_dependencies (
    issue_id       TEXT NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    depends_on_id  TEXT NOT NULL REFERENCES issues(id),
    PRIMARY KEY (issue_id, depends_on_id)
);

-- Tool scope per agent profile (spec: "Configurable Tool Scope"). NULL = inherit / no removals.
CREATE TABLE agent_profiles (
    profile_type      TEXT PRIMARY KEY,
    allowed_tools     TEXT,   -- JSON string[] or NULL
    disallowed_tools  TEXT,   -- JSON string[] or NULL
    updated_at        TEXT NOT NULL
);
