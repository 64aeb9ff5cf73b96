-- The identifiers an issue had before `move_issue` gave it a new one: an old identifier
-- keeps resolving to the moved issue (tools, CLI, `cairn serve --issue-id`, tokens).
-- Written by moves only (labels are not trusted for identity: anyone may set a label).
-- Identifiers are never reused (each project's numbers only grow), so an old one names
-- one issue forever. Moves made before this migration are recovered from their
-- `moved-from:<old>` labels, where no live issue has that identifier.
-- Never edit once shipped; add a new numbered file.

CREATE TABLE issue_aliases (
    identifier  TEXT PRIMARY KEY,                 -- the old identifier (PFX-N)
    issue_id    TEXT NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    moved_at    TEXT NOT NULL
);
CREATE INDEX issue_aliases_issue ON issue_aliases(issue_id);

INSERT OR IGNORE INTO issue_aliases (identifier, issue_id, moved_at)
SELECT substr(l.label, 12), l.issue_id, i.updated_at
FROM issue_labels l JOIN issues i ON i.id = l.issue_id
WHERE l.label LIKE 'moved-from:%'
  AND NOT EXISTS (SELECT 1 FROM issues o WHERE o.identifier = substr(l.label, 12))
ORDER BY i.updated_at;
