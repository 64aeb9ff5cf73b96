//! `cairn serve`: one MCP server over stdio for one agent session.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use crate::access::context::BindArgs;
use crate::daemon::forward::{self, Forwarder};
use crate::mcp::dialect::Dialect;
use crate::mcp::lanes::Lanes;
use crate::mcp::server::{CairnServer, Scope, serve_stdio};

use super::Outcome;

/// The flags that bind an agent session (spec, "Server Initialization"): one definition
/// for `cairn serve`, `cairn session new`, `cairn connect` and `cairn hook`.
#[derive(Debug, Clone, Args)]
pub(crate) struct SessionFlags {
    /// The issue this session works on (identifier or id). Without it, issue-bound tools
    /// answer with an error saying so.
    #[arg(long, visible_alias = "issue")]
    pub(crate) issue_id: Option<String>,
    /// The project (id or slug); default: the bound issue's project.
    #[arg(long, visible_alias = "project")]
    pub(crate) project_id: Option<String>,
    /// The agent's worktree (for verify_workspace, vault paths).
    #[arg(long)]
    pub(crate) worktree_path: Option<PathBuf>,
    /// Agent profile: worker, researcher, judge, scanner, architect, planner, intake.
    #[arg(long)]
    pub(crate) agent_type: Option<String>,
}

impl SessionFlags {
    /// What these flags bind, without agent memory's paths.
    pub(crate) fn bind_args(&self) -> BindArgs {
        BindArgs {
            issue: self.issue_id.clone(),
            project: self.project_id.clone(),
            worktree_path: self.worktree_path.clone(),
            agent_type: self.agent_type.clone(),
            project_slug: None,
            symphony_dir: None,
        }
    }
}

/// Start-up flags of the spec ("Server Initialization").
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) session: SessionFlags,
    /// JSON array of tool names; wins over --agent-type.
    #[arg(long)]
    pub(crate) tool_scope_file: Option<PathBuf>,
    /// Project slug, for memory paths.
    #[arg(long)]
    pub(crate) project_slug: Option<String>,
    /// Symphony root; agent memory lives under data/memory/ in it.
    #[arg(long)]
    pub(crate) symphony_dir: Option<PathBuf>,
}

impl ServeArgs {
    /// What these flags bind and the tool scope they resolve to (the scope file is read
    /// here; the binding is checked against the database by `Cairn::bind`).
    pub(super) fn binding(self) -> anyhow::Result<(BindArgs, Scope)> {
        let scope = Scope::resolve(
            self.tool_scope_file.as_deref(),
            self.session.agent_type.as_deref(),
        )
        .context("reading the tool scope")?;
        let args = BindArgs {
            project_slug: self.project_slug,
            symphony_dir: self.symphony_dir,
            ..self.session.bind_args()
        };
        Ok((args, scope))
    }
}

/// `cairn serve`: the binding flags, and whether to forward to a daemon.
#[derive(Debug, Args)]
pub(crate) struct ServeCmd {
    #[command(flatten)]
    pub(crate) bind: ServeArgs,
    /// Serve alone even when a daemon serves this database (by default, tool calls go to
    /// the daemon of the database through its socket in `<db>.daemon.d/`, when this
    /// user's daemon listens there).
    #[arg(long)]
    pub(crate) no_daemon: bool,
    /// The form `tools/list` shows input schemas in: `portable` (what strict dialects
    /// share), `openai-strict` (OpenAI strict function calling: every property required,
    /// optional ones nullable) or `gemini` (Gemini function declarations: no
    /// `additionalProperties`). Calls are checked against the full schemas either way.
    #[arg(long, value_enum, default_value_t, env = "CAIRN_SCHEMA_DIALECT")]
    pub(crate) schema_dialect: Dialect,
}

pub(super) fn run(db: &crate::store::Location, cmd: ServeCmd) -> anyhow::Result<Outcome> {
    let cairn = super::open(db)?;
    let (args, scope) = cmd.bind.binding()?;
    let session = cairn.bind(&args).context("binding the server")?;
    let cairn = Arc::new(cairn);
    // One client: its calls need no lanes (`crate::mcp::lanes`).
    let server = CairnServer::new(
        cairn.clone(),
        session,
        scope.clone(),
        Arc::new(Lanes::unlimited()),
    )
    .with_session(format!("stdio-{}", std::process::id()))
    .with_dialect(cmd.schema_dialect);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = rt.block_on(async {
        let remote = match cmd.no_daemon {
            true => None,
            false => match forward::connect(&cairn, &args, &scope).await {
                Ok(remote) => {
                    tracing::info!("forwarding tool calls to the Cairn daemon of this database");
                    Some(remote)
                }
                Err(why) => {
                    tracing::info!(
                        why,
                        "no Cairn daemon of this user serves this database; serving alone"
                    );
                    None
                }
            },
        };
        match remote {
            Some(remote) => {
                let forwarder = Forwarder::new(server, cairn.clone(), remote);
                let served = serve_stdio(forwarder.clone()).await;
                forwarder.close().await;
                served
            }
            None => {
                cairn.index_learnings_in_background()?;
                serve_stdio(server).await
            }
        }
    });
    // The stdin reader may sit in a blocking read; do not wait for it.
    rt.shutdown_timeout(Duration::from_millis(200));
    cairn.flush_learnings_index();
    result.map(|_| Outcome::Done)
}
