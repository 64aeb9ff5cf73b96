//! Moving an issue to another project (`move_issue`).
//!
//! Decisions (the spec gives the effects, not the identity):
//! - **Identity**: the issue keeps its row and opaque id (so its trail chain, PRs and
//!   runs stay attached, and the chain's hashes stay valid); it gets a new number in the
//!   target project (`PFX-N`, allocated like any new issue) and a `moved-from:<old>`
//!   label. The old identifier no longer resolves; `list_issues` with the label
//!   `moved-from:<old>` finds the issue. Earlier `moved-from:` labels are kept.
//! - **Constraints**: the issue must carry a `phase:*`, `cross-project` or `multi-repo`
//!   label, must not be `done` or `cancelled`, and the target must be another project.
//!   They are checked again inside the write transaction.
//! - **Phase label**: a project's pipeline is [`crate::phases::pipeline`]. A `phase:<p>`
//!   label is kept when `p` is in the target's pipeline; otherwise every `phase:*` label
//!   is replaced by `phase:<first phase of the target>`. An issue without a phase label
//!   gets none.
//! - **Artifacts**: the regular files under `docs/tickets/<old>/` of the source
//!   project's path are copied to `docs/tickets/<new>/` of the target's path. Symlinks
//!   are never followed (they are skipped and listed); every file is opened and checked
//!   to be the very file that was inspected (device and inode), so a swap in between is
//!   refused. `skip:<phase>` is added for each phase (but `ready`) with an artifact: a
//!   `<phase>.md` file, or the file named by the phase's latest claim.
//! - **No half state**: files are copied into a temp directory beside the destination,
//!   then renamed into place as the last step of the database transaction; if the
//!   rename or the commit fails, the copy is removed and nothing in the database
//!   changed. The status goes to `todo` (with a status-history entry) and the reason is
//!   posted as a comment, in the same transaction.

use std::cell::Cell;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, Transaction, params};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::issues::{Issue, Project, Status, find_project, load_issue};
use crate::paths::{ensure_dir_in_root, resolve_in_root};
use crate::phases::pipeline;
use crate::service::{Cairn, now_iso};
use crate::trail::findings::{add_comment_in, latest_phase_claim_in};
use crate::trail::status::set_status_in;

/// Most artifact files one move copies.
pub const MAX_FILES: usize = 1000;
/// Most artifact bytes one move copies.
pub const MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Longest accepted reason, in characters.
pub const REASON_MAX: usize = 2000;

/// What `move_issue` did.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MovedIssue {
    /// The issue's opaque id (unchanged).
    pub id: String,
    /// The new identifier in the target project.
    pub identifier: String,
    /// The identifier before the move.
    pub moved_from: String,
    pub from_project: String,
    pub to_project: String,
    pub status: Status,
    pub labels: Vec<String>,
    /// Artifact files copied, relative to the target project's path.
    pub copied_files: Vec<String>,
    /// Entries under the old ticket directory that were not copied (symlinks, specials).
    pub skipped_entries: Vec<String>,
    /// The comment recording the reason.
    pub comment_id: String,
}

/// One artifact file to copy: its path relative to the ticket directory, and the
/// identity (device, inode) it had when listed.
struct Artifact {
    rel: String,
    src: PathBuf,
    dev: u64,
    ino: u64,
}

/// Files under `dir`, recursively, without following symlinks.
fn list_artifacts(dir: &Path) -> Result<(Vec<Artifact>, Vec<String>)> {
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    let mut total = 0u64;
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, prefix)) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&path)
            .map_err(|e| Error::io(&path, e))?
            .collect::<std::io::Result<_>>()
            .map_err(|e| Error::io(&path, e))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = format!("{prefix}{name}");
            let meta =
                std::fs::symlink_metadata(entry.path()).map_err(|e| Error::io(entry.path(), e))?;
            if meta.is_dir() {
                stack.push((entry.path(), format!("{rel}/")));
            } else if meta.is_file() {
                total += meta.len();
                files.push(Artifact {
                    rel,
                    src: entry.path(),
                    dev: meta.dev(),
                    ino: meta.ino(),
                });
            } else {
                skipped.push(rel);
            }
        }
        if files.len() > MAX_FILES || total > MAX_BYTES {
            return Err(Error::FailedPrecondition(format!(
                "{} holds more than {MAX_FILES} files or {MAX_BYTES} bytes; move the issue's \
                 artifacts by hand",
                dir.display()
            )));
        }
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok((files, skipped))
}

/// Copy one artifact into `staging`, refusing a file that is not the one listed.
fn copy_artifact(a: &Artifact, staging: &Path) -> Result<()> {
    let mut src = std::fs::File::open(&a.src).map_err(|e| Error::io(&a.src, e))?;
    let meta = src.metadata().map_err(|e| Error::io(&a.src, e))?;
    if !meta.is_file() || meta.dev() != a.dev || meta.ino() != a.ino {
        return Err(Error::Conflict {
            message: format!(
                "{} changed while the move was copying it; retry the move",
                a.src.display()
            ),
            existing_id: None,
        });
    }
    let dest = staging.join(&a.rel);
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    let mut out = std::fs::File::create_new(&dest).map_err(|e| Error::io(&dest, e))?;
    std::io::copy(&mut src, &mut out).map_err(|e| Error::io(&dest, e))?;
    out.sync_all().map_err(|e| Error::io(&dest, e))
}

/// Check the move's constraints on the issue as it is now.
fn check_movable(issue: &Issue, target: &Project) -> Result<()> {
    if issue.project_id == target.id {
        return Err(Error::invalid(
            "target_project_id",
            format!(
                "{} is already in project {}; name another project",
                issue.identifier, target.slug
            ),
        ));
    }
    if issue.status.is_terminal() {
        return Err(Error::InvalidTransition {
            from: issue.status.to_string(),
            to: Status::Todo.to_string(),
            hint: format!(
                "{} is {}; done or cancelled issues cannot be moved",
                issue.identifier, issue.status
            ),
        });
    }
    let eligible = issue
        .labels
        .iter()
        .any(|l| l.starts_with("phase:") || l == "cross-project" || l == "multi-repo");
    if !eligible {
        return Err(Error::FailedPrecondition(format!(
            "{} has no phase:* label and no cross-project or multi-repo label; only issues in a \
             phase pipeline or marked cross-project/multi-repo can be moved",
            issue.identifier
        )));
    }
    Ok(())
}

/// The labels after the move (see the module docs), sorted.
fn moved_labels(issue: &Issue, target: &Project, skips: &[String]) -> Vec<String> {
    let phases = pipeline(target);
    let mut labels = issue.labels.clone();
    let current: Vec<&str> = labels
        .iter()
        .filter_map(|l| l.strip_prefix("phase:"))
        .collect();
    let compatible = current.iter().any(|p| phases.iter().any(|x| x == p));
    if !current.is_empty() && !compatible {
        labels.retain(|l| !l.starts_with("phase:"));
        labels.push(format!("phase:{}", phases[0]));
    }
    labels.push(format!("moved-from:{}", issue.identifier));
    labels.extend(skips.iter().map(|p| format!("skip:{p}")));
    labels.sort();
    labels.dedup();
    labels
}

/// Phases (but `ready`) that have an artifact among `files`.
fn phases_with_artifacts(
    c: &Connection,
    issue: &Issue,
    source: &Project,
    files: &[Artifact],
) -> Result<Vec<String>> {
    let mut phases = pipeline(source);
    for p in crate::phases::DEFAULT_PIPELINE {
        if !phases.iter().any(|x| x == p) {
            phases.push(p.to_string());
        }
    }
    let ticket_prefix = format!("docs/tickets/{}/", issue.identifier);
    let mut out = Vec::new();
    for phase in phases.iter().filter(|p| *p != "ready") {
        let by_name = files.iter().any(|f| f.rel == format!("{phase}.md"));
        let claimed = latest_phase_claim_in(c, &issue.id, phase)?
            .and_then(|claim| {
                claim
                    .field_str("artifact_path")
                    .and_then(|p| p.strip_prefix(&ticket_prefix))
                    .map(String::from)
            })
            .is_some_and(|rel| files.iter().any(|f| f.rel == rel));
        if by_name || claimed {
            out.push(phase.clone());
        }
    }
    Ok(out)
}

/// The database side of a move, inside its transaction; returns the new identifier.
fn move_rows(
    tx: &Transaction<'_>,
    issue: &Issue,
    target: &Project,
    labels: &[String],
    reason: &str,
    actor: &str,
) -> Result<(String, String)> {
    let seq: i64 = tx.query_row(
        "UPDATE projects SET next_seq = next_seq + 1 WHERE id = ?1 RETURNING next_seq - 1",
        [&target.id],
        |r| r.get(0),
    )?;
    let identifier = format!("{}-{seq}", target.prefix);
    tx.execute(
        "UPDATE issues SET project_id = ?2, seq = ?3, identifier = ?4, updated_by = ?5,
                           updated_at = ?6 WHERE id = ?1",
        params![issue.id, target.id, seq, identifier, actor, now_iso()],
    )?;
    if issue.status != Status::Todo {
        set_status_in(tx, &issue.id, Status::Todo, Some(reason), actor)?;
    }
    tx.execute("DELETE FROM issue_labels WHERE issue_id = ?1", [&issue.id])?;
    for l in labels {
        tx.execute(
            "INSERT INTO issue_labels(issue_id, label) VALUES (?1, ?2)",
            params![issue.id, l],
        )?;
    }
    let comment = add_comment_in(
        tx,
        &issue.id,
        &format!(
            "Moved from {} to {identifier} (project {}): {reason}",
            issue.identifier, target.slug
        ),
        actor,
    )?;
    Ok((identifier, comment.id))
}

impl Cairn {
    /// `move_issue`: move `issue` (id or identifier) to `target` (project id or slug).
    /// See the module docs for the rules.
    pub fn move_issue(
        &self,
        issue: &str,
        target: &str,
        reason: &str,
        actor: &str,
    ) -> Result<MovedIssue> {
        let reason = reason.trim();
        if reason.is_empty() || reason.chars().count() > REASON_MAX {
            return Err(Error::invalid(
                "reason",
                format!("say why the issue moves, in 1-{REASON_MAX} characters"),
            ));
        }
        let (before, source, target, skips, files, skipped) = self.store.read(|c| {
            let id = crate::issues::resolve_issue_id(c, issue)?
                .ok_or_else(|| Error::not_found("issue", issue))?;
            let before = load_issue(c, &id)?.ok_or_else(|| Error::not_found("issue", issue))?;
            let target =
                find_project(c, target)?.ok_or_else(|| Error::ProjectNotFound(target.into()))?;
            check_movable(&before, &target)?;
            let source = find_project(c, &before.project_id)?
                .ok_or_else(|| Error::ProjectNotFound(before.project_id.clone()))?;
            let ticket = format!("docs/tickets/{}", before.identifier);
            // A source project without a path, or whose directory is gone, has no
            // artifacts to carry over.
            let dir = match source.path.as_deref().map(Path::new) {
                Some(p) if p.is_dir() => Some(resolve_in_root(p, &ticket, "source ticket dir")?),
                _ => None,
            };
            let (files, skipped) = match dir.filter(|d| d.is_dir()) {
                Some(d) => list_artifacts(&d)?,
                None => (Vec::new(), Vec::new()),
            };
            let skips = phases_with_artifacts(c, &before, &source, &files)?;
            Ok((before, source, target, skips, files, skipped))
        })?;
        let labels = moved_labels(&before, &target, &skips);

        // Stage the copies beside their destination before touching the database.
        let staging = if files.is_empty() {
            None
        } else {
            let root = target.path.as_deref().ok_or_else(|| {
                Error::FailedPrecondition(format!(
                    "{} has artifacts but project {} has no path to copy them to; set the \
                     project's path first",
                    before.identifier, target.slug
                ))
            })?;
            let tickets = ensure_dir_in_root(Path::new(root), "docs/tickets", "target ticket dir")?;
            let tmp = tempfile::Builder::new()
                .prefix(".cairn-move-")
                .tempdir_in(&tickets)
                .map_err(|e| Error::io(&tickets, e))?;
            for f in &files {
                copy_artifact(f, tmp.path())?;
            }
            Some((tickets, tmp))
        };

        let placed: Cell<Option<PathBuf>> = Cell::new(None);
        let outcome = self.store.write(|tx| {
            let now =
                load_issue(tx, &before.id)?.ok_or_else(|| Error::not_found("issue", issue))?;
            if now.identifier != before.identifier
                || now.labels != before.labels
                || now.status != before.status
            {
                return Err(Error::Conflict {
                    message: format!(
                        "{} changed while it was being moved; retry the move",
                        before.identifier
                    ),
                    existing_id: Some(before.id.clone()),
                });
            }
            let (identifier, comment_id) = move_rows(tx, &before, &target, &labels, reason, actor)?;
            if let Some((tickets, tmp)) = &staging {
                let dest = tickets.join(&identifier);
                if std::fs::symlink_metadata(&dest).is_ok() {
                    return Err(Error::Conflict {
                        message: format!(
                            "{} already exists in project {}; remove it and retry the move",
                            dest.display(),
                            target.slug
                        ),
                        existing_id: None,
                    });
                }
                std::fs::rename(tmp.path(), &dest).map_err(|e| Error::io(&dest, e))?;
                placed.set(Some(dest));
            }
            Ok((identifier, comment_id))
        });
        let (identifier, comment_id) = match outcome {
            Ok(v) => v,
            Err(e) => {
                if let Some(dest) = placed.take() {
                    let _ = std::fs::remove_dir_all(dest);
                }
                return Err(e);
            }
        };
        tracing::info!(from = %before.identifier, to = %identifier, "issue moved");
        Ok(MovedIssue {
            id: before.id,
            copied_files: files
                .iter()
                .map(|f| format!("docs/tickets/{identifier}/{}", f.rel))
                .collect(),
            identifier,
            moved_from: before.identifier,
            from_project: source.slug,
            to_project: target.slug,
            status: Status::Todo,
            labels,
            skipped_entries: skipped,
            comment_id,
        })
    }
}
