//! Audit sessions as stored: the scope, the session row, its covered tasks and its
//! frozen Merkle leaves. Below both the thought chains and the audit verification.

use std::collections::HashSet;

use crate::store::db::Conn;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::trail::chain::loose_text;

use super::merkle;
use super::tasks::task_family;
use super::{parse_session_id, session_id};
/// How much an audit session covers.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AuditScope {
    /// The task only.
    #[default]
    Shallow,
    /// The task and all its sub-tasks, recursively.
    Deep,
}

impl AuditScope {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AuditScope::Shallow => "shallow",
            AuditScope::Deep => "deep",
        }
    }
}

/// A stored audit session.
#[derive(Debug, Clone)]
pub(crate) struct SessionRow {
    pub(crate) id: i64,
    pub(crate) issue_id: String,
    pub(crate) scope: AuditScope,
    pub(crate) started_at: String,
    pub(crate) merkle_root: Option<String>,
    pub(crate) tree_depth: Option<u32>,
    pub(crate) leaf_count: Option<usize>,
    pub(crate) finalized_at: Option<String>,
}

impl SessionRow {
    pub(crate) fn display_id(&self) -> String {
        session_id(self.id)
    }

    /// The issue ids the session covers, the audited task first.
    pub(crate) fn issue_ids(&self, c: &Conn<'_>) -> Result<Vec<String>> {
        task_family(c, &self.issue_id, self.scope == AuditScope::Deep)
    }

    /// For a finalized session, the ids of its frozen records.
    pub(crate) fn frozen_record_ids(&self, c: &Conn<'_>) -> Result<Option<HashSet<String>>> {
        if self.finalized_at.is_none() {
            return Ok(None);
        }
        Ok(Some(
            frozen_leaves(c, self.id)?
                .into_iter()
                .map(|l| l.record_id)
                .collect(),
        ))
    }
}

/// Load a session by its `A-N` id; unknown → `ERR_SESSION_NOT_FOUND`.
pub(crate) fn load_session(c: &Conn<'_>, reference: &str) -> Result<SessionRow> {
    let id = parse_session_id(reference)?;
    c.query_opt(
        "SELECT id, issue_id, scope, started_at, merkle_root, tree_depth, leaf_count,
                finalized_at
         FROM audit_sessions WHERE id = ?1",
        [id],
        |r| {
            let scope: String = r.get(2)?;
            Ok(SessionRow {
                id: r.get(0)?,
                issue_id: r.get(1)?,
                scope: if scope == "deep" {
                    AuditScope::Deep
                } else {
                    AuditScope::Shallow
                },
                started_at: r.get(3)?,
                // Read loosely: verification reports a tampered root, it does not fail.
                merkle_root: r
                    .get(4)
                    .unwrap_or_else(|_| Some(loose_text(r, "merkle_root"))),
                tree_depth: r.get(5).ok().flatten(),
                leaf_count: r.get(6).ok().flatten(),
                finalized_at: r.get(7)?,
            })
        },
    )?
    .ok_or_else(|| Error::SessionNotFound(reference.to_string()))
}

#[derive(Debug, Clone)]
pub(crate) struct FrozenLeaf {
    pub(crate) record_id: String,
    pub(crate) hash: String,
    /// Why the stored leaf row is malformed (a position that is not its 1-based index,
    /// a hash that is not 64 hex characters, a NULL), if it is.
    pub(crate) malformed: Option<String>,
}

/// The frozen leaves of a session, in position order, read loosely: a malformed row is
/// kept and marked, never an error.
pub(crate) fn frozen_leaves(c: &Conn<'_>, session: i64) -> Result<Vec<FrozenLeaf>> {
    let mut stmt = c.prepare(&format!(
        "SELECT position, record_id, hash FROM audit_merkle_leaves WHERE session_id = ?1
         ORDER BY {}, record_id",
        c.dialect().loose_order("position")
    ))?;
    let mut rows = stmt.query([session])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let index = out.len() as i64 + 1;
        let hash = loose_text(r, "hash");
        let mut problems = Vec::new();
        if r.get::<_, i64>("position").ok() != Some(index) {
            problems.push(format!(
                "position {:?} is not {index}",
                loose_text(r, "position")
            ));
        }
        if r.get::<_, String>("record_id").is_err() {
            problems.push("record_id is not text".to_string());
        }
        if r.get::<_, String>("hash").is_err() || merkle::leaf(&hash).is_err() {
            problems.push(format!("hash {hash:?} is not 64 hex characters"));
        }
        out.push(FrozenLeaf {
            record_id: loose_text(r, "record_id"),
            hash,
            malformed: (!problems.is_empty()).then(|| problems.join("; ")),
        });
    }
    Ok(out)
}
