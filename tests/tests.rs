//! All integration tests, compiled into one binary. Each drives the real `cairn` binary
//! (CLI, or `cairn serve` through a real MCP client) on a fresh temp database.

mod common;

mod cli_basics;
mod colibri;
mod daemon;
mod e2e;
mod forward;
mod hostile_paths;
mod learnings;
mod mcp_contract;
mod security;
mod trail;
mod vault;
mod work;
