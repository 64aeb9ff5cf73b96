//! The per-process copy of every learning's standing, as a search needs it ([`Meta`]:
//! project, quality, verified, superseded, archived, when it was last fresh), with each project's
//! age limit. Refreshed from the database by two watermarks (`max(seq)` for new
//! learnings, `max(learning_history.id)` for every change of standing or lifecycle) and
//! the limits at most every [`LIMITS_TTL`] (see [`super::index`], "Quality at search
//! time").

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::store::Store;
use crate::store::db::params;

use super::lifecycle;
use super::trust::{self, Trust};

/// Quality, verified flag, project and lifecycle state of one learning, as the search
/// needs them.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Meta {
    pub(super) known: bool,
    pub(super) project: u32,
    pub(super) quality: u8,
    pub(super) verified: bool,
    pub(super) superseded: bool,
    /// A person archived it.
    pub(super) archived: bool,
    /// Its trust level (held, flagged, agent, confirmed, verified).
    pub(super) trust: Trust,
    /// When it was last recorded, confirmed or found helpful (Unix seconds).
    pub(super) fresh_at: i64,
}

/// How long the per-project age limits are trusted before they are read again.
const LIMITS_TTL: Duration = Duration::from_secs(60);

/// Per-process copy of every learning's [`Meta`], indexed by `seq`.
#[derive(Debug, Default)]
pub(super) struct MetaCache {
    pub(super) rows: Vec<Meta>,
    pub(super) seq_upto: u64,
    pub(super) history_upto: u64,
    pub(super) projects: Vec<String>,
    pub(super) project_ids: HashMap<String, u32>,
    /// Each project's age limit in seconds (by project index), read at `limits_at`.
    pub(super) stale_after: Vec<i64>,
    pub(super) limits_at: Option<Instant>,
}

/// One `learnings` row as the cache reads it.
struct MetaRow {
    seq: u64,
    project: String,
    quality: u8,
    verified: bool,
    superseded_by: Option<String>,
    fresh: String,
    archived: bool,
    trust: Trust,
}

fn meta_row(r: &crate::store::db::Row) -> crate::error::Result<MetaRow> {
    let verified = r.get(3)?;
    Ok(MetaRow {
        seq: r.get::<_, i64>(0)? as u64,
        project: r.get(1)?,
        quality: r.get(2)?,
        verified,
        superseded_by: r.get(4)?,
        fresh: r.get(5)?,
        archived: r.get(6)?,
        trust: Trust::of(r.get(7)?, r.get(8)?, verified, r.get(9)?),
    })
}

impl MetaCache {
    pub(super) fn intern(&mut self, project: String) -> u32 {
        if let Some(i) = self.project_ids.get(&project) {
            return *i;
        }
        let i = self.projects.len() as u32;
        self.projects.push(project.clone());
        self.project_ids.insert(project, i);
        i
    }

    pub(super) fn get(&self, seq: u64) -> Option<Meta> {
        self.rows.get(seq as usize).copied().filter(|m| m.known)
    }

    /// Whether `m` has aged at `now` under its project's limit.
    pub(super) fn stale(&self, m: &Meta, now: i64) -> bool {
        let limit = self
            .stale_after
            .get(m.project as usize)
            .copied()
            .unwrap_or(i64::from(lifecycle::STALE_AFTER_DAYS) * 86_400);
        lifecycle::is_stale(m.verified, m.fresh_at, limit, now)
    }

    pub(super) fn limits_fresh(&self) -> bool {
        self.limits_at.is_some_and(|at| at.elapsed() < LIMITS_TTL)
    }

    fn store_row(&mut self, row: MetaRow) {
        let project = self.intern(row.project);
        self.set(
            row.seq,
            Meta {
                known: true,
                project,
                quality: row.quality,
                verified: row.verified,
                superseded: row.superseded_by.is_some(),
                archived: row.archived,
                trust: row.trust,
                fresh_at: crate::base::unix_of(&row.fresh).unwrap_or(0),
            },
        );
    }

    fn set(&mut self, seq: u64, m: Meta) {
        let i = seq as usize;
        if self.rows.len() <= i {
            self.rows.resize(i + 1, Meta::default());
        }
        self.rows[i] = m;
    }

    /// Bring the cache up to `(max_seq, max_history)`, and the age limits up to date.
    pub(super) fn refresh(&mut self, store: &Store, max_seq: u64, max_history: u64) -> Result<()> {
        let columns = format!(
            "l.seq, l.project_id, l.quality_score, l.verified, l.superseded_by,
             coalesce(l.fresh_at, l.created_at), l.archived_at IS NOT NULL,
             l.held_at IS NOT NULL, l.flagged, {}",
            trust::INDEPENDENT
        );
        if max_seq > self.seq_upto {
            let fresh: Vec<MetaRow> = store.read(|c| {
                let mut st = c.prepare(&format!(
                    "SELECT {columns} FROM learnings l WHERE l.seq > ?1 AND l.seq <= ?2"
                ))?;
                let rows = st.query_map(params![self.seq_upto as i64, max_seq as i64], meta_row)?;
                rows.collect::<crate::error::Result<Vec<_>>>()
            })?;
            for row in fresh {
                self.store_row(row);
            }
            self.seq_upto = max_seq;
        }
        if max_history > self.history_upto {
            // Every change of a learning's standing or lifecycle writes a history row.
            let changed: Vec<MetaRow> = store.read(|c| {
                let mut st = c.prepare(&format!(
                    "SELECT {columns} FROM learnings l WHERE l.seq <= ?3 AND l.id IN
                       (SELECT h.learning_id FROM learning_history h
                        WHERE h.id > ?1 AND h.id <= ?2)"
                ))?;
                let rows = st.query_map(
                    params![
                        self.history_upto as i64,
                        max_history as i64,
                        self.seq_upto as i64
                    ],
                    meta_row,
                )?;
                rows.collect::<crate::error::Result<Vec<_>>>()
            })?;
            for row in changed {
                self.store_row(row);
            }
            self.history_upto = max_history;
        }
        if !self.limits_fresh() {
            let limits: Vec<(String, String)> = store.read(|c| {
                let mut st = c.prepare("SELECT id, settings FROM projects")?;
                let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
                rows.collect::<crate::error::Result<Vec<_>>>()
            })?;
            for (project, settings) in limits {
                let i = self.intern(project) as usize;
                if self.stale_after.len() <= i {
                    self.stale_after
                        .resize(i + 1, i64::from(lifecycle::STALE_AFTER_DAYS) * 86_400);
                }
                self.stale_after[i] = lifecycle::stale_after_secs(&settings);
            }
            self.limits_at = Some(Instant::now());
        }
        Ok(())
    }
}
