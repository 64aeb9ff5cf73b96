-- A session token minted by a forwarding `cairn serve` for itself is bound to that process:
-- `peer` is `uid:pid:start` (start: clock ticks since boot, field 22 of /proc/PID/stat).
-- The daemon serves such a token only over its Unix socket, to the process the kernel
-- names as the connection's peer (SO_PEERCRED) with that start time. NULL: a token a
-- person or orchestrator minted (`cairn session new`), valid from any connection.
-- Never edit once shipped; add a new numbered file.

ALTER TABLE session_tokens ADD COLUMN peer TEXT;

-- The daemon looks up, every few seconds, which tokens were revoked since it last looked
-- (to drop those sessions' state): without an index that reads every token ever minted.
CREATE INDEX session_tokens_revoked_at ON session_tokens (revoked_at);
