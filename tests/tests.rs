//! All integration tests, compiled into one binary, each on a fresh temp database: the
//! CLI and `cairn serve` through the real binary (with a real MCP client or an official
//! SDK), the MCP server in this process (`common::Env::serve_local`) for tool behaviour,
//! including the data-driven table of `mcp_table`, and the library's facade in process
//! with the test embedder (`vault_facade`).

mod common;

mod cli_basics;
mod colibri;
mod connect;
mod cost;
mod daemon;
mod e2e;
mod follow;
mod formats;
mod forward;
mod hooks;
mod hostile_paths;
mod import;
mod impostor;
mod learnings;
mod lifecycle;
mod mcp_contract;
mod mcp_features;
mod mcp_table;
mod multihost;
mod pg_schema;
mod pg_store;
mod poisoning;
mod sealed;
mod security;
mod starvation;
mod store_copy;
mod trail;
mod vault;
mod vault_facade;
mod web;
mod work;
