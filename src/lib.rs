//! # Cairn
//!
//! A knowledge service for AI coding agents. Agents talk to `cairn serve` over MCP
//! (stdio); people and orchestrators use the `cairn` CLI. Both call one domain facade,
//! [`api::Cairn`].
//!
//! Bird's-eye view:
//! - [`store`]: SQLite, the source of truth (WAL, migrations, `BEGIN IMMEDIATE` writes).
//! - [`issues`]: projects and issues (a Colibri task is an issue), and project settings.
//! - [`work`]: phases, the worktree check, PRs, moves and agent memory of the bound issue.
//! - [`compose`]: compositions over several domains (the issue board, trail verification,
//!   the store copy).
//! - [`embed`]: the local embedding model (texts → unit vectors), shared by the vault and
//!   the learnings.
//! - [`scope`]: which agent profile may use which tool.
//! - [`context`]: the [`context::WorkContext`] a server process is bound to (issue, project,
//!   work root, profile, actor).
//! - [`mcp`]: the MCP protocol layer; nothing else knows JSON-RPC.
//! - [`cost`]: the work a call does, counted in deterministic units (budgets in tests,
//!   `/metrics`).
//! - [`cli`]: the command line; glue over the facade.
//! - [`agents`]: the agent clients' files (`cairn connect`), the guide for agents, hooks.
//! - [`memory`]: what agents already keep, brought in and out (`cairn import`, `cairn
//!   export`), and candidate learnings found in run logs.
//!
//! Derived indexes (tantivy for learnings, HNSW for the vault) live beside the
//! database in [`store::Store::index_dir`] and are rebuilt or caught up from SQLite.

#![forbid(unsafe_code)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub(crate) mod activity;
pub mod agents;
pub mod api;
pub(crate) mod base;
pub mod cli;
pub mod colibri;
pub mod compose;
pub mod context;
pub mod cost;
pub mod daemon;
mod disk_index;
pub mod embed;
pub mod error;
pub(crate) mod eval;
mod failpoint;
pub mod issues;
pub mod learnings;
pub mod mcp;
pub mod memory;
pub(crate) mod metrics;
pub(crate) mod paths;
pub mod rng;
pub mod scope;
pub mod store;
pub(crate) mod text;
pub(crate) mod tokens;
pub mod trail;
pub mod vault;
pub(crate) mod web;
pub mod work;

pub use api::Cairn;
pub use error::{Error, Result};
