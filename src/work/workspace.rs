//! Workspace verification: is this session working in the bound issue's worktree?
//!
//! The orchestrator writes a `.symphony-worktree` marker file at the root of every
//! worktree it creates; its first line is the identifier of the issue the worktree
//! belongs to. [`Cairn::verify_workspace`] reads the marker at the session's
//! `--worktree-path`, compares it with the bound issue, and asks git for the branch.
//! `verify_workspace` answers with it, and `complete_phase` and `create_pr` call it
//! before doing anything else.
//!
//! Decisions:
//! - A failure is an error ([`Error::WorkspaceInvalid`], code `ERR_WORKSPACE_INVALID`,
//!   an `isError` result over MCP), never a success with `valid: false`: an agent that
//!   only looks at `isError` must not carry on in the wrong place. The message is the
//!   spec's failure text with a `Recovery:` instruction; each cause (no
//!   `--worktree-path`, a relative or `..` path, a missing worktree, a missing marker, a
//!   marker that is a symlink, a special file or a hard link, an unreadable or empty
//!   marker, a marker naming another issue) has its own message. The success result always has
//!   `valid: true`, so the tool keeps one output schema.
//! - The marker may name the issue by identifier (case-insensitive) or by opaque id; the
//!   bound issue is re-read from the database, so an issue moved to another project is
//!   compared under its new identifier.
//! - The branch is `git symbolic-ref --short HEAD` in the worktree (like
//!   `rev-parse --abbrev-ref HEAD`, but it also names the branch of a repository without
//!   commits yet), with git's repository discovery stopped at the worktree (so a parent
//!   repository is never reported). No git, not a repository, or a detached HEAD give `branch: null` and a
//!   message that says so; that alone does not fail the check.

use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Serialize;

use crate::access::context::WorkContext;
use crate::error::{Error, Result};
use crate::store::Store;

/// The marker file's name, at the worktree root.
pub(crate) const MARKER_FILE: &str = ".symphony-worktree";
/// The most of the marker file that is read.
const MARKER_MAX_BYTES: u64 = 4096;
/// The largest marker file opened at all.
const MARKER_FILE_MAX_BYTES: u64 = 1024 * 1024;

/// A verified workspace (the spec's success shape).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct WorkspaceInfo {
    /// Always true: a workspace that fails the check is an error with recovery steps.
    pub(crate) valid: bool,
    /// The worktree's canonical path.
    pub(crate) path: String,
    /// The identifier of the issue the worktree belongs to.
    pub(crate) issue: String,
    /// The checked-out branch; null when git is missing, the worktree is not a
    /// repository, or HEAD is detached.
    pub(crate) branch: Option<String>,
    pub(crate) message: String,
}

fn invalid(message: String) -> Error {
    Error::WorkspaceInvalid(message)
}

/// The bound worktree path, checked for shape: set, absolute, no `..`.
fn bound_worktree(work: &WorkContext, identifier: &str) -> Result<PathBuf> {
    let Some(path) = &work.worktree_path else {
        return Err(invalid(format!(
            "This server was started without --worktree-path, so the workspace of {identifier} \
             cannot be verified. Recovery: restart `cairn serve` with --worktree-path <the \
             worktree of {identifier}>; do not call complete_phase or create_pr until then."
        )));
    };
    let shape_ok = path.is_absolute()
        && !path.components().any(|c| matches!(c, Component::ParentDir))
        && path.as_os_str().len() <= crate::paths::PATH_MAX;
    if !shape_ok {
        return Err(invalid(format!(
            "--worktree-path {} must be an absolute path without `..` components. Recovery: \
             restart `cairn serve` with the absolute path of the worktree of {identifier}.",
            path.display()
        )));
    }
    if !path.is_dir() {
        return Err(invalid(format!(
            "Worktree {} does not exist or is not a directory. Recovery: ask the orchestrator \
             to recreate the worktree of {identifier}; do not work outside it.",
            path.display()
        )));
    }
    Ok(path.clone())
}

/// The first line of the marker, opened beneath a handle on the worktree
/// ([`crate::paths::DirHandle::open_file`]): a marker that is a symlink, a special file,
/// has more than one hard link or is larger than [`MARKER_FILE_MAX_BYTES`] is refused,
/// and no byte of it is read or echoed; of the others, [`MARKER_MAX_BYTES`] are read.
fn read_marker(worktree: &Path) -> Result<String> {
    let recovery = format!(
        "Recovery: run `cd {}` to return to your worktree.",
        worktree.display()
    );
    let marker = worktree.join(MARKER_FILE);
    let untrusted = |e: Error| {
        let why = crate::paths::refusal_text(&e);
        invalid(format!(
            "Worktree marker at {} cannot be trusted ({why}). {recovery}",
            marker.display()
        ))
    };
    let root = crate::paths::DirHandle::open_root(worktree).map_err(untrusted)?;
    let Some(file) = root
        .open_file(MARKER_FILE, "marker", MARKER_FILE_MAX_BYTES)
        .map_err(untrusted)?
    else {
        return Err(invalid(format!(
            "Worktree marker file not found at {}. {recovery}",
            marker.display()
        )));
    };
    let mut text = String::new();
    file.file()
        .take(MARKER_MAX_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| {
            invalid(format!(
                "Worktree marker {} cannot be read as text ({e}). {recovery}",
                marker.display()
            ))
        })?;
    let first = text.lines().next().unwrap_or("").trim().to_string();
    let well_formed = !first.is_empty()
        && first.chars().count() <= 64
        && first.chars().all(|c| !c.is_control() && !c.is_whitespace());
    if !well_formed {
        return Err(invalid(format!(
            "Worktree marker {} does not name an issue on its first line. {recovery} If you are \
             in it, ask the orchestrator to rewrite the marker.",
            marker.display()
        )));
    }
    Ok(first)
}

/// The branch checked out in `worktree`, or `None` (no git, not a repository, detached).
fn git_branch(worktree: &Path) -> Option<String> {
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(worktree)
        .args(["symbolic-ref", "--quiet", "--short", "HEAD"])
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    if let Some(parent) = worktree.parent() {
        cmd.env("GIT_CEILING_DIRECTORIES", parent);
    }
    let out = cmd.output().ok()?;
    let branch = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !branch.is_empty()).then_some(branch)
}

/// Verify that the session's worktree belongs to the bound issue (see the module
/// docs). `complete_phase` and `create_pr` call this first.
pub(crate) fn verify_workspace(store: &Store, work: &WorkContext) -> Result<WorkspaceInfo> {
    let bound = work.require_issue()?;
    let issue = crate::issues::issue(store, &bound.id)?;
    let worktree = bound_worktree(work, &issue.identifier)?;
    let named = read_marker(&worktree)?;
    let canonical = crate::paths::canonical_root(&worktree)?;
    if !named.eq_ignore_ascii_case(&issue.identifier) && named != issue.id {
        return Err(invalid(format!(
            "Worktree {} belongs to issue {named}, but this session works on {}. Recovery: \
             stop; ask the orchestrator to restart this session with --worktree-path set to \
             the worktree of {} (its {MARKER_FILE} names {}).",
            canonical.display(),
            issue.identifier,
            issue.identifier,
            issue.identifier
        )));
    }
    let branch = git_branch(&canonical);
    let message = match &branch {
        Some(_) => "Workspace verified. You are in the correct worktree.".to_string(),
        None => "Workspace verified. You are in the correct worktree (branch unknown: git is \
                 missing, the worktree is not a git repository, or HEAD is detached)."
            .to_string(),
    };
    Ok(WorkspaceInfo {
        valid: true,
        path: canonical.display().to_string(),
        issue: issue.identifier,
        branch,
        message,
    })
}

/// Where the phase and PR tools work: the verified worktree, or (without
/// `--worktree-path`, which the spec makes optional) the project's path, unverified.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct WorktreeCheck {
    /// True when `--worktree-path` was given and its `.symphony-worktree` marker names
    /// the bound issue; false when the server has no worktree to verify.
    pub(crate) verified: bool,
    /// The worktree (verified) or the project's path (not verified); null when the
    /// project has no path either.
    pub(crate) path: Option<String>,
    pub(crate) message: String,
}

/// The worktree check of `complete_phase` and `create_pr`: with `--worktree-path`,
/// [`Cairn::verify_workspace`] (an error when the marker names another issue);
/// without it, the bound project's path, reported as not verified.
pub(crate) fn worktree_check(store: &Store, work: &WorkContext) -> Result<WorktreeCheck> {
    if work.worktree_path.is_some() {
        let ws = verify_workspace(store, work)?;
        return Ok(WorktreeCheck {
            verified: true,
            path: Some(ws.path),
            message: ws.message,
        });
    }
    let bound = work.require_issue()?;
    let issue = crate::issues::issue(store, &bound.id)?;
    let path = crate::issues::project(store, &issue.project_id)?.path;
    let message = match &path {
        Some(p) => format!(
            "No worktree was verified: this server was started without --worktree-path, \
             so the project's path ({p}) is used."
        ),
        None => "No worktree was verified: this server was started without \
                 --worktree-path and the project has no path."
            .to_string(),
    };
    Ok(WorktreeCheck {
        verified: false,
        path,
        message,
    })
}
