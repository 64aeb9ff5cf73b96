//! The work trail of an issue: everything agents and people record while working on it.
//!
//! - [`chain`]: the append-only, hash-chained records under every issue (findings,
//!   phase claims and verdicts, comments) and their verification. **API boundary** for
//!   other modules: [`chain::append_record`] / [`findings::append_finding`] /
//!   [`findings::add_comment_in`] append inside the caller's write transaction;
//!   [`crate::compose::verify::verify_trail`] re-computes a chain.
//! - [`findings`]: the finding and comment views, the orchestrator's `processed` state.
//! - [`status`]: the trail vocabulary's status transitions, status history, sub-tasks
//!   that block their parent.
//! - [`metrics`]: research coverage and test health.
//! - [`runs`]: agent runs ingested from stream-JSON logs, and their events.
//! - [`approval`]: the hook an approved or finished issue's work runs (a phase verdict,
//!   a PR, done), through which the domains above the trail act on it.
//!
//! Records are never updated or deleted (see [`chain`] for the invariant and the
//! triggers that enforce it in SQL).

use crate::store::db::Conn;

use crate::error::{Error, Result};

pub(crate) mod approval;
pub mod chain;
pub mod findings;
pub mod metrics;
pub(crate) mod runs;
pub(crate) mod status;

pub use chain::{BrokenLink, FindingCategory, RecordKind, TrailRecord, TrailVerification};
pub use findings::{Comment, Finding, NewFinding};

/// Resolve an issue reference (id or identifier) to `(id, identifier)`, or not found.
pub(crate) fn resolve(c: &Conn<'_>, issue: &str) -> Result<(String, String)> {
    let id = crate::issues::resolve_issue_id(c, issue)?
        .ok_or_else(|| Error::not_found("issue", issue))?;
    let identifier = c.query_row("SELECT identifier FROM issues WHERE id = ?1", [&id], |r| {
        r.get(0)
    })?;
    Ok((id, identifier))
}
