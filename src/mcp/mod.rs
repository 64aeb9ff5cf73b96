//! The MCP protocol layer: the only module that knows about MCP and JSON-RPC.
//!
//! - [`registry`]: tool definitions (typed params and results → schemas), the registry.
//! - [`schema`]: schema generation and the validator that runs before every handler.
//! - [`envelope`]: the structured error body and the help prompt.
//! - [`server`]: the rmcp `ServerHandler` over stdio, scope filtering and enforcement.
//! - [`wire`]: the stdio line transport that answers unparsable messages (`-32700`).
//! - [`tools`]: one file per tool family, each a thin adapter over [`crate::service::Cairn`].

pub mod envelope;
pub mod registry;
pub mod schema;
pub mod server;
pub mod tools;
pub mod wire;
