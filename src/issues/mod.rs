//! Projects and issues: the records every other part of Cairn hangs off.
//!
//! Owns the project and issue tables, identifiers (`PFX-N`, allocated per project inside
//! the write transaction), statuses, priorities, labels and dependencies, and the lookups
//! that accept either an opaque id or a human identifier. Status *rules* (which
//! transition is allowed) belong to the vocabularies that change status (`trail`,
//! `colibri`); this module only stores. [`settings`]: each project's settings, typed
//! (read and written by `configure_project`).

use std::collections::HashMap;

use crate::store::db::{Conn, Row, params};
use serde::Serialize;

use crate::base::{new_id, now_iso};
use crate::error::{Error, FieldError, Result};
use crate::store::Store;

pub mod settings;

/// Limits on issue and project fields, shared by the CLI and the MCP schemas.
pub(crate) mod limits {
    pub(crate) const TITLE_MAX: usize = 500;
    pub(crate) const DESCRIPTION_MAX: usize = 20_000;
    pub(crate) const LABEL_MAX: usize = 64;
    pub(crate) const LABELS_MAX: usize = 20;
    pub(crate) const SLUG_MAX: usize = 64;
    pub(crate) const NAME_MAX: usize = 200;
    pub(crate) const PREFIX_MAX: usize = 16;
    pub(crate) const PATH_MAX: usize = 4096;
    /// Longest issue or project reference (identifier, opaque id or slug) an agent passes.
    pub(crate) const REF_MAX: usize = 64;
    /// Priorities run from 1 (most urgent) to this.
    pub(crate) const PRIORITY_MAX: u8 = 4;
    /// Most issues one new issue may depend on.
    pub(crate) const DEPENDS_ON_MAX: usize = 20;
    /// `list_issues` page size: default and largest.
    pub(crate) const LIST_LIMIT_DEFAULT: usize = 50;
    pub(crate) const LIST_LIMIT_MAX: usize = 100;
}

/// The statuses an issue can have (one set for both vocabularies).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Backlog,
    Todo,
    InProgress,
    Blocked,
    Review,
    Done,
    Cancelled,
}

impl Status {
    pub(crate) const ALL: [Status; 7] = [
        Status::Backlog,
        Status::Todo,
        Status::InProgress,
        Status::Blocked,
        Status::Review,
        Status::Done,
        Status::Cancelled,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Backlog => "backlog",
            Status::Todo => "todo",
            Status::InProgress => "in_progress",
            Status::Blocked => "blocked",
            Status::Review => "review",
            Status::Done => "done",
            Status::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// `done` and `cancelled` end an issue's life.
    pub(crate) fn is_terminal(self) -> bool {
        matches!(self, Status::Done | Status::Cancelled)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A project: a board of issues with a prefix and, optionally, a repository path.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Project {
    pub(crate) id: String,
    pub(crate) slug: String,
    pub(crate) name: String,
    pub(crate) prefix: String,
    pub(crate) path: Option<String>,
    /// Project settings as stored (gates, sensitive paths, risk thresholds, vault, ...).
    pub(crate) settings: serde_json::Value,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
}

impl Project {
    /// The vault collections `search_knowledge` searches (`vault.collections`), in
    /// order; empty when none are configured.
    pub(crate) fn vault_collections(&self) -> Vec<String> {
        self.settings["vault"]["collections"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// An issue (a Colibri task is the same record).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Issue {
    pub id: String,
    pub identifier: String,
    pub(crate) project_id: String,
    pub(crate) project_slug: String,
    pub(crate) title: String,
    pub(crate) description: String,
    pub(crate) status: Status,
    /// 1 = urgent, 2 = high, 3 = medium, 4 = low.
    pub(crate) priority: u8,
    pub(crate) labels: Vec<String>,
    /// Identifiers of the issues this one depends on.
    pub(crate) depends_on: Vec<String>,
    /// Identifier of the parent issue, for sub-tasks.
    pub parent: Option<String>,
    pub(crate) progress: u8,
    pub(crate) assignee: String,
    pub(crate) estimate_hours: Option<f64>,
    pub(crate) blocked_reason: Option<String>,
    pub(crate) size: Option<String>,
    pub(crate) created_by: String,
    pub(crate) updated_by: String,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
}

/// What a new project needs.
#[derive(Debug, Clone, Default)]
pub struct NewProject {
    pub slug: String,
    pub name: String,
    pub prefix: Option<String>,
    pub path: Option<String>,
}

/// What a new issue needs. Everything but project and title has a default.
#[derive(Debug, Clone, Default)]
pub struct NewIssue {
    /// Project id or slug.
    pub project: String,
    pub title: String,
    pub description: Option<String>,
    pub priority: Option<u8>,
    pub labels: Vec<String>,
    /// Issue ids or identifiers.
    pub depends_on: Vec<String>,
    /// Parent issue id or identifier.
    pub parent: Option<String>,
    pub status: Option<Status>,
    pub assignee: Option<String>,
    pub estimate_hours: Option<f64>,
    pub created_by: Option<String>,
}

/// Filters for listing issues.
#[derive(Debug, Clone, Default)]
pub(crate) struct IssueFilter {
    /// Project id or slug; `None` lists every project.
    pub(crate) project: Option<String>,
    pub(crate) statuses: Vec<Status>,
    pub(crate) label: Option<String>,
    pub(crate) limit: Limit,
}

/// How many issues a listing returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Limit {
    /// [`limits::LIST_LIMIT_DEFAULT`]: what an agent's listing gets when it names none.
    Default,
    /// Every issue that matches (the CLI's listing).
    #[default]
    All,
    /// At most this many.
    At(usize),
}

impl Limit {
    /// The limit a caller asked for: a number, or the default when it named none.
    pub(crate) fn or_default(limit: Option<usize>) -> Limit {
        limit.map_or(Limit::Default, Limit::At)
    }

    /// The largest number of issues this limit lets through.
    fn count(self) -> usize {
        match self {
            Limit::Default => limits::LIST_LIMIT_DEFAULT,
            Limit::All => usize::MAX,
            Limit::At(n) => n,
        }
    }
}

fn check_len(errors: &mut Vec<FieldError>, field: &str, value: &str, min: usize, max: usize) {
    let n = value.chars().count();
    if n < min {
        errors.push(FieldError::new(
            field,
            format!("must be at least {min} characters (got {n})"),
        ));
    } else if n > max {
        errors.push(FieldError::new(
            field,
            format!("must be at most {max} characters (got {n})"),
        ));
    }
}

fn validate_labels(errors: &mut Vec<FieldError>, field: &str, labels: &[String]) {
    if labels.len() > limits::LABELS_MAX {
        errors.push(FieldError::new(
            field,
            format!("at most {} labels", limits::LABELS_MAX),
        ));
    }
    for (i, l) in labels.iter().enumerate() {
        if l.trim().is_empty()
            || l.chars().count() > limits::LABEL_MAX
            || l.chars().any(char::is_control)
        {
            errors.push(FieldError::new(
                format!("{field}[{i}]"),
                format!("a label is 1-{} printable characters", limits::LABEL_MAX),
            ));
        }
    }
}

pub(crate) fn project_from_row(r: &Row) -> crate::error::Result<Project> {
    let settings: String = r.get("settings")?;
    Ok(Project {
        id: r.get("id")?,
        slug: r.get("slug")?,
        name: r.get("name")?,
        prefix: r.get("prefix")?,
        path: r.get("path")?,
        settings: serde_json::from_str(&settings).unwrap_or(serde_json::Value::Null),
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

/// Find a project by id or slug.
pub(crate) fn find_project(c: &Conn<'_>, reference: &str) -> Result<Option<Project>> {
    c.query_opt(
        "SELECT * FROM projects WHERE id = ?1 OR slug = ?1",
        [reference],
        project_from_row,
    )
}

/// The next identifier of `project` (`PFX-N`) and its `N`, taken inside the caller's write
/// transaction: numbers are never reused, not even after a move takes an issue away.
/// The one place identifiers are allocated (a new issue, an issue moved in).
pub(crate) fn allocate_identifier(c: &Conn<'_>, project: &Project) -> Result<(i64, String)> {
    let seq: i64 = c.query_row(
        "UPDATE projects SET next_seq = next_seq + 1 WHERE id = ?1 RETURNING next_seq - 1",
        [&project.id],
        |r| r.get(0),
    )?;
    Ok((seq, format!("{}-{seq}", project.prefix)))
}

/// Resolve an issue reference (id, identifier, or an identifier the issue had before a
/// move; identifiers case-insensitive) to its id.
pub(crate) fn resolve_issue_id(c: &Conn<'_>, reference: &str) -> Result<Option<String>> {
    // ASCII upper case, as identifiers are (and as SQLite's upper() would fold).
    let upper = reference.to_ascii_uppercase();
    let live = c.query_opt(
        "SELECT id FROM issues WHERE id = ?1 OR identifier = ?2",
        [reference, &upper],
        |r| r.get(0),
    )?;
    match live {
        Some(id) => Ok(Some(id)),
        None => c.query_opt(
            "SELECT issue_id FROM issue_aliases WHERE identifier = ?1",
            [&upper],
            |r| r.get(0),
        ),
    }
}

/// An issue row with its project's slug and its parent's identifier; a `WHERE` follows.
const ISSUE_ROWS: &str = "SELECT i.*, p.slug AS project_slug, par.identifier AS parent_identifier
     FROM issues i JOIN projects p ON p.id = i.project_id
     LEFT JOIN issues par ON par.id = i.parent_id";

/// An issue from a row of [`ISSUE_ROWS`], without its labels and dependencies.
fn issue_from_row(r: &Row) -> Result<Issue> {
    let status: String = r.get("status")?;
    Ok(Issue {
        id: r.get("id")?,
        identifier: r.get("identifier")?,
        project_id: r.get("project_id")?,
        project_slug: r.get("project_slug")?,
        title: r.get("title")?,
        description: r.get("description")?,
        status: Status::parse(&status).unwrap_or(Status::Todo),
        priority: r.get("priority")?,
        labels: Vec::new(),
        depends_on: Vec::new(),
        parent: r.get("parent_identifier")?,
        progress: r.get("progress")?,
        assignee: r.get("assignee")?,
        estimate_hours: r.get("estimate_hours")?,
        blocked_reason: r.get("blocked_reason")?,
        size: r.get("size")?,
        created_by: r.get("created_by")?,
        updated_by: r.get("updated_by")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

/// Fill in the labels (by label) and dependencies (by their `seq`) of `issues`: two
/// statements, whatever their number.
fn attach_relations(c: &Conn<'_>, issues: &mut [Issue]) -> Result<()> {
    if issues.is_empty() {
        return Ok(());
    }
    let at: HashMap<String, usize> = issues
        .iter()
        .enumerate()
        .map(|(n, i)| (i.id.clone(), n))
        .collect();
    let ids = serde_json::to_string(&issues.iter().map(|i| &i.id).collect::<Vec<_>>())?;
    let among = c.dialect().json_elements("?1", false);
    // `(issue id, value)` pairs of the listed issues, in the statement's order.
    let pairs = |sql: String| {
        c.query_map(&sql, [&ids], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
    };
    for (id, label) in pairs(format!(
        "SELECT issue_id, label FROM issue_labels WHERE issue_id IN ({among}) ORDER BY label"
    ))? {
        issues[at[&id]].labels.push(label);
    }
    for (id, identifier) in pairs(format!(
        "SELECT x.issue_id, d.identifier FROM issue_dependencies x
         JOIN issues d ON d.id = x.depends_on_id
         WHERE x.issue_id IN ({among}) ORDER BY d.seq"
    ))? {
        issues[at[&id]].depends_on.push(identifier);
    }
    Ok(())
}

/// Load a whole issue by id.
pub(crate) fn load_issue(c: &Conn<'_>, id: &str) -> Result<Option<Issue>> {
    let Some(mut issue) = c.query_opt(
        &format!("{ISSUE_ROWS} WHERE i.id = ?1"),
        [id],
        issue_from_row,
    )?
    else {
        return Ok(None);
    };
    attach_relations(c, std::slice::from_mut(&mut issue))?;
    Ok(Some(issue))
}

/// Insert an issue inside an open write transaction; returns its id. Shared by the CLI,
/// `create_issue`, `create_subtask`, `task_create` and `move_issue`.
pub(crate) fn insert_issue(c: &Conn<'_>, new: &NewIssue) -> Result<String> {
    let mut errors = Vec::new();
    check_len(&mut errors, "title", new.title.trim(), 1, limits::TITLE_MAX);
    if let Some(d) = &new.description {
        check_len(&mut errors, "description", d, 0, limits::DESCRIPTION_MAX);
    }
    if let Some(p) = new.priority
        && !(1..=limits::PRIORITY_MAX).contains(&p)
    {
        errors.push(FieldError::new(
            "priority",
            format!("must be 1 (urgent) to {} (low)", limits::PRIORITY_MAX),
        ));
    }
    if new.depends_on.len() > limits::DEPENDS_ON_MAX {
        errors.push(FieldError::new(
            "depends_on",
            format!("at most {} issues", limits::DEPENDS_ON_MAX),
        ));
    }
    validate_labels(&mut errors, "labels", &new.labels);
    for (i, l) in new.labels.iter().enumerate() {
        if let Err(e) = crate::text::exact(&format!("labels[{i}]"), l) {
            errors.push(e);
        }
    }
    let title = crate::text::prose("title", &new.title).unwrap_or_else(|e| {
        errors.push(e);
        String::new()
    });
    let description = crate::text::prose_opt("description", new.description.as_deref())
        .unwrap_or_else(|e| {
            errors.push(e);
            None
        });
    if !errors.is_empty() {
        return Err(Error::InvalidInput(errors));
    }
    let project = find_project(c, &new.project)?
        .ok_or_else(|| Error::ProjectNotFound(new.project.clone()))?;
    let parent_id = match &new.parent {
        Some(p) => Some(resolve_issue_id(c, p)?.ok_or_else(|| Error::not_found("issue", p))?),
        None => None,
    };
    let mut dep_ids = Vec::new();
    for (i, d) in new.depends_on.iter().enumerate() {
        match resolve_issue_id(c, d)? {
            Some(id) => dep_ids.push(id),
            None => {
                return Err(Error::invalid(
                    format!("depends_on[{i}]"),
                    format!("no issue {d}"),
                ));
            }
        }
    }
    let (seq, identifier) = allocate_identifier(c, &project)?;
    let id = new_id("iss");
    let now = now_iso();
    let by = new.created_by.clone().unwrap_or_else(|| "cli".to_string());
    c.execute(
        "INSERT INTO issues (id, project_id, seq, identifier, title, description, status, priority,
                             parent_id, assignee, estimate_hours, created_by, updated_by, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?13, ?13)",
        params![
            id,
            project.id,
            seq,
            identifier,
            title.trim(),
            description.unwrap_or_default(),
            new.status.unwrap_or(Status::Todo).as_str(),
            new.priority.unwrap_or(3),
            parent_id,
            new.assignee.clone().unwrap_or_else(|| "unassigned".into()),
            new.estimate_hours,
            by,
            now,
        ],
    )?;
    for label in &new.labels {
        c.execute(
            "INSERT INTO issue_labels(issue_id, label) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![id, label.trim()],
        )?;
    }
    for dep in dep_ids {
        c.execute(
            "INSERT INTO issue_dependencies(issue_id, depends_on_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![id, dep],
        )?;
    }
    Ok(id)
}

fn validate_project(new: &NewProject) -> Result<String> {
    let mut errors = Vec::new();
    let slug_ok = !new.slug.is_empty()
        && new.slug.len() <= limits::SLUG_MAX
        && new
            .slug
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && new
            .slug
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !slug_ok {
        errors.push(FieldError::new(
            "slug",
            format!(
                "1-{} characters of a-z, 0-9 and '-', starting with a letter or digit",
                limits::SLUG_MAX
            ),
        ));
    }
    check_len(&mut errors, "name", new.name.trim(), 1, limits::NAME_MAX);
    let prefix = new
        .prefix
        .clone()
        .unwrap_or_else(|| new.slug.to_ascii_uppercase().replace('-', ""));
    let prefix_ok = !prefix.is_empty()
        && prefix.len() <= limits::PREFIX_MAX
        && prefix
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_uppercase())
        && prefix
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    if !prefix_ok {
        errors.push(FieldError::new(
            "prefix",
            format!(
                "1-{} characters of A-Z and 0-9, starting with a letter (got {prefix:?})",
                limits::PREFIX_MAX
            ),
        ));
    }
    if let Some(p) = &new.path
        && (p.len() > limits::PATH_MAX
            || !std::path::Path::new(p).is_absolute()
            || p.contains('\0'))
    {
        errors.push(FieldError::new("path", "must be an absolute path"));
    }
    if errors.is_empty() {
        Ok(prefix)
    } else {
        Err(Error::InvalidInput(errors))
    }
}

/// Create a project. Its issues are numbered `PREFIX-1`, `PREFIX-2`, ...
pub(crate) fn create_project(store: &Store, new: &NewProject) -> Result<Project> {
    let prefix = validate_project(new)?;
    let path = match &new.path {
        Some(p) => Some(
            std::fs::canonicalize(p)
                .map_err(|_| Error::invalid("path", format!("{p} does not exist")))?
                .to_string_lossy()
                .into_owned(),
        ),
        None => None,
    };
    store.write(|tx| {
        let taken: Option<String> = tx.query_opt(
            "SELECT slug FROM projects WHERE slug = ?1 OR prefix = ?2",
            params![new.slug, prefix],
            |r| r.get(0),
        )?;
        if let Some(slug) = taken {
            return Err(Error::Conflict {
                message: format!(
                    "project slug {:?} or prefix {prefix:?} is already used by project {slug:?}",
                    new.slug
                ),
                existing_id: Some(slug),
            });
        }
        let now = now_iso();
        let id = new_id("proj");
        tx.execute(
            "INSERT INTO projects(id, slug, name, prefix, path, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
            params![id, new.slug, new.name.trim(), prefix, path, now],
        )?;
        find_project(tx, &id)?.ok_or_else(|| Error::Internal("project vanished".into()))
    })
}

/// A project by id or slug.
pub(crate) fn project(store: &Store, reference: &str) -> Result<Project> {
    store
        .read(|c| find_project(c, reference))?
        .ok_or_else(|| Error::ProjectNotFound(reference.to_string()))
}

/// Every project, by slug.
pub(crate) fn projects(store: &Store) -> Result<Vec<Project>> {
    store.read(|c| {
        let mut stmt = c.prepare("SELECT * FROM projects ORDER BY slug")?;
        let rows = stmt
            .query_map([], project_from_row)?
            .collect::<crate::error::Result<_>>()?;
        Ok(rows)
    })
}

/// Create an issue; returns it with its new identifier.
pub(crate) fn create_issue(store: &Store, new: &NewIssue) -> Result<Issue> {
    store.write(|tx| {
        let id = insert_issue(tx, new)?;
        load_issue(tx, &id)?.ok_or_else(|| Error::Internal("issue vanished".into()))
    })
}

/// An issue by id or identifier.
pub(crate) fn issue(store: &Store, reference: &str) -> Result<Issue> {
    store.snapshot(|c| {
        let id =
            resolve_issue_id(c, reference)?.ok_or_else(|| Error::not_found("issue", reference))?;
        load_issue(c, &id)?.ok_or_else(|| Error::not_found("issue", reference))
    })
}

/// Issues matching `filter`, most urgent first, then by number.
pub(crate) fn list_issues(store: &Store, filter: &IssueFilter) -> Result<Vec<Issue>> {
    // One snapshot: the issues and their relations as of one moment, in three
    // statements however many issues are listed.
    store.snapshot(|c| {
        let project_id = match &filter.project {
            Some(p) => Some(
                find_project(c, p)?
                    .ok_or_else(|| Error::ProjectNotFound(p.clone()))?
                    .id,
            ),
            None => None,
        };
        let statuses: Vec<&str> = filter.statuses.iter().map(|s| s.as_str()).collect();
        let statuses_json = serde_json::to_string(&statuses)?;
        let limit = i64::try_from(filter.limit.count()).unwrap_or(i64::MAX);
        let mut issues = c.query_map(
            &format!(
                "{ISSUE_ROWS}
                 WHERE (CAST(?1 AS TEXT) IS NULL OR i.project_id = ?1)
                   AND (?2 = '[]' OR i.status IN ({}))
                   AND (CAST(?3 AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM issue_labels l
                                              WHERE l.issue_id = i.id AND l.label = ?3))
                 ORDER BY i.priority, i.project_id, i.seq
                 LIMIT ?4",
                c.dialect().json_elements("?2", false)
            ),
            params![project_id, statuses_json, filter.label, limit],
            issue_from_row,
        )?;
        attach_relations(c, &mut issues)?;
        Ok(issues)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cairn() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let c = Store::open(&dir.path().join("c.db")).unwrap();
        (dir, c)
    }

    #[test]
    fn identifiers_count_up_per_project() {
        let (_d, c) = cairn();
        let p = create_project(
            &c,
            &NewProject {
                slug: "web-app".into(),
                name: "Web".into(),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(p.prefix, "WEBAPP");
        for n in 1..=3 {
            let i = create_issue(
                &c,
                &NewIssue {
                    project: "web-app".into(),
                    title: format!("issue {n}"),
                    labels: vec!["x".into()],
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!(i.identifier, format!("WEBAPP-{n}"));
            assert_eq!(i.status, Status::Todo);
            assert_eq!(i.labels, vec!["x"]);
        }
        assert_eq!(issue(&c, "webapp-2").unwrap().title, "issue 2");
    }

    #[test]
    fn bad_project_input_lists_every_field() {
        let (_d, c) = cairn();
        let err = create_project(
            &c,
            &NewProject {
                slug: "Bad Slug".into(),
                name: "".into(),
                prefix: Some("1x".into()),
                path: Some("relative".into()),
            },
        )
        .unwrap_err();
        let Error::InvalidInput(fields) = err else {
            panic!("expected invalid input")
        };
        let names: Vec<_> = fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(names, ["slug", "name", "prefix", "path"]);
    }

    #[test]
    fn duplicate_slug_is_a_conflict() {
        let (_d, c) = cairn();
        let np = NewProject {
            slug: "a".into(),
            name: "A".into(),
            ..Default::default()
        };
        create_project(&c, &np).unwrap();
        assert_eq!(
            create_project(&c, &np).unwrap_err().kind(),
            crate::error::ErrorKind::Conflict
        );
    }

    /// Create project `p`.
    fn project_p(c: &Store) {
        create_project(
            c,
            &NewProject {
                slug: "p".into(),
                name: "P".into(),
                ..Default::default()
            },
        )
        .unwrap();
    }

    #[test]
    fn list_filters_by_status_and_label() {
        let (_d, c) = cairn();
        project_p(&c);
        for (t, l, s) in [("a", "x", Status::Todo), ("b", "y", Status::Backlog)] {
            create_issue(
                &c,
                &NewIssue {
                    project: "p".into(),
                    title: t.into(),
                    labels: vec![l.into()],
                    status: Some(s),
                    ..Default::default()
                },
            )
            .unwrap();
        }
        let f = |statuses: Vec<Status>, label: Option<&str>| {
            list_issues(
                &c,
                &IssueFilter {
                    project: Some("p".into()),
                    statuses,
                    label: label.map(String::from),
                    limit: Limit::All,
                },
            )
            .unwrap()
            .into_iter()
            .map(|i| i.title)
            .collect::<Vec<_>>()
        };
        assert_eq!(f(vec![], None), ["a", "b"]);
        assert_eq!(f(vec![Status::Backlog], None), ["b"]);
        assert_eq!(f(vec![], Some("x")), ["a"]);
    }

    /// A list reads every issue's labels and dependencies in one statement each; each
    /// issue gets its own, labels by label and dependencies in creation order, and a
    /// listed issue is the issue [`issue`] loads alone.
    #[test]
    fn listed_issues_carry_their_own_labels_and_dependencies() {
        let (_d, c) = cairn();
        project_p(&c);
        let new = |title: &str, labels: &[&str], depends_on: &[&str]| {
            create_issue(
                &c,
                &NewIssue {
                    project: "p".into(),
                    title: title.into(),
                    labels: labels.iter().map(|l| l.to_string()).collect(),
                    depends_on: depends_on.iter().map(|d| d.to_string()).collect(),
                    ..Default::default()
                },
            )
            .unwrap()
            .identifier
        };
        let a = new("a", &["zeta", "alpha"], &[]);
        let b = new("b", &[], &[]);
        let c3 = new("c", &["mid"], &[&b, &a]);
        let d = new("d", &["alpha", "mid", "beta"], &[&c3]);
        let listed = list_issues(&c, &IssueFilter::default()).unwrap();
        let got: Vec<(&str, Vec<&str>, Vec<&str>)> = listed
            .iter()
            .map(|i| {
                (
                    i.title.as_str(),
                    i.labels.iter().map(String::as_str).collect(),
                    i.depends_on.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a", vec!["alpha", "zeta"], vec![]),
                ("b", vec![], vec![]),
                ("c", vec!["mid"], vec![a.as_str(), b.as_str()]),
                ("d", vec!["alpha", "beta", "mid"], vec![c3.as_str()]),
            ]
        );
        for one in &listed {
            let alone = issue(&c, &one.identifier).unwrap();
            assert_eq!(
                serde_json::to_value(one).unwrap(),
                serde_json::to_value(&alone).unwrap()
            );
        }
        assert_eq!(issue(&c, &d).unwrap().depends_on, [c3]);
    }

    /// An agent that names no limit gets the default page (`list_issues` passes
    /// `Limit::or_default(None)`); the CLI lists everything (`Limit::All`).
    #[test]
    fn the_default_limit_is_the_domains_and_all_lists_everything() {
        let (_d, c) = cairn();
        project_p(&c);
        let total = limits::LIST_LIMIT_DEFAULT + 1;
        for i in 0..total {
            create_issue(
                &c,
                &NewIssue {
                    project: "p".into(),
                    title: format!("issue {i}"),
                    ..Default::default()
                },
            )
            .unwrap();
        }
        let count = |limit: Limit| {
            list_issues(
                &c,
                &IssueFilter {
                    project: Some("p".into()),
                    limit,
                    ..Default::default()
                },
            )
            .unwrap()
            .len()
        };
        assert_eq!(Limit::or_default(None), Limit::Default);
        assert_eq!(Limit::or_default(Some(3)), Limit::At(3));
        assert_eq!(count(Limit::or_default(None)), limits::LIST_LIMIT_DEFAULT);
        assert_eq!(count(Limit::All), total);
        assert_eq!(count(Limit::default()), total);
        assert_eq!(count(Limit::or_default(Some(3))), 3);
    }
}
