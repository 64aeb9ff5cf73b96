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
// background indexer (`indexer`), one search on one view (`search`). They share this
// module's types (`Open`, `LearningIndex`, the constants) through `use super::*`.
mod indexer;
mod rows;
mod search;

use indexer::*;
use rows::*;
use search::*;

pub use indexer::IndexerStats;
pub(crate) use search::IndexSearch;

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
#[derive(Debug, Clone, PartialEq, Eq)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
    /// their embeddings: it is listed under that one (see [`group`](search::group)).
    pub(crate) similar_to: Option<(u64, f32)>,
    /// For a hit: how many of its restatements were left out (see
    /// [`group`](search::group)).
    pub(crate) similar_omitted: u32,
}

/// An open reader with its caches: one consistent view, changed only under the
/// write lock ([`LearningIndex::fresh`]) and searched under read locks.
struct Open {
    reader: IndexReader,
    /// The disk index as searched: the reader's searcher at the last reload.
    disk: Searcher,
    /// Largest `seq` in `disk`.
    upto: u64,
    /// The background indexer's round count before the last reload: the disk index
    /// can have changed only if it moved on since.
    rounds_seen: u64,
    meta: MetaCache,
    vectors: Vectors,
    /// The learnings past `upto`, counted in memory: each refresh counts only the
    /// learnings new since the last one and appends them; the disk index catching up
    /// shortens it.
    tail: Option<Tail>,
    /// `Some` when the disk index could not be opened (a full or read-only index
    /// directory): an empty in-memory index, every learning scored in the in-memory
    /// tail, which is extended as learnings are added (not rebuilt per search); the disk
    /// is tried again from this instant on ([`DISK_RETRY`] after the last attempt).
    retry_disk_at: Option<Instant>,
}

/// How often a search tries the disk index again while it is served from memory.
const DISK_RETRY: Duration = Duration::from_secs(1);

impl Open {
    /// The disk index, or, when it cannot be opened, an empty in-memory one (a read
    /// never needs to write: the search then scores every learning as the tail).
    fn new_or_in_memory(dir: &Path) -> Result<Open> {
        match open_on_disk(dir) {
            Ok(index) => Open::over(index, None),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "learnings index unusable; searching from memory");
                let (schema, _) = schema();
                let index = Index::create_in_ram(schema);
                register(&index);
                Open::over(index, Some(Instant::now() + DISK_RETRY))
            }
        }
    }

    fn over(index: Index, retry_disk_at: Option<Instant>) -> Result<Open> {
        let reader: IndexReader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(index_err)?;
        let disk = reader.searcher();
        let upto = max_seq(&disk)?;
        Ok(Open {
            reader,
            disk,
            upto,
            rounds_seen: 0,
            meta: MetaCache::default(),
            vectors: Vectors::default(),
            tail: None,
            retry_disk_at,
        })
    }

    /// Whether this view answers a search made at `marks`: every learning, rating and
    /// embedding they cover is in it.
    fn covers(&self, marks: Watermarks) -> bool {
        self.retry_disk_at.is_none_or(|at| Instant::now() < at)
            && self.tail.as_ref().map_or(self.upto, |t| t.to) >= marks.seq
            && self.meta.seq_upto >= marks.seq
            && self.meta.history_upto >= marks.history
            && self.meta.limits_fresh()
            && self.vectors.upto() >= marks.embedding
    }

    /// Count the learnings in `(upto, to]` that the tail does not hold yet and append
    /// them to it; when the disk index has caught up with some of the tail, count all of
    /// `(upto, to]` again instead.
    fn extend_tail(&mut self, store: &Store, to: u64) -> Result<()> {
        let upto = self.upto;
        // A view never loses what it covered: a refresh for older watermarks (another
        // search's, which took the lock first) keeps the newer learnings.
        let to = to.max(self.tail.as_ref().map_or(0, |t| t.to));
        if self.tail.as_ref().is_some_and(|t| t.from < upto) {
            self.tail = None;
        }
        let from = self.tail.as_ref().map_or(upto, |t| t.to);
        if from < to {
            let new = build_tail(store, from, to)?;
            match &mut self.tail {
                Some(t) => t.append(new),
                None => self.tail = Some(new),
            }
        }
        Ok(())
    }

    /// Bring the metadata and vectors up to one snapshot's watermarks.
    fn refresh_caches(&mut self, store: &Store, marks: Watermarks) -> Result<()> {
        self.meta.refresh(store, marks.seq, marks.history)?;
        let meta = &self.meta;
        self.vectors.refresh(store, marks.embedding, |seq| {
            meta.get(seq).map(|m| m.project)
        })
    }

    fn reload(&mut self, rounds: u64) -> Result<()> {
        self.reader.reload().map_err(index_err)?;
        retire(std::mem::replace(&mut self.disk, self.reader.searcher()));
        self.upto = max_seq(&self.disk)?;
        self.rounds_seen = rounds;
        Ok(())
    }
}

/// Drop a replaced disk searcher on a thread of its own: closing its segments unmaps
/// their files, which blocks for milliseconds when other threads fault pages in, and
/// the search that reloads holds the view's write lock. (Should the thread not start,
/// the searcher is dropped here.)
fn retire(old: Searcher) {
    let _ = std::thread::Builder::new()
        .name("learnings-retire".into())
        .spawn(move || drop(old));
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

/// `Open` is not `Debug` (tantivy readers are not); this wrapper is.
struct OpenSlot(Open);

impl std::fmt::Debug for OpenSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Open").field("upto", &self.0.upto).finish()
    }
}

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

    /// Run a search: BM25 top candidates under the filters, then the blend. The view is
    /// shared with concurrent searches; only a search that finds it behind the
    /// database's watermarks (read first, so it sees every write acknowledged before
    /// it began) takes the write lock to bring it up to date.
    pub(crate) fn search(&self, store: &Store, s: &IndexSearch<'_>) -> Result<Vec<Ranked>> {
        self.with_view(store, |open| search_in(open, s))
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
    fn with_view<T>(&self, store: &Store, f: impl Fn(&Open) -> Result<T>) -> Result<T> {
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

#[cfg(test)]
mod tests {
    //! The tail scores exactly as the disk index would: the same learnings searched
    //! with every one on disk, and with most of them in the tail, rank the same.

    use super::*;
    use std::collections::{BTreeMap, HashMap};

    use crate::embed::{EmbedderConfig, ModelEmbedder};
    use crate::issues::{NewIssue, NewProject, create_issue, create_project};
    use crate::learnings::{Learnings, NewLearning};

    const TOPICS: [&str; 8] = [
        "migrations",
        "imports",
        "caching",
        "websockets",
        "graphql",
        "deploys",
        "fixtures",
        "timeouts",
    ];

    /// An embedder whose model is missing: learnings are stored without a vector and
    /// searched lexically.
    fn without_model() -> ModelEmbedder {
        ModelEmbedder::new(EmbedderConfig {
            model_dir: Some("/nonexistent/cairn-model".into()),
            ..Default::default()
        })
    }

    /// 60 learnings over two projects: varied lengths, contexts and applies-to, many
    /// sharing words, so that norms, frequencies and prefixes all matter.
    fn seeded() -> (tempfile::TempDir, Store, HashMap<&'static str, String>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cairn.db")).unwrap();
        let index = LearningIndex::new(dir.path().join("scratch-index"));
        let embedder = without_model();
        let learnings = Learnings {
            store: &store,
            index: &index,
            embedder: &embedder,
        };
        let mut projects = HashMap::new();
        for slug in ["web", "api"] {
            let p = create_project(
                &store,
                &NewProject {
                    slug: slug.into(),
                    name: slug.into(),
                    prefix: None,
                    path: None,
                },
            )
            .unwrap();
            projects.insert(slug, p.id);
            let issue = create_issue(
                &store,
                &NewIssue {
                    project: slug.into(),
                    title: "Learn".into(),
                    ..Default::default()
                },
            )
            .unwrap()
            .identifier;
            for i in 0..30 {
                let topic = TOPICS[i % TOPICS.len()];
                let other = TOPICS[(i * 3 + 1) % TOPICS.len()];
                let filler = " and then the service retries".repeat(i % 5);
                learnings
                    .add_learning(&NewLearning {
                        issue: issue.clone(),
                        pattern: format!(
                            "{topic} in {slug} break when {other} change{filler}; check {topic} {i}"
                        ),
                        context: (i % 3 != 0).then(|| {
                            format!(
                                "seen while fixing {other} timeouts, case {i}: the nightly job \
                                 failed twice before anyone noticed the {topic} change"
                            )
                        }),
                        applies_to: if i % 4 == 0 {
                            vec![format!("src/{topic}/"), "ci".into()]
                        } else {
                            vec![]
                        },
                        learning_type: None,
                        created_by: "test".into(),
                        agent_type: "test".into(),
                        merge: false,
                        supersedes: Vec::new(),
                        person: false,
                    })
                    .unwrap();
            }
        }
        (dir, store, projects)
    }

    /// A view whose disk index holds `1..=disk` and whose tail holds the rest, counted
    /// up to each of `steps` in turn (each step appended to the tail).
    fn view(store: &Store, dir: &Path, disk: u64, steps: &[u64]) -> Open {
        let index = open_on_disk(dir).unwrap();
        let mut writer: tantivy::IndexWriter = index.writer(15_000_000).unwrap();
        let (_, fields) = schema();
        for_rows(store, 0, disk, |row| {
            writer
                .add_document(row.document(&fields))
                .map(drop)
                .map_err(index_err)
        })
        .unwrap();
        writer.commit().unwrap();
        let mut open = Open::over(index, None).unwrap();
        assert_eq!(open.upto, disk);
        for &to in steps {
            open.extend_tail(store, to).unwrap();
        }
        open.refresh_caches(store, watermarks(store).unwrap())
            .unwrap();
        open
    }

    /// The learnings the tail holds, `(from, to]`.
    fn tail_range(open: &Open) -> Option<(u64, u64)> {
        open.tail.as_ref().map(|t| (t.from, t.to))
    }

    #[test]
    fn a_tail_grown_one_learning_at_a_time_counts_as_one_counted_at_once() {
        let (dir, store, _) = seeded();
        let mut grown = view(&store, &dir.path().join("grown"), 10, &[]);
        for to in 11..=60 {
            // What a search after every write does: count the new learning and append it.
            grown.extend_tail(&store, to).unwrap();
            assert_eq!(tail_range(&grown), Some((10, to)));
        }
        // Appended one at a time, the counts are those of the 50 counted at once.
        assert_eq!(grown.tail, Some(build_tail(&store, 10, 60).unwrap()));
        // The disk index catches up with some of the tail: the rest is counted again.
        grown.upto = 25;
        grown.extend_tail(&store, 60).unwrap();
        assert_eq!(tail_range(&grown), Some((25, 60)));
        grown.upto = 60;
        grown.extend_tail(&store, 60).unwrap();
        assert_eq!(tail_range(&grown), None);
    }

    #[test]
    fn a_tail_counted_in_steps_scores_as_the_disk_index() {
        let (dir, store, projects) = seeded();
        let all = view(&store, &dir.path().join("all"), 60, &[]);
        // A tail counted in three steps, each appended to the last.
        let split = view(&store, &dir.path().join("split"), 17, &[33, 41, 60]);
        assert!(all.tail.is_none());
        assert_eq!(tail_range(&split), Some((17, 60)));
        let scopes = [
            SearchScope::All,
            SearchScope::Project(projects["web"].clone()),
            SearchScope::OtherProjects(projects["web"].clone()),
        ];
        let queries = [
            "migrations",
            "graphql websockets",
            "timeouts retries",
            "check caching 7",
            "imp",
            "fix* dep",
            "src ci",
            "seen while fixing fixtures",
        ];
        let mut compared = 0;
        for q in queries {
            let parsed = super::super::query::parse(q).unwrap();
            for scope in &scopes {
                let search = IndexSearch {
                    query: &parsed,
                    scope,
                    min_quality: None,
                    // Every match: a cut inside a tie could keep either learning.
                    candidates: 100,
                    limit: 100,
                    vector: None,
                    ranking: Ranking::Lexical,
                    include_superseded: false,
                    include_archived: false,
                    min_trust: None,
                    signature: &|_| None,
                };
                let a = search_in(&all, &search).unwrap();
                let b = search_in(&split, &search).unwrap();
                assert!(!a.is_empty(), "{q} {scope:?} found nothing");
                // The same learnings with the same scores. Only the order of learnings
                // whose scores tie (the two projects hold texts alike but for the slug)
                // may differ: tantivy adds a document's term scores in an order of its
                // own, so a tie can differ in the last bit.
                let by_seq = |r: &[Ranked]| {
                    r.iter()
                        .map(|h| (h.seq, (h.key, h.score.total, h.score.field_priority)))
                        .collect::<BTreeMap<_, _>>()
                };
                let (on_disk, in_tail) = (by_seq(&a), by_seq(&b));
                assert_eq!(
                    on_disk.keys().collect::<Vec<_>>(),
                    in_tail.keys().collect::<Vec<_>>(),
                    "{q} {scope:?}"
                );
                let close = |x: f32, y: f32| (x - y).abs() <= 1e-6 * x.abs().max(1.0);
                for (seq, (bm25, total, priority)) in &on_disk {
                    let (bm25_t, total_t, priority_t) = in_tail[seq];
                    assert!(
                        close(*bm25, bm25_t) && close(*total, total_t),
                        "{q} {scope:?}: learning {seq} scored {bm25}/{total} on disk, \
                         {bm25_t}/{total_t} in the tail"
                    );
                    assert_eq!(*priority, priority_t, "{q} {scope:?}: learning {seq}");
                    compared += 1;
                }
                for (x, y) in a.iter().zip(&b) {
                    assert!(close(x.key, y.key), "{q} {scope:?}: rank order differs");
                }
            }
        }
        assert!(compared > 200, "only {compared} results compared");
    }

    /// An index directory that cannot be used (here a path beneath a regular file; a
    /// full disk in `tests/security.rs`): searches are answered from memory, the view in
    /// memory is kept and extended by new learnings rather than rebuilt for every
    /// search, and once the directory is usable again the next search after
    /// [`DISK_RETRY`] moves to the disk index.
    #[test]
    fn an_unusable_index_directory_is_searched_from_one_view_in_memory_until_it_recovers() {
        let (dir, store, _) = seeded();
        let blocker = dir.path().join("blocker");
        std::fs::write(
            &blocker,
            "a file where the index directory's parent should be",
        )
        .unwrap();
        let index = LearningIndex::new(blocker.join("learnings"));
        let embedder = without_model();
        let learnings = Learnings {
            store: &store,
            index: &index,
            embedder: &embedder,
        };
        let search = |q: &str| {
            learnings
                .search_learnings(&crate::learnings::LearningSearch {
                    query: q.into(),
                    scope: SearchScope::All,
                    limit: Some(100),
                    min_quality_score: None,
                    include_superseded: false,
                    include_archived: false,
                    min_trust: None,
                })
                .unwrap()
        };
        // Whether the view is in memory, and its tail.
        let state = |index: &LearningIndex| {
            let view = index.read();
            let open = &view.as_ref().expect("a view is open").0;
            (open.retry_disk_at.is_some(), tail_range(open))
        };
        assert!(search("migrations").count > 0);
        assert_eq!(state(&index), (true, Some((0, 60))));

        let issue = store
            .read(|c| c.query_row("SELECT identifier FROM issues LIMIT 1", [], |r| r.get(0)))
            .unwrap();
        // An old learning rewritten behind the view's back (Cairn never rewrites one): a
        // view that counted its tail again would find the new word.
        store
            .write(|c| {
                c.execute(
                    "UPDATE learnings SET pattern = 'albatross nesting' WHERE seq = 1",
                    [],
                )
            })
            .unwrap();
        learnings
            .add_learning(&NewLearning {
                issue,
                pattern: "zeppelin moorings need a second anchor line, or a gust swings the hull into the mast"
                    .into(),
                context: None,
                applies_to: vec![],
                learning_type: None,
                created_by: "test".into(),
                agent_type: "test".into(),
                merge: false,
                supersedes: Vec::new(),
                person: false,
            })
            .unwrap();
        assert_eq!(search("zeppelin").count, 1);
        assert_eq!(state(&index), (true, Some((0, 61))));
        assert_eq!(
            search("albatross").count,
            0,
            "only the new learning was counted"
        );

        // Usable again: the next search once the retry is due opens the disk index.
        std::fs::remove_file(&blocker).unwrap();
        assert_eq!(search("zeppelin").count, 1);
        assert!(
            state(&index).0,
            "the disk was tried before the retry was due"
        );
        index
            .write()
            .as_mut()
            .expect("a view is open")
            .0
            .retry_disk_at = Some(Instant::now());
        assert_eq!(search("zeppelin").count, 1);
        assert!(!state(&index).0, "still searching from memory");
        assert!(blocker.join("learnings/meta.json").exists());
    }
}
