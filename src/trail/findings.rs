//! Findings and comments: the views of trail records that tools and the CLI show, and
//! the orchestrator's `processed` state kept beside (never inside) the records.

use crate::store::db::{Conn, params};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::base::now_iso;
use crate::error::{Error, FieldError, Result};
use crate::store::Store;

use super::chain::{FindingCategory, RecordKind, TrailRecord, append_record, record_from_row};

/// Limits on finding and comment fields.
pub(crate) mod limits {
    pub(crate) const SUMMARY_MAX: usize = 500;
    pub(crate) const DETAILS_MAX: usize = 20_000;
    pub(crate) const FILES_MAX: usize = 100;
    pub(crate) const FILE_PATH_MAX: usize = 1024;
    pub(crate) const COMMENT_MAX: usize = 20_000;
    pub(crate) const REASON_MAX: usize = 2_000;
}

/// Keys of a finding view that a body cannot shadow.
const RESERVED: [&str; 9] = [
    "id",
    "category",
    "summary",
    "position",
    "processed",
    "processed_at",
    "actor",
    "created_at",
    "hash",
];

/// A finding as tools show it: the record's own fields (`summary`, `details`, `files`;
/// for a phase claim or verdict the spec's PhaseCompletionFinding / PhaseVerdictFinding
/// fields) flattened beside its id, category and the derived `processed` flag.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Finding {
    /// `f-…`, `pc-…` (phase claim) or `pv-…` (phase verdict).
    pub id: String,
    pub(crate) category: String,
    /// Short summary; a verdict's is `<verdict> <phase>: <reason>`.
    pub(crate) summary: String,
    /// Position in the issue's trail chain.
    pub(crate) position: u64,
    /// The category's own fields.
    #[serde(flatten)]
    pub(crate) fields: Map<String, Value>,
    /// Whether the orchestrator has processed this finding (kept outside the record).
    pub(crate) processed: bool,
    pub(crate) processed_at: Option<String>,
    pub(crate) actor: String,
    pub(crate) created_at: String,
    pub(crate) hash: String,
}

impl Finding {
    /// The view of a finding record, with its processing state.
    pub(crate) fn from_record(rec: TrailRecord, processed_at: Option<String>) -> Finding {
        let mut fields = match rec.body {
            Value::Object(m) => m,
            other => Map::from_iter([("body".to_string(), other)]),
        };
        let text = |m: &Map<String, Value>, k: &str| {
            m.get(k).and_then(Value::as_str).unwrap_or("").to_string()
        };
        let summary = match fields.get("summary").and_then(Value::as_str) {
            Some(s) => s.to_string(),
            None => format!(
                "{} {}: {}",
                text(&fields, "verdict"),
                text(&fields, "phase"),
                text(&fields, "reason")
            ),
        };
        for k in RESERVED {
            fields.remove(k);
        }
        Finding {
            id: rec.id,
            category: rec.category.unwrap_or_default(),
            summary,
            position: rec.position,
            fields,
            processed: processed_at.is_some(),
            processed_at,
            actor: rec.actor,
            created_at: rec.created_at,
            hash: rec.hash,
        }
    }

    /// A string field of the finding's own fields.
    pub(crate) fn field_str(&self, key: &str) -> Option<&str> {
        self.fields.get(key).and_then(Value::as_str)
    }
}

/// A comment on an issue.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Comment {
    pub(crate) id: String,
    pub(crate) position: u64,
    pub(crate) content: String,
    pub(crate) actor: String,
    pub(crate) created_at: String,
    pub(crate) hash: String,
}

impl Comment {
    fn from_record(rec: TrailRecord) -> Comment {
        Comment {
            content: rec
                .body
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            id: rec.id,
            position: rec.position,
            actor: rec.actor,
            created_at: rec.created_at,
            hash: rec.hash,
        }
    }
}

/// What `add_finding` records.
#[derive(Debug, Clone)]
pub struct NewFinding {
    /// One of test_result, code_pattern, architecture, bug, gap (phase claims and
    /// verdicts have their own operations and are refused here).
    pub category: FindingCategory,
    pub summary: String,
    pub details: Option<String>,
    pub files: Vec<String>,
}

fn check_text(errors: &mut Vec<FieldError>, field: &str, value: &str, max: usize) {
    let n = value.chars().count();
    if value.trim().is_empty() {
        errors.push(FieldError::new(field, "must not be empty"));
    } else if n > max {
        errors.push(FieldError::new(
            field,
            format!("must be at most {max} characters (got {n})"),
        ));
    }
}

fn validate_finding(f: &NewFinding) -> Result<FindingCategory> {
    let mut errors = Vec::new();
    let category = Some(f.category).filter(|c| {
        !matches!(
            c,
            FindingCategory::PhaseCompletion | FindingCategory::PhaseVerdict
        )
    });
    if category.is_none() {
        errors.push(FieldError::new(
            "category",
            "must be one of: test_result, code_pattern, architecture, bug, gap \
             (phase claims and verdicts have their own tools)",
        ));
    }
    check_text(&mut errors, "summary", &f.summary, limits::SUMMARY_MAX);
    if let Some(d) = &f.details
        && d.chars().count() > limits::DETAILS_MAX
    {
        errors.push(FieldError::new(
            "details",
            format!("must be at most {} characters", limits::DETAILS_MAX),
        ));
    }
    if f.files.len() > limits::FILES_MAX {
        errors.push(FieldError::new(
            "files",
            format!("at most {} files", limits::FILES_MAX),
        ));
    }
    for (i, p) in f.files.iter().enumerate() {
        if p.trim().is_empty() || p.len() > limits::FILE_PATH_MAX || p.contains('\0') {
            errors.push(FieldError::new(
                format!("files[{i}]"),
                format!(
                    "a file path is 1-{} bytes without NUL",
                    limits::FILE_PATH_MAX
                ),
            ));
        } else if let Err(e) = crate::text::exact(&format!("files[{i}]"), p) {
            errors.push(e);
        }
    }
    match (category, errors.is_empty()) {
        (Some(c), true) => Ok(c),
        _ => Err(Error::InvalidInput(errors)),
    }
}

/// Append a comment inside the caller's transaction (used by `add_comment`, rejections,
/// status reasons of other modules).
pub(crate) fn add_comment_in(
    tx: &Conn<'_>,
    issue_id: &str,
    content: &str,
    actor: &str,
) -> Result<Comment> {
    let mut errors = Vec::new();
    check_text(&mut errors, "content", content, limits::COMMENT_MAX);
    if !errors.is_empty() {
        return Err(Error::InvalidInput(errors));
    }
    let rec = append_record(
        tx,
        issue_id,
        RecordKind::Comment,
        json!({ "content": content }),
        actor,
    )?;
    Ok(Comment::from_record(rec))
}

/// Append a finding of any category inside the caller's transaction and return its view.
/// `body` holds the category's own fields (for a claim: the spec's PhaseCompletionFinding
/// fields but `id`, `category`, `processed` and `created_at`, which the record supplies).
pub(crate) fn append_finding(
    tx: &Conn<'_>,
    issue_id: &str,
    category: FindingCategory,
    body: Value,
    actor: &str,
) -> Result<Finding> {
    let rec = append_record(tx, issue_id, RecordKind::Finding(category), body, actor)?;
    Ok(Finding::from_record(rec, None))
}

const FINDINGS_SQL: &str = "SELECT r.*, p.processed_at FROM trail_records r
     LEFT JOIN finding_processing p ON p.finding_id = r.id
     WHERE r.issue_id = ?1 AND r.kind = 'finding'";

fn finding_row(r: &crate::store::db::Row) -> crate::error::Result<Finding> {
    Ok(Finding::from_record(
        record_from_row(r)?,
        r.get("processed_at")?,
    ))
}

/// Every finding of an issue, oldest first.
pub(crate) fn findings_in(c: &Conn<'_>, issue_id: &str) -> Result<Vec<Finding>> {
    let mut stmt = c.prepare(&format!("{FINDINGS_SQL} ORDER BY r.position"))?;
    let rows = stmt
        .query_map([issue_id], finding_row)?
        .collect::<crate::error::Result<_>>()?;
    Ok(rows)
}

/// The last `n` findings of an issue, newest first.
pub(crate) fn recent_findings_in(c: &Conn<'_>, issue_id: &str, n: usize) -> Result<Vec<Finding>> {
    let mut stmt = c.prepare(&format!("{FINDINGS_SQL} ORDER BY r.position DESC LIMIT ?2"))?;
    let rows = stmt
        .query_map(params![issue_id, n as i64], finding_row)?
        .collect::<crate::error::Result<_>>()?;
    Ok(rows)
}

/// The latest phase-completion claim (`pc-`) of `phase` on an issue, if any.
pub(crate) fn latest_phase_claim_in(
    c: &Conn<'_>,
    issue_id: &str,
    phase: &str,
) -> Result<Option<Finding>> {
    let mut stmt = c.prepare(&format!(
        "{FINDINGS_SQL} AND r.category = 'phase_completion'
           AND {} = ?2
         ORDER BY r.position DESC LIMIT 1",
        c.dialect().json_text("r.body", "completed_phase")
    ))?;
    stmt.query_opt(params![issue_id, phase], finding_row)
}

/// Every comment of an issue, oldest first.
pub(crate) fn comments_in(c: &Conn<'_>, issue_id: &str) -> Result<Vec<Comment>> {
    let mut stmt = c.prepare(
        "SELECT * FROM trail_records WHERE issue_id = ?1 AND kind = 'comment' ORDER BY position",
    )?;
    let rows = stmt
        .query_map([issue_id], |r| record_from_row(r).map(Comment::from_record))?
        .collect::<crate::error::Result<_>>()?;
    Ok(rows)
}

/// Record a finding (`add_finding`) on an issue (id or identifier).
pub(crate) fn add_finding(
    store: &Store,
    issue: &str,
    new: &NewFinding,
    actor: &str,
) -> Result<Finding> {
    let category = validate_finding(new)?;
    let mut body = json!({ "summary": new.summary.trim(), "files": new.files });
    if let Some(d) = &new.details {
        body["details"] = json!(d);
    }
    store.write(|tx| {
        let (id, _) = super::resolve(tx, issue)?;
        append_finding(tx, &id, category, body, actor)
    })
}

/// Post a comment on an issue (id or identifier).
pub(crate) fn add_comment(
    store: &Store,
    issue: &str,
    content: &str,
    actor: &str,
) -> Result<Comment> {
    store.write(|tx| {
        let (id, _) = super::resolve(tx, issue)?;
        add_comment_in(tx, &id, content, actor)
    })
}

/// Every finding of an issue, oldest first, with its derived `processed` flag.
pub(crate) fn findings(store: &Store, issue: &str) -> Result<Vec<Finding>> {
    store.read(|c| {
        let (id, _) = super::resolve(c, issue)?;
        findings_in(c, &id)
    })
}

/// Mark a finding processed (the orchestrator's flag). Idempotent: marking twice
/// keeps the first time. The finding record itself is not touched.
pub(crate) fn mark_finding_processed(
    store: &Store,
    finding_id: &str,
    actor: &str,
) -> Result<Finding> {
    store.write(|tx| {
        let issue_id: String = tx
            .query_opt(
                "SELECT issue_id FROM trail_records WHERE id = ?1 AND kind = 'finding'",
                [finding_id],
                |r| r.get(0),
            )?
            .ok_or_else(|| Error::not_found("finding", finding_id))?;
        tx.execute(
            "INSERT INTO finding_processing(finding_id, processed_at, processed_by)
             VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
            params![finding_id, now_iso(), actor],
        )?;
        findings_in(tx, &issue_id)?
            .into_iter()
            .find(|f| f.id == finding_id)
            .ok_or_else(|| Error::not_found("finding", finding_id))
    })
}
