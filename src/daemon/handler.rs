//! The rmcp handler of the daemon: every request is answered by the [`CairnServer`] of
//! the session token that request presented.
//!
//! rmcp's Streamable HTTP service runs statelessly here (a fresh handler per request), and
//! hands the handler the request's HTTP parts; the token check in front of it
//! ([`super::http`]) put the token's [`Bound`] server into those parts. Nothing in the
//! MCP message (arguments, `_meta`, a session id) chooses the binding.

use std::sync::Arc;

use axum::http::request::Parts;
#[allow(deprecated)] // SetLevelRequestParams: logging, still in the versions clients speak
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter,
};
use rmcp::service::{RequestContext, SubscriptionContext};
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
        b.server.call_tool(request, context).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        bound(&context)?
            .server
            .list_resources(request, context)
            .await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        bound(&context)?
            .server
            .list_resource_templates(request, context)
            .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        bound(&context)?
            .server
            .read_resource(request, context)
            .await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        bound(&context)?.server.list_prompts(request, context).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        bound(&context)?.server.get_prompt(request, context).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        bound(&context)?.server.complete(request, context).await
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        bound(&context)?.server.set_level(request, context).await
    }

    /// Each request gets a fresh handler here (stateless HTTP): a notification can reach
    /// the client only while one of its requests is open, so resource subscriptions
    /// over the daemon are `subscriptions/listen` (protocol 2026-07-28), a request that
    /// stays open; `resources/subscribe` is refused with that advice.
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Err(McpError::invalid_request(
            format!(
                "resources/subscribe needs a session that outlives a request; over the \
                 daemon's HTTP subscribe to {} with subscriptions/listen (protocol \
                 2026-07-28), or use cairn serve over stdio",
                request.uri
            ),
            None,
        ))
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // The binding is known only with the request: accept what was asked, and let
        // `listen` keep what the session may read.
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let b = bound(context.request_context())?;
        b.server.listen(context).await
    }
}
