//! `cairn scope ...`: per-profile tool scope, and the scope file `cairn serve` reads.

use std::path::PathBuf;

use clap::Subcommand;

use crate::Cairn;
use crate::access::scope::{ProfileScope, compute_effective};
use crate::mcp::registry::scope_matrix;

use super::{Outcome, print_json, print_text};

#[derive(Debug, Subcommand)]
pub(crate) enum ScopeCmd {
    /// Compute a profile's effective tools (computeEffectiveTools) and write the scope
    /// file for `cairn serve --tool-scope-file`. `--allow`/`--deny` replace the profile's
    /// stored lists for this computation.
    Compute {
        /// Agent profile: worker, researcher, judge, scanner, architect, planner, intake.
        #[arg(long)]
        profile: String,
        /// Keep only these tools (repeat).
        #[arg(long = "allow")]
        allow: Vec<String>,
        /// Remove these tools (repeat).
        #[arg(long = "deny")]
        deny: Vec<String>,
        /// Where to write the JSON array of tool names.
        #[arg(long)]
        out: PathBuf,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Store a profile's allow/deny lists in the database.
    Set {
        /// Agent profile: worker, researcher, judge, scanner, architect, planner, intake.
        #[arg(long)]
        profile: String,
        /// Keep only these tools (repeat).
        #[arg(long = "allow")]
        allow: Vec<String>,
        /// Remove these tools (repeat).
        #[arg(long = "deny")]
        deny: Vec<String>,
        /// Clear both lists (back to the registry defaults).
        #[arg(long, conflicts_with_all = ["allow", "deny"])]
        clear: bool,
    },
    /// Show a profile's stored lists and effective tools.
    Show {
        /// Agent profile: worker, researcher, judge, scanner, architect, planner, intake.
        #[arg(long)]
        profile: String,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
}

fn non_empty(v: Vec<String>) -> Option<Vec<String>> {
    (!v.is_empty()).then_some(v)
}

#[allow(clippy::print_stderr)]
pub(super) fn run(cairn: &Cairn, cmd: ScopeCmd) -> anyhow::Result<Outcome> {
    let matrix = scope_matrix();
    match cmd {
        ScopeCmd::Compute {
            profile,
            allow,
            deny,
            out,
            json,
        } => {
            let mut stored = cairn.profile_scope(&profile)?;
            if !allow.is_empty() {
                stored.allowed_tools = Some(allow);
            }
            if !deny.is_empty() {
                stored.disallowed_tools = Some(deny);
            }
            let eff = compute_effective(&matrix, &stored)?;
            for w in &eff.warnings {
                eprintln!("warning: {w}");
            }
            crate::paths::write_output(&out, &serde_json::to_vec_pretty(&eff.tools)?)?;
            if json {
                print_json(&eff)?;
            } else {
                print_text(&format!(
                    "{} tools written to {}",
                    eff.tools.len(),
                    out.display()
                ))?;
            }
        }
        ScopeCmd::Set {
            profile,
            allow,
            deny,
            clear,
        } => {
            let scope = if clear {
                ProfileScope {
                    profile_type: profile,
                    ..Default::default()
                }
            } else {
                ProfileScope {
                    profile_type: profile,
                    allowed_tools: non_empty(allow),
                    disallowed_tools: non_empty(deny),
                }
            };
            cairn.set_profile_scope(&matrix, &scope)?;
            let eff = compute_effective(&matrix, &scope)?;
            for w in &eff.warnings {
                eprintln!("warning: {w}");
            }
        }
        ScopeCmd::Show { profile, json } => {
            let stored = cairn.profile_scope(&profile)?;
            let eff = compute_effective(&matrix, &stored)?;
            if json {
                print_json(&serde_json::json!({"stored": stored, "effective": eff}))?;
            } else {
                print_text(&format!(
                    "profile: {}\nallowed: {}\ndenied: {}\neffective: {}\n{}",
                    profile,
                    stored
                        .allowed_tools
                        .map(|v| v.join(", "))
                        .unwrap_or_else(|| "(defaults)".into()),
                    stored
                        .disallowed_tools
                        .map(|v| v.join(", "))
                        .unwrap_or_else(|| "(none)".into()),
                    eff.tools.join(", "),
                    eff.warnings.join("\n")
                ))?;
            }
        }
    }
    Ok(Outcome::Done)
}
