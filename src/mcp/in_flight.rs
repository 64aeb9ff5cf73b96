//! Retries of idempotent writes wait for the call they repeat.
//!
//! A client that cancels a call (`notifications/cancelled`) stops waiting for it, but its
//! handler runs on to the end and commits whole (a transaction is never cut half-way:
//! `server.rs`). A client that then retries the same call used to run it a second time
//! beside the first: a `vault_update` of a large file embedded every chunk twice (1.4 to
//! 3.3 times the work). So a call of an idempotent write (`Effect::Additive` or
//! `Effect::Destructive` with `idempotent: true`) with the same binding and arguments as
//! one still running in this process waits for that one to end, then runs: it finds the
//! work done (`vault_update` answers `changed: false`, `embedded: 0`) and reports what is
//! there. A claim is held by the handler's closure, so it lasts as long as the work, not
//! as long as the caller waits.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use serde_json::Value;
use tokio::sync::watch;

use crate::access::context::WorkContext;

/// The calls running now, by what they do; each receiver ends when its call does.
static RUNNING: LazyLock<Mutex<HashMap<String, watch::Receiver<()>>>> =
    LazyLock::new(Default::default);

/// A running call's claim: while it lives, the same call waits.
pub(crate) struct Claim {
    key: String,
    /// Dropped with the claim: every waiter's `changed()` then returns.
    _done: watch::Sender<()>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        RUNNING
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}

/// Wait until no call of `tool` with `work` and `args` runs in this process, then claim
/// it for this call.
pub(crate) async fn claim(tool: &str, work: &WorkContext, args: &Value) -> Claim {
    let key = format!("{tool}\n{work:?}\n{args}");
    loop {
        let running = {
            let mut map = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
            match map.get(&key) {
                Some(rx) => rx.clone(),
                None => {
                    let (done, rx) = watch::channel(());
                    map.insert(key.clone(), rx);
                    return Claim { key, _done: done };
                }
            }
        };
        tracing::info!(
            tool,
            "the same call is still running; waiting for it to end"
        );
        wait(running).await;
    }
}

/// Until the sender of `rx` is dropped (nothing is ever sent).
async fn wait(mut rx: watch::Receiver<()>) {
    while rx.changed().await.is_ok() {}
}
