//! The Knowledge Vault: documents (Markdown, HTML, reST, AsciiDoc, text, notebooks and, by
//! choice, source code) split into heading-aware chunks, embedded
//! locally ([`crate::embed`]), searched by cosine similarity through a persistent HNSW graph.
//!
//! Two layers. The **core** is pure computation or files under a directory the caller
//! names; it knows nothing of SQLite, MCP or the CLI:
//!
//! | module | owns |
//! | --- | --- |
//! | [`chunk`] | heading-aware chunking of an outline (Markdown's own): front matter, title, heading paths, exact 1-based line spans, content hashes, the token budget ([`chunk::CHUNKER_VERSION`]) |
//! | [`formats`] | which files a collection reads and how each format (Markdown, HTML, text, reST, AsciiDoc, notebooks, code through tree-sitter) becomes an outline |
//! | [`hnsw`] | the vector index over `hnsw_rs` (cosine similarity on unit vectors), filtered search, crash-safe generational persistence and the [`hnsw::IndexManifest`] that ties an index to its model and chunker |
//! | [`error`] | [`VaultError`], the one error type of the core |
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
//! [`crate::embed::Embed::embed_batch`] → SQLite → [`hnsw::VectorIndex::insert_batch`] →
//! [`hnsw::VectorIndex::save`]; at query time [`crate::embed::Embed::embed_query`]
//! → [`hnsw::VectorIndex::search`] → rows joined from SQLite.

pub(crate) mod browse;
pub mod chunk;
pub mod documents;
pub mod error;
pub mod follow_files;
pub mod formats;
pub(crate) mod handle;
pub mod hnsw;
pub(crate) mod identity;
pub(crate) mod ingest;
pub(crate) mod lexical;
pub mod live;
pub mod reindex;
pub mod rerank;
pub(crate) mod roots;
pub mod service;

pub use error::{Result, VaultError};
pub(crate) use handle::Vault;
pub(crate) use live::VaultState;

impl From<VaultError> for crate::error::Error {
    /// Model problems are `Error::ModelUnavailable` (the message names
    /// `bash models/fetch.sh`); index problems are `Error::Index` (the message names
    /// `cairn reindex --rebuild`); the rest are internal.
    fn from(e: VaultError) -> Self {
        use crate::error::Error;
        match e {
            VaultError::Io {
                ref path,
                ref source,
                ..
            } if crate::error::is_no_space(source) => Error::StorageFull {
                what: format!("the index directory ({})", path.display()),
            },
            VaultError::Model(e) => e.into(),
            VaultError::IndexCorrupt { .. } | VaultError::ManifestMismatch { .. } => {
                Error::Index(e.to_string())
            }
            VaultError::DimensionMismatch { .. }
            | VaultError::Io { .. }
            | VaultError::Json { .. }
            | VaultError::IndexWrite { .. } => Error::Internal(e.to_string()),
        }
    }
}
