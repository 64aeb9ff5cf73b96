//! The hash chain under every issue's trail: appending a record and re-checking a chain.
//!
//! **Architecture invariant**: a trail record is never updated or deleted. The code has
//! no `UPDATE`/`DELETE` on `trail_records` (a test scans the source), and the database
//! refuses both with triggers. State that changes later (the orchestrator's `processed`
//! flag) lives in other tables.
//!
//! ## What is hashed
//!
//! Each record of an issue has a 1-based `position` and stores the previous record's
//! hash as `prev_hash` (the first record's `prev_hash` is [`GENESIS_HASH`], 64 zeros).
//! Its `hash` is `sha256_hex(canonical_json(H))` where `H` is the JSON object
//!
//! ```text
//! {"actor", "body", "category", "created_at", "id", "issue_id", "kind", "position", "prev_hash"}
//! ```
//!
//! with `issue_id` the issue's opaque id (it survives a re-prefixing move), `category`
//! `null` for comments, `position` a JSON integer and `body` the record's JSON object.
//!
//! **Canonical JSON** ([`canonical_json`]): UTF-8, no whitespace, object keys sorted by
//! their UTF-8 bytes at every depth, strings escaped the way `serde_json` escapes them
//! (`"` `\` and control characters only; everything else literal), numbers as
//! `serde_json` prints them. The stored `body` column holds the canonical text of the
//! body, so recomputing a hash needs nothing but the row.
//!
//! ## Concurrency
//!
//! Appends run inside the caller's `BEGIN IMMEDIATE` transaction ([`crate::store::Store::write`]),
//! so the read of the chain head and the insert are one serialized step across every
//! process on the database; `UNIQUE(issue_id, position)` backs this up: a forked chain
//! cannot be stored. `trail_heads` keeps each chain's last position and hash, written in
//! the same transaction, so that removing records from the end is detected as well.

use crate::store::db::{Conn, Row, params};
use serde::Serialize;
use serde_json::Value;

use crate::base::{new_id, now_iso, sha256_hex};
use crate::error::{Error, Result};

/// `prev_hash` of the first record of every chain.
pub(crate) const GENESIS_HASH: &str =
    "0000000000000000000000000000000000000000000000000000000000000000";

/// The categories of findings: the five of `add_finding`, plus the phase claims and
/// verdicts recorded by `complete_phase` / `approve_phase` / `reject_phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FindingCategory {
    TestResult,
    CodePattern,
    Architecture,
    Bug,
    Gap,
    PhaseCompletion,
    PhaseVerdict,
}

impl FindingCategory {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FindingCategory::TestResult => "test_result",
            FindingCategory::CodePattern => "code_pattern",
            FindingCategory::Architecture => "architecture",
            FindingCategory::Bug => "bug",
            FindingCategory::Gap => "gap",
            FindingCategory::PhaseCompletion => "phase_completion",
            FindingCategory::PhaseVerdict => "phase_verdict",
        }
    }

    /// The id prefix of findings of this category: `pc` (claims), `pv` (verdicts), `f`.
    pub(crate) fn id_prefix(self) -> &'static str {
        match self {
            FindingCategory::PhaseCompletion => "pc",
            FindingCategory::PhaseVerdict => "pv",
            _ => "f",
        }
    }
}

/// What a trail record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// A finding of a category (its id is `<category prefix>-<16 hex>`).
    Finding(FindingCategory),
    /// A comment (`c-<16 hex>`); body `{"content": ..}`.
    Comment,
}

impl RecordKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RecordKind::Finding(_) => "finding",
            RecordKind::Comment => "comment",
        }
    }

    fn category(self) -> Option<&'static str> {
        match self {
            RecordKind::Finding(c) => Some(c.as_str()),
            RecordKind::Comment => None,
        }
    }

    fn id_prefix(self) -> &'static str {
        match self {
            RecordKind::Finding(c) => c.id_prefix(),
            RecordKind::Comment => "c",
        }
    }
}

/// One stored trail record, exactly as hashed.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TrailRecord {
    pub(crate) id: String,
    /// The issue's opaque id.
    pub(crate) issue_id: String,
    /// 1-based position in the issue's chain.
    pub(crate) position: u64,
    /// `finding` or `comment`.
    pub(crate) kind: String,
    /// The finding category; `None` for comments.
    pub(crate) category: Option<String>,
    /// The record's own fields (a finding's summary, details, files, ...).
    pub(crate) body: Value,
    pub(crate) actor: String,
    pub(crate) created_at: String,
    pub(crate) prev_hash: String,
    pub(crate) hash: String,
}

impl TrailRecord {
    /// The hash this record's fields call for (compare with [`TrailRecord::hash`]).
    pub(crate) fn compute_hash(&self) -> String {
        record_hash(
            &self.id,
            &self.issue_id,
            self.position,
            &self.kind,
            self.category.as_deref(),
            &self.body,
            &self.actor,
            &self.created_at,
            &self.prev_hash,
        )
    }
}

#[allow(clippy::too_many_arguments)]
fn record_hash(
    id: &str,
    issue_id: &str,
    position: u64,
    kind: &str,
    category: Option<&str>,
    body: &Value,
    actor: &str,
    created_at: &str,
    prev_hash: &str,
) -> String {
    let hashed = serde_json::json!({
        "actor": actor,
        "body": body,
        "category": category,
        "created_at": created_at,
        "id": id,
        "issue_id": issue_id,
        "kind": kind,
        "position": position,
        "prev_hash": prev_hash,
    });
    sha256_hex(canonical_json(&hashed))
}

/// The canonical JSON text of `v` (sorted keys at every depth, no whitespace).
pub(crate) fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                // Serializing a string cannot fail.
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

pub(crate) fn record_from_row(r: &Row) -> crate::error::Result<TrailRecord> {
    let body: String = r.get("body")?;
    Ok(TrailRecord {
        id: r.get("id")?,
        issue_id: r.get("issue_id")?,
        position: r.get("position")?,
        kind: r.get("kind")?,
        category: r.get("category")?,
        // A body that no longer parses is kept as a string: its hash then fails to
        // verify instead of the read failing.
        body: serde_json::from_str(&body).unwrap_or(Value::String(body)),
        actor: r.get("actor")?,
        created_at: r.get("created_at")?,
        prev_hash: r.get("prev_hash")?,
        hash: r.get("hash")?,
    })
}

/// Append one record to `issue_id`'s chain inside the caller's write transaction, so a
/// tool's other writes and its trail record commit (or roll back) together.
///
/// `body` must be a JSON object; it is stored in canonical form. The record's id is
/// `<prefix>-<16 hex>` (`pc-`, `pv-`, `f-`, `c-`). `issue_id` is the opaque id (use
/// [`crate::issues::resolve_issue_id`] first).
pub(crate) fn append_record(
    tx: &Conn<'_>,
    issue_id: &str,
    kind: RecordKind,
    body: Value,
    actor: &str,
) -> Result<TrailRecord> {
    if !body.is_object() {
        return Err(Error::Internal(
            "a trail record body must be an object".into(),
        ));
    }
    // Every string a record carries is agent text read by later agents: cleaned by the
    // one text policy before it is hashed.
    let mut body = body;
    crate::text::prose_json("", &mut body).map_err(|e| Error::InvalidInput(vec![e]))?;
    let exists: Option<i64> =
        tx.query_opt("SELECT 1 FROM issues WHERE id = ?1", [issue_id], |r| {
            r.get(0)
        })?;
    if exists.is_none() {
        return Err(Error::not_found("issue", issue_id));
    }
    let head: Option<(u64, String)> = tx.query_opt(
        "SELECT position, hash FROM trail_records WHERE issue_id = ?1
             ORDER BY position DESC LIMIT 1",
        [issue_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let (position, prev_hash) = match head {
        Some((p, h)) => (p + 1, h),
        None => (1, GENESIS_HASH.to_string()),
    };
    let id = new_id(kind.id_prefix()).replacen('_', "-", 1);
    let mut record = TrailRecord {
        id,
        issue_id: issue_id.to_string(),
        position,
        kind: kind.as_str().to_string(),
        category: kind.category().map(String::from),
        body,
        actor: actor.to_string(),
        created_at: now_iso(),
        prev_hash,
        hash: String::new(),
    };
    record.hash = record.compute_hash();
    tx.execute(
        "INSERT INTO trail_records
             (id, issue_id, position, kind, category, body, actor, created_at, prev_hash, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            record.id,
            record.issue_id,
            record.position,
            record.kind,
            record.category,
            canonical_json(&record.body),
            record.actor,
            record.created_at,
            record.prev_hash,
            record.hash,
        ],
    )?;
    tx.execute(
        "INSERT INTO trail_heads(issue_id, position, hash) VALUES (?1, ?2, ?3)
         ON CONFLICT(issue_id) DO UPDATE SET position = ?2, hash = ?3",
        params![record.issue_id, record.position, record.hash],
    )?;
    Ok(record)
}

/// Every record of an issue's chain, in order.
#[cfg(test)]
pub(crate) fn chain(c: &Conn<'_>, issue_id: &str) -> Result<Vec<TrailRecord>> {
    let mut stmt =
        c.prepare("SELECT * FROM trail_records WHERE issue_id = ?1 ORDER BY position")?;
    let rows = stmt
        .query_map([issue_id], record_from_row)?
        .collect::<crate::error::Result<_>>()?;
    Ok(rows)
}

/// A stored row that does not read as a record (a column of the wrong type, NULL, or
/// out of range): verification reports it at its place in the chain instead of failing.
#[derive(Debug, Clone)]
pub(crate) struct MalformedRow {
    /// The row's id, if it reads as text.
    pub(crate) id: String,
    /// The row's stored hash, if it reads as text.
    pub(crate) hash: String,
    /// What could not be read.
    pub(crate) problem: String,
}

/// The text of column `name` of `r`, whatever its type ("" for NULL or a blob).
pub(crate) fn loose_text(r: &Row, name: &str) -> String {
    use crate::store::db::Value;
    match r.value(name) {
        Ok(Value::Text(t)) => t.clone(),
        Ok(Value::Integer(i)) => i.to_string(),
        Ok(Value::Real(f)) => f.to_string(),
        _ => String::new(),
    }
}

/// Every row of an issue's chain for verification, in position order (rows whose
/// position is not an integer last); a row that does not read is kept as a
/// [`MalformedRow`].
pub(crate) fn chain_loose(
    c: &Conn<'_>,
    issue_id: &str,
) -> Result<Vec<std::result::Result<TrailRecord, MalformedRow>>> {
    let mut stmt = c.prepare(&format!(
        "SELECT * FROM trail_records WHERE issue_id = ?1
         ORDER BY {}, id",
        c.dialect().loose_order("position")
    ))?;
    let mut rows = stmt.query([issue_id])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(record_from_row(r).map_err(|e| MalformedRow {
            id: loose_text(r, "id"),
            hash: loose_text(r, "hash"),
            problem: e.to_string(),
        }));
    }
    Ok(out)
}

/// One place where a chain does not hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BrokenLink {
    /// Position of the record (or, for a missing record, the position expected).
    pub(crate) position: u64,
    /// The record's id (empty when the record is missing).
    pub(crate) record_id: String,
    /// `content` (the record's fields do not hash to its stored hash), `link` (its
    /// `prev_hash` is not the previous record's hash), `position` (a gap or a
    /// duplicate), `head` (the chain is shorter or different from its recorded head),
    /// `malformed` (the stored row has a column of the wrong type, NULL or out of
    /// range: see `detail`), or `merkle_root` (a finalized audit session covering this
    /// issue no longer has the root it froze: see `detail`; position 0).
    pub(crate) problem: String,
    /// What the hash should be (`content`: recomputed; `link`/`head`: the previous or
    /// recorded hash).
    pub(crate) expected_hash: String,
    /// What is stored.
    pub(crate) actual_hash: String,
    /// For `malformed` and `merkle_root`: what is wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) detail: Option<String>,
}

/// The result of re-computing an issue's chain.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TrailVerification {
    pub(crate) issue: String,
    pub total_records: u64,
    /// True when no link is broken.
    pub intact: bool,
    pub broken: Vec<BrokenLink>,
    /// Hash of the last record (the chain's head), or the genesis hash for an empty chain.
    pub(crate) head_hash: String,
}

/// Re-compute every hash and link of an issue's chain.
pub(crate) fn verify_chain(
    c: &Conn<'_>,
    issue_id: &str,
    identifier: &str,
) -> Result<TrailVerification> {
    let rows = chain_loose(c, issue_id)?;
    let mut broken = Vec::new();
    let mut prev = GENESIS_HASH.to_string();
    let mut last = None;
    for (i, row) in rows.iter().enumerate() {
        let expected_pos = i as u64 + 1;
        let rec = match row {
            Ok(rec) => rec,
            Err(m) => {
                broken.push(BrokenLink {
                    position: expected_pos,
                    record_id: m.id.clone(),
                    problem: "malformed".into(),
                    expected_hash: prev.clone(),
                    actual_hash: m.hash.clone(),
                    detail: Some(m.problem.clone()),
                });
                prev = m.hash.clone();
                last = Some((expected_pos, m.hash.clone()));
                continue;
            }
        };
        last = Some((rec.position, rec.hash.clone()));
        if rec.position != expected_pos {
            broken.push(BrokenLink {
                position: expected_pos,
                record_id: rec.id.clone(),
                problem: "position".into(),
                expected_hash: prev.clone(),
                actual_hash: rec.prev_hash.clone(),
                detail: None,
            });
        } else if rec.prev_hash != prev {
            broken.push(BrokenLink {
                position: rec.position,
                record_id: rec.id.clone(),
                problem: "link".into(),
                expected_hash: prev.clone(),
                actual_hash: rec.prev_hash.clone(),
                detail: None,
            });
        }
        let recomputed = rec.compute_hash();
        if recomputed != rec.hash {
            broken.push(BrokenLink {
                position: rec.position,
                record_id: rec.id.clone(),
                problem: "content".into(),
                expected_hash: recomputed,
                actual_hash: rec.hash.clone(),
                detail: None,
            });
        }
        prev = rec.hash.clone();
    }
    // The head row is read loosely too: a position that is not a count is a broken head.
    let head: Option<(Option<u64>, String)> = c.query_opt(
        "SELECT position, hash FROM trail_heads WHERE issue_id = ?1",
        [issue_id],
        |r| Ok((r.get::<_, u64>("position").ok(), loose_text(r, "hash"))),
    )?;
    let recorded = head.unwrap_or((Some(0), GENESIS_HASH.to_string()));
    let actual = last.unwrap_or((0, GENESIS_HASH.to_string()));
    if recorded != (Some(actual.0), actual.1.clone()) {
        broken.push(BrokenLink {
            position: recorded.0.unwrap_or(actual.0),
            record_id: String::new(),
            problem: "head".into(),
            expected_hash: recorded.1,
            actual_hash: actual.1,
            detail: recorded
                .0
                .is_none()
                .then(|| "the recorded head's position is not a count".to_string()),
        });
    }
    Ok(TrailVerification {
        issue: identifier.to_string(),
        total_records: rows.len() as u64,
        intact: broken.is_empty(),
        broken,
        head_hash: prev,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let v = serde_json::json!({"b": 1, "a": {"d": [1, {"z": "x\"y", "c": null}], "c": true}});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":true,"d":[1,{"c":null,"z":"x\"y"}]},"b":1}"#
        );
    }

    fn cairn_with_issue() -> (tempfile::TempDir, Store, String) {
        let dir = tempfile::tempdir().unwrap();
        let c = Store::open(&dir.path().join("c.db")).unwrap();
        crate::issues::create_project(
            &c,
            &crate::issues::NewProject {
                slug: "p".into(),
                name: "P".into(),
                ..Default::default()
            },
        )
        .unwrap();
        let i = crate::issues::create_issue(
            &c,
            &crate::issues::NewIssue {
                project: "p".into(),
                title: "t".into(),
                ..Default::default()
            },
        )
        .unwrap();
        (dir, c, i.id)
    }

    #[test]
    fn appends_link_to_the_previous_hash() {
        let (_d, c, issue) = cairn_with_issue();
        for n in 0..3 {
            c.write(|tx| {
                append_record(
                    tx,
                    &issue,
                    RecordKind::Finding(FindingCategory::Bug),
                    serde_json::json!({ "summary": format!("s{n}") }),
                    "t",
                )
            })
            .unwrap();
        }
        let v = c.read(|conn| verify_chain(conn, &issue, &issue)).unwrap();
        assert!(v.intact && v.total_records == 3, "{v:?}");
        let recs = c.read(|conn| chain(conn, &issue)).unwrap();
        assert_eq!(recs[1].prev_hash, recs[0].hash);
        assert_eq!(recs[0].prev_hash, GENESIS_HASH);
    }

    #[test]
    fn hash_covers_every_field() {
        let base = TrailRecord {
            id: "f-1".into(),
            issue_id: "iss_1".into(),
            position: 1,
            kind: "finding".into(),
            category: Some("bug".into()),
            body: serde_json::json!({"summary": "s"}),
            actor: "a".into(),
            created_at: "t".into(),
            prev_hash: GENESIS_HASH.into(),
            hash: String::new(),
        };
        let h = base.compute_hash();
        type Change = Box<dyn Fn(&mut TrailRecord)>;
        let variants: Vec<Change> = vec![
            Box::new(|r| r.id = "f-2".into()),
            Box::new(|r| r.issue_id = "iss_2".into()),
            Box::new(|r| r.position = 2),
            Box::new(|r| r.kind = "comment".into()),
            Box::new(|r| r.category = None),
            Box::new(|r| r.body = serde_json::json!({"summary": "t"})),
            Box::new(|r| r.actor = "b".into()),
            Box::new(|r| r.created_at = "u".into()),
            Box::new(|r| r.prev_hash = "1".into()),
        ];
        for change in variants {
            let mut r = base.clone();
            change(&mut r);
            assert_ne!(r.compute_hash(), h);
        }
    }
}
