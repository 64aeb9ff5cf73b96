//! The background indexer of a long-lived process: two lanes, one indexing and one
//! embedding, each a thread woken by writes (see the module docs of [`super`]).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::embed::Embed;
use crate::embed::foreground::Foreground;
use crate::store::Store;

use super::super::semantic::{self};

use super::*;

/// The background indexer's shared state: two lanes, each a thread with a wake-up
/// flag (one indexes, one embeds, so a model load or a busy model never delays an
/// index commit), and what they have done.
#[derive(Debug, Default)]
pub(super) struct Indexer {
    pub(super) index: Lane,
    pub(super) embed: Lane,
    /// Commits that indexed at least one learning.
    pub(super) commits: AtomicU64,
    /// Learnings those commits indexed.
    pub(super) indexed: AtomicU64,
    /// Learnings it embedded.
    pub(super) embedded: AtomicU64,
    /// Index rounds finished (whatever they found to do).
    pub(super) rounds: AtomicU64,
}

/// One background thread's wake-up flag.
#[derive(Debug, Default)]
pub(super) struct Lane {
    pub(super) state: Mutex<IndexerState>,
    /// Signalled when `pending` is set.
    pub(super) wake: Condvar,
    /// Signalled after each round.
    pub(super) done: Condvar,
}

#[derive(Debug, Default)]
pub(super) struct IndexerState {
    /// Some write (or search) happened since the last round began.
    pub(super) pending: bool,
    /// A round is under way.
    pub(super) running: bool,
    /// A flush waits: the next round starts without waiting for its spacing.
    pub(super) hurry: bool,
}

impl Lane {
    pub(super) fn lock(&self) -> MutexGuard<'_, IndexerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn nudge(&self) {
        self.lock().pending = true;
        self.wake.notify_one();
    }

    /// The thread's loop: wait for a nudge, run a round, repeat. A round that did some
    /// work (`round` returns true) makes the next one wait until `spacing` has passed,
    /// unless a flush waits. Everything written while a round runs (or waits for its
    /// spacing) is taken by the next one.
    pub(super) fn serve(&self, spacing: Duration, mut round: impl FnMut() -> bool) {
        let mut due = Instant::now();
        loop {
            {
                let mut s = self.lock();
                loop {
                    let now = Instant::now();
                    if s.pending && (s.hurry || now >= due) {
                        break;
                    }
                    s = if s.pending {
                        self.wake
                            .wait_timeout(s, due - now)
                            .unwrap_or_else(|p| p.into_inner())
                            .0
                    } else {
                        self.wake.wait(s).unwrap_or_else(|p| p.into_inner())
                    };
                }
                s.pending = false;
                s.hurry = false;
                s.running = true;
            }
            if round() {
                due = Instant::now() + spacing;
            }
            self.lock().running = false;
            self.done.notify_all();
        }
    }

    /// Wait until every round asked for before the call has run, up to `deadline`;
    /// whether it had.
    pub(super) fn flush(&self, deadline: Instant) -> bool {
        let mut s = self.lock();
        s.pending = true;
        s.hurry = true;
        self.wake.notify_one();
        while s.pending || s.running {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            s = self
                .done
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }
}

impl Indexer {
    pub(super) fn nudge(&self) {
        self.index.nudge();
        self.embed.nudge();
    }

    /// The indexing thread: catch the index up to `max(seq)` in one commit per round.
    pub(super) fn run_index(&self, store: &Store, dir: &Path) {
        self.index.serve(COMMIT_SPACING, || {
            let committed = match catch_up(store, dir, ADD_WRITER_WAIT, false) {
                Ok(CatchUp::Indexed(0)) => false,
                Ok(CatchUp::Indexed(n)) => {
                    self.commits.fetch_add(1, Ordering::Relaxed);
                    self.indexed.fetch_add(n, Ordering::Relaxed);
                    true
                }
                Ok(CatchUp::Busy) => {
                    tracing::info!("learnings index writer busy; the next write or search retries");
                    false
                }
                Err(e) => {
                    tracing::warn!(
                        "indexing new learnings failed ({e}); the next write or search retries"
                    );
                    false
                }
            };
            self.rounds.fetch_add(1, Ordering::Release);
            committed
        });
    }

    /// The embedding thread: embed the learnings that have no vector, a few per model
    /// run, each once no call is in flight ([`semantic::Urgency::Idle`]).
    pub(super) fn run_embed(&self, store: &Store, embedder: &dyn Embed, foreground: &Foreground) {
        let mut embedded_upto = 0;
        let mut warned = false;
        // No spacing: each run already waits for a quiet moment.
        self.embed.serve(Duration::ZERO, || {
            loop {
                match semantic::backfill(
                    store,
                    embedder,
                    semantic::Span::after(embedded_upto),
                    semantic::BACKGROUND_BATCH,
                    semantic::Urgency::Idle(foreground),
                ) {
                    Ok((n, reached)) => {
                        embedded_upto = reached;
                        self.embedded.fetch_add(n as u64, Ordering::Relaxed);
                        if n < semantic::BACKGROUND_BATCH {
                            return false;
                        }
                    }
                    Err(e) => {
                        // Without the model every round fails the same way: say it once.
                        if !warned {
                            tracing::warn!(
                                "embedding new learnings failed ({e}); they stay lexical \
                                 until a later round or `cairn learnings reindex` embeds them"
                            );
                        }
                        warned = true;
                        return false;
                    }
                }
            }
        });
    }
}

/// What the background indexer has done (tests, benchmarks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexerStats {
    /// Commits that indexed at least one learning.
    pub(crate) commits: u64,
    /// Learnings indexed by those commits.
    pub(crate) indexed: u64,
    /// Learnings it embedded.
    pub(crate) embedded: u64,
}
