//! Work in a bound work: start-up binding, workspace check, phases, memory files, PRs.

use crate::access::context::{BindArgs, WorkContext};
use crate::error::Result;
use crate::work::memory::{MemoryScope, MemoryWritten};
use crate::work::phases::{Phase, PhaseClaim, PhaseCompletion, PhaseVerdict};
use crate::work::prs::{NewPullRequest, PullRequest, Review};
use crate::work::workspace::{WorkspaceInfo, WorktreeCheck};

use super::Cairn;

impl Cairn {
    /// Verify that the work's worktree belongs to the bound issue (see the module
    /// docs).
    pub(crate) fn verify_workspace(&self, work: &WorkContext) -> Result<WorkspaceInfo> {
        crate::work::workspace::verify_workspace(&self.store, work)
    }

    /// Replace one of the work profile's memory files (see the module docs).
    pub(crate) fn update_memory(
        &self,
        work: &WorkContext,
        scope: MemoryScope,
        filename: &str,
        content: &str,
    ) -> Result<MemoryWritten> {
        crate::work::memory::update_memory(work, scope, filename, content)
    }

    /// `complete_phase`.
    pub(crate) fn complete_phase(
        &self,
        work: &WorkContext,
        p: &PhaseCompletion,
    ) -> Result<PhaseClaim> {
        crate::work::phases::complete_phase(&self.store, work, p)
    }

    /// `approve_phase` / `reject_phase`.
    pub(crate) fn judge_phase(
        &self,
        work: &WorkContext,
        phase: Phase,
        artifact_hash: &str,
        approved: bool,
        reason: Option<&str>,
        fix_instructions: Option<&str>,
    ) -> Result<PhaseVerdict> {
        crate::work::phases::judge_phase(
            &self.store,
            work,
            phase,
            artifact_hash,
            approved,
            reason,
            fix_instructions,
        )
    }

    /// Check the work's worktree, then record a PR on its bound issue.
    pub fn create_work_pr(
        &self,
        work: &WorkContext,
        new: &NewPullRequest,
    ) -> Result<(PullRequest, WorktreeCheck)> {
        crate::work::prs::create_work_pr(&self.store, work, new)
    }

    /// Approve or reject the open PR of an issue (id or identifier).
    pub(crate) fn review_pr(
        &self,
        issue: &str,
        review: Review,
        reason: Option<&str>,
        fix_instructions: Option<&str>,
        actor: &str,
    ) -> Result<PullRequest> {
        crate::work::prs::review_pr(&self.store, issue, review, reason, fix_instructions, actor)
    }

    /// PRs, newest first.
    pub(crate) fn pull_requests(&self, project: Option<&str>) -> Result<Vec<PullRequest>> {
        crate::work::prs::pull_requests(&self.store, project)
    }

    /// One PR with its diff.
    pub(crate) fn pull_request(&self, id: &str) -> Result<PullRequest> {
        crate::work::prs::pull_request(&self.store, id)
    }

    /// Check start-up arguments against the database and build the binding.
    pub fn bind(&self, args: &BindArgs) -> Result<WorkContext> {
        crate::access::context::bind(&self.store, args)
    }
}
