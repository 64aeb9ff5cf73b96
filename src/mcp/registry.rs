//! The tool registry: every tool's definition, schemas, example and handler, and the
//! call path that validates before any handler runs.
//!
//! A tool is declared once with [`tool`], from a typed parameter struct (its
//! `inputSchema`; `#[serde(deny_unknown_fields)]` makes unknown properties an error)
//! and a typed result (its `outputSchema`). Handlers are plain synchronous functions over
//! the domain facade; the server runs them on the blocking pool.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Map, Value};

use crate::error::{Error, FieldError, Result};
use crate::service::Cairn;
use crate::session::Session;

use super::schema::{coerce_integers, output_schema_for, schema_for, validate};

/// Largest total size of one call's arguments, serialized, in bytes.
pub const MAX_ARGUMENT_BYTES: usize = 4 * 1024 * 1024;

/// What a tool does to the world, told truthfully to clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads only.
    ReadOnly,
    /// Adds records; never destroys or rewrites existing ones.
    Additive { idempotent: bool },
    /// May overwrite or remove existing data.
    Destructive { idempotent: bool },
}

type Handler = dyn Fn(&ToolCtx<'_>, Value) -> Result<Value> + Send + Sync;

/// What a handler sees: the domain facade, the start-up binding, the server's state.
pub struct ToolCtx<'a> {
    pub cairn: &'a Cairn,
    pub session: &'a Session,
    /// When the server process started.
    pub started: std::time::Instant,
    /// How many tools this server registers.
    pub tools_registered: usize,
}

/// One registered tool.
pub struct ToolDef {
    pub name: &'static str,
    pub description: &'static str,
    pub effect: Effect,
    pub input_schema: Map<String, Value>,
    pub output_schema: Map<String, Value>,
    /// A complete, valid example call.
    pub example: Value,
    /// The handler acts on the bound issue and cannot run without one.
    pub needs_issue: bool,
    handler: Arc<Handler>,
}

impl std::fmt::Debug for ToolDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDef").field("name", &self.name).finish()
    }
}

impl ToolDef {
    /// Mark the tool as acting on the bound issue.
    pub fn bound(mut self) -> Self {
        self.needs_issue = true;
        self
    }

    /// Run the handler on already-validated arguments.
    pub fn run(&self, cx: &ToolCtx<'_>, mut args: Value) -> Result<Value> {
        if self.needs_issue {
            cx.session.require_issue()?;
        }
        coerce_integers(&self.input_schema, &mut args);
        (self.handler)(cx, args)
    }

    /// Validate `args` against the input schema: every problem, with its field.
    pub fn validate(&self, args: &Value) -> Vec<FieldError> {
        validate(&self.input_schema, args)
    }
}

/// Declare a tool from its typed parameters `P`, typed result `R` and handler.
pub fn tool<P, R, F>(
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
    let handler = move |cx: &ToolCtx<'_>, args: Value| -> Result<Value> {
        // The schema check ran first; a failure here is a mismatch the schema cannot
        // express (for example an integer too large for the field's type).
        let params: P =
            serde_json::from_value(args).map_err(|e| Error::invalid("arguments", e.to_string()))?;
        let out = handler(cx, params)?;
        Ok(serde_json::to_value(out)?)
    };
    ToolDef {
        name,
        description,
        effect,
        input_schema: schema_for::<P>(),
        output_schema: output_schema_for::<R>(),
        example,
        needs_issue: false,
        handler: Arc::new(handler),
    }
}

/// Every tool Cairn serves, in a stable order.
pub fn all_tools() -> Vec<ToolDef> {
    let mut tools = Vec::new();
    tools.extend(super::tools::system::tools());
    tools.extend(super::tools::trail::tools());
    tools.extend(super::tools::work::tools());
    tools.extend(super::tools::colibri::tools());
    tools.extend(super::tools::learnings::tools());
    tools.extend(super::tools::vault::tools());
    tools
}

/// Parameters of a tool that takes none.
#[derive(Debug, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::envelope::help_prompt;

    #[test]
    fn every_tool_has_schemas_a_valid_example_and_a_short_help_prompt() {
        let tools = all_tools();
        let mut names = std::collections::HashSet::new();
        for t in &tools {
            assert!(names.insert(t.name), "{} registered twice", t.name);
            assert!(!t.description.is_empty(), "{} has no description", t.name);
            assert_eq!(t.input_schema["type"], "object", "{}", t.name);
            assert_eq!(
                t.input_schema.get("additionalProperties"),
                Some(&Value::Bool(false)),
                "{} must reject unknown properties",
                t.name
            );
            assert_eq!(t.output_schema["type"], "object", "{} output", t.name);
            let errors = t.validate(&t.example);
            assert!(errors.is_empty(), "{} example invalid: {errors:?}", t.name);
            let help = help_prompt(t);
            // ~4 characters per token is the usual estimate for English and JSON.
            let tokens = help.chars().count().div_ceil(4);
            assert!(tokens < 500, "{} help prompt is ~{tokens} tokens", t.name);
            assert!(help.contains(t.name) && help.contains("Valid example"));
        }
    }

    #[test]
    fn every_string_field_has_a_length_limit() {
        fn walk(name: &str, path: &str, schema: &Value) {
            let is_string = match schema.get("type") {
                Some(Value::String(t)) => t == "string",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
                _ => false,
            };
            let constrained = schema.get("enum").is_some()
                || schema.get("const").is_some()
                || schema.get("maxLength").is_some();
            assert!(!is_string || constrained, "{name}: {path} has no maxLength");
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (k, v) in props {
                    walk(name, &format!("{path}.{k}"), v);
                }
            }
            if let Some(items) = schema.get("items") {
                assert!(
                    schema.get("maxItems").is_some(),
                    "{name}: {path} array has no maxItems"
                );
                walk(name, &format!("{path}[]"), items);
            }
            for k in ["anyOf", "oneOf"] {
                if let Some(Value::Array(bs)) = schema.get(k) {
                    for b in bs {
                        walk(name, path, b);
                    }
                }
            }
        }
        for t in all_tools() {
            walk(t.name, "", &Value::Object(t.input_schema.clone()));
        }
    }
}
