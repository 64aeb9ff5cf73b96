//! [`VaultError`]: every way the vault core can fail, each variant carrying
//! the context (paths, values) needed to act on it without a debugger.

use std::path::PathBuf;

use crate::embed::EmbedError;

/// Result alias of the vault modules.
pub type Result<T, E = VaultError> = std::result::Result<T, E>;

/// The errors of the vault core.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// Finding, loading or running the embedding model failed.
    #[error(transparent)]
    Model(#[from] EmbedError),

    /// A vector of the wrong length was given to (or produced for) an index.
    #[error("vector for id {id} has dimension {found}, the index expects {expected}")]
    DimensionMismatch {
        /// The chunk id the vector belongs to (0 for a query).
        id: u64,
        /// The index's dimension.
        expected: usize,
        /// The offending vector's length.
        found: usize,
    },

    /// A file-system operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done ("create", "write", "fsync", "rename", ...).
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A JSON file of the vault (the index manifest) could not be parsed or written.
    #[error("JSON in {path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },

    /// The on-disk index is damaged or incomplete (the files the current
    /// generation points to are missing, truncated or unreadable).
    #[error(
        "vector index at {path} is corrupt: {message}\nrebuild it with `cairn reindex --rebuild` (or delete the index directory)"
    )]
    IndexCorrupt {
        /// The index directory or file.
        path: PathBuf,
        /// What was found wrong.
        message: String,
    },

    /// Writing a new index generation failed (hnsw_rs dump error).
    #[error("could not write vector index generation in {path}: {message}")]
    IndexWrite {
        /// The generation directory.
        path: PathBuf,
        /// What failed.
        message: String,
    },

    /// The stored index was built with another model, dimension or chunker
    /// than the running Cairn uses: its vectors are not comparable.
    #[error(
        "the vector index was built with {field} = {found}, but this Cairn uses {expected}\nrebuild it with `cairn reindex --rebuild` (or delete the index directory)"
    )]
    ManifestMismatch {
        /// The field that differs (`model_id`, `dimension`, `chunker_version`).
        field: &'static str,
        /// The value the running Cairn expects.
        expected: String,
        /// The value in the stored manifest.
        found: String,
    },
}

impl VaultError {
    /// Shorthand for [`VaultError::Io`].
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        VaultError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
