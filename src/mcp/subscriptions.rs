//! Change notifications for resources: `resources/subscribe` (and
//! `notifications/resources/updated`), `notifications/resources/list_changed`, and the
//! same through `subscriptions/listen` for clients of protocol 2026-07-28.
//!
//! The database is the truth and any process or host may change the vault, so a
//! session watches the database, not this process's follower: once a second, while a
//! client is connected, it reads the indexed hash of each subscribed document and the
//! list's mark (documents counted, greatest id) within the session's collections, and
//! notifies what moved. A followed document edited on disk is notified once the
//! follower has indexed it (about 0.3 s after the write, docs/vault.md).

use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::model::{ResourceUpdatedNotificationParam, SubscriptionFilter};
use rmcp::service::{Peer, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer};

use super::resources::{Target, parse};
use super::server::{CairnServer, Seen};

/// How often a session looks for changes.
pub(crate) const POLL: Duration = Duration::from_secs(1);

/// The most documents one session (or one `subscriptions/listen`) watches: each costs a
/// look every [`POLL`], so more are refused (`-32602`; a listen's acknowledgment honors
/// the first ones only) rather than let one client's watch take a core (20,000 took 0.3
/// of one).
pub(crate) const MAX_SUBSCRIPTIONS: usize = 256;

/// The refusal of a subscription beyond [`MAX_SUBSCRIPTIONS`].
fn too_many(asked: usize) -> McpError {
    McpError::invalid_params(
        format!(
            "{asked} subscriptions would be more than the {MAX_SUBSCRIPTIONS} documents one \
             session may watch: unsubscribe from documents you no longer need, or watch the \
             list (notifications/resources/list_changed) instead"
        ),
        Some(serde_json::json!({"limit": MAX_SUBSCRIPTIONS})),
    )
}

/// The `(collection, path)` of `uri` when it names a vault document within `readable`
/// (a session's [`CairnServer::readable_collections`]).
fn in_reach(readable: &Option<Option<Vec<String>>>, uri: &str) -> Option<(String, String)> {
    let Some(Target::Vault { collection, path }) = parse(uri) else {
        return None;
    };
    let within = match readable.as_ref()? {
        None => true,
        Some(cs) => cs.contains(&collection),
    };
    within.then_some((collection, path))
}

/// Test hook: `CAIRN_FAILPOINT=listen-late-start` holds every `subscriptions/listen`
/// 1.5 s after its acknowledgment, before it looks at anything (so a test can change a
/// document in between without racing the server).
const LISTEN_LATE: &str = "listen-late-start";

/// Starting points of `subscriptions/listen` calls kept between their filter's acceptance
/// and their `listen` (one is left behind only when rmcp fails to send an
/// acknowledgment): the oldest go beyond this many.
const STARTS_KEPT: usize = 16;

/// The documents of `requested` within `readable` (a session's reach), the first
/// [`MAX_SUBSCRIPTIONS`] of them (the acknowledgment says which), and the resource list.
fn filter_within_reach(
    readable: &Option<Option<Vec<String>>>,
    requested: &SubscriptionFilter,
) -> SubscriptionFilter {
    let mut accepted = SubscriptionFilter::new();
    accepted.resources_list_changed = requested.resources_list_changed;
    accepted.resource_subscriptions = requested.resource_subscriptions.as_ref().map(|uris| {
        uris.iter()
            .filter(|u| in_reach(readable, u).is_some())
            .take(MAX_SUBSCRIPTIONS)
            .cloned()
            .collect()
    });
    accepted
}

impl CairnServer {
    /// The `(collection, path)` of a URI this session may read and subscribe to.
    fn watchable(&self, uri: &str) -> Option<(String, String)> {
        in_reach(&self.readable_collections(), uri)
    }

    /// What changed since `seen` among `uris` (each with its hash when subscribed, the
    /// starting point when `seen` has none) and in the session's list.
    fn changes(
        &self,
        seen: &mut Seen,
        uris: &[(String, Option<String>)],
    ) -> crate::error::Result<(Vec<String>, bool)> {
        // One look at the session's reach for the whole poll (it reads the project).
        self.changes_within(&self.readable_collections(), seen, uris)
    }

    /// [`CairnServer::changes`] with the session's reach already read.
    fn changes_within(
        &self,
        readable: &Option<Option<Vec<String>>>,
        seen: &mut Seen,
        uris: &[(String, Option<String>)],
    ) -> crate::error::Result<(Vec<String>, bool)> {
        let docs: Vec<Option<(String, String)>> =
            uris.iter().map(|(u, _)| in_reach(readable, u)).collect();
        let present: Vec<(String, String)> = docs.iter().flatten().cloned().collect();
        let hashes = self.cairn().vault_document_hashes(&present)?;
        let mut updated = Vec::new();
        for ((uri, at_start), doc) in uris.iter().zip(&docs) {
            let now = doc.as_ref().and_then(|d| hashes.get(d).cloned());
            let before = seen
                .hashes
                .insert(uri.clone(), now.clone())
                .unwrap_or_else(|| at_start.clone());
            if before != now {
                updated.push(uri.clone());
            }
        }
        seen.hashes.retain(|u, _| uris.iter().any(|(x, _)| x == u));
        let list = match readable {
            Some(cs) => Some(self.cairn().vault_list_mark(cs.as_deref())?),
            None => None,
        };
        let changed = seen.list.is_some() && seen.list != list;
        seen.list = list;
        Ok((updated, changed))
    }

    /// `resources/subscribe`: only a document this session may read.
    pub(super) fn subscribe_uri(&self, uri: String) -> Result<(), McpError> {
        let Some(doc) = self.watchable(&uri) else {
            return Err(McpError::resource_not_found(
                format!(
                    "{uri}: not a vault document this session can read; subscriptions follow vault documents (cairn://vault/...)"
                ),
                None,
            ));
        };
        let now = self
            .cairn()
            .vault_document_hashes(std::slice::from_ref(&doc))
            .map_err(|e| McpError::internal_error(e.to_string(), None))?
            .remove(&doc);
        let mut uris = self
            .subscriptions()
            .uris
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if uris.len() >= MAX_SUBSCRIPTIONS && !uris.contains_key(&uri) {
            return Err(too_many(uris.len() + 1));
        }
        uris.insert(uri, now);
        Ok(())
    }

    /// `resources/unsubscribe`.
    pub(super) fn unsubscribe_uri(&self, uri: &str) {
        self.subscriptions()
            .uris
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uri);
    }

    /// Notify `peer` of changes from now on: a session that began with `initialize`, once
    /// it is initialized (one watcher per session, for all its connections).
    pub(super) fn watch(&self, peer: Peer<RoleServer>) {
        let subs = self.subscriptions();
        {
            let mut peers = subs.peers.lock().unwrap_or_else(PoisonError::into_inner);
            peers.retain(|p| !p.is_transport_closed());
            peers.push(peer);
        }
        if subs.watching.swap(true, Ordering::SeqCst) {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            let subs = this.subscriptions();
            let mut seen = Seen::default();
            let mut tick = tokio::time::interval(POLL);
            loop {
                tick.tick().await;
                let peers: Vec<Peer<RoleServer>> = {
                    let mut peers = subs.peers.lock().unwrap_or_else(PoisonError::into_inner);
                    peers.retain(|p| !p.is_transport_closed());
                    peers.clone()
                };
                if peers.is_empty() {
                    subs.watching.store(false, Ordering::SeqCst);
                    return;
                }
                let uris: Vec<(String, Option<String>)> = subs
                    .uris
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    .map(|(u, h)| (u.clone(), h.clone()))
                    .collect();
                let (updated, list_changed) = match this.poll(&mut seen, uris).await {
                    Some(c) => c,
                    None => continue,
                };
                for peer in &peers {
                    for uri in &updated {
                        let _ = peer
                            .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                            .await;
                    }
                    if list_changed {
                        let _ = peer.notify_resource_list_changed().await;
                    }
                }
            }
        });
    }

    /// One look for changes on the blocking pool; `None` (logged) when it failed.
    async fn poll(
        &self,
        seen: &mut Seen,
        uris: Vec<(String, Option<String>)>,
    ) -> Option<(Vec<String>, bool)> {
        let this = self.clone();
        let mut owned = std::mem::take(seen);
        let (back, result) = tokio::task::spawn_blocking(move || {
            let r = this.changes(&mut owned, &uris);
            (owned, r)
        })
        .await
        .ok()?;
        *seen = back;
        match result {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(session = %self.session(), error = %e, "resource watch failed");
                None
            }
        }
    }

    /// The part of a `subscriptions/listen` filter this session serves: the resource list
    /// and the documents it may read. What they are now is kept as the listen's starting
    /// point: rmcp acknowledges the listen before it runs it, and a client may change a
    /// document as soon as it has the acknowledgment.
    pub(super) fn accepted_filter(&self, requested: &SubscriptionFilter) -> SubscriptionFilter {
        let readable = self.readable_collections();
        let accepted = filter_within_reach(&readable, requested);
        let uris = accepted.resource_subscriptions.clone().unwrap_or_default();
        let mut seen = Seen::default();
        let start: Vec<(String, Option<String>)> = uris.iter().map(|u| (u.clone(), None)).collect();
        match self.changes_within(&readable, &mut seen, &start) {
            Ok(_) => {
                let mut starts = self
                    .subscriptions()
                    .starts
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if starts.len() == STARTS_KEPT {
                    starts.remove(0);
                }
                starts.push((uris, seen));
            }
            // The listen takes its starting point when it runs, as without one.
            Err(e) => {
                tracing::warn!(session = %self.session(), error = %e, "resource watch failed")
            }
        }
        accepted
    }

    /// Serve one `subscriptions/listen` until it is cancelled.
    pub(super) async fn listen_until_cancelled(&self, context: SubscriptionContext) {
        let uris: Vec<String> = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let lists = context.accepted().resources_list_changed == Some(true);
        if crate::base::failpoint::is_set(LISTEN_LATE) {
            tokio::time::sleep(Duration::from_millis(1500)).await;
        }
        // The starting point taken before the acknowledgment, or else at once.
        let kept = {
            let mut starts = self
                .subscriptions()
                .starts
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            starts
                .iter()
                .position(|(u, _)| *u == uris)
                .map(|i| starts.remove(i).1)
        };
        let uris: Vec<(String, Option<String>)> = uris.into_iter().map(|u| (u, None)).collect();
        let mut seen = match kept {
            Some(seen) => seen,
            None => {
                let mut seen = Seen::default();
                let _ = self.poll(&mut seen, uris.clone()).await;
                seen
            }
        };
        let mut tick = tokio::time::interval(POLL);
        loop {
            tokio::select! {
                _ = context.cancelled() => return,
                _ = tick.tick() => {}
            }
            let Some((updated, list_changed)) = self.poll(&mut seen, uris.clone()).await else {
                continue;
            };
            for uri in updated {
                if context.sink().notify_resource_updated(uri).await.is_err() {
                    return;
                }
            }
            if lists && list_changed && context.sink().notify_resource_list_changed().await.is_err()
            {
                return;
            }
        }
    }
}
