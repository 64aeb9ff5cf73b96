//! `cairn export`: a project's trusted learnings as a managed section (`learnings`) of a
//! Markdown file, for agents that have no MCP. Trusted: [`trusted`]; above a quality
//! floor; neither superseded nor archived. Ranked verified first, then by the issues
//! that confirmed it, then by quality, oldest first among equals; kept within a byte
//! budget (a learning that does not fit is left out and the next tried). Rewritten in
//! place by [`crate::agents::managed`], so exporting twice gives the same file, and
//! importing the file back reads nothing from the section ([`super::split`]).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::agents::managed::upsert_managed_section;
use crate::error::{Error, Result};
use crate::learnings::trust::{INDEPENDENT, Trust};
use crate::store::Store;
use crate::store::db::params;

/// The managed section's name in the file.
pub const SECTION: &str = "learnings";
/// The default byte budget of the section's body.
pub const MAX_BYTES_DEFAULT: usize = 8 * 1024;
/// The default quality floor (new learnings start at 50).
pub const MIN_QUALITY_DEFAULT: u8 = 50;
/// The largest file an export rewrites.
const FILE_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// What to export.
#[derive(Debug, Clone)]
pub struct ExportRequest {
    /// Project id or slug.
    pub project: String,
    pub out: PathBuf,
    pub max_bytes: usize,
    pub min_quality: u8,
    /// Compute the section and say whether the file would change, writing nothing.
    pub dry_run: bool,
}

/// One exported learning.
#[derive(Debug, Clone, Serialize)]
pub struct Exported {
    pub id: String,
    pub pattern: String,
    pub verified: bool,
    /// Issues other than its own that recorded it or found it helpful.
    pub independent: u32,
    pub quality: u8,
}

/// What `cairn export` did.
#[derive(Debug, Clone, Serialize)]
pub struct ExportReport {
    pub project: String,
    pub out: String,
    pub dry_run: bool,
    /// Whether the file changed (or would, in a dry run).
    pub changed: bool,
    pub exported: Vec<Exported>,
    /// Trusted learnings left out by the byte budget.
    pub left_out: usize,
    /// The section's body, in bytes.
    pub bytes: usize,
    pub body: String,
}

/// Whether a learning is trusted enough to leave Cairn: its trust level (issue 56) is
/// `confirmed` or `verified`, so a held or flagged learning never leaves.
fn trusted(held: bool, flagged: bool, verified: bool, independent: u32) -> bool {
    Trust::of(held, flagged, verified, independent) >= Trust::Confirmed
}

/// The project's learnings in circulation above the floor, trusted, ranked.
fn candidates(store: &Store, project_id: &str, min_quality: u8) -> Result<Vec<Exported>> {
    let rows = store.read(|c| {
        c.query_map(
            &format!(
                "SELECT l.id, l.pattern, l.verified, l.flagged, l.quality_score, {INDEPENDENT},
                    l.held_at IS NOT NULL
                 FROM learnings l
                 WHERE l.project_id = ?1 AND l.superseded_by IS NULL AND l.archived_at IS NULL
                   AND l.quality_score >= ?2
                 ORDER BY l.seq"
            ),
            params![project_id, i64::from(min_quality)],
            |r| {
                Ok((
                    Exported {
                        id: r.get(0)?,
                        pattern: r.get(1)?,
                        verified: r.get(2)?,
                        quality: r.get(4)?,
                        independent: r.get(5)?,
                    },
                    (r.get::<_, bool>(3)?, r.get::<_, bool>(6)?),
                ))
            },
        )
    })?;
    let mut out: Vec<Exported> = rows
        .into_iter()
        .filter(|(e, (flagged, held))| trusted(*held, *flagged, e.verified, e.independent))
        .map(|(e, _)| e)
        .collect();
    // Stable: oldest first among equals.
    out.sort_by(|a, b| {
        (b.verified, b.independent, b.quality).cmp(&(a.verified, a.independent, a.quality))
    });
    Ok(out)
}

/// The section's body: a heading, one line on what it is, and one list entry per
/// learning within `max_bytes`; the learnings left out.
fn render(slug: &str, ranked: Vec<Exported>, max_bytes: usize) -> (String, Vec<Exported>, usize) {
    let mut body = format!(
        "## Lessons from Cairn ({slug})\n\n\
         Verified by a person or confirmed by several issues. Cairn rewrites this section \
         (`cairn export`); record and correct lessons in Cairn.\n\n"
    );
    let mut kept = Vec::new();
    let mut left_out = 0;
    for e in ranked {
        let entry = format!(
            "- {} <!-- {} -->\n",
            e.pattern.trim().replace('\n', "\n  "),
            e.id
        );
        if body.len() + entry.len() > max_bytes {
            left_out += 1;
            continue;
        }
        body.push_str(&entry);
        kept.push(e);
    }
    (body, kept, left_out)
}

/// The current text of the file to rewrite (empty when it does not exist): a regular
/// UTF-8 file, not a symlink, at most [`FILE_MAX_BYTES`].
fn current_text(path: &Path) -> Result<String> {
    let shown = path.display();
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        Err(e) => return Err(Error::io(path, e)),
    };
    if !meta.file_type().is_file() {
        return Err(Error::invalid(
            "out",
            format!(
                "{shown} is not a regular file (a symlink, a directory, ...); give the file itself"
            ),
        ));
    }
    if meta.len() > FILE_MAX_BYTES {
        return Err(Error::invalid(
            "out",
            format!(
                "{shown} is {} bytes; at most {FILE_MAX_BYTES} are rewritten",
                meta.len()
            ),
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    String::from_utf8(bytes)
        .map_err(|_| Error::invalid("out", format!("{shown} is not UTF-8 text")))
}

/// Write the project's trusted learnings into `req.out` (see the module docs).
pub fn export(store: &Store, req: &ExportRequest) -> Result<ExportReport> {
    let project = crate::issues::project(store, &req.project)?;
    let ranked = candidates(store, &project.id, req.min_quality)?;
    let (body, exported, left_out) = render(&project.slug, ranked, req.max_bytes);
    let before = current_text(&req.out)?;
    let after = upsert_managed_section(&before, SECTION, &body)
        .map_err(|e| Error::invalid("out", format!("{}: {e}", req.out.display())))?;
    let changed = after != before;
    if changed && !req.dry_run {
        crate::paths::write_output(&req.out, after.as_bytes())?;
    }
    Ok(ExportReport {
        project: project.slug,
        out: req.out.display().to_string(),
        dry_run: req.dry_run,
        changed,
        exported,
        left_out,
        bytes: body.len(),
        body,
    })
}
