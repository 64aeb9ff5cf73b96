//! Calls someone is waiting for, counted so that background work can step aside.
//!
//! A long-lived server (`cairn serve`, `cairn daemon`) counts every tool call while its
//! handler runs ([`Foreground::begin`]). The learnings embedder, whose work nobody waits
//! for, runs its model only once no call is in flight and none ended in the last
//! [`QUIET_GAP`], or once its patience ran out ([`Foreground::wait_quiet`]), so a host that
//! is never quiet still embeds what it acknowledged, at a floor rate. The measured effect
//! and the lag it allows: docs/deployment.md, "Background embedding waits for a quiet
//! moment". The embedding model counts the calls using or waiting for it the same way
//! ([`crate::embed::ModelEmbedder`]), so that a background run waits for them too.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long no call may have been in flight before it counts as quiet: calls that follow
/// each other closely (a busy agent, or many) are one busy stretch, not quiet moments.
pub(crate) const QUIET_GAP: Duration = Duration::from_millis(5);

/// The calls in flight, when the last one ended, and a signal when none is left.
#[derive(Debug)]
pub(crate) struct Foreground {
    state: Mutex<State>,
    quiet: Condvar,
}

#[derive(Debug)]
struct State {
    in_flight: usize,
    last_ended: Instant,
    /// Threads blocked in [`Foreground::wait_quiet`] now.
    waiting: usize,
}

impl Default for Foreground {
    fn default() -> Self {
        Foreground {
            state: Mutex::new(State {
                in_flight: 0,
                // Quiet from the start (a clock younger than the gap: after one gap).
                last_ended: Instant::now()
                    .checked_sub(QUIET_GAP)
                    .unwrap_or_else(Instant::now),
                waiting: 0,
            }),
            quiet: Condvar::new(),
        }
    }
}

/// One call's claim ([`Foreground::begin`]): counted until dropped.
#[derive(Debug)]
pub(crate) struct Busy<'a>(&'a Foreground);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.in_flight -= 1;
        s.last_ended = Instant::now();
        if s.in_flight == 0 {
            self.0.quiet.notify_all();
        }
    }
}

impl Foreground {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Count a call until the returned claim drops.
    pub(crate) fn begin(&self) -> Busy<'_> {
        self.lock().in_flight += 1;
        Busy(self)
    }

    /// Calls in flight now (the tests' view).
    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.lock().in_flight
    }

    /// Threads blocked in [`Foreground::wait_quiet`] now: a test knows a waiter is waiting
    /// (rather than not started yet) without sleeping.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.lock().waiting
    }

    /// Wait until it is quiet (no call in flight, none ended in the last [`QUIET_GAP`])
    /// or `deadline` passed, whichever comes first. Returns whether it is quiet.
    pub(crate) fn wait_quiet(&self, deadline: Instant) -> bool {
        let mut s = self.lock();
        loop {
            let now = Instant::now();
            let quiet_at = s.last_ended + QUIET_GAP;
            if s.in_flight == 0 && now >= quiet_at {
                return true;
            }
            if now >= deadline {
                return false;
            }
            let until = if s.in_flight == 0 {
                quiet_at.min(deadline)
            } else {
                deadline
            };
            s.waiting += 1;
            s = self
                .quiet
                .wait_timeout(s, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            s.waiting -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn waits_for_the_last_call_or_the_deadline() {
        let a = Arc::new(Foreground::default());
        assert!(
            a.wait_quiet(Instant::now()),
            "nothing in flight: quiet at once"
        );

        let claim = a.begin();
        let second = a.begin();
        assert_eq!(a.in_flight(), 2);
        let started = Instant::now();
        assert!(!a.wait_quiet(started + Duration::from_millis(50)));
        assert!(started.elapsed() >= Duration::from_millis(50));

        drop(second);
        let waiter = {
            let a = a.clone();
            std::thread::spawn(move || {
                let quiet = a.wait_quiet(Instant::now() + Duration::from_secs(3600));
                (quiet, Instant::now())
            })
        };
        // The waiter is blocked in the wait (an hour's deadline) while a claim is held: a
        // wait that returned at once would have finished instead.
        while a.waiting() == 0 {
            assert!(!waiter.is_finished(), "returned with a call in flight");
            std::thread::yield_now();
        }
        let ended = Instant::now();
        drop(claim);
        let (quiet, returned) = waiter.join().unwrap();
        assert!(quiet);
        assert!(
            returned >= ended + QUIET_GAP,
            "quiet only once no call ended for the gap"
        );
        assert_eq!(a.in_flight(), 0);
    }
}
