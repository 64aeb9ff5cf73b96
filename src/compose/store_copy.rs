//! `cairn store copy`: a whole knowledge base from one store to another (SQLite or
//! PostgreSQL, either direction, SQLite → SQLite and PostgreSQL → PostgreSQL too), every
//! row with its ids and every hash chain intact, verified after the copy.
//!
//! The source is read in one snapshot; the destination (migrated and empty, never
//! merged into) is written in one write transaction, so the copy is all or nothing.
//! Tables go in [`TABLES`]' order, which satisfies the foreign keys, and rows in key
//! order, which satisfies the append-only triggers (they stay enabled: a trail record
//! is the next link of its chain when it is inserted, a session's Merkle leaves follow
//! the session that counts them). Every column is copied as it is stored, ids included
//! (identities, AUTOINCREMENT ids, and the `rowid` that is implicit in SQLite and an
//! explicit identity column in PostgreSQL); embeddings are bytes like any blob. Derived
//! data is not copied: SQLite's `issues_fts` follows its triggers, PostgreSQL's
//! `issues.search_vector` is a generated column, and the host-local indexes catch up
//! from the destination on first use.
//!
//! Verification, before the destination commits: every table's row count and an
//! order-independent digest of its rows (each value normalised: integers, reals, text
//! and bytes tagged and length-prefixed) read back from the destination equal those of
//! the rows read from the source. After the commit: every issue's thought and trail
//! chains and every audit session (its frozen Merkle root, recomputed from its leaves
//! and from the records) verify on the destination with the application's own verifier
//! ([`crate::colibri::audit::audit_verify`]).

use std::collections::HashSet;
use std::time::Instant;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::colibri::audit::{VerifyTarget, audit_verify};
use crate::error::{Error, FieldError, Result};
use crate::store::db::{Conn, Dialect, Row, Value, params};
use crate::store::{Location, Store};

/// One table of the schema, as the copy handles it.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    pub name: &'static str,
    /// The `ORDER BY` of the rows: the order they are inserted in.
    pub(crate) order_by: &'static str,
    /// The column a sequence allocates (SQLite AUTOINCREMENT, a PostgreSQL identity).
    pub identity: Option<&'static str>,
    /// SQLite's implicit `rowid` is copied: the application orders these tables by it,
    /// and PostgreSQL has it as an explicit identity column.
    pub rowid: bool,
    /// A column referring to this table's own `id` (a parent): referenced rows go first.
    pub(crate) parent: Option<&'static str>,
}

const fn table(name: &'static str, order_by: &'static str) -> Table {
    Table {
        name,
        order_by,
        identity: None,
        rowid: false,
        parent: None,
    }
}

const fn with_identity(t: Table, column: &'static str) -> Table {
    Table {
        identity: Some(column),
        ..t
    }
}

/// Every table of the schema (`migrations/`), in an order that satisfies the foreign
/// keys. The one list: a test fails when a migration adds a table this does not name.
pub const TABLES: &[Table] = &[
    table("projects", "id"),
    Table {
        identity: Some("rowid"),
        rowid: true,
        parent: Some("parent_id"),
        ..table("issues", "rowid")
    },
    table("issue_labels", "issue_id, label"),
    table("issue_aliases", "identifier"),
    table("issue_dependencies", "issue_id, depends_on_id"),
    table("agent_profiles", "profile_type"),
    table("trail_records", "issue_id, position"),
    table("trail_heads", "issue_id"),
    table("finding_processing", "finding_id"),
    with_identity(table("issue_status_history", "id"), "id"),
    table("subtask_blocks", "parent_id"),
    Table {
        identity: Some("rowid"),
        rowid: true,
        ..table("pull_requests", "rowid")
    },
    table("coverage", "project_id, file_path, concept"),
    with_identity(table("test_health", "id"), "id"),
    Table {
        identity: Some("rowid"),
        rowid: true,
        ..table("runs", "rowid")
    },
    table("run_events", "run_id, seq"),
    with_identity(table("learnings", "seq"), "seq"),
    with_identity(table("learning_history", "id"), "id"),
    with_identity(table("learning_confirmations", "id"), "id"),
    table("learning_feedback", "learning_id, issue_id"),
    table("learning_proposals", "old_id, new_id"),
    with_identity(table("memory_sources", "id"), "id"),
    with_identity(table("memory_items", "id"), "id"),
    table("learning_candidates", "created_at, id"),
    with_identity(table("vault_documents", "id"), "id"),
    with_identity(table("vault_chunks", "id"), "id"),
    with_identity(table("vault_roots", "id"), "id"),
    with_identity(table("thought_records", "id"), "id"),
    table("thought_heads", "issue_id"),
    with_identity(table("audit_sessions", "id"), "id"),
    table("audit_merkle_leaves", "session_id, position"),
    with_identity(table("learning_embeddings", "id"), "id"),
    table("session_tokens", "id"),
];

/// Tables of a migrated database that are not data: SQLite's bookkeeping and the
/// full-text index of issues (with its shadow tables), PostgreSQL's migration record.
pub fn is_derived_table(name: &str) -> bool {
    name == "sqlite_sequence" || name.starts_with("issues_fts") || name == "cairn_schema_version"
}

/// What [`copy`] reports as it goes.
#[derive(Debug, Clone)]
pub enum CopyProgress {
    /// The source is read: this many rows to copy.
    Planned { rows: u64 },
    /// Copying this table now.
    Table(&'static str),
    /// This many more rows copied.
    Copied(u64),
    /// Every row is copied; verifying.
    Verifying,
}

/// One table's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TableCopy {
    pub(crate) table: String,
    pub(crate) source_rows: u64,
    pub(crate) destination_rows: u64,
    /// Hex SHA-256 over the sorted digests of the rows (the same on both sides).
    pub(crate) digest: String,
}

/// A chain (an issue's thoughts and trail, or an audit session) that does not verify
/// on the destination.
#[derive(Debug, Clone, Serialize)]
pub struct BrokenChain {
    /// The issue identifier or the audit session id (`A-0001`).
    pub(crate) target: String,
    /// Whether the same chain fails on the source too (a faithful copy of a broken
    /// chain), or only on the destination.
    pub(crate) broken_in_source: bool,
    pub(crate) reasons: Vec<String>,
}

/// What the verifiers found on the destination.
#[derive(Debug, Clone, Serialize)]
pub struct ChainsChecked {
    /// Issues whose thought and trail chains were verified.
    pub(crate) issues: u64,
    /// Audit sessions verified (finalized ones against their frozen root).
    pub(crate) audit_sessions: u64,
    pub broken: Vec<BrokenChain>,
}

/// What `cairn store copy` did.
#[derive(Debug, Clone, Serialize)]
pub struct CopyReport {
    pub(crate) from: String,
    pub(crate) to: String,
    pub rows: u64,
    pub(crate) tables: Vec<TableCopy>,
    pub chains: ChainsChecked,
    pub(crate) seconds: f64,
}

/// Copy the knowledge base at `from` into the empty one at `to` (created and migrated
/// when missing), then verify it.
pub(crate) fn copy(
    from: &Location,
    to: &Location,
    progress: &dyn Fn(CopyProgress),
) -> Result<CopyReport> {
    let started = Instant::now();
    check_locations(from, to)?;
    let src = Store::open_at(from)?;
    let dst = Store::open_at(to)?;
    let (src_version, dst_version) = (src.user_version()?, dst.user_version()?);
    if src_version != dst_version {
        return Err(Error::FailedPrecondition(format!(
            "schema versions differ: {from} is at {src_version}, {to} at {dst_version}"
        )));
    }
    let tables = src.snapshot(|s| dst.write(|d| copy_rows(s, d, to, progress)))?;
    progress(CopyProgress::Verifying);
    let chains = verify_chains(&src, &dst)?;
    Ok(CopyReport {
        from: from.to_string(),
        to: to.to_string(),
        rows: tables.iter().map(|t| t.destination_rows).sum(),
        tables,
        chains,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn check_locations(from: &Location, to: &Location) -> Result<()> {
    if let Location::File(p) = from
        && !p.is_file()
    {
        return Err(Error::InvalidInput(vec![FieldError::new(
            "from",
            format!("no SQLite database at {}", p.display()),
        )]));
    }
    let same = match (from, to) {
        (Location::File(a), Location::File(b)) => {
            a == b || (b.exists() && a.canonicalize().ok() == b.canonicalize().ok())
        }
        (Location::Postgres { url: a, .. }, Location::Postgres { url: b, .. }) => a == b,
        _ => false,
    };
    if same {
        return Err(Error::InvalidInput(vec![FieldError::new(
            "to",
            "is the source; copy to another database",
        )]));
    }
    Ok(())
}

/// Inside the source snapshot `s` and the destination write transaction `d`: copy
/// every table, move the sequences, and check what the destination now holds.
fn copy_rows(
    s: &Conn<'_>,
    d: &Conn<'_>,
    to: &Location,
    progress: &dyn Fn(CopyProgress),
) -> Result<Vec<TableCopy>> {
    let mut planned = 0u64;
    let mut columns = Vec::new();
    for t in TABLES {
        let (src_cols, dst_cols) = (columns_of(s, t)?, columns_of(d, t)?);
        if src_cols != dst_cols {
            return Err(Error::FailedPrecondition(format!(
                "table {} has columns {src_cols:?} in the source and {dst_cols:?} in the \
                 destination",
                t.name
            )));
        }
        if count(d, t.name)? > 0 {
            return Err(Error::FailedPrecondition(format!(
                "the destination {to} is not empty (table {} has rows); `cairn store copy` \
                 copies into an empty database and never merges",
                t.name
            )));
        }
        planned += count(s, t.name)?;
        columns.push(src_cols);
    }
    progress(CopyProgress::Planned { rows: planned });
    let mut out = Vec::new();
    for (t, cols) in TABLES.iter().zip(&columns) {
        progress(CopyProgress::Table(t.name));
        let mut rows = select_all(s, t, cols)?;
        if let Some(parent) = t.parent {
            rows = parents_first(rows, parent)?;
        }
        let list = cols.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", ");
        let marks = (1..=cols.len())
            .map(|i| format!("?{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let insert = format!("INSERT INTO {} ({list}) VALUES ({marks})", t.name);
        let mut stmt = d.prepare(&insert)?;
        let mut digest = TableDigest::default();
        let mut since = 0u64;
        for r in &rows {
            let values = (0..r.len())
                .map(|i| r.value(i).cloned())
                .collect::<Result<Vec<_>>>()?;
            digest.add(cols, &values);
            stmt.execute(values).map_err(|e| {
                Error::FailedPrecondition(format!(
                    "the destination refused a row of {}: {e}",
                    t.name
                ))
            })?;
            since += 1;
            if since == 256 {
                progress(CopyProgress::Copied(since));
                since = 0;
            }
        }
        progress(CopyProgress::Copied(since));
        if let Some(col) = t.identity {
            let high = high_water(s, t, col)?;
            set_high_water(d, t, col, high)?;
        }
        let source = digest.finish();
        let (copied, read_back) = (count(d, t.name)?, table_digest(d, t, cols)?);
        if copied != rows.len() as u64 || read_back != source {
            return Err(Error::Internal(format!(
                "table {}: {} rows read, {copied} in the destination; digest {source} \
                 read, {read_back} in the destination",
                t.name,
                rows.len()
            )));
        }
        out.push(TableCopy {
            table: t.name.to_string(),
            source_rows: rows.len() as u64,
            destination_rows: copied,
            digest: source,
        });
    }
    Ok(out)
}

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// The columns of `t` a copy reads and writes, sorted: the stored ones (not
/// PostgreSQL's generated `search_vector`), with SQLite's implicit `rowid` where the
/// table has one that matters.
fn columns_of(c: &Conn<'_>, t: &Table) -> Result<Vec<String>> {
    let mut cols: Vec<String> = match c.dialect() {
        Dialect::Sqlite => {
            c.query_map("SELECT name FROM pragma_table_info(?1)", [t.name], |r| {
                r.get(0)
            })?
        }
        Dialect::Postgres => c.query_map(
            "SELECT CAST(column_name AS text) FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = ?1
               AND is_generated = 'NEVER'",
            [t.name],
            |r| r.get(0),
        )?,
    };
    if cols.is_empty() {
        return Err(Error::Internal(format!(
            "no table {} in the database",
            t.name
        )));
    }
    if t.rowid && c.dialect() == Dialect::Sqlite && !cols.iter().any(|c| c == "rowid") {
        cols.push("rowid".into());
    }
    cols.sort();
    Ok(cols)
}

fn count(c: &Conn<'_>, table: &str) -> Result<u64> {
    c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
}

fn select_all(c: &Conn<'_>, t: &Table, cols: &[String]) -> Result<Vec<Row>> {
    let list = cols.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", ");
    c.query_map(
        &format!("SELECT {list} FROM {} ORDER BY {}", t.name, t.order_by),
        [],
        |r| Ok(r.clone()),
    )
}

/// `rows` reordered so that a row comes after the row its `parent` column names (an
/// issue may be re-parented under a later one); otherwise in their order.
fn parents_first(rows: Vec<Row>, parent: &str) -> Result<Vec<Row>> {
    let key = |r: &Row| -> Result<Option<String>> { r.get("id") };
    let present = rows
        .iter()
        .filter_map(|r| key(r).transpose())
        .collect::<Result<HashSet<String>>>()?;
    let mut placed = HashSet::new();
    let mut out = Vec::with_capacity(rows.len());
    let mut pending = rows;
    while !pending.is_empty() {
        let before = pending.len();
        let mut later = Vec::new();
        for r in pending {
            let p: Option<String> = r.get(parent)?;
            let ready = p
                .as_ref()
                .is_none_or(|p| placed.contains(p) || !present.contains(p));
            if ready {
                if let Some(id) = key(&r)? {
                    placed.insert(id);
                }
                out.push(r);
            } else {
                later.push(r);
            }
        }
        if later.len() == before {
            return Err(Error::FailedPrecondition(format!(
                "{} rows form a cycle through {parent}",
                later.len()
            )));
        }
        pending = later;
    }
    Ok(out)
}

/// The highest value the sequence of `t.col` has handed out: SQLite's
/// `sqlite_sequence` (it stays above deleted rows), PostgreSQL's sequence, or the
/// highest value present.
fn high_water(c: &Conn<'_>, t: &Table, col: &str) -> Result<i64> {
    let max: i64 = c.query_row(
        &format!("SELECT coalesce(max({}), 0) FROM {}", quote(col), t.name),
        [],
        |r| r.get(0),
    )?;
    let sequence: Option<i64> = match c.dialect() {
        Dialect::Sqlite if col == "rowid" => None,
        Dialect::Sqlite => c.query_opt(
            "SELECT seq FROM sqlite_sequence WHERE name = ?1",
            [t.name],
            |r| r.get(0),
        )?,
        Dialect::Postgres => c
            .query_opt(
                "SELECT last_value FROM pg_sequences
                 WHERE format('%I.%I', schemaname, sequencename)
                       = pg_get_serial_sequence(?1, ?2)",
                [t.name, col],
                |r| r.get::<_, Option<i64>>(0),
            )?
            .flatten(),
    };
    Ok(max.max(sequence.unwrap_or(0)))
}

/// Move the destination's sequence of `t.col` to `high` (the next value is `high + 1`).
fn set_high_water(c: &Conn<'_>, t: &Table, col: &str, high: i64) -> Result<()> {
    if high == 0 {
        return Ok(());
    }
    match c.dialect() {
        // SQLite's implicit rowid has no sequence: the next is max(rowid) + 1.
        Dialect::Sqlite if col == "rowid" => Ok(()),
        Dialect::Sqlite => {
            let n = c.execute(
                "UPDATE sqlite_sequence SET seq = ?2 WHERE name = ?1 AND seq < ?2",
                params![t.name, high],
            )?;
            let present: bool = c.query_row(
                "SELECT count(*) FROM sqlite_sequence WHERE name = ?1",
                [t.name],
                |r| r.get(0),
            )?;
            if n == 0 && !present {
                c.execute(
                    "INSERT INTO sqlite_sequence (name, seq) VALUES (?1, ?2)",
                    params![t.name, high],
                )?;
            }
            Ok(())
        }
        Dialect::Postgres => c.query_row(
            "SELECT setval(pg_get_serial_sequence(?1, ?2), ?3)",
            params![t.name, col, high],
            |_| Ok(()),
        ),
    }
}

/// The digest of every row of `t` (see [`TableDigest`]).
fn table_digest(c: &Conn<'_>, t: &Table, cols: &[String]) -> Result<String> {
    let mut digest = TableDigest::default();
    for r in select_all(c, t, cols)? {
        let values = (0..r.len())
            .map(|i| r.value(i).cloned())
            .collect::<Result<Vec<_>>>()?;
        digest.add(cols, &values);
    }
    Ok(digest.finish())
}

/// An order-independent digest of a table's rows: the SHA-256 of each row's normalised
/// values (column name, then a tag and the value: integers as 8 bytes, reals by their
/// bits unless they hold an integer exactly, text and bytes length-prefixed), sorted,
/// then hashed together.
#[derive(Default)]
struct TableDigest {
    rows: Vec<[u8; 32]>,
}

impl TableDigest {
    fn add(&mut self, cols: &[String], values: &[Value]) {
        let mut h = Sha256::new();
        for (name, v) in cols.iter().zip(values) {
            h.update((name.len() as u64).to_le_bytes());
            h.update(name.as_bytes());
            match normalise(v) {
                Value::Null => h.update(b"n"),
                Value::Integer(i) => {
                    h.update(b"i");
                    h.update(i.to_le_bytes());
                }
                Value::Real(r) => {
                    h.update(b"r");
                    h.update(r.to_bits().to_le_bytes());
                }
                Value::Text(s) => {
                    h.update(b"t");
                    h.update((s.len() as u64).to_le_bytes());
                    h.update(s.as_bytes());
                }
                Value::Blob(b) => {
                    h.update(b"b");
                    h.update((b.len() as u64).to_le_bytes());
                    h.update(&b);
                }
            }
        }
        self.rows.push(h.finalize().into());
    }

    fn finish(mut self) -> String {
        self.rows.sort_unstable();
        let mut h = Sha256::new();
        for r in &self.rows {
            h.update(r);
        }
        hex::encode(h.finalize())
    }
}

/// A real that holds an integer exactly is that integer (SQLite stores such reals as
/// integers on disk; a REAL column may answer either).
fn normalise(v: &Value) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    match v {
        Value::Real(r) if r.fract() == 0.0 && r.abs() <= EXACT => Value::Integer(*r as i64),
        other => other.clone(),
    }
}

/// What is verified: an issue's thought and trail chains, or an audit session (the
/// chains of the tasks it covers, and a finalized session's frozen root).
enum Target {
    Issue { id: String, identifier: String },
    Session(i64),
}

/// The problems the application's verifiers find with `target` in `store`.
fn problems(store: &Store, target: &Target) -> Result<Vec<String>> {
    let describe = |b: &crate::colibri::thoughts::BrokenLink| {
        format!(
            "{} {} #{}: {}",
            b.chain, b.record_id, b.chain_position, b.reason
        )
    };
    match target {
        Target::Issue { id, identifier } => store.snapshot(|c| {
            let thoughts = crate::colibri::thoughts::check_chain(c, id)?;
            let trail = crate::trail::chain::verify_chain(c, id, identifier)?;
            Ok(thoughts
                .broken
                .iter()
                .map(describe)
                .chain(
                    trail
                        .broken
                        .iter()
                        .map(|b| format!("trail {} #{}: {}", b.record_id, b.position, b.problem)),
                )
                .collect())
        }),
        Target::Session(s) => {
            let v = audit_verify(
                store,
                &VerifyTarget {
                    session: Some(crate::colibri::session_id(*s)),
                    ..Default::default()
                },
            )?;
            let mut out: Vec<String> = v.broken_links.iter().map(describe).collect();
            if out.is_empty() && (!v.chain_valid || v.merkle_root_matches == Some(false)) {
                out.push("the session does not verify".into());
            }
            Ok(out)
        }
    }
}

/// Verify every issue's chains and every audit session on the destination with the
/// application's verifiers; a target that fails is checked on the source too.
fn verify_chains(src: &Store, dst: &Store) -> Result<ChainsChecked> {
    let (issues, sessions) = dst.read(|c| {
        let issues: Vec<(String, String)> = c.query_map(
            "SELECT id, identifier FROM issues i
             WHERE EXISTS (SELECT 1 FROM trail_records t WHERE t.issue_id = i.id)
                OR EXISTS (SELECT 1 FROM thought_records t WHERE t.issue_id = i.id)
             ORDER BY identifier",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let sessions: Vec<i64> =
            c.query_map("SELECT id FROM audit_sessions ORDER BY id", [], |r| {
                r.get(0)
            })?;
        Ok((issues, sessions))
    })?;
    let (n_issues, n_sessions) = (issues.len() as u64, sessions.len() as u64);
    let targets = issues
        .into_iter()
        .map(|(id, identifier)| Target::Issue { id, identifier })
        .chain(sessions.into_iter().map(Target::Session));
    let mut broken = Vec::new();
    for target in targets {
        let reasons = problems(dst, &target)?;
        if reasons.is_empty() {
            continue;
        }
        broken.push(BrokenChain {
            target: match &target {
                Target::Issue { identifier, .. } => identifier.clone(),
                Target::Session(s) => crate::colibri::session_id(*s),
            },
            broken_in_source: !problems(src, &target)?.is_empty(),
            reasons,
        });
    }
    Ok(ChainsChecked {
        issues: n_issues,
        audit_sessions: n_sessions,
        broken,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_list_names_each_table_once() {
        let names: HashSet<_> = TABLES.iter().map(|t| t.name).collect();
        assert_eq!(names.len(), TABLES.len());
    }

    #[test]
    fn integral_reals_digest_as_integers_and_others_do_not() {
        let cols = vec!["a".to_string()];
        let digest = |v: Value| {
            let mut d = TableDigest::default();
            d.add(&cols, &[v]);
            d.finish()
        };
        assert_eq!(digest(Value::Real(2.0)), digest(Value::Integer(2)));
        assert_ne!(digest(Value::Real(2.5)), digest(Value::Integer(2)));
        assert_ne!(digest(Value::Text("2".into())), digest(Value::Integer(2)));
        assert_ne!(
            digest(Value::Text("ab".into())),
            digest(Value::Blob(b"ab".to_vec()))
        );
        assert_ne!(digest(Value::Null), digest(Value::Text(String::new())));
    }

    #[test]
    fn row_order_does_not_change_a_digest_but_a_row_does() {
        let cols = vec!["a".to_string(), "b".to_string()];
        let of = |rows: &[[i64; 2]]| {
            let mut d = TableDigest::default();
            for r in rows {
                d.add(&cols, &[Value::Integer(r[0]), Value::Integer(r[1])]);
            }
            d.finish()
        };
        assert_eq!(of(&[[1, 2], [3, 4]]), of(&[[3, 4], [1, 2]]));
        assert_ne!(of(&[[1, 2], [3, 4]]), of(&[[1, 2], [3, 5]]));
        assert_ne!(of(&[[1, 2]]), of(&[[1, 2], [1, 2]]));
    }
}
