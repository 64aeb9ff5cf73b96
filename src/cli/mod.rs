//! The command line: parses arguments, calls the domain facade, prints results.
//!
//! Results go to stdout (text, or JSON with `--json`); progress and logs go to stderr.
//! [`main`] is the one place that maps errors to exit codes: 0 success (and a broken
//! pipe), 2 bad input, 1 anything else; verification commands (`audit verify`,
//! `findings --verify`) exit 3 when a hash chain does not verify.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::Error;
use crate::service::Cairn;

mod audit;
mod eval;
mod issue;
mod learnings;
mod project;
mod scope;
mod serve;
mod trail;
mod vault;

/// Cairn: a knowledge service for AI coding agents (MCP server and CLI).
#[derive(Debug, Parser)]
#[command(name = "cairn", version, about, long_about = None)]
pub struct Cli {
    /// SQLite database; search indexes live in `<db>.index/` beside it.
    #[arg(
        long,
        global = true,
        env = "CAIRN_DB",
        default_value = "index/cairn.db"
    )]
    pub db: PathBuf,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP over stdio for one agent session.
    Serve(serve::ServeArgs),
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
    /// Index a directory of Markdown files into the Knowledge Vault.
    Reindex(vault::ReindexArgs),
    /// Search the Knowledge Vault.
    Search(vault::SearchArgs),
    /// Measure ranking quality on a graded set, with baselines from the same run.
    #[command(subcommand)]
    Eval(eval::EvalCmd),
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(matches!(cli.command, Command::Serve(_)));
    match run(cli) {
        Ok(code) => code,
        Err(err) => report(&err),
    }
}

fn init_logging(serving: bool) {
    let default = if serving { "info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("CAIRN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(args) => serve::run(&cli.db, args),
        Command::Project(cmd) => project::run(&open(&cli.db)?, cmd),
        Command::Issue(cmd) => issue::run(&open(&cli.db)?, cmd),
        Command::Learnings(cmd) => learnings::run(&open(&cli.db)?, cmd),
        Command::Scope(cmd) => scope::run(&open(&cli.db)?, cmd),
        Command::Findings(a) => trail::findings(&open(&cli.db)?, a),
        Command::Pr(cmd) => trail::pr(&open(&cli.db)?, cmd),
        Command::Run(cmd) => trail::run(&open(&cli.db)?, cmd),
        Command::Audit(cmd) => audit::run(&open(&cli.db)?, cmd),
        Command::Reindex(a) => vault::reindex(&open(&cli.db)?, a),
        Command::Search(a) => vault::search(&open(&cli.db)?, a),
        Command::Eval(cmd) => eval::run(cmd),
    }
}

/// Open the database named by `--db`.
pub(crate) fn open(db: &std::path::Path) -> anyhow::Result<Cairn> {
    Cairn::open(db).map_err(|e| anyhow::Error::new(e).context(format!("opening {}", db.display())))
}

#[allow(clippy::print_stderr)]
fn report(err: &anyhow::Error) -> ExitCode {
    if let Some(io) = err.downcast_ref::<std::io::Error>()
        && io.kind() == std::io::ErrorKind::BrokenPipe
    {
        return ExitCode::SUCCESS;
    }
    eprintln!("error: {err:#}");
    let domain = err.chain().find_map(|e| e.downcast_ref::<Error>());
    if let Some(Error::InvalidInput(fields)) = domain {
        for f in fields {
            eprintln!("  {}: {}", f.field, f.message);
        }
    }
    match domain {
        Some(Error::InvalidInput(_)) => ExitCode::from(2),
        _ => ExitCode::from(1),
    }
}

/// Write `value` as pretty JSON to stdout.
pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

/// Write text lines to stdout.
pub(crate) fn print_text(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        writeln!(out)?;
    }
    Ok(())
}
