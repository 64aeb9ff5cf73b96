//! Document identity: which root a vault document's path is relative to, so that the
//! CLI and the MCP tools address the same document for the same file.
//!
//! A document is keyed by `(root_key, path)`:
//!
//! - `root_key` is `project:<project id>` when the file lies under a project's path:
//!   the project named with `cairn reindex --project`, else the project whose path is
//!   the deepest ancestor of the reindexed directory; for the MCP tools, the bound
//!   project. Otherwise it is `dir:<canonical absolute path of the reindexed directory>`.
//! - `path` is the file's path relative to that root, `/`-separated: the normal
//!   components of the caller's path (`./docs/a.md` is `docs/a.md`). Symlinks are never
//!   followed: the walker skips them and the tools refuse a path through one
//!   ([`crate::paths`]).
//!
//! So `cairn reindex ~/proj/docs` stores `docs/a.md` under `project:<id>`, and
//! `vault_update("docs/a.md")` from a server bound to that project (reading the file
//! from `--worktree-path` when given, else from the project's path) updates that same
//! row: a worktree is a checkout of the project, so its files are keyed by the project.
//! A server with a worktree but no project keys files by `dir:<canonical worktree>`.

use std::path::{Component, Path, PathBuf};

use crate::access::context::WorkContext;
use crate::error::{Error, Result};
use crate::paths::canonical_root;

use super::handle::Vault;

/// Prefix of a project root key.
pub(crate) const PROJECT_KEY: &str = "project:";
/// Prefix of a directory root key.
pub(crate) const DIR_KEY: &str = "dir:";

/// The root documents are keyed by, and where their files are read from.
#[derive(Debug, Clone)]
pub(crate) struct DocRoot {
    /// `project:<id>` or `dir:<canonical path>`.
    pub(crate) key: String,
    /// Canonical directory the document paths are relative to, on this machine.
    pub(crate) dir: PathBuf,
    /// The project, when the root is one.
    pub(crate) project: Option<crate::issues::Project>,
}

/// `file` relative to `root` (both canonical) as a `/`-separated UTF-8 string.
pub(crate) fn relative_path(root: &Path, file: &Path) -> Result<String> {
    let rel = file.strip_prefix(root).map_err(|_| {
        Error::Internal(format!(
            "{} is not under {}",
            file.display(),
            root.display()
        ))
    })?;
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_str().ok_or_else(|| {
                Error::invalid(
                    "path",
                    format!("{} is not valid UTF-8; rename the file", rel.display()),
                )
            })?),
            _ => {
                return Err(Error::Internal(format!(
                    "unexpected component in {}",
                    rel.display()
                )));
            }
        }
    }
    Ok(parts.join("/"))
}

impl Vault<'_> {
    /// The root for `cairn reindex DIR [--project P]`, with `dir` canonical.
    pub(crate) fn reindex_root(&self, dir: &Path, project: Option<&str>) -> Result<DocRoot> {
        if let Some(reference) = project {
            let p = crate::issues::project(self.store, reference)?;
            let Some(path) = p.path.clone() else {
                return Err(Error::FailedPrecondition(format!(
                    "project {} has no path; recreate it with --path, or reindex without --project",
                    p.slug
                )));
            };
            let root = canonical_root(Path::new(&path))?;
            if !dir.starts_with(&root) {
                return Err(Error::invalid(
                    "project",
                    format!(
                        "{} is not inside project {}'s path {}; reindex a directory under it, or drop --project",
                        dir.display(),
                        p.slug,
                        root.display()
                    ),
                ));
            }
            return Ok(project_root(p, root));
        }
        let mut best: Option<(crate::issues::Project, PathBuf)> = None;
        for p in crate::issues::projects(self.store)? {
            let Some(root) = p
                .path
                .as_deref()
                .and_then(|s| std::fs::canonicalize(s).ok())
            else {
                continue;
            };
            let deeper = best
                .as_ref()
                .is_none_or(|(_, b)| root.components().count() > b.components().count());
            if dir.starts_with(&root) && deeper {
                best = Some((p, root));
            }
        }
        Ok(match best {
            Some((p, root)) => project_root(p, root),
            None => DocRoot {
                key: format!("{DIR_KEY}{}", dir.display()),
                dir: dir.to_path_buf(),
                project: None,
            },
        })
    }

    /// The root of the vault tools for a server's binding: the bound project (files read
    /// from `--worktree-path` when given, else from the project's path), or, without a
    /// project, the worktree itself.
    pub(crate) fn tool_root(&self, session: &WorkContext) -> Result<DocRoot> {
        match (&session.project_id, &session.worktree_path) {
            (Some(id), worktree) => {
                let p = crate::issues::project(self.store, id)?;
                let dir = match (worktree, &p.path) {
                    (Some(w), _) => w.clone(),
                    (None, Some(path)) => PathBuf::from(path),
                    (None, None) => {
                        return Err(Error::FailedPrecondition(format!(
                            "project {} has no path and this server has no --worktree-path; \
                             start `cairn serve` with --worktree-path <DIR>",
                            p.slug
                        )));
                    }
                };
                let dir = canonical_root(&dir)?;
                Ok(project_root(p, dir))
            }
            (None, Some(w)) => {
                let dir = canonical_root(w)?;
                Ok(DocRoot {
                    key: format!("{DIR_KEY}{}", dir.display()),
                    dir,
                    project: None,
                })
            }
            (None, None) => Err(Error::FailedPrecondition(
                "vault paths are relative to the project root: start `cairn serve` with \
                 --project-id (or --issue-id) and optionally --worktree-path"
                    .to_string(),
            )),
        }
    }
}

fn project_root(p: crate::issues::Project, dir: PathBuf) -> DocRoot {
    DocRoot {
        key: format!("{PROJECT_KEY}{}", p.id),
        dir,
        project: Some(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_slash_separated_and_refuse_outsiders() {
        let root = Path::new("/r/proj");
        assert_eq!(
            relative_path(root, Path::new("/r/proj/docs/a.md")).unwrap(),
            "docs/a.md"
        );
        assert!(relative_path(root, Path::new("/r/projx/a.md")).is_err());
    }
}
