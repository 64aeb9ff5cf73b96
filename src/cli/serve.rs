//! `cairn serve`: one MCP server over stdio for one agent session.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use crate::context::BindArgs;
use crate::mcp::server::{CairnServer, Scope, serve_stdio};

use super::Outcome;

/// Start-up flags of the spec ("Server Initialization").
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The issue this session works on (identifier or id). Without it, issue-bound tools
    /// answer with an error saying so.
    #[arg(long)]
    pub issue_id: Option<String>,
    /// The project (id or slug); default: the bound issue's project.
    #[arg(long)]
    pub project_id: Option<String>,
    /// The agent's worktree (for verify_workspace, vault paths).
    #[arg(long)]
    pub worktree_path: Option<PathBuf>,
    /// Agent profile: worker, researcher, judge, scanner, architect, planner, intake.
    #[arg(long)]
    pub agent_type: Option<String>,
    /// JSON array of tool names; wins over --agent-type.
    #[arg(long)]
    pub tool_scope_file: Option<PathBuf>,
    /// Project slug, for memory paths.
    #[arg(long)]
    pub project_slug: Option<String>,
    /// Symphony root; agent memory lives under data/memory/ in it.
    #[arg(long)]
    pub symphony_dir: Option<PathBuf>,
}

pub(super) fn run(db: &Path, args: ServeArgs) -> anyhow::Result<Outcome> {
    let cairn = super::open(db)?;
    let session = cairn
        .bind(&BindArgs {
            issue: args.issue_id,
            project: args.project_id,
            worktree_path: args.worktree_path,
            agent_type: args.agent_type.clone(),
            project_slug: args.project_slug,
            symphony_dir: args.symphony_dir,
        })
        .context("binding the server")?;
    let scope = Scope::resolve(args.tool_scope_file.as_deref(), args.agent_type.as_deref())
        .context("reading the tool scope")?;
    cairn.index_learnings_in_background()?;
    let cairn = Arc::new(cairn);
    let server = CairnServer::new(cairn.clone(), session, scope);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = rt.block_on(serve_stdio(server));
    // The stdin reader may sit in a blocking read; do not wait for it.
    rt.shutdown_timeout(Duration::from_millis(200));
    cairn.flush_learnings_index();
    result.map(|_| Outcome::Done)
}
