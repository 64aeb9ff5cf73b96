//! The Knowledge Vault: documents (Markdown, HTML, reST, AsciiDoc, text, notebooks and, by
//! choice, source code) split into heading-aware chunks, embedded
//! locally ([`crate::embed`]), searched by cosine similarity through a persistent HNSW graph
//! ([`crate::embed::hnsw`]).
//!
//! Two layers. The **core** is pure computation or files under a directory the caller
//! names; it knows nothing of SQLite, MCP or the CLI:
//!
//! | module | owns |
//! | --- | --- |
//! | [`chunk`] | heading-aware chunking of an outline (Markdown's own): front matter, title, heading paths, exact 1-based line spans, content hashes, the token budget ([`chunk::CHUNKER_VERSION`]) |
//! | [`formats`] | which files a collection reads and how each format (Markdown, HTML, text, reST, AsciiDoc, notebooks, code through tree-sitter) becomes an outline |
//!
//! The **service** layer stores documents in SQLite (the truth) and keeps the graph as
//! derived data under `<index_dir>/vault/`:
//!
//! | module | owns |
//! | --- | --- |
//! | [`identity`] | which root a document's path is relative to (`project:<id>` or `dir:<path>`) |
//! | [`documents`] | the SQL of `vault_documents` / `vault_chunks`, chunk reuse on update, hit rows |
//! | [`ingest`] | read, hash, chunk, reuse unchanged chunks' vectors, embed in batches, commit per file |
//! | [`live`] | the process's graph: lazy load, catch-up from SQLite by watermark, compaction, locked saves |
//! | [`lexical`] | the BM25 index of chunks (tantivy): catch-up by chunk id, rebuilt past a fifth dead |
//! | [`reindex`] | `cairn reindex DIR`: the walk (`.gitignore` respected), batching, removal, summary |
//! | [`rerank`] | hybrid ranking: dense and BM25 candidates fused into `score`, per-document cap |
//! | [`handle`] | [`Vault`], the handle the operations are methods of: the store and the process's [`VaultState`] |
//! | [`browse`] | the documents as a list to page through and one document's Markdown read beneath its root (MCP resources), the vault's change mark |
//! | [`service`] | search (`vault_retrieve`, `search_knowledge`, `cairn search`) with its defaults, `vault_update`, `vault_delete` |
//!
//! Typical flow: [`formats::chunk_file`] → [`chunk::Chunk::embedding_text`] →
//! [`crate::embed::Embed::embed_batch`] → SQLite → [`crate::embed::hnsw::VectorIndex::insert_batch`] →
//! [`crate::embed::hnsw::VectorIndex::save`]; at query time [`crate::embed::Embed::embed_query`]
//! → [`crate::embed::hnsw::VectorIndex::search`] → rows joined from SQLite.

pub(crate) mod browse;
pub mod chunk;
pub mod documents;
pub mod follow_files;
pub mod formats;
pub(crate) mod handle;
pub(crate) mod identity;
pub(crate) mod ingest;
pub(crate) mod lexical;
pub mod live;
pub mod reindex;
pub mod rerank;
pub(crate) mod roots;
pub mod service;

pub(crate) use handle::Vault;
pub(crate) use live::VaultState;
