//! Declaring a tool: its typed parameters (the `inputSchema`; `#[serde(deny_unknown_fields)]`
//! makes unknown properties an error), its typed result (the `outputSchema`, derived from
//! what the result type serializes to), its effect, an example and a handler. Handlers are
//! plain synchronous functions over the domain facade; the server runs them on the
//! blocking pool, and their typed result is serialized once, there ([`Answer`]).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Map, Value};

use crate::Cairn;
use crate::access::context::WorkContext;
use crate::access::scope::Profile;
use crate::error::{Error, FieldError, Result};

use super::answer::{Answer, Wire};
use super::lanes::Lane;
use super::schema::{coerce_integers, output_schema_for, schema_for, validate};

/// What a tool does to the world, told truthfully to clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Reads only.
    ReadOnly,
    /// Adds records; never destroys or rewrites existing ones.
    Additive { idempotent: bool },
    /// May overwrite or remove existing data.
    Destructive { idempotent: bool },
}

type Handler = dyn Fn(&ToolCtx<'_>, Value, Wire) -> Result<Answer> + Send + Sync;

/// Work done before the call waits for its lane ([`ToolDef::prepare`]).
pub(crate) type Prepare = dyn Fn(&Cairn, &Value) -> Result<()> + Send + Sync;

/// What a handler sees: the domain facade, the start-up binding, the server's state.
pub(crate) struct ToolCtx<'a> {
    pub(crate) cairn: &'a Cairn,
    pub(crate) work: &'a WorkContext,
    /// When the server process started.
    pub(crate) started: std::time::Instant,
    /// How many tools this server registers.
    pub(crate) tools_registered: usize,
}

/// One registered tool.
pub struct ToolDef {
    pub name: &'static str,
    pub(crate) description: &'static str,
    pub(crate) effect: Effect,
    /// What the parameter type accepts ([`schema_for`]).
    pub input_schema: Map<String, Value>,
    /// What the result type serializes to ([`output_schema_for`]): the contract of the
    /// tool's `structuredContent`.
    pub output_schema: Map<String, Value>,
    /// A complete, valid example call.
    pub example: Value,
    /// The handler acts on the bound issue and cannot run without one.
    pub needs_issue: bool,
    /// The agent profiles that may use the tool (its row of the scope matrix);
    /// `None` until [`ToolDef::profiles`] declares them (a registry test requires it).
    pub(crate) profiles: Option<&'static [Profile]>,
    /// Whether its handler waits for a shared lane on a server many sessions share.
    pub(crate) lane: Lane,
    /// What a server with lanes runs before the call waits for its lane.
    pub(crate) prepare: Option<Arc<Prepare>>,
    handler: Arc<Handler>,
}

impl std::fmt::Debug for ToolDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDef").field("name", &self.name).finish()
    }
}

impl ToolDef {
    /// Mark the tool as acting on the bound issue.
    pub(crate) fn bound(mut self) -> Self {
        self.needs_issue = true;
        self
    }

    /// Run the handler in `lane` ([`Lane::Reserved`]: without waiting for a shared lane).
    pub(crate) fn lane(mut self, lane: Lane) -> Self {
        self.lane = lane;
        self
    }

    /// Work a server with lanes does before the call waits for one, on the validated
    /// arguments; its errors are left for the handler to report. Embedding the query there
    /// lets calls that wait together share one model run, where one lane would have made
    /// them take turns at the model.
    pub(crate) fn prepare(
        mut self,
        prepare: impl Fn(&Cairn, &Value) -> Result<()> + Send + Sync + 'static,
    ) -> Self {
        self.prepare = Some(Arc::new(prepare));
        self
    }

    /// Declare the agent profiles that may use the tool (`&[]`: none, only a server
    /// started without a scope).
    pub(crate) fn profiles(mut self, profiles: &'static [Profile]) -> Self {
        self.profiles = Some(profiles);
        self
    }

    /// Run the handler on already-validated arguments; its answer serialized for `wire`.
    pub(crate) fn run(&self, cx: &ToolCtx<'_>, mut args: Value, wire: Wire) -> Result<Answer> {
        if self.needs_issue {
            cx.work.require_issue()?;
        }
        coerce_integers(&self.input_schema, &mut args);
        (self.handler)(cx, args, wire)
    }

    /// Validate `args` against the input schema: every problem, with its field.
    pub(crate) fn validate(&self, args: &Value) -> Vec<FieldError> {
        validate(&self.input_schema, args)
    }
}

/// Declare a tool from its typed parameters `P`, typed result `R` and handler.
pub(crate) fn tool<P, R, F>(
    name: &'static str,
    description: &'static str,
    effect: Effect,
    example: Value,
    handler: F,
) -> ToolDef
where
    P: DeserializeOwned + JsonSchema + 'static,
    R: Serialize + JsonSchema + 'static,
    F: Fn(&ToolCtx<'_>, P) -> Result<R> + Send + Sync + 'static,
{
    let handler = move |cx: &ToolCtx<'_>, args: Value, wire: Wire| -> Result<Answer> {
        // The schema check ran first; a failure here is a mismatch the schema cannot
        // express (for example an integer too large for the field's type).
        let params: P =
            serde_json::from_value(args).map_err(|e| Error::invalid("arguments", e.to_string()))?;
        let out = handler(cx, params)?;
        Ok(Answer::of(name, &out, wire)?)
    };
    ToolDef {
        name,
        description,
        effect,
        input_schema: schema_for::<P>(),
        output_schema: output_schema_for::<R>(),
        example,
        needs_issue: false,
        profiles: None,
        lane: Lane::Shared,
        prepare: None,
        handler: Arc::new(handler),
    }
}

/// Parameters of a tool that takes none.
#[derive(Debug, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoParams {}
