-- People's tokens for the daemon's web page (`cairn session new --human`). The login URL
-- printed once carries the token; its first visit redeems it (`redeemed_at`) and gives
-- the browser a cookie of its own, stored as its SHA-256 (`browser_hash`). A person's
-- token never serves MCP, and an agent's token never opens the page.
-- Never edit once shipped; add a new numbered file.

ALTER TABLE session_tokens ADD COLUMN human INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session_tokens ADD COLUMN redeemed_at TEXT;
ALTER TABLE session_tokens ADD COLUMN browser_hash TEXT;
CREATE UNIQUE INDEX session_tokens_browser_hash ON session_tokens (browser_hash);
