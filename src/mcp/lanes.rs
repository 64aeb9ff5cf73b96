//! Which tool handlers run at once on a server that many sessions share (`cairn daemon`).
//!
//! On a loaded host every call waits for the cores, behind whatever the other sessions'
//! calls cost. In a closed loop of eight sessions on two cores, a `search_learnings`
//! (0.3-0.4 ms of CPU) took about as long as the mean call, 3 ms, because
//! `vault_retrieve` (about 1 ms), the writes and the listings ran beside it on both cores.
//! Searching learnings is what an agent does before nearly every step, and what must stay
//! fast while others write. So it runs as soon as it arrives ([`Lane::Reserved`]). Every
//! other tool's handler first takes one of the server's shared lanes ([`Lane::Shared`]),
//! by default one fewer than the cores ([`default_width`]): however many heavy calls
//! arrive, one core stays free for searches and for the transport that reads requests and
//! writes answers.
//!
//! The lanes shape a steady load; they must not turn a burst into a queue. A call that has
//! waited [`PATIENCE`] for a lane runs without one (eight sessions that open at once
//! with a `vault_retrieve` each would otherwise take turns on one core, the last one
//! waiting for seven).
//!
//! A tool may do some work before it waits ([`crate::mcp::tool::ToolDef::prepare`]): the
//! vault's searches embed their query there, so that queries arriving together still
//! share one model run instead of taking turns at the model, one lane at a time.
//!
//! Waiting for a lane holds no thread (an async semaphore, before the handler goes to the
//! blocking pool), and a lane is held exactly as long as its handler runs (the permit
//! moves into the blocking task, so a call given up by its client still holds its lane
//! until its handler returns). What it gains and costs, measured: docs/deployment.md,
//! "Searches of learnings on a reserved core".
//!
//! `cairn serve` answers one client and runs every handler at once ([`Lanes::unlimited`]).

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Whether a tool's handler waits for a shared lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Runs at once, beside whatever holds the shared lanes.
    Reserved,
    /// Takes one of the shared lanes first (every tool unless its definition says otherwise).
    Shared,
}

/// How long a call waits for a shared lane before it runs without one.
pub const PATIENCE: Duration = Duration::from_millis(10);

/// The shared lanes of one server process, or no limit.
#[derive(Debug)]
pub struct Lanes {
    shared: Option<Shared>,
    /// Calls waiting for a shared lane now.
    waiting: AtomicUsize,
    /// Calls that ran without a lane after waiting `patience`, since start.
    overflowed: AtomicU64,
}

#[derive(Debug)]
struct Shared {
    width: NonZeroUsize,
    lanes: Arc<Semaphore>,
    patience: Duration,
}

/// A claim on a shared lane (nothing for a reserved call or without a limit), held until
/// dropped.
#[derive(Debug)]
pub struct Admitted {
    _lane: Option<OwnedSemaphorePermit>,
}

/// The default number of shared lanes on this host: its cores less one, at least one.
pub fn default_width() -> NonZeroUsize {
    NonZeroUsize::new(crate::vault::embed::available_cores().saturating_sub(1))
        .unwrap_or(NonZeroUsize::MIN)
}

impl Lanes {
    /// `width` shared lanes; a call waits at most `patience` for one ([`PATIENCE`]).
    pub fn new(width: NonZeroUsize, patience: Duration) -> Lanes {
        Lanes {
            shared: Some(Shared {
                width,
                lanes: Arc::new(Semaphore::new(width.get())),
                patience,
            }),
            waiting: AtomicUsize::new(0),
            overflowed: AtomicU64::new(0),
        }
    }

    /// No limit: every handler runs as soon as its call arrives.
    pub fn unlimited() -> Lanes {
        Lanes {
            shared: None,
            waiting: AtomicUsize::new(0),
            overflowed: AtomicU64::new(0),
        }
    }

    /// The number of shared lanes, `None` without a limit.
    pub fn width(&self) -> Option<NonZeroUsize> {
        self.shared.as_ref().map(|s| s.width)
    }

    /// The number of shared lanes as logs and `/health` show it: 0 without a limit.
    pub fn shown_width(&self) -> usize {
        self.width().map_or(0, NonZeroUsize::get)
    }

    /// How many calls ran without a lane after waiting their patience, since start.
    pub fn overflowed(&self) -> u64 {
        self.overflowed.load(Ordering::Relaxed)
    }

    /// How many calls wait for a shared lane now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Wait for a lane if `lane` needs one; the claim is held until dropped.
    pub async fn admit(&self, lane: Lane) -> Admitted {
        match (lane, &self.shared) {
            (Lane::Shared, Some(s)) => {
                // Counted while waiting, also when the call is dropped before its turn.
                self.waiting.fetch_add(1, Ordering::Relaxed);
                let _counted = Uncount(&self.waiting);
                match tokio::time::timeout(s.patience, s.lanes.clone().acquire_owned()).await {
                    // `acquire_owned` fails only on a closed semaphore, and these are never
                    // closed; were one closed, the call would run without a lane.
                    Ok(lane) => Admitted { _lane: lane.ok() },
                    Err(_) => {
                        self.overflowed.fetch_add(1, Ordering::Relaxed);
                        Admitted { _lane: None }
                    }
                }
            }
            _ => Admitted { _lane: None },
        }
    }
}

/// Takes one off a count when dropped.
struct Uncount<'a>(&'a AtomicUsize);

impl Drop for Uncount<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::{Pin, pin};
    use std::task::{Context, Poll, Waker};

    use super::*;

    fn poll<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    fn now<F: Future>(f: F) -> F::Output {
        match poll(pin!(f)) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("had to wait"),
        }
    }

    /// Longer than any test waits: only a hang would reach it.
    const FOREVER: Duration = Duration::from_secs(3600);

    // A runtime for the patience's timer; the futures are polled by hand.
    #[tokio::test]
    async fn shared_calls_wait_for_a_free_lane_and_reserved_ones_never_wait() {
        let lanes = Lanes::new(NonZeroUsize::new(2).unwrap(), FOREVER);
        assert_eq!(lanes.width(), NonZeroUsize::new(2));
        let first = now(lanes.admit(Lane::Shared));
        let _second = now(lanes.admit(Lane::Shared));
        let mut third = pin!(lanes.admit(Lane::Shared));
        assert!(poll(third.as_mut()).is_pending(), "both lanes are taken");
        assert_eq!(lanes.waiting(), 1);
        // Reserved calls run whatever holds the lanes.
        let _reserved: Vec<Admitted> = (0..5).map(|_| now(lanes.admit(Lane::Reserved))).collect();
        drop(first);
        let Poll::Ready(_third) = poll(third.as_mut()) else {
            panic!("a lane was given back, yet the waiting call did not get it");
        };
        assert_eq!(lanes.waiting(), 0);
        // A call given up while waiting is no longer counted.
        {
            let mut fourth = pin!(lanes.admit(Lane::Shared));
            assert!(poll(fourth.as_mut()).is_pending());
            assert_eq!(lanes.waiting(), 1);
        }
        assert_eq!(lanes.waiting(), 0);
    }

    #[tokio::test]
    async fn a_call_that_waited_its_patience_runs_without_a_lane() {
        let lanes = Lanes::new(NonZeroUsize::MIN, Duration::from_millis(30));
        let held = lanes.admit(Lane::Shared).await;
        let waited = std::time::Instant::now();
        let _overflow = lanes.admit(Lane::Shared).await;
        assert!(waited.elapsed() >= Duration::from_millis(30));
        assert_eq!(lanes.overflowed(), 1);
        assert_eq!(lanes.waiting(), 0);
        // The lane itself was not taken: it is still the first call's, then free.
        let mut next = pin!(lanes.admit(Lane::Shared));
        assert!(poll(next.as_mut()).is_pending());
        drop(held);
        assert!(matches!(poll(next.as_mut()), Poll::Ready(_)));
        assert_eq!(lanes.overflowed(), 1);
    }

    #[test]
    fn without_a_limit_no_call_waits() {
        let lanes = Lanes::unlimited();
        assert_eq!(lanes.width(), None);
        let _all: Vec<Admitted> = (0..64).map(|_| now(lanes.admit(Lane::Shared))).collect();
    }

    #[test]
    fn the_default_leaves_one_core_and_is_at_least_one_lane() {
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        assert_eq!(default_width().get(), cores.saturating_sub(1).max(1));
        assert_eq!(
            Lanes::new(default_width(), PATIENCE).shown_width(),
            default_width().get()
        );
        assert_eq!(Lanes::unlimited().shown_width(), 0);
    }
}
