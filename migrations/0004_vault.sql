-- The Knowledge Vault: Markdown documents and their embedded chunks. SQLite is the truth;
-- the HNSW index under <index_dir>/vault/ is derived from vault_chunks.
-- Never edit once shipped; add a new numbered file.

-- One indexed Markdown file. Its identity is (root_key, path): root_key names the root
-- the path is relative to, `project:<project id>` when the file lies under a project's
-- path, else `dir:<canonical absolute path of the reindexed directory>` (see
-- src/vault/identity.rs). `path` is '/'-separated, relative to that root.
CREATE TABLE vault_documents (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    root_key        TEXT NOT NULL,
    path            TEXT NOT NULL,
    collection      TEXT NOT NULL,
    content_hash    TEXT NOT NULL,      -- sha256 of the file's bytes
    title           TEXT,
    modified_at     TEXT,               -- the file's mtime, ISO-8601 UTC
    front_matter    TEXT,               -- JSON object of simple key/values, or NULL
    chunker_version INTEGER NOT NULL,
    embed_model     TEXT NOT NULL,      -- model id of the chunks' embeddings
    indexed_at      TEXT NOT NULL,
    UNIQUE (root_key, path)
);
CREATE INDEX vault_documents_collection ON vault_documents(collection);

-- One chunk of a document. Ids come from AUTOINCREMENT: monotonic and never reused, so
-- the HNSW manifest's watermark (highest id indexed) finds what other processes added.
-- A chunk whose heading path and text are unchanged keeps its row (and id) on update.
CREATE TABLE vault_chunks (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id     INTEGER NOT NULL REFERENCES vault_documents(id) ON DELETE CASCADE,
    ordinal         INTEGER NOT NULL,   -- position in the document, from 0
    text            TEXT NOT NULL,
    heading_path    TEXT NOT NULL,      -- JSON string[]
    line_start      INTEGER NOT NULL,
    line_end        INTEGER NOT NULL,
    content_hash    TEXT NOT NULL,      -- sha256 of text
    embedding       BLOB NOT NULL       -- little-endian f32 × dimension, unit length
);
CREATE INDEX vault_chunks_document ON vault_chunks(document_id, ordinal);
