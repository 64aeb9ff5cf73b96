//! # Cairn
//!
//! A knowledge service for AI coding agents. Agents talk to `cairn serve` over MCP
//! (stdio), which forwards to the shared `cairn daemon` (HTTP, a page for people) when one
//! runs; people and orchestrators use the `cairn` CLI. All of them call one domain facade,
//! [`api::Cairn`].
//!
//! Bird's-eye view:
//! - [`store`]: the source of truth, SQLite (WAL, `BEGIN IMMEDIATE` writes) or PostgreSQL
//!   for many hosts, with migrations numbered for both dialects.
//! - [`issues`]: projects and issues (a Colibri task is an issue), and project settings.
//! - [`work`]: phases, the worktree check, PRs, moves and agent memory of the bound issue.
//! - [`compose`]: compositions over several domains (the issue board, trail verification,
//!   the store copy).
//! - [`learnings`]: lessons agents record and search (the BM25 and embedding blend,
//!   merging, supersession proposals, trust levels, instructions held for a person).
//! - [`vault`]: documents of every format a docs tree holds (and code, opt-in), chunked by
//!   their headings or items, embedded and searched through HNSW, followed as they change.
//! - [`trail`] and [`colibri`]: the work trail and the same data in Colibri's vocabulary.
//! - [`embed`]: the local embedding model (texts → unit vectors), shared by the vault and
//!   the learnings; background embedding gives way to the calls in flight.
//! - [`access`]: who a caller is and what it may touch: the [`access::context::WorkContext`]
//!   a server process is bound to (issue, project, work root, profile, actor), which agent
//!   profile may use which tool, the daemon's session tokens.
//! - [`mcp`]: the MCP protocol layer; nothing else knows JSON-RPC.
//! - [`metrics`]: what `/metrics` shows, and the work a call does counted in deterministic
//!   units ([`metrics::cost`], budgets in tests).
//! - [`cli`]: the command line; glue over the facade.
//! - [`daemon`]: one process serving every session of a database: MCP over HTTP, the
//!   forwarders' private socket, and the page for people (`web`).
//! - [`agents`]: the agent clients' files (`cairn connect`), the guide for agents, hooks.
//! - [`memory`]: what agents already keep, brought in and out (`cairn import`, `cairn
//!   export`), and candidate learnings found in run logs.
//! - Below the domain: [`base`] (ids, the clock, hashing, a seeded PRNG, failpoints, the
//!   tantivy indexes' directory), and the crate's three policies: [`error`] (one [`Error`]),
//!   `text` (what agent text may hold), `paths` (opening a caller's path beneath its root).
//!
//! Derived indexes (tantivy for learnings, HNSW for the vault) live beside the
//! database in [`store::Store::index_dir`] and are rebuilt or caught up from the database.

#![forbid(unsafe_code)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod access;
pub mod agents;
pub mod api;
pub mod base;
pub mod cli;
pub mod colibri;
pub mod compose;
pub mod daemon;
pub mod embed;
pub mod error;
pub(crate) mod eval;
pub mod issues;
pub mod learnings;
pub mod mcp;
pub mod memory;
pub mod metrics;
pub(crate) mod paths;
pub mod store;
pub(crate) mod text;
pub mod trail;
pub mod vault;
pub(crate) mod web;
pub mod work;

pub use api::Cairn;
pub use error::{Error, Result};
