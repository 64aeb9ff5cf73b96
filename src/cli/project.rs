//! `cairn project ...`

use clap::Subcommand;

use crate::Cairn;
use crate::issues::NewProject;
use crate::issues::settings::SettingsUpdate;

use super::{Outcome, print_json, print_text};

#[derive(Debug, Subcommand)]
pub(crate) enum ProjectCmd {
    /// Create a project; prints its slug and identifier prefix.
    Create {
        /// Short name: a-z, 0-9 and '-'.
        #[arg(long)]
        slug: String,
        /// Display name.
        #[arg(long)]
        name: String,
        /// Identifier prefix (issues are PFX-1, PFX-2, ...); default: the slug upper-cased.
        #[arg(long)]
        prefix: Option<String>,
        /// The project's repository directory (made absolute).
        #[arg(long)]
        path: Option<String>,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// List projects.
    List {
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Show one project (by slug or id).
    Show {
        project: String,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Change a project's settings; each option given replaces that section.
    Configure {
        /// Project slug or id.
        project: String,
        /// Quality gates: a JSON array of {command, label, required}.
        #[arg(long)]
        gates_json: Option<String>,
        /// A sensitive-path glob; repeat for more (replaces the stored list).
        #[arg(long = "sensitive-path")]
        sensitive_paths: Vec<String>,
        /// Risk thresholds: {"lowLines", "highLines", "lowFiles", "highFiles"}.
        #[arg(long)]
        risk_thresholds_json: Option<String>,
        /// Instructions given to the project's workers.
        #[arg(long)]
        worker_instructions: Option<String>,
        /// Instructions given to the project's judges.
        #[arg(long)]
        judge_instructions: Option<String>,
        /// A Knowledge Vault collection; repeat for more (replaces the stored list).
        #[arg(long = "vault-collection")]
        vault_collections: Vec<String>,
        /// A phase of the project's pipeline, in order; repeat for more (replaces the
        /// stored pipeline; default research, architecture, grooming, ready).
        #[arg(long = "phase")]
        phases: Vec<String>,
        /// Days after which an unverified learning nobody confirmed or found helpful
        /// ranks lower (default 180).
        #[arg(long)]
        stale_after_days: Option<u32>,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
}

fn parse_json<T: serde::de::DeserializeOwned>(flag: &str, s: &str) -> anyhow::Result<T> {
    serde_json::from_str(s).map_err(|e| {
        anyhow::Error::new(crate::error::Error::invalid(
            flag,
            format!("invalid JSON: {e}"),
        ))
    })
}

pub(super) fn run(cairn: &Cairn, cmd: ProjectCmd) -> anyhow::Result<Outcome> {
    match cmd {
        ProjectCmd::Create {
            slug,
            name,
            prefix,
            path,
            json,
        } => {
            let path = match path {
                Some(p) => Some(std::path::absolute(&p)?.to_string_lossy().into_owned()),
                None => None,
            };
            let p = cairn.create_project(&NewProject {
                slug,
                name,
                prefix,
                path,
            })?;
            if json {
                print_json(&p)?;
            } else {
                print_text(&format!("{}\t{}", p.slug, p.prefix))?;
            }
        }
        ProjectCmd::List { json } => {
            let ps = cairn.projects()?;
            if json {
                print_json(&ps)?;
            } else {
                let lines: Vec<String> = ps
                    .iter()
                    .map(|p| {
                        format!(
                            "{}\t{}\t{}\t{}",
                            p.slug,
                            p.prefix,
                            p.name,
                            p.path.as_deref().unwrap_or("-")
                        )
                    })
                    .collect();
                print_text(&lines.join("\n"))?;
            }
        }
        ProjectCmd::Show { project, json } => {
            let p = cairn.project(&project)?;
            if json {
                print_json(&p)?;
            } else {
                print_text(&format!(
                    "{} ({})\nid: {}\nprefix: {}\npath: {}\nsettings: {}",
                    p.name,
                    p.slug,
                    p.id,
                    p.prefix,
                    p.path.as_deref().unwrap_or("-"),
                    p.settings
                ))?;
            }
        }
        ProjectCmd::Configure {
            project,
            gates_json,
            sensitive_paths,
            risk_thresholds_json,
            worker_instructions,
            judge_instructions,
            vault_collections,
            phases,
            stale_after_days,
            json,
        } => {
            let update = SettingsUpdate {
                gates: gates_json
                    .map(|g| parse_json("--gates-json", &g))
                    .transpose()?,
                sensitive_paths: (!sensitive_paths.is_empty()).then_some(sensitive_paths),
                risk_thresholds: risk_thresholds_json
                    .map(|t| parse_json("--risk-thresholds-json", &t))
                    .transpose()?,
                worker_instructions,
                judge_instructions,
                vault_collections: (!vault_collections.is_empty()).then_some(vault_collections),
                phases: (!phases.is_empty()).then_some(phases),
                stale_after_days,
            };
            let p = cairn.configure_project(&project, &update)?;
            if json {
                print_json(&p)?;
            } else {
                print_text(&serde_json::to_string_pretty(&p.settings)?)?;
            }
        }
    }
    Ok(Outcome::Done)
}
