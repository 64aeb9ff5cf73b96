//! Research coverage (`record_coverage`, one row per project + file + concept, the
//! latest observation wins) and test health (`record_test_health`, one row per agent
//! run, with the trend against the previous record of the project).

use crate::store::db::params;
use serde::Serialize;

use crate::base::now_iso;
use crate::error::{Error, FieldError, Result};
use crate::store::Store;

/// Limits on coverage fields.
pub(crate) mod limits {
    pub(crate) const FILE_PATH_MAX: usize = 1024;
    pub(crate) const CONCEPT_MAX: usize = 100;
    pub(crate) const NOTES_MAX: usize = 2000;
    /// Largest test count, tests added and tests removed of one report.
    pub(crate) const TEST_COUNT_MAX: u64 = 10_000_000;
    /// Largest number of test files changed in one report.
    pub(crate) const TEST_FILES_CHANGED_MAX: u64 = 1_000_000;
    /// Longest reported test run, in milliseconds (a day).
    pub(crate) const EXECUTION_TIME_MS_MAX: u64 = 86_400_000;
}

/// What `record_coverage` records.
#[derive(Debug, Clone)]
pub struct NewCoverage {
    pub file_path: String,
    pub concept: String,
    /// `covered` or `has_issues`.
    pub status: String,
    /// The ticket created for `has_issues` (id or identifier; required then).
    pub ticket_id: Option<String>,
    pub notes: Option<String>,
}

/// A stored coverage row.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Coverage {
    pub(crate) file_path: String,
    pub(crate) concept: String,
    pub(crate) status: String,
    /// Identifier of the ticket created, for `has_issues`.
    pub(crate) ticket: Option<String>,
    pub(crate) notes: Option<String>,
    /// Whether an earlier observation of this file and concept was replaced.
    pub(crate) replaced: bool,
    /// Coverage rows of the project after this call.
    pub(crate) project_total: u64,
    pub(crate) updated_at: String,
}

/// Check a repository-relative path: not empty, not absolute, no `..`, no NUL, no
/// backslash, within the length limit.
pub(crate) fn check_relative_path(field: &str, p: &str, max: usize) -> Option<FieldError> {
    let bad = p.trim().is_empty()
        || p.len() > max
        || p.contains('\0')
        || p.contains('\\')
        || p.starts_with('/')
        || std::path::Path::new(p).is_absolute()
        || p.split('/').any(|c| c == "..");
    bad.then(|| {
        FieldError::new(
            field,
            format!(
                "must be a relative path inside the repository (1-{max} bytes, no '..', \
                 no leading '/', no backslash or NUL)"
            ),
        )
    })
}

/// What `record_test_health` records.
#[derive(Debug, Clone, Default)]
pub struct NewTestHealth {
    pub test_count: u64,
    pub test_files_changed: Option<u64>,
    pub tests_added: Option<u64>,
    pub tests_removed: Option<u64>,
    pub execution_time_ms: Option<u64>,
}

/// A stored test-health record with its trend.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TestHealth {
    pub(crate) id: i64,
    pub(crate) issue: String,
    pub(crate) test_count: u64,
    pub(crate) test_files_changed: Option<u64>,
    pub(crate) tests_added: Option<u64>,
    pub(crate) tests_removed: Option<u64>,
    pub(crate) execution_time_ms: Option<u64>,
    /// The project's previous recorded test count, if any.
    pub(crate) previous_test_count: Option<u64>,
    /// `test_count - previous_test_count`.
    pub(crate) delta: Option<i64>,
    pub(crate) created_at: String,
}

/// Record coverage of a file and concept in the project of `issue` (id or identifier).
pub(crate) fn record_coverage(
    store: &Store,
    issue: &str,
    new: &NewCoverage,
    actor: &str,
) -> Result<Coverage> {
    let concept = check_coverage(new)?;
    store.write(|tx| {
        let (issue_id, _) = super::resolve(tx, issue)?;
        let project_id: String = tx.query_row(
            "SELECT project_id FROM issues WHERE id = ?1",
            [&issue_id],
            |r| r.get(0),
        )?;
        let ticket = match &new.ticket_id {
            Some(t) => Some(
                super::resolve(tx, t)
                    .map_err(|_| {
                        Error::invalid("ticket_id", format!("no issue {t}; create it first"))
                    })?
                    .1,
            ),
            None => None,
        };
        let replaced = tx
            .query_opt(
                "SELECT 1 FROM coverage WHERE project_id = ?1 AND file_path = ?2 AND concept = ?3",
                params![project_id, new.file_path, concept],
                |r| r.get::<_, i64>(0),
            )?
            .is_some();
        let now = now_iso();
        tx.execute(
            "INSERT INTO coverage (project_id, file_path, concept, status, ticket_id, notes,
                 issue_id, actor, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT(project_id, file_path, concept) DO UPDATE SET status = ?4,
                 ticket_id = ?5, notes = ?6, issue_id = ?7, actor = ?8, updated_at = ?9",
            params![
                project_id,
                new.file_path,
                concept,
                new.status,
                ticket,
                new.notes,
                issue_id,
                actor,
                now
            ],
        )?;
        let project_total: u64 = tx.query_row(
            "SELECT count(*) FROM coverage WHERE project_id = ?1",
            [&project_id],
            |r| r.get(0),
        )?;
        Ok(Coverage {
            file_path: new.file_path.clone(),
            concept: concept.to_string(),
            status: new.status.clone(),
            ticket,
            notes: new.notes.clone(),
            replaced,
            project_total,
            updated_at: now,
        })
    })
}

/// Check a coverage record; returns its concept trimmed.
fn check_coverage(new: &NewCoverage) -> Result<&str> {
    let mut errors = Vec::new();
    errors.extend(check_relative_path(
        "file_path",
        &new.file_path,
        limits::FILE_PATH_MAX,
    ));
    // The spec's concepts are free text ("type safety", error_handling): any
    // words, no control characters, trimmed.
    let concept = new.concept.trim();
    let concept_ok = !concept.is_empty()
        && concept.chars().count() <= limits::CONCEPT_MAX
        && !concept.chars().any(char::is_control);
    if !concept_ok {
        errors.push(FieldError::new(
            "concept",
            format!(
                "1-{} characters of text without control characters (e.g. error_handling, \
                 type safety)",
                limits::CONCEPT_MAX
            ),
        ));
    }
    // ticket_id is optional, as in the spec; when given it must name an issue.
    if !matches!(new.status.as_str(), "covered" | "has_issues") {
        errors.push(FieldError::new("status", "must be covered or has_issues"));
    }
    if new
        .notes
        .as_ref()
        .is_some_and(|n| n.chars().count() > limits::NOTES_MAX)
    {
        errors.push(FieldError::new(
            "notes",
            format!("at most {} characters", limits::NOTES_MAX),
        ));
    }
    if !errors.is_empty() {
        return Err(Error::InvalidInput(errors));
    }
    Ok(concept)
}

/// Record the test health of a run on `issue` (id or identifier).
pub(crate) fn record_test_health(
    store: &Store,
    issue: &str,
    new: &NewTestHealth,
    actor: &str,
) -> Result<TestHealth> {
    store.write(|tx| {
        let (issue_id, identifier) = super::resolve(tx, issue)?;
        let previous: Option<u64> = tx.query_opt(
            "SELECT t.test_count FROM test_health t JOIN issues i ON i.id = t.issue_id
                 WHERE i.project_id = (SELECT project_id FROM issues WHERE id = ?1)
                 ORDER BY t.id DESC LIMIT 1",
            [&issue_id],
            |r| r.get(0),
        )?;
        let now = now_iso();
        let id = tx.query_row(
            "INSERT INTO test_health (issue_id, test_count, test_files_changed, tests_added,
                 tests_removed, execution_time_ms, actor, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id",
            params![
                issue_id,
                new.test_count,
                new.test_files_changed,
                new.tests_added,
                new.tests_removed,
                new.execution_time_ms,
                actor,
                now
            ],
            |r| r.get::<_, i64>(0),
        )?;
        Ok(TestHealth {
            id,
            issue: identifier,
            test_count: new.test_count,
            test_files_changed: new.test_files_changed,
            tests_added: new.tests_added,
            tests_removed: new.tests_removed,
            execution_time_ms: new.execution_time_ms,
            previous_test_count: previous,
            delta: previous.map(|p| new.test_count as i64 - p as i64),
            created_at: now,
        })
    })
}
