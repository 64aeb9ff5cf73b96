//! The command line: parses arguments, calls the domain facade, prints results.
//!
//! Results go to stdout (text, or JSON with `--json`); progress and logs go to stderr.
//! A command returns an [`Outcome`] or an error, and [`exit_code`] is the one place that
//! turns either into the exit status: 0 success (and a reader that closed stdout early,
//! as `cairn ... | head -1` does), 2 bad input, 3 a hash chain that does not verify
//! (`audit verify`, `findings --verify`), 1 anything else.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::Cairn;
use crate::error::{Error, ErrorKind};
use crate::store::Location;

mod audit;
mod candidates;
mod connect;
mod daemon;
mod eval;
mod export;
mod hook;
mod import;
mod issue;
mod learnings;
mod project;
mod scope;
mod serve;
mod session;
mod store;
mod trail;
mod vault;

/// Cairn: a knowledge service for AI coding agents (MCP server and CLI).
#[derive(Debug, Parser)]
#[command(name = "cairn", version, about, long_about = None)]
struct Cli {
    /// The database: a SQLite file (search indexes live in `<db>.index/` beside it) or a
    /// PostgreSQL URL, `postgres://user@host:port/dbname`, shared by many hosts.
    #[arg(
        long,
        global = true,
        env = "CAIRN_DB",
        default_value = "index/cairn.db"
    )]
    db: String,

    /// With a PostgreSQL `--db`: this host's directory for the derived indexes and the
    /// daemon's files [default: $XDG_CACHE_HOME/cairn/pg-<hash of the URL>].
    #[arg(long, global = true, env = "CAIRN_CACHE_DIR", value_name = "DIR")]
    cache_dir: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP over stdio for one agent session.
    Serve(serve::ServeCmd),
    /// Serve MCP over Streamable HTTP for every session on this host (session tokens).
    Daemon(daemon::DaemonArgs),
    /// Session tokens for `cairn daemon`: mint, list, revoke.
    #[command(subcommand)]
    Session(session::SessionCmd),
    /// Create and inspect projects.
    #[command(subcommand)]
    Project(project::ProjectCmd),
    /// Create and inspect issues.
    #[command(subcommand)]
    Issue(issue::IssueCmd),
    /// Record, search, verify and rate learnings; rebuild their index.
    #[command(subcommand)]
    Learnings(learnings::LearningsCmd),
    /// Tool scope per agent profile.
    #[command(subcommand)]
    Scope(scope::ScopeCmd),
    /// An issue's findings; `--verify` re-computes its hash chain.
    Findings(trail::FindingsArgs),
    /// Local pull-request records.
    #[command(subcommand)]
    Pr(trail::PrCmd),
    /// Agent runs: ingest stream-JSON logs.
    #[command(subcommand)]
    Run(trail::RunCmd),
    /// Verify the hash chains agents wrote.
    #[command(subcommand)]
    Audit(audit::AuditCmd),
    /// Move a whole knowledge base between SQLite and PostgreSQL.
    #[command(subcommand)]
    Store(store::StoreCmd),
    /// Index a directory of documents (and, with --code, source code) into the Knowledge Vault.
    Reindex(vault::ReindexArgs),
    /// Search the Knowledge Vault.
    Search(vault::SearchArgs),
    /// The vault's freshness: what is followed, and waiting until changes are indexed.
    #[command(subcommand)]
    Vault(vault::VaultCmd),
    /// Measure ranking quality on a graded set, with baselines from the same run.
    #[command(subcommand)]
    Eval(eval::EvalCmd),
    /// Connect an agent client (claude-code, codex, cursor, gemini-cli, vscode, generic):
    /// write its MCP configuration, the guide for agents and (Claude Code, Gemini CLI) hooks.
    Connect(connect::ConnectArgs),
    /// Take back exactly what `cairn connect` wrote for a client.
    Disconnect(connect::Place),
    /// A session hook for an agent client: reads its JSON on stdin, prints its answer.
    Hook(hook::HookArgs),
    /// Record the items of agents' memory and rule files (CLAUDE.md, AGENTS.md, ...) as
    /// learnings of a project; idempotent, a rule removed from its file is archived.
    Import(import::ImportArgs),
    /// Write a project's trusted learnings as a managed section of AGENTS.md (or any file).
    Export(export::ExportArgs),
}

/// What a command that ran to the end found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// It did what was asked.
    Done,
    /// A verification ran and found a hash chain that does not verify (or audit rows
    /// that cannot be read); what is wrong was printed on stdout.
    ChainBroken,
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(match cli.command {
        Command::Serve(_) => "info",
        // rmcp logs a few lines per HTTP request at info; the daemon's own lines stay.
        Command::Daemon(_) => "info,rmcp=warn",
        // Following in the foreground reports each batch.
        Command::Reindex(ref a) if a.watch => "info",
        // A hook's stderr may reach the person's screen: it says nothing (it logs to a file).
        Command::Hook(_) => "off",
        _ => "warn",
    });
    let result = run(cli);
    if let Err(err) = &result {
        report(err);
    }
    ExitCode::from(exit_code(&result))
}

/// The exit status of a command: one table for outcomes and error kinds, no wildcard.
fn exit_code(result: &anyhow::Result<Outcome>) -> u8 {
    let err = match result {
        Ok(Outcome::Done) => return 0,
        Ok(Outcome::ChainBroken) => return 3,
        Err(err) => err,
    };
    if is_broken_pipe(err) {
        return 0;
    }
    let Some(kind) = domain_error(err).map(Error::kind) else {
        // Failures outside the domain (opening a log file, writing `--out`, ...).
        return 1;
    };
    match kind {
        ErrorKind::InvalidInput => 2,
        ErrorKind::NotFound
        | ErrorKind::TaskNotFound
        | ErrorKind::ProjectNotFound
        | ErrorKind::SessionNotFound
        | ErrorKind::InvalidTransition
        | ErrorKind::PermissionDenied
        | ErrorKind::NoBoundIssue
        | ErrorKind::Conflict
        | ErrorKind::AlreadyFinalized
        | ErrorKind::FailedPrecondition
        | ErrorKind::WorkspaceInvalid
        | ErrorKind::ModelUnavailable
        | ErrorKind::Index
        | ErrorKind::StorageFull
        | ErrorKind::Internal => 1,
    }
}

/// Whether the error is stdout's reader having gone away (`EPIPE`): the command was cut
/// short on purpose, so it ends quietly.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The domain error behind `err`, if it is one.
fn domain_error(err: &anyhow::Error) -> Option<&Error> {
    err.chain().find_map(|e| e.downcast_ref::<Error>())
}

/// Logs on stderr; `CAIRN_LOG` overrides the command's `default` filter.
fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CAIRN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

fn run(cli: Cli) -> anyhow::Result<Outcome> {
    let db = Location::parse(&cli.db, cli.cache_dir.as_deref());
    match cli.command {
        Command::Serve(args) => serve::run(&db, args),
        Command::Daemon(args) => daemon::run(&db, args),
        Command::Session(cmd) => session::run(&open(&db)?, cmd),
        Command::Project(cmd) => project::run(&open(&db)?, cmd),
        Command::Issue(cmd) => issue::run(&open(&db)?, cmd),
        Command::Learnings(cmd) => learnings::run(&open(&db)?, cmd),
        Command::Scope(cmd) => scope::run(&open(&db)?, cmd),
        Command::Findings(a) => trail::findings(&open(&db)?, a),
        Command::Pr(cmd) => trail::pr(&open(&db)?, cmd),
        Command::Run(cmd) => trail::run(&open(&db)?, cmd),
        Command::Audit(cmd) => audit::run(&open(&db)?, cmd),
        Command::Store(cmd) => store::run(cmd),
        Command::Reindex(a) => vault::reindex(std::sync::Arc::new(open(&db)?), a),
        Command::Vault(cmd) => vault::run(&open(&db)?, cmd),
        Command::Search(a) => vault::search(&open(&db)?, a),
        Command::Eval(cmd) => eval::run(cmd),
        Command::Connect(a) => connect::connect(&db, cli.cache_dir.as_deref(), a),
        Command::Disconnect(place) => connect::disconnect(place),
        Command::Hook(a) => hook::run(&db, a),
        Command::Import(a) => import::run(&open(&db)?, a),
        Command::Export(a) => export::run(&open(&db)?, a),
    }
}

/// Open the database named by `--db`.
fn open(db: &Location) -> anyhow::Result<Cairn> {
    Cairn::open_at(db).map_err(|e| anyhow::Error::new(e).context(format!("opening {db}")))
}

/// Print a failed command's error on stderr (nothing for a closed stdout).
#[allow(clippy::print_stderr)]
fn report(err: &anyhow::Error) {
    if is_broken_pipe(err) {
        return;
    }
    eprintln!("error: {err:#}");
    if let Some(Error::InvalidInput(fields)) = domain_error(err) {
        for f in fields {
            eprintln!("  {}: {}", f.field, f.message);
        }
    }
}

/// Write `value` as pretty JSON to stdout.
fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    // An I/O failure (a closed pipe) stays an `io::Error`, which `exit_code` recognises.
    serde_json::to_writer_pretty(&mut out, value).map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

/// Write text lines to stdout.
fn print_text(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(err: Error) -> u8 {
        exit_code(&Err(anyhow::Error::new(err).context("doing something")))
    }

    #[test]
    fn outcomes_and_every_error_kind_have_their_exit_status() {
        assert_eq!(exit_code(&Ok(Outcome::Done)), 0);
        assert_eq!(exit_code(&Ok(Outcome::ChainBroken)), 3);
        for kind in ErrorKind::ALL {
            let expected = if kind == ErrorKind::InvalidInput {
                2
            } else {
                1
            };
            assert_eq!(code_of(Error::example(kind)), expected, "{kind:?}");
        }
        assert_eq!(exit_code(&Err(anyhow::anyhow!("not a domain error"))), 1);
    }

    #[test]
    fn a_closed_stdout_exits_zero_however_the_write_failed() {
        let pipe = || std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert_eq!(exit_code(&Err(anyhow::Error::new(pipe()))), 0);
        assert_eq!(
            exit_code(&Err(anyhow::Error::new(pipe()).context("printing"))),
            0
        );
        // What print_json turns serde_json's write error into.
        let json = serde_json::to_writer(BrokenPipe, &[1, 2, 3]).unwrap_err();
        assert_eq!(
            exit_code(&Err(anyhow::Error::new(std::io::Error::from(json)))),
            0
        );
        let other = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(exit_code(&Err(anyhow::Error::new(other))), 1);
    }

    /// A writer whose reader went away.
    struct BrokenPipe;

    impl std::io::Write for BrokenPipe {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
