//! The work trail: findings, comments, status, board views, metrics, runs, verification.

use crate::compose::board::{IssueDetails, IssueStatus};
use crate::error::Result;
use crate::issues::{Issue, NewIssue, Status};
use crate::trail::chain::TrailVerification;
use crate::trail::findings::{Comment, Finding, NewFinding};
use crate::trail::metrics::{Coverage, NewCoverage, NewTestHealth, TestHealth};
use crate::trail::runs::{IngestReport, RunEventPage, RunEventQuery};
use crate::trail::status::StatusChange;
use std::path::Path;

use super::Cairn;

impl Cairn {
    /// Re-compute every hash and link of an issue's trail (id or identifier), and the
    /// stored root of every finalized audit session covering the issue (from its frozen
    /// leaves and from the current records).
    pub fn verify_trail(&self, issue: &str) -> Result<TrailVerification> {
        crate::compose::verify::verify_trail(&self.store, issue)
    }

    /// Record an agent run of an issue (id or identifier) from a stream-JSON log.
    pub fn ingest_run(
        &self,
        issue: &str,
        run_id: Option<&str>,
        log: &Path,
        replace: bool,
    ) -> Result<IngestReport> {
        crate::trail::runs::ingest_run(&self.store, issue, run_id, log, replace)
    }

    /// Filter and page the events of a run or of every run of an issue.
    pub(crate) fn query_run_events(&self, q: &RunEventQuery) -> Result<RunEventPage> {
        crate::trail::runs::query_run_events(&self.store, q)
    }

    /// The full issue with its trail (id or identifier), as a person sees it.
    pub fn issue_details(&self, issue: &str) -> Result<IssueDetails> {
        self.issue_details_as(issue, crate::learnings::Reader::Person)
    }

    /// The full issue with its trail, its learnings as `reader` may see them (an agent
    /// sees no archived learning, nor another issue's held one).
    pub(crate) fn issue_details_as(
        &self,
        issue: &str,
        reader: crate::learnings::Reader<'_>,
    ) -> Result<IssueDetails> {
        crate::compose::board::issue_details(&self.store, issue, reader)
    }

    /// The slim status of an issue (id or identifier).
    pub(crate) fn issue_status(&self, issue: &str) -> Result<IssueStatus> {
        crate::compose::board::issue_status(&self.store, issue)
    }

    /// Create a sub-task of `parent` (id or identifier) in the parent's project and block
    /// the parent until it is done (see [`super::status`]).
    pub fn create_subtask(&self, parent: &str, new: NewIssue, actor: &str) -> Result<Issue> {
        crate::compose::board::create_subtask(&self.store, parent, new, actor)
    }

    /// Record a finding (`add_finding`) on an issue (id or identifier).
    pub fn add_finding(&self, issue: &str, new: &NewFinding, actor: &str) -> Result<Finding> {
        crate::trail::findings::add_finding(&self.store, issue, new, actor)
    }

    /// Post a comment on an issue (id or identifier).
    pub fn add_comment(&self, issue: &str, content: &str, actor: &str) -> Result<Comment> {
        crate::trail::findings::add_comment(&self.store, issue, content, actor)
    }

    /// Every finding of an issue, oldest first, with its derived `processed` flag.
    pub fn findings(&self, issue: &str) -> Result<Vec<Finding>> {
        crate::trail::findings::findings(&self.store, issue)
    }

    /// Mark a finding processed (the orchestrator's flag).
    pub fn mark_finding_processed(&self, finding_id: &str, actor: &str) -> Result<Finding> {
        crate::trail::findings::mark_finding_processed(&self.store, finding_id, actor)
    }

    /// Change an issue's status (id or identifier) by the trail vocabulary's rules.
    pub fn update_issue_status(
        &self,
        issue: &str,
        to: Status,
        reason: Option<&str>,
        actor: &str,
        agent: bool,
    ) -> Result<StatusChange> {
        crate::trail::status::update_issue_status(&self.store, issue, to, reason, actor, agent)
    }

    /// Record coverage of a file and concept in the project of `issue` (id or identifier).
    pub fn record_coverage(&self, issue: &str, new: &NewCoverage, actor: &str) -> Result<Coverage> {
        crate::trail::metrics::record_coverage(&self.store, issue, new, actor)
    }

    /// Record the test health of a run on `issue` (id or identifier).
    pub fn record_test_health(
        &self,
        issue: &str,
        new: &NewTestHealth,
        actor: &str,
    ) -> Result<TestHealth> {
        crate::trail::metrics::record_test_health(&self.store, issue, new, actor)
    }
}
