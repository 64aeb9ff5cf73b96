//! The MCP server over stdio (rmcp): `tools/list` filtered by scope, and `tools/call`
//! through scope → size limit → schema validation → binding → handler.
//!
//! Every outcome of a call is a `CallToolResult`. A success carries its result as
//! `structuredContent` (valid against the tool's `outputSchema`, every string cleaned by
//! the text policy) and as JSON text, both from one serialization ([`super::answer`]); a
//! failure carries `isError: true` and the envelope of [`super::envelope`] as JSON *text
//! content only*: a `structuredContent` that fails the `outputSchema` makes the
//! TypeScript SDK and the Inspector throw before the agent sees the error
//! (docs/mcp-clients.md). A handler that panics is
//! caught at the blocking-pool boundary and reported as an internal error; the server
//! keeps serving.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, LazyLock, Mutex, OnceLock, Weak};
use std::time::Instant;

#[allow(deprecated)] // logging: still in the protocol versions clients speak
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, Tool, ToolAnnotations,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use crate::Cairn;
use crate::access::context::WorkContext;
use crate::error::{Error, Result};
use crate::metrics::cost::{Unit, Work};

use super::answer::{Answer, Wire};
use super::dialect::Dialect;
use super::envelope;
use super::lanes::{Lane, Lanes, Panicked};
use super::registry::{MAX_ARGUMENT_BYTES, all_tools, scope_matrix};
use super::tool::{Effect, ToolCtx, ToolDef};
use super::wire::{Answers, LineTransport};

/// What a session's notifications need (`super::subscriptions`): the URIs subscribed,
/// the clients connected and whether the watcher runs.
#[derive(Default)]
pub(crate) struct Subscriptions {
    /// Each subscribed URI with the document's hash when it was subscribed: a change
    /// between the subscription and the watcher's next look is still a change.
    pub(super) uris: Mutex<BTreeMap<String, Option<String>>>,
    pub(super) peers: Mutex<Vec<Peer<RoleServer>>>,
    pub(super) watching: AtomicBool,
    /// What a `subscriptions/listen` saw when its filter was accepted, before its
    /// acknowledgment went out, by the URIs it accepted (taken by its `listen`).
    pub(super) starts: Mutex<Vec<(Vec<String>, Seen)>>,
}

/// What a watcher of subscriptions last saw (`super::subscriptions`): each URI's document
/// hash, and the list's mark.
#[derive(Default)]
pub(crate) struct Seen {
    pub(super) hashes: HashMap<String, Option<String>>,
    pub(super) list: Option<(i64, i64)>,
}

/// How often a call with a `progressToken` reports that it still runs.
pub(crate) const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// Which tools a server exposes.
#[derive(Debug, Clone)]
pub enum Scope {
    /// No scope flag: every tool.
    All,
    /// `--agent-type` (the spec's profile matrix) or `--tool-scope-file`.
    Only {
        label: String,
        tools: HashSet<String>,
    },
}

impl Scope {
    /// Resolve the start-up flags: the scope file wins over the agent type.
    pub fn resolve(scope_file: Option<&Path>, agent_type: Option<&str>) -> Result<Scope> {
        if let Some(path) = scope_file {
            let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
            let names: Vec<String> = serde_json::from_str(&text).map_err(|e| {
                Error::invalid(
                    "tool_scope_file",
                    format!("{} is not a JSON array of tool names: {e}", path.display()),
                )
            })?;
            let known: HashSet<&str> = all_tools().iter().map(|t| t.name).collect();
            for n in names.iter().filter(|n| !known.contains(n.as_str())) {
                tracing::warn!(tool = %n, "tool scope file names an unknown tool; ignored");
            }
            return Ok(Scope::Only {
                label: format!("scope file {}", path.display()),
                tools: names.into_iter().collect(),
            });
        }
        if let Some(t) = agent_type {
            let tools = scope_matrix()
                .profile_defaults(t)?
                .into_iter()
                .map(String::from)
                .collect();
            return Ok(Scope::Only {
                label: format!("agent type {t}"),
                tools,
            });
        }
        Ok(Scope::All)
    }

    fn allows(&self, name: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Only { tools, .. } => tools.contains(name),
        }
    }

    fn label(&self) -> &str {
        match self {
            Scope::All => "all tools",
            Scope::Only { label, .. } => label,
        }
    }
}

/// The rmcp handler: one per `cairn serve` process.
#[derive(Clone)]
pub struct CairnServer {
    inner: Arc<Inner>,
}

struct Inner {
    cairn: Arc<Cairn>,
    work: WorkContext,
    tools: &'static [ToolDef],
    /// Shared by every server of the process with the same scope.
    scoped: Arc<Scoped>,
    /// The session's label in the log: the daemon's token id, `stdio-<pid>` for `cairn
    /// serve`, `-` when unset.
    session: String,
    started: Instant,
    /// Shared by every server of the process.
    lanes: Arc<Lanes>,
    /// The form `tools/list` shows input schemas in.
    dialect: Dialect,
    /// Resource subscriptions and the clients to notify.
    subscriptions: Subscriptions,
    /// The level `logging/setLevel` asked for; no log notifications before it.
    #[allow(deprecated)]
    log_level: Mutex<Option<LoggingLevel>>,
}

/// A scope and the MCP form of the tools it lists, in each schema dialect asked for.
struct Scoped {
    scope: Scope,
    listed: [OnceLock<Vec<Tool>>; 3],
}

impl Scoped {
    fn listed(&self, dialect: Dialect) -> &[Tool] {
        self.listed[dialect as usize].get_or_init(|| {
            all_tools()
                .iter()
                .zip(mcp_tools(dialect))
                .filter(|(t, _)| self.scope.allows(t.name))
                .map(|(_, listed)| listed.clone())
                .collect()
        })
    }
}

/// The [`Scoped`] of `scope`, shared by every server with the same scope: a daemon makes a
/// server per session, and a copy of the tool list each (about 10 KiB) would add up.
fn scoped(scope: Scope) -> Arc<Scoped> {
    static SHARED: LazyLock<Mutex<HashMap<Vec<String>, Weak<Scoped>>>> =
        LazyLock::new(Default::default);
    let key: Vec<String> = match &scope {
        Scope::All => Vec::new(),
        Scope::Only { label, tools } => {
            let mut k: Vec<String> = tools.iter().cloned().collect();
            k.sort();
            k.push(label.clone());
            k
        }
    };
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = shared.get(&key).and_then(Weak::upgrade) {
        return s;
    }
    let s = Arc::new(Scoped {
        scope,
        listed: Default::default(),
    });
    shared.retain(|_, w| w.strong_count() > 0);
    shared.insert(key, Arc::downgrade(&s));
    s
}

/// The MCP form of a tool definition, its input schema in `dialect`.
fn to_mcp_tool(def: &ToolDef, dialect: Dialect) -> Tool {
    let annotations = match def.effect {
        Effect::ReadOnly => ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(true),
        Effect::Additive { idempotent } => ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .idempotent(idempotent),
        Effect::Destructive { idempotent } => ToolAnnotations::new()
            .read_only(false)
            .destructive(true)
            .idempotent(idempotent),
    };
    let mut tool = Tool::default();
    tool.name = def.name.into();
    tool.description = Some(def.description.into());
    tool.input_schema = Arc::new(super::dialect::listed(&def.input_schema, dialect));
    tool.output_schema = Some(Arc::new(def.output_schema.clone()));
    tool.annotations = Some(annotations.open_world(false));
    tool
}

/// The MCP form of every tool of [`all_tools`], in its order, built once per process
/// and dialect (a clone shares the schemas).
fn mcp_tools(dialect: Dialect) -> &'static [Tool] {
    static LISTED: [OnceLock<Vec<Tool>>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    LISTED[dialect as usize].get_or_init(|| {
        all_tools()
            .iter()
            .map(|t| to_mcp_tool(t, dialect))
            .collect()
    })
}

/// A failed call: the envelope as JSON text, no `structuredContent`. Its strings are
/// cleaned like every answer's (a message may quote what the caller sent).
pub(crate) fn error_result(mut envelope: Value) -> CallToolResult {
    crate::text::clean_json(&mut envelope);
    CallToolResult::error(vec![ContentBlock::text(envelope.to_string())])
}

impl CairnServer {
    /// A server bound to `work` and `scope`; its handlers run in `lanes` (shared by every
    /// server of the process: [`Lanes::unlimited`] for one client, as `cairn serve`).
    pub fn new(
        cairn: Arc<Cairn>,
        work: WorkContext,
        scope: Scope,
        lanes: Arc<Lanes>,
    ) -> CairnServer {
        CairnServer {
            inner: Arc::new(Inner {
                cairn,
                work,
                tools: all_tools(),
                scoped: scoped(scope),
                session: "-".into(),
                started: Instant::now(),
                lanes,
                dialect: Dialect::default(),
                subscriptions: Subscriptions::default(),
                log_level: Mutex::new(None),
            }),
        }
    }

    pub(super) fn cairn(&self) -> &Arc<Cairn> {
        &self.inner.cairn
    }

    pub(super) fn work(&self) -> &WorkContext {
        &self.inner.work
    }

    /// Whether this session's scope lets it call `tool`.
    pub(super) fn allows(&self, tool: &str) -> bool {
        self.inner.scoped.scope.allows(tool)
    }

    pub(super) fn subscriptions(&self) -> &Subscriptions {
        &self.inner.subscriptions
    }

    /// Send `data` as a log notification to the client of `context` when it asked for
    /// `level`: by the request's own `_meta` (2026-07-28) or by `logging/setLevel`.
    #[allow(deprecated)]
    async fn log_to(&self, context: &RequestContext<RoleServer>, level: LoggingLevel, data: Value) {
        // The levels in the protocol's order, least severe first.
        if self
            .log_level(context)
            .is_some_and(|w| level as u8 >= w as u8)
        {
            let _ = context
                .peer
                .notify_logging_message(
                    LoggingMessageNotificationParam::new(level, data).with_logger("cairn"),
                )
                .await;
        }
    }

    /// The least severe level the client of `context` asked to be sent, if it asked.
    #[allow(deprecated)]
    fn log_level(&self, context: &RequestContext<RoleServer>) -> Option<LoggingLevel> {
        let session = *self
            .inner
            .log_level
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // On 2026-07-28 a request opts in by its own `_meta` only; `logging/setLevel`
        // governs the sessions that began with `initialize`.
        let inline = context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str());
        match inline {
            true => context.meta.log_level(),
            false => context.meta.log_level().or(session),
        }
    }

    /// The session's label in the log.
    pub(crate) fn session(&self) -> &str {
        &self.inner.session
    }

    /// The same server, labelled `session` in the log line of every call.
    pub(crate) fn with_session(mut self, session: impl Into<String>) -> CairnServer {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.session = session.into(),
            None => tracing::warn!("a shared server cannot be labelled"),
        }
        self
    }

    /// The same binding and scope for one more client connection, with state of its own:
    /// no subscriptions and no log level yet (the daemon's HTTP sessions: two sessions of
    /// one token must not hear of each other's subscriptions).
    pub(crate) fn for_connection(&self) -> CairnServer {
        let i = &self.inner;
        CairnServer {
            inner: Arc::new(Inner {
                cairn: i.cairn.clone(),
                work: i.work.clone(),
                tools: i.tools,
                scoped: i.scoped.clone(),
                session: i.session.clone(),
                started: i.started,
                lanes: i.lanes.clone(),
                dialect: i.dialect,
                subscriptions: Subscriptions::default(),
                log_level: Mutex::new(None),
            }),
        }
    }

    /// The same server, listing input schemas in `dialect`.
    pub(crate) fn with_dialect(mut self, dialect: Dialect) -> CairnServer {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.dialect = dialect,
            None => tracing::warn!("a shared server cannot change its dialect"),
        }
        self
    }

    /// The tools this session may call, input schemas in `dialect` (the server's own
    /// unless a request asks for another: the daemon's `?schema_dialect=`).
    pub(crate) fn tools_in(&self, dialect: Option<Dialect>) -> Vec<Tool> {
        let dialect = dialect.unwrap_or(self.inner.dialect);
        self.inner.scoped.listed(dialect).to_vec()
    }

    /// Answer one call, and log it: one line at info with the tool, the session, the
    /// outcome (`ok` or the error code) and the milliseconds it took. Public so that
    /// tests can drive the call path without a transport: a success carries its
    /// `structuredContent` as a tree ([`Wire::Tree`]).
    pub async fn call(
        &self,
        name: &str,
        args: Option<serde_json::Map<String, Value>>,
    ) -> CallToolResult {
        self.respond(name, args, Wire::Tree).await
    }

    /// [`CairnServer::call`], its success serialized for `wire`.
    async fn respond(
        &self,
        name: &str,
        args: Option<serde_json::Map<String, Value>>,
        wire: Wire,
    ) -> CallToolResult {
        let started = Instant::now();
        let mut work = Work::default();
        let (result, outcome) = match self.handle(name, args, wire, &mut work).await {
            Ok(answer) => (answer.into_result(), "ok".to_string()),
            Err(envelope) => {
                let code = envelope["error"]["code"].as_str().unwrap_or("error");
                let code = code.to_string();
                let result = error_result(envelope);
                // The envelope's JSON text, serialized once.
                let bytes = result.content.iter().filter_map(|c| c.as_text());
                work.add(
                    Unit::BytesSerialized,
                    bytes.map(|t| t.text.len() as u64).sum(),
                );
                (result, code)
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        tracing::info!(
            tool = name,
            session = %self.inner.session,
            outcome,
            ms = format!("{:.2}", seconds * 1000.0),
            "tool call"
        );
        let known = self.inner.tools.iter().any(|t| t.name == name);
        let error = (outcome != "ok").then_some(outcome.as_str());
        crate::metrics::record_call(name, known, error, seconds, &work);
        result
    }

    /// The answer to a call, or the error envelope it is refused with; the work its
    /// handler counted ([`crate::metrics::cost`]) added to `work`. With [`WORK_DEBUG`] set, an
    /// object answer carries that work in `debug.work`.
    async fn handle(
        &self,
        name: &str,
        args: Option<serde_json::Map<String, Value>>,
        wire: Wire,
        work: &mut Work,
    ) -> std::result::Result<Answer, Value> {
        let (index, args) = self.admit(name, args)?;
        let def = &self.inner.tools[index];
        let received = Instant::now();
        self.prepare(def, &args, work).await;
        match self.run(index, args, wire, received, work).await {
            Ok(Ok(mut answer)) => {
                if *WORK_DEBUG {
                    answer.show_work(work);
                }
                Ok(answer)
            }
            Ok(Err(err)) => {
                if err.is_internal() {
                    tracing::error!(tool = name, error = %err, "tool call failed internally");
                }
                Err(envelope::domain_error(def, &err))
            }
            Err(panicked) => {
                tracing::error!(tool = name, error = %panicked, "tool handler panicked");
                Err(envelope::domain_error(
                    def,
                    &Error::Internal("handler panicked".into()),
                ))
            }
        }
    }

    /// The registry index of the tool `name` and the arguments its handler gets: the tool
    /// known and in scope, the arguments within [`MAX_ARGUMENT_BYTES`] and valid against
    /// its input schema; or the envelope of the refusal.
    fn admit(
        &self,
        name: &str,
        args: Option<serde_json::Map<String, Value>>,
    ) -> std::result::Result<(usize, Value), Value> {
        let inner = &self.inner;
        let scope = &inner.scoped.scope;
        let Some(index) = inner.tools.iter().position(|t| t.name == name) else {
            let visible: Vec<&str> = inner
                .tools
                .iter()
                .filter(|t| scope.allows(t.name))
                .map(|t| t.name)
                .collect();
            return Err(envelope::unknown_tool(name, &visible));
        };
        let def = &inner.tools[index];
        if !scope.allows(name) {
            tracing::warn!(
                tool = name,
                scope = scope.label(),
                "call outside tool scope refused"
            );
            return Err(envelope::permission_denied(name, scope.label()));
        }
        let mut args = Value::Object(args.unwrap_or_default());
        super::dialect::accept_object_text(&def.input_schema, &mut args);
        super::dialect::absent_nulls(&def.input_schema, &mut args);
        let size = serde_json::to_vec(&args)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > MAX_ARGUMENT_BYTES {
            return Err(envelope::too_large(def, size, MAX_ARGUMENT_BYTES));
        }
        let errors = def.validate(&args);
        if !errors.is_empty() {
            return Err(envelope::validation_failed(def, &errors));
        }
        Ok((index, args))
    }

    /// On a server with lanes, run `def`'s [`ToolDef::prepare`] before the call waits for
    /// one; its work added to `work`. Its errors are the handler's to report, with the
    /// same arguments.
    async fn prepare(&self, def: &ToolDef, args: &Value, work: &mut Work) {
        let inner = &self.inner;
        let (Lane::Shared, Some(_), Some(prepare)) =
            (def.lane, inner.lanes.width(), def.prepare.clone())
        else {
            return;
        };
        let cairn = inner.cairn.clone();
        let args = args.clone();
        if let Ok((_, prepared)) = tokio::task::spawn_blocking(move || {
            let _serving = cairn.serving();
            crate::metrics::cost::measure(|| prepare(&cairn, &args))
        })
        .await
        {
            work.absorb(&prepared);
        }
    }

    /// Run the handler of the tool at `index` in its lane, its answer serialized for
    /// `wire` there; its work added to `work`. A success logs at debug the milliseconds
    /// from `received` to the lane, waiting for the lane, and in it.
    async fn run(
        &self,
        index: usize,
        args: Value,
        wire: Wire,
        received: Instant,
        work: &mut Work,
    ) -> std::result::Result<Result<Answer>, Panicked> {
        let inner = &self.inner;
        let def = &inner.tools[index];
        // A retry of an idempotent write waits for the call it repeats (`in_flight`).
        let claim = match def.effect {
            Effect::Additive { idempotent: true } | Effect::Destructive { idempotent: true } => {
                Some(super::in_flight::claim(def.name, &inner.work, &args).await)
            }
            _ => None,
        };
        let arrived = Instant::now();
        let admitted = inner.lanes.admit(def.lane).await;
        let started = Instant::now();
        let this = self.clone();
        let (outcome, counted) = inner
            .lanes
            .run(admitted, move || {
                // Held until the handler ends, whether or not its caller still waits.
                let _claim = claim;
                let inner = &this.inner;
                let _serving = inner.cairn.serving();
                let cx = ToolCtx {
                    cairn: &inner.cairn,
                    work: &inner.work,
                    started: inner.started,
                    tools_registered: inner.tools.len(),
                };
                crate::metrics::cost::measure(|| inner.tools[index].run(&cx, args, wire))
            })
            .await?;
        work.absorb(&counted);
        if outcome.is_ok() {
            let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
            tracing::debug!(
                tool = def.name,
                elapsed_ms = ms(started.elapsed()),
                lane_wait_ms = ms(started - arrived),
                prepare_ms = ms(arrived - received),
                "tool call ok"
            );
        }
        Ok(outcome)
    }
}

/// `CAIRN_WORK_DEBUG=1` in a server's environment (`cairn serve`, `cairn daemon`): every
/// object answer carries the work its call counted in `debug.work` ([`crate::metrics::cost::Work`];
/// for people who tune searches: docs/metrics.md). Read once.
pub(crate) static WORK_DEBUG: LazyLock<bool> =
    LazyLock::new(|| std::env::var("CAIRN_WORK_DEBUG").is_ok_and(|v| v == "1"));

/// What the server says of itself at `initialize` / `server/discover` (stdio and the
/// daemon alike).
#[allow(deprecated)] // enable_logging: see `log_to`
pub(crate) fn server_config() -> ServerConfig {
    ServerConfig::new(
        ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_prompts()
            .enable_completions()
            .enable_logging()
            .build(),
    )
    .with_server_info(
        Implementation::new("cairn", env!("CARGO_PKG_VERSION"))
            .with_title("Cairn knowledge service"),
    )
    // The guide for agents (src/agents/guide.md), the same text `cairn connect` writes
    // into the clients' instruction files.
    .with_instructions(crate::agents::GUIDE)
}

impl ServerHandler for CairnServer {
    fn get_info(&self) -> ServerConfig {
        server_config()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools_in(None)))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourcesResult, McpError> {
        self.resources_page(request).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourceTemplatesResult, McpError> {
        Ok(self.resource_templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ReadResourceResponse, McpError> {
        Ok(self.read(request.uri).await?.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListPromptsResult, McpError> {
        Ok(self.prompt_list())
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<GetPromptResponse, McpError> {
        Ok(self.prompt(request).await?.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<CompleteResult, McpError> {
        self.completion(request).await
    }

    /// A call runs to its end on the blocking pool, one transaction, whatever the client
    /// does meanwhile: `notifications/cancelled` ends the wait for it (no answer is sent,
    /// as the protocol says) and the call commits whole or not at all; a retry of an
    /// idempotent write waits for it rather than doing the work again (`in_flight`). With a
    /// `progressToken`, a notification every [`PROGRESS_EVERY`] says it still runs.
    #[allow(deprecated)]
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, McpError> {
        let started = Instant::now();
        let name = request.name.clone();
        // The stdio wire writes `structuredContent` from the answer's text; other
        // transports serialize it from a tree.
        let answers = context.extensions.get::<Answers>().cloned();
        let wire = match answers {
            Some(_) => Wire::Text,
            None => Wire::Tree,
        };
        let call = self.respond(&request.name, request.arguments, wire);
        tokio::pin!(call);
        let token = context.meta.get_progress_token();
        // The first beat one period from now. (An interval's immediate first tick is not
        // free: tokio's timer fires it at its next millisecond, so awaiting it delayed
        // every call by about 1 ms.)
        let mut beat =
            tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        let mut beats = 0u32;
        let result = loop {
            tokio::select! {
                result = &mut call => break result,
                _ = context.ct.cancelled() => {
                    tracing::info!(tool = %name, session = %self.inner.session, "tool call cancelled by the client; its work completes or rolls back whole");
                    self.log_to(&context, LoggingLevel::Notice, serde_json::json!({
                        "tool": name, "outcome": "cancelled",
                    })).await;
                    return Err(McpError::invalid_request("the call was cancelled", None));
                }
                _ = beat.tick(), if token.is_some() => {
                    beats += 1;
                    if let Some(token) = &token {
                        let mut p = ProgressNotificationParam::new(token.clone(), beats as f64);
                        p.message = Some(format!("{name}: running for {} ms", started.elapsed().as_millis()));
                        let _ = context.peer.notify_progress(p).await;
                    }
                }
            }
        };
        let failed = result.is_error == Some(true);
        if let Some(answers) = answers
            && !failed
        {
            answers.mark(context.id.clone());
        }
        self.log_to(
            &context,
            if failed {
                LoggingLevel::Warning
            } else {
                LoggingLevel::Info
            },
            serde_json::json!({
                "tool": name,
                "outcome": if failed { "error" } else { "ok" },
                "ms": started.elapsed().as_millis() as u64,
            }),
        )
        .await;
        Ok(result.into())
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<(), McpError> {
        *self
            .inner
            .log_level
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(request.level);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.watch(context.peer);
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<(), McpError> {
        self.subscribe_uri(request.uri)
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<(), McpError> {
        self.unsubscribe_uri(&request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(self.accepted_filter(requested))
    }

    async fn listen(&self, context: SubscriptionContext) -> std::result::Result<(), McpError> {
        self.listen_until_cancelled(context).await;
        Ok(())
    }
}

/// Serve MCP on stdin/stdout until stdin closes or SIGTERM/SIGINT arrives.
pub(crate) async fn serve_stdio<S: ServerHandler>(server: S) -> anyhow::Result<()> {
    let session = async move {
        match server
            .serve(LineTransport::new(tokio::io::stdin(), tokio::io::stdout()))
            .await
        {
            Ok(running) => match running.waiting().await {
                Ok(reason) => tracing::info!(?reason, "MCP session ended"),
                Err(e) => tracing::warn!(error = %e, "MCP session task failed"),
            },
            // The client left before a session began (stdin closed): a clean exit.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
                tracing::info!("stdin closed before the session started");
            }
            Err(e) => tracing::warn!(error = %e, "MCP session did not start"),
        }
    };
    // On a signal the session future is dropped: a tool call in flight on the blocking
    // pool either committed its transaction or rolls back with the process.
    tokio::select! {
        _ = session => {}
        s = shutdown_signal() => tracing::info!(signal = s, "shutting down"),
    }
    Ok(())
}

/// The first of SIGTERM and SIGINT (ctrl-c elsewhere), by name.
pub(crate) async fn shutdown_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            },
            _ => std::future::pending().await,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "ctrl-c"
    }
}
