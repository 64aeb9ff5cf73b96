//! How many learnings there are and how many still wait for their embedding (the
//! daemon's metrics, docs/metrics.md), and what happened to them over time (the web
//! page's pictures, docs/web.md).

use crate::error::Result;
use crate::store::db::params;

use super::Learnings;

/// The learnings of every project.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Sizes {
    pub(crate) learnings: u64,
    /// Learnings without an embedding yet (the background indexer's backlog).
    pub(crate) pending_embeddings: u64,
}

impl Learnings<'_> {
    pub(crate) fn sizes(&self) -> Result<Sizes> {
        self.store.read(|c| {
            let mut st = c.prepare(
                "SELECT (SELECT count(*) FROM learnings),
                        (SELECT count(*) FROM learnings l WHERE NOT EXISTS
                            (SELECT 1 FROM learning_embeddings e WHERE e.learning_seq = l.seq))",
            )?;
            st.query_row([], |r| {
                Ok(Sizes {
                    learnings: r.get::<_, i64>(0)? as u64,
                    pending_embeddings: r.get::<_, i64>(1)? as u64,
                })
            })
        })
    }
}

/// One day of learnings' activity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Day {
    /// `YYYY-MM-DD` (UTC).
    pub(crate) day: String,
    pub(crate) created: u64,
    /// Lessons recorded again and merged into an existing learning.
    pub(crate) confirmed: u64,
    pub(crate) superseded: u64,
}

/// What happened to the learnings (the web page's pictures).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LearningTrends {
    /// The last `days` days with any activity, oldest first.
    pub(crate) days: Vec<Day>,
    /// Learnings per quality score in tens: `quality[i]` counts scores `10i..10i+9`,
    /// `quality[10]` the 100s.
    pub(crate) quality: [u64; 11],
}

impl Learnings<'_> {
    /// Learnings added, confirmed and superseded per day over the last `days` days that
    /// saw any, and the quality scores' distribution.
    pub(crate) fn trends(&self, days: usize) -> Result<LearningTrends> {
        self.store.read(|c| {
            let rows = c.query_map(
                "SELECT substr(at, 1, 10) AS day,
                        sum(CASE WHEN event = 'created' THEN 1 ELSE 0 END),
                        sum(CASE WHEN event = 'merged' THEN 1 ELSE 0 END),
                        sum(CASE WHEN event = 'superseded' THEN 1 ELSE 0 END)
                 FROM learning_history
                 WHERE event IN ('created', 'merged', 'superseded')
                 GROUP BY substr(at, 1, 10) ORDER BY day DESC LIMIT ?1",
                params![days as i64],
                |r| {
                    Ok(Day {
                        day: r.get(0)?,
                        created: r.get::<_, i64>(1)? as u64,
                        confirmed: r.get::<_, i64>(2)? as u64,
                        superseded: r.get::<_, i64>(3)? as u64,
                    })
                },
            )?;
            let mut quality = [0u64; 11];
            for (bucket, n) in c.query_map(
                "SELECT quality_score / 10, count(*) FROM learnings GROUP BY quality_score / 10",
                [],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
            )? {
                quality[bucket.clamp(0, 10) as usize] += n as u64;
            }
            let mut days = rows;
            days.reverse();
            Ok(LearningTrends { days, quality })
        })
    }
}
