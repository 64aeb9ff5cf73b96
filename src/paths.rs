//! Path safety: the one way to turn a caller-given relative path into a filesystem path
//! inside a root directory.
//!
//! Every tool that takes a path or a file name (`complete_phase`, `move_issue`,
//! `update_memory`, `verify_workspace`, the vault tools) goes through
//! [`resolve_in_root`]. It refuses, with a field error that says how to fix the call:
//!
//! - an empty path, a NUL byte, a path longer than [`PATH_MAX`] bytes or a component
//!   longer than [`COMPONENT_MAX`] bytes;
//! - an absolute path (a root or prefix component) and any `..` component, even one
//!   that would stay inside the root (`a/../b` is refused, not normalised);
//! - a path whose existing part leads, through a symlink anywhere along it, outside the
//!   root, or through a symlink whose target does not exist.
//!
//! The check is done on canonical paths component by component with
//! [`Path::starts_with`] (never string prefixes: `/rootx` is not inside `/root`). A leaf
//! that does not exist yet (a file about to be written) is resolved through its existing
//! parent and appended literally; since `..` and symlinks are handled above, the result
//! stays inside the root.
//!
//! What this cannot prevent: a symlink created inside the root *after* the check and
//! before the caller opens the path. Callers that create directories re-resolve after
//! creating them ([`ensure_dir_in_root`]).

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// Longest accepted path, in bytes (Linux `PATH_MAX`).
pub(crate) const PATH_MAX: usize = 4096;
/// Longest accepted path component, in bytes (Linux `NAME_MAX`).
pub(crate) const COMPONENT_MAX: usize = 255;

/// A caller's text, shortened for an error message.
pub(crate) fn shown(text: &str) -> String {
    let mut s: String = text.chars().take(120).collect();
    if s.len() < text.len() {
        s.push('…');
    }
    format!("{s:?}")
}

/// Check the shape of a caller-given relative path without touching the filesystem and
/// return its normal components (`.` components dropped). Errors name `field`.
pub(crate) fn relative_components<'a>(relative: &'a str, field: &str) -> Result<Vec<&'a str>> {
    let fail = |why: String| Err(Error::invalid(field, why));
    if relative.is_empty() {
        return fail("must not be empty; give a path relative to the root".into());
    }
    if relative.contains('\0') {
        return fail("must not contain a NUL byte".into());
    }
    if relative.len() > PATH_MAX {
        return fail(format!(
            "is {} bytes long; at most {PATH_MAX} bytes are accepted",
            relative.len()
        ));
    }
    let mut parts = Vec::new();
    for c in Path::new(relative).components() {
        match c {
            Component::Normal(part) => {
                let part = part.to_str().unwrap_or_default();
                if part.len() > COMPONENT_MAX {
                    return fail(format!(
                        "has a component of {} bytes; at most {COMPONENT_MAX} bytes per name",
                        part.len()
                    ));
                }
                parts.push(part);
            }
            Component::CurDir => {}
            Component::ParentDir => {
                return fail(format!(
                    "{} contains a `..` component; give a path inside the root without `..`",
                    shown(relative)
                ));
            }
            Component::RootDir | Component::Prefix(_) => {
                return fail(format!(
                    "{} is absolute; give a path relative to the root (e.g. docs/notes.md)",
                    shown(relative)
                ));
            }
        }
    }
    if parts.is_empty() {
        return fail(format!("{} names the root itself", shown(relative)));
    }
    Ok(parts)
}

/// The canonical form of a root directory that must exist.
pub(crate) fn canonical_root(root: &Path) -> Result<PathBuf> {
    let canon = std::fs::canonicalize(root).map_err(|e| {
        Error::FailedPrecondition(format!(
            "the directory {} cannot be used: {e}",
            root.display()
        ))
    })?;
    if !canon.is_dir() {
        return Err(Error::FailedPrecondition(format!(
            "{} is not a directory",
            root.display()
        )));
    }
    Ok(canon)
}

/// Resolve the caller-given `relative` path inside `root` (which must exist), following
/// symlinks only while they stay inside the root. Returns an absolute path whose existing
/// part is canonical. Errors name `field`; see the module docs for what is refused.
pub(crate) fn resolve_in_root(root: &Path, relative: &str, field: &str) -> Result<PathBuf> {
    let parts = relative_components(relative, field)?;
    let root = canonical_root(root)?;
    resolve_parts(&root, &parts, relative, field)
}

fn resolve_parts(root: &Path, parts: &[&str], relative: &str, field: &str) -> Result<PathBuf> {
    let mut current = root.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        let candidate = current.join(OsStr::new(part));
        match std::fs::symlink_metadata(&candidate) {
            Ok(_) => {
                let canon = std::fs::canonicalize(&candidate).map_err(|_| {
                    Error::invalid(
                        field,
                        format!(
                            "{}: {} is a symlink whose target does not exist",
                            shown(relative),
                            parts[..=i].join("/")
                        ),
                    )
                })?;
                if !canon.starts_with(root) {
                    return Err(Error::invalid(
                        field,
                        format!(
                            "{}: {} is a symlink that leads outside {}; use a path inside it",
                            shown(relative),
                            parts[..=i].join("/"),
                            root.display()
                        ),
                    ));
                }
                current = canon;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                current = candidate;
                current.extend(parts[i + 1..].iter().map(OsStr::new));
                return Ok(current);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
                return Err(Error::invalid(
                    field,
                    format!(
                        "{}: {} is a file, not a directory",
                        shown(relative),
                        parts[..i].join("/")
                    ),
                ));
            }
            Err(e) => return Err(Error::io(candidate, e)),
        }
    }
    Ok(current)
}

/// Resolve `relative` inside `root` as a directory, creating what is missing, then
/// resolve it again so that a symlink swapped in meanwhile is still caught.
pub(crate) fn ensure_dir_in_root(root: &Path, relative: &str, field: &str) -> Result<PathBuf> {
    let dir = resolve_in_root(root, relative, field)?;
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let again = resolve_in_root(root, relative, field)?;
    if !again.is_dir() {
        return Err(Error::invalid(
            field,
            format!("{} is not a directory", shown(relative)),
        ));
    }
    Ok(again)
}

/// Whether the components of a relative path begin with `prefix` (`["docs", "tickets"]`).
pub(crate) fn starts_with_parts(parts: &[&str], prefix: &[&str]) -> bool {
    parts.len() >= prefix.len() && parts.iter().zip(prefix).all(|(a, b)| a == b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join("docs/tickets")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("docs/a.md"), "a").unwrap();
        std::fs::write(outside.join("secret.md"), "s").unwrap();
        (dir, root, outside)
    }

    fn err(root: &Path, rel: &str) -> String {
        let e = resolve_in_root(root, rel, "path").unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_INPUT", "{e}");
        e.to_string()
    }

    #[test]
    fn plain_paths_resolve_inside_the_root() {
        let (_d, root, _) = setup();
        let canon = std::fs::canonicalize(&root).unwrap();
        assert_eq!(
            resolve_in_root(&root, "docs/a.md", "path").unwrap(),
            canon.join("docs/a.md")
        );
        assert_eq!(
            resolve_in_root(&root, "./docs/new/b.md", "path").unwrap(),
            canon.join("docs/new/b.md")
        );
    }

    #[test]
    fn parent_components_are_refused_even_when_they_stay_inside() {
        let (_d, root, _) = setup();
        assert!(err(&root, "../outside/secret.md").contains(".."));
        assert!(err(&root, "docs/../docs/a.md").contains(".."));
    }

    #[test]
    fn absolute_paths_are_refused() {
        let (_d, root, _) = setup();
        let abs = root.join("docs/a.md");
        assert!(err(&root, abs.to_str().unwrap()).contains("absolute"));
        assert!(err(&root, "/etc/passwd").contains("absolute"));
    }

    #[test]
    fn nul_bytes_and_empty_paths_are_refused() {
        let (_d, root, _) = setup();
        assert!(err(&root, "docs/a\0.md").contains("NUL"));
        assert!(err(&root, "").contains("empty"));
        assert!(err(&root, "./.").contains("root itself"));
    }

    #[test]
    fn over_long_names_and_paths_are_refused() {
        let (_d, root, _) = setup();
        let long_name = format!("docs/{}.md", "x".repeat(256));
        assert!(err(&root, &long_name).contains("at most 255"));
        let long_path = "d/".repeat(2100);
        assert!(err(&root, &long_path).contains("at most 4096"));
        let ok_name = format!("docs/{}.md", "x".repeat(252));
        assert!(resolve_in_root(&root, &ok_name, "path").is_ok());
    }

    #[test]
    fn symlinks_leaving_the_root_are_refused_anywhere_along_the_path() {
        let (_d, root, outside) = setup();
        symlink(&outside, root.join("docs/escape")).unwrap();
        symlink(outside.join("secret.md"), root.join("docs/leaf.md")).unwrap();
        assert!(err(&root, "docs/escape/secret.md").contains("outside"));
        assert!(err(&root, "docs/escape/new.md").contains("outside"));
        assert!(err(&root, "docs/leaf.md").contains("outside"));
        // A root named like a prefix of the target is not "inside" by string prefix.
        let sibling = root.parent().unwrap().join("rootx");
        std::fs::create_dir_all(&sibling).unwrap();
        symlink(&sibling, root.join("docs/sib")).unwrap();
        assert!(err(&root, "docs/sib").contains("outside"));
    }

    #[test]
    fn dangling_symlinks_are_refused_and_inner_symlinks_followed() {
        let (_d, root, _) = setup();
        symlink(root.join("nowhere"), root.join("docs/dangling")).unwrap();
        assert!(err(&root, "docs/dangling").contains("does not exist"));
        symlink(root.join("docs"), root.join("alias")).unwrap();
        let canon = std::fs::canonicalize(&root).unwrap();
        assert_eq!(
            resolve_in_root(&root, "alias/a.md", "path").unwrap(),
            canon.join("docs/a.md")
        );
    }

    #[test]
    fn a_file_in_the_middle_is_refused_and_a_missing_root_is_a_precondition() {
        let (_d, root, _) = setup();
        assert!(err(&root, "docs/a.md/x").contains("not a directory"));
        let e = resolve_in_root(&root.join("missing"), "a", "path").unwrap_err();
        assert_eq!(e.code(), "ERR_FAILED_PRECONDITION");
    }

    #[test]
    fn ensure_dir_creates_inside_and_prefix_match_uses_components() {
        let (_d, root, _) = setup();
        let d = ensure_dir_in_root(&root, "data/memory/x", "dir").unwrap();
        assert!(d.is_dir());
        assert!(starts_with_parts(
            &["docs", "tickets", "a"],
            &["docs", "tickets"]
        ));
        assert!(!starts_with_parts(
            &["docs", "ticketsx"],
            &["docs", "tickets"]
        ));
        assert!(!starts_with_parts(&["docs"], &["docs", "tickets"]));
    }
}
