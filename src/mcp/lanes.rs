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
//! Waiting for a lane holds no thread (an async semaphore), and a lane is held exactly as
//! long as its handler runs (the permit moves into the job, so a call given up by its
//! client still holds its lane until its handler returns).
//!
//! A lane is also a thread: each shared lane has its own, at a lower priority than the
//! rest of the process ([`LANE_NICE`] added to the niceness; Linux), and a call that holds
//! a lane runs its handler there ([`Lanes::run`]). A lane keeps the heavy handlers to the
//! cores less one, but the operating system still shares each core between the thread
//! holding it and whatever wakes up: a search, or the transport reading and answering
//! every call. At the lower priority the lane's handler gives way to them at once instead
//! of taking turns. Reserved calls and calls past the lanes run on the blocking pool at
//! the process's own priority. What it gains and costs, measured: docs/deployment.md,
//! "Searches of learnings on a reserved core" and "The lanes' threads at a lower
//! priority".
//!
//! `cairn serve` answers one client and runs every handler at once ([`Lanes::unlimited`]).

use std::num::NonZeroUsize;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

/// Whether a tool's handler waits for a shared lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Runs at once, beside whatever holds the shared lanes.
    Reserved,
    /// Takes one of the shared lanes first (every tool unless its definition says otherwise).
    Shared,
}

/// How long a call waits for a shared lane before it runs without one.
pub(crate) const PATIENCE: Duration = Duration::from_millis(10);

/// How much nicer than the process the lanes' threads run by default (`cairn daemon
/// --lane-nice`; the niceness is capped at 19).
pub const LANE_NICE: u8 = 10;

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
    nice: u8,
    /// Work for the lanes' threads; they stop when it is dropped.
    jobs: mpsc::Sender<Job>,
}

/// A handler to run on a lane's thread.
type Job = Box<dyn FnOnce() + Send>;

/// A handler that panicked (the panic itself went to the log through the panic hook).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Panicked;

impl std::fmt::Display for Panicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the handler panicked")
    }
}

/// A claim on a shared lane (nothing for a reserved call or without a limit), held until
/// dropped.
#[derive(Debug)]
pub struct Admitted {
    _lane: Option<OwnedSemaphorePermit>,
}

/// The default number of shared lanes on this host: its cores less one, at least one.
pub(crate) fn default_width() -> NonZeroUsize {
    NonZeroUsize::new(crate::embed::threading::available_cores().saturating_sub(1))
        .unwrap_or(NonZeroUsize::MIN)
}

impl Lanes {
    /// `width` shared lanes, each with its own thread running `nice` steps nicer than the
    /// process ([`LANE_NICE`]); a call waits at most `patience` for one ([`PATIENCE`]).
    /// Fails only if a thread cannot be started.
    pub fn new(width: NonZeroUsize, patience: Duration, nice: u8) -> std::io::Result<Lanes> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let (ready, readied) = mpsc::channel::<()>();
        for n in 0..width.get() {
            let queue = queue.clone();
            let ready = ready.clone();
            std::thread::Builder::new()
                .name(format!("cairn-lane-{n}"))
                .spawn(move || {
                    lower_priority(nice);
                    drop(ready);
                    loop {
                        // One thread waits for the next job, the others for the queue.
                        let job = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
                        match job {
                            Ok(job) => job(),
                            Err(mpsc::RecvError) => return,
                        }
                    }
                })?;
        }
        // Every lane is at its priority before the first call can reach it: each thread
        // drops its sender once it is.
        drop(ready);
        let _ = readied.recv();
        Ok(Lanes {
            shared: Some(Shared {
                width,
                lanes: Arc::new(Semaphore::new(width.get())),
                patience,
                nice,
                jobs,
            }),
            waiting: AtomicUsize::new(0),
            overflowed: AtomicU64::new(0),
        })
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
    pub(crate) fn width(&self) -> Option<NonZeroUsize> {
        self.shared.as_ref().map(|s| s.width)
    }

    /// The number of shared lanes as logs and `/health` show it: 0 without a limit.
    pub(crate) fn shown_width(&self) -> usize {
        self.width().map_or(0, NonZeroUsize::get)
    }

    /// How much nicer than the process the lanes' threads run; 0 without a limit.
    pub(crate) fn nice(&self) -> u8 {
        self.shared.as_ref().map_or(0, |s| s.nice)
    }

    /// How many calls ran without a lane after waiting their patience, since start.
    pub(crate) fn overflowed(&self) -> u64 {
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

    /// Run the handler `f` of a call that `admitted` let in: on a lane's thread if it holds
    /// a lane, else on the blocking pool. The lane is given back when `f` returns, also if
    /// the caller stopped waiting.
    pub(crate) async fn run<R, F>(&self, admitted: Admitted, f: F) -> Result<R, Panicked>
    where
        R: Send + 'static,
        F: FnOnce() -> R + Send + 'static,
    {
        let Some(shared) = self.shared.as_ref().filter(|_| admitted._lane.is_some()) else {
            // Nothing held: a reserved call, one past the lanes, or no limit.
            return tokio::task::spawn_blocking(f).await.map_err(|_| Panicked);
        };
        let (answer, answered) = oneshot::channel();
        let job: Job = Box::new(move || {
            let out = std::panic::catch_unwind(AssertUnwindSafe(f));
            drop(admitted);
            let _ = answer.send(out);
        });
        if let Err(mpsc::SendError(job)) = shared.jobs.send(job) {
            // The lanes' threads are gone (they never stop while `shared` lives): run it
            // here rather than lose the call.
            tokio::task::spawn_blocking(job)
                .await
                .map_err(|_| Panicked)?;
        }
        match answered.await {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(_)) | Err(_) => Err(Panicked),
        }
    }
}

/// Make the calling thread `by` steps nicer than it is (at most 19), where the system
/// lets one thread have its own niceness (Linux); a failure is logged, not fatal.
fn lower_priority(by: u8) {
    #[cfg(target_os = "linux")]
    if by > 0 {
        use rustix::process::{getpriority_process, setpriority_process};
        let me = Some(rustix::thread::gettid());
        let result = getpriority_process(me)
            .and_then(|now| setpriority_process(me, (now + i32::from(by)).min(19)));
        if let Err(e) = result {
            tracing::warn!(error = %e, "a lane's thread kept the process's priority");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = by;
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
        let lanes = Lanes::new(NonZeroUsize::new(2).unwrap(), FOREVER, LANE_NICE).unwrap();
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

    // Tokio's clock paused: the patience's timer fires when the runtime has nothing else
    // to do, at exactly its deadline on that clock, whatever the machine's load.
    #[tokio::test(start_paused = true)]
    async fn a_call_that_waited_its_patience_runs_without_a_lane() {
        const PATIENCE: Duration = Duration::from_millis(30);
        let lanes = Lanes::new(NonZeroUsize::MIN, PATIENCE, LANE_NICE).unwrap();
        let held = lanes.admit(Lane::Shared).await;
        let waited = tokio::time::Instant::now();
        let _overflow = lanes.admit(Lane::Shared).await;
        let patience = waited.elapsed();
        // Tokio's timer rounds a deadline up to its next millisecond.
        assert!(
            (PATIENCE..=PATIENCE + Duration::from_millis(1)).contains(&patience),
            "ran without a lane after {patience:?}, its patience being {PATIENCE:?}"
        );
        assert_eq!(lanes.overflowed(), 1);
        assert_eq!(lanes.waiting(), 0);
        // The lane itself was not taken: it is still the first call's, then free.
        let mut next = pin!(lanes.admit(Lane::Shared));
        assert!(poll(next.as_mut()).is_pending());
        drop(held);
        assert!(matches!(poll(next.as_mut()), Poll::Ready(_)));
        assert_eq!(lanes.overflowed(), 1);
    }

    /// The name and niceness of the thread that runs a handler.
    #[cfg(target_os = "linux")]
    fn whereabouts() -> (String, i32) {
        let me = Some(rustix::thread::gettid());
        (
            std::thread::current()
                .name()
                .unwrap_or_default()
                .to_string(),
            rustix::process::getpriority_process(me).unwrap(),
        )
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_call_holding_a_lane_runs_on_its_thread_nicer_than_the_rest() {
        let base = whereabouts().1;
        let lanes = Lanes::new(NonZeroUsize::MIN, Duration::from_millis(30), 5).unwrap();
        assert_eq!(lanes.nice(), 5);
        let held = lanes.admit(Lane::Shared).await;
        // Past its patience, a call runs on the blocking pool at the process's priority,
        // as a reserved one does.
        let overflow = lanes.admit(Lane::Shared).await;
        let (name, nice) = lanes.run(overflow, whereabouts).await.unwrap();
        assert!(!name.starts_with("cairn-lane"), "{name}");
        assert_eq!(nice, base);
        let reserved = lanes.admit(Lane::Reserved).await;
        assert_eq!(lanes.run(reserved, whereabouts).await.unwrap().1, base);
        let (name, nice) = lanes.run(held, whereabouts).await.unwrap();
        assert_eq!(name, "cairn-lane-0");
        assert_eq!(nice, (base + 5).min(19));
        // Nothing changed the priority of the threads the process shares.
        assert_eq!(whereabouts().1, base);
        let unlimited = Lanes::unlimited();
        let any = unlimited.admit(Lane::Shared).await;
        assert_eq!(unlimited.run(any, whereabouts).await.unwrap().1, base);
        assert_eq!(unlimited.nice(), 0);
    }

    #[tokio::test]
    async fn a_handler_that_panics_gives_its_lane_back() {
        let lanes = Lanes::new(NonZeroUsize::MIN, FOREVER, LANE_NICE).unwrap();
        for _ in 0..2 {
            let lane = now(lanes.admit(Lane::Shared));
            let out = lanes
                .run(lane, || -> u8 { panic!("a handler's bug") })
                .await;
            assert_eq!(out, Err(Panicked));
        }
        // The lane and its thread still serve.
        let lane = now(lanes.admit(Lane::Shared));
        let name = || std::thread::current().name().map(String::from);
        assert_eq!(lanes.run(lane, name).await, Ok(Some("cairn-lane-0".into())));
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
            Lanes::new(default_width(), PATIENCE, LANE_NICE)
                .unwrap()
                .shown_width(),
            default_width().get()
        );
        assert_eq!(Lanes::unlimited().shown_width(), 0);
    }
}
