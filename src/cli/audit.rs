//! `cairn audit verify ISSUE`: check an issue's hash chains (thought records and the work
//! trail) without an agent. Exit status: 0 when every link holds, 3 when the chain is
//! broken (1 and 2 keep their meaning: failure to run, bad input).

use clap::Subcommand;

use crate::Cairn;
use crate::access::context::WorkContext;
use crate::colibri::audit::VerifyTarget;

use super::{Outcome, print_json, print_text};

#[derive(Debug, Subcommand)]
pub(crate) enum AuditCmd {
    /// Verify every hash-chained record of an issue (thoughts, findings, verdicts,
    /// comments). Exits 3 when a link is broken.
    Verify {
        /// Issue identifier or id (a task id).
        issue: String,
        /// Print the verification as JSON, with every record and its hash.
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn run(cairn: &Cairn, cmd: AuditCmd) -> anyhow::Result<Outcome> {
    match cmd {
        AuditCmd::Verify { issue, json } => {
            // A person's session: bound to nothing, so `T-N` is refused as ambiguous.
            let person = WorkContext {
                actor: "cli".into(),
                ..WorkContext::default()
            };
            let v = cairn.audit_verify(
                &person,
                &VerifyTarget {
                    session: None,
                    task: Some(issue),
                    full_trace: json,
                },
            )?;
            if json {
                print_json(&v)?;
            } else {
                let mut out = format!(
                    "{}: {} ({} records, integrity {}%)\n",
                    v.task_id.as_deref().unwrap_or_default(),
                    if v.chain_valid {
                        "chain valid"
                    } else {
                        "CHAIN BROKEN"
                    },
                    v.total_records,
                    v.integrity_score
                );
                for b in &v.broken_links {
                    out.push_str(&format!(
                        "  position {} ({} {} #{}): {}\n    expected {}\n    actual   {}\n",
                        b.position,
                        b.chain,
                        if b.record_id.is_empty() {
                            "-"
                        } else {
                            &b.record_id
                        },
                        b.chain_position,
                        b.reason,
                        if b.expected_hash.is_empty() {
                            "(none)"
                        } else {
                            &b.expected_hash
                        },
                        if b.actual_hash.is_empty() {
                            "(none)"
                        } else {
                            &b.actual_hash
                        },
                    ));
                }
                print_text(&out)?;
            }
            Ok(if v.chain_valid {
                Outcome::Done
            } else {
                Outcome::ChainBroken
            })
        }
    }
}
