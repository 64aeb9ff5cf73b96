//! The crate's one error type and its stable, machine-readable codes.
//!
//! Every domain failure is a variant of [`Error`]. The MCP layer and the CLI turn an
//! `Error` into their own output through [`Error::code`] (one exhaustive `match`, no
//! `_` arm), so a code seen by a client never changes silently.

use std::path::PathBuf;

/// The crate-wide result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One field-level problem with a caller's input.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct FieldError {
    /// The offending field, as a JSON path (`gate_results[0].label`), or `tool_name`.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Everything that can go wrong in Cairn's domain API.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller's input is malformed or breaks a documented limit.
    #[error("invalid input: {}", join_fields(.0))]
    InvalidInput(Vec<FieldError>),
    /// A named thing (issue, project, learning, document, ...) does not exist.
    #[error("{kind} not found: {id}")]
    NotFound { kind: &'static str, id: String },
    /// A task-vocabulary lookup failed (Colibri's `ERR_TASK_NOT_FOUND`).
    #[error("task not found: {0}")]
    TaskNotFound(String),
    /// A project lookup failed where the caller named the project.
    #[error("project not found: {0}")]
    ProjectNotFound(String),
    /// An audit session lookup failed.
    #[error("audit session not found: {0}")]
    SessionNotFound(String),
    /// A status change that the state machine does not allow.
    #[error("invalid transition from {from} to {to}: {hint}")]
    InvalidTransition {
        from: String,
        to: String,
        hint: String,
    },
    /// The caller's tool scope does not include this tool.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The tool needs an issue bound at start-up (`--issue-id`) and none was.
    #[error("no issue is bound to this server: {0}")]
    NoBoundIssue(String),
    /// The request conflicts with existing state (a duplicate, a frozen record).
    #[error("conflict: {message}")]
    Conflict {
        message: String,
        /// The id of the existing thing the request collides with, if any.
        existing_id: Option<String>,
    },
    /// A Merkle tree was already finalized for this session.
    #[error("audit session {0} is already finalized")]
    AlreadyFinalized(String),
    /// A circular dependency between issues.
    #[error("circular dependency: {0}")]
    CircularDependency(String),
    /// A precondition on the environment failed (missing start-up flag, workspace mismatch).
    #[error("{0}")]
    FailedPrecondition(String),
    /// The session's worktree is not the bound issue's (`verify_workspace`); the message
    /// carries recovery instructions.
    #[error("{0}")]
    WorkspaceInvalid(String),
    /// The embedding model or its runtime is missing or failed to load.
    #[error("model unavailable: {0}")]
    ModelUnavailable(String),
    /// A derived index is unusable and must be rebuilt.
    #[error("index error: {0}")]
    Index(String),
    /// A filesystem (of the database or of the index directory) has no space left
    /// (`SQLITE_FULL`, `ENOSPC`, `EDQUOT`). Not internal: the caller learns what is full
    /// and that retrying is pointless until space is freed.
    #[error(
        "storage full: {what} has no space left; nothing was lost, but a retry will not \
         succeed until space is freed there"
    )]
    StorageFull {
        /// What is full: "the database <path>" or "the index directory <path>".
        what: String,
    },
    /// SQLite failed.
    #[error("database error: {0}")]
    Database(#[source] rusqlite::Error),
    /// Filesystem I/O failed on a path.
    #[error("i/o error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A bug or an unexpected state; never shown with internals to an MCP client.
    #[error("internal error: {0}")]
    Internal(String),
}

fn join_fields(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect::<Vec<_>>()
        .join("; ")
}

impl Error {
    /// A one-field [`Error::InvalidInput`].
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidInput(vec![FieldError::new(field, message)])
    }

    pub fn not_found(kind: &'static str, id: impl Into<String>) -> Self {
        Error::NotFound {
            kind,
            id: id.into(),
        }
    }

    /// An I/O failure on `path`; no space left there is [`Error::StorageFull`].
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let path = path.into();
        if is_no_space(&source) {
            return Error::StorageFull {
                what: format!("the filesystem of {}", path.display()),
            };
        }
        Error::Io { path, source }
    }

    /// The stable code a client sees. One table, no wildcard arm.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidInput(_) => "ERR_INVALID_INPUT",
            Error::NotFound { .. } => "ERR_NOT_FOUND",
            Error::TaskNotFound(_) => "ERR_TASK_NOT_FOUND",
            Error::ProjectNotFound(_) => "ERR_PROJECT_NOT_FOUND",
            Error::SessionNotFound(_) => "ERR_SESSION_NOT_FOUND",
            Error::InvalidTransition { .. } => "ERR_INVALID_TRANSITION",
            Error::PermissionDenied(_) => "PERMISSION_DENIED",
            Error::NoBoundIssue(_) => "ERR_NO_BOUND_ISSUE",
            Error::Conflict { .. } => "ERR_CONFLICT",
            Error::AlreadyFinalized(_) => "ERR_ALREADY_FINALIZED",
            Error::CircularDependency(_) => "ERR_CIRCULAR_DEPENDENCY",
            Error::FailedPrecondition(_) => "ERR_FAILED_PRECONDITION",
            Error::WorkspaceInvalid(_) => "ERR_WORKSPACE_INVALID",
            Error::ModelUnavailable(_) => "ERR_MODEL_UNAVAILABLE",
            Error::Index(_) => "ERR_INDEX",
            Error::StorageFull { .. } => "ERR_STORAGE_FULL",
            Error::Database(_) => "ERR_INTERNAL",
            Error::Io { .. } => "ERR_INTERNAL",
            Error::Internal(_) => "ERR_INTERNAL",
        }
    }

    /// Whether the message may be shown to a remote caller as is. Internal failures
    /// are logged in full on stderr and reported to clients without their details.
    pub fn is_internal(&self) -> bool {
        matches!(
            self,
            Error::Database(_) | Error::Io { .. } | Error::Internal(_)
        )
    }
}

/// Whether an I/O error means no space is left (`ENOSPC`) or the quota is used up
/// (`EDQUOT`).
pub fn is_no_space(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

impl From<rusqlite::Error> for Error {
    /// `SQLITE_FULL` is [`Error::StorageFull`] (the store names the database file, see
    /// `Store::write`); everything else is [`Error::Database`].
    fn from(e: rusqlite::Error) -> Self {
        if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) {
            return Error::StorageFull {
                what: "the database".into(),
            };
        }
        Error::Database(e)
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::Internal(format!("json: {e}"))
    }
}
