-- PostgreSQL dialect of migrations/0010_issue_aliases.sql: the identifiers an issue had
-- before `move_issue`, so an old identifier keeps resolving to the moved issue.
-- Never edit once shipped; add a new numbered file in both dialects.

CREATE TABLE issue_aliases (
    identifier  TEXT COLLATE "C" PRIMARY KEY,
    issue_id    TEXT COLLATE "C" NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    moved_at    TEXT COLLATE "C" NOT NULL
);
CREATE INDEX issue_aliases_issue ON issue_aliases(issue_id);

INSERT INTO issue_aliases (identifier, issue_id, moved_at)
SELECT substr(l.label, 12), l.issue_id, i.updated_at
FROM issue_labels l JOIN issues i ON i.id = l.issue_id
WHERE l.label LIKE 'moved-from:%'
  AND NOT EXISTS (SELECT 1 FROM issues o WHERE o.identifier = substr(l.label, 12))
ORDER BY i.updated_at
ON CONFLICT (identifier) DO NOTHING;
