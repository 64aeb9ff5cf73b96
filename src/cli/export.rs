//! `cairn export`: a project's trusted learnings as a managed section of a Markdown file.

use std::path::PathBuf;

use clap::Args;

use crate::Cairn;
use crate::memory::export::{ExportRequest, MAX_BYTES_DEFAULT, MIN_QUALITY_DEFAULT};

use super::{Outcome, print_json, print_text};

/// `cairn export --project P --out FILE`.
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// The project (slug or id) whose learnings are exported.
    #[arg(long)]
    pub(crate) project: String,
    /// The file to write the section into (AGENTS.md, CLAUDE.md, ...); created if
    /// missing, the rest of it left alone.
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Largest size of the section's body, in bytes.
    #[arg(long, default_value_t = MAX_BYTES_DEFAULT)]
    pub(crate) max_bytes: usize,
    /// Leave out learnings below this quality score (0-100).
    #[arg(long, default_value_t = MIN_QUALITY_DEFAULT, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub(crate) min_quality: u8,
    /// Print the section and whether the file would change, writing nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Print the result as JSON, for scripts.
    #[arg(long)]
    pub(crate) json: bool,
}

pub(super) fn run(cairn: &Cairn, a: ExportArgs) -> anyhow::Result<Outcome> {
    let r = cairn.export_learnings(&ExportRequest {
        project: a.project,
        out: a.out,
        max_bytes: a.max_bytes,
        min_quality: a.min_quality,
        dry_run: a.dry_run,
    })?;
    if a.json {
        print_json(&r)?;
        return Ok(Outcome::Done);
    }
    let mut s = String::new();
    if r.dry_run {
        s.push_str(&r.body);
        s.push('\n');
    }
    s.push_str(&format!(
        "{}: {} learnings, {} bytes, {} left out by the budget; {}",
        r.out,
        r.exported.len(),
        r.bytes,
        r.left_out,
        match (r.changed, r.dry_run) {
            (true, true) => "would change",
            (true, false) => "written",
            (false, _) => "unchanged",
        }
    ));
    print_text(&s)?;
    Ok(Outcome::Done)
}
