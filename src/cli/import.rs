//! `cairn import`: the agents' memory and rule files recorded as learnings of a project.

use std::path::PathBuf;

use clap::Args;

use crate::Cairn;
use crate::memory::import::ImportRequest;
use crate::memory::split::discover;

use super::{Outcome, print_json, print_text};

/// `cairn import [PATH...] --project P [--discover]`.
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// Memory or rule files to read (CLAUDE.md, AGENTS.md, GEMINI.md, .cursor/rules/*.mdc,
    /// .github/copilot-instructions.md, a memory file).
    pub(crate) paths: Vec<PathBuf>,
    /// The project (slug or id) the learnings belong to.
    #[arg(long)]
    pub(crate) project: String,
    /// Also read the files found under the project's path and in the user's agent
    /// directories: Claude Code's memory of this project (~/.claude/projects/*/memory/)
    /// and Codex's memories ($CODEX_HOME/memories/, default ~/.codex; not per project).
    #[arg(long)]
    pub(crate) discover: bool,
    /// Say what would change without writing anything.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Print the result as JSON, for scripts.
    #[arg(long)]
    pub(crate) json: bool,
}

pub(super) fn run(cairn: &Cairn, a: ImportArgs) -> anyhow::Result<Outcome> {
    let mut paths = a.paths;
    if a.discover {
        let project = cairn.project(&a.project)?;
        let Some(root) = project.path.as_deref() else {
            anyhow::bail!(
                "project {} has no path to discover files under; name the files instead",
                project.slug
            );
        };
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let codex = std::env::var_os("CODEX_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".codex")));
        for p in discover(
            std::path::Path::new(root),
            home.as_deref(),
            codex.as_deref(),
        ) {
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
    }
    if paths.is_empty() {
        anyhow::bail!("no files to import: name them, or pass --discover");
    }
    let r = cairn.import_memory(&ImportRequest {
        project: a.project,
        paths,
        dry_run: a.dry_run,
    })?;
    if a.json {
        print_json(&r)?;
        return Ok(Outcome::Done);
    }
    let mut s = String::new();
    for f in &r.files {
        match &f.refused {
            Some(why) => s.push_str(&format!("{}\trefused: {why}\n", f.path)),
            None => {
                s.push_str(&format!(
                    "{}\t{}\t{}\n",
                    f.path,
                    f.client,
                    f.issue.as_deref().unwrap_or("-")
                ));
                for i in &f.items {
                    let what = match (&i.learning, &i.reason) {
                        (_, Some(why)) => why.clone(),
                        (Some(id), None) => id.clone(),
                        (None, None) => String::new(),
                    };
                    s.push_str(&format!("  line {}\t{}\t{what}\n", i.line, i.outcome));
                }
                for id in &f.archived {
                    s.push_str(&format!("  archived\t{id}\t(removed from the file)\n"));
                }
            }
        }
    }
    s.push_str(&format!(
        "{}{} added, {} merged, {} unchanged, {} refused items, {} refused files, {} archived",
        if r.dry_run { "dry run: " } else { "" },
        r.added,
        r.merged,
        r.unchanged,
        r.refused_items,
        r.refused_files,
        r.archived
    ));
    print_text(&s)?;
    Ok(Outcome::Done)
}
