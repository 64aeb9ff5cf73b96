//! The rmcp handler of the daemon: every request is answered by the [`CairnServer`] of
//! the session token that request presented.
//!
//! rmcp's Streamable HTTP service hands the handler the request's HTTP parts; the token
//! check in front of it ([`super::http`]) put the token's [`Bound`] server into those
//! parts. Nothing in the MCP message (arguments, `_meta`, a session id) chooses the
//! binding. Two kinds of handler:
//!
//! - **stateless** (a fresh handler per request): protocol 2026-07-28 and every request
//!   without a session, answered by the token's server;
//! - **a session** (one handler per `Mcp-Session-Id`, opened by a 2025-11-25 `initialize`):
//!   a connection of the token's server with subscriptions and a log level of its own
//!   ([`CairnServer::for_connection`]), whose notifications reach the client on the
//!   session's `GET` stream. The session belongs to the token that opened it: a request
//!   with another token is refused.
//!
//! A `tools/call` is answered as over stdio (issue 59): the server serializes the answer
//! once, to its JSON text, and [`Splice`] writes that text as the `structuredContent` of
//! the response rmcp writes (its JSON body, or the event of its event stream that holds
//! the response: a session's, or one whose notifications go before the response),
//! instead of rmcp serializing the answer again from a tree.
//!
//! rmcp asks a stateless handler which `subscriptions/listen` filter it accepts without
//! the request's context, and acknowledges it before the listen runs. So the handler
//! rmcp builds for a stateless request is given that request's binding
//! ([`with_binding`], [`DaemonHandler::for_request`]): the filter is cut to the binding's
//! reach and the listen's starting point read before the acknowledgment, as over stdio.

use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};

use axum::http::request::Parts;
#[allow(deprecated)] // SetLevelRequestParams: logging, still in the versions clients speak
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, InitializeRequestParams, InitializeResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerConfig,
    SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;

use crate::mcp::dialect::Dialect;
use crate::mcp::server::{CairnServer, server_config};
use crate::mcp::wire::Answers;

/// The server a request's token is bound to, put into the request by the token check.
#[derive(Clone)]
pub(crate) struct Bound {
    /// The token's public id (for logs).
    pub(crate) id: String,
    /// When the token expires (its server is dropped by the next sweep after that).
    pub(crate) expires_at: String,
    pub(crate) server: CairnServer,
}

/// Test hook: `CAIRN_FAILPOINT=daemon-hold-call` holds every `tools/call` until the daemon
/// begins to shut down (so a test can deliver SIGTERM with a call in flight, without
/// guessing a delay).
const HOLD_CALL_FAILPOINT: &str = "daemon-hold-call";

tokio::task_local! {
    /// The binding of the stateless request being served, for the handler rmcp builds for
    /// it in the same task.
    static REQUEST_BOUND: Arc<Bound>;
}

/// Serve `f` (rmcp's handling of one stateless request) with the request's binding
/// known to [`DaemonHandler::for_request`].
pub(crate) async fn with_binding<F: Future>(bound: Option<Arc<Bound>>, f: F) -> F::Output {
    match bound {
        Some(b) => REQUEST_BOUND.scope(b, f).await,
        None => f.await,
    }
}

/// The answer of a POST, kept by its handler for the response: the success of a
/// `tools/call` answered by its JSON text alone, whose `structuredContent`
/// [`super::http`] writes from that text ([`crate::mcp::wire::splice`]). Put into the
/// request's HTTP extensions before rmcp handles it.
#[derive(Clone, Default)]
pub(crate) struct Splice(Arc<Mutex<Option<String>>>);

impl Splice {
    pub(super) fn keep(&self, text: String) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(text);
    }

    /// The answer's text, if the handler kept one.
    pub(crate) fn take(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// A session's binding, set by its `initialize`.
struct Connection {
    /// The id of the token that opened the session.
    token: String,
    server: CairnServer,
}

/// One per request (rmcp's stateless mode builds one for every POST), or one per session.
#[derive(Clone)]
pub(crate) struct DaemonHandler {
    /// Cancelled when the daemon begins to shut down.
    stopping: CancellationToken,
    /// `None` on the stateless path; a session's binding once it is initialized.
    connection: Option<Arc<OnceLock<Connection>>>,
    /// A stateless request's binding, when the handler was built for it.
    request: Option<Arc<Bound>>,
}

impl DaemonHandler {
    /// The handler of stateless requests.
    pub(crate) fn stateless(stopping: CancellationToken) -> DaemonHandler {
        DaemonHandler {
            stopping,
            connection: None,
            request: None,
        }
    }

    /// The handler of the stateless request being served: with its binding when it runs
    /// within [`with_binding`].
    pub(crate) fn for_request(&self) -> DaemonHandler {
        DaemonHandler {
            request: REQUEST_BOUND.try_with(Arc::clone).ok(),
            ..self.clone()
        }
    }

    /// The handler of one new session.
    pub(crate) fn session(stopping: CancellationToken) -> DaemonHandler {
        DaemonHandler {
            stopping,
            connection: Some(Arc::default()),
            request: None,
        }
    }

    /// The server that answers this request: the token's, or the session's when the
    /// request presents the token that opened the session.
    fn server(&self, context: &RequestContext<RoleServer>) -> Result<CairnServer, McpError> {
        let b = bound(context)?;
        let Some(connection) = &self.connection else {
            return Ok(b.server.clone());
        };
        match connection.get() {
            Some(c) if c.token == b.id => Ok(c.server.clone()),
            Some(_) => Err(McpError::invalid_request(
                "this MCP session was opened with another token: send the token that \
                 initialized it, or initialize a session of your own",
                None,
            )),
            // rmcp answers nothing but `initialize` before the handshake.
            None => Err(McpError::invalid_request(
                "the session is not initialized: send initialize first",
                None,
            )),
        }
    }
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

/// The schema dialect the request's URL asks for (`/mcp?schema_dialect=gemini`), if any.
fn dialect(context: &RequestContext<RoleServer>) -> Result<Option<Dialect>, McpError> {
    let query = context
        .extensions
        .get::<Parts>()
        .and_then(|p| p.uri.query())
        .unwrap_or_default();
    let Some(name) = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("schema_dialect="))
    else {
        return Ok(None);
    };
    <Dialect as clap::ValueEnum>::from_str(name, false)
        .map(Some)
        .map_err(|_| {
            McpError::invalid_params(
                format!(
                    "schema_dialect={name} in the URL is not a schema dialect: use portable, \
                     openai-strict or gemini"
                ),
                None,
            )
        })
}

impl ServerHandler for DaemonHandler {
    fn get_info(&self) -> ServerConfig {
        server_config()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let server = self.server(&context)?;
        Ok(ListToolsResult::with_all_items(
            server.tools_in(dialect(&context)?),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let server = self.server(&context)?;
        if crate::base::failpoint::is_set(HOLD_CALL_FAILPOINT) {
            tracing::info!(session = %server.session(), tool = %request.name, "failpoint {HOLD_CALL_FAILPOINT}: holding the call");
            self.stopping.cancelled().await;
        }
        tracing::debug!(session = %server.session(), tool = %request.name, "tools/call");
        // Answered by its text alone where the response is written from it.
        let splice = context
            .extensions
            .get::<Parts>()
            .and_then(|p| p.extensions.get::<Splice>())
            .cloned();
        let Some(splice) = splice else {
            return server.call_tool(request, context).await;
        };
        let answers = Answers::default();
        context.extensions.insert(answers.clone());
        let id = context.id.clone();
        let response = server.call_tool(request, context).await?;
        if answers.take(&id)
            && let CallToolResponse::Complete(result) = &response
            && let [content] = result.content.as_slice()
            && let Some(answer) = content.as_text()
        {
            splice.keep(answer.text.clone());
        }
        Ok(response)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.server(&context)?
            .list_resources(request, context)
            .await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.server(&context)?
            .list_resource_templates(request, context)
            .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.server(&context)?.read_resource(request, context).await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.server(&context)?.list_prompts(request, context).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        self.server(&context)?.get_prompt(request, context).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        self.server(&context)?.complete(request, context).await
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.server(&context)?.set_level(request, context).await
    }

    /// A 2025-11-25 handshake: the session is bound to the token it presents, and served
    /// by a connection of that token's server.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        if let Some(connection) = &self.connection {
            let b = bound(&context)?;
            let _ = connection.set(Connection {
                token: b.id.clone(),
                server: b.server.for_connection(),
            });
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Some(c) = self.connection.as_ref().and_then(|c| c.get()) {
            c.server.on_initialized(context).await;
        }
    }

    /// Within a session, as over stdio. Without one (a stateless request), a
    /// notification could reach the client only while one of its requests is open: the
    /// request is refused with advice.
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if self.connection.is_some() {
            return self.server(&context)?.subscribe(request, context).await;
        }
        Err(McpError::invalid_request(
            format!(
                "resources/subscribe needs a session that outlives a request: initialize \
                 one (protocol 2025-11-25, then send its Mcp-Session-Id) or subscribe to \
                 {} with subscriptions/listen (protocol 2026-07-28)",
                request.uri
            ),
            None,
        ))
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.server(&context)?.unsubscribe(request, context).await
    }

    /// What the request's binding may read, its starting point read now (before rmcp
    /// acknowledges it). Without a binding (a wiring fault) what was asked: `listen`
    /// then refuses the request.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        match &self.request {
            Some(b) => b.server.accepted_subscription_filter(requested),
            None => Some(requested.clone()),
        }
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let b = bound(context.request_context())?;
        b.server.listen(context).await
    }
}
