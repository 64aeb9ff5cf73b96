//! # Cairn
//!
//! A knowledge service for AI coding agents. Agents talk to `cairn serve` over MCP
//! (stdio); people and orchestrators use the `cairn` CLI. Both call one domain facade,
//! [`api::Cairn`].
//!
//! Bird's-eye view:
//! - [`store`]: SQLite, the source of truth (WAL, migrations, `BEGIN IMMEDIATE` writes).
//! - [`issues`]: projects and issues (a Colibri task is an issue), and project settings.
//! - [`compose`]: compositions over several domains (the issue board, trail verification).
//! - [`scope`]: which agent profile may use which tool.
//! - [`context`]: the [`context::WorkContext`] a server process is bound to (issue, project,
//!   work root, profile, actor).
//! - [`mcp`]: the MCP protocol layer; nothing else knows JSON-RPC.
//! - [`cli`]: the command line; glue over the facade.
//!
//! Derived indexes (tantivy for learnings, HNSW for the vault) live beside the
//! database in [`store::Store::index_dir`] and are rebuilt or caught up from SQLite.

#![forbid(unsafe_code)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod activity;
pub mod api;
pub mod base;
pub mod cli;
pub mod colibri;
pub mod compose;
pub mod context;
pub mod daemon;
pub mod db;
mod disk_index;
pub mod error;
pub mod eval;
mod failpoint;
pub mod issues;
pub mod learnings;
pub mod mcp;
pub mod memory;
pub mod metrics;
pub mod moves;
pub(crate) mod paths;
pub mod phases;
pub mod rng;
pub mod scope;
pub mod store;
pub mod store_copy;
pub mod text;
pub mod tokens;
pub mod trail;
pub mod vault;
pub mod vector;
pub mod web;
pub mod workspace;

pub use api::Cairn;
pub use error::{Error, Result};
