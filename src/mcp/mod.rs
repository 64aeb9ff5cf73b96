//! The MCP protocol layer: the only module that knows about MCP and JSON-RPC.
//!
//! - [`tool`]: declaring a tool (typed params and results → schemas, effect, handler).
//! - [`answer`]: a tool's answer, serialized once and cleaned by the text policy.
//! - [`registry`]: the list of every tool.
//! - [`schema`]: schema generation and the validator that runs before every handler.
//! - [`dialect`]: the listed form of the input schemas, in the subset strict
//!   function-calling dialects accept.
//! - [`envelope`]: the structured error body and the help prompt.
//! - [`lanes`]: which tool handlers run at once on a server many sessions share.
//! - [`in_flight`]: a retry of an idempotent write waits for the call it repeats.
//! - [`prompts`]: the prompts (`start_work`, `record_learning`) and argument completion.
//! - [`resources`]: vault documents, learnings and the bound issue as MCP resources,
//!   read through the tools' scope.
//! - [`server`]: the rmcp `ServerHandler` over stdio, scope filtering and enforcement.
//! - [`wire`]: the stdio line transport that answers unparsable messages (`-32700`) and
//!   writes each answer's `structuredContent` from its JSON text.
//! - [`subscriptions`]: resource change notifications (`resources/subscribe`,
//!   `subscriptions/listen`), read from the database.
//! - [`tools`]: one file per tool family, each a thin adapter over [`crate::Cairn`].

pub(crate) mod answer;
pub(crate) mod dialect;
pub(crate) mod envelope;
pub(crate) mod in_flight;
pub mod lanes;
pub(crate) mod prompts;
pub mod registry;
pub(crate) mod resources;
pub(crate) mod schema;
pub mod server;
pub(crate) mod subscriptions;
pub mod tool;
pub(crate) mod tools;
pub mod wire;
