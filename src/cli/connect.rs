//! `cairn connect CLIENT` / `cairn disconnect CLIENT`: write (or take back) the agent
//! client's own configuration so it reaches Cairn, with the guide and, for Claude Code,
//! the session hooks. The files and formats are `agents::clients`'; the merging, backup
//! and ledger `agents::files`'.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde_json::json;

use crate::access::context::BindArgs;
use crate::agents::clients::{self, Client, Extras, Scope, Server, Target};
use crate::agents::files::{self, Change, Ledger};
use crate::agents::hooks::Event;
use crate::store::Location;

use super::serve::SessionFlags;
use super::{Outcome, print_json, print_text};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ScopeArg {
    /// The project's files (in --dir), shared with the team through git.
    Project,
    /// The user's own files (in $HOME).
    User,
}

/// Where and under which name.
#[derive(Debug, Args)]
pub(crate) struct Place {
    /// claude-code, codex, cursor, gemini-cli, vscode, or generic (prints the common
    /// `mcpServers` JSON).
    #[arg(value_parser = Client::parse)]
    client: Client,
    /// Whose files: the project's (default) or the user's. A server reached over --http
    /// always goes to the user's file (it carries a token).
    #[arg(long, value_enum, default_value = "project")]
    scope: ScopeArg,
    /// The project's directory [default: the current directory].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The server's name in the client's configuration.
    #[arg(long, default_value = "cairn")]
    name: String,
    /// Show the changes as a diff; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the result as JSON, for scripts.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ConnectArgs {
    #[command(flatten)]
    place: Place,
    /// The binding flags `cairn serve` gets.
    #[command(flatten)]
    session: SessionFlags,
    /// Reach the running daemon over HTTP, with a session token minted for this client,
    /// instead of starting `cairn serve` over stdio.
    #[arg(long)]
    http: bool,
    /// With --http: the MCP endpoint [default: the daemon of --db, asked over its socket].
    #[arg(long, requires = "http")]
    url: Option<String>,
    /// With --http: how long the token is valid.
    #[arg(long, default_value = "30d", requires = "http")]
    ttl: String,
    /// Leave out the guide (the managed section of CLAUDE.md/AGENTS.md/GEMINI.md, the
    /// Claude Code skill, the Cursor rule).
    #[arg(long)]
    no_guide: bool,
    /// Claude Code and Gemini CLI: also install `cairn hook` for the session's start,
    /// each prompt, compaction and the agent's stop in the client's settings
    /// (`.claude/settings.json`, `.gemini/settings.json`).
    #[arg(long)]
    hooks: bool,
}

/// The user's home directory.
fn home() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .context("HOME is not set to an absolute path")
}

fn target(place: &Place) -> anyhow::Result<Target> {
    let dir = match &place.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir()?,
    };
    let dir = std::path::absolute(&dir)?;
    anyhow::ensure!(dir.is_dir(), "{} is not a directory", dir.display());
    anyhow::ensure!(
        !place.name.is_empty()
            && place.name.len() <= 64
            && place
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "--name must be 1-64 letters, digits, '-' or '_'"
    );
    Ok(Target {
        client: place.client,
        scope: match place.scope {
            ScopeArg::Project => Scope::Project,
            ScopeArg::User => Scope::User,
        },
        dir,
        home: home()?,
        codex_home: std::env::var_os("CODEX_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute()),
        name: place.name.clone(),
    })
}

/// `--db` as the server should be given it: an absolute path, or a URL without password.
fn db_arg(db: &Location) -> anyhow::Result<String> {
    match db {
        Location::File(p) => Ok(std::path::absolute(p)?.to_string_lossy().into_owned()),
        Location::Postgres { url, .. } => {
            anyhow::ensure!(
                crate::store::db::redact(url) == *url,
                "--db carries a password: it would be written into the client's \
                 configuration. Give the URL without it and keep the password in ~/.pgpass \
                 (or PGPASSFILE)"
            );
            Ok(url.clone())
        }
    }
}

/// `s` as one word of a shell command line (Claude Code runs hooks through a shell):
/// as it is when it holds only plain characters, else single-quoted.
fn shell_quote(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c);
    match !s.is_empty() && s.chars().all(plain) {
        true => s.to_string(),
        false => format!("'{}'", s.replace('\'', r"'\''")),
    }
}

pub(super) fn connect(
    db: &Location,
    cache_dir: Option<&Path>,
    a: ConnectArgs,
) -> anyhow::Result<Outcome> {
    let t = target(&a.place)?;
    let mut bind = a.session.bind_args();
    bind.worktree_path = bind.worktree_path.map(std::path::absolute).transpose()?;
    let exe = std::env::current_exe()
        .context("finding this cairn binary")?
        .to_string_lossy()
        .into_owned();
    let mut flags = vec!["--db".to_string(), db_arg(db)?];
    if let (Location::Postgres { .. }, Some(c)) = (db, cache_dir) {
        flags.extend([
            "--cache-dir".into(),
            std::path::absolute(c)?.to_string_lossy().into_owned(),
        ]);
    }
    for (flag, v) in [
        ("--project-id", &bind.project),
        ("--issue-id", &bind.issue),
        ("--agent-type", &bind.agent_type),
    ] {
        if let Some(v) = v {
            flags.extend([flag.to_string(), v.clone()]);
        }
    }
    if let Some(w) = &bind.worktree_path {
        flags.extend(["--worktree-path".into(), w.to_string_lossy().into_owned()]);
    }
    let binds = bind.project.is_some() || bind.issue.is_some();
    let cairn = match binds || a.http {
        true => Some(super::open(db)?),
        false => None,
    };
    if let Some(c) = &cairn {
        c.bind(&bind).context("checking the binding flags")?;
    }
    let hooks = match a.hooks {
        false => Vec::new(),
        true => {
            let client = t.client.hook_client().map_err(anyhow::Error::msg)?;
            Event::ALL
                .iter()
                .map(|e| {
                    let mut words = vec![
                        exe.clone(),
                        "hook".into(),
                        e.command().into(),
                        "--client".into(),
                        t.client.name().into(),
                    ];
                    words.extend(flags.iter().cloned());
                    let line: Vec<String> = words.iter().map(|w| shell_quote(w)).collect();
                    (e.client_name(client), line.join(" "))
                })
                .collect()
        }
    };
    let server = match a.http {
        false => Server::Stdio {
            command: exe.clone(),
            args: [vec!["serve".to_string()], flags.clone()].concat(),
        },
        true => {
            let cairn = cairn.as_ref().context("the database is open for --http")?;
            let url = match &a.url {
                Some(u) => u.clone(),
                None => {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    let address = rt
                        .block_on(crate::daemon::forward::daemon_address(cairn))
                        .map_err(|why| anyhow::anyhow!("no daemon of this user serves this database ({why}): start `cairn daemon`, or give --url"))?;
                    format!("{address}/mcp")
                }
            };
            let token = match a.place.dry_run {
                true => "<a token minted when not a dry run>".to_string(),
                false => http_token(cairn, &t, &bind, &url, &a.ttl)?,
            };
            Server::Http { url, token }
        }
    };
    if t.client == Client::Generic {
        let text = clients::generic(&t.name, &server);
        return print_text(&text).map(|()| Outcome::Done);
    }
    let extras = Extras {
        guide: !a.no_guide,
        hooks,
    };
    let edits = clients::plan(&t, &server, &extras).map_err(anyhow::Error::msg)?;
    let ledger = Ledger::for_home(&t.home);
    let changes = files::connect(&ledger, &t.owner(), &edits)?;
    finish(&ledger, &changes, &a.place, "connect")
}

/// The token for an HTTP entry: the one an earlier `connect --http` wrote there when it
/// is still active, for the same URL and binding (so connecting twice changes nothing);
/// else a new one.
fn http_token(
    cairn: &crate::Cairn,
    t: &Target,
    bind: &BindArgs,
    url: &str,
    ttl: &str,
) -> anyhow::Result<String> {
    let scope = crate::mcp::server::Scope::resolve(None, bind.agent_type.as_deref())?;
    let scope = crate::daemon::tool_scope(&scope);
    let probe = Server::Http {
        url: url.to_string(),
        token: String::new(),
    };
    let plan = clients::plan(t, &probe, &Extras::default()).map_err(anyhow::Error::msg)?;
    let existing = match plan.first() {
        Some(edit) => files::current_value(edit)?,
        None => None,
    };
    let earlier = existing.as_ref().and_then(|entry| {
        let v = serde_json::to_value(entry).ok()?;
        let same_url = [&v["url"], &v["httpUrl"]]
            .iter()
            .any(|u| u.as_str() == Some(url));
        let auth = v["headers"]["Authorization"]
            .as_str()
            .or(v["http_headers"]["Authorization"].as_str())?;
        same_url.then(|| auth.strip_prefix("Bearer ").map(String::from))?
    });
    if let Some(token) = earlier {
        let wanted = cairn.bind(bind)?;
        if let Ok(crate::access::tokens::Check::Active(s)) =
            cairn.authenticate_session_token(&token)
        {
            let same = s.work.issue.as_ref().map(|i| &i.id) == wanted.issue.as_ref().map(|i| &i.id)
                && s.work.project_id == wanted.project_id
                && s.work.worktree_path == wanted.worktree_path
                && s.work.agent_type == wanted.agent_type
                && s.scope == scope;
            if same {
                return Ok(token);
            }
        }
    }
    let ttl = crate::access::tokens::parse_ttl(ttl)?;
    let minted = cairn.mint_session_token(bind, scope.as_ref(), ttl, None)?;
    tracing::warn!(token_id = %minted.info.id, "minted a session token for {}; `cairn session revoke {}` ends it", t.client.name(), minted.info.id);
    Ok(minted.token)
}

pub(super) fn disconnect(place: Place) -> anyhow::Result<Outcome> {
    let t = target(&place)?;
    anyhow::ensure!(
        t.client != Client::Generic,
        "the generic client has no file Cairn wrote: remove the entry you pasted by hand"
    );
    // Every file a connection of this client could have touched: stdio and HTTP, with the
    // guide and the hooks.
    let mut paths = Vec::new();
    for server in [
        Server::Stdio {
            command: String::new(),
            args: Vec::new(),
        },
        Server::Http {
            url: String::new(),
            token: String::new(),
        },
    ] {
        let hooks = match t.client.hook_client() {
            Ok(client) => Event::ALL
                .iter()
                .map(|e| (e.client_name(client), String::new()))
                .collect(),
            Err(_) => Vec::new(),
        };
        let extras = Extras { guide: true, hooks };
        for e in clients::plan(&t, &server, &extras).map_err(anyhow::Error::msg)? {
            paths.push((e.path, e.base));
        }
    }
    let ledger = Ledger::for_home(&t.home);
    let changes = files::disconnect(&ledger, &t.owner(), &paths)?;
    finish(&ledger, &changes, &place, "disconnect")
}

/// Show or apply `changes`, and say what was done.
fn finish(
    ledger: &Ledger,
    changes: &[Change],
    place: &Place,
    verb: &str,
) -> anyhow::Result<Outcome> {
    if !place.dry_run {
        files::apply(ledger, changes)?;
    }
    let changed: Vec<&Change> = changes.iter().filter(|c| c.changes_file()).collect();
    if place.json {
        let files: Vec<_> = changes
            .iter()
            .map(|c| {
                json!({
                    "path": c.path,
                    "changed": c.changes_file(),
                    "restored_from_backup": c.restored,
                    "removed": c.before.is_some() && c.after.is_none(),
                    "diff": place.dry_run.then(|| c.diff()),
                })
            })
            .collect();
        return print_json(&json!({
            "client": place.client.name(),
            "action": verb,
            "dry_run": place.dry_run,
            "files": files,
        }))
        .map(|()| Outcome::Done);
    }
    let mut out = String::new();
    if place.dry_run {
        for c in &changed {
            out.push_str(&c.diff());
        }
        if changed.is_empty() {
            out.push_str(&format!(
                "{verb} {}: nothing to change\n",
                place.client.name()
            ));
        }
    } else if changed.is_empty() {
        out.push_str(&format!(
            "{}: nothing to change ({})\n",
            place.client.name(),
            match verb {
                "connect" => "already connected",
                _ => "nothing cairn connect added is left",
            }
        ));
    } else {
        for c in &changed {
            let what = match (&c.before, &c.after, c.restored) {
                (_, _, true) if c.after.is_some() => "restored from backup",
                (None, Some(_), _) => "created",
                (Some(_), None, _) => "removed",
                _ => "updated",
            };
            out.push_str(&format!("{what}: {}\n", c.path.display()));
        }
    }
    print_text(&out)?;
    Ok(Outcome::Done)
}
