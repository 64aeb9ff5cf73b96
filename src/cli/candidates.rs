//! `cairn learnings candidates`: the lessons `cairn run ingest --propose` found in run
//! logs, held until a person accepts (recorded as a learning) or rejects them.

use clap::{Args, Subcommand};

use crate::Cairn;
use crate::memory::candidates::Candidate;

use super::{Outcome, print_json, print_text};

/// Who accepts or rejects from the command line.
const ACTOR: &str = "cli";

/// `cairn learnings candidates [list|accept|reject]`.
#[derive(Debug, Args)]
pub(crate) struct CandidatesArgs {
    #[command(subcommand)]
    cmd: Option<CandidatesCmd>,
    /// Only this status: pending (default), accepted, rejected or all.
    #[arg(long, default_value = "pending", value_parser = ["pending", "accepted", "rejected", "all"])]
    status: String,
    /// Only this project's (slug or id).
    #[arg(long)]
    project: Option<String>,
    /// Print the result as JSON, for scripts.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum CandidatesCmd {
    /// Record a candidate as a learning of its run's issue (the learnings' gates and
    /// merge rule apply).
    Accept {
        /// The candidate's id (`cand_...`).
        id: String,
        /// Record this text instead of the candidate's (a person's correction).
        #[arg(long)]
        pattern: Option<String>,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Mark a candidate rejected: it is never recorded.
    Reject {
        /// The candidate's id (`cand_...`).
        id: String,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
}

fn line(c: &Candidate) -> String {
    format!(
        "{}\t{}\t{}\t{}\n  evidence: {}",
        c.id, c.status, c.issue, c.pattern, c.evidence
    )
}

pub(super) fn run(cairn: &Cairn, a: CandidatesArgs) -> anyhow::Result<Outcome> {
    match a.cmd {
        None => {
            let status = (a.status != "all").then_some(a.status.as_str());
            let list = cairn.candidates(status, a.project.as_deref())?;
            if a.json {
                print_json(&list)?;
            } else {
                print_text(&list.iter().map(line).collect::<Vec<_>>().join("\n"))?;
            }
        }
        Some(CandidatesCmd::Accept { id, pattern, json }) => {
            let (c, added) = cairn.accept_candidate(&id, pattern.as_deref(), ACTOR)?;
            if json {
                print_json(&serde_json::json!({"candidate": c, "learning": added}))?;
            } else {
                print_text(&format!(
                    "{}\taccepted\t{}{}",
                    c.id,
                    added.learning.id,
                    if added.merged { "\tmerged" } else { "" }
                ))?;
            }
        }
        Some(CandidatesCmd::Reject { id, json }) => {
            let c = cairn.reject_candidate(&id, ACTOR)?;
            if json {
                print_json(&c)?;
            } else {
                print_text(&format!("{}\trejected", c.id))?;
            }
        }
    }
    Ok(Outcome::Done)
}
