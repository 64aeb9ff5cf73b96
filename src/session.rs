//! What a `cairn serve` process is bound to at start-up (the spec's `ToolContext`):
//! the issue and project, the worktree, the agent profile, the memory root.
//!
//! Mutations default to the bound issue; an agent may still read other issues.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::issues::Issue;
use crate::service::Cairn;

/// The start-up binding of one server process.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// The bound issue's id and identifier, when `--issue-id` was given.
    pub issue: Option<BoundIssue>,
    /// The bound project id: explicit, or the bound issue's project.
    pub project_id: Option<String>,
    pub worktree_path: Option<PathBuf>,
    pub agent_type: Option<String>,
    pub project_slug: Option<String>,
    pub symphony_dir: Option<PathBuf>,
    /// Who the records of this session are attributed to (`agent-<type>` or `cli`).
    pub actor: String,
}

/// Where the phase and PR tools work: the verified worktree, or (without
/// `--worktree-path`, which the spec makes optional) the project's path, unverified.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct WorktreeCheck {
    /// True when `--worktree-path` was given and its `.symphony-worktree` marker names
    /// the bound issue; false when the server has no worktree to verify.
    pub verified: bool,
    /// The worktree (verified) or the project's path (not verified); null when the
    /// project has no path either.
    pub path: Option<String>,
    pub message: String,
}

/// The issue a server is bound to.
#[derive(Debug, Clone)]
pub struct BoundIssue {
    pub id: String,
    pub identifier: String,
}

/// The start-up arguments, before they are checked against the database.
#[derive(Debug, Clone, Default)]
pub struct SessionArgs {
    pub issue: Option<String>,
    pub project: Option<String>,
    pub worktree_path: Option<PathBuf>,
    pub agent_type: Option<String>,
    pub project_slug: Option<String>,
    pub symphony_dir: Option<PathBuf>,
}

impl Session {
    /// The bound issue, or an error saying which start-up flag would bind one.
    pub fn require_issue(&self) -> Result<&BoundIssue> {
        self.issue.as_ref().ok_or_else(|| {
            Error::NoBoundIssue(
                "this tool acts on the issue bound at start-up; restart `cairn serve` with \
                 --issue-id <ID>, or name the issue where the tool accepts issue_id"
                    .to_string(),
            )
        })
    }

    /// The bound project id, or an error saying how to bind one.
    pub fn require_project(&self) -> Result<&str> {
        self.project_id.as_deref().ok_or_else(|| {
            Error::FailedPrecondition(
                "no project is bound to this server; start `cairn serve` with --issue-id or \
                 --project-id"
                    .to_string(),
            )
        })
    }
}

impl Cairn {
    /// The worktree check of `complete_phase` and `create_pr`: with `--worktree-path`,
    /// [`Cairn::verify_workspace`] (an error when the marker names another issue);
    /// without it, the bound project's path, reported as not verified.
    pub fn worktree_check(&self, session: &Session) -> Result<WorktreeCheck> {
        if session.worktree_path.is_some() {
            let ws = self.verify_workspace(session)?;
            return Ok(WorktreeCheck {
                verified: true,
                path: Some(ws.path),
                message: ws.message,
            });
        }
        let bound = session.require_issue()?;
        let issue = self.issue(&bound.id)?;
        let path = self.project(&issue.project_id)?.path;
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

    /// Check start-up arguments against the database and build the binding. An issue or
    /// project that does not exist is an error (the server then refuses to start).
    pub fn bind(&self, args: &SessionArgs) -> Result<Session> {
        if let Some(t) = &args.agent_type {
            crate::scope::check_profile(t)?;
        }
        let issue: Option<Issue> = match &args.issue {
            Some(i) => Some(self.issue(i)?),
            None => None,
        };
        let project_id = match (&args.project, &issue) {
            (Some(p), _) => Some(self.project(p)?.id),
            (None, Some(i)) => Some(i.project_id.clone()),
            (None, None) => match &args.project_slug {
                Some(slug) => self.project(slug).ok().map(|p| p.id),
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
        Ok(Session {
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
}
