//! All integration tests, compiled into one binary. Most drive the real `cairn` binary
//! (CLI, or `cairn serve` through a real MCP client) on a fresh temp database;
//! `vault_facade` calls the library's facade in process with the test embedder.

mod common;

mod cli_basics;
mod colibri;
mod e2e;
mod hostile_paths;
mod learnings;
mod mcp_contract;
mod security;
mod trail;
mod vault;
mod vault_facade;
mod work;
