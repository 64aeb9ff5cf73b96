//! Agent memory (`update_memory`): Markdown files private to an agent profile, kept on
//! disk under the Symphony root and injected into that profile's future prompts.
//!
//! Layout under `--symphony-dir`:
//! `data/memory/<projectSlug>/<profileType>/<filename>` (scope `project`) or
//! `data/memory/_global/<profileType>/<filename>` (scope `global`). `_global` cannot
//! collide with a project slug (slugs start with a letter or digit).
//!
//! A write replaces the whole file atomically ([`crate::paths::DirHandle::write_atomic`]):
//! a temp file in the same directory, written, fsynced, renamed over the target, then the
//! directory fsynced, so a reader sees the old or the new content, never a mix. The
//! Symphony root is opened once and the memory directory is created and opened beneath
//! that handle with `mkdirat`/`openat` ([`crate::paths`]): a symlink anywhere along
//! `data/memory/<owner>/<profile>` is refused, and the temp file is created and renamed
//! relative to the verified directory handle. A target that is not a regular file
//! (symlink, directory, FIFO, device) is refused and left alone.

use serde::{Deserialize, Serialize};

use crate::access::context::WorkContext;
use crate::error::{Error, Result};

/// Most characters of one memory file.
pub(crate) const CONTENT_MAX: usize = 10_000;
/// Longest file name, in bytes.
pub(crate) const FILENAME_MAX: usize = 255;
/// The file-name pattern of the spec.
pub(crate) const FILENAME_PATTERN: &str = r"^[a-zA-Z0-9_-]+\.md$";

/// Where a memory file applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MemoryScope {
    /// This project only.
    Project,
    /// Every project.
    Global,
}

/// What `update_memory` wrote.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct MemoryWritten {
    pub(crate) scope: MemoryScope,
    pub(crate) filename: String,
    /// The file's absolute path.
    pub(crate) path: String,
    /// The agent profile whose memory this is.
    pub(crate) profile_type: String,
    /// Characters written.
    pub(crate) characters: usize,
    pub(crate) bytes: usize,
    /// True when an existing file was replaced.
    pub(crate) replaced: bool,
}

fn missing_flag(flag: &str, why: &str) -> Error {
    Error::FailedPrecondition(format!(
        "update_memory needs the server flag {flag} ({why}); the orchestrator must start \
         `cairn serve` with it"
    ))
}

fn validate(filename: &str, content: &str) -> Result<()> {
    let pattern = regex::Regex::new(FILENAME_PATTERN)
        .map_err(|e| Error::Internal(format!("memory file-name pattern: {e}")))?;
    if filename.len() > FILENAME_MAX || !pattern.is_match(filename) {
        return Err(Error::invalid(
            "filename",
            format!(
                "must match {FILENAME_PATTERN} and be at most {FILENAME_MAX} bytes \
                 (e.g. codebase-notes.md); got {}",
                crate::paths::shown(filename)
            ),
        ));
    }
    let n = content.chars().count();
    if n > CONTENT_MAX {
        return Err(Error::invalid(
            "content",
            format!("is {n} characters; at most {CONTENT_MAX}. Condense it and write it again"),
        ));
    }
    Ok(())
}

/// Replace one of the session profile's memory files (see the module docs).
pub(crate) fn update_memory(
    work: &WorkContext,
    scope: MemoryScope,
    filename: &str,
    content: &str,
) -> Result<MemoryWritten> {
    validate(filename, content)?;
    let content = &crate::text::prose_field("content", content)?;
    let profile = work
        .agent_type
        .as_deref()
        .ok_or_else(|| missing_flag("--agent-type", "memory is private to a profile type"))?;
    crate::access::scope::check_profile(profile)?;
    let root = work
        .symphony_dir
        .as_deref()
        .ok_or_else(|| missing_flag("--symphony-dir", "memory lives under its data/memory/"))?;
    let owner = match scope {
        MemoryScope::Global => "_global".to_string(),
        MemoryScope::Project => {
            let slug = work.project_slug.as_deref().ok_or_else(|| {
                missing_flag("--project-slug", "project-scope memory is kept per project")
            })?;
            let slug_ok = !slug.is_empty()
                && slug.len() <= crate::issues::limits::SLUG_MAX
                && slug
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !slug.starts_with('-');
            if !slug_ok {
                return Err(Error::FailedPrecondition(format!(
                    "--project-slug {} is not a project slug (a-z, 0-9 and '-')",
                    crate::paths::shown(slug)
                )));
            }
            slug.to_string()
        }
    };
    let relative_dir = format!("data/memory/{owner}/{profile}");
    let unsafe_dir = |e: Error| match e {
        Error::InvalidInput(_) => Error::FailedPrecondition(format!(
            "the memory directory {relative_dir} under {} is unsafe: {}",
            root.display(),
            crate::paths::refusal_text(&e)
        )),
        other => other,
    };
    let root = crate::paths::DirHandle::open_root(root)?;
    let parts = ["data", "memory", owner.as_str(), profile];
    let dir = root
        .create_dirs(&parts, &relative_dir, "memory_dir")
        .map_err(unsafe_dir)?;
    let target = dir.path().join(filename);
    let replaced = dir
        .write_atomic(
            std::ffi::OsStr::new(filename),
            content.as_bytes(),
            "filename",
        )
        .map_err(|e| match e {
            Error::InvalidInput(_) => Error::FailedPrecondition(crate::paths::refusal_text(&e)),
            other => other,
        })?;
    tracing::info!(path = %target.display(), profile, "memory file written");
    Ok(MemoryWritten {
        scope,
        filename: filename.to_string(),
        path: target.display().to_string(),
        profile_type: profile.to_string(),
        characters: content.chars().count(),
        bytes: content.len(),
        replaced,
    })
}
