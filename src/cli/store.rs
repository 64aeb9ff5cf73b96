//! `cairn store copy --from PATH_OR_URL --to PATH_OR_URL`: move a whole knowledge base
//! between SQLite and PostgreSQL (either way), verified after the copy. Progress on
//! stderr; exit status 3 when a hash chain does not verify on the destination.

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::Cairn;
use crate::compose::store_copy::CopyProgress;
use crate::store::Location;

use super::{Outcome, print_json, print_text};

#[derive(Debug, Subcommand)]
pub(crate) enum StoreCmd {
    /// Copy every row of a knowledge base into an empty database (created and migrated
    /// when missing), ids and hash chains intact; then verify row counts, a digest of
    /// every table and every hash chain on the destination.
    Copy(CopyArgs),
}

#[derive(Debug, Args)]
pub(crate) struct CopyArgs {
    /// The source: a SQLite file or a `postgres://` URL.
    #[arg(long, value_name = "PATH_OR_URL")]
    pub(crate) from: String,
    /// The destination (empty): a SQLite file or a `postgres://` URL.
    #[arg(long, value_name = "PATH_OR_URL")]
    pub(crate) to: String,
    /// Print the report (per-table row counts and digests, chains verified) as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

pub(super) fn run(cmd: StoreCmd) -> anyhow::Result<Outcome> {
    match cmd {
        StoreCmd::Copy(a) => copy(a),
    }
}

fn copy(a: CopyArgs) -> anyhow::Result<Outcome> {
    let (from, to) = (Location::parse(&a.from, None), Location::parse(&a.to, None));
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} rows {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let on_progress = |p: CopyProgress| match p {
        CopyProgress::Planned { rows } => bar.set_length(rows),
        CopyProgress::Table(name) => bar.set_message(name),
        CopyProgress::Copied(n) => bar.inc(n),
        CopyProgress::Verifying => bar.set_message("verifying the hash chains"),
    };
    let report = Cairn::copy_store(&from, &to, &on_progress);
    bar.finish_and_clear();
    let r = report.map_err(|e| anyhow::Error::new(e).context(format!("copying {from} to {to}")))?;
    if a.json {
        print_json(&r)?;
    } else {
        let mut out = format!(
            "copied {} rows from {} to {} in {:.1}s; every table's row count and digest match\n",
            r.rows, r.from, r.to, r.seconds
        );
        for t in r.tables.iter().filter(|t| t.destination_rows > 0) {
            out.push_str(&format!("  {:<22} {:>8}\n", t.table, t.destination_rows));
        }
        out.push_str(&format!(
            "hash chains: {} issues and {} audit sessions verified on the destination, {} broken\n",
            r.chains.issues,
            r.chains.audit_sessions,
            r.chains.broken.len()
        ));
        for b in &r.chains.broken {
            out.push_str(&format!(
                "  {}: CHAIN BROKEN{}\n",
                b.target,
                if b.broken_in_source {
                    " (in the source too)"
                } else {
                    ""
                }
            ));
            for reason in &b.reasons {
                out.push_str(&format!("    {reason}\n"));
            }
        }
        print_text(&out)?;
    }
    Ok(if r.chains.broken.is_empty() {
        Outcome::Done
    } else {
        Outcome::ChainBroken
    })
}
