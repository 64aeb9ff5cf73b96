//! Audit sessions, chain verification and Merkle finalization.
//!
//! What a session covers (decisions):
//! - Its tasks: the task alone (`shallow`), or the task and every descendant sub-task
//!   (`deep`), computed when asked, so sub-tasks created later are covered until the
//!   session is finalized.
//! - Its records: every hash-chained record of those tasks, complete from each chain's
//!   first record (a chain can only be verified from its start), not only the records
//!   written after the session started. Per task, in this order: the thought chain by
//!   chain position, then the task's work-trail chain (findings, verdicts, comments) by
//!   position; tasks in the order above. That sequence is what `audit_verify_chain`
//!   numbers (`position`, 1-based) and what `merkle_finalize` uses as leaves.
//! - `merkle_finalize` freezes the leaves as they are at that moment (stored with the
//!   root); records written later are still verified as chains but are not part of the
//!   frozen tree. Finalizing a session with no records is refused: a frozen empty tree
//!   proves nothing and would block a meaningful finalization later.
//! - Verifying a finalized session also checks each frozen leaf against the record it
//!   names (`frozen_leaf_mismatch`) and reports whether the frozen root still matches.

use std::collections::HashSet;

use crate::store::db::{Conn, params};
use serde::Serialize;

use crate::base::now_iso;
use crate::error::{Error, Result};
use crate::store::Store;

use super::merkle;
pub use super::sessions::AuditScope;
use super::sessions::{SessionRow, frozen_leaves, load_session};
use super::thoughts::{BrokenLink, ChainCheck, chain_loose, check_chain};
use super::{resolve_task, session_id, task_identifier};
use crate::trail::chain::{MalformedRow, loose_text};

/// One hash-chained record, as a Merkle leaf candidate.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct ChainRecord {
    /// 1-based position in the verified sequence.
    pub(crate) position: i64,
    /// `thought` or `trail`.
    pub(crate) chain: String,
    pub(crate) task_id: String,
    pub(crate) record_id: String,
    pub(crate) chain_position: i64,
    pub(crate) hash: String,
    pub(crate) recorded_at: String,
}

/// One chain of one task: its records and the result of checking it.
struct ChainReport {
    records: Vec<ChainRecord>,
    check: ChainCheck,
}

/// The records of one task's chains, in sequence order (positions unnumbered: 0):
/// its thought chain, then its work-trail chain.
/// Rows that do not read (see [`crate::trail::chain::MalformedRow`]) are kept with their
/// id and stored hash at their place, so verification can report them.
fn records_of(c: &Conn<'_>, issue_id: &str) -> Result<Vec<Vec<ChainRecord>>> {
    let task_id = task_identifier(c, issue_id)?;
    let malformed = |chain: &str, i: usize, m: MalformedRow| ChainRecord {
        position: 0,
        chain: chain.into(),
        task_id: task_id.clone(),
        record_id: m.id,
        chain_position: i as i64 + 1,
        hash: m.hash,
        recorded_at: String::new(),
    };
    let thoughts = chain_loose(c, issue_id)?
        .into_iter()
        .enumerate()
        .map(|(i, t)| match t {
            Ok(t) => ChainRecord {
                position: 0,
                chain: "thought".into(),
                task_id: t.thought.task_id,
                record_id: t.thought.thought_id,
                chain_position: t.thought.chain_position,
                hash: t.thought.hash,
                recorded_at: t.thought.recorded_at,
            },
            Err(m) => malformed("thought", i, m),
        })
        .collect();
    let trail = crate::trail::chain::chain_loose(c, issue_id)?
        .into_iter()
        .enumerate()
        .map(|(i, r)| match r {
            Ok(r) => ChainRecord {
                position: 0,
                chain: "trail".into(),
                task_id: task_id.clone(),
                record_id: r.id,
                chain_position: r.position as i64,
                hash: r.hash,
                recorded_at: r.created_at,
            },
            Err(m) => malformed("trail", i, m),
        })
        .collect();
    Ok(vec![thoughts, trail])
}

/// Check an issue's work-trail chain with the trail's own verification, in the terms
/// of [`ChainCheck`].
fn check_trail(c: &Conn<'_>, issue_id: &str) -> Result<ChainCheck> {
    let task_id = task_identifier(c, issue_id)?;
    let v = crate::trail::chain::verify_chain(c, issue_id, &task_id)?;
    let mut check = ChainCheck {
        total: v.total_records as i64,
        ..Default::default()
    };
    for b in v.broken {
        let position = b.position as i64;
        let reason = match b.problem.as_str() {
            "content" => "content_hash_mismatch",
            "link" => "previous_hash_mismatch",
            "position" => "position_mismatch",
            "head" => "head_mismatch",
            "malformed" => "malformed_record",
            other => other,
        };
        if b.problem == "head" && position > check.total {
            check.missing = position - check.total;
            check.bad_positions.extend(check.total + 1..=position);
        } else {
            check.bad_positions.insert(position);
        }
        check.broken.push(BrokenLink {
            position,
            expected_hash: b.expected_hash,
            actual_hash: b.actual_hash,
            reason: reason.into(),
            chain: "trail".into(),
            task_id: task_id.clone(),
            record_id: b.record_id,
            chain_position: position,
            detail: b.detail,
        });
    }
    Ok(check)
}

/// Number the records of `chains` 1.. in sequence order.
fn numbered(chains: Vec<Vec<ChainRecord>>) -> Vec<ChainRecord> {
    chains
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, mut r)| {
            r.position = i as i64 + 1;
            r
        })
        .collect()
}

/// Recompute a finalized session's root from its frozen leaves and from the current
/// records those leaves name, and compare both with the stored root (and the stored
/// leaf count). Returns what does not hold; empty when the root stands.
fn root_problems(c: &Conn<'_>, session: i64) -> Result<Vec<String>> {
    let (stored_root, stored_count) = c.query_row(
        "SELECT merkle_root, leaf_count FROM audit_sessions WHERE id = ?1",
        [session],
        |r| {
            Ok((
                loose_text(r, "merkle_root"),
                r.get::<_, i64>("leaf_count").ok(),
            ))
        },
    )?;
    let leaves = frozen_leaves(c, session)?;
    let mut problems = Vec::new();
    if stored_count != Some(leaves.len() as i64) {
        problems.push(format!(
            "{} frozen leaves, but the session records {}",
            leaves.len(),
            stored_count.map_or("no count".to_string(), |n| n.to_string())
        ));
    }
    for (i, l) in leaves.iter().enumerate() {
        if let Some(m) = &l.malformed {
            problems.push(format!("frozen leaf {} is malformed: {m}", i + 1));
        }
    }
    let tree = |hashes: &mut dyn Iterator<Item = &str>| -> Option<merkle::Tree> {
        let leaves = hashes
            .map(|h| merkle::leaf(h).ok())
            .collect::<Option<Vec<_>>>()?;
        Some(merkle::build(&leaves))
    };
    match tree(&mut leaves.iter().map(|l| l.hash.as_str())) {
        Some(t) if t.root == stored_root => {}
        Some(t) => problems.push(format!(
            "the root recomputed from the frozen leaves is {}, the stored root is {stored_root:?}",
            t.root
        )),
        None => problems.push("the frozen leaves do not form a tree".to_string()),
    }
    // The current records: every chain of the session's tasks, by record id.
    let s = load_session(c, &super::session_id(session))?;
    let mut current = std::collections::HashMap::new();
    for id in s.issue_ids(c)? {
        for r in records_of(c, &id)?.into_iter().flatten() {
            current.insert(r.record_id, r.hash);
        }
    }
    let gone: Vec<&str> = leaves
        .iter()
        .filter(|l| !current.contains_key(&l.record_id))
        .map(|l| l.record_id.as_str())
        .collect();
    if !gone.is_empty() {
        problems.push(format!(
            "frozen records no longer stored: {}",
            gone.join(", ")
        ));
    } else {
        match tree(&mut leaves.iter().map(|l| current[&l.record_id].as_str())) {
            Some(t) if t.root == stored_root => {}
            Some(t) => problems.push(format!(
                "the root recomputed from the current records is {}, the stored root is \
                 {stored_root:?}",
                t.root
            )),
            None => problems.push("a frozen record's hash is not 64 hex characters".to_string()),
        }
    }
    Ok(problems)
}

/// The finalized sessions whose tasks include `issue_id`.
fn finalized_sessions_covering(c: &Conn<'_>, issue_id: &str) -> Result<Vec<SessionRow>> {
    let ids: Vec<i64> = c
        .prepare("SELECT id FROM audit_sessions WHERE finalized_at IS NOT NULL ORDER BY id")?
        .query_map([], |r| r.get(0))?
        .collect::<crate::error::Result<_>>()?;
    let mut out = Vec::new();
    for id in ids {
        let s = load_session(c, &super::session_id(id))?;
        if s.issue_ids(c)?.iter().any(|i| i == issue_id) {
            out.push(s);
        }
    }
    Ok(out)
}

/// A session's root problems as one broken link (position 0), if any.
fn root_break(c: &Conn<'_>, s: &SessionRow) -> Result<Option<BrokenLink>> {
    let problems = root_problems(c, s.id)?;
    if problems.is_empty() {
        return Ok(None);
    }
    Ok(Some(BrokenLink {
        position: 0,
        expected_hash: s.merkle_root.clone().unwrap_or_default(),
        actual_hash: String::new(),
        reason: "merkle_root_mismatch".into(),
        chain: String::new(),
        task_id: String::new(),
        record_id: s.display_id(),
        chain_position: 0,
        detail: Some(problems.join("; ")),
    }))
}

/// For `findings --verify`: every finalized audit session covering `issue_id` whose
/// stored root no longer stands, as trail broken links (`merkle_root`, position 0).
pub(crate) fn frozen_root_breaks(
    c: &Conn<'_>,
    issue_id: &str,
) -> Result<Vec<crate::trail::chain::BrokenLink>> {
    let mut out = Vec::new();
    for s in finalized_sessions_covering(c, issue_id)? {
        if let Some(b) = root_break(c, &s)? {
            out.push(crate::trail::chain::BrokenLink {
                position: 0,
                record_id: b.record_id,
                problem: "merkle_root".into(),
                expected_hash: b.expected_hash,
                actual_hash: b.actual_hash,
                detail: b.detail,
            });
        }
    }
    Ok(out)
}

/// What `audit_session_start` returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AuditSessionStarted {
    /// `A-{id}`.
    pub session_id: String,
    pub(crate) task_id: String,
    pub(crate) auditor_id: String,
    pub(crate) started_at: String,
    pub(crate) scope: AuditScope,
}

/// What to verify: a session, a task, or a task within a session.
#[derive(Debug, Clone, Default)]
pub struct VerifyTarget {
    pub session: Option<String>,
    pub task: Option<String>,
    /// Include every record with its hash.
    pub full_trace: bool,
}

/// One record of a full trace.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct TracedRecord {
    #[serde(flatten)]
    pub(crate) record: ChainRecord,
    /// Whether every check of this record passed.
    pub(crate) valid: bool,
}

/// What `audit_verify_chain` (and `cairn audit verify`) returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ChainVerification {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task_id: Option<String>,
    pub chain_valid: bool,
    /// Records present (thoughts and trail records).
    pub total_records: i64,
    /// 0-100: the percentage of records whose every check passed (rounded down; 100
    /// only when all pass, and for an empty chain).
    pub(crate) integrity_score: u32,
    pub broken_links: Vec<BrokenLink>,
    pub(crate) verified_at: String,
    /// For a finalized session (or, verifying a task alone, every finalized session
    /// covering it): whether the stored root is still the root recomputed from the
    /// frozen leaves and from the current records, and every frozen leaf matches its
    /// record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) merkle_root_matches: Option<bool>,
    /// With full_trace: every record in sequence order with its hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) records: Option<Vec<TracedRecord>>,
}

/// What `merkle_finalize` returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MerkleFinalized {
    pub(crate) session_id: String,
    /// Lower-case hex SHA-256 of the root node.
    pub(crate) merkle_root: String,
    /// Levels including leaves and root.
    pub(crate) tree_depth: u32,
    pub(crate) leaf_count: usize,
    pub(crate) finalized_at: String,
    /// Always true on success.
    pub(crate) frozen: bool,
}

/// What `merkle_root` returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MerkleRootView {
    pub(crate) session_id: String,
    /// The frozen root if finalized, else the root over the session's current records.
    pub merkle_root: String,
    pub(crate) is_finalized: bool,
    /// Finalization time, or the newest record's time (the session start if none).
    pub(crate) as_of: String,
    pub(crate) leaf_count: usize,
    pub(crate) tree_depth: u32,
}

fn tree_of(records: &[ChainRecord]) -> Result<merkle::Tree> {
    let leaves = records
        .iter()
        .map(|r| merkle::leaf(&r.hash))
        .collect::<Result<Vec<_>>>()?;
    Ok(merkle::build(&leaves))
}

/// Open an audit session on a task.
pub(crate) fn audit_session_start(
    store: &Store,
    task: &str,
    auditor_id: &str,
    reason: Option<&str>,
    scope: AuditScope,
) -> Result<AuditSessionStarted> {
    if auditor_id.trim().is_empty() {
        return Err(Error::invalid("auditor_id", "must not be blank"));
    }
    store.write(|tx| {
        let issue_id = resolve_task(tx, task)?;
        let started_at = now_iso();
        let id = tx.query_row(
            "INSERT INTO audit_sessions (issue_id, auditor_id, reason, scope, started_at)
             VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
            params![issue_id, auditor_id, reason, scope.as_str(), started_at],
            |r| r.get::<_, i64>(0),
        )?;
        Ok(AuditSessionStarted {
            session_id: session_id(id),
            task_id: task_identifier(tx, &issue_id)?,
            auditor_id: auditor_id.to_string(),
            started_at,
            scope,
        })
    })
}

/// Check every chain of the given tasks, in sequence order.
fn check_chains(store: &Store, issue_ids: &[String]) -> Result<Vec<ChainReport>> {
    store.snapshot(|c| {
        let mut reports = Vec::new();
        for id in issue_ids {
            let checks = [check_chain(c, id)?, check_trail(c, id)?];
            for (records, check) in records_of(c, id)?.into_iter().zip(checks) {
                reports.push(ChainReport { records, check });
            }
        }
        Ok(reports)
    })
}

/// Verify the chains of a session's tasks, of one task, or of one task within a
/// session: the target resolved ([`resolve_target`]), every chain checked and its
/// problems numbered into one sequence ([`Tally::of`]), then each finalized session's
/// root and frozen leaves compared with the records ([`Tally::check_session`]).
pub(crate) fn audit_verify(store: &Store, target: &VerifyTarget) -> Result<ChainVerification> {
    if target.session.is_none() && target.task.is_none() {
        return Err(Error::InvalidInput(vec![
            crate::error::FieldError::new("session_id", "give session_id or task_id (or both)"),
            crate::error::FieldError::new("task_id", "give session_id or task_id (or both)"),
        ]));
    }
    let (session, issue_ids, task_id) = resolve_target(store, target)?;
    let (mut tally, records) = Tally::of(check_chains(store, &issue_ids)?);
    let total = records.len() as i64;

    // The finalized session verified, or, for a task alone, every finalized session
    // covering it: each root is recomputed from its leaves and from the records.
    let sessions = store.read(|c| match (&session, &task_id, issue_ids.first()) {
        (Some(s), _, _) => Ok(vec![s.clone()]
            .into_iter()
            .filter(|s| s.finalized_at.is_some())
            .collect()),
        (None, Some(_), Some(issue)) => finalized_sessions_covering(c, issue),
        _ => Ok(Vec::new()),
    })?;
    let mut merkle_root_matches = None;
    for s in &sessions {
        // Verifying a task alone: the session may cover other tasks too (deep scope).
        // Their records' leaves are theirs to verify; the root above covers them all.
        let others = match &session {
            Some(_) => HashSet::new(),
            None => other_tasks_records(store, s, &issue_ids)?,
        };
        let matches = tally.check_session(store, s, &others, &records)?;
        merkle_root_matches = Some(merkle_root_matches.unwrap_or(true) && matches);
    }
    let Tally {
        mut broken,
        bad,
        missing,
        bad_positions,
    } = tally;
    broken.sort_by_key(|b| b.position);

    let denominator = total + missing;
    let integrity_score = if denominator == 0 {
        100
    } else {
        (((denominator - bad.min(denominator)) * 100) / denominator) as u32
    };
    let traced = target.full_trace.then(|| {
        records
            .iter()
            .map(|r| TracedRecord {
                valid: !bad_positions.contains(&r.position),
                record: r.clone(),
            })
            .collect()
    });
    Ok(ChainVerification {
        session_id: session.map(|s| s.display_id()),
        task_id,
        chain_valid: broken.is_empty(),
        total_records: total,
        integrity_score,
        broken_links: broken,
        verified_at: now_iso(),
        merkle_root_matches,
        records: traced,
    })
}

/// What [`audit_verify`] looks at: the session (if named), the issues whose chains it
/// checks, and the task's identifier (if named). A task named with a session must be
/// one the session covers.
fn resolve_target(
    store: &Store,
    target: &VerifyTarget,
) -> Result<(Option<SessionRow>, Vec<String>, Option<String>)> {
    store.read(|c| {
        let session = target
            .session
            .as_deref()
            .map(|s| load_session(c, s))
            .transpose()?;
        let task = target
            .task
            .as_deref()
            .map(|t| resolve_task(c, t))
            .transpose()?;
        let issue_ids = match (&session, &task) {
            (Some(s), Some(t)) => {
                if !s.issue_ids(c)?.contains(t) {
                    return Err(Error::invalid(
                        "task_id",
                        format!(
                            "task {} is not covered by audit session {}",
                            target.task.as_deref().unwrap_or_default(),
                            s.display_id()
                        ),
                    ));
                }
                vec![t.clone()]
            }
            (Some(s), None) => s.issue_ids(c)?,
            (None, Some(t)) => vec![t.clone()],
            (None, None) => Vec::new(),
        };
        let task_id = task.map(|t| task_identifier(c, &t)).transpose()?;
        Ok((session, issue_ids, task_id))
    })
}

/// The record ids of the tasks session `s` covers besides `issue_ids`.
fn other_tasks_records(
    store: &Store,
    s: &SessionRow,
    issue_ids: &[String],
) -> Result<HashSet<String>> {
    store.read(|c| {
        let mut ids = HashSet::new();
        for issue in s.issue_ids(c)? {
            if !issue_ids.contains(&issue) {
                ids.extend(
                    records_of(c, &issue)?
                        .into_iter()
                        .flatten()
                        .map(|r| r.record_id),
                );
            }
        }
        Ok(ids)
    })
}

/// The problems found so far, numbered in the one sequence of every chain's records.
struct Tally {
    broken: Vec<BrokenLink>,
    /// Records found bad (each once).
    bad: i64,
    /// Records missing from their chains.
    missing: i64,
    bad_positions: HashSet<i64>,
}

impl Tally {
    /// Every chain's problems renumbered into the one sequence, and the records
    /// numbered the same way.
    fn of(reports: Vec<ChainReport>) -> (Tally, Vec<ChainRecord>) {
        let mut t = Tally {
            broken: Vec::new(),
            bad: 0,
            missing: 0,
            bad_positions: HashSet::new(),
        };
        let mut offset = 0i64;
        for r in &reports {
            for b in &r.check.broken {
                let mut b = b.clone();
                b.position = offset + b.chain_position;
                t.bad_positions.insert(b.position);
                t.broken.push(b);
            }
            t.bad += r.check.bad_positions.len() as i64;
            t.missing += r.check.missing;
            offset += r.check.total + r.check.missing;
        }
        (
            t,
            numbered(reports.into_iter().map(|r| r.records).collect()),
        )
    }

    /// Compare finalized session `s` with the records: its root recomputed from its
    /// frozen leaves, and each leaf (but those of `others`) with the current record.
    /// Whether everything matched.
    fn check_session(
        &mut self,
        store: &Store,
        s: &SessionRow,
        others: &HashSet<String>,
        records: &[ChainRecord],
    ) -> Result<bool> {
        let frozen = store.read(|c| frozen_leaves(c, s.id))?;
        let mut matches = true;
        if let Some(b) = store.read(|c| root_break(c, s))? {
            matches = false;
            self.broken.push(b);
        }
        for (i, leaf) in frozen.iter().enumerate() {
            if others.contains(&leaf.record_id) {
                continue;
            }
            let current = records.iter().find(|r| r.record_id == leaf.record_id);
            if leaf.malformed.is_none() && current.is_some_and(|r| r.hash == leaf.hash) {
                continue;
            }
            matches = false;
            let position = current.map(|r| r.position).unwrap_or(i as i64 + 1);
            if self.bad_positions.insert(position) {
                self.bad += 1;
            }
            self.broken.push(BrokenLink {
                position,
                expected_hash: leaf.hash.clone(),
                actual_hash: current.map(|r| r.hash.clone()).unwrap_or_default(),
                reason: if leaf.malformed.is_some() {
                    "malformed_record".into()
                } else {
                    "frozen_leaf_mismatch".into()
                },
                chain: current.map(|r| r.chain.clone()).unwrap_or_default(),
                task_id: current.map(|r| r.task_id.clone()).unwrap_or_default(),
                record_id: leaf.record_id.clone(),
                chain_position: current.map(|r| r.chain_position).unwrap_or(0),
                detail: leaf.malformed.clone(),
            });
        }
        Ok(matches)
    }
}

/// Build the session's Merkle tree over its records and freeze it.
///
/// `agent_issue`: the bound issue (id) of an agent's session, which may finalize a whole
/// session only when that session audits its own issue (with `task`, the task must be its
/// issue: the caller binds it); `None` for the orchestrator's, which may finalize any.
pub(crate) fn merkle_finalize(
    store: &Store,
    session: &str,
    task: Option<&str>,
    agent_issue: Option<&str>,
) -> Result<MerkleFinalized> {
    store.write(|tx| {
        let s = load_session(tx, session)?;
        if task.is_none()
            && let Some(bound) = agent_issue
            && bound != s.issue_id
        {
            return Err(Error::PermissionDenied(format!(
                "audit session {} audits another issue than this session's; an agent \
                 finalizes audit sessions of its bound issue only (or pass task_id: your \
                 issue, to freeze its records alone)",
                s.display_id()
            )));
        }
        if s.finalized_at.is_some() {
            return Err(Error::AlreadyFinalized(s.display_id()));
        }
        let family = s.issue_ids(tx)?;
        let issue_ids = match task {
            Some(t) => {
                let id = resolve_task(tx, t)?;
                if !family.contains(&id) {
                    return Err(Error::invalid(
                        "task_id",
                        format!("task {t} is not covered by audit session {session}"),
                    ));
                }
                vec![id]
            }
            None => family,
        };
        let mut chains = Vec::new();
        for id in &issue_ids {
            chains.extend(records_of(tx, id)?);
        }
        let records = numbered(chains);
        if records.is_empty() {
            return Err(Error::invalid(
                "session_id",
                format!(
                    "audit session {} has no records to finalize yet; record a thought \
                     on its task first",
                    s.display_id()
                ),
            ));
        }
        let tree = tree_of(&records)?;
        let finalized_at = now_iso();
        let finalized_task = task.map(|_| issue_ids[0].clone());
        tx.execute(
            "UPDATE audit_sessions SET merkle_root = ?2, tree_depth = ?3, leaf_count = ?4,
                    finalized_task = ?5, finalized_at = ?6
             WHERE id = ?1",
            params![
                s.id,
                tree.root,
                tree.depth,
                tree.leaf_count as i64,
                finalized_task,
                finalized_at
            ],
        )?;
        for r in &records {
            tx.execute(
                "INSERT INTO audit_merkle_leaves (session_id, position, chain, record_id, hash)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![s.id, r.position, r.chain, r.record_id, r.hash],
            )?;
        }
        Ok(MerkleFinalized {
            session_id: s.display_id(),
            merkle_root: tree.root,
            tree_depth: tree.depth,
            leaf_count: tree.leaf_count,
            finalized_at,
            frozen: true,
        })
    })
}

/// The session's root: frozen if finalized, else over its current records.
pub(crate) fn merkle_root(store: &Store, session: &str) -> Result<MerkleRootView> {
    store.read(|c| {
        let s = load_session(c, session)?;
        if let (Some(root), Some(at)) = (&s.merkle_root, &s.finalized_at) {
            return Ok(MerkleRootView {
                session_id: s.display_id(),
                merkle_root: root.clone(),
                is_finalized: true,
                as_of: at.clone(),
                leaf_count: s.leaf_count.unwrap_or(0),
                tree_depth: s.tree_depth.unwrap_or(0),
            });
        }
        let mut chains = Vec::new();
        for id in s.issue_ids(c)? {
            chains.extend(records_of(c, &id)?);
        }
        let records = numbered(chains);
        let tree = tree_of(&records)?;
        let as_of = records
            .iter()
            .map(|r| r.recorded_at.as_str())
            .max()
            .unwrap_or(&s.started_at)
            .to_string();
        Ok(MerkleRootView {
            session_id: s.display_id(),
            merkle_root: tree.root,
            is_finalized: false,
            as_of,
            leaf_count: tree.leaf_count,
            tree_depth: tree.depth,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::colibri::tasks::TaskCreate;
    use crate::colibri::thoughts::{NewThought, ThoughtType};
    use crate::issues::NewProject;
    use crate::trail::chain::append_record;
    use crate::trail::{FindingCategory, RecordKind};

    fn setup() -> (tempfile::TempDir, Store, String) {
        let dir = tempfile::tempdir().unwrap();
        let c = Store::open(&dir.path().join("c.db")).unwrap();
        crate::issues::create_project(
            &c,
            &NewProject {
                slug: "p".into(),
                name: "P".into(),
                ..Default::default()
            },
        )
        .unwrap();
        let t = crate::colibri::tasks::task_create(
            &c,
            "tester",
            &TaskCreate {
                title: "t".into(),
                project: "p".into(),
                ..Default::default()
            },
        )
        .unwrap();
        (dir, c, t.task_id)
    }

    fn think(c: &Store, task: &str, content: &str) {
        crate::colibri::thoughts::thought_record(
            c,
            "tester",
            &NewThought {
                task: task.into(),
                kind: ThoughtType::Decision,
                content: content.into(),
                branch: None,
                commit_sha: None,
                tests_run: vec![],
                blockers: vec![],
                metadata: None,
            },
        )
        .unwrap();
    }

    /// Tampering with trail records is tested through MCP (tests/colibri.rs); the source
    /// tree holds no SQL that rewrites them.
    #[test]
    fn verification_and_leaves_cover_the_work_trail() {
        let (_d, c, task) = setup();
        let issue_id = crate::issues::issue(&c, &task).unwrap().id;
        think(&c, &task, "one");
        think(&c, &task, "two");
        for n in 0..3 {
            c.write(|tx| {
                append_record(
                    tx,
                    &issue_id,
                    RecordKind::Finding(FindingCategory::Bug),
                    serde_json::json!({ "summary": format!("finding {n}") }),
                    "judge",
                )
            })
            .unwrap();
        }
        let target = VerifyTarget {
            task: Some(task.clone()),
            full_trace: true,
            ..Default::default()
        };
        let v = audit_verify(&c, &target).unwrap();
        assert!(v.chain_valid, "{v:?}");
        assert_eq!((v.total_records, v.integrity_score), (5, 100));
        let chains: Vec<(String, i64)> = v
            .records
            .unwrap()
            .iter()
            .map(|r| (r.record.chain.clone(), r.record.position))
            .collect();
        assert_eq!(
            chains,
            [
                ("thought".into(), 1),
                ("thought".into(), 2),
                ("trail".into(), 3),
                ("trail".into(), 4),
                ("trail".into(), 5)
            ]
        );

        // Finalization freezes all five records as leaves.
        let s = audit_session_start(&c, &task, "auditor", None, AuditScope::Shallow).unwrap();
        let m = merkle_finalize(&c, &s.session_id, None, None).unwrap();
        assert_eq!((m.leaf_count, m.tree_depth), (5, 4));
    }
}
