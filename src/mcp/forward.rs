//! `cairn serve` in front of a `cairn daemon`: the stdio server forwards each tool call
//! to the daemon of the same database, and falls back to answering alone when it goes
//! away (details: docs/deployment.md, "stdio forwarding").
//!
//! - **Finding the daemon**: `--connect URL`, else the discovery file `<db>.daemon.json`.
//!   It is used only when `GET /health` answers 200 within [`HEALTH_TIMEOUT`] with this
//!   binary's version (so the tool list, schemas and rules are this server's).
//! - **Binding**: the forwarder mints a session token bound to its own flags
//!   ([`crate::tokens::mint`], the same binding `cairn serve` checks), valid for
//!   [`TOKEN_TTL`], and revokes it on exit. The daemon scopes every forwarded call with it.
//! - **Forwarding**: an rmcp stdio server whose handler sends `tools/call` through an
//!   rmcp Streamable HTTP client. `initialize` and `tools/list` are answered here: the
//!   local [`CairnServer`] lists exactly what the token allows (same scope, same version).
//! - **Fallback**: a call that fails at the transport (the daemon was killed, stopped,
//!   or refuses the token) marks the daemon gone for the rest of the session and starts
//!   the local background indexer; the call is answered by the local server at once when
//!   repeating it is safe (a read-only or idempotent tool). A call that changes state and
//!   is not idempotent is first preceded by a TCP connect to the daemon: when that is
//!   refused the daemon never saw the call and it runs locally; when the daemon dies
//!   *during* such a call, the outcome is unknown and the agent gets a
//!   `FAILED_PRECONDITION` error saying so (running it again could record it twice).
//!
//! stdout carries only MCP messages: everything here logs to stderr.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams, ServerConfig,
};
use rmcp::service::{Peer, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ErrorData as McpError, RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::Cairn;
use crate::context::BindArgs;
use crate::error::Error;

use super::envelope;
use super::registry::all_tools;
use super::server::{CairnServer, Scope, error_result};
use super::tool::Effect;

/// How long `GET /health` may take before the daemon counts as absent.
pub const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the forwarder's token lives (it is revoked when the session ends).
pub const TOKEN_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long the connect probe before a non-idempotent call may take.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// A daemon this session forwards to.
pub struct Remote {
    url: String,
    /// `host:port` of the daemon, for the connect probe.
    authority: String,
    token_id: String,
    service: RunningService<RoleClient, ()>,
}

/// Find a live daemon for `cairn`'s database (`connect` wins over the discovery file),
/// mint a token bound to `bind` and `scope`, and open an MCP session with it. `None`
/// (logged) when there is none, it does not answer, or it runs another version.
pub async fn connect(
    cairn: &Arc<Cairn>,
    connect: Option<&str>,
    bind: &BindArgs,
    scope: &Scope,
) -> Option<Remote> {
    let url = match connect {
        Some(u) => u.to_string(),
        None => crate::daemon::read_discovery(cairn.store().path())?.url,
    };
    let health = match health(&url).await {
        Ok(h) => h,
        Err(why) => {
            tracing::info!(url, why, "no Cairn daemon answers; serving alone");
            return None;
        }
    };
    // `health` answered, so the URL has an authority (the connect probe's address).
    let authority = authority(&url)?;
    let version = health["version"].as_str().unwrap_or_default();
    if version != env!("CARGO_PKG_VERSION") {
        tracing::warn!(
            url,
            daemon = version,
            ours = env!("CARGO_PKG_VERSION"),
            "the Cairn daemon runs another version; serving alone"
        );
        return None;
    }
    // rmcp's default client opens a connection for every request (it turns pooling off
    // because a response body left unread can stall the next request on a reused
    // connection). The daemon answers with JSON of a known length, read whole, on
    // connections without Nagle's delay, so the forwarder keeps one connection (a
    // connect, accept and close less per call). No redirects: the daemon sends none.
    let http = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "could not build an HTTP client; serving alone");
            return None;
        }
    };
    let minted = {
        let (cairn, bind) = (cairn.clone(), bind.clone());
        let scope = crate::daemon::tool_scope(scope);
        tokio::task::spawn_blocking(move || {
            cairn.mint_session_token(&bind, scope.as_ref(), TOKEN_TTL)
        })
        .await
    };
    let minted = match minted {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "could not mint a session token; serving alone");
            return None;
        }
        Err(e) => {
            tracing::warn!(error = %e, "minting a session token failed; serving alone");
            return None;
        }
    };
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(minted.token),
    );
    match ().serve(transport).await {
        Ok(service) => {
            tracing::info!(url, token = %minted.info.id, "forwarding tool calls to the Cairn daemon");
            Some(Remote {
                url,
                authority,
                token_id: minted.info.id,
                service,
            })
        }
        Err(e) => {
            tracing::warn!(url, error = %e, "the Cairn daemon refused the session; serving alone");
            revoke(cairn, &minted.info.id).await;
            None
        }
    }
}

async fn revoke(cairn: &Arc<Cairn>, id: &str) {
    let (cairn, id) = (cairn.clone(), id.to_string());
    let done = tokio::task::spawn_blocking(move || cairn.revoke_session_token(&id)).await;
    if !matches!(done, Ok(Ok(_))) {
        tracing::warn!("could not revoke the forwarding session token; it expires by itself");
    }
}

/// `host:port` of an `http://` URL.
fn authority(url: &str) -> Option<String> {
    let rest = url.strip_prefix("http://")?;
    let host = rest.split('/').next()?;
    (!host.is_empty()).then(|| host.to_string())
}

/// `GET /health` of the daemon whose MCP endpoint is `url` (`http://HOST:PORT/mcp`), over
/// plain HTTP/1.1 within [`HEALTH_TIMEOUT`]: its JSON body, or why not.
pub async fn health(url: &str) -> Result<Value, String> {
    let authority = authority(url).ok_or("not an http:// URL")?;
    let authority = authority.as_str();
    let fetch = async {
        let mut s = tokio::net::TcpStream::connect(authority)
            .await
            .map_err(|e| e.to_string())?;
        let req = format!("GET /health HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        s.take(1 << 20)
            .read_to_end(&mut buf)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(buf)
    };
    let buf = tokio::time::timeout(HEALTH_TIMEOUT, fetch)
        .await
        .map_err(|_| "timed out".to_string())??;
    let text = String::from_utf8_lossy(&buf);
    let status = text.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(format!("answered {status:?}"));
    }
    let body = text.split_once("\r\n\r\n").map(|b| b.1).unwrap_or_default();
    // The body is one JSON object (chunked or not).
    let (Some(a), Some(b)) = (body.find('{'), body.rfind('}')) else {
        return Err("no JSON body".into());
    };
    serde_json::from_str(&body[a..=b]).map_err(|e| e.to_string())
}

/// Whether a tool may be sent again after a call whose outcome is unknown.
fn repeatable(name: &str) -> bool {
    all_tools()
        .iter()
        .find(|t| t.name == name)
        .is_none_or(|t| match t.effect {
            Effect::ReadOnly => true,
            Effect::Additive { idempotent } | Effect::Destructive { idempotent } => idempotent,
        })
}

/// The stdio handler of a forwarding `cairn serve`.
#[derive(Clone)]
pub struct Forwarder {
    inner: Arc<Inner>,
}

struct Inner {
    local: CairnServer,
    cairn: Arc<Cairn>,
    /// The daemon's peer and `host:port`, until it goes away.
    remote: Mutex<Option<(Peer<RoleClient>, String)>>,
    /// The session with the daemon (kept to close it and revoke the token at the end).
    session: Mutex<Option<Remote>>,
}

impl Forwarder {
    pub fn new(local: CairnServer, cairn: Arc<Cairn>, remote: Remote) -> Forwarder {
        let peer = remote.service.peer().clone();
        let authority = remote.authority.clone();
        Forwarder {
            inner: Arc::new(Inner {
                local,
                cairn,
                remote: Mutex::new(Some((peer, authority))),
                session: Mutex::new(Some(remote)),
            }),
        }
    }

    fn remote(&self) -> Option<(Peer<RoleClient>, String)> {
        self.inner
            .remote
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The daemon went away: serve alone from now on.
    fn gone(&self, why: &str) {
        let was = self
            .inner
            .remote
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if was.is_some() {
            tracing::warn!(
                why,
                "the Cairn daemon went away; this session is served locally from now on"
            );
            if let Err(e) = self.inner.cairn.index_learnings_in_background() {
                tracing::warn!(error = %e, "could not start the learnings indexer");
            }
        }
    }

    /// End the session with the daemon and revoke the token (at exit).
    pub async fn close(&self) {
        let session = self
            .inner
            .session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(r) = session {
            let _ = tokio::time::timeout(Duration::from_secs(1), r.service.cancel()).await;
            revoke(&self.inner.cairn, &r.token_id).await;
            tracing::info!(url = r.url, "forwarding session closed");
        }
    }

    async fn forward(&self, request: &CallToolRequestParams) -> Option<CallToolResponse> {
        let (peer, authority) = self.remote()?;
        let repeatable = repeatable(&request.name);
        if !repeatable {
            let probe =
                tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(&authority))
                    .await;
            if !matches!(probe, Ok(Ok(_))) {
                self.gone("connection refused");
                return None;
            }
        }
        match peer.call_tool(request.clone()).await {
            Ok(r) => Some(r.into()),
            Err(e) => {
                self.gone(&e.to_string());
                if repeatable {
                    return None;
                }
                let def = all_tools().iter().find(|t| t.name == request.name)?;
                let err = Error::FailedPrecondition(
                    "the shared Cairn daemon went away during this call, so whether it was \
                     recorded is unknown. Later calls are answered by this session's own \
                     server: check (get_issue, search_learnings, list_findings) before \
                     repeating it"
                        .into(),
                );
                Some(error_result(envelope::domain_error(def, &err)).into())
            }
        }
    }
}

impl ServerHandler for Forwarder {
    fn get_info(&self) -> ServerConfig {
        self.inner.local.get_info()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, McpError> {
        self.inner.local.list_tools(request, context).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, McpError> {
        if let Some(r) = self.forward(&request).await {
            return Ok(r);
        }
        self.inner.local.call_tool(request, context).await
    }
}
