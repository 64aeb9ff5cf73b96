//! Approximate nearest neighbours for a project with many learnings: an HNSW graph
//! (the [`VectorIndex`] the vault uses too) over the project's vectors, built in the
//! background and kept up to date as vectors arrive.
//!
//! The exact scan costs about 2 ms per 10,000 learnings of a project; from
//! [`graph_min`] learnings on (default [`GRAPH_MIN`]), a project's [`Block`] gets a graph.
//! The graph is derived data held in memory only:
//!
//! - **Built off the search path.** A refresh that brings a project's vectors past the
//!   threshold hands them to the process's graph builder (one thread, inserting on the
//!   global rayon pool) in jobs of [`JOB_POINTS`]; later vectors follow in jobs of at least
//!   [`FOLLOW_POINTS`]. A job copies its vectors (the builder never reads the view).
//! - **Searched with an exact tail.** The graph covers the block's first `covered`
//!   positions (jobs run in order); a search asks the graph for those and scans the rest
//!   of the block exactly, so a learning is found from the moment its vector is read,
//!   and a process whose graph is not built yet (a one-shot CLI) answers exactly.
//! - **Exact scores.** A neighbour's score is recomputed from the block's own vector, so a
//!   learning found through the graph has the very cosine the exact scan gives it.
//!
//! [`Block`]: super::semantic
//! [`VectorIndex`]: crate::embed::hnsw::VectorIndex

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use crate::embed::DIMENSION;
use crate::embed::hnsw::{DEFAULT_EF_SEARCH, VectorIndex};

/// A project's learnings from which its vectors get a graph (see the module docs).
pub const GRAPH_MIN: usize = 20_000;
/// Points per job of a graph's first build: the graph becomes usable (for what it
/// covers) job by job.
const JOB_POINTS: usize = 16_384;
/// New vectors of a project with a graph are handed to the builder once this many have
/// arrived; until then the search scans them exactly.
pub(crate) const FOLLOW_POINTS: usize = 256;

/// The threshold in force: [`GRAPH_MIN`], or `CAIRN_LEARNINGS_GRAPH_MIN` (read once),
/// which tests use to put small projects through a graph.
pub(crate) fn graph_min() -> usize {
    static MIN: OnceLock<usize> = OnceLock::new();
    *MIN.get_or_init(|| {
        std::env::var("CAIRN_LEARNINGS_GRAPH_MIN")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(GRAPH_MIN)
    })
}

/// The search breadth for `k` neighbours.
/// 3k: on the bench's 100,000 learnings in one project, recall@10 against the exact
/// scan was 0.970 at 2k, 0.988 at 3k and 0.990 at 4k, for 3.0, 3.6 and 5.0 ms per dense
/// search (docs/perf/learnings.md).
fn ef(k: usize) -> usize {
    DEFAULT_EF_SEARCH.max(3 * k)
}

/// What the builder and the searches share.
struct Shared {
    index: VectorIndex,
    /// The block's positions `[0, covered)` are in the graph.
    covered: AtomicUsize,
    /// An insert failed: the graph covers no more (the rest is scanned exactly).
    failed: AtomicBool,
    /// Notified when `covered` grows or `failed` is set.
    grew: (Mutex<()>, Condvar),
}

/// One block's graph, and how far its block was handed to the builder.
pub(crate) struct Graph {
    shared: Arc<Shared>,
    /// Positions `[0, queued)` were handed to the builder.
    queued: usize,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("covered", &self.covered())
            .field("queued", &self.queued)
            .finish()
    }
}

/// Work for the builder: insert `points`, then mark `[0, to)` covered.
struct Job {
    shared: Arc<Shared>,
    points: Vec<(u64, Vec<f32>)>,
    to: usize,
}

/// The process's graph builder: started with the first job, it lives as long as the
/// process and sleeps while there is nothing to build.
fn builder() -> Option<Sender<Job>> {
    static TX: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        std::thread::Builder::new()
            .name("learnings-graph".into())
            .spawn(move || {
                for job in rx {
                    // A view dropped meanwhile (the graph's last holder is this job).
                    if Arc::strong_count(&job.shared) == 1 {
                        continue;
                    }
                    let shared = &job.shared;
                    if shared.failed.load(Ordering::Acquire) {
                        continue;
                    }
                    let refs: Vec<(u64, &[f32])> =
                        job.points.iter().map(|(s, v)| (*s, v.as_slice())).collect();
                    // hnsw_rs may panic on input it does not expect: the graph then
                    // stops growing, and the searches scan the rest.
                    let inserted =
                        match catch_unwind(AssertUnwindSafe(|| shared.index.insert_batch(&refs))) {
                            Ok(done) => done.map_err(|e| e.to_string()),
                            Err(_) => Err("the insert panicked".to_string()),
                        };
                    let (lock, grew) = &shared.grew;
                    let _held = lock.lock().unwrap_or_else(|p| p.into_inner());
                    match inserted {
                        Ok(()) => shared.covered.store(job.to, Ordering::Release),
                        Err(e) => {
                            tracing::warn!(error = %e, "learnings graph: insert failed; the rest stays exact");
                            shared.failed.store(true, Ordering::Release);
                        }
                    }
                    grew.notify_all();
                }
            })
            .map_err(|e| tracing::warn!(error = %e, "learnings graph: no builder thread; searches stay exact"))
            .ok()?;
        Some(Mutex::new(tx))
    })
    .as_ref()
    .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()).clone())
}

impl Graph {
    /// Positions of the block in the graph (a prefix).
    pub(crate) fn covered(&self) -> usize {
        self.shared.covered.load(Ordering::Acquire)
    }

    /// Wait until the graph covers every position handed to the builder, or an insert
    /// failed; the points covered.
    pub(crate) fn wait_covered(&self) -> usize {
        let want = self.queued;
        let (lock, grew) = &self.shared.grew;
        let held = lock.lock().unwrap_or_else(|p| p.into_inner());
        let _held = grew
            .wait_while(held, |_| {
                self.covered() < want && !self.shared.failed.load(Ordering::Acquire)
            })
            .unwrap_or_else(|p| p.into_inner());
        self.covered()
    }

    /// Hand the block's positions from `queued` on to the builder, when the block has
    /// grown enough (`seqs` and `data` are the block's, `data` [`DIMENSION`] per seq);
    /// `None` (no graph) while the block is under [`graph_min`].
    pub(crate) fn follow(graph: &mut Option<Graph>, min: usize, seqs: &[u64], data: &[f32]) {
        let len = seqs.len();
        if graph.is_none() && len < min {
            return;
        }
        let g = graph.get_or_insert_with(|| Graph {
            shared: Arc::new(Shared {
                index: VectorIndex::new(DIMENSION, len),
                covered: AtomicUsize::new(0),
                failed: AtomicBool::new(false),
                grew: (Mutex::new(()), Condvar::new()),
            }),
            queued: 0,
        });
        if len - g.queued < FOLLOW_POINTS && g.queued > 0 {
            return;
        }
        let Some(tx) = builder() else { return };
        while g.queued < len {
            let to = (g.queued + JOB_POINTS).min(len);
            let points = (g.queued..to)
                .map(|i| (seqs[i], data[i * DIMENSION..(i + 1) * DIMENSION].to_vec()))
                .collect();
            let job = Job {
                shared: g.shared.clone(),
                points,
                to,
            };
            if tx.send(job).is_err() {
                return;
            }
            g.queued = to;
        }
    }

    /// The `k` best learnings `accept`ed among the graph's points, as seqs (their
    /// scores are for the caller to compute exactly); `None` if the graph cannot answer.
    /// A job in progress may have inserted points past the covered prefix: the caller,
    /// which scans those exactly, rejects them in `accept`.
    pub(crate) fn nearest(
        &self,
        query: &[f32],
        k: usize,
        accept: impl Fn(u64) -> bool,
    ) -> Option<Vec<u64>> {
        let found = self.shared.index.search(query, k, ef(k), accept).ok()?;
        Some(found.into_iter().map(|(seq, _)| seq).collect())
    }
}
