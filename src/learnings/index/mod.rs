//! The tantivy index of learnings: derived from SQLite, caught up by `seq`, shared by
//! every process serving the database.
//!
//! **Architecture invariant.** The index holds exactly the learnings `1..=W` for some
//! watermark `W` (the largest `seq` fast-field value it contains; learnings are never
//! deleted, and a tantivy commit is atomic). SQLite write transactions are serialised
//! and `seq` is `AUTOINCREMENT`, so once `max(seq)` is visible every smaller one is too.
//! A process is therefore up to date when `W == max(seq)`, a query that costs
//! microseconds, run before every search.
//!
//! **Life cycle.**
//! - *Read your own writes*: `add_learning` commits to SQLite and returns; the rows are
//!   searchable at once through the tail (below). How they reach the disk index depends
//!   on the process:
//!   - a long-lived process (`cairn serve`, `cairn daemon`) starts a **background
//!     indexer** ([`LearningIndex::start_indexer`]): one thread, woken by every write
//!     (and by a search that finds the index behind), that catches the index up to
//!     `max(seq)` in one commit. Writes arriving while it commits, or within
//!     [`COMMIT_SPACING`] of the last commit, are taken together by the next commit
//!     (group commit: one ~30 ms commit for many learnings instead of one each, and one
//!     contender for the writer lock per process instead of one per call; meanwhile the
//!     tail finds them). [`LearningIndex::flush`] waits for it without the spacing (a
//!     server's clean exit);
//!   - a one-shot process (`cairn learnings add`) indexes inline, waiting up to
//!     [`ADD_WRITER_WAIT`] for the writer lock.
//!
//!   Either way nothing is lost on `kill -9`: SQLite is the truth, and whoever runs next
//!   catches the index up.
//! - *Searches share one view* (reader, tail, caches) under a read lock. A search that
//!   finds the view behind its watermarks takes the write lock and refreshes it: it
//!   reloads the reader when the disk index can have changed (always without a
//!   background indexer; with one, once the indexer finished a round since the last
//!   reload), then, if still behind, wakes the indexer (or, without one, takes the
//!   writer without waiting and indexes the missing rows itself), and indexes only the
//!   rows new since the last refresh, appending them to the tail.
//! - *One writer at a time*: tantivy's directory lock. Each write opens a **fresh**
//!   `Index` (a long-lived one would save a stale managed-file list over another
//!   process's), re-reads `W` from it, indexes `seq > W`, commits, waits for merges.
//! - *Writer busy*: a search never waits for it. Rows past `W` (the *tail*) are counted
//!   in memory ([`super::tail`]), and both are scored with one set of BM25 statistics
//!   (summed over both), so scores are the same as if the tail were indexed. A tail of
//!   more than [`TAIL_MAX`] rows (a missing index being rebuilt elsewhere) waits up to
//!   [`REBUILD_WRITER_WAIT`] for the writer first.
//! - *Crash or deleted directory*: an interrupted commit leaves the previous commit, so
//!   `W` is just lower and the next use catches up; a missing directory is recreated
//!   and filled from SQLite; an unreadable one (or another schema) is wiped and rebuilt.
//!   `cairn learnings reindex` rebuilds on demand (readers keep the old commit until
//!   the new one lands).
//!
//! **Quality at search time.** The blend needs each candidate's quality score, verified
//! flag and project. They are kept in memory per process ([`super::meta`]), refreshed
//! from SQLite before each search by two watermarks: `max(seq)` (new learnings) and
//! `max(learning_history.id)` (every verify and rate writes a history row), so a rating
//! made by another process counts on the next search. Filters (project, quality) run
//! inside the top-k collection, which keeps block-WAND pruning.
//!
//! Failpoint for tests (`crate::base::failpoint`, `testing` builds only):
//! `CAIRN_FAILPOINT=learnings-index-commit` aborts the process
//! after the segment files are written and before the commit is published.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use tantivy::{Index, IndexReader, ReloadPolicy, Searcher};

use crate::embed::Embed;
use crate::embed::foreground::Foreground;
use crate::error::{Error, Result};
use crate::store::{Location, Store};

use super::lifecycle::CodeSignature;
use super::meta::MetaCache;
use super::query::ScoreBreakdown;
use super::semantic::Vectors;
use super::tail::Tail;

// The index by what it does: what it holds and how it is written (`rows`), the
// background indexer (`indexer`), the view a search reads (`view`: reader, tail,
// caches), the candidates of recent searches a view keeps (`recent`), one search on
// one view (`search`), the query in index terms (`terms`), and restatements grouped
// under their head (`group`). They share this module's types
// (`LearningIndex`, `Ranked`, the constants) through `use super::*`.
mod group;
mod indexer;
mod recent;
mod rows;
mod search;
mod terms;
mod view;

use group::*;
use indexer::*;
use recent::*;
use rows::*;
use search::*;
use terms::*;
use view::*;

pub use indexer::IndexerStats;
pub(crate) use search::{IndexSearch, LexicalHalf};

/// How long `add_learning` waits for the writer lock before leaving the rows to the
/// next search.
pub(crate) const ADD_WRITER_WAIT: Duration = Duration::from_secs(2);
/// How long a rebuild (or a search facing a huge tail) waits for the writer lock.
pub(crate) const REBUILD_WRITER_WAIT: Duration = Duration::from_secs(60);
/// Largest tail a search counts in memory rather than waiting for the writer.
pub(crate) const TAIL_MAX: u64 = 5_000;
/// Least time between two commits of the background indexer (a flush does not wait for
/// it): writes in between are found through the tail, and one commit takes them all.
pub(crate) const COMMIT_SPACING: Duration = Duration::from_millis(200);
/// Rows read from SQLite per batch while indexing.
const BATCH: usize = 5_000;

/// Which learnings a search may return.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SearchScope {
    /// Learnings of this project (id).
    Project(String),
    /// Learnings of every project but this one (id).
    OtherProjects(String),
    /// Every learning.
    All,
}

/// How a search orders its hits: the blend, or one of the baselines `cairn eval`
/// compares it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ranking {
    /// The blend of relevance (lexical and semantic), field priority and quality.
    #[default]
    Blend,
    /// BM25 alone.
    Lexical,
    /// Cosine similarity of embeddings alone.
    Dense,
    /// The blend with every quality fixed at 50 and no ageing: what evidence-derived
    /// quality is measured against.
    FixedQuality,
}

/// A candidate before hydration: its `seq` and score.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ranked {
    pub(crate) seq: u64,
    /// What the ranking sorted by.
    pub(crate) key: f32,
    pub(crate) score: ScoreBreakdown,
    pub(crate) quality: u8,
    pub(crate) verified: bool,
    /// The higher-ranked learning this one says much the same as, with the cosine of
    /// their embeddings: it is listed under that one (see [`group`](group::group)).
    pub(crate) similar_to: Option<(u64, f32)>,
    /// For a hit: how many of its restatements were left out (see
    /// [`group`](group::group)).
    pub(crate) similar_omitted: u32,
}

/// Per-process handle on the learnings index of one database.
#[derive(Debug)]
pub struct LearningIndex {
    dir: PathBuf,
    /// The open view: searches share it under read locks; a search that finds it
    /// behind the database brings it up to date under the write lock.
    state: RwLock<Option<OpenSlot>>,
    /// Learnings up to this `seq` were found to have an embedding (backfill watermark).
    pub(crate) embedded_upto: AtomicU64,
    /// Learnings from this `seq` on are embedded by the background indexer, not by the
    /// write or a search (`u64::MAX` without one).
    deferred_from: AtomicU64,
    /// The background indexer, once started.
    indexer: OnceLock<Arc<Indexer>>,
    /// The [`CodeSignature`]s grouping restatements read lately, by learning `seq` (a
    /// learning's pattern and context never change, and a `seq` is never reused): a
    /// search over learnings earlier searches grouped reads no text (issue 59).
    signatures: Mutex<lru::LruCache<u64, Option<Arc<CodeSignature>>>>,
}

/// Code signatures kept by [`LearningIndex::signature`]: a few hundred bytes each.
pub(crate) const SIGNATURES_KEPT: usize = 16_384;

impl LearningIndex {
    pub(crate) fn new(dir: PathBuf) -> Self {
        LearningIndex {
            dir,
            state: RwLock::new(None),
            embedded_upto: Default::default(),
            deferred_from: AtomicU64::new(u64::MAX),
            indexer: OnceLock::new(),
            signatures: Mutex::new(lru::LruCache::new(
                NonZeroUsize::new(SIGNATURES_KEPT).expect("not zero"),
            )),
        }
    }

    /// Learning `seq`'s [`CodeSignature`]: kept from an earlier search, or computed from
    /// its text as `read` reads it (`Err` when it cannot be read: then nothing is kept,
    /// and it restates nothing by its code this time).
    pub(crate) fn signature(
        &self,
        seq: u64,
        read: impl FnOnce() -> Result<Option<String>>,
    ) -> Option<Arc<CodeSignature>> {
        let kept = || {
            self.signatures
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(known) = kept().get(&seq) {
            return known.clone();
        }
        let sig = match read() {
            Ok(text) => text.map(|t| Arc::new(CodeSignature::of(&t))),
            Err(e) => {
                tracing::warn!(seq, "reading a learning to group restatements failed ({e})");
                return None;
            }
        };
        kept().put(seq, sig.clone());
        sig
    }

    /// Index and embed new learnings in the background from now on (long-lived
    /// processes; see the module doc): start the indexer thread over its own connection
    /// to the database at `db`, and catch up whatever earlier processes (or hosts) left
    /// unindexed or unembedded. Learnings written from now on are embedded by that
    /// thread with `embedder`, after their write is acknowledged. Starting it twice is
    /// a no-op.
    pub(crate) fn start_indexer(
        &self,
        db: &Location,
        embedder: Arc<dyn Embed>,
        foreground: Arc<Foreground>,
    ) -> Result<()> {
        if self.indexer.get().is_some() {
            return Ok(());
        }
        let store = Store::open_at(db)?;
        let indexer = Arc::new(Indexer::default());
        if self.indexer.set(indexer.clone()).is_err() {
            return Ok(());
        }
        let max: i64 = store.read(|c| {
            c.query_row("SELECT coalesce(max(seq), 0) FROM learnings", [], |r| {
                r.get(0)
            })
        })?;
        self.deferred_from.store(max as u64 + 1, Ordering::Relaxed);
        let embed_store = Store::open_at(db)?;
        let dir = self.dir.clone();
        let worker = indexer.clone();
        std::thread::Builder::new()
            .name("learnings-indexer".into())
            .spawn(move || worker.run_index(&store, &dir))
            .map_err(|e| Error::Internal(format!("starting the learnings indexer: {e}")))?;
        let worker = indexer.clone();
        std::thread::Builder::new()
            .name("learnings-embedder".into())
            .spawn(move || worker.run_embed(&embed_store, &*embedder, &foreground))
            .map_err(|e| Error::Internal(format!("starting the learnings embedder: {e}")))?;
        indexer.nudge();
        Ok(())
    }

    /// Wait (up to [`REBUILD_WRITER_WAIT`]) until the background indexer has caught up
    /// with every write made before the call, or gave up on a busy writer. Returns at once
    /// without an indexer.
    pub(crate) fn flush(&self) {
        let Some(ix) = self.indexer.get() else { return };
        let deadline = Instant::now() + REBUILD_WRITER_WAIT;
        if !(ix.index.flush(deadline) && ix.embed.flush(deadline)) {
            tracing::warn!(
                "the learnings indexer did not finish in time; the next process catches up"
            );
        }
    }

    /// Bring this process's view up to date with the database now, as the next search
    /// would: the background indexer (if any) indexes what any process or host wrote,
    /// then the reader is reloaded and the quality and vector caches refreshed. A
    /// daemon woken by a write on another host does it in the background.
    pub(crate) fn catch_up_now(&self, store: &Store) -> Result<()> {
        self.flush();
        let marks = watermarks(store)?;
        self.fresh(store, &mut self.write(), marks).map(drop)
    }

    /// Bring the view up to date, then wait until the graphs of its large projects
    /// hold every vector handed to them; the points they hold (see
    /// [`crate::learnings`]'s graph module). For benchmarks and tools that measure:
    /// searches never wait for a graph.
    pub(crate) fn wait_for_graphs(&self, store: &Store) -> Result<usize> {
        self.catch_up_now(store)?;
        Ok(self
            .read()
            .as_ref()
            .map_or(0, |o| o.0.vectors.wait_for_graphs()))
    }

    /// Points this process's HNSW graphs of the learnings hold now (0 before the first
    /// search, and for projects under the graph's threshold).
    pub(crate) fn graph_points(&self) -> usize {
        self.read()
            .as_ref()
            .map_or(0, |o| o.0.vectors.graph_points())
    }

    /// What the background indexer has done so far (zero without one).
    pub(crate) fn indexer_stats(&self) -> IndexerStats {
        self.indexer
            .get()
            .map(|ix| IndexerStats {
                commits: ix.commits.load(Ordering::Relaxed),
                indexed: ix.indexed.load(Ordering::Relaxed),
                embedded: ix.embedded.load(Ordering::Relaxed),
            })
            .unwrap_or_default()
    }

    /// The first `seq` the background indexer embeds: a write or a search embeds only
    /// learnings below it (`u64::MAX` without an indexer).
    pub(crate) fn deferred_from(&self) -> u64 {
        self.deferred_from.load(Ordering::Relaxed)
    }

    /// Where the index lives.
    #[cfg(test)]
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn read(&self) -> RwLockReadGuard<'_, Option<OpenSlot>> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Option<OpenSlot>> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// After rows were committed to SQLite: wake the background indexer, or, without
    /// one, index them now, waiting briefly for the writer. Failures are logged, not
    /// returned: the rows are safe in SQLite, searchable through the tail, and the next
    /// search catches up.
    pub(crate) fn after_insert(&self, store: &Store) {
        if let Some(ix) = self.indexer.get() {
            ix.nudge();
            return;
        }
        match catch_up(store, &self.dir, ADD_WRITER_WAIT, false) {
            Ok(CatchUp::Indexed(_)) => {}
            Ok(CatchUp::Busy) => {
                tracing::info!("learnings index writer busy; the next search catches up")
            }
            Err(e) => {
                tracing::warn!("indexing new learnings failed ({e}); the next search retries")
            }
        }
    }

    /// Rebuild the index from SQLite; returns how many learnings it holds.
    pub(crate) fn rebuild(&self, store: &Store) -> Result<u64> {
        match catch_up(store, &self.dir, REBUILD_WRITER_WAIT, true)? {
            CatchUp::Indexed(n) => {
                *self.write() = None;
                Ok(n)
            }
            CatchUp::Busy => Err(Error::Index(format!(
                "another process has held the learnings index writer for over {}s; retry later",
                REBUILD_WRITER_WAIT.as_secs()
            ))),
        }
    }

    /// Bring the open view up to `marks` (watermarks read from SQLite before the caller
    /// took the write lock): caches first, then the disk index (reloaded only when it
    /// can have changed), then the tail.
    fn fresh<'s>(
        &self,
        store: &Store,
        slot: &'s mut Option<OpenSlot>,
        marks: Watermarks,
    ) -> Result<&'s mut Open> {
        let retry_disk = slot
            .as_ref()
            .and_then(|s| s.0.retry_disk_at)
            .map(|at| Instant::now() >= at);
        if retry_disk == Some(true) {
            // Try the disk again: space may have been freed. Until then the view in
            // memory stays, and only the learnings new since are added to it.
            match open_on_disk(&self.dir) {
                Ok(index) => {
                    tracing::info!(dir = %self.dir.display(), "learnings index usable again");
                    *slot = Some(OpenSlot(Open::over(index, None)?));
                }
                Err(_) => {
                    if let Some(s) = slot.as_mut() {
                        s.0.retry_disk_at = Some(Instant::now() + DISK_RETRY);
                    }
                }
            }
        } else if retry_disk.is_none() && slot.is_some() && !self.dir.join("meta.json").exists() {
            tracing::warn!("learnings index directory vanished; rebuilding it from SQLite");
            *slot = None;
        }
        if slot.is_none() {
            *slot = Some(OpenSlot(Open::new_or_in_memory(&self.dir)?));
        }
        let open = slot
            .as_mut()
            .map(|s| &mut s.0)
            .ok_or_else(|| index_err("not open"))?;
        // Whatever the refresh changes, the candidates kept for the view before it may
        // have changed too.
        open.recent = Recent::default();
        let max_seq = marks.seq;
        open.refresh_caches(store, marks)?;
        let indexer = self.indexer.get();
        // The rounds count is read before reloading, so a commit that lands meanwhile
        // is seen by the next refresh. Without an indexer another process may have
        // committed at any time.
        let rounds = indexer.map_or(0, |ix| ix.rounds.load(Ordering::Acquire));
        let moved = indexer.is_none_or(|_| rounds != open.rounds_seen);
        if open.upto < max_seq
            && moved
            && let Err(e) = open.reload(rounds)
        {
            tracing::warn!("reloading the learnings index failed ({e}); reopening it");
            *open = Open::new_or_in_memory(&self.dir)?;
            open.refresh_caches(store, marks)?;
        }
        if open.upto < max_seq
            && let Some(ix) = indexer.filter(|_| max_seq - open.upto <= TAIL_MAX)
        {
            // The tail below covers the rows until the indexer has committed them.
            ix.nudge();
        } else if open.upto < max_seq {
            let wait = if max_seq - open.upto > TAIL_MAX {
                REBUILD_WRITER_WAIT
            } else {
                Duration::ZERO
            };
            match catch_up(store, &self.dir, wait, false) {
                Ok(CatchUp::Indexed(_)) => open.reload(rounds)?,
                Ok(CatchUp::Busy) => {}
                Err(e) => tracing::warn!("catching up the learnings index failed ({e})"),
            }
        }
        open.extend_tail(store, max_seq)?;
        Ok(open)
    }

    /// How many learnings the open view's disk index held at its last refresh (0 before
    /// the first search opens it): what a search's lexical half scores among, less the
    /// few newest in the tail.
    pub(crate) fn learnings_held(&self) -> u64 {
        self.read().as_ref().map_or(0, |o| o.0.disk.num_docs())
    }

    /// Run a search on one view: BM25 top candidates under the filters, the nearest
    /// vectors of `vector` (when there is one), then the blend. The view is shared with
    /// concurrent searches; only a search that finds it behind the database's watermarks
    /// (read first, so it sees every write acknowledged before it began) takes the write
    /// lock to bring it up to date.
    pub(crate) fn search(
        &self,
        store: &Store,
        s: &IndexSearch<'_>,
        vector: Option<&[f32]>,
    ) -> Result<Vec<Ranked>> {
        self.with_view(store, |open| search_in(open, s, vector))
    }

    /// The lexical half of [`Self::search`], which needs no vector: a search runs it
    /// while its query is embedded, then [`Self::rank`].
    pub(crate) fn lexical(&self, store: &Store, s: &IndexSearch<'_>) -> Result<LexicalHalf> {
        self.with_view(store, |open| lexical_in(open, s))
    }

    /// The rest of [`Self::search`] after [`Self::lexical`]: the nearest vectors of
    /// `vector` and the blend, on a view that covers the database now (so it holds the
    /// vectors embedded since the lexical half, as a search's backfill does).
    pub(crate) fn rank(
        &self,
        store: &Store,
        s: &IndexSearch<'_>,
        lexical: LexicalHalf,
        vector: Option<&[f32]>,
    ) -> Result<Vec<Ranked>> {
        self.with_view(store, |open| Ok(rank_in(open, s, lexical, vector)))
    }

    /// The cosine similarity of `vector` with each learning of `seqs` that has an
    /// embedding (the duplicate check).
    pub(crate) fn cosines(
        &self,
        store: &Store,
        vector: &[f32],
        seqs: &[u64],
    ) -> Result<Vec<Option<f32>>> {
        self.with_view(store, |open| {
            Ok(seqs
                .iter()
                .map(|s| open.vectors.cosine(vector, *s))
                .collect())
        })
    }

    /// Run `f` on a view that covers the database's watermarks. The view is shared
    /// with concurrent readers; only a caller that finds it behind the watermarks (read
    /// first, so it sees every write acknowledged before it began) takes the write lock
    /// to bring it up to date.
    fn with_view<T>(&self, store: &Store, f: impl FnOnce(&Open) -> Result<T>) -> Result<T> {
        let marks = watermarks(store)?;
        {
            let view = self.read();
            if let Some(open) = view.as_ref().map(|o| &o.0).filter(|o| {
                o.covers(marks)
                    && (o.retry_disk_at.is_some() || self.dir.join("meta.json").exists())
            }) {
                return f(open);
            }
        }
        let mut view = self.write();
        let open = self.fresh(store, &mut view, marks)?;
        f(open)
    }
}

/// The number of learnings the on-disk index at `dir` holds, read without writing.
#[cfg(test)]
pub(crate) fn disk_watermark(dir: &Path) -> Result<u64> {
    let index = Index::open_in_dir(dir).map_err(index_err)?;
    register(&index);
    let open = Open::over(index, None)?;
    let searcher = open.disk;
    let docs =
        tantivy::query::Bm25StatisticsProvider::total_num_docs(&searcher).map_err(index_err)?;
    assert_eq!(docs, open.upto, "the index holds exactly 1..=W");
    Ok(docs)
}
