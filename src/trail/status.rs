//! Status changes in the trail vocabulary (`update_issue_status`, `cairn issue status`),
//! the status history, and sub-tasks that block their parent.
//!
//! ## Transitions (decision; the spec gives only those from `in_progress`)
//!
//! | from          | to                                             |
//! |---------------|------------------------------------------------|
//! | `backlog`     | `todo`, `in_progress`, `cancelled`             |
//! | `todo`        | `in_progress` (an agent starts), `blocked`, `backlog`, `cancelled` |
//! | `in_progress` | `review` (done), `todo` (give up), `blocked` (need human input), `cancelled` |
//! | `blocked`     | `todo`, `in_progress`, `cancelled`             |
//! | `review`      | `in_progress` (rework), `todo`, `done` (merged), `cancelled` |
//! | `done`, `cancelled` | none (terminal)                          |
//!
//! Agents (the `update_issue_status` tool) follow the spec exactly: from `in_progress`
//! only, to `review`, `todo` or `blocked`. Starting work (`in_progress`), `done`,
//! `cancelled` and `backlog` are the orchestrator's or a person's call (CLI, or a server
//! without an agent profile). A parent blocked by open sub-tasks cannot be unblocked by
//! hand while one is open.
//! Every change is written to `issue_status_history` with its reason and actor.
//!
//! ## Sub-tasks
//!
//! `create_subtask` records the parent's status, sets the parent to `blocked` (with
//! `blocked_reason`) and makes the parent depend on the sub-task. When a sub-task
//! reaches `done` or `cancelled` and no other sub-task of the parent is open, the parent
//! returns to the status it had before its first open sub-task (`todo` if that was
//! `blocked`) — but only if it is still `blocked`; a parent someone moved meanwhile is
//! left alone. [`set_status_in`] does this for every status writer that uses it.

use crate::store::db::{Conn, params};
use serde::Serialize;

use crate::base::now_iso;
use crate::error::{Error, Result};
use crate::issues::Status;
use crate::store::Store;

/// Statuses an agent may ask for through `update_issue_status` (from `in_progress`).
pub(crate) const AGENT_TARGETS: [Status; 3] = [Status::Review, Status::Todo, Status::Blocked];

/// Where the trail vocabulary lets an issue go from `from`.
pub(crate) fn allowed_targets(from: Status) -> &'static [Status] {
    use Status::*;
    match from {
        Backlog => &[Todo, InProgress, Cancelled],
        Todo => &[InProgress, Blocked, Backlog, Cancelled],
        InProgress => &[Review, Todo, Blocked, Cancelled],
        Blocked => &[Todo, InProgress, Cancelled],
        Review => &[InProgress, Todo, Done, Cancelled],
        Done | Cancelled => &[],
    }
}

/// Check a transition of the trail vocabulary.
pub(crate) fn check_transition(from: Status, to: Status) -> Result<()> {
    if allowed_targets(from).contains(&to) {
        return Ok(());
    }
    let allowed: Vec<&str> = allowed_targets(from).iter().map(|s| s.as_str()).collect();
    Err(Error::InvalidTransition {
        from: from.to_string(),
        to: to.to_string(),
        hint: if from == to {
            format!("the issue is already {to}")
        } else if allowed.is_empty() {
            format!("{from} is terminal; nothing can follow it")
        } else {
            format!("from {from} the issue can go to: {}", allowed.join(", "))
        },
    })
}

/// One entry of an issue's status history.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StatusChange {
    pub(crate) from: Status,
    pub(crate) to: Status,
    pub(crate) reason: Option<String>,
    pub(crate) actor: String,
    pub(crate) at: String,
}

pub(crate) fn current_status(c: &Conn<'_>, issue_id: &str) -> Result<Status> {
    let s: String = c
        .query_opt("SELECT status FROM issues WHERE id = ?1", [issue_id], |r| {
            r.get(0)
        })?
        .ok_or_else(|| Error::not_found("issue", issue_id))?;
    Status::parse(&s).ok_or_else(|| Error::Internal(format!("unknown stored status {s}")))
}

/// Write a status change (no transition check: callers check their own vocabulary's
/// rules first), its history entry, and the parent's return when this was the last
/// open sub-task. Returns the change.
pub(crate) fn set_status_in(
    tx: &Conn<'_>,
    issue_id: &str,
    to: Status,
    reason: Option<&str>,
    actor: &str,
) -> Result<StatusChange> {
    let from = current_status(tx, issue_id)?;
    let at = now_iso();
    let blocked_reason = if to == Status::Blocked { reason } else { None };
    tx.execute(
        "UPDATE issues SET status = ?2, blocked_reason = ?3, updated_by = ?4, updated_at = ?5
         WHERE id = ?1",
        params![issue_id, to.as_str(), blocked_reason, actor, at],
    )?;
    tx.execute(
        "INSERT INTO issue_status_history(issue_id, from_status, to_status, reason, actor, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![issue_id, from.as_str(), to.as_str(), reason, actor, at],
    )?;
    if to.is_terminal() {
        release_parent(tx, issue_id, actor)?;
    }
    if to == Status::Done {
        // The `helped` verdicts of a finished issue count more (docs/learnings.md).
        super::approval::issue_approved(tx, issue_id, actor)?;
    }
    Ok(StatusChange {
        from,
        to,
        reason: reason.map(String::from),
        actor: actor.to_string(),
        at,
    })
}

/// Leaving `blocked` (to anything but done/cancelled) while sub-tasks are open is
/// refused in both vocabularies: the parent returns by itself when they end. When
/// allowed, the parent's sub-task block is dropped.
pub(crate) fn check_unblock(tx: &Conn<'_>, issue_id: &str, from: Status, to: Status) -> Result<()> {
    if from != Status::Blocked || to.is_terminal() || to == Status::Blocked {
        return Ok(());
    }
    let open = open_subtasks(tx, issue_id)?;
    if !open.is_empty() {
        return Err(Error::InvalidTransition {
            from: from.to_string(),
            to: to.to_string(),
            hint: format!(
                "the issue waits for its open sub-tasks ({}); it returns by itself when \
                 they are done",
                open.join(", ")
            ),
        });
    }
    tx.execute(
        "DELETE FROM subtask_blocks WHERE parent_id = ?1",
        [issue_id],
    )?;
    Ok(())
}

fn open_subtasks(c: &Conn<'_>, parent_id: &str) -> Result<Vec<String>> {
    let mut stmt = c.prepare(
        "SELECT identifier FROM issues WHERE parent_id = ?1
         AND status NOT IN ('done', 'cancelled') ORDER BY seq",
    )?;
    let rows = stmt
        .query_map([parent_id], |r| r.get(0))?
        .collect::<crate::error::Result<_>>()?;
    Ok(rows)
}

/// After `child_id` ended: when its parent has no open sub-task left, return the parent
/// to its recorded status (if it is still blocked).
fn release_parent(tx: &Conn<'_>, child_id: &str, actor: &str) -> Result<()> {
    let parent: Option<String> = tx.query_row(
        "SELECT parent_id FROM issues WHERE id = ?1",
        [child_id],
        |r| r.get(0),
    )?;
    let Some(parent_id) = parent else {
        return Ok(());
    };
    let previous: Option<String> = tx.query_opt(
        "SELECT previous_status FROM subtask_blocks WHERE parent_id = ?1",
        [&parent_id],
        |r| r.get(0),
    )?;
    let Some(previous) = previous else {
        return Ok(());
    };
    if !open_subtasks(tx, &parent_id)?.is_empty() {
        return Ok(());
    }
    tx.execute(
        "DELETE FROM subtask_blocks WHERE parent_id = ?1",
        [&parent_id],
    )?;
    if current_status(tx, &parent_id)? == Status::Blocked {
        let back = Status::parse(&previous)
            .filter(|s| !s.is_terminal() && *s != Status::Blocked)
            .unwrap_or(Status::Todo);
        set_status_in(tx, &parent_id, back, Some("all sub-tasks are done"), actor)?;
    }
    Ok(())
}

/// Block `parent_id` on a new sub-task (called by `create_subtask` in its transaction).
pub(crate) fn block_parent_in(
    tx: &Conn<'_>,
    parent_id: &str,
    child_id: &str,
    child_identifier: &str,
    actor: &str,
) -> Result<()> {
    let status = current_status(tx, parent_id)?;
    if status.is_terminal() {
        return Err(Error::InvalidTransition {
            from: status.to_string(),
            to: Status::Blocked.to_string(),
            hint: "a done or cancelled issue cannot get sub-tasks; create an issue instead".into(),
        });
    }
    tx.execute(
        "INSERT INTO subtask_blocks(parent_id, previous_status, created_at)
         VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
        params![parent_id, status.as_str(), now_iso()],
    )?;
    tx.execute(
        "INSERT INTO issue_dependencies(issue_id, depends_on_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
        params![parent_id, child_id],
    )?;
    let reason = format!("waiting for sub-task {child_identifier}");
    if status == Status::Blocked {
        tx.execute(
            "UPDATE issues SET blocked_reason = ?2, updated_at = ?3 WHERE id = ?1",
            params![parent_id, reason, now_iso()],
        )?;
    } else {
        set_status_in(tx, parent_id, Status::Blocked, Some(&reason), actor)?;
    }
    Ok(())
}

/// Change an issue's status by the trail vocabulary's rules (see the module doc).
/// `agent` restricts the targets to [`AGENT_TARGETS`].
pub(crate) fn change_status_in(
    tx: &Conn<'_>,
    issue_id: &str,
    to: Status,
    reason: Option<&str>,
    actor: &str,
    agent: bool,
) -> Result<StatusChange> {
    let from = current_status(tx, issue_id)?;
    if agent && !AGENT_TARGETS.contains(&to) {
        return Err(Error::invalid(
            "status",
            "agents may set review, todo or blocked; in_progress, done, cancelled and backlog \
             are set by the orchestrator or a person",
        ));
    }
    if agent && from != Status::InProgress {
        return Err(Error::InvalidTransition {
            from: from.to_string(),
            to: to.to_string(),
            hint: format!(
                "agents change an issue's status only from in_progress (to review, todo or \
                 blocked); this issue is {from}, which the orchestrator or a person changes"
            ),
        });
    }
    check_transition(from, to)?;
    check_unblock(tx, issue_id, from, to)?;
    set_status_in(tx, issue_id, to, reason, actor)
}

/// An issue's status history, oldest first.
pub(crate) fn history_in(c: &Conn<'_>, issue_id: &str) -> Result<Vec<StatusChange>> {
    let mut stmt = c.prepare(
        "SELECT from_status, to_status, reason, actor, created_at FROM issue_status_history
         WHERE issue_id = ?1 ORDER BY id",
    )?;
    let rows = stmt
        .query_map([issue_id], |r| {
            let from: String = r.get(0)?;
            let to: String = r.get(1)?;
            Ok(StatusChange {
                from: Status::parse(&from).unwrap_or(Status::Todo),
                to: Status::parse(&to).unwrap_or(Status::Todo),
                reason: r.get(2)?,
                actor: r.get(3)?,
                at: r.get(4)?,
            })
        })?
        .collect::<crate::error::Result<_>>()?;
    Ok(rows)
}

/// Change an issue's status (id or identifier) by the trail vocabulary's rules.
/// `agent` = the caller is an agent (restricted targets).
pub(crate) fn update_issue_status(
    store: &Store,
    issue: &str,
    to: Status,
    reason: Option<&str>,
    actor: &str,
    agent: bool,
) -> Result<StatusChange> {
    if let Some(r) = reason
        && r.chars().count() > super::findings::limits::REASON_MAX
    {
        return Err(Error::invalid(
            "reason",
            format!(
                "must be at most {} characters",
                super::findings::limits::REASON_MAX
            ),
        ));
    }
    let reason =
        crate::text::prose_opt("reason", reason).map_err(|e| Error::InvalidInput(vec![e]))?;
    let reason = reason.as_deref();
    store.write(|tx| {
        let (id, _) = super::resolve(tx, issue)?;
        change_status_in(tx, &id, to, reason, actor, agent)
    })
}
