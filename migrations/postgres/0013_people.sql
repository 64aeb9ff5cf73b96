-- PostgreSQL dialect of migrations/0013_people.sql: people's tokens for the daemon's web
-- page; the login URL's first visit redeems the token and gives the browser a cookie of
-- its own, stored as its SHA-256.
-- Never edit once shipped; add a new numbered file.

ALTER TABLE session_tokens ADD COLUMN human BIGINT NOT NULL DEFAULT 0;
ALTER TABLE session_tokens ADD COLUMN redeemed_at TEXT COLLATE "C";
ALTER TABLE session_tokens ADD COLUMN browser_hash TEXT COLLATE "C";
CREATE UNIQUE INDEX session_tokens_browser_hash ON session_tokens (browser_hash);
