//! The crate's one error type and the kinds of failure it distinguishes.
//!
//! Every domain failure is a variant of [`Error`], and every variant has one
//! [`ErrorKind`] ([`Error::kind`], one exhaustive `match`). The domain knows no wire
//! strings: the MCP layer maps a kind to a status and a stable code
//! (`mcp::envelope::wire_code`), the CLI maps it to an exit status (`cli::exit_code`),
//! each in one exhaustive `match` without a `_` arm, so adding a kind fails to compile
//! until both transports say what it means.

use std::path::PathBuf;

/// The crate-wide result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One field-level problem with a caller's input.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct FieldError {
    /// The offending field, as a JSON path (`gate_results[0].label`), or `tool_name`.
    pub(crate) field: String,
    /// What is wrong and how to fix it.
    pub(crate) message: String,
}

impl FieldError {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
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
    /// The database (SQLite or PostgreSQL) failed; the message is the database's.
    #[error("database error: {0}")]
    Database(String),
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
    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidInput(vec![FieldError::new(field, message)])
    }

    pub(crate) fn not_found(kind: &'static str, id: impl Into<String>) -> Self {
        Error::NotFound {
            kind,
            id: id.into(),
        }
    }

    /// An I/O failure on `path`; no space left there is [`Error::StorageFull`].
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let path = path.into();
        if is_no_space(&source) {
            return Error::StorageFull {
                what: format!("the filesystem of {}", path.display()),
            };
        }
        Error::Io { path, source }
    }

    /// What kind of failure this is. One table, no wildcard arm.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput(_) => ErrorKind::InvalidInput,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::TaskNotFound(_) => ErrorKind::TaskNotFound,
            Error::ProjectNotFound(_) => ErrorKind::ProjectNotFound,
            Error::SessionNotFound(_) => ErrorKind::SessionNotFound,
            Error::InvalidTransition { .. } => ErrorKind::InvalidTransition,
            Error::PermissionDenied(_) => ErrorKind::PermissionDenied,
            Error::NoBoundIssue(_) => ErrorKind::NoBoundIssue,
            Error::Conflict { .. } => ErrorKind::Conflict,
            Error::AlreadyFinalized(_) => ErrorKind::AlreadyFinalized,
            Error::FailedPrecondition(_) => ErrorKind::FailedPrecondition,
            Error::WorkspaceInvalid(_) => ErrorKind::WorkspaceInvalid,
            Error::ModelUnavailable(_) => ErrorKind::ModelUnavailable,
            Error::Index(_) => ErrorKind::Index,
            Error::StorageFull { .. } => ErrorKind::StorageFull,
            Error::Database(_) | Error::Io { .. } | Error::Internal(_) => ErrorKind::Internal,
        }
    }

    /// Whether this is an internal failure, whose message is logged in full on stderr
    /// and not shown to a remote caller.
    pub(crate) fn is_internal(&self) -> bool {
        self.kind() == ErrorKind::Internal
    }
}

/// The kinds of failure, as both transports tell them apart. Carries no wire strings:
/// the MCP layer and the CLI each map every kind in one exhaustive `match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// [`Error::InvalidInput`].
    InvalidInput,
    /// [`Error::NotFound`].
    NotFound,
    /// [`Error::TaskNotFound`].
    TaskNotFound,
    /// [`Error::ProjectNotFound`].
    ProjectNotFound,
    /// [`Error::SessionNotFound`].
    SessionNotFound,
    /// [`Error::InvalidTransition`].
    InvalidTransition,
    /// [`Error::PermissionDenied`].
    PermissionDenied,
    /// [`Error::NoBoundIssue`].
    NoBoundIssue,
    /// [`Error::Conflict`].
    Conflict,
    /// [`Error::AlreadyFinalized`].
    AlreadyFinalized,
    /// [`Error::FailedPrecondition`].
    FailedPrecondition,
    /// [`Error::WorkspaceInvalid`].
    WorkspaceInvalid,
    /// [`Error::ModelUnavailable`].
    ModelUnavailable,
    /// [`Error::Index`].
    Index,
    /// [`Error::StorageFull`].
    StorageFull,
    /// [`Error::Database`], [`Error::Io`] and [`Error::Internal`]: a failure the caller
    /// cannot act on; its details are logged, not shown to remote callers.
    Internal,
}

impl ErrorKind {
    /// Every kind: the transports' mapping tests, and a forwarder's check that an error
    /// envelope is one Cairn sends (`daemon::forward`).
    pub(crate) const ALL: [ErrorKind; 16] = [
        ErrorKind::InvalidInput,
        ErrorKind::NotFound,
        ErrorKind::TaskNotFound,
        ErrorKind::ProjectNotFound,
        ErrorKind::SessionNotFound,
        ErrorKind::InvalidTransition,
        ErrorKind::PermissionDenied,
        ErrorKind::NoBoundIssue,
        ErrorKind::Conflict,
        ErrorKind::AlreadyFinalized,
        ErrorKind::FailedPrecondition,
        ErrorKind::WorkspaceInvalid,
        ErrorKind::ModelUnavailable,
        ErrorKind::Index,
        ErrorKind::StorageFull,
        ErrorKind::Internal,
    ];
}

/// Whether an I/O error means no space is left (`ENOSPC`) or the quota is used up
/// (`EDQUOT`).
pub(crate) fn is_no_space(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::Internal(format!("json: {e}"))
    }
}

#[cfg(test)]
impl Error {
    /// An error of `kind`, for the transports' mapping tests.
    pub(crate) fn example(kind: ErrorKind) -> Error {
        let s = || "x".to_string();
        match kind {
            ErrorKind::InvalidInput => Error::invalid("field", "is wrong"),
            ErrorKind::NotFound => Error::not_found("issue", "CAIRN-9"),
            ErrorKind::TaskNotFound => Error::TaskNotFound(s()),
            ErrorKind::ProjectNotFound => Error::ProjectNotFound(s()),
            ErrorKind::SessionNotFound => Error::SessionNotFound(s()),
            ErrorKind::InvalidTransition => Error::InvalidTransition {
                from: "todo".into(),
                to: "done".into(),
                hint: s(),
            },
            ErrorKind::PermissionDenied => Error::PermissionDenied(s()),
            ErrorKind::NoBoundIssue => Error::NoBoundIssue(s()),
            ErrorKind::Conflict => Error::Conflict {
                message: s(),
                existing_id: Some("L-1".into()),
            },
            ErrorKind::AlreadyFinalized => Error::AlreadyFinalized(s()),
            ErrorKind::FailedPrecondition => Error::FailedPrecondition(s()),
            ErrorKind::WorkspaceInvalid => Error::WorkspaceInvalid(s()),
            ErrorKind::ModelUnavailable => Error::ModelUnavailable(s()),
            ErrorKind::Index => Error::Index(s()),
            ErrorKind::StorageFull => Error::StorageFull { what: s() },
            ErrorKind::Internal => Error::Internal("secret detail".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_listed_once_and_has_a_variant() {
        let distinct: std::collections::HashSet<_> = ErrorKind::ALL.iter().collect();
        assert_eq!(distinct.len(), ErrorKind::ALL.len());
        for kind in ErrorKind::ALL {
            assert_eq!(Error::example(kind).kind(), kind);
        }
    }

    #[test]
    fn storage_and_database_failures_are_internal_unless_full() {
        let db = Error::Database("no such table".into());
        assert_eq!(db.kind(), ErrorKind::Internal);
        assert!(db.is_internal());
        let io = Error::io("/x", std::io::Error::other("boom"));
        assert_eq!(io.kind(), ErrorKind::Internal);
        let full = Error::io("/x", std::io::Error::from(std::io::ErrorKind::StorageFull));
        assert_eq!(full.kind(), ErrorKind::StorageFull);
        assert!(!full.is_internal());
        let json = Error::from(serde_json::from_str::<u8>("x").unwrap_err());
        assert_eq!(json.kind(), ErrorKind::Internal);
        assert!(!Error::example(ErrorKind::Conflict).is_internal());
    }
}
