//! The rmcp handler of the daemon: every request is answered by the [`CairnServer`] of
//! the session token that request presented.
//!
//! rmcp's Streamable HTTP service runs statelessly here (a fresh handler per request), and
//! hands the handler the request's HTTP parts; the token check in front of it
//! ([`super::http`]) put the token's [`Bound`] server into those parts. Nothing in the
//! MCP message (arguments, `_meta`, a session id) chooses the binding.

use std::sync::Arc;

use axum::http::request::Parts;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;

use crate::mcp::server::{CairnServer, server_config};

/// The server a request's token is bound to, put into the request by the token check.
#[derive(Clone)]
pub struct Bound {
    /// The token's public id (for logs).
    pub id: String,
    /// When the token expires (its server is dropped by the next sweep after that).
    pub expires_at: String,
    pub server: CairnServer,
}

/// Test hook: `CAIRN_FAILPOINT=daemon-hold-call` holds every `tools/call` until the daemon
/// begins to shut down (so a test can deliver SIGTERM with a call in flight, without
/// guessing a delay).
const HOLD_CALL_FAILPOINT: &str = "daemon-hold-call";

/// One per request (rmcp's stateless mode builds one for every POST).
#[derive(Clone)]
pub struct DaemonHandler {
    /// Cancelled when the daemon begins to shut down.
    pub stopping: CancellationToken,
}

fn bound(context: &RequestContext<RoleServer>) -> Result<Arc<Bound>, McpError> {
    context
        .extensions
        .get::<Parts>()
        .and_then(|p| p.extensions.get::<Arc<Bound>>())
        .cloned()
        .ok_or_else(|| {
            // The token check runs before every /mcp request; this is a wiring fault.
            tracing::error!("an MCP request reached the handler without a session binding");
            McpError::internal_error("no session binding", None)
        })
}

impl ServerHandler for DaemonHandler {
    fn get_info(&self) -> ServerConfig {
        server_config()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let b = bound(&context)?;
        b.server.list_tools(request, context).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let b = bound(&context)?;
        if crate::failpoint::is_set(HOLD_CALL_FAILPOINT) {
            tracing::info!(token = %b.id, tool = %request.name, "failpoint {HOLD_CALL_FAILPOINT}: holding the call");
            self.stopping.cancelled().await;
        }
        tracing::debug!(token = %b.id, tool = %request.name, "tools/call");
        Ok(b.server.call(&request.name, request.arguments).await.into())
    }
}
