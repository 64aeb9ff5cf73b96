//! The issue board as agents see it: the full issue (`get_issue`), the slim status
//! (`get_issue_status`), creating issues and sub-tasks.

use crate::store::db::Conn;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::issues::{Issue, NewIssue, Status, insert_issue, load_issue};
use crate::learnings::{Learning, Reader, learnings_of_issue};
use crate::store::Store;

use crate::trail::findings::{Comment, Finding, comments_in, findings_in, recent_findings_in};
use crate::trail::runs::{RunSummary, recent_runs_in};
use crate::trail::status::{StatusChange, block_parent_in, history_in};
use crate::work::prs::{PullRequestSummary, prs_of};

/// Everything recorded about an issue (`get_issue`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct IssueDetails {
    #[serde(flatten)]
    pub(crate) issue: Issue,
    /// Identifiers of the issue's sub-tasks.
    pub(crate) subtasks: Vec<String>,
    /// Every finding, oldest first.
    pub(crate) findings: Vec<Finding>,
    /// Every learning recorded on the issue, oldest first.
    pub(crate) learnings: Vec<Learning>,
    /// Every comment, oldest first.
    pub(crate) comments: Vec<Comment>,
    pub(crate) status_history: Vec<StatusChange>,
    pub(crate) pull_requests: Vec<PullRequestSummary>,
    /// Every recorded agent run, newest first.
    pub(crate) runs: Vec<RunSummary>,
}

/// A finding in one line.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct FindingSummary {
    pub(crate) id: String,
    pub(crate) category: String,
    pub(crate) summary: String,
    pub(crate) created_at: String,
}

/// The essential state of an issue (`get_issue_status`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct IssueStatus {
    pub(crate) id: String,
    pub(crate) identifier: String,
    pub(crate) title: String,
    pub(crate) status: Status,
    pub(crate) labels: Vec<String>,
    pub(crate) priority: u8,
    pub(crate) size: Option<String>,
    /// The last 5 findings, newest first.
    pub(crate) recent_findings: Vec<FindingSummary>,
    /// The last 3 runs, newest first.
    pub(crate) recent_runs: Vec<RunSummary>,
    pub(crate) updated_at: String,
}

fn subtasks_in(c: &Conn<'_>, issue_id: &str) -> Result<Vec<String>> {
    let mut stmt = c.prepare("SELECT identifier FROM issues WHERE parent_id = ?1 ORDER BY seq")?;
    let rows = stmt
        .query_map([issue_id], |r| r.get(0))?
        .collect::<crate::error::Result<_>>()?;
    Ok(rows)
}

fn load(c: &Conn<'_>, id: &str) -> Result<Issue> {
    load_issue(c, id)?.ok_or_else(|| Error::not_found("issue", id))
}

/// The full issue with its trail (id or identifier), its learnings as `reader` may see
/// them: its dozen statements read one snapshot, in one read transaction (on SQLite,
/// each statement outside one began and ended a transaction of its own, 0.08 ms of a
/// `get_issue` that takes about 0.4: docs/perf/daemon.md).
pub(crate) fn issue_details(
    store: &Store,
    issue: &str,
    reader: Reader<'_>,
) -> Result<IssueDetails> {
    store.snapshot(|c| {
        let (id, _) = crate::trail::resolve(c, issue)?;
        Ok(IssueDetails {
            issue: load(c, &id)?,
            subtasks: subtasks_in(c, &id)?,
            findings: findings_in(c, &id)?,
            learnings: learnings_of_issue(c, &id, reader)?,
            comments: comments_in(c, &id)?,
            status_history: history_in(c, &id)?,
            pull_requests: prs_of(c, &id)?,
            runs: recent_runs_in(c, &id, usize::MAX)?,
        })
    })
}

/// The slim status of an issue (id or identifier).
pub(crate) fn issue_status(store: &Store, issue: &str) -> Result<IssueStatus> {
    store.read(|c| {
        let (id, _) = crate::trail::resolve(c, issue)?;
        let i = load(c, &id)?;
        Ok(IssueStatus {
            recent_findings: recent_findings_in(c, &id, 5)?
                .into_iter()
                .map(|f| FindingSummary {
                    id: f.id,
                    category: f.category,
                    summary: f.summary,
                    created_at: f.created_at,
                })
                .collect(),
            recent_runs: recent_runs_in(c, &id, 3)?,
            id: i.id,
            identifier: i.identifier,
            title: i.title,
            status: i.status,
            labels: i.labels,
            priority: i.priority,
            size: i.size,
            updated_at: i.updated_at,
        })
    })
}

/// Create a sub-task of `parent` (id or identifier) in the parent's project and block
/// the parent until it is done (see [`crate::trail::status`]).
pub(crate) fn create_subtask(
    store: &Store,
    parent: &str,
    new: NewIssue,
    actor: &str,
) -> Result<Issue> {
    store.write(|tx| {
        let (parent_id, _) = crate::trail::resolve(tx, parent)?;
        let project_id: String = tx.query_row(
            "SELECT project_id FROM issues WHERE id = ?1",
            [&parent_id],
            |r| r.get(0),
        )?;
        let child_id = insert_issue(
            tx,
            &NewIssue {
                project: project_id,
                parent: Some(parent_id.clone()),
                created_by: Some(actor.to_string()),
                ..new
            },
        )?;
        let child = load(tx, &child_id)?;
        block_parent_in(tx, &parent_id, &child_id, &child.identifier, actor)?;
        Ok(child)
    })
}
