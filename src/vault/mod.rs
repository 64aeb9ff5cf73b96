//! The vault core: turning Markdown into chunks, chunks into vectors, and
//! vectors into a searchable, persistent approximate-nearest-neighbour index.
//!
//! This module is a library layer only: it knows nothing of SQLite, MCP or the
//! CLI. Callers own the chunk ids (the SQLite rowids of chunks) and decide what
//! to store; everything here is pure computation or files under a directory the
//! caller names.
//!
//! | module | owns |
//! | --- | --- |
//! | [`chunk`] | heading-aware Markdown chunking: front matter, title, heading paths, exact 1-based line spans, content hashes, the token budget ([`chunk::CHUNKER_VERSION`]) |
//! | [`embed`] | the local embedding model (all-MiniLM-L6-v2, int8 ONNX) run through ONNX Runtime: locating the files, one-time runtime initialisation, lazy loading, batched L2-normalised embeddings |
//! | [`hnsw`] | the vector index over `hnsw_rs` (cosine similarity on unit vectors), filtered search, crash-safe generational persistence and the [`hnsw::IndexManifest`] that ties an index to its model and chunker |
//! | [`error`] | [`VaultError`], the one error type of the vault |
//!
//! Typical flow: [`chunk::chunk_markdown`] → [`chunk::Chunk::embedding_text`] →
//! [`embed::Embedder::embed_batch`] → [`hnsw::VectorIndex::insert_batch`] →
//! [`hnsw::VectorIndex::save`]; at query time [`embed::Embedder::embed_query`]
//! → [`hnsw::VectorIndex::search`].

pub mod chunk;
pub mod embed;
pub mod error;
pub mod hnsw;

pub use error::{Result, VaultError};
