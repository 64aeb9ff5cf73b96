//! Compositions over several domains, above them so that none of them needs another:
//!
//! - [`board`]: the issue board as agents see it (`get_issue` with its findings,
//!   comments, PRs, runs, status history and learnings; `get_issue_status`; sub-tasks).
//! - [`verify`]: an issue's trail verified, its hash chain and the audit roots frozen
//!   over it.
//! - [`store_copy`]: `cairn store copy`, a whole knowledge base from one store to another,
//!   every chain and audit session verified on the destination.

pub(crate) mod board;
pub mod store_copy;
pub(crate) mod verify;
