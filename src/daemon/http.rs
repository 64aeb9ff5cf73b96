//! The daemon's HTTP surface: `POST /mcp` (rmcp's Streamable HTTP service behind the
//! Host, Origin and token checks) and `GET /health`.
//!
//! The same routes answer on TCP (HTTP clients with a token of their own) and on the
//! daemon's Unix socket (forwarding `cairn serve`s: [`super::rundir`]), where the kernel
//! names the process at the other end of each connection ([`SocketPeer`]).
//!
//! `/mcp` is served statelessly, except for the sessions of the 2025-11-25 handshake
//! ([`Mcp`]: an `initialize` opens one, its `Mcp-Session-Id` names it afterwards). A
//! session is served only to the token that opened it, for every method (`POST`, the
//! notification stream `GET`, `DELETE`: 403), and a token may have
//! [`MAX_SESSIONS_PER_TOKEN`] open at once (429).
//!
//! Every request passes, in order: one `Host`, `Origin`, `Authorization` and
//! `Mcp-Session-Id` header at most
//! (400); the `Host` check (the listen address, `localhost`, or a name given with
//! `--allow-host`) and the `Origin` check (absent, a loopback origin, or the
//! `--public-origin` of a TLS proxy in front), each refused
//! with 403; then, on `/mcp`, the bearer token, looked up by its hash on every request
//! (missing, unknown, expired or revoked: 401; a forwarder's own token from any
//! connection but its forwarder's: 401), and the body: one JSON-RPC message (invalid
//! JSON or a batch: 400 with the JSON-RPC error the stdio transport sends). A JSON body
//! says what was wrong and what to do.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use rmcp::model::{ClientNotification, JsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::Cairn;
use crate::access::tokens::Check;
use crate::mcp::lanes::Lanes;
use crate::mcp::registry::MAX_ARGUMENT_BYTES;
use crate::mcp::server::CairnServer;
use crate::mcp::wire::{self, Line};

use super::forward::{Block, Relayed};
use super::handler::{Bound, DaemonHandler, Splice, with_binding};
use super::peer::Process;

/// The largest request body: the arguments cap of a call plus room for the envelope.
const MAX_BODY_BYTES: usize = MAX_ARGUMENT_BYTES + 64 * 1024;

/// A connection on the daemon's Unix socket: the process at its other end, as the kernel
/// says (`None` when it gave no pid). Requests that came over TCP carry no `SocketPeer`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SocketPeer(pub Option<Process>);

impl Connected<axum::serve::IncomingStream<'_, tokio::net::UnixListener>> for SocketPeer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, tokio::net::UnixListener>) -> Self {
        SocketPeer(Process::peer_of(stream.io()))
    }
}

/// What every request handler shares.
pub(crate) struct Shared {
    pub(crate) cairn: Arc<Cairn>,
    /// The address the daemon listens on (the port is the real one, also for `:0`).
    pub(crate) local: SocketAddr,
    /// Host names accepted besides the loopback names and the listen address.
    pub(crate) extra_hosts: Vec<String>,
    /// The origin browsers see behind a TLS-terminating proxy (`--public-origin`):
    /// accepted as an `Origin` besides loopback ones, and the web page's address.
    pub(crate) public_origin: Option<String>,
    pub(crate) started: Instant,
    pub(crate) started_at: String,
    /// One server per token id: a token's binding never changes, so its server (the
    /// tool list filtered by its scope) is built once. Validity is still checked on
    /// every request, and [`Shared::sweep`] drops the servers of tokens that expired or
    /// were revoked.
    servers: Mutex<HashMap<String, Arc<Bound>>>,
    /// When the last sweep began (ISO-8601): revocations since then are looked up.
    swept_at: Mutex<String>,
    /// Distinct tokens served since start.
    sessions: AtomicU64,
    requests: AtomicU64,
    /// Set once the model and the vault's indexes are loaded ([`Shared::warm_up`]).
    warm: AtomicBool,
    /// On PostgreSQL: what catches this host's caches up with every host's writes.
    follower: Option<Arc<super::follow_writes::WriteFollower>>,
    /// Which tool handlers run at once, across every token's server.
    lanes: Arc<Lanes>,
    /// The MCP sessions of the 2025-11-25 handshake ([`Mcp`]).
    mcp_sessions: Arc<LocalSessionManager>,
}

impl Shared {
    pub(crate) fn new(
        cairn: Arc<Cairn>,
        local: SocketAddr,
        extra_hosts: Vec<String>,
        public_origin: Option<String>,
        started_at: String,
        follower: Option<Arc<super::follow_writes::WriteFollower>>,
        lanes: Arc<Lanes>,
    ) -> Shared {
        Shared {
            cairn,
            local,
            extra_hosts,
            public_origin,
            started: Instant::now(),
            swept_at: Mutex::new(started_at.clone()),
            started_at,
            servers: Mutex::new(HashMap::new()),
            sessions: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            warm: AtomicBool::new(false),
            follower,
            lanes,
            mcp_sessions: Arc::new(LocalSessionManager::default()),
        }
    }

    /// Load the model, the HNSW graph and the BM25 index now (an embedding, a search), so a
    /// new session's first call does not pay for them; `/health` says `"warm": true`
    /// afterwards. A database without documents or a missing model is logged and the
    /// daemon serves on: the first call that needs the model reports it.
    pub(crate) fn warm_up(&self) {
        // The model first: a search of an empty vault would not load it, and
        // `search_learnings` and `add_learning` embed too.
        let warmed = self
            .cairn
            .vault_query_vector("warm up")
            .and_then(|_| self.cairn.vault_search("warm up", Some(1), None, None));
        match warmed {
            Ok(_) => tracing::info!("warm: model and vault indexes loaded"),
            Err(e) => tracing::warn!(error = %e, "warm-up search failed; serving cold"),
        }
        self.warm.store(true, Ordering::Relaxed);
    }

    fn servers(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Bound>>> {
        self.servers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drop the servers of tokens that expired or were revoked since the last sweep (a
    /// session whose token never comes back would otherwise stay for the daemon's life).
    /// Returns how many were dropped.
    pub(crate) fn sweep(&self) -> crate::error::Result<usize> {
        let now = crate::base::now_iso();
        let since = std::mem::replace(
            &mut *self.swept_at.lock().unwrap_or_else(|p| p.into_inner()),
            now.clone(),
        );
        // No session state, nothing to drop: no query (an idle daemon stays idle).
        if self.servers().is_empty() {
            return Ok(0);
        }
        let revoked = self.cairn.session_tokens_revoked_since(&since)?;
        let mut servers = self.servers();
        let before = servers.len();
        servers.retain(|id, b| b.expires_at.as_str() > now.as_str() && !revoked.contains(id));
        let dropped = before - servers.len();
        if dropped > 0 {
            tracing::debug!(dropped, live = servers.len(), "ended sessions dropped");
        }
        Ok(dropped)
    }
}

/// The most MCP sessions (2025-11-25 handshakes) open at once; an `initialize` beyond
/// them is answered 503. A session ends when its client deletes it or after 5 minutes
/// without a request (rmcp's keep-alive).
pub(crate) const MAX_SESSIONS: usize = 1024;

/// The most MCP sessions one token has open at once; its `initialize` beyond them is
/// answered 429, so that one token cannot take [`MAX_SESSIONS`] and leave none to the
/// others. An agent needs one; a client that reconnects without `DELETE` leaves its old
/// ones open until they expire (5 minutes).
pub(crate) const MAX_SESSIONS_PER_TOKEN: usize = 32;

/// Which token opened each MCP session, and the handshakes under way: every request
/// naming a session (`POST`, the notification stream `GET`, `DELETE`) must present the
/// token that opened it.
#[derive(Default)]
struct Owners {
    /// The token id of each session, by session id.
    by_session: HashMap<String, String>,
    /// Handshakes under way, by token id (counted against the token's limit).
    opening: HashMap<String, usize>,
}

/// A handshake counted in [`Owners::opening`] until it ends, however it ends.
struct Opening {
    owners: Arc<Mutex<Owners>>,
    token: String,
}

impl Drop for Opening {
    fn drop(&mut self) {
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = owners.opening.get_mut(&self.token) {
            *n -= 1;
            if *n == 0 {
                owners.opening.remove(&self.token);
            }
        }
    }
}

/// Marks a POST whose message is `initialize` (set by [`require_one_message`]).
#[derive(Clone, Copy)]
struct Handshake;

/// The two ways `/mcp` is served: without sessions (protocol 2026-07-28, and requests
/// that carry no session id), and with them (an `initialize`, and every request that
/// names its session: `POST`, the notification stream `GET`, `DELETE`).
struct Mcp {
    stateless: StreamableHttpService<DaemonHandler, NeverSessionManager>,
    sessions: StreamableHttpService<DaemonHandler, LocalSessionManager>,
    manager: Arc<LocalSessionManager>,
    owners: Arc<Mutex<Owners>>,
    stopping: CancellationToken,
}

/// What to tell a client whose sessions are all in use.
const SESSIONS_HELP: &str = "end sessions you no longer use (DELETE /mcp with their \
                             Mcp-Session-Id), wait for idle ones to expire (5 minutes), or \
                             send requests without a session (protocol 2026-07-28)";

impl Mcp {
    async fn serve(self: Arc<Self>, mut req: Request) -> Response {
        let handshake = req.extensions().get::<Handshake>().is_some();
        let in_session = handshake
            || req.headers().contains_key(SESSION_ID)
            || req.method() != axum::http::Method::POST;
        let bound = req.extensions().get::<Arc<Bound>>().cloned();
        if !in_session {
            let splice = Splice::default();
            req.extensions_mut().insert(splice.clone());
            let response = with_binding(bound, self.stateless.handle(req)).await;
            return spliced(response.map(axum::body::Body::new), splice).await;
        }
        let Some(token) = bound.map(|b| b.id.clone()) else {
            // The token check runs before every /mcp request; this is a wiring fault.
            tracing::error!("an MCP session request reached the router without a binding");
            return refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "INTERNAL",
                "the request's session token was not checked".into(),
                "retry; the daemon's log on stderr has the cause",
            );
        };
        let opening = if handshake {
            match self.open(&token).await {
                Ok(o) => Some(o),
                Err(refused) => return refused,
            }
        } else {
            if let Some(refused) = self.not_owned(&token, req.headers()) {
                return refused;
            }
            None
        };
        let notifications = req.method() == axum::http::Method::GET;
        let splice = (!notifications && !handshake).then(|| {
            let splice = Splice::default();
            req.extensions_mut().insert(splice.clone());
            splice
        });
        let response = self.sessions.handle(req).await;
        if let Some(opening) = opening
            && let Some(id) = response
                .headers()
                .get(SESSION_ID)
                .and_then(|v| v.to_str().ok())
        {
            let mut owners = opening.owners.lock().unwrap_or_else(|p| p.into_inner());
            owners.by_session.insert(id.to_string(), token);
        }
        let response = response.map(axum::body::Body::new);
        if !notifications {
            return match splice {
                Some(splice) => spliced(response, splice).await,
                None => response,
            };
        }
        // A notification stream stays open for the session's life: it ends when the
        // daemon begins to stop, so that calls in flight, not idle streams, are what a
        // shutdown waits for. A stream resumed after a lost connection replays the
        // events of a request's stream, answers among them: each gets its
        // `structuredContent` from its own text.
        let response = spliced_events(response, None);
        response.map(|body| axum::body::Body::new(UntilStopping::new(body, self.stopping.clone())))
    }

    /// Count a handshake of `token` against the limits ([`MAX_SESSIONS`] on the daemon,
    /// [`MAX_SESSIONS_PER_TOKEN`] per token), or the refusal that says which is reached.
    async fn open(&self, token: &str) -> Result<Opening, Response> {
        let live: std::collections::HashSet<String> = {
            let sessions = self.manager.sessions.read().await;
            if sessions.len() >= MAX_SESSIONS {
                return Err(refuse(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "TOO_MANY_SESSIONS",
                    format!("{MAX_SESSIONS} MCP sessions are open on this daemon (its limit)"),
                    SESSIONS_HELP,
                ));
            }
            sessions.keys().map(|id| id.to_string()).collect()
        };
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        // Sessions that ended (deleted, expired) free their token's share.
        owners.by_session.retain(|id, _| live.contains(id));
        let open = owners.by_session.values().filter(|t| *t == token).count()
            + owners.opening.get(token).copied().unwrap_or(0);
        if open >= MAX_SESSIONS_PER_TOKEN {
            tracing::warn!(
                token,
                open,
                "initialize refused: the token's sessions are all open"
            );
            return Err(refuse(
                StatusCode::TOO_MANY_REQUESTS,
                "TOO_MANY_SESSIONS_FOR_TOKEN",
                format!(
                    "session token {token} has {open} MCP sessions open, the most one token \
                     may have ({MAX_SESSIONS_PER_TOKEN})"
                ),
                SESSIONS_HELP,
            ));
        }
        *owners.opening.entry(token.to_string()).or_default() += 1;
        Ok(Opening {
            owners: self.owners.clone(),
            token: token.to_string(),
        })
    }

    /// The refusal of a request naming a session (`POST`, `GET`, `DELETE`) with another
    /// token than the one that opened it; an id no session has is left to rmcp (404).
    fn not_owned(&self, token: &str, headers: &HeaderMap) -> Option<Response> {
        let id = headers.get(SESSION_ID).and_then(|v| v.to_str().ok())?;
        let owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        match owners.by_session.get(id) {
            Some(owner) if owner != token => {
                tracing::warn!(
                    token,
                    owner,
                    "a request on another token's MCP session refused"
                );
                Some(refuse(
                    StatusCode::FORBIDDEN,
                    "SESSION_OF_ANOTHER_TOKEN",
                    "this MCP session was opened with another token: its requests, its \
                     notification stream and its end belong to that token"
                        .into(),
                    "send the token that initialized the session, or initialize a session of \
                     your own",
                ))
            }
            _ => None,
        }
    }
}

/// `response`, rmcp's answer to a POST, with the answer its handler kept ([`Splice`])
/// written as the `structuredContent` of the response it holds: its JSON body, or the
/// event of its event stream that holds the response ([`spliced_events`]).
async fn spliced(response: Response, splice: Splice) -> Response {
    let content_type = response.headers().get(header::CONTENT_TYPE);
    if content_type.is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream")) {
        return spliced_events(response, Some(splice));
    }
    let Some(answer) = splice.take() else {
        return response;
    };
    let json = content_type.is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    let (mut parts, body) = response.into_parts();
    // rmcp's body is whole in memory (`Full`): collecting it does not wait.
    let mut message = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => Vec::from(bytes),
        Err(e) => {
            tracing::error!(error = %e, "reading rmcp's answer failed");
            return refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "INTERNAL",
                "the answer could not be written".into(),
                "retry; the daemon's log on stderr has the cause",
            );
        }
    };
    // A handler keeps an answer only where no notification goes before it, so rmcp
    // answers with the JSON body of one response.
    if !json || !wire::splice(&mut message, &answer) {
        tracing::error!(
            "an answer kept for its structuredContent found no JSON response to go into"
        );
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(message))
}

/// `response`, an event stream of rmcp, with `structuredContent` written into the event
/// that holds a tool's answer without it, as each event passes (notifications before
/// it are not held back): the answer the POST's handler kept ([`Splice`]), or with
/// `None` (a stream resumed from rmcp's cache of events) the answer's own text.
fn spliced_events(response: Response, splice: Option<Splice>) -> Response {
    use http_body_util::BodyExt;
    let (parts, body) = response.into_parts();
    let body = body.map_frame(move |frame| match frame.into_data() {
        Ok(event) => hyper::body::Frame::data(splice_event(event, splice.as_ref())),
        Err(frame) => frame,
    });
    Response::from_parts(parts, axum::body::Body::new(body))
}

/// One server-sent event of rmcp's (`data: <message>\n`, then its `id:` and `retry:`
/// lines and a blank line), with the answer written as the `structuredContent` of the
/// message when it is a tool's answer that lacks one; any other event as it is. The
/// answer is the one `splice` kept, or without one (a resumed stream) the message's
/// own text: a POST's other responses (a resource, the tool list) are not read.
fn splice_event(event: bytes::Bytes, splice: Option<&Splice>) -> bytes::Bytes {
    let Some(rest) = event.strip_prefix(b"data: ") else {
        return event;
    };
    let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
    let (message, tail) = rest.split_at(end);
    if !wire::is_result(message) {
        return event;
    }
    let answer = match splice {
        Some(kept) => kept.take(),
        None => unspliced_answer(message),
    };
    let Some(answer) = answer else {
        return event;
    };
    let mut out = Vec::with_capacity(event.len() + answer.len() + 32);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(message);
    if !wire::splice(&mut out, &answer) {
        tracing::error!("an answer kept for its structuredContent found no response to go into");
        return event;
    }
    out.extend_from_slice(tail);
    out.into()
}

/// The text of `message`, a serialized response, when it is a tool's answer written
/// to have its `structuredContent` spliced in: one text content that is JSON, not an
/// error, and no `structuredContent` yet.
fn unspliced_answer(message: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Message<'a> {
        #[serde(borrow)]
        result: Relayed<'a>,
    }
    let Message { result } = serde_json::from_slice(message).ok()?;
    let [
        Block {
            kind,
            text: Some(text),
        },
    ] = <[Block; 1]>::try_from(result.content).ok()?
    else {
        return None;
    };
    let answer =
        kind == "text" && result.is_error != Some(true) && result.structured_content.is_none();
    let object = text.trim_start().starts_with('{')
        && serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok();
    (answer && object).then_some(text)
}

/// The `Mcp-Session-Id` header.
const SESSION_ID: &str = "mcp-session-id";

/// A response body that ends when `stop` is cancelled.
struct UntilStopping<B> {
    body: std::pin::Pin<Box<B>>,
    stop: std::pin::Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
}

impl<B> UntilStopping<B> {
    fn new(body: B, stop: CancellationToken) -> Self {
        UntilStopping {
            body: Box::pin(body),
            stop: Box::pin(stop.cancelled_owned()),
        }
    }
}

impl<B: axum::body::HttpBody> axum::body::HttpBody for UntilStopping<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        if self.stop.as_mut().poll(cx).is_ready() {
            return std::task::Poll::Ready(None);
        }
        self.body.as_mut().poll_frame(cx)
    }
}

/// The router: `/mcp` and `/health`, every route behind the Host and Origin checks.
/// `stopping` is cancelled when a shutdown begins (calls in flight go on); `abandon`
/// when the drain time is over (rmcp drops what is still running).
pub(crate) fn router(
    shared: Arc<Shared>,
    stopping: CancellationToken,
    abandon: CancellationToken,
) -> Router {
    let config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        // Host and Origin are checked in front, with the daemon's own rules.
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        .with_cancellation_token(abandon);
    let handler = DaemonHandler::stateless(stopping.clone());
    let stateless = StreamableHttpService::new(
        move || Ok(handler.for_request()),
        Arc::new(NeverSessionManager::default()),
        config.clone().with_legacy_session_mode(false),
    );
    let manager = shared.mcp_sessions.clone();
    let on_stop = stopping.clone();
    let sessions = StreamableHttpService::new(
        move || Ok(DaemonHandler::session(on_stop.clone())),
        manager.clone(),
        config.with_legacy_session_mode(true),
    );
    // One for every request: cloning its two services for each request cost 26 K
    // instructions a call (dev build, callgrind).
    let mcp = Arc::new(Mcp {
        stateless,
        sessions,
        manager,
        owners: Arc::default(),
        stopping,
    });
    // `/metrics` is open on a loopback listener (like `/health`); on another address
    // it needs a valid token, like `/mcp`.
    let open_metrics = shared.local.ip().is_loopback();
    let mut routes = Router::new().route("/mcp", any(move |req: Request| mcp.clone().serve(req)));
    if !open_metrics {
        routes = routes.route("/metrics", get(metrics));
    }
    routes = routes
        // Layers run from the last added: the token, then the body.
        .route_layer(middleware::from_fn(require_one_message))
        .route_layer(middleware::from_fn_with_state(
            shared.clone(),
            require_token,
        ));
    if open_metrics {
        routes = routes.route("/metrics", get(metrics));
    }
    routes
        .nest(
            "/ui",
            crate::web::routes(shared.cairn.clone(), shared.public_origin.clone()),
        )
        .route("/health", get(health))
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            check_host_and_origin,
        ))
        .with_state(shared)
}

/// `GET /health`: liveness (`status`, `version`, `warm`) to anyone who may reach the
/// daemon; the details (the database, the followed roots' paths, sessions, lanes) only to
/// a request with a valid session token, or over the daemon's socket (only its own user
/// can enter that directory, and that user reads the database anyway).
async fn health(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let over_socket = req.extensions().get::<ConnectInfo<SocketPeer>>().is_some();
    if !over_socket {
        if !req.headers().contains_key(header::AUTHORIZATION) {
            return axum::Json(json!({
                "status": "ok",
                "version": env!("CARGO_PKG_VERSION"),
                "warm": s.warm.load(Ordering::Relaxed),
                "details": "send a session token (Authorization: Bearer) for the database, \
                            the followed roots, sessions and lanes",
            }))
            .into_response();
        }
        if let Err(refused) = authenticate(&s, &req).await {
            return refused;
        }
    }
    let cairn = s.clone();
    let vault = match tokio::task::spawn_blocking(move || cairn.cairn.vault_status()).await {
        Ok(Ok(v)) => json!(v),
        Ok(Err(e)) => json!({"error": e.to_string()}),
        Err(e) => json!({"error": e.to_string()}),
    };
    axum::Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "db": s.cairn.store().location().to_string(),
        "url": format!("http://{}/mcp", s.local),
        "public_origin": s.public_origin,
        "pid": std::process::id(),
        "started_at": s.started_at,
        "uptime_seconds": s.started.elapsed().as_secs(),
        "sessions_served": s.sessions.load(Ordering::Relaxed),
        "sessions_live": s.servers().len(),
        "requests_served": s.requests.load(Ordering::Relaxed),
        "warm": s.warm.load(Ordering::Relaxed),
        "shared_lanes": s.lanes.shown_width(),
        "lane_nice": s.lanes.nice(),
        "calls_waiting_for_a_lane": s.lanes.waiting(),
        "calls_run_past_the_lanes": s.lanes.overflowed(),
        "following_changes": s.follower.as_ref().map(|f| f.is_listening()),
        "background_catch_ups": s.follower.as_ref().map(|f| f.catch_ups()),
        "vault": vault,
    }))
    .into_response()
}

/// `GET /metrics`: the Prometheus text format (docs/metrics.md): what this process
/// counted (tool calls, errors, latency) and what the database says now (sessions,
/// index sizes, pending embeddings and vault changes).
async fn metrics(State(s): State<Arc<Shared>>) -> Response {
    let open = s.mcp_sessions.sessions.read().await.len();
    let shared = s.clone();
    let text = tokio::task::spawn_blocking(move || scrape(&shared, open))
        .await
        .unwrap_or_default();
    ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response()
}

/// What a scrape reads now; `open` MCP sessions.
fn scrape(s: &Shared, open: usize) -> String {
    let m = crate::metrics::Scrape::default();
    scrape_daemon(&m, s, open);
    scrape_learnings(&m, &s.cairn);
    scrape_model(&m, &s.cairn);
    scrape_vault(&m, &s.cairn);
    m.render()
}

/// The daemon's own counts: uptime, requests, sessions, calls waiting for a lane.
fn scrape_daemon(m: &crate::metrics::Scrape, s: &Shared, open: usize) {
    m.gauge(
        "cairn_uptime_seconds",
        "Seconds since the daemon started.",
        s.started.elapsed().as_secs_f64(),
    );
    m.counter(
        "cairn_requests_total",
        "MCP requests that presented a valid token.",
        s.requests.load(Ordering::Relaxed),
    );
    m.counter(
        "cairn_sessions_served_total",
        "Session tokens served since the daemon started.",
        s.sessions.load(Ordering::Relaxed),
    );
    m.gauge(
        "cairn_sessions_live",
        "Session tokens whose server is in memory (dropped once expired or revoked).",
        s.servers().len() as f64,
    );
    m.gauge(
        "cairn_mcp_sessions_open",
        "MCP sessions of the 2025-11-25 handshake open now.",
        open as f64,
    );
    m.gauge(
        "cairn_calls_waiting_for_a_lane",
        "Tool calls waiting for a shared lane now.",
        s.lanes.waiting() as f64,
    );
}

/// The learnings: how many, waiting for an embedding, indexed by this process, in its graphs.
fn scrape_learnings(m: &crate::metrics::Scrape, cairn: &Cairn) {
    match cairn.learnings_sizes() {
        Ok(sizes) => {
            m.gauge(
                "cairn_learnings",
                "Learnings of every project.",
                sizes.learnings as f64,
            );
            m.gauge(
                "cairn_learnings_pending_embeddings",
                "Learnings without an embedding yet.",
                sizes.pending_embeddings as f64,
            );
        }
        Err(e) => tracing::warn!(error = %e, "metrics: learnings sizes not read"),
    }
    let indexer = cairn.learnings_indexer_stats();
    m.counter(
        "cairn_learnings_indexed_total",
        "Learnings this process's background indexer indexed.",
        indexer.indexed,
    );
    m.counter(
        "cairn_learnings_embedded_total",
        "Learnings this process's background indexer embedded.",
        indexer.embedded,
    );
    m.gauge(
        "cairn_learnings_graph_points",
        "Learnings in this process's HNSW graphs (projects with GRAPH_MIN learnings or more).",
        cairn.learnings_graph_points() as f64,
    );
}

/// The embedding model's runs and the query cache.
fn scrape_model(m: &crate::metrics::Scrape, cairn: &Cairn) {
    let model = cairn.model_stats();
    m.counter(
        "cairn_model_runs_total",
        "Runs of the embedding model (a run embeds a batch of texts).",
        model.batches,
    );
    m.counter(
        "cairn_model_texts_total",
        "Texts the embedding model embedded (queries, learnings, chunks).",
        model.texts,
    );
    m.counter(
        "cairn_query_cache_hits_total",
        "Queries whose vector came from the query cache, without the model.",
        model.query_cache_hits,
    );
    m.gauge(
        "cairn_model_documents_running",
        "Document batches (chunks, learnings) the embedding model runs now.",
        model.documents_running as f64,
    );
    m.counter(
        "cairn_model_queries_beside_documents_total",
        "Query runs the embedding model ran while a document batch was running (queries have a session of their own).",
        model.queries_beside_documents,
    );
}

/// The vault, by collection: documents, chunks, changes waiting.
fn scrape_vault(m: &crate::metrics::Scrape, cairn: &Cairn) {
    match cairn.vault_status() {
        Ok(collections) => {
            let by = |f: &dyn Fn(&crate::vault::roots::CollectionStatus) -> f64| -> Vec<(Vec<String>, f64)> {
                collections
                    .iter()
                    .map(|c| (vec![c.collection.clone()], f(c)))
                    .collect()
            };
            m.gauge_by(
                "cairn_vault_documents",
                "Documents indexed, by collection.",
                &["collection"],
                &by(&|c| c.documents as f64),
            );
            m.gauge_by(
                "cairn_vault_chunks",
                "Chunks indexed, by collection.",
                &["collection"],
                &by(&|c| c.chunks as f64),
            );
            m.gauge_by(
                "cairn_vault_pending_changes",
                "Changes to followed files seen and not yet indexed, by collection.",
                &["collection"],
                &by(&|c| c.roots.iter().map(|r| r.pending).sum::<u64>() as f64),
            );
        }
        Err(e) => tracing::warn!(error = %e, "metrics: vault status not read"),
    }
}

/// A refusal: `status` with `{"error": {"code", "message", "help"}}`.
fn refuse(status: StatusCode, code: &str, message: String, help: &str) -> Response {
    let mut r = (
        status,
        axum::Json(json!({"error": {"code": code, "message": message, "help": help}})),
    )
        .into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"cairn\""),
        );
    }
    r
}

async fn check_host_and_origin(State(s): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let session_id = header::HeaderName::from_static(SESSION_ID);
    for name in [
        header::HOST,
        header::ORIGIN,
        header::AUTHORIZATION,
        session_id,
    ] {
        if req.headers().get_all(&name).iter().nth(1).is_some() {
            tracing::warn!(header = %name, "request refused: the header is repeated");
            return refuse(
                StatusCode::BAD_REQUEST,
                "HEADER_REPEATED",
                format!("the request has more than one {name} header"),
                "send each of Host, Origin, Authorization and Mcp-Session-Id once at most",
            );
        }
    }
    if let Err(msg) = host_allowed(&s, req.headers()) {
        tracing::warn!(reason = %msg, "request refused: Host");
        return refuse(
            StatusCode::FORBIDDEN,
            "HOST_NOT_ALLOWED",
            msg,
            "connect to the address the daemon listens on (see <db>.daemon.json), or start it \
             with --allow-host NAME for a name a reverse proxy uses",
        );
    }
    if let Err(msg) = origin_allowed(req.headers(), s.public_origin.as_deref()) {
        tracing::warn!(reason = %msg, "request refused: Origin");
        return refuse(
            StatusCode::FORBIDDEN,
            "ORIGIN_NOT_ALLOWED",
            msg,
            "the daemon answers local agents, not web pages: send no Origin header, or a \
             loopback one",
        );
    }
    next.run(req).await
}

/// The `Host` header must name the listen address, a loopback name, or an `--allow-host`
/// name; with a port, the daemon's port.
fn host_allowed(s: &Shared, headers: &HeaderMap) -> Result<(), String> {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return Err("the request has no readable Host header".into());
    };
    let (name, port) = split_host(host);
    if let Some(port) = port
        && port != s.local.port().to_string()
    {
        return Err(format!(
            "Host {host:?} names another port than {}",
            s.local.port()
        ));
    }
    let listen_ip = s.local.ip().to_string();
    let name = name.trim_start_matches('[').trim_end_matches(']');
    let ok = name.eq_ignore_ascii_case("localhost")
        || name == "127.0.0.1"
        || name == "::1"
        || name == listen_ip
        || s.extra_hosts.iter().any(|h| h.eq_ignore_ascii_case(name));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "Host {host:?} is not an address this daemon answers to"
        ))
    }
}

/// Whether a request's connection comes from the process a forwarder's token is bound to
/// (`uid:pid:start`): over the Unix socket (`peer` is `None` over TCP), with the same
/// user, pid and start time.
fn same_process(bound: &str, peer: Option<Option<Process>>) -> Result<(), &'static str> {
    let want = Process::parse_binding(bound).ok_or("its process binding does not parse")?;
    match peer {
        None => Err("this request came over TCP"),
        Some(None) => Err("the kernel named no process for this connection"),
        Some(Some(got)) if got == want => Ok(()),
        Some(Some(_)) => Err("this connection comes from another process"),
    }
}

/// `name[:port]` or `[v6][:port]`.
fn split_host(host: &str) -> (&str, Option<&str>) {
    if let Some(rest) = host.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((name, tail)) => (name, tail.strip_prefix(':')),
            None => (host, None),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') => (name, Some(port)),
        _ => (host, None),
    }
}

/// An `Origin` header, when present, must be a loopback origin (`http://localhost:3000`,
/// `http://127.0.0.1`, `http://[::1]:8080`, https alike) or the `--public-origin`.
fn origin_allowed(headers: &HeaderMap, public: Option<&str>) -> Result<(), String> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let Ok(origin) = origin.to_str() else {
        return Err("the Origin header is not readable".into());
    };
    if public == Some(origin) {
        return Ok(());
    }
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    let loopback = rest.is_some_and(|authority| {
        let (name, port) = split_host(authority);
        port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            && (name.eq_ignore_ascii_case("localhost") || name == "127.0.0.1" || name == "::1")
    });
    if loopback {
        Ok(())
    } else {
        Err(format!("Origin {origin:?} is not a loopback origin"))
    }
}

/// A POST to `/mcp` must carry one JSON-RPC message: invalid JSON is answered `-32700`
/// and a batch or anything else that is no message `-32600`, with status 400, and a
/// `tools/call` with bad params `-32602` (status 200), each with the JSON-RPC error body
/// the stdio transport sends ([`wire::classify`]).
async fn require_one_message(req: Request, next: Next) -> Response {
    if req.method() != axum::http::Method::POST {
        return next.run(req).await;
    }
    let (mut parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                "BODY_TOO_LARGE",
                format!("the request body is over {MAX_BODY_BYTES} bytes (or was cut off)"),
                "send smaller arguments: a call's arguments are at most 4 MiB",
            );
        }
    };
    match wire::classify(&bytes) {
        Line::Reply(reply) => {
            // No message at all is a bad request; a request with bad params is answered
            // like any JSON-RPC request, with its id.
            let status = match reply["error"]["code"].as_i64() {
                Some(wire::INVALID_PARAMS) => StatusCode::OK,
                _ => StatusCode::BAD_REQUEST,
            };
            return (status, axum::Json(reply)).into_response();
        }
        Line::Message(msg) => {
            // Any message of method `initialize` (rmcp refuses one that is no request).
            let method = match &*msg {
                JsonRpcMessage::Request(r) => Some(r.request.method()),
                JsonRpcMessage::Notification(n) => match &n.notification {
                    ClientNotification::CustomNotification(c) => Some(c.method.as_str()),
                    _ => None,
                },
                _ => None,
            };
            if method == Some("initialize") {
                parts.extensions.insert(Handshake);
            }
        }
        Line::Skip => {}
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
}

const TOKEN_HELP: &str = "send `Authorization: Bearer <token>` with a token from \
                          `cairn session new --issue ID --agent-type TYPE` (run by the \
                          orchestrator against this daemon's database)";

async fn require_token(State(s): State<Arc<Shared>>, mut req: Request, next: Next) -> Response {
    let session = match authenticate(&s, &req).await {
        Ok(session) => session,
        Err(refused) => return refused,
    };
    let bound = {
        let mut servers = s.servers();
        servers
            .entry(session.id.clone())
            .or_insert_with(|| {
                tracing::info!(token = %session.id, "new session");
                s.sessions.fetch_add(1, Ordering::Relaxed);
                let scope = super::server_scope(session.scope.clone());
                Arc::new(Bound {
                    id: session.id.clone(),
                    expires_at: session.expires_at.clone(),
                    server: CairnServer::new(
                        s.cairn.clone(),
                        session.work.clone(),
                        scope,
                        s.lanes.clone(),
                    )
                    .with_session(session.id.clone()),
                })
            })
            .clone()
    };
    s.requests.fetch_add(1, Ordering::Relaxed);
    req.extensions_mut().insert(bound);
    next.run(req).await
}

/// The session a request's bearer token opens, or the refusal (401, or 500 when the
/// lookup fails): missing, unknown, expired, revoked, a person's, or a forwarder's own
/// token from another connection than its process's.
fn authenticate<'a>(
    s: &'a Shared,
    req: &Request,
) -> impl Future<Output = Result<Box<crate::access::tokens::Session>, Response>> + Send + 'a {
    // What the checks need, read before any wait (a request is not `Sync`).
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| {
            let (scheme, value) = h.trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| value.trim().to_string())
        });
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketPeer>>()
        .map(|c| c.0.0);
    check_token(s, token, peer)
}

/// [`authenticate`] of a bearer `token` that came over `peer` (`None`: over TCP).
async fn check_token(
    s: &Shared,
    token: Option<String>,
    peer: Option<Option<Process>>,
) -> Result<Box<crate::access::tokens::Session>, Response> {
    let Some(token) = token else {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            "TOKEN_MISSING",
            "this request carries no bearer token".into(),
            TOKEN_HELP,
        ));
    };
    let cairn = s.cairn.clone();
    // The lookup waits for the store's connection; keep it off the async workers.
    let check = tokio::task::spawn_blocking(move || cairn.authenticate_session_token(&token))
        .await
        .unwrap_or_else(|join| {
            Err(crate::Error::Internal(format!(
                "token lookup panicked: {join}"
            )))
        });
    let session = match check {
        Ok(Check::Active(session)) => session,
        Ok(Check::Unknown) => {
            return Err(refuse(
                StatusCode::UNAUTHORIZED,
                "TOKEN_UNKNOWN",
                "this token is not a session token of this daemon's database".into(),
                TOKEN_HELP,
            ));
        }
        Ok(Check::Expired { id, expires_at }) => {
            s.servers().remove(&id);
            return Err(refuse(
                StatusCode::UNAUTHORIZED,
                "TOKEN_EXPIRED",
                format!("session token {id} expired at {expires_at}"),
                "mint a new one with `cairn session new` (`--ttl` sets its lifetime)",
            ));
        }
        Ok(Check::Revoked { id, revoked_at, .. }) => {
            s.servers().remove(&id);
            return Err(refuse(
                StatusCode::UNAUTHORIZED,
                "TOKEN_REVOKED",
                format!("session token {id} was revoked at {revoked_at}"),
                "ask the orchestrator for a new session token",
            ));
        }
        Err(e) => {
            tracing::error!(error = %e, "session token lookup failed");
            return Err(refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "INTERNAL",
                "the session token could not be checked".into(),
                "retry; the daemon's log on stderr has the cause",
            ));
        }
    };
    if session.human {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            "TOKEN_HUMAN",
            format!(
                "session token {} is a person's: it opens the web page (/ui/), not MCP",
                session.id
            ),
            TOKEN_HELP,
        ));
    }
    if let Some(bound) = &session.peer
        && let Err(why) = same_process(bound, peer)
    {
        tracing::warn!(token = %session.id, why, "a forwarder's token refused from another connection");
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            "TOKEN_WRONG_PEER",
            format!(
                "session token {} belongs to the `cairn serve` that minted it for itself \
                     and is served only to that process, over the daemon's socket ({why})",
                session.id
            ),
            TOKEN_HELP,
        ));
    }
    Ok(session)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(message: &str) -> bytes::Bytes {
        format!("data: {message}\nid: 0/3\n\n").into()
    }

    #[test]
    fn the_event_holding_an_answer_gets_its_structured_content_and_no_other_does() {
        let answer = r#"{"results":[{"id":"L-1"}]}"#;
        let text = serde_json::to_string(answer).unwrap();
        let response = format!(
            r#"{{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"type":"text","text":{text}}}],"isError":false}}}}"#
        );
        let spliced = format!(
            r#"{{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"type":"text","text":{text}}}],"isError":false,"structuredContent":{answer}}}}}"#
        );
        // The answer kept by the handler goes into the response, once.
        let kept = Splice::default();
        kept.keep(answer.into());
        let progress = event(
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}"#,
        );
        assert_eq!(splice_event(progress.clone(), Some(&kept)), progress);
        assert_eq!(splice_event(event(&response), Some(&kept)), event(&spliced));
        // A POST whose handler kept nothing (another method's response): left as it is.
        assert_eq!(
            splice_event(event(&response), Some(&kept)),
            event(&response)
        );
        // A stream resumed after a lost connection (no POST): from the answer's own text.
        assert_eq!(splice_event(event(&response), None), event(&spliced));
        // Left as they are: a response that has its structuredContent, an error result,
        // a text that is not a JSON object, a keep-alive.
        let error = response.replace(r#""isError":false"#, r#""isError":true"#);
        let plain =
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"done"}]}}"#;
        for same in [event(&spliced), event(&error), event(plain), ":\n\n".into()] {
            assert_eq!(splice_event(same.clone(), None), same);
        }
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), v.parse().unwrap());
        }
        h
    }

    #[test]
    fn origins_must_be_absent_loopback_or_the_public_one() {
        assert!(origin_allowed(&headers(&[]), None).is_ok());
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://[::1]:8443",
            "http://LOCALHOST",
        ] {
            assert!(
                origin_allowed(&headers(&[(header::ORIGIN, ok)]), None).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "null",
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.nip.io:80",
            "file://",
            "http://localhost:x",
            "ftp://localhost",
        ] {
            assert!(
                origin_allowed(&headers(&[(header::ORIGIN, bad)]), None).is_err(),
                "{bad}"
            );
        }
        // Behind a TLS proxy: its origin exactly, no other.
        let public = Some("https://cairn.example.internal");
        let origin = |o: &str| headers(&[(header::ORIGIN, o)]);
        assert!(origin_allowed(&origin("https://cairn.example.internal"), public).is_ok());
        for bad in [
            "http://cairn.example.internal",
            "https://cairn.example.internal:8443",
            "https://evil.cairn.example.internal",
        ] {
            assert!(origin_allowed(&origin(bad), public).is_err(), "{bad}");
        }
    }

    #[test]
    fn hosts_split_with_and_without_ports() {
        assert_eq!(split_host("localhost:80"), ("localhost", Some("80")));
        assert_eq!(split_host("[::1]:80"), ("::1", Some("80")));
        assert_eq!(split_host("[::1]"), ("::1", None));
        assert_eq!(split_host("example"), ("example", None));
        assert_eq!(split_host("::1"), ("::1", None));
    }
}
