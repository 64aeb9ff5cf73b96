//! [`EmbedError`]: every way finding, loading or running an embedder can fail, and
//! [`IndexError`]: every way the vector index ([`super::hnsw`]) can fail; each variant
//! carries the paths and messages needed to act on it.

use std::path::PathBuf;

/// Result alias of the embedder modules.
pub type Result<T, E = EmbedError> = std::result::Result<T, E>;

/// Joins paths for messages, one per line.
fn paths_list(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "  (none)".to_string();
    }
    paths
        .iter()
        .map(|p| format!("  {}", p.display()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The errors of the embedders.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The embedding model or the ONNX Runtime library is not on disk. Cairn
    /// never downloads at run time: the files come from `bash models/fetch.sh`.
    #[error(
        "embedding model not found: {what}\nrun `bash models/fetch.sh` (or set CAIRN_MODEL_DIR / CAIRN_ORT_LIB); looked at:\n{}",
        paths_list(.searched)
    )]
    ModelMissing {
        /// Which file or directory was missing.
        what: String,
        /// Every candidate path that was examined, in search order.
        searched: Vec<PathBuf>,
    },

    /// `models/manifest.json` exists but cannot be read or describes another model.
    #[error("bad model manifest {path}: {message}")]
    ModelManifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },

    /// The ONNX Runtime shared library exists but could not be loaded or
    /// initialised (wrong version, wrong architecture, missing symbols).
    #[error("could not initialise ONNX Runtime from {path}: {message}")]
    RuntimeInit {
        /// The library that was tried.
        path: PathBuf,
        /// The loader's or runtime's message.
        message: String,
    },

    /// The model files were found but the session or tokenizer could not be built.
    #[error("could not load the embedding model from {dir}: {message}")]
    ModelLoad {
        /// The model directory.
        dir: PathBuf,
        /// fastembed's / ONNX Runtime's message.
        message: String,
    },

    /// Running the model on a batch failed.
    #[error("embedding a batch of {batch_len} texts failed: {message}")]
    Batch {
        /// How many texts were in the failing batch.
        batch_len: usize,
        /// fastembed's / ONNX Runtime's message.
        message: String,
    },

    /// A document run was asked to stop ([`super::Embed::embed_batch_until`]).
    #[error("embedding stopped after {done} of {of} texts")]
    Stopped {
        /// Texts embedded before it stopped.
        done: usize,
        /// Texts asked for.
        of: usize,
    },

    /// Reading a model file failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done ("read").
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// `models/manifest.json` is not valid JSON.
    #[error("JSON in {path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
}

impl EmbedError {
    /// Shorthand for [`EmbedError::Io`].
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        EmbedError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

impl From<EmbedError> for crate::error::Error {
    /// Model problems are `Error::ModelUnavailable` (the message names
    /// `bash models/fetch.sh`); a failed run or read is internal.
    fn from(e: EmbedError) -> Self {
        use crate::error::Error;
        match e {
            EmbedError::ModelMissing { .. }
            | EmbedError::ModelManifest { .. }
            | EmbedError::RuntimeInit { .. }
            | EmbedError::ModelLoad { .. } => Error::ModelUnavailable(e.to_string()),
            EmbedError::Stopped { .. } => Error::FailedPrecondition(format!(
                "{e}: the server is stopping; nothing of this file was stored, so call again once it runs"
            )),
            EmbedError::Batch { .. } | EmbedError::Io { .. } | EmbedError::Json { .. } => {
                Error::Internal(e.to_string())
            }
        }
    }
}

/// The errors of the vector index ([`super::hnsw`]).
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// A vector of the wrong length was given to (or produced for) an index.
    #[error("vector for id {id} has dimension {found}, the index expects {expected}")]
    DimensionMismatch {
        /// The id the vector belongs to (0 for a query).
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

    /// A JSON file of the index (its manifest) could not be parsed or written.
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

impl IndexError {
    /// Shorthand for [`IndexError::Io`].
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        IndexError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

impl From<IndexError> for crate::error::Error {
    /// A full disk is `Error::StorageFull`; a damaged index or one built with another
    /// model or chunker is `Error::Index` (the message names `cairn reindex
    /// --rebuild`); the rest are internal.
    fn from(e: IndexError) -> Self {
        use crate::error::Error;
        match e {
            IndexError::Io {
                ref path,
                ref source,
                ..
            } if crate::error::is_no_space(source) => Error::StorageFull {
                what: format!("the index directory ({})", path.display()),
            },
            IndexError::IndexCorrupt { .. } | IndexError::ManifestMismatch { .. } => {
                Error::Index(e.to_string())
            }
            IndexError::DimensionMismatch { .. }
            | IndexError::Io { .. }
            | IndexError::Json { .. }
            | IndexError::IndexWrite { .. } => Error::Internal(e.to_string()),
        }
    }
}
