//! `cairn findings`, `cairn pr`, `cairn run`: the work trail outside an agent session.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::Cairn;
use crate::work::prs::PullRequest;

use super::{Outcome, print_json, print_text};

/// `cairn findings ID`: list an issue's findings, verify its chain, mark findings processed.
#[derive(Debug, Args)]
pub(crate) struct FindingsArgs {
    /// Issue identifier or id.
    pub(crate) issue: String,
    /// Re-compute the issue's hash chain; exits 3 when a link is broken.
    #[arg(long)]
    pub(crate) verify: bool,
    /// Mark a finding processed (the orchestrator's flag); repeat for more.
    #[arg(long = "mark-processed", value_name = "FINDING_ID")]
    pub(crate) mark_processed: Vec<String>,
    /// Only findings not yet processed.
    #[arg(long)]
    pub(crate) unprocessed: bool,
    /// Print the result as JSON, for scripts.
    #[arg(long)]
    pub(crate) json: bool,
}

pub(super) fn findings(cairn: &Cairn, a: FindingsArgs) -> anyhow::Result<Outcome> {
    if a.verify {
        let v = cairn.verify_trail(&a.issue)?;
        if a.json {
            print_json(&v)?;
        } else {
            let mut s = format!(
                "{}: {} records, {}\n",
                v.issue,
                v.total_records,
                if v.intact {
                    "chain intact"
                } else {
                    "CHAIN BROKEN"
                }
            );
            for b in &v.broken {
                s.push_str(&format!(
                    "  position {} {} ({}): expected {} got {}\n",
                    b.position, b.record_id, b.problem, b.expected_hash, b.actual_hash
                ));
            }
            print_text(&s)?;
        }
        return Ok(if v.intact {
            Outcome::Done
        } else {
            Outcome::ChainBroken
        });
    }
    for id in &a.mark_processed {
        cairn.mark_finding_processed(id, "cli")?;
    }
    let mut list = cairn.findings(&a.issue)?;
    if a.unprocessed {
        list.retain(|f| !f.processed);
    }
    if a.json {
        print_json(&list)?;
    } else {
        let lines: Vec<String> = list
            .iter()
            .map(|f| {
                format!(
                    "{}\t{}\t{}\t{}{}",
                    f.position,
                    f.id,
                    f.category,
                    f.summary,
                    if f.processed { "\t(processed)" } else { "" }
                )
            })
            .collect();
        print_text(&lines.join("\n"))?;
    }
    Ok(Outcome::Done)
}

#[derive(Debug, Subcommand)]
pub(crate) enum PrCmd {
    /// List PRs, newest first.
    List {
        /// Only this project's (slug or id).
        #[arg(long)]
        project: Option<String>,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Show one PR with its files, gates, risk and diff.
    Show {
        id: String,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
}

fn pr_line(p: &PullRequest) -> String {
    format!(
        "{}\t{}\t{}\t{}\t{} files +{} -{}\trisk {} ({})",
        p.id,
        p.issue,
        p.status,
        p.branch_name,
        p.files.len(),
        p.additions,
        p.deletions,
        p.risk.score,
        p.risk.level
    )
}

pub(super) fn pr(cairn: &Cairn, cmd: PrCmd) -> anyhow::Result<Outcome> {
    match cmd {
        PrCmd::List { project, json } => {
            let prs = cairn.pull_requests(project.as_deref())?;
            if json {
                print_json(&prs)?;
            } else {
                print_text(&prs.iter().map(pr_line).collect::<Vec<_>>().join("\n"))?;
            }
        }
        PrCmd::Show { id, json } => {
            let p = cairn.pull_request(&id)?;
            if json {
                print_json(&p)?;
            } else {
                let mut s = format!("{}\n{} -> {}\n", pr_line(&p), p.branch_name, p.base_branch);
                for f in &p.files {
                    s.push_str(&format!(
                        "  {}\t{}\t+{} -{}\n",
                        f.status, f.path, f.additions, f.deletions
                    ));
                }
                for g in &p.gate_results {
                    s.push_str(&format!("  gate {}: exit {}\n", g.label, g.exit_code));
                }
                for r in &p.risk.factors {
                    s.push_str(&format!("  risk: {r}\n"));
                }
                if let Some(r) = &p.review_reason {
                    s.push_str(&format!("review: {r}\n"));
                }
                s.push('\n');
                s.push_str(p.diff.as_deref().unwrap_or(""));
                print_text(&s)?;
            }
        }
    }
    Ok(Outcome::Done)
}

#[derive(Debug, Subcommand)]
pub(crate) enum RunCmd {
    /// Record an agent run from a stream-JSON log (one JSON event per line).
    Ingest {
        /// The issue the run worked on (identifier or id).
        #[arg(long)]
        issue: String,
        /// The run's id (default: the log's session_id, else a new id).
        #[arg(long)]
        run_id: Option<String>,
        /// Replace an earlier ingest of the same run id instead of refusing.
        #[arg(long)]
        replace: bool,
        /// The log file.
        file: PathBuf,
        /// Also find the lessons the log shows (an error, then the change that fixed
        /// it, explained by the agent) and hold them for a person:
        /// `cairn learnings candidates`.
        #[arg(long)]
        propose: bool,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn run(cairn: &Cairn, cmd: RunCmd) -> anyhow::Result<Outcome> {
    match cmd {
        RunCmd::Ingest {
            issue,
            run_id,
            replace,
            file,
            propose,
            json,
        } => {
            let r = cairn.ingest_run(&issue, run_id.as_deref(), &file, replace)?;
            let candidates = if propose {
                Some(cairn.propose_candidates(&r.run.id)?)
            } else {
                None
            };
            if json {
                let mut v = serde_json::to_value(&r)?;
                if let Some(c) = &candidates {
                    v["candidates"] = serde_json::to_value(c)?;
                }
                print_json(&v)?;
            } else {
                print_text(&format!(
                    "{}\t{}\t{}\t{} events\t{} malformed lines{}",
                    r.issue,
                    r.run.id,
                    r.run.status,
                    r.run.event_count,
                    r.run.malformed_lines,
                    if r.replaced { "\t(replaced)" } else { "" }
                ))?;
                for c in candidates.iter().flatten() {
                    print_text(&format!("candidate\t{}\t{}", c.id, c.pattern))?;
                }
            }
        }
    }
    Ok(Outcome::Done)
}
