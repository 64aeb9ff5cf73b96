//! Following the other hosts' writes (PostgreSQL): the daemon keeps a second connection
//! `LISTEN`ing on the channel every write transaction notifies at commit
//! ([`crate::store::Store::listen_for_changes`]), and a thread that, when woken, brings
//! this host's caches up to date in the background: the learnings index (the background
//! indexer commits what is new, then the reader and caches are refreshed) and the vault
//! (HNSW graph and BM25 index). The next search on this host then has nothing, or
//! little, left to catch up.
//!
//! Notifications arriving while a catch-up runs are folded into one more catch-up after
//! it. Searches keep their own watermark checks, so a lost notification (a dropped
//! connection, a write before the listener started) costs only that the next search
//! catches up itself. On SQLite there is nothing to follow: [`WriteFollower::start`] returns
//! `None`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::Cairn;
use crate::store::db::PgListener;

/// The listener and the catch-up thread; stopped (the thread joined) on drop.
#[derive(Debug)]
pub(crate) struct WriteFollower {
    shared: Arc<State>,
    listener: Option<PgListener>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct State {
    flags: Mutex<Flags>,
    wake: Condvar,
    /// Background catch-ups completed.
    catch_ups: AtomicU64,
}

#[derive(Debug, Default)]
struct Flags {
    /// A notification arrived since the last catch-up began.
    pending: bool,
    stop: bool,
}

impl State {
    fn lock(&self) -> MutexGuard<'_, Flags> {
        self.flags.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn nudge(&self) {
        self.lock().pending = true;
        self.wake.notify_one();
    }
}

impl WriteFollower {
    /// Listen for changes to `cairn`'s database and catch up on each; `None` on SQLite.
    /// Fails when the listening connection cannot be made at all (later losses are
    /// retried by the listener).
    pub(crate) fn start(cairn: Arc<Cairn>) -> crate::error::Result<Option<WriteFollower>> {
        let shared = Arc::new(State::default());
        let notified = shared.clone();
        let Some(listener) = cairn.store().listen_for_changes(move || notified.nudge())? else {
            return Ok(None);
        };
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("cairn-follow".into())
            .spawn(move || run(&cairn, &worker))
            .map_err(|e| crate::error::Error::Internal(format!("starting the follower: {e}")))?;
        tracing::info!("following changes made on other hosts (LISTEN cairn_changes)");
        Ok(Some(WriteFollower {
            shared,
            listener: Some(listener),
            thread: Some(thread),
        }))
    }

    /// Background catch-ups completed so far.
    pub(crate) fn catch_ups(&self) -> u64 {
        self.shared.catch_ups.load(Ordering::Relaxed)
    }

    /// Whether the listening connection is up.
    pub(crate) fn is_listening(&self) -> bool {
        self.listener.as_ref().is_some_and(PgListener::is_listening)
    }
}

impl Drop for WriteFollower {
    fn drop(&mut self) {
        // No more notifications, then let the thread finish the catch-up it is in.
        self.listener.take();
        self.shared.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread's loop: wait for a notification, catch up, repeat.
fn run(cairn: &Cairn, state: &State) {
    loop {
        {
            let mut f = state.lock();
            while !f.pending && !f.stop {
                f = state.wake.wait(f).unwrap_or_else(|p| p.into_inner());
            }
            if f.stop {
                return;
            }
            f.pending = false;
        }
        if let Err(e) = cairn.catch_up_learnings() {
            tracing::warn!(error = %e, "background catch-up of the learnings index failed; the next search catches up");
        }
        if let Err(e) = cairn.vault_catch_up() {
            tracing::warn!(error = %e, "background catch-up of the vault indexes failed; the next search catches up");
        }
        state.catch_ups.fetch_add(1, Ordering::Relaxed);
    }
}
