//! How many learnings there are and how many still wait for their embedding (the
//! daemon's metrics, docs/metrics.md).

use crate::error::Result;

use super::Learnings;

/// The learnings of every project.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sizes {
    pub learnings: u64,
    /// Learnings without an embedding yet (the background indexer's backlog).
    pub pending_embeddings: u64,
}

impl Learnings<'_> {
    pub fn sizes(&self) -> Result<Sizes> {
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
