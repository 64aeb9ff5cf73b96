//! Moving an issue to another project (`move_issue`).
//!
//! Decisions (the spec gives the effects, not the identity):
//! - **Identity**: the issue keeps its row and opaque id (so its trail chain, PRs and
//!   runs stay attached, and the chain's hashes stay valid); it gets a new number in the
//!   target project (`PFX-N`, allocated like any new issue) and a `moved-from:<old>`
//!   label. The old identifier keeps resolving to the issue (an alias in
//!   `issue_aliases`, written here only: tools, the CLI and `cairn serve --issue-id OLD`
//!   find the moved issue, whose answers carry the new identifier); `list_issues` with
//!   the label `moved-from:<old>` finds it too. Earlier `moved-from:` labels are kept.
//! - **Constraints**: the issue must carry a `phase:*`, `cross-project` or `multi-repo`
//!   label, must not be `done` or `cancelled`, and the target must be another project.
//!   They are checked again inside the write transaction.
//! - **Phase label**: a project's pipeline is [`crate::work::phases::pipeline`]. A `phase:<p>`
//!   label is kept when `p` is in the target's pipeline; otherwise every `phase:*` label
//!   is replaced by `phase:<first phase of the target>`. An issue without a phase label
//!   gets none.
//! - **Artifacts**: the regular files under `docs/tickets/<old>/` of the source
//!   project's path are copied to `docs/tickets/<new>/` of the target's path. Both
//!   directories are opened beneath a handle on their project root and every entry
//!   beneath those handles ([`crate::paths::DirHandle`]): symlinks are never followed,
//!   and symlinks, special files and files with more than one hard link are skipped and
//!   listed; every file is opened again for the copy and checked to be the very file
//!   that was listed (device and inode), so a swap in between is refused. `skip:<phase>` is added for each phase (but `ready`) with an artifact: a
//!   `<phase>.md` file, or the file named by the phase's latest claim.
//! - **No half state**: files are copied (`O_CREAT | O_EXCL`, `mkdirat`) into a temp
//!   directory created beneath the target's `docs/tickets` handle, then renamed into
//!   place relative to that handle (`renameat2(RENAME_NOREPLACE)`) as the last step of
//!   the database transaction; if the
//!   rename or the commit fails, the copy is removed and nothing in the database
//!   changed. The status goes to `todo` (with a status-history entry) and the reason is
//!   posted as a comment, in the same transaction.

use std::cell::Cell;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustix::fs::FileType;

use crate::store::db::{Conn, params};
use serde::Serialize;

use crate::base::now_iso;
use crate::error::{Error, Result};
use crate::issues::{Issue, Project, Status, allocate_identifier, find_project, load_issue};
use crate::paths::DirHandle;
use crate::store::Store;
use crate::trail::findings::{add_comment_in, latest_phase_claim_in};
use crate::trail::status::set_status_in;
use crate::work::phases::pipeline;

/// Most artifact files one move copies.
pub(crate) const MAX_FILES: usize = 1000;
/// Most artifact bytes one move copies.
pub(crate) const MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Longest accepted reason, in characters.
pub(crate) const REASON_MAX: usize = 2000;

/// What `move_issue` did.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MovedIssue {
    /// The issue's opaque id (unchanged).
    pub(crate) id: String,
    /// The new identifier in the target project.
    pub(crate) identifier: String,
    /// The identifier before the move.
    pub(crate) moved_from: String,
    pub(crate) from_project: String,
    pub(crate) to_project: String,
    pub(crate) status: Status,
    pub(crate) labels: Vec<String>,
    /// Artifact files copied, relative to the target project's path.
    pub(crate) copied_files: Vec<String>,
    /// Entries under the old ticket directory that were not copied (symlinks, specials).
    pub(crate) skipped_entries: Vec<String>,
    /// The comment recording the reason.
    pub(crate) comment_id: String,
}

/// One artifact file to copy: its path relative to the ticket directory, and the
/// identity (device, inode) it had when listed.
struct Artifact {
    rel: String,
    dev: u64,
    ino: u64,
}

/// Files under the ticket directory `dir`, recursively, each directory and file opened
/// beneath `dir`'s handle without following symlinks. Symlinks, special files and files
/// with more than one hard link are skipped and listed.
fn list_artifacts(dir: &DirHandle) -> Result<(Vec<Artifact>, Vec<String>)> {
    const FIELD: &str = "source ticket dir";
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    let mut total = 0u64;
    let mut dirs = 0usize;
    let mut stack: Vec<String> = vec![String::new()];
    while let Some(prefix) = stack.pop() {
        let parts: Vec<&str> = prefix.split('/').filter(|p| !p.is_empty()).collect();
        let current = if parts.is_empty() {
            None
        } else {
            match dir.dir_parts(&parts, &prefix, FIELD) {
                Ok(Some(d)) => Some(d),
                Ok(None) => continue,
                Err(Error::InvalidInput(_)) => {
                    skipped.push(prefix.clone());
                    continue;
                }
                Err(e) => return Err(e),
            }
        };
        let here = current.as_ref().unwrap_or(dir);
        for entry in here.entries()? {
            let Some(name) = entry.name.to_str() else {
                skipped.push(format!("{prefix}{}", entry.name.to_string_lossy()));
                continue;
            };
            let rel = format!("{prefix}{name}");
            match entry.kind {
                FileType::Directory => {
                    dirs += 1;
                    stack.push(format!("{rel}/"));
                }
                FileType::RegularFile => {
                    let rel_parts: Vec<&str> = rel.split('/').collect();
                    match dir.open_file_parts(&rel_parts, &rel, FIELD, MAX_BYTES) {
                        Ok(Some(f)) => {
                            total += f.metadata().len();
                            files.push(Artifact {
                                rel,
                                dev: f.metadata().dev(),
                                ino: f.metadata().ino(),
                            });
                        }
                        Ok(None) => {}
                        Err(Error::InvalidInput(_)) => skipped.push(rel),
                        Err(e) => return Err(e),
                    }
                }
                _ => skipped.push(rel),
            }
        }
        if files.len() + dirs > MAX_FILES || total > MAX_BYTES {
            return Err(Error::FailedPrecondition(format!(
                "{} holds more than {MAX_FILES} files and directories or {MAX_BYTES} bytes; \
                 move the issue's artifacts by hand",
                dir.path().display()
            )));
        }
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    skipped.sort();
    Ok((files, skipped))
}

/// Copy one artifact from the ticket directory `from` into `staging`, both beneath
/// their handles; a file that is not the one listed is refused.
fn copy_artifact(from: &DirHandle, a: &Artifact, staging: &DirHandle) -> Result<()> {
    let parts: Vec<&str> = a.rel.split('/').collect();
    let changed = || Error::Conflict {
        message: format!(
            "{} changed while the move was copying it; retry the move",
            from.path().join(&a.rel).display()
        ),
        existing_id: None,
    };
    let src = match from.open_file_parts(&parts, &a.rel, "source ticket dir", MAX_BYTES) {
        Ok(Some(f)) => f,
        Ok(None) | Err(Error::InvalidInput(_)) => return Err(changed()),
        Err(e) => return Err(e),
    };
    if src.metadata().dev() != a.dev || src.metadata().ino() != a.ino {
        return Err(changed());
    }
    let (name, dirs) = parts
        .split_last()
        .ok_or_else(|| Error::Internal("empty artifact path".into()))?;
    let parent = staging.create_dirs(dirs, &a.rel, "target ticket dir")?;
    let dest = parent.path().join(name);
    let mut out = parent.create_new(std::ffi::OsStr::new(name))?;
    let n = std::io::copy(&mut src.file().take(MAX_BYTES + 1), &mut out)
        .map_err(|e| Error::io(&dest, e))?;
    if n > MAX_BYTES {
        return Err(changed());
    }
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
    c: &Conn<'_>,
    issue: &Issue,
    source: &Project,
    files: &[Artifact],
) -> Result<Vec<String>> {
    let mut phases = pipeline(source);
    for p in crate::work::phases::DEFAULT_PIPELINE {
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
    tx: &Conn<'_>,
    issue: &Issue,
    target: &Project,
    labels: &[String],
    reason: &str,
    actor: &str,
) -> Result<(String, String)> {
    let (seq, identifier) = allocate_identifier(tx, target)?;
    let now = now_iso();
    tx.execute(
        "UPDATE issues SET project_id = ?2, seq = ?3, identifier = ?4, updated_by = ?5,
                           updated_at = ?6 WHERE id = ?1",
        params![issue.id, target.id, seq, identifier, actor, now],
    )?;
    // The old identifier keeps naming this issue (identifiers are never reused).
    tx.execute(
        "INSERT INTO issue_aliases (identifier, issue_id, moved_at) VALUES (?1, ?2, ?3)",
        params![issue.identifier, issue.id, now],
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

/// `move_issue`: move `issue` (id or identifier) to `target` (project id or slug).
/// See the module docs for the rules. In stages: what moves ([`plan_move`]), the
/// artifacts copied beside their destination ([`stage_artifacts`]), then one write
/// transaction that moves the rows and puts the copies in place ([`commit_move`]).
pub(crate) fn move_issue(
    store: &Store,
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
    let plan = plan_move(store, issue, target)?;
    let labels = moved_labels(&plan.before, &plan.target, &plan.skips);
    let staging = stage_artifacts(&plan)?;
    let (identifier, comment_id) =
        commit_move(store, &plan, &labels, staging.as_ref(), reason, actor)?;
    let Plan {
        before,
        source,
        target,
        files,
        skipped,
        ..
    } = plan;
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

/// What a move reads before it writes anything.
struct Plan {
    before: Issue,
    source: Project,
    target: Project,
    /// Phases whose artifacts exist (their labels are skipped in the target).
    skips: Vec<String>,
    files: Vec<Artifact>,
    skipped: Vec<String>,
    /// The source ticket directory, when the source project has one.
    ticket_dir: Option<DirHandle>,
}

/// The issue, both projects, and the source ticket directory's artifacts, read in one
/// snapshot; an issue that may not move is refused here.
fn plan_move(store: &Store, issue: &str, target: &str) -> Result<Plan> {
    store.read(|c| {
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
        let ticket_dir = match source.path.as_deref().map(Path::new) {
            Some(p) if p.is_dir() => DirHandle::open_root(p)?.dir(&ticket, "source ticket dir")?,
            _ => None,
        };
        let (files, skipped) = match &ticket_dir {
            Some(d) => list_artifacts(d)?,
            None => (Vec::new(), Vec::new()),
        };
        let skips = phases_with_artifacts(c, &before, &source, &files)?;
        Ok(Plan {
            before,
            source,
            target,
            skips,
            files,
            skipped,
            ticket_dir,
        })
    })
}

/// Copy the artifacts into a temporary directory beside their destination
/// (`docs/tickets/` of the target), before the database is touched; `None` when there
/// are none. The target's ticket directory and the temporary directory's name.
fn stage_artifacts(plan: &Plan) -> Result<Option<(DirHandle, String)>> {
    if plan.files.is_empty() {
        return Ok(None);
    }
    let root = plan.target.path.as_deref().ok_or_else(|| {
        Error::FailedPrecondition(format!(
            "{} has artifacts but project {} has no path to copy them to; set the \
             project's path first",
            plan.before.identifier, plan.target.slug
        ))
    })?;
    let tickets = DirHandle::open_root(Path::new(root))?.create_dirs(
        &["docs", "tickets"],
        "docs/tickets",
        "target ticket dir",
    )?;
    let (tmp, staging) = tickets.create_temp_dir("cairn-move-")?;
    let from = plan
        .ticket_dir
        .as_ref()
        .ok_or_else(|| Error::Internal("artifacts without a ticket directory".into()))?;
    if let Err(e) = plan
        .files
        .iter()
        .try_for_each(|f| copy_artifact(from, f, &staging))
    {
        let _ = tickets.remove_tree(OsStr::new(&tmp));
        return Err(e);
    }
    Ok(Some((tickets, tmp)))
}

/// Move the rows in one write transaction, refused if the issue changed since
/// [`plan_move`], and rename the staged copies to the new identifier inside it; on any
/// failure the copies are removed. The new identifier and the move's comment id.
fn commit_move(
    store: &Store,
    plan: &Plan,
    labels: &[String],
    staging: Option<&(DirHandle, String)>,
    reason: &str,
    actor: &str,
) -> Result<(String, String)> {
    let before = &plan.before;
    let placed: Cell<Option<String>> = Cell::new(None);
    let outcome = store.write(|tx| {
        let now = load_issue(tx, &before.id)?
            .ok_or_else(|| Error::not_found("issue", &before.identifier))?;
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
        let (identifier, comment_id) = move_rows(tx, before, &plan.target, labels, reason, actor)?;
        if let Some((tickets, tmp)) = staging {
            if !tickets.rename_new(tmp, &identifier)? {
                return Err(Error::Conflict {
                    message: format!(
                        "{} already exists in project {}; remove it and retry the move",
                        tickets.path().join(&identifier).display(),
                        plan.target.slug
                    ),
                    existing_id: None,
                });
            }
            placed.set(Some(identifier.clone()));
        }
        Ok((identifier, comment_id))
    });
    match outcome {
        Ok(v) => {
            if let Some((tickets, _)) = staging {
                tickets.sync()?;
            }
            Ok(v)
        }
        Err(e) => {
            if let Some((tickets, tmp)) = staging {
                let name = placed.take().unwrap_or_else(|| tmp.clone());
                let _ = tickets.remove_tree(OsStr::new(&name));
            }
            Err(e)
        }
    }
}
