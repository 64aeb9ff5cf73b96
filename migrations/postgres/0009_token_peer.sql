-- PostgreSQL dialect of migrations/0009_token_peer.sql: the process a forwarder's own
-- session token is bound to (`uid:pid:start`), NULL for tokens minted by people.
-- Never edit once shipped; add a new numbered file.

ALTER TABLE session_tokens ADD COLUMN peer TEXT COLLATE "C";

-- The daemon looks up, every few seconds, which tokens were revoked since it last looked
-- (to drop those sessions' state): without an index that reads every token ever minted.
CREATE INDEX session_tokens_revoked_at ON session_tokens (revoked_at);
