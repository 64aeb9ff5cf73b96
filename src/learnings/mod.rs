//! Learnings: reusable patterns and gotchas an agent records on an issue, searched by
//! every later agent.
//!
//! The domain API is on [`Learnings`] (the store, the index and the model it works
//! over), one file per responsibility:
//!
//! | module | owns |
//! | --- | --- |
//! | [`types`] | what the API takes and answers: [`Learning`], [`NewLearning`], [`LearningSearch`], [`SearchResults`], ... |
//! | [`validate`] | the quality gates of a new learning; the checks of ids and notes |
//! | [`add`] | writing and merging: `add_learnings` (duplicate check, merge, hold, supersessions) |
//! | [`search`] | searching: `search_learnings` over the index, hits read back with their restatements |
//! | [`load`] | learnings read from the database as the API answers them; [`Reader`]; one learning's detail |
//! | [`lifecycle`] | after the write: duplicates and restatements, evidence and feedback, supersession, age, a person's review and standing changes, the history rows |
//! | [`text`] | which characters a learning may hold; the duplicate-pattern normal form |
//! | [`query`] | agent text → search slots (stemming, prefixes, no parse failures) and the ranking blend with its documented normalisation |
//! | [`index`] | the derived tantivy index, its cross-process life cycle, one search |
//! | [`tail`] | what the index has not committed yet, scored in memory |
//! | [`meta`] | each learning's standing as a search needs it, kept per process |
//! | [`semantic`] | learning embeddings (the vault's model), backfill, exact cosine |
//! | [`graph`] | an HNSW graph for the projects with [`GRAPH_MIN`] learnings or more |
//! | [`hold`], [`trust`] | text held for a person; how far to trust a learning |
//! | [`sizes`] | counts for `/metrics` and the page's charts |
//! | this file | the [`Learnings`] handle, the field [`limits`], the index's upkeep (`reindex_learnings`, backfill) |
//!
//! Decisions where the spec is silent: a learning belongs to the project its issue had
//! when it was recorded; `learning_type` defaults to `pattern`; surrounding whitespace
//! of pattern and context is trimmed, everything else is stored as given (after the
//! character policy of [`text`]); `applies_to` entries are relative path prefixes
//! (no absolute paths, no `..`, no `~`).

mod add;
mod graph;
mod hold;
mod index;
mod lifecycle;
mod load;
mod meta;
mod query;
mod search;
mod semantic;
mod sizes;
mod tail;
mod text;
pub(crate) mod trust;
mod types;
mod validate;

use std::sync::atomic::Ordering;
use std::time::Instant;

pub(crate) use add::held_rules;
pub use graph::GRAPH_MIN;
pub use index::{IndexerStats, LearningIndex, Ranking, SearchScope};
pub(crate) use lifecycle::{CodeSignature, issue_approved, restates};
pub use lifecycle::{DUPLICATE_COSINE, FeedbackCounts, Outcome, same_lesson, word_overlap};
pub use load::Reader;
pub(crate) use load::learnings_of_issue;
pub use query::{STOP_WORDS, ScoreBreakdown};
pub(crate) use sizes::{Day, LearningTrends, Sizes};
pub(crate) use text::normalize_pattern;
pub use trust::Trust;
pub use types::{
    Added, HistoryEntry, Learning, LearningDetail, LearningSearch, LearningType, NewFeedback,
    NewLearning, Proposal, ReindexReport, ReviewQueue, SearchResults,
};
pub(crate) use types::{LearningHit, SimilarHit};

use crate::embed::Embed;
use crate::error::Result;
use crate::store::Store;

/// Limits on learning fields, shared by the CLI and the MCP schemas.
pub(crate) mod limits {
    pub(crate) const PATTERN_MIN: usize = 50;
    pub(crate) const PATTERN_MAX: usize = 2_000;
    pub(crate) const CONTEXT_MIN: usize = 100;
    pub(crate) const CONTEXT_MAX: usize = 10_000;
    pub(crate) const APPLIES_TO_MAX: usize = 20;
    pub(crate) const APPLIES_TO_ITEM_MAX: usize = 512;
    pub(crate) const QUERY_MAX: usize = 1_000;
    pub(crate) const LIMIT_DEFAULT: usize = 50;
    pub(crate) const LIMIT_MAX: usize = 100;
    pub(crate) const NOTE_MAX: usize = 1_000;
    pub(crate) const ID_MAX: usize = 64;
    /// Learnings one new learning may supersede (an agent may propose at most
    /// [`super::lifecycle::PROPOSALS_PER_CALL`] of them).
    pub(crate) const SUPERSEDES_MAX: usize = 20;
    /// Entries of each kind the review queue lists.
    pub(crate) const REVIEW_MAX: usize = 200;
    /// Quality scores run from 0 to this.
    pub(crate) const QUALITY_MAX: u8 = 100;
    /// Candidates taken by BM25 before the blend: `max(2 × limit, 100)`.
    pub(crate) const CANDIDATES_MIN: usize = 100;
}

/// What the learnings operations work over: the store, the process's tantivy index of
/// it, and the embedding model (shared with the vault).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Learnings<'a> {
    pub(crate) store: &'a Store,
    pub(crate) index: &'a LearningIndex,
    pub(crate) embedder: &'a dyn Embed,
}

impl Learnings<'_> {
    /// Embed up to `max` learnings that have no embedding yet (see [`semantic`]), of
    /// those a background indexer does not embed; returns how many. Needs the model.
    fn backfill_embeddings(&self, max: usize) -> Result<usize> {
        let after = self.index.embedded_upto.load(Ordering::Relaxed);
        let (n, reached) = if max == usize::MAX {
            semantic::backfill_all(self.store, self.embedder)?
        } else {
            let span = semantic::Span {
                after,
                below: self.index.deferred_from(),
            };
            semantic::backfill(self.store, self.embedder, span, max, semantic::Urgency::Now)?
        };
        self.index
            .embedded_upto
            .fetch_max(reached, Ordering::Relaxed);
        if n > 0 {
            tracing::info!(learnings = n, "embedded learnings that had no embedding");
        }
        Ok(n)
    }

    /// See [`crate::Cairn::wait_for_learning_graphs`].
    pub(crate) fn wait_for_graphs(&self) -> Result<usize> {
        self.index.wait_for_graphs(self.store)
    }

    /// Rebuild the learnings index from SQLite, and embed every learning that has no
    /// embedding (when the model is available).
    pub(crate) fn reindex_learnings(&self) -> Result<ReindexReport> {
        let t = Instant::now();
        let n = self.index.rebuild(self.store)?;
        let aged = self.record_aging()? as u64;
        let (embedded, semantic_unavailable) = match self.embedder.load() {
            Ok(()) => (self.backfill_embeddings(usize::MAX)? as u64, None),
            Err(e) => (0, Some(e.to_string())),
        };
        Ok(ReindexReport {
            learnings: n,
            aged,
            embedded,
            semantic_unavailable,
            millis: t.elapsed().as_millis() as u64,
        })
    }
}
