//! Thought records: one append-only, hash-chained decision log per task.
//!
//! Hashing follows the document to the byte: `hash = SHA-256(JSON.stringify({task_id,
//! type, content, previous_hash, recorded_at, recorded_by}))`, lower-case hex, over the
//! UTF-8 bytes of that text. [`hash_input`] writes the JSON the way ECMAScript's
//! `JSON.stringify` does: keys in exactly that order, no whitespace, `previous_hash`
//! `null` for the first record of a chain, and strings quoted per `QuoteJSONString`
//! (`\"`, `\\`, `\b \f \n \r \t`, other code points below U+0020 as `\u00xx` in
//! lower-case hex, everything else, U+2028/U+2029 and non-ASCII included, written as
//! is; Rust strings cannot hold the lone surrogates that JavaScript would escape).
//! That is also Python's `json.dumps(obj, separators=(",", ":"), ensure_ascii=False)`.
//!
//! The values hashed are the stored ones: `task_id` is the task's identifier when the
//! record was written (kept in `task_ref`), `recorded_at` the second-precision UTC stamp,
//! `recorded_by` the server's actor. `branch`, `commit_sha`, `tests_run`, `blockers` and
//! `metadata` are context stored beside the record and, as the document defines the
//! hash, not covered by it.

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::store::db::{Conn, params};
use serde::{Deserialize, Serialize};

use crate::base::{now_iso, sha256_hex};
use crate::error::{Error, Result};
use crate::store::Store;
use crate::trail::chain::{MalformedRow, loose_text};

use super::{resolve_task, task_identifier, thought_id};

/// Largest `metadata` object, serialized, in bytes.
pub(crate) const METADATA_MAX_BYTES: usize = 16 * 1024;

/// The kinds of thought the document names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ThoughtType {
    Reflection,
    Decision,
    Discovery,
    Risk,
    Blockers,
}

impl ThoughtType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ThoughtType::Reflection => "reflection",
            ThoughtType::Decision => "decision",
            ThoughtType::Discovery => "discovery",
            ThoughtType::Risk => "risk",
            ThoughtType::Blockers => "blockers",
        }
    }
}

/// The six hashed fields of a thought record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HashedFields<'a> {
    pub(crate) task_id: &'a str,
    pub(crate) kind: &'a str,
    pub(crate) content: &'a str,
    pub(crate) previous_hash: Option<&'a str>,
    pub(crate) recorded_at: &'a str,
    pub(crate) recorded_by: &'a str,
}

/// Append `s` as a JSON string exactly as ECMAScript's `JSON.stringify` writes it.
fn push_js_string(out: &mut String, s: &str) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0C}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The exact text that is hashed: `JSON.stringify` of the six fields, in order.
pub(crate) fn hash_input(f: &HashedFields<'_>) -> String {
    let mut s = String::with_capacity(f.content.len() + 256);
    s.push_str("{\"task_id\":");
    push_js_string(&mut s, f.task_id);
    s.push_str(",\"type\":");
    push_js_string(&mut s, f.kind);
    s.push_str(",\"content\":");
    push_js_string(&mut s, f.content);
    s.push_str(",\"previous_hash\":");
    match f.previous_hash {
        Some(h) => push_js_string(&mut s, h),
        None => s.push_str("null"),
    }
    s.push_str(",\"recorded_at\":");
    push_js_string(&mut s, f.recorded_at);
    s.push_str(",\"recorded_by\":");
    push_js_string(&mut s, f.recorded_by);
    s.push('}');
    s
}

/// SHA-256 (lower-case hex) of [`hash_input`].
pub(crate) fn thought_hash(f: &HashedFields<'_>) -> String {
    sha256_hex(hash_input(f))
}

/// A thought to append.
#[derive(Debug, Clone)]
pub struct NewThought {
    pub task: String,
    pub kind: ThoughtType,
    pub content: String,
    pub branch: Option<String>,
    pub commit_sha: Option<String>,
    pub tests_run: Vec<String>,
    pub blockers: Vec<String>,
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

/// What `thought_record` returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ThoughtRecorded {
    /// `Θ-{id}`.
    pub thought_id: String,
    pub(crate) task_id: String,
    #[serde(rename = "type")]
    pub(crate) kind: ThoughtType,
    /// SHA-256 of this record (hex).
    pub(crate) hash: String,
    /// The previous record's hash in this task's chain; null for the first.
    pub(crate) previous_hash: Option<String>,
    pub(crate) recorded_at: String,
    pub(crate) recorded_by: String,
    /// 1-based position in this task's chain.
    pub(crate) chain_position: i64,
}

/// One stored thought.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct Thought {
    pub(crate) thought_id: String,
    /// The task this record belongs to.
    pub(crate) task_id: String,
    #[serde(rename = "type")]
    pub(crate) kind: ThoughtType,
    pub(crate) content: String,
    pub(crate) hash: String,
    pub(crate) previous_hash: Option<String>,
    pub(crate) recorded_at: String,
    pub(crate) recorded_by: String,
    pub(crate) chain_position: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) branch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) commit_sha: Option<String>,
    pub(crate) tests_run: Vec<String>,
    pub(crate) blockers: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) metadata: Option<serde_json::Value>,
}

/// A stored thought with what verification needs.
pub(crate) struct StoredThought {
    pub(crate) task_ref: String,
    pub(crate) thought: Thought,
}

impl StoredThought {
    /// The hash recomputed from the stored fields.
    pub(crate) fn recomputed_hash(&self) -> String {
        let t = &self.thought;
        thought_hash(&HashedFields {
            task_id: &self.task_ref,
            kind: t.kind.as_str(),
            content: &t.content,
            previous_hash: t.previous_hash.as_deref(),
            recorded_at: &t.recorded_at,
            recorded_by: &t.recorded_by,
        })
    }
}

/// One failed check of a hash chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BrokenLink {
    /// 1-based position in the verified sequence (for one task's thoughts alone, the
    /// chain position).
    pub(crate) position: i64,
    /// The hash the chain requires here ("" where no hash is required).
    pub(crate) expected_hash: String,
    /// The hash found ("" where none was found).
    pub(crate) actual_hash: String,
    /// `content_hash_mismatch` (the stored hash is not the hash of the stored fields),
    /// `previous_hash_mismatch` (the link to the record before is wrong),
    /// `position_mismatch` (a gap or duplicate in a trail chain's positions),
    /// `head_mismatch` (the chain's recorded head is not its last record: records were
    /// removed from the end), or
    /// `frozen_leaf_mismatch` (a record differs from the leaf frozen by merkle_finalize),
    /// `malformed_record` (a stored row has a column of the wrong type, NULL or out of
    /// range; see `detail`), or
    /// `merkle_root_mismatch` (a finalized session's stored root is not the root of its
    /// frozen leaves or of its current records; position 0, `record_id` the session).
    pub(crate) reason: String,
    /// `thought` or `trail`.
    pub(crate) chain: String,
    pub(crate) task_id: String,
    /// The record (`Θ-N` or a trail record id); "" for missing records.
    pub(crate) record_id: String,
    /// The position within its own chain.
    pub(crate) chain_position: i64,
    /// For `malformed_record` and `merkle_root_mismatch`: what is wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) detail: Option<String>,
}

/// The outcome of checking one chain.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChainCheck {
    /// Records present.
    pub(crate) total: i64,
    /// Records (positions within the chain) that failed a check, plus missing ones.
    pub(crate) bad_positions: HashSet<i64>,
    /// Records the chain's head says exist but are gone.
    pub(crate) missing: i64,
    /// Problems, with `position` = the chain position (callers renumber).
    pub(crate) broken: Vec<BrokenLink>,
}

const THOUGHT_COLUMNS: &str = "t.id, t.task_ref, i.identifier, t.type, t.content, t.hash, \
     t.previous_hash, t.recorded_at, t.recorded_by, t.chain_position, t.branch, t.commit_sha, \
     t.tests_run, t.blockers, t.metadata";

fn thought_from_row(r: &crate::store::db::Row) -> crate::error::Result<StoredThought> {
    let kind: String = r.get(3)?;
    let kind = match kind.as_str() {
        "decision" => ThoughtType::Decision,
        "discovery" => ThoughtType::Discovery,
        "risk" => ThoughtType::Risk,
        "blockers" => ThoughtType::Blockers,
        _ => ThoughtType::Reflection,
    };
    let list = |s: String| serde_json::from_str::<Vec<String>>(&s).unwrap_or_default();
    let metadata: Option<String> = r.get(14)?;
    let id: i64 = r.get(0)?;
    Ok(StoredThought {
        task_ref: r.get(1)?,
        thought: Thought {
            thought_id: thought_id(id),
            task_id: r.get(2)?,
            kind,
            content: r.get(4)?,
            hash: r.get(5)?,
            previous_hash: r.get(6)?,
            recorded_at: r.get(7)?,
            recorded_by: r.get(8)?,
            chain_position: r.get(9)?,
            branch: r.get(10)?,
            commit_sha: r.get(11)?,
            tests_run: list(r.get(12)?),
            blockers: list(r.get(13)?),
            metadata: metadata.and_then(|m| serde_json::from_str(&m).ok()),
        },
    })
}

/// Every thought of one task, in chain order.
pub(crate) fn chain_of(c: &Conn<'_>, issue_id: &str) -> Result<Vec<StoredThought>> {
    let mut stmt = c.prepare(&format!(
        "SELECT {THOUGHT_COLUMNS} FROM thought_records t JOIN issues i ON i.id = t.issue_id
         WHERE t.issue_id = ?1 ORDER BY t.chain_position, t.id"
    ))?;
    let rows = stmt
        .query_map([issue_id], thought_from_row)?
        .collect::<crate::error::Result<_>>()?;
    Ok(rows)
}

/// Every thought row of one task for verification, in chain order (rows whose position
/// is not an integer last); a row that does not read is kept as a [`MalformedRow`].
pub(crate) fn chain_loose(
    c: &Conn<'_>,
    issue_id: &str,
) -> Result<Vec<std::result::Result<StoredThought, MalformedRow>>> {
    let mut stmt = c.prepare(&format!(
        "SELECT {THOUGHT_COLUMNS} FROM thought_records t JOIN issues i ON i.id = t.issue_id
         WHERE t.issue_id = ?1
         ORDER BY {}, t.id",
        c.dialect().loose_order("t.chain_position")
    ))?;
    let mut rows = stmt.query([issue_id])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(thought_from_row(r).map_err(|e| MalformedRow {
            id: thought_id(r.get::<_, i64>(0).unwrap_or(0)),
            hash: loose_text(r, "hash"),
            problem: e.to_string(),
        }));
    }
    Ok(out)
}

/// Check one task's thought chain: every stored hash against its fields, every link
/// against the record before, and the chain's head against its last record. A row
/// that does not read (wrong type, NULL, out of range) is reported as
/// `malformed_record` at its place.
pub(crate) fn check_chain(c: &Conn<'_>, issue_id: &str) -> Result<ChainCheck> {
    let chain = chain_loose(c, issue_id)?;
    let task_id = task_identifier(c, issue_id)?;
    let mut check = ChainCheck {
        total: chain.len() as i64,
        ..Default::default()
    };
    let mut previous: Option<&str> = None;
    let mut last = 0;
    for (i, row) in chain.iter().enumerate() {
        let (position, record_id) = match row {
            Ok(rec) => (rec.thought.chain_position, rec.thought.thought_id.clone()),
            Err(m) => (i as i64 + 1, m.id.clone()),
        };
        last = position;
        let mut fail = |expected: &str, actual: &str, reason: &str, detail: Option<String>| {
            check.bad_positions.insert(position);
            check.broken.push(BrokenLink {
                position,
                expected_hash: expected.to_string(),
                actual_hash: actual.to_string(),
                reason: reason.to_string(),
                chain: "thought".into(),
                task_id: task_id.clone(),
                record_id: record_id.clone(),
                chain_position: position,
                detail,
            });
        };
        let rec = match row {
            Ok(rec) => rec,
            Err(m) => {
                fail(
                    previous.unwrap_or(""),
                    &m.hash,
                    "malformed_record",
                    Some(m.problem.clone()),
                );
                previous = Some(&m.hash);
                continue;
            }
        };
        let t = &rec.thought;
        let recomputed = rec.recomputed_hash();
        if recomputed != t.hash {
            fail(&recomputed, &t.hash, "content_hash_mismatch", None);
        }
        if t.previous_hash.as_deref() != previous {
            fail(
                previous.unwrap_or(""),
                t.previous_hash.as_deref().unwrap_or(""),
                "previous_hash_mismatch",
                None,
            );
        }
        previous = Some(&t.hash);
    }
    let head: Option<(Option<i64>, String)> = c.query_opt(
        "SELECT chain_position, hash FROM thought_heads WHERE issue_id = ?1",
        [issue_id],
        |r| Ok((r.get::<_, i64>(0).ok(), loose_text(r, "hash"))),
    )?;
    if let Some((recorded, hash)) = head
        && (recorded != Some(last) || Some(hash.as_str()) != previous)
    {
        let position = recorded.unwrap_or(last);
        check.missing = (position - last).max(0);
        for p in (last + 1)..=position {
            check.bad_positions.insert(p);
        }
        check.broken.push(BrokenLink {
            position,
            expected_hash: hash,
            actual_hash: previous.unwrap_or("").to_string(),
            reason: "head_mismatch".into(),
            chain: "thought".into(),
            task_id,
            record_id: String::new(),
            chain_position: position,
            detail: recorded
                .is_none()
                .then(|| "the recorded head's position is not a count".to_string()),
        });
    }
    Ok(check)
}

/// Filters of `thought_record_list`.
#[derive(Debug, Clone, Default)]
pub(crate) struct ThoughtQuery {
    pub(crate) task: Option<String>,
    pub(crate) session: Option<String>,
    pub(crate) kind: Option<ThoughtType>,
    /// Page size; default [`super::limits::THOUGHT_LIST_LIMIT_DEFAULT`].
    pub(crate) limit: Option<usize>,
    pub(crate) verify_chain: bool,
}

/// What `thought_record_list` returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct ThoughtList {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) session_id: Option<String>,
    /// Thoughts matching the filters (the list holds the first `limit` of them).
    pub(crate) thought_count: usize,
    /// In chain order (by task, then chain position).
    pub(crate) thoughts: Vec<Thought>,
    /// With verify_chain: whether every link of the chains involved holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) chain_valid: Option<bool>,
    /// With verify_chain: chain positions of broken links.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) invalid_links: Option<Vec<i64>>,
    /// With verify_chain: the broken records' ids (unambiguous across tasks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) invalid_thoughts: Option<Vec<String>>,
}

/// `new` with its agent text cleaned by [`crate::text`]; branch and commit are names
/// and refused if they hide characters.
fn clean_thought(new: &NewThought) -> Result<NewThought> {
    use crate::text;
    let mut errors = Vec::new();
    for (field, v) in [("branch", &new.branch), ("commit_sha", &new.commit_sha)] {
        if let Some(Err(e)) = v.as_deref().map(|v| text::exact(field, v)) {
            errors.push(e);
        }
    }
    let mut out = new.clone();
    let mut take = |r: std::result::Result<String, crate::error::FieldError>| {
        r.unwrap_or_else(|e| {
            errors.push(e);
            String::new()
        })
    };
    out.content = take(text::prose("content", &new.content));
    for (i, t) in out.tests_run.iter_mut().enumerate() {
        *t = take(text::prose(&format!("tests_run[{i}]"), t));
    }
    for (i, b) in out.blockers.iter_mut().enumerate() {
        *b = take(text::prose(&format!("blockers[{i}]"), b));
    }
    if let Some(m) = out.metadata.take() {
        let mut v = serde_json::Value::Object(m);
        if let Err(e) = text::prose_json("metadata", &mut v) {
            errors.push(e);
        }
        if let serde_json::Value::Object(m) = v {
            out.metadata = Some(m);
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(Error::InvalidInput(errors))
    }
}

/// Append a thought to its task's chain, attributed to `actor`.
pub(crate) fn thought_record(
    store: &Store,
    actor: &str,
    new: &NewThought,
) -> Result<ThoughtRecorded> {
    if new.content.trim().is_empty() {
        return Err(Error::invalid("content", "must not be blank"));
    }
    // The one text policy, before anything is hashed.
    let new = &clean_thought(new)?;
    let metadata = match &new.metadata {
        Some(m) => {
            let s = serde_json::to_string(m)?;
            if s.len() > METADATA_MAX_BYTES {
                return Err(Error::invalid(
                    "metadata",
                    format!(
                        "is {} bytes serialized; at most {METADATA_MAX_BYTES}",
                        s.len()
                    ),
                ));
            }
            Some(s)
        }
        None => None,
    };
    let tests_run = serde_json::to_string(&new.tests_run)?;
    let blockers = serde_json::to_string(&new.blockers)?;
    store.write(|tx| {
        let issue_id = resolve_task(tx, &new.task)?;
        let task_id = task_identifier(tx, &issue_id)?;
        let last: Option<(i64, String)> = tx.query_opt(
            "SELECT chain_position, hash FROM thought_records WHERE issue_id = ?1
                 ORDER BY chain_position DESC LIMIT 1",
            [&issue_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let (position, previous_hash) = match last {
            Some((p, h)) => (p + 1, Some(h)),
            None => (1, None),
        };
        let recorded_at = now_iso();
        let hash = thought_hash(&HashedFields {
            task_id: &task_id,
            kind: new.kind.as_str(),
            content: &new.content,
            previous_hash: previous_hash.as_deref(),
            recorded_at: &recorded_at,
            recorded_by: actor,
        });
        let id = tx.query_row(
            "INSERT INTO thought_records (issue_id, task_ref, chain_position, type, content,
                 branch, commit_sha, tests_run, blockers, metadata, previous_hash, hash,
                 recorded_at, recorded_by)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) RETURNING id",
            params![
                issue_id,
                task_id,
                position,
                new.kind.as_str(),
                new.content,
                new.branch,
                new.commit_sha,
                tests_run,
                blockers,
                metadata,
                previous_hash,
                hash,
                recorded_at,
                actor,
            ],
            |r| r.get::<_, i64>(0),
        )?;
        tx.execute(
            "INSERT INTO thought_heads (issue_id, chain_position, hash) VALUES (?1, ?2, ?3)
             ON CONFLICT (issue_id) DO UPDATE SET chain_position = ?2, hash = ?3",
            params![issue_id, position, hash],
        )?;
        Ok(ThoughtRecorded {
            thought_id: thought_id(id),
            task_id,
            kind: new.kind,
            hash,
            previous_hash,
            recorded_at,
            recorded_by: actor.to_string(),
            chain_position: position,
        })
    })
}

/// The thoughts of a task, of an audit session, or of every task; with
/// `verify_chain` also whether the chains involved hold (checked in full,
/// whatever the filters and limit).
pub(crate) fn thought_list(store: &Store, q: &ThoughtQuery) -> Result<ThoughtList> {
    let limit = q
        .limit
        .unwrap_or(super::limits::THOUGHT_LIST_LIMIT_DEFAULT as usize);
    store.snapshot(|c| {
        let task_issue = q.task.as_deref().map(|t| resolve_task(c, t)).transpose()?;
        let session = q
            .session
            .as_deref()
            .map(|s| super::sessions::load_session(c, s))
            .transpose()?;
        // The tasks to read, and for a finalized session the frozen records.
        let (issues, frozen) = match &session {
            Some(s) => {
                let (issues, frozen) = session_scope(c, q, s, task_issue.as_ref())?;
                (Some(issues), frozen)
            }
            None => (task_issue.clone().map(|t| vec![t]), None),
        };
        let (thought_count, thoughts) = match &issues {
            Some(ids) => thoughts_of(c, q, ids, frozen.as_ref(), limit)?,
            None => every_thought(c, q, limit)?,
        };
        let (mut chain_valid, mut invalid_links, mut invalid_thoughts) = (None, None, None);
        if q.verify_chain {
            let (links, records) = broken_links(c, issues.as_deref())?;
            chain_valid = Some(links.is_empty());
            invalid_links = Some(links);
            invalid_thoughts = Some(records);
        }
        Ok(ThoughtList {
            task_id: match &task_issue {
                Some(id) => Some(task_identifier(c, id)?),
                None => None,
            },
            session_id: session.as_ref().map(|s| s.display_id()),
            thought_count,
            thoughts,
            chain_valid,
            invalid_links,
            invalid_thoughts,
        })
    })
}

/// The tasks an audit session covers (only `task_issue` when given, which it must
/// cover), and its frozen records once finalized.
fn session_scope(
    c: &Conn<'_>,
    q: &ThoughtQuery,
    s: &super::sessions::SessionRow,
    task_issue: Option<&String>,
) -> Result<(Vec<String>, Option<HashSet<String>>)> {
    let family = s.issue_ids(c)?;
    if let Some(t) = task_issue
        && !family.contains(t)
    {
        return Err(Error::invalid(
            "task_id",
            format!(
                "task {} is not covered by audit session {}",
                q.task.as_deref().unwrap_or_default(),
                s.display_id()
            ),
        ));
    }
    let issues = match task_issue {
        Some(t) => vec![t.clone()],
        None => family,
    };
    Ok((issues, s.frozen_record_ids(c)?))
}

/// The count of the thoughts of the tasks `ids` that match the filters (of the
/// `frozen` records only, when given), and the first `limit` of them in chain order.
fn thoughts_of(
    c: &Conn<'_>,
    q: &ThoughtQuery,
    ids: &[String],
    frozen: Option<&HashSet<String>>,
    limit: usize,
) -> Result<(usize, Vec<Thought>)> {
    let mut matching = Vec::new();
    for id in ids {
        matching.extend(chain_of(c, id)?.into_iter().filter(|t| {
            q.kind.is_none_or(|k| t.thought.kind == k)
                && frozen.is_none_or(|f| f.contains(&t.thought.thought_id))
        }));
    }
    let count = matching.len();
    let page = matching.into_iter().take(limit).map(|t| t.thought);
    Ok((count, page.collect()))
}

/// The count of every task's thoughts of the query's type, and the first `limit` of
/// them (by task, then chain position).
fn every_thought(c: &Conn<'_>, q: &ThoughtQuery, limit: usize) -> Result<(usize, Vec<Thought>)> {
    let kind = q.kind.map(ThoughtType::as_str);
    let count: i64 = c.query_row(
        "SELECT count(*) FROM thought_records WHERE CAST(?1 AS TEXT) IS NULL OR type = ?1",
        [kind],
        |r| r.get(0),
    )?;
    let mut stmt = c.prepare(&format!(
        "SELECT {THOUGHT_COLUMNS} FROM thought_records t
         JOIN issues i ON i.id = t.issue_id
         WHERE CAST(?1 AS TEXT) IS NULL OR t.type = ?1
         ORDER BY i.rowid, t.chain_position, t.id LIMIT ?2"
    ))?;
    let page = stmt
        .query_map(params![kind, limit as i64], |r| {
            thought_from_row(r).map(|t| t.thought)
        })?
        .collect::<crate::error::Result<_>>()?;
    Ok((count as usize, page))
}

/// The chain positions of the broken links, and the broken records' ids, of the
/// chains of `issues` (`None`: every task with a thought).
fn broken_links(c: &Conn<'_>, issues: Option<&[String]>) -> Result<(Vec<i64>, Vec<String>)> {
    let chains: Vec<String> = match issues {
        Some(ids) => ids.to_vec(),
        None => {
            let mut stmt = c.prepare(
                "SELECT i.id FROM issues i
                 WHERE EXISTS (SELECT 1 FROM thought_records t WHERE t.issue_id = i.id)
                 ORDER BY i.rowid",
            )?;
            stmt.query_map([], |r| r.get(0))?
                .collect::<crate::error::Result<_>>()?
        }
    };
    let mut links = Vec::new();
    let mut records = Vec::new();
    for id in &chains {
        for b in check_chain(c, id)?.broken {
            links.push(b.chain_position);
            if !b.record_id.is_empty() {
                records.push(b.record_id);
            }
        }
    }
    links.dedup();
    records.dedup();
    Ok((links, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn js_strings_match_json_stringify() {
        let tricky = "q\"b\\s/\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f} é \u{2028}\u{2029} 🐦 </x>";
        let mut ours = String::new();
        push_js_string(&mut ours, tricky);
        // JSON.stringify and serde_json agree on every Rust string.
        assert_eq!(ours, serde_json::to_string(tricky).unwrap());
        assert!(ours.contains("\\u0001") && ours.contains("\\u001f"));
        assert!(ours.contains('\u{2028}') && ours.contains('\u{7f}'));
    }

    #[test]
    fn first_record_hashes_null_previous() {
        let f = HashedFields {
            task_id: "T-1",
            kind: "decision",
            content: "c",
            previous_hash: None,
            recorded_at: "2026-04-08T22:30:00Z",
            recorded_by: "agent-alice",
        };
        assert_eq!(
            hash_input(&f),
            r#"{"task_id":"T-1","type":"decision","content":"c","previous_hash":null,"recorded_at":"2026-04-08T22:30:00Z","recorded_by":"agent-alice"}"#
        );
        assert_eq!(thought_hash(&f), sha256_hex(hash_input(&f)));
    }

    /// Computed independently with Node's `JSON.stringify` + `crypto` and with Python's
    /// `json.dumps(obj, separators=(",", ":"), ensure_ascii=False)` + `hashlib` (both
    /// gave these digests).
    const VECTOR_FIRST: &str = "b0de41fe68c1cfb1cd22de6be9b6cb149dded5881302b5ce2569090b71d979a8";
    const VECTOR_SECOND: &str = "b81fc849a7d2c68c691a793957767bea1e2d1ef30ed27e02d26b6fe1e475281e";

    #[test]
    fn hash_matches_an_independent_test_vector() {
        let first = HashedFields {
            task_id: "COLIBRI-42",
            kind: "decision",
            content: "Use \"Zod\" \\ for input;\nline2\ttab \u{1} \u{1f} \u{7f} é \u{2028}\u{2029} 🐦 </script>",
            previous_hash: None,
            recorded_at: "2026-04-08T22:30:00Z",
            recorded_by: "agent-alice",
        };
        assert_eq!(thought_hash(&first), VECTOR_FIRST);
        let second = HashedFields {
            kind: "risk",
            content: "second",
            previous_hash: Some(VECTOR_FIRST),
            ..first
        };
        assert_eq!(thought_hash(&second), VECTOR_SECOND);
    }
}
