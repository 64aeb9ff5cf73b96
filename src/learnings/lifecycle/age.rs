//! Age (docs/learnings.md, "Age"), and what the blend adds to a learning's stored
//! quality: an unverified learning nobody confirmed or found helpful for
//! [`STALE_AFTER_DAYS`] (per project) counts [`AGE_FACTOR`] of its quality; a verified
//! one gets [`VERIFIED_BONUS`].

use crate::base::{iso_of, unix_of};
use crate::error::Result;
use crate::learnings::Learnings;
use crate::store::db::Conn;

use super::*;

/// Points a person's verification (trust `verified`) adds to the quality the blend weighs
/// (at most 100). Measured on the tuning part of `tests/eval/learnings.jsonl` (32 verified
/// learnings): nDCG@10 0.950 → 0.953, MRR@10 0.959 → 0.963, every other part and set
/// unchanged or better (docs/learnings.md, "Trust in the ranking"). The other levels
/// are not in the blend: no evaluation set has confirmed or flagged learnings to
/// measure them on, and quality already carries the evidence they come from.
pub(crate) const VERIFIED_BONUS: u8 = 15;

/// Days after which an unverified learning nobody confirmed or found helpful ages.
pub(crate) const STALE_AFTER_DAYS: u32 = 180;
/// What ageing multiplies the quality term of the blend by.
pub(crate) const AGE_FACTOR: f32 = 0.5;

/// A project's age limit in seconds: `settings.learnings.stale_after_days` (at least 1),
/// else [`STALE_AFTER_DAYS`].
pub(crate) fn stale_after_secs(settings: &str) -> i64 {
    let days = serde_json::from_str::<serde_json::Value>(settings)
        .ok()
        .and_then(|v| v.pointer("/learnings/stale_after_days")?.as_u64())
        .filter(|d| *d >= 1)
        .unwrap_or(u64::from(STALE_AFTER_DAYS))
        .min(100 * 365);
    days as i64 * 86_400
}

/// Whether a learning is aged at `now` (seconds).
pub(crate) fn is_stale(verified: bool, fresh_at: i64, stale_after: i64, now: i64) -> bool {
    !verified && now.saturating_sub(fresh_at) > stale_after
}

/// The current time in seconds since the Unix epoch.
pub(crate) fn now_secs() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Record an `aged` history entry (dated when it aged) for every learning (or only
/// `only`) that aged and has none since it was last fresh. Returns how many.
pub(crate) fn record_aging(tx: &Conn<'_>, only: Option<&str>, now: i64) -> Result<usize> {
    let sql = format!(
        "SELECT l.id, coalesce(l.fresh_at, l.created_at), p.settings
         FROM learnings l JOIN projects p ON p.id = l.project_id
         WHERE l.verified = 0 {}
           AND NOT EXISTS (SELECT 1 FROM learning_history h
                           WHERE h.learning_id = l.id AND h.event = 'aged'
                             AND h.at >= coalesce(l.fresh_at, l.created_at))
         ORDER BY l.seq",
        if only.is_some() { "AND l.id = ?1" } else { "" }
    );
    let mut st = tx.prepare(&sql)?;
    let row = |r: &crate::store::db::Row| Ok((r.get(0)?, r.get(1)?, r.get(2)?));
    let rows: Vec<(String, String, String)> = match only {
        Some(id) => st.query_map([id], row)?.collect::<Result<_>>()?,
        None => st.query_map([], row)?.collect::<Result<_>>()?,
    };
    let mut n = 0;
    for (id, fresh, settings) in rows {
        let Some(fresh_at) = unix_of(&fresh) else {
            continue;
        };
        let limit = stale_after_secs(&settings);
        if !is_stale(false, fresh_at, limit, now) {
            continue;
        }
        let at = iso_of(fresh_at + limit);
        let note = format!(
            "nobody confirmed it or found it helpful for {} days: its quality counts {AGE_FACTOR}× in the ranking",
            limit / 86_400
        );
        let before = standing(tx, &id)?;
        record(
            tx,
            &id,
            &Change {
                event: "aged",
                actor: "cairn",
                note: Some(&note),
                issue_id: None,
                related_id: None,
                before: Some(before),
                at: &at,
            },
        )?;
        n += 1;
    }
    Ok(n)
}

impl Learnings<'_> {
    /// Record an `aged` history entry for every learning that aged since it was last
    /// fresh (a reindex runs this; `show` does it for its learning).
    pub(crate) fn record_aging(&self) -> Result<usize> {
        let now = now_secs();
        self.store.write(|tx| record_aging(tx, None, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn age_limit_comes_from_the_project_settings() {
        assert_eq!(stale_after_secs("{}"), 180 * 86_400);
        assert_eq!(
            stale_after_secs(r#"{"learnings":{"stale_after_days":30}}"#),
            30 * 86_400
        );
        assert_eq!(
            stale_after_secs(r#"{"learnings":{"stale_after_days":0}}"#),
            180 * 86_400
        );
        assert!(is_stale(false, 0, 10, 11));
        assert!(!is_stale(true, 0, 10, 11));
        assert!(!is_stale(false, 0, 10, 10));
    }
}
