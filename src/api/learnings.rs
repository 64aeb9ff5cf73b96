//! Learnings: record, search, rate and verify reusable lessons; rebuild their index.

use crate::error::Result;
use crate::learnings::{
    Added, IndexerStats, Learning, LearningDetail, LearningSearch, LearningTrends, Learnings,
    NewFeedback, NewLearning, Ranking, Reader, ReindexReport, ReviewQueue, SearchResults, Sizes,
};

use super::Cairn;

impl Cairn {
    /// The learnings operations over this store, its index and the embedding model.
    pub(super) fn learnings(&self) -> Learnings<'_> {
        Learnings {
            store: &self.store,
            index: &self.learnings,
            embedder: &*self.vault.embedder,
        }
    }

    /// Index and embed new learnings in a background thread from now on (group commit;
    /// long-lived processes: `cairn serve`, `cairn daemon`).
    pub fn index_learnings_in_background(&self) -> Result<()> {
        self.learnings.start_indexer(
            self.store.location(),
            self.vault.embedder.clone(),
            self.foreground.clone(),
        )
    }

    /// Wait until the background indexer has indexed every learning written so far.
    pub(crate) fn flush_learnings_index(&self) {
        self.learnings.flush()
    }

    /// Catch the learnings index and its caches up with the database now (a daemon
    /// woken by another host's write).
    pub(crate) fn catch_up_learnings(&self) -> Result<()> {
        self.learnings.catch_up_now(&self.store)
    }

    /// How many learnings there are, and how many wait for their embedding.
    pub(crate) fn learnings_sizes(&self) -> Result<Sizes> {
        self.learnings().sizes()
    }

    /// Learnings added, confirmed and superseded per day over the last `days` days that
    /// saw any, and the quality scores' distribution.
    pub(crate) fn learnings_activity(&self, days: usize) -> Result<LearningTrends> {
        self.learnings().trends(days)
    }

    /// What the background indexer has done.
    pub(crate) fn learnings_indexer_stats(&self) -> IndexerStats {
        self.learnings.indexer_stats()
    }

    /// Points this process's HNSW graphs of the learnings hold (see
    /// [`Cairn::wait_for_learning_graphs`]).
    pub(crate) fn learnings_graph_points(&self) -> usize {
        self.learnings.graph_points()
    }

    /// Record learnings, all in one transaction, then index them; a learning that says
    /// the same as one of its project is merged into it.
    pub fn add_learnings(&self, items: &[NewLearning]) -> Result<Vec<Added>> {
        self.learnings().add_learnings(items)
    }

    /// Record one learning (or merge it into the one that says the same).
    pub fn add_learning(&self, new: &NewLearning) -> Result<Added> {
        self.learnings().add_learning(new)
    }

    /// A person replaces `old` by `new` (same project) at once, accepting an agent's
    /// proposal of the pair if there is one.
    pub fn supersede_learning(&self, old: &str, new: &str, actor: &str) -> Result<Learning> {
        self.learnings().supersede_learning(old, new, actor)
    }

    /// A person rejects an agent's proposal that `new` supersede `old`.
    pub fn reject_supersession(
        &self,
        old: &str,
        new: &str,
        actor: &str,
        note: Option<&str>,
    ) -> Result<Learning> {
        self.learnings().reject_supersession(old, new, actor, note)
    }

    /// A person undoes the supersession of `old`: back in circulation with its history.
    pub fn unsupersede_learning(
        &self,
        old: &str,
        actor: &str,
        note: Option<&str>,
    ) -> Result<Learning> {
        self.learnings().unsupersede_learning(old, actor, note)
    }

    /// A person releases a held learning: served to every agent from now on.
    pub fn release_learning(&self, id: &str, actor: &str, note: Option<&str>) -> Result<Learning> {
        self.learnings().release_learning(id, actor, note)
    }

    /// What waits for a person: held learnings, supersession proposals, flagged ones.
    pub fn review_queue(&self) -> Result<ReviewQueue> {
        self.learnings().review_queue()
    }

    /// One learning as `reader` may see it (an agent: not archived, not another issue's
    /// held one).
    pub(crate) fn learning_as(&self, id: &str, reader: Reader<'_>) -> Result<LearningDetail> {
        self.learnings().learning_as(id, reader)
    }

    /// Record an issue's verdict on a learning of its project.
    pub fn learning_feedback(&self, f: &NewFeedback) -> Result<Learning> {
        self.learnings().learning_feedback(f)
    }

    /// Search learnings under the blend.
    pub fn search_learnings(&self, s: &LearningSearch) -> Result<SearchResults> {
        self.learnings().search_learnings(s)
    }

    /// Search learnings under another ordering (`cairn eval`).
    pub fn search_learnings_ranked(
        &self,
        s: &LearningSearch,
        ranking: Ranking,
    ) -> Result<SearchResults> {
        self.learnings().search_learnings_ranked(s, ranking)
    }

    /// One learning with its supersession chain and history.
    pub fn learning(&self, id: &str) -> Result<LearningDetail> {
        self.learnings().learning(id)
    }

    /// Mark a learning verified by a person.
    pub fn verify_learning(&self, id: &str, actor: &str, note: Option<&str>) -> Result<Learning> {
        self.learnings().verify_learning(id, actor, note)
    }

    /// A person says a learning is wrong: flagged for review, no longer verified.
    pub(crate) fn flag_learning(
        &self,
        id: &str,
        actor: &str,
        note: Option<&str>,
    ) -> Result<Learning> {
        self.learnings().flag_learning(id, actor, note)
    }

    /// A person takes a learning out of circulation without a successor: out of every
    /// search and never merged into, until restored.
    pub fn archive_learning(&self, id: &str, actor: &str, note: Option<&str>) -> Result<Learning> {
        self.learnings().archive_learning(id, actor, note)
    }

    /// Bring an archived learning back into circulation.
    pub fn restore_learning(&self, id: &str, actor: &str, note: Option<&str>) -> Result<Learning> {
        self.learnings().restore_learning(id, actor, note)
    }

    /// Set a learning's quality score (0-100); recorded in its history.
    pub fn rate_learning(
        &self,
        id: &str,
        score: u8,
        actor: &str,
        note: Option<&str>,
    ) -> Result<Learning> {
        self.learnings().rate_learning(id, score, actor, note)
    }

    /// Embed texts with the learnings' model, as a learning is embedded (`cairn eval`).
    pub(crate) fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Ok(self.vault.embedder.embed_batch(texts)?)
    }

    /// Wait until this process's HNSW graphs of the learnings (of projects with
    /// [`GRAPH_MIN`](crate::learnings::GRAPH_MIN) learnings or more) hold every vector
    /// read so far; the points they hold. Searches never wait (they scan exactly what a
    /// graph does not hold yet): this is for benchmarks that measure the graphs.
    pub fn wait_for_learning_graphs(&self) -> Result<usize> {
        self.learnings().wait_for_graphs()
    }

    /// Rebuild the learnings index from SQLite and embed what has no embedding.
    pub fn reindex_learnings(&self) -> Result<ReindexReport> {
        self.learnings().reindex_learnings()
    }
}
