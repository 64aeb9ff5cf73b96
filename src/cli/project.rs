//! `cairn project ...`

use clap::Subcommand;

use crate::issues::NewProject;
use crate::service::Cairn;

use super::{print_json, print_text};

#[derive(Debug, Subcommand)]
pub enum ProjectCmd {
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
        #[arg(long)]
        json: bool,
    },
    /// List projects.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show one project (by slug or id).
    Show {
        project: String,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cairn: &Cairn, cmd: ProjectCmd) -> anyhow::Result<std::process::ExitCode> {
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
    }
    Ok(std::process::ExitCode::SUCCESS)
}
