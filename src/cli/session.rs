//! `cairn session new|list|revoke`: the session tokens of `cairn daemon`.

use clap::{Args, Subcommand};

use crate::Cairn;
use crate::access::tokens::{TokenInfo, parse_ttl};

use super::serve::ServeArgs;
use super::{Outcome, print_json, print_text};

#[derive(Debug, Subcommand)]
pub(crate) enum SessionCmd {
    /// Mint a token bound to what the same `cairn serve` flags bind; print it once.
    New(NewArgs),
    /// List tokens (never the tokens themselves: their ids, bindings and states).
    List {
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token by its id (`tok_...`) or by the token itself (`cairn_...`); its
    /// next request is refused.
    Revoke {
        id: String,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub(crate) struct NewArgs {
    #[command(flatten)]
    bind: ServeArgs,
    /// A person's token for the daemon's web page instead of an agent's: prints a login
    /// URL that works once (the browser then keeps a cookie until the token expires).
    /// Binds nothing and opens no MCP session. Needs the daemon running.
    #[arg(long, conflicts_with_all = ["issue_id", "project_id", "worktree_path", "agent_type", "tool_scope_file", "project_slug", "symphony_dir"])]
    human: bool,
    /// With --human: who the person's actions are attributed to (`person:NAME`).
    #[arg(long, env = "USER", default_value = "person")]
    name: String,
    /// How long the token is valid: a number with s, m, h or d (seconds without a unit).
    #[arg(long, default_value = crate::access::tokens::DEFAULT_TTL)]
    ttl: String,
    /// Print the result as JSON, for scripts.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(cairn: &Cairn, cmd: SessionCmd) -> anyhow::Result<Outcome> {
    match cmd {
        SessionCmd::New(a) if a.human => {
            let ttl = parse_ttl(&a.ttl)?;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let address = rt
                .block_on(crate::daemon::forward::daemon_address(cairn))
                .map_err(|why| {
                    anyhow::anyhow!(
                        "no daemon of this user serves this database ({why}): start `cairn \
                         daemon` first, the login URL is its address"
                    )
                })?;
            let minted = cairn.mint_person_token(&a.name, ttl)?;
            let url = format!("{address}/ui/login?code={}", minted.token);
            if a.json {
                let mut v = serde_json::to_value(&minted)?;
                v["login_url"] = serde_json::Value::String(url);
                print_json(&v)?;
            } else {
                print_text(&url)?;
            }
        }
        SessionCmd::New(a) => {
            let ttl = parse_ttl(&a.ttl)?;
            let (args, scope) = a.bind.binding()?;
            let scope = crate::daemon::tool_scope(&scope);
            let minted = cairn.mint_session_token(&args, scope.as_ref(), ttl, None)?;
            if a.json {
                print_json(&minted)?;
            } else {
                print_text(&minted.token)?;
            }
        }
        SessionCmd::List { json } => {
            let tokens = cairn.session_tokens()?;
            if json {
                print_json(&tokens)?;
            } else {
                print_text(&tokens.iter().map(line).collect::<Vec<_>>().join("\n"))?;
            }
        }
        SessionCmd::Revoke { id, json } => {
            let info = cairn.revoke_session_token(&id, "cli")?;
            if json {
                print_json(&info)?;
            } else {
                print_text(&line(&info))?;
            }
        }
    }
    Ok(Outcome::Done)
}

/// One token as a line of `cairn session list`.
fn line(t: &TokenInfo) -> String {
    let state = serde_json::to_value(t.state)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    let scope = t
        .scope
        .as_ref()
        .map(|s| format!("{} ({} tools)", s.label, s.tools.len()))
        .unwrap_or_else(|| "all tools".into());
    let by = t
        .revoked_by
        .as_ref()
        .map(|b| format!("  revoked by {b}"))
        .unwrap_or_default();
    format!(
        "{}  {:<7}  issue {}  agent {}  {}  expires {}{by}",
        t.id,
        state,
        t.issue.as_deref().unwrap_or("-"),
        t.agent_type.as_deref().unwrap_or("-"),
        scope,
        t.expires_at
    )
}
