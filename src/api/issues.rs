//! Projects and issues: create, look up, list, move, project settings.

use crate::error::Result;
use crate::issues::settings::SettingsUpdate;
use crate::issues::{Issue, IssueFilter, NewIssue, NewProject, Project};
use crate::work::moves::MovedIssue;

use super::Cairn;

impl Cairn {
    /// Create a project.
    pub fn create_project(&self, new: &NewProject) -> Result<Project> {
        crate::issues::create_project(&self.store, new)
    }

    /// A project by id or slug.
    pub fn project(&self, reference: &str) -> Result<Project> {
        crate::issues::project(&self.store, reference)
    }

    /// Every project, by slug.
    pub(crate) fn projects(&self) -> Result<Vec<Project>> {
        crate::issues::projects(&self.store)
    }

    /// Create an issue.
    pub fn create_issue(&self, new: &NewIssue) -> Result<Issue> {
        crate::issues::create_issue(&self.store, new)
    }

    /// An issue by id or identifier.
    pub fn issue(&self, reference: &str) -> Result<Issue> {
        crate::issues::issue(&self.store, reference)
    }

    /// Issues matching `filter`, most urgent first, then by number.
    pub(crate) fn list_issues(&self, filter: &IssueFilter) -> Result<Vec<Issue>> {
        crate::issues::list_issues(&self.store, filter)
    }

    /// `move_issue`.
    pub fn move_issue(
        &self,
        issue: &str,
        target: &str,
        reason: &str,
        actor: &str,
    ) -> Result<MovedIssue> {
        crate::work::moves::move_issue(&self.store, issue, target, reason, actor)
    }

    /// Change a project's settings (id or slug).
    pub fn configure_project(&self, project: &str, update: &SettingsUpdate) -> Result<Project> {
        crate::issues::settings::configure_project(&self.store, project, update)
    }
}
