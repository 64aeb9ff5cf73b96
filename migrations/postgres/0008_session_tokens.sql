-- PostgreSQL dialect of migrations/0008_session_tokens.sql: session tokens of
-- `cairn daemon`, a bearer token bound to exactly what the flags of one `cairn serve`
-- bind. Only the SHA-256 of the token is stored. A request with the token is served
-- only while now < expires_at and revoked_at is NULL (the timestamps are TEXT, ISO-8601
-- UTC at second precision, compared as strings, as in SQLite: see 0001_core.sql on the
-- "C" collation). Never edit once shipped; add a new numbered file in both dialects.

CREATE TABLE session_tokens (
    id                TEXT COLLATE "C" PRIMARY KEY,          -- public id: tok_ + 12 hex of token_hash
    token_hash        TEXT COLLATE "C" NOT NULL UNIQUE,      -- sha256 hex of the token
    issue_id          TEXT COLLATE "C",                      -- the bound issue (id), NULL when none
    issue_identifier  TEXT COLLATE "C",                      -- its identifier when minted (SHOP-12)
    project_id        TEXT COLLATE "C",                      -- the bound project (id), NULL when none
    worktree_path     TEXT COLLATE "C",
    agent_type        TEXT COLLATE "C",
    project_slug      TEXT COLLATE "C",
    symphony_dir      TEXT COLLATE "C",
    actor             TEXT COLLATE "C" NOT NULL,             -- who records are attributed to
    scope_label       TEXT COLLATE "C",                      -- NULL with scope_tools: every tool
    scope_tools       TEXT COLLATE "C",                      -- JSON array of tool names, or NULL
    created_at        TEXT COLLATE "C" NOT NULL,             -- ISO-8601 UTC, second precision
    expires_at        TEXT COLLATE "C" NOT NULL,             -- same format
    revoked_at        TEXT COLLATE "C",
    CHECK ((scope_label IS NULL) = (scope_tools IS NULL))
);
