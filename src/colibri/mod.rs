//! The Colibri vocabulary over Cairn's data: tasks (a task *is* an issue), hash-chained
//! thought records, audit sessions with Merkle roots, and skills read from `SKILL.md`.
//!
//! - [`tasks`]: `task_*` operations with Colibri's own rules (its strict transition
//!   table, its priority names, its paging and full-text search).
//! - [`thoughts`]: the per-task thought chain and its JavaScript-compatible hashing.
//! - [`audit`]: audit sessions, chain verification over thoughts *and* the issue's work
//!   trail, Merkle finalization.
//! - [`merkle`]: the Merkle tree itself (pure functions).
//! - [`skills`]: `.agents/skills/*/SKILL.md` front matter.
//! - [`binding`]: what a session may name and change (`T-N` of its bound project; an
//!   agent changes only its bound issue), applied by the facade to every caller.
//!
//! Identifiers (decision): a task has ONE identity, the issue identifier `PFX-N`, and
//! every tool returns it as `task_id`. The document's `T-{monotonic}` with a
//! project-scoped `sequence` is exactly that shape with the project prefix in place of
//! `T` (a bare `T-N` would collide between projects). The domain resolves identifiers
//! and opaque ids (`iss_...`); a session's `T-N` is task N *of its bound project*
//! ([`binding`]), so a `T-N` can never name an issue of another project. Thoughts are
//! `Θ-{id}` and audit sessions `A-{id}`, with ids from global counters, shown with at
//! least four digits (`Θ-0047`, `A-0002`).

use crate::store::db::Conn;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub mod audit;
pub(crate) mod binding;
pub(crate) mod limits;
pub(crate) mod merkle;
pub(crate) mod sessions;
pub(crate) mod skills;
pub mod tasks;
pub mod thoughts;

/// Colibri's priority names, mapped onto the issue scale (1 = most urgent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    Critical,
    High,
    Normal,
    Low,
}

impl Priority {
    /// The issue priority level: critical 1, high 2, normal 3, low 4.
    pub(crate) fn level(self) -> u8 {
        match self {
            Priority::Critical => 1,
            Priority::High => 2,
            Priority::Normal => 3,
            Priority::Low => 4,
        }
    }

    /// The name of an issue priority level (levels outside 1-4 read as normal).
    pub(crate) fn from_level(level: u8) -> Priority {
        match level {
            1 => Priority::Critical,
            2 => Priority::High,
            4 => Priority::Low,
            _ => Priority::Normal,
        }
    }
}

/// `Θ-0047` for thought 47.
pub(crate) fn thought_id(id: i64) -> String {
    format!("Θ-{id:04}")
}

/// `A-0002` for audit session 2.
pub(crate) fn session_id(id: i64) -> String {
    format!("A-{id:04}")
}

/// The number of a `<prefix>N` reference (`Θ-0047` → 47), if it has that shape.
fn parse_numbered(reference: &str, prefix: &str) -> Option<i64> {
    let digits = reference.strip_prefix(prefix)?;
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Parse an audit session reference (`A-0002`, `A-2`, case-insensitive prefix).
pub(crate) fn parse_session_id(reference: &str) -> Result<i64> {
    parse_numbered(reference, "A-")
        .or_else(|| parse_numbered(reference, "a-"))
        .ok_or_else(|| Error::SessionNotFound(reference.to_string()))
}

/// Resolve a task reference (issue identifier or opaque issue id) to the issue id;
/// unknown → `ERR_TASK_NOT_FOUND`.
pub(crate) fn resolve_task(c: &Conn<'_>, reference: &str) -> Result<String> {
    crate::issues::resolve_issue_id(c, reference)?
        .ok_or_else(|| Error::TaskNotFound(reference.to_string()))
}

/// The N of the Colibri document's task id `T-N` (`T-0042` → 42), if it has that shape.
pub(crate) fn task_number(reference: &str) -> Option<i64> {
    parse_numbered(reference, "T-").or_else(|| parse_numbered(reference, "t-"))
}

/// The identifier (`task_id`) of an issue id.
pub(crate) fn task_identifier(c: &Conn<'_>, issue_id: &str) -> Result<String> {
    c.query_opt(
        "SELECT identifier FROM issues WHERE id = ?1",
        [issue_id],
        |r| r.get(0),
    )?
    .ok_or_else(|| Error::TaskNotFound(issue_id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_ids_round_trip() {
        assert_eq!(thought_id(47), "Θ-0047");
        assert_eq!(session_id(12345), "A-12345");
        assert_eq!(parse_numbered("Θ-0047", "Θ-"), Some(47));
        assert_eq!(parse_session_id("A-0002").unwrap(), 2);
        assert_eq!(parse_session_id("a-2").unwrap(), 2);
        for bad in ["A-", "A-x", "B-1", "A--1", "A-99999999999999999999"] {
            assert_eq!(
                parse_session_id(bad).unwrap_err().kind(),
                crate::error::ErrorKind::SessionNotFound
            );
        }
    }

    #[test]
    fn priorities_map_to_levels() {
        for p in [
            Priority::Critical,
            Priority::High,
            Priority::Normal,
            Priority::Low,
        ] {
            assert_eq!(Priority::from_level(p.level()), p);
        }
        assert_eq!(Priority::Critical.level(), 1);
        assert_eq!(Priority::Low.level(), 4);
    }
}
