//! Cairn in the agent clients teams run (Claude Code, Codex, Cursor, Gemini CLI, VS Code):
//! their configuration files, the guide that tells an agent when to use Cairn, and the
//! session hooks. Nothing here knows MCP or the store; `cli/connect.rs` and `cli/hook.rs`
//! call it.
//!
//! - [`guide`]: the guide for agents, one text ([`GUIDE`]) in every form the clients read.
//! - [`clients`]: which files each client reads, in which format, and what `cairn connect`
//!   puts in them ([`clients::plan`]).
//! - [`files`]: applying a plan to hostile files (symlinks, huge or invalid files are
//!   refused), with a backup and a ledger of what was added, and undoing exactly that.
//! - [`managed`]: managed sections of Markdown files between markers (reused by exports).
//! - [`hooks`]: the hook events of each client, read from stdin, and what a hook prints.
//! - [`json`]: JSON configuration that keeps its key order.

pub mod clients;
pub mod files;
pub mod guide;
pub mod hooks;
pub mod json;
pub mod managed;

pub use guide::GUIDE;
