-- Which files a followed root indexes (issue 58): the collection's file filter as JSON
-- (`{"code":true,"include":[...],"exclude":[...]}`; '{}' is the default: documentation
-- formats only, no globs), so that its follower admits the files `cairn reindex` did.
-- See docs/vault.md, "Formats". Never edit once shipped; add a new numbered file.

ALTER TABLE vault_roots ADD COLUMN files TEXT NOT NULL DEFAULT '{}';
