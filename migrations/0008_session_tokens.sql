-- Session tokens of `cairn daemon`: a bearer token bound to exactly what the flags of one
-- `cairn serve` bind (issue, project, worktree, agent type, the resolved tool scope, project
-- slug, symphony dir), resolved and checked against the database when the token is minted.
-- Only the SHA-256 of the token is stored; the token itself is printed once. A request
-- with the token is served only while now < expires_at and revoked_at is NULL.
-- Never edit once shipped; add a new numbered file.

CREATE TABLE session_tokens (
    id                TEXT PRIMARY KEY,          -- public id: tok_ + 12 hex of token_hash
    token_hash        TEXT NOT NULL UNIQUE,      -- sha256 hex of the token
    issue_id          TEXT,                      -- the bound issue (id), NULL when none
    issue_identifier  TEXT,                      -- its identifier when minted (SHOP-12)
    project_id        TEXT,                      -- the bound project (id), NULL when none
    worktree_path     TEXT,
    agent_type        TEXT,
    project_slug      TEXT,
    symphony_dir      TEXT,
    actor             TEXT NOT NULL,             -- who records are attributed to
    scope_label       TEXT,                      -- NULL with scope_tools: every tool
    scope_tools       TEXT,                      -- JSON array of tool names, or NULL
    created_at        TEXT NOT NULL,             -- ISO-8601 UTC, second precision
    expires_at        TEXT NOT NULL,             -- same format
    revoked_at        TEXT,
    CHECK ((scope_label IS NULL) = (scope_tools IS NULL))
);
