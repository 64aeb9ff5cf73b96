//! Colibri tasks: issues seen through the `task_*` tools, with Colibri's own rules.
//!
//! - Tasks start in `backlog`; `task_update` enforces [`transition_allowed`] exactly
//!   (a same-status "transition" is not in the table and is refused too; omit `status`
//!   to keep it). `done` and `cancelled` are terminal for status, while the other fields
//!   of a finished task stay editable (decision: the document only forbids outbound
//!   transitions).
//! - `blocked` needs a `blocked_reason`; leaving `blocked` clears the reason. A parent
//!   blocked by open sub-tasks cannot leave `blocked` while one is open (as in the
//!   trail vocabulary).
//! - Agents (a server with an agent profile; the `agent` argument of [`task_update`]) change a task's
//!   status as the spec lets them change an issue's: only from `in_progress`, to
//!   `review` or `blocked` (Colibri's table has no `in_progress → todo`). `done` and
//!   `cancelled` are a person's call in both vocabularies (`PERMISSION_DENIED`).
//! - Full-text search uses the `issues_fts` FTS5 table (title + description). Every
//!   token of the caller's text is quoted, so no query text can be FTS5 syntax; each
//!   token matches as a prefix and all tokens must match.

use crate::store::db::{Conn, Dialect, params};
use serde::Serialize;

use super::limits;
use crate::base::now_iso;
use crate::error::{Error, FieldError, Result};
use crate::issues::{NewIssue, Status, find_project, insert_issue};
use crate::store::Store;
use crate::trail::status::set_status_in;

use super::{Priority, resolve_task, thought_id};

/// Whether Colibri's transition table allows `from → to`.
pub(crate) fn transition_allowed(from: Status, to: Status) -> bool {
    use Status::*;
    matches!(
        (from, to),
        (Backlog, Todo | Cancelled)
            | (Todo, InProgress | Blocked | Cancelled)
            | (InProgress, Review | Blocked | Cancelled)
            | (Blocked, Todo | InProgress | Cancelled)
            | (Review, Done | Backlog | Blocked | Cancelled)
    )
}

fn transition_error(from: Status, to: Status) -> Error {
    let allowed: Vec<&str> = Status::ALL
        .into_iter()
        .filter(|t| transition_allowed(from, *t))
        .map(Status::as_str)
        .collect();
    let hint = if allowed.is_empty() {
        format!("{from} is terminal; a {from} task cannot change status")
    } else if from == to {
        format!(
            "the task is already {from}; omit status to keep it (allowed from {from}: {})",
            allowed.join(", ")
        )
    } else {
        format!("allowed from {from}: {}", allowed.join(", "))
    };
    Error::InvalidTransition {
        from: from.to_string(),
        to: to.to_string(),
        hint,
    }
}

/// A new task.
#[derive(Debug, Clone, Default)]
pub(crate) struct TaskCreate {
    pub(crate) title: String,
    pub(crate) description: Option<String>,
    /// Project slug (or id).
    pub(crate) project: String,
    /// Parent task reference, for sub-tasks (same project).
    pub(crate) parent: Option<String>,
    pub(crate) priority: Option<Priority>,
    pub(crate) labels: Vec<String>,
    pub(crate) assignee: Option<String>,
    pub(crate) estimate_hours: Option<f64>,
}

/// What `task_create` returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct TaskCreated {
    /// The task's identifier (`PFX-N`), also its issue identifier.
    pub(crate) task_id: String,
    /// Always `backlog`.
    pub(crate) status: Status,
    pub(crate) created_at: String,
    pub(crate) created_by: String,
    /// The project-scoped monotonic counter (the N of `PFX-N`).
    pub(crate) sequence: i64,
}

/// One task with all its metadata (`task_get`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct TaskView {
    pub(crate) task_id: String,
    pub(crate) title: String,
    pub(crate) description: String,
    /// Project slug.
    pub(crate) project: String,
    pub(crate) status: Status,
    pub(crate) priority: Priority,
    pub(crate) progress: u8,
    pub(crate) assignee: String,
    pub(crate) labels: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) estimate_hours: Option<f64>,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    pub(crate) created_by: String,
    pub(crate) updated_by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) blocked_reason: Option<String>,
    /// Thought ids (`Θ-N`) of the task's chain, in chain order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) thought_trail: Option<Vec<String>>,
    /// Task ids of the direct sub-tasks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) dependents: Option<Vec<String>>,
}

/// A change to a task. `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct TaskUpdate {
    pub task: String,
    pub status: Option<Status>,
    pub progress: Option<u8>,
    pub description: Option<String>,
    pub priority: Option<Priority>,
    pub assignee: Option<String>,
    /// Replaces every label.
    pub labels: Option<Vec<String>>,
    pub blocked_reason: Option<String>,
}

/// What `task_update` returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TaskUpdated {
    pub task_id: String,
    pub(crate) status: Status,
    pub(crate) progress: u8,
    pub(crate) updated_at: String,
    pub(crate) updated_by: String,
    /// The status before this update.
    pub(crate) previous_status: Status,
    /// Things that are allowed but probably not meant.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) warnings: Vec<String>,
}

/// `task_list` sort keys.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SortBy {
    Created,
    #[default]
    Updated,
    /// Descending puts critical first.
    Priority,
    Progress,
}

/// Sort direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SortOrder {
    Asc,
    #[default]
    Desc,
}

/// Filters, order and page of `task_list`.
#[derive(Debug, Clone, Default)]
pub(crate) struct TaskQuery {
    pub(crate) project: Option<String>,
    pub(crate) statuses: Vec<Status>,
    pub(crate) priorities: Vec<Priority>,
    pub(crate) assignee: Option<String>,
    pub(crate) label: Option<String>,
    /// ISO-8601; only tasks created strictly after.
    pub(crate) created_after: Option<String>,
    /// ISO-8601; only tasks created strictly before.
    pub(crate) created_before: Option<String>,
    pub(crate) search: Option<String>,
    /// Page size; default [`limits::LIST_LIMIT_DEFAULT`].
    pub(crate) limit: Option<usize>,
    /// Tasks skipped; default 0.
    pub(crate) offset: Option<usize>,
    pub(crate) sort_by: SortBy,
    pub(crate) sort_order: SortOrder,
}

/// One row of `task_list`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct TaskSummary {
    pub(crate) task_id: String,
    pub(crate) title: String,
    pub(crate) project: String,
    pub(crate) status: Status,
    pub(crate) priority: Priority,
    pub(crate) progress: u8,
    pub(crate) assignee: String,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
}

/// A page of tasks.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct TaskPage {
    pub(crate) tasks: Vec<TaskSummary>,
    /// Every task matching the filters, ignoring limit and offset.
    pub(crate) total_count: usize,
    pub(crate) returned_count: usize,
    pub(crate) offset: usize,
    pub(crate) limit: usize,
}

/// A task ready to be picked up.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct NextAction {
    pub(crate) task_id: String,
    pub(crate) title: String,
    pub(crate) priority: Priority,
    pub(crate) assignee: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) estimate_hours: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parent_id: Option<String>,
    /// Dependencies that are neither done nor cancelled.
    pub(crate) dependencies_unmet: u32,
}

/// A blocked task and why.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct BlockedTask {
    pub(crate) task_id: String,
    pub(crate) title: String,
    pub(crate) blocked_reason: String,
}

/// What `task_next_actions` returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct NextActions {
    pub(crate) next_actions: Vec<NextAction>,
    pub(crate) count: usize,
    /// Project slug.
    pub(crate) project: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) blocked: Option<Vec<BlockedTask>>,
}

/// Unix seconds of an ISO-8601 timestamp (RFC 3339, or a bare date at 00:00 UTC).
fn parse_instant(field: &str, s: &str) -> Result<f64> {
    use time::format_description::well_known::Rfc3339;
    if let Ok(t) = time::OffsetDateTime::parse(s, &Rfc3339) {
        return Ok(t.unix_timestamp_nanos() as f64 / 1e9);
    }
    let date_only = time::macros::format_description!("[year]-[month]-[day]");
    if let Ok(d) = time::Date::parse(s, &date_only) {
        return Ok(d.midnight().assume_utc().unix_timestamp() as f64);
    }
    Err(Error::invalid(
        field,
        format!("{s:?} is not an ISO-8601 timestamp; use e.g. 2026-04-08T22:15:30Z or 2026-04-08"),
    ))
}

/// The FTS5 query for free text: every whitespace-separated token quoted (so nothing
/// the caller writes is FTS5 syntax) and matched as a prefix; `None` if no token.
pub(crate) fn fts_query(text: &str) -> Option<String> {
    let text = spaced_controls(text);
    let tokens: Vec<String> = text
        .split_whitespace()
        .map(|t| format!("\"{}\"*", t.replace('"', "\"\"")))
        .collect();
    (!tokens.is_empty()).then(|| tokens.join(" "))
}

/// Control characters (NUL ends an FTS5 string early, PostgreSQL text cannot hold it)
/// separate tokens like spaces.
fn spaced_controls(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// What `task_list`'s search binds: SQLite's FTS5 query ([`fts_query`]), or the text
/// itself for PostgreSQL's `cairn_issue_search_query` (migration 0005), which quotes
/// and prefixes each token the same way; `None` when there is no token at all.
fn search_param(dialect: Dialect, text: &str) -> Option<String> {
    let query = fts_query(text)?;
    Some(match dialect {
        Dialect::Sqlite => query,
        Dialect::Postgres => spaced_controls(text),
    })
}

/// Assignees and labels are printable and not blank.
fn check_names(assignee: Option<&str>, labels: Option<&[String]>) -> Result<()> {
    let bad = |s: &str| s.trim().is_empty() || crate::text::exact("", s).is_err();
    let mut errors = Vec::new();
    if assignee.is_some_and(bad) {
        errors.push(FieldError::new(
            "assignee",
            "must be printable (no hidden characters) and not blank",
        ));
    }
    for (i, l) in labels.unwrap_or_default().iter().enumerate() {
        if bad(l) {
            errors.push(FieldError::new(
                format!("labels[{i}]"),
                "a label must be printable (no hidden characters) and not blank",
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::InvalidInput(errors))
    }
}

fn project_id(c: &Conn<'_>, reference: &str) -> Result<(String, String)> {
    let p =
        find_project(c, reference)?.ok_or_else(|| Error::ProjectNotFound(reference.to_string()))?;
    Ok((p.id, p.slug))
}

fn load_task(c: &Conn<'_>, issue_id: &str) -> Result<TaskView> {
    let issue = crate::issues::load_issue(c, issue_id)?
        .ok_or_else(|| Error::TaskNotFound(issue_id.to_string()))?;
    Ok(TaskView {
        task_id: issue.identifier,
        title: issue.title,
        description: issue.description,
        project: issue.project_slug,
        status: issue.status,
        priority: Priority::from_level(issue.priority),
        progress: issue.progress,
        assignee: issue.assignee,
        labels: issue.labels,
        estimate_hours: issue.estimate_hours,
        created_at: issue.created_at,
        updated_at: issue.updated_at,
        created_by: issue.created_by,
        updated_by: issue.updated_by,
        parent_id: issue.parent,
        blocked_reason: issue.blocked_reason,
        thought_trail: None,
        dependents: None,
    })
}

fn strings(c: &Conn<'_>, sql: &str, arg: &str) -> Result<Vec<String>> {
    let mut stmt = c.prepare(sql)?;
    let rows = stmt
        .query_map([arg], |r| r.get(0))?
        .collect::<crate::error::Result<_>>()?;
    Ok(rows)
}

/// Create a task in `backlog`, attributed to `actor`.
pub(crate) fn task_create(store: &Store, actor: &str, new: &TaskCreate) -> Result<TaskCreated> {
    check_names(new.assignee.as_deref(), Some(&new.labels))?;
    store.write(|tx| {
        let (project_id, _) = project_id(tx, &new.project)?;
        let parent = match &new.parent {
            Some(p) => {
                let id = resolve_task(tx, p)?;
                let parent_project: String =
                    tx.query_row("SELECT project_id FROM issues WHERE id = ?1", [&id], |r| {
                        r.get(0)
                    })?;
                if parent_project != project_id {
                    return Err(Error::invalid(
                        "parent_id",
                        format!("task {p} belongs to another project than {}", new.project),
                    ));
                }
                Some(id)
            }
            None => None,
        };
        let id = insert_issue(
            tx,
            &NewIssue {
                project: project_id,
                title: new.title.clone(),
                description: new.description.clone(),
                priority: Some(new.priority.unwrap_or(Priority::Normal).level()),
                labels: new.labels.clone(),
                parent,
                status: Some(Status::Backlog),
                assignee: new.assignee.clone(),
                estimate_hours: new.estimate_hours,
                created_by: Some(actor.to_string()),
                ..Default::default()
            },
        )?;
        tx.query_row(
            "SELECT identifier, created_at, created_by, seq FROM issues WHERE id = ?1",
            [&id],
            |r| {
                Ok(TaskCreated {
                    task_id: r.get(0)?,
                    status: Status::Backlog,
                    created_at: r.get(1)?,
                    created_by: r.get(2)?,
                    sequence: r.get(3)?,
                })
            },
        )
    })
}

/// One task, optionally with its thought trail and its direct sub-tasks.
pub(crate) fn task_get(
    store: &Store,
    task: &str,
    include_thought_trail: bool,
    include_dependents: bool,
) -> Result<TaskView> {
    store.snapshot(|c| {
        let id = resolve_task(c, task)?;
        let mut view = load_task(c, &id)?;
        if include_thought_trail {
            let mut stmt = c.prepare(
                "SELECT id FROM thought_records WHERE issue_id = ?1 ORDER BY chain_position",
            )?;
            let ids = stmt
                .query_map([&id], |r| r.get::<_, i64>(0))?
                .map(|r| r.map(thought_id))
                .collect::<crate::error::Result<_>>()?;
            view.thought_trail = Some(ids);
        }
        if include_dependents {
            view.dependents = Some(strings(
                c,
                "SELECT identifier FROM issues WHERE parent_id = ?1 ORDER BY rowid",
                &id,
            )?);
        }
        Ok(view)
    })
}

/// Change a task's fields; a status change must be in Colibri's transition table.
/// `agent`: the caller is an agent (its session has an agent type), held to the
/// restricted status rules of the module docs.
pub(crate) fn task_update(
    store: &Store,
    actor: &str,
    upd: &TaskUpdate,
    agent: bool,
) -> Result<TaskUpdated> {
    let upd = &checked_update(upd)?;
    store.write(|tx| {
        let id = resolve_task(tx, &upd.task)?;
        let current = load_task(tx, &id)?;
        let from = current.status;
        let to = upd.status.unwrap_or(from);
        if let Some(s) = upd.status {
            check_status_change(tx, &id, from, s, agent)?;
        }
        let mut warnings = Vec::new();
        let blocked_reason = blocked_reason(upd, &current, to, &mut warnings)?;
        let progress = upd.progress.unwrap_or(current.progress);
        if progress == 100 && to != Status::Done {
            warnings.push("Progress set to 100% but status != 'done'".to_string());
        }
        if to == Status::Done && progress < 100 {
            warnings.push(format!("Status is 'done' but progress is {progress}%"));
        }
        // A status change goes through the trail's one status writer, so it lands in
        // the status history and a finished sub-task releases its parent.
        if to != from {
            set_status_in(tx, &id, to, blocked_reason.as_deref(), actor)?;
        }
        let now = now_iso();
        tx.execute(
            "UPDATE issues SET progress = ?2, description = ?3, priority = ?4,
                    assignee = ?5, blocked_reason = ?6, updated_by = ?7, updated_at = ?8
             WHERE id = ?1",
            params![
                id,
                progress,
                upd.description.as_ref().unwrap_or(&current.description),
                upd.priority.unwrap_or(current.priority).level(),
                upd.assignee.as_ref().unwrap_or(&current.assignee),
                blocked_reason,
                actor,
                now,
            ],
        )?;
        if let Some(labels) = &upd.labels {
            tx.execute("DELETE FROM issue_labels WHERE issue_id = ?1", [&id])?;
            for l in labels {
                tx.execute(
                    "INSERT INTO issue_labels(issue_id, label) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                    params![id, l.trim()],
                )?;
            }
        }
        Ok(TaskUpdated {
            task_id: current.task_id,
            status: to,
            progress,
            updated_at: now,
            updated_by: actor.to_string(),
            previous_status: from,
            warnings,
        })
    })
}

/// The update with its texts cleaned, refused when it changes nothing or names a bad
/// assignee or label.
fn checked_update(upd: &TaskUpdate) -> Result<TaskUpdate> {
    let nothing = upd.status.is_none()
        && upd.progress.is_none()
        && upd.description.is_none()
        && upd.priority.is_none()
        && upd.assignee.is_none()
        && upd.labels.is_none()
        && upd.blocked_reason.is_none();
    if nothing {
        return Err(Error::invalid(
            "arguments",
            "nothing to update: give at least one of status, progress, description, \
             priority, assignee, labels, blocked_reason",
        ));
    }
    check_names(upd.assignee.as_deref(), upd.labels.as_deref())?;
    let field = |e| Error::InvalidInput(vec![e]);
    Ok(TaskUpdate {
        description: crate::text::prose_opt("description", upd.description.as_deref())
            .map_err(field)?,
        blocked_reason: crate::text::prose_opt("blocked_reason", upd.blocked_reason.as_deref())
            .map_err(field)?,
        ..upd.clone()
    })
}

/// Whether the task's status may go from `from` to `to`: the transition table, and for
/// an agent, only from in_progress and never to done or cancelled.
fn check_status_change(
    tx: &Conn<'_>,
    id: &str,
    from: Status,
    to: Status,
    agent: bool,
) -> Result<()> {
    if agent && matches!(to, Status::Done | Status::Cancelled) {
        return Err(Error::PermissionDenied(format!(
            "{to} is a person's decision (a human merge or a cancellation); agents \
             may move a task from in_progress to review or blocked"
        )));
    }
    if !transition_allowed(from, to) {
        return Err(transition_error(from, to));
    }
    if agent && (from != Status::InProgress || to == Status::InProgress) {
        return Err(Error::InvalidTransition {
            from: from.to_string(),
            to: to.to_string(),
            hint: format!(
                "agents change a task's status only from in_progress (to review or \
                 blocked); this task is {from}, which the orchestrator or a person \
                 changes"
            ),
        });
    }
    crate::trail::status::check_unblock(tx, id, from, to)
}

/// The blocked reason the task keeps at status `to`: the update's (required when it
/// sets blocked), the current one while it stays blocked, none otherwise (a reason
/// given then is ignored, with a warning).
fn blocked_reason(
    upd: &TaskUpdate,
    current: &TaskView,
    to: Status,
    warnings: &mut Vec<String>,
) -> Result<Option<String>> {
    let reason = upd
        .blocked_reason
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty());
    if to != Status::Blocked {
        if upd.blocked_reason.is_some() {
            warnings.push(format!(
                "blocked_reason ignored: the task is {to}, not blocked"
            ));
        }
        return Ok(None);
    }
    match (reason, upd.status) {
        (Some(r), _) => Ok(Some(r.to_string())),
        (None, Some(_)) => Err(Error::invalid(
            "blocked_reason",
            "required when status is 'blocked': say what blocks the task",
        )),
        (None, None) => Ok(current.blocked_reason.clone()),
    }
}

/// Filter, sort and page tasks.
pub(crate) fn task_list(store: &Store, q: &TaskQuery) -> Result<TaskPage> {
    let limit = q.limit.unwrap_or(limits::LIST_LIMIT_DEFAULT as usize);
    let offset = q.offset.unwrap_or(0);
    let after = q
        .created_after
        .as_deref()
        .map(|s| parse_instant("created_after", s))
        .transpose()?;
    let before = q
        .created_before
        .as_deref()
        .map(|s| parse_instant("created_before", s))
        .transpose()?;
    let statuses = serde_json::to_string(&q.statuses)?;
    let priorities: Vec<u8> = q.priorities.iter().map(|p| p.level()).collect();
    let priorities = serde_json::to_string(&priorities)?;
    store.read(|c| {
        let project = match &q.project {
            Some(p) => Some(project_id(c, p)?.0),
            None => None,
        };
        let d = c.dialect();
        let search = q.search.as_deref().and_then(|s| search_param(d, s));
        let filter = task_filter(d);
        let args = params![
            project, statuses, priorities, q.assignee, q.label, after, before, search,
        ];
        let total: i64 = c.query_row(&format!("SELECT count(*) {filter}"), args, |r| r.get(0))?;
        let (column, dir) = task_order(q);
        let sql = format!(
            "SELECT i.identifier, i.title, p.slug, i.status, i.priority, i.progress,
                    i.assignee, i.created_at, i.updated_at {filter}
             ORDER BY {column} {dir}, i.rowid {dir} LIMIT ?9 OFFSET ?10"
        );
        let mut stmt = c.prepare(&sql)?;
        let tasks: Vec<TaskSummary> = stmt
            .query_map(
                params![
                    project,
                    statuses,
                    priorities,
                    q.assignee,
                    q.label,
                    after,
                    before,
                    search,
                    limit as i64,
                    offset as i64,
                ],
                |r| {
                    let status: String = r.get(3)?;
                    Ok(TaskSummary {
                        task_id: r.get(0)?,
                        title: r.get(1)?,
                        project: r.get(2)?,
                        status: Status::parse(&status).unwrap_or(Status::Todo),
                        priority: Priority::from_level(r.get(4)?),
                        progress: r.get(5)?,
                        assignee: r.get(6)?,
                        created_at: r.get(7)?,
                        updated_at: r.get(8)?,
                    })
                },
            )?
            .collect::<crate::error::Result<_>>()?;
        Ok(TaskPage {
            returned_count: tasks.len(),
            tasks,
            total_count: total as usize,
            offset,
            limit,
        })
    })
}

/// The FROM and WHERE of a task query, its parameters: ?1 project id, ?2 statuses and
/// ?3 priority levels (JSON arrays, `[]` for any), ?4 assignee, ?5 label, ?6 and ?7
/// created after and before (epoch seconds), ?8 the full-text search.
fn task_filter(d: Dialect) -> String {
    format!(
        "FROM issues i JOIN projects p ON p.id = i.project_id
         WHERE (CAST(?1 AS TEXT) IS NULL OR i.project_id = ?1)
           AND (?2 = '[]' OR i.status IN ({statuses}))
           AND (?3 = '[]' OR i.priority IN ({priorities}))
           AND (CAST(?4 AS TEXT) IS NULL OR i.assignee = ?4)
           AND (CAST(?5 AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM issue_labels l
                                      WHERE l.issue_id = i.id AND l.label = ?5))
           AND (CAST(?6 AS DOUBLE PRECISION) IS NULL OR {created} > ?6)
           AND (CAST(?7 AS DOUBLE PRECISION) IS NULL OR {created} < ?7)
           AND (CAST(?8 AS TEXT) IS NULL OR {matches})",
        statuses = d.json_elements("?2", false),
        priorities = d.json_elements("?3", true),
        created = d.epoch_seconds("i.created_at"),
        matches = match d {
            Dialect::Sqlite => {
                "i.rowid IN (SELECT rowid FROM issues_fts WHERE issues_fts MATCH ?8)"
            }
            Dialect::Postgres => {
                "i.search_vector @@ (SELECT cairn_issue_search_query(CAST(?8 AS text)))"
            }
        },
    )
}

/// The ORDER BY column and direction of a task query.
fn task_order(q: &TaskQuery) -> (&'static str, &'static str) {
    // Priority levels run the other way: "desc" means most urgent (1) first.
    let (column, flip) = match q.sort_by {
        SortBy::Created => ("i.created_at", false),
        SortBy::Updated => ("i.updated_at", false),
        SortBy::Priority => ("i.priority", true),
        SortBy::Progress => ("i.progress", false),
    };
    let desc = (q.sort_order == SortOrder::Desc) != flip;
    (column, if desc { "DESC" } else { "ASC" })
}

/// The project's `todo` tasks, most urgent first (then fewest unmet dependencies,
/// then oldest), and with `include_blocked` its blocked tasks with their reasons.
pub(crate) fn task_next_actions(
    store: &Store,
    project: &str,
    limit: Option<usize>,
    include_blocked: bool,
) -> Result<NextActions> {
    let limit = limit.unwrap_or(limits::NEXT_ACTIONS_LIMIT_DEFAULT as usize);
    store.read(|c| {
        let (pid, slug) = project_id(c, project)?;
        let mut stmt = c.prepare(
            "SELECT i.identifier, i.title, i.priority, i.assignee, i.estimate_hours,
                    par.identifier,
                    (SELECT count(*) FROM issue_dependencies d
                       JOIN issues x ON x.id = d.depends_on_id
                      WHERE d.issue_id = i.id AND x.status NOT IN ('done', 'cancelled'))
                      AS unmet
             FROM issues i LEFT JOIN issues par ON par.id = i.parent_id
             WHERE i.project_id = ?1 AND i.status = 'todo'
             ORDER BY i.priority, unmet, i.rowid LIMIT ?2",
        )?;
        let next_actions: Vec<NextAction> = stmt
            .query_map(params![pid, limit as i64], |r| {
                Ok(NextAction {
                    task_id: r.get(0)?,
                    title: r.get(1)?,
                    priority: Priority::from_level(r.get(2)?),
                    assignee: r.get(3)?,
                    estimate_hours: r.get(4)?,
                    parent_id: r.get(5)?,
                    dependencies_unmet: r.get(6)?,
                })
            })?
            .collect::<crate::error::Result<_>>()?;
        let blocked = if include_blocked {
            let mut stmt = c.prepare(
                "SELECT identifier, title, coalesce(blocked_reason, '') FROM issues
                 WHERE project_id = ?1 AND status = 'blocked'
                 ORDER BY priority, rowid LIMIT ?2",
            )?;
            let rows = stmt
                .query_map(params![pid, limit as i64], |r| {
                    Ok(BlockedTask {
                        task_id: r.get(0)?,
                        title: r.get(1)?,
                        blocked_reason: r.get(2)?,
                    })
                })?
                .collect::<crate::error::Result<_>>()?;
            Some(rows)
        } else {
            None
        };
        Ok(NextActions {
            count: next_actions.len(),
            next_actions,
            project: slug,
            blocked,
        })
    })
}

/// The issue ids an audit covers: the task alone, or with `deep` the task and every
/// descendant sub-task, in creation order after the task.
pub(crate) fn task_family(c: &Conn<'_>, issue_id: &str, deep: bool) -> Result<Vec<String>> {
    if !deep {
        return Ok(vec![issue_id.to_string()]);
    }
    let mut stmt = c.prepare(
        "WITH RECURSIVE fam(id) AS (
             SELECT id FROM issues WHERE id = ?1
             UNION SELECT i.id FROM issues i JOIN fam ON i.parent_id = fam.id
         )
         SELECT fam.id FROM fam JOIN issues i ON i.id = fam.id
         ORDER BY (fam.id = ?1) DESC, i.rowid",
    )?;
    let ids = stmt
        .query_map([issue_id], |r| r.get(0))?
        .collect::<crate::error::Result<_>>()?;
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fts_query_quotes_every_token() {
        assert_eq!(fts_query("  "), None);
        assert_eq!(fts_query("\0\u{1}"), None);
        assert_eq!(fts_query("a\0b").unwrap(), r#""a"* "b"*"#);
        assert_eq!(
            fts_query(r#"wire "up" OR*"#).unwrap(),
            r#""wire"* """up"""* "OR*"*"#
        );
    }

    #[test]
    fn terminal_states_have_no_way_out() {
        for to in Status::ALL {
            assert!(!transition_allowed(Status::Done, to));
            assert!(!transition_allowed(Status::Cancelled, to));
            assert!(!transition_allowed(to, to));
        }
    }

    #[test]
    fn instants_accept_rfc3339_and_dates() {
        assert_eq!(parse_instant("x", "1970-01-02").unwrap(), 86_400.0);
        assert_eq!(
            parse_instant("x", "1970-01-01T01:00:00+01:00").unwrap(),
            0.0
        );
        assert_eq!(
            parse_instant("x", "yesterday").unwrap_err().kind(),
            crate::error::ErrorKind::InvalidInput
        );
    }
}
