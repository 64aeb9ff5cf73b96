//! The domain's [`WorkContext`]: what a piece of work is bound to (the spec's
//! `ToolContext`): the issue and project, the work root (worktree), the agent profile,
//! the actor records are attributed to, the memory root. `cairn serve` builds one at
//! start-up with [`bind`]; the domain takes it wherever an operation acts on "the bound
//! issue", so no domain signature names a transport's session.
//!
//! Mutations default to the bound issue; an agent may still read other issues.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::issues::Issue;
use crate::store::Store;

/// What a piece of work is bound to: for `cairn serve`, the start-up binding of one
/// server process.
#[derive(Debug, Clone, Default)]
pub struct WorkContext {
    /// The bound issue's id and identifier, when `--issue-id` was given.
    pub issue: Option<BoundIssue>,
    /// The bound project id: explicit, or the bound issue's project.
    pub project_id: Option<String>,
    /// The work root (`--worktree-path`), verified by its `.symphony-worktree` marker.
    pub worktree_path: Option<PathBuf>,
    /// The agent profile (`--agent-type`).
    pub agent_type: Option<String>,
    pub project_slug: Option<String>,
    /// The memory root (`--symphony-dir`).
    pub symphony_dir: Option<PathBuf>,
    /// Who the records of this session are attributed to (`agent-<type>` or `cli`).
    pub actor: String,
}

/// The issue a server is bound to.
#[derive(Debug, Clone)]
pub struct BoundIssue {
    pub(crate) id: String,
    pub(crate) identifier: String,
}

/// The start-up arguments, before they are checked against the database.
#[derive(Debug, Clone, Default)]
pub struct BindArgs {
    pub issue: Option<String>,
    pub project: Option<String>,
    pub worktree_path: Option<PathBuf>,
    pub agent_type: Option<String>,
    pub project_slug: Option<String>,
    pub symphony_dir: Option<PathBuf>,
}

impl WorkContext {
    /// The bound issue, or an error saying which start-up flag would bind one.
    pub(crate) fn require_issue(&self) -> Result<&BoundIssue> {
        self.issue.as_ref().ok_or_else(|| {
            Error::NoBoundIssue(
                "this tool acts on the issue bound at start-up; restart `cairn serve` with \
                 --issue-id <ID>, or name the issue where the tool accepts issue_id"
                    .to_string(),
            )
        })
    }

    /// The bound project id, or an error saying how to bind one.
    pub(crate) fn require_project(&self) -> Result<&str> {
        self.project_id.as_deref().ok_or_else(|| {
            Error::FailedPrecondition(
                "no project is bound to this server; start `cairn serve` with --issue-id or \
                 --project-id"
                    .to_string(),
            )
        })
    }
}

/// Check start-up arguments against the database and build the binding. An issue or
/// project that does not exist is an error (the server then refuses to start).
pub(crate) fn bind(store: &Store, args: &BindArgs) -> Result<WorkContext> {
    if let Some(t) = &args.agent_type {
        crate::access::scope::check_profile(t)?;
    }
    let issue: Option<Issue> = match &args.issue {
        Some(i) => Some(crate::issues::issue(store, i)?),
        None => None,
    };
    let project_id = match (&args.project, &issue) {
        (Some(p), _) => Some(crate::issues::project(store, p)?.id),
        (None, Some(i)) => Some(i.project_id.clone()),
        (None, None) => match &args.project_slug {
            Some(slug) => crate::issues::project(store, slug).ok().map(|p| p.id),
            None => None,
        },
    };
    if let (Some(i), Some(p)) = (&issue, &project_id)
        && &i.project_id != p
    {
        return Err(Error::invalid(
            "project_id",
            format!("issue {} belongs to another project than {p}", i.identifier),
        ));
    }
    Ok(WorkContext {
        issue: issue.map(|i| BoundIssue {
            id: i.id,
            identifier: i.identifier,
        }),
        project_id,
        worktree_path: args.worktree_path.clone(),
        agent_type: args.agent_type.clone(),
        project_slug: args.project_slug.clone(),
        symphony_dir: args.symphony_dir.clone(),
        actor: args
            .agent_type
            .as_ref()
            .map(|t| format!("agent-{t}"))
            .unwrap_or_else(|| "agent".to_string()),
    })
}
