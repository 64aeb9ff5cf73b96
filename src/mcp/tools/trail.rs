//! The work-trail tools: issues, findings, comments, sub-tasks, PRs, project settings,
//! coverage, test health and run events. Thin adapters over [`crate::trail`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::access::scope::Profile::{self, *};
use crate::compose::board::{IssueDetails, IssueStatus};
use crate::error::Result;
use crate::issues::limits as issue_limits;
use crate::issues::settings::limits as settings_limits;
use crate::issues::settings::{Gate, RiskThresholds, SettingsUpdate};
use crate::issues::{Issue, IssueFilter, Limit, NewIssue, Project, Status};
use crate::mcp::tool::{Effect, ToolCtx, ToolDef, tool};
use crate::text::{Cleaned, cleaned};
use crate::trail::chain::FindingCategory;
use crate::trail::findings::limits as finding_limits;
use crate::trail::metrics::limits as metric_limits;
use crate::trail::metrics::{Coverage, NewCoverage, NewTestHealth, TestHealth};
use crate::trail::runs::{EventSubtype, EventType, RunEventPage, RunEventQuery};
use crate::trail::status::StatusChange;
use crate::trail::{Comment, Finding, NewFinding};
use crate::work::prs::limits as pr_limits;
use crate::work::prs::{GateResult, NewPullRequest, PullRequest, Review};
use crate::work::workspace::WorktreeCheck;

/// An issue reference: identifier (`PFX-12`) or id.
type IssueRef = String;

/// The issue a read names, or the bound issue.
fn issue_or_bound(cx: &ToolCtx<'_>, issue_id: Option<IssueRef>) -> Result<String> {
    match issue_id {
        Some(i) => Ok(i),
        None => Ok(cx.work.require_issue()?.id.clone()),
    }
}

fn bound(cx: &ToolCtx<'_>) -> Result<String> {
    Ok(cx.work.require_issue()?.id.clone())
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct IssueParams {
    /// Issue identifier or id (defaults to the current issue).
    #[schemars(length(min = 1, max = issue_limits::REF_MAX))]
    pub(crate) issue_id: Option<IssueRef>,
}

fn get_issue(cx: &ToolCtx<'_>, p: IssueParams) -> Result<IssueDetails> {
    cx.cairn.issue_details_as(
        &issue_or_bound(cx, p.issue_id)?,
        crate::learnings::Reader::agent(cx.work),
    )
}

fn get_issue_status(cx: &ToolCtx<'_>, p: IssueParams) -> Result<IssueStatus> {
    cx.cairn.issue_status(&issue_or_bound(cx, p.issue_id)?)
}

/// Statuses an agent may set.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AgentStatus {
    Review,
    Todo,
    Blocked,
}

impl From<AgentStatus> for Status {
    fn from(s: AgentStatus) -> Status {
        match s {
            AgentStatus::Review => Status::Review,
            AgentStatus::Todo => Status::Todo,
            AgentStatus::Blocked => Status::Blocked,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateStatusParams {
    /// review (done), todo (give up) or blocked (need human input); from in_progress.
    pub(crate) status: AgentStatus,
    /// Reason for the change.
    #[schemars(length(max = finding_limits::REASON_MAX))]
    pub(crate) reason: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct StatusUpdated {
    /// The issue's identifier.
    pub(crate) issue: String,
    #[serde(flatten)]
    pub(crate) change: StatusChange,
}

fn update_issue_status(cx: &ToolCtx<'_>, p: UpdateStatusParams) -> Result<Cleaned<StatusUpdated>> {
    cleaned(|| {
        let issue = cx.work.require_issue()?;
        let change = cx.cairn.update_issue_status(
            &issue.id,
            p.status.into(),
            p.reason.as_deref(),
            &cx.work.actor,
            true,
        )?;
        Ok(StatusUpdated {
            issue: issue.identifier.clone(),
            change,
        })
    })
}

/// The categories `add_finding` records.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AgentFindingCategory {
    TestResult,
    CodePattern,
    Architecture,
    Bug,
    Gap,
}

impl From<AgentFindingCategory> for FindingCategory {
    fn from(c: AgentFindingCategory) -> FindingCategory {
        match c {
            AgentFindingCategory::TestResult => FindingCategory::TestResult,
            AgentFindingCategory::CodePattern => FindingCategory::CodePattern,
            AgentFindingCategory::Architecture => FindingCategory::Architecture,
            AgentFindingCategory::Bug => FindingCategory::Bug,
            AgentFindingCategory::Gap => FindingCategory::Gap,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddFindingParams {
    pub(crate) category: AgentFindingCategory,
    /// Short scannable summary.
    #[schemars(length(min = 1, max = finding_limits::SUMMARY_MAX))]
    pub(crate) summary: String,
    /// Full details.
    #[schemars(length(max = finding_limits::DETAILS_MAX))]
    pub(crate) details: Option<String>,
    /// Related file paths.
    #[schemars(length(max = finding_limits::FILES_MAX), inner(length(min = 1, max = finding_limits::FILE_PATH_MAX)))]
    pub(crate) files: Option<Vec<String>>,
}

fn add_finding(cx: &ToolCtx<'_>, p: AddFindingParams) -> Result<Cleaned<Finding>> {
    cleaned(|| {
        cx.cairn.add_finding(
            &bound(cx)?,
            &NewFinding {
                category: p.category.into(),
                summary: p.summary,
                details: p.details,
                files: p.files.unwrap_or_default(),
            },
            &cx.work.actor,
        )
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddCommentParams {
    /// Comment text.
    #[schemars(length(min = 1, max = finding_limits::COMMENT_MAX))]
    pub(crate) content: String,
}

fn add_comment(cx: &ToolCtx<'_>, p: AddCommentParams) -> Result<Cleaned<Comment>> {
    cleaned(|| {
        cx.cairn
            .add_comment(&bound(cx)?, &p.content, &cx.work.actor)
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateIssueParams {
    /// Issue title.
    #[schemars(length(min = 1, max = issue_limits::TITLE_MAX))]
    pub(crate) title: String,
    /// Issue description.
    #[schemars(length(max = issue_limits::DESCRIPTION_MAX))]
    pub(crate) description: Option<String>,
    /// 1=urgent, 2=high, 3=medium (default), 4=low.
    #[schemars(range(min = 1, max = issue_limits::PRIORITY_MAX))]
    pub(crate) priority: Option<u8>,
    /// Labels.
    #[schemars(length(max = issue_limits::LABELS_MAX), inner(length(min = 1, max = issue_limits::LABEL_MAX)))]
    pub(crate) labels: Option<Vec<String>>,
    /// Identifiers of issues this one depends on.
    #[schemars(length(max = issue_limits::DEPENDS_ON_MAX), inner(length(min = 1, max = issue_limits::REF_MAX)))]
    pub(crate) depends_on: Option<Vec<String>>,
}

fn create_issue(cx: &ToolCtx<'_>, p: CreateIssueParams) -> Result<Cleaned<Issue>> {
    cleaned(|| {
        cx.cairn.create_issue(&NewIssue {
            project: cx.work.require_project()?.to_string(),
            title: p.title,
            description: p.description,
            priority: p.priority,
            labels: p.labels.unwrap_or_default(),
            depends_on: p.depends_on.unwrap_or_default(),
            created_by: Some(cx.work.actor.clone()),
            ..Default::default()
        })
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateSubtaskParams {
    /// Sub-task title.
    #[schemars(length(min = 1, max = issue_limits::TITLE_MAX))]
    pub(crate) title: String,
    /// Description.
    #[schemars(length(max = issue_limits::DESCRIPTION_MAX))]
    pub(crate) description: Option<String>,
    /// 1-4 (default: 3).
    #[schemars(range(min = 1, max = issue_limits::PRIORITY_MAX))]
    pub(crate) priority: Option<u8>,
    /// Labels.
    #[schemars(length(max = issue_limits::LABELS_MAX), inner(length(min = 1, max = issue_limits::LABEL_MAX)))]
    pub(crate) labels: Option<Vec<String>>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SubtaskCreated {
    pub(crate) subtask: Issue,
    /// The parent's identifier.
    pub(crate) parent: String,
    /// The parent's status now (blocked until its sub-tasks are done).
    pub(crate) parent_status: Status,
}

fn create_subtask(cx: &ToolCtx<'_>, p: CreateSubtaskParams) -> Result<Cleaned<SubtaskCreated>> {
    cleaned(|| {
        let parent = cx.work.require_issue()?;
        let subtask = cx.cairn.create_subtask(
            &parent.id,
            NewIssue {
                title: p.title,
                description: p.description,
                priority: p.priority,
                labels: p.labels.unwrap_or_default(),
                ..Default::default()
            },
            &cx.work.actor,
        )?;
        Ok(SubtaskCreated {
            subtask,
            parent: parent.identifier.clone(),
            parent_status: cx.cairn.issue(&parent.id)?.status,
        })
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListIssuesParams {
    /// Filter by status.
    pub(crate) status: Option<Status>,
    /// Filter by label.
    #[schemars(length(min = 1, max = issue_limits::LABEL_MAX))]
    pub(crate) labels: Option<String>,
    /// Max results (default 50, max 100).
    #[schemars(range(min = 1, max = issue_limits::LIST_LIMIT_MAX))]
    pub(crate) limit: Option<u32>,
}

/// An issue in one line.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct IssueBrief {
    pub(crate) identifier: String,
    pub(crate) title: String,
    pub(crate) status: Status,
    pub(crate) priority: u8,
    pub(crate) labels: Vec<String>,
    pub(crate) parent: Option<String>,
    pub(crate) depends_on: Vec<String>,
    pub(crate) updated_at: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct IssueList {
    pub(crate) issues: Vec<IssueBrief>,
    pub(crate) count: usize,
}

fn list_issues(cx: &ToolCtx<'_>, p: ListIssuesParams) -> Result<IssueList> {
    let issues: Vec<IssueBrief> = cx
        .cairn
        .list_issues(&IssueFilter {
            project: Some(cx.work.require_project()?.to_string()),
            statuses: p.status.into_iter().collect(),
            label: p.labels,
            limit: Limit::or_default(p.limit.map(|l| l as usize)),
        })?
        .into_iter()
        .map(|i| IssueBrief {
            identifier: i.identifier,
            title: i.title,
            status: i.status,
            priority: i.priority,
            labels: i.labels,
            parent: i.parent,
            depends_on: i.depends_on,
            updated_at: i.updated_at,
        })
        .collect();
    Ok(IssueList {
        count: issues.len(),
        issues,
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreatePrParams {
    /// Full git diff output.
    #[schemars(length(min = 1, max = pr_limits::DIFF_MAX))]
    pub(crate) diff: String,
    /// Source branch name.
    #[schemars(length(min = 1, max = pr_limits::BRANCH_MAX))]
    pub(crate) branch_name: String,
    /// Target branch name.
    #[schemars(length(min = 1, max = pr_limits::BRANCH_MAX))]
    pub(crate) base_branch: String,
    /// Quality gate results.
    #[schemars(length(max = pr_limits::GATES_MAX))]
    pub(crate) gate_results: Option<Vec<GateResult>>,
}

fn without_diff(mut pr: PullRequest) -> PullRequest {
    pr.diff = None;
    pr
}

/// What `create_pr` returns: the PR, and which worktree (if any) was verified.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct PrCreated {
    #[serde(flatten)]
    pub(crate) pr: PullRequest,
    pub(crate) worktree: WorktreeCheck,
}

fn create_pr(cx: &ToolCtx<'_>, p: CreatePrParams) -> Result<Cleaned<PrCreated>> {
    cleaned(|| {
        let (pr, worktree) = cx.cairn.create_work_pr(
            cx.work,
            &NewPullRequest {
                diff: p.diff,
                branch_name: p.branch_name,
                base_branch: p.base_branch,
                gate_results: p.gate_results.unwrap_or_default(),
            },
        )?;
        Ok(PrCreated {
            pr: without_diff(pr),
            worktree,
        })
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovePrParams {
    /// Approval reason.
    #[schemars(length(max = finding_limits::REASON_MAX))]
    pub(crate) reason: Option<String>,
}

fn approve_pr(cx: &ToolCtx<'_>, p: ApprovePrParams) -> Result<Cleaned<PullRequest>> {
    cleaned(|| {
        cx.cairn
            .review_pr(
                &bound(cx)?,
                Review::Approve,
                p.reason.as_deref(),
                None,
                &cx.work.actor,
            )
            .map(without_diff)
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RejectPrParams {
    /// Rejection reason.
    #[schemars(length(max = finding_limits::REASON_MAX))]
    pub(crate) reason: Option<String>,
    /// What the worker should fix.
    #[schemars(length(max = pr_limits::FIX_INSTRUCTIONS_MAX))]
    pub(crate) fix_instructions: Option<String>,
}

fn reject_pr(cx: &ToolCtx<'_>, p: RejectPrParams) -> Result<Cleaned<PullRequest>> {
    cleaned(|| {
        cx.cairn
            .review_pr(
                &bound(cx)?,
                Review::Reject,
                p.reason.as_deref(),
                p.fix_instructions.as_deref(),
                &cx.work.actor,
            )
            .map(without_diff)
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct VaultSection {
    /// Knowledge Vault collection names.
    #[schemars(length(max = settings_limits::COLLECTIONS_MAX), inner(length(min = 1, max = settings_limits::COLLECTION_MAX)))]
    pub(crate) collections: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfigureProjectParams {
    /// Quality gate commands.
    #[schemars(length(max = settings_limits::GATES_MAX))]
    pub(crate) gates: Option<Vec<Gate>>,
    /// Glob patterns for sensitive files.
    #[schemars(length(max = settings_limits::GLOBS_MAX), inner(length(min = 1, max = settings_limits::GLOB_MAX)))]
    pub(crate) sensitive_paths: Option<Vec<String>>,
    /// Risk scoring thresholds.
    pub(crate) risk_thresholds: Option<RiskThresholds>,
    /// Custom instructions for workers.
    #[schemars(length(max = settings_limits::INSTRUCTIONS_MAX))]
    pub(crate) worker_instructions: Option<String>,
    /// Custom instructions for judges.
    #[schemars(length(max = settings_limits::INSTRUCTIONS_MAX))]
    pub(crate) judge_instructions: Option<String>,
    /// Knowledge Vault settings.
    pub(crate) vault: Option<VaultSection>,
    /// The phase pipeline, in order (default research, architecture, grooming, ready).
    #[schemars(length(min = 1, max = settings_limits::PHASES_MAX), inner(length(min = 1, max = settings_limits::PHASE_MAX)))]
    pub(crate) phases: Option<Vec<String>>,
}

fn configure_project(cx: &ToolCtx<'_>, p: ConfigureProjectParams) -> Result<Project> {
    cx.cairn.configure_project(
        cx.work.require_project()?,
        &SettingsUpdate {
            gates: p.gates,
            sensitive_paths: p.sensitive_paths,
            risk_thresholds: p.risk_thresholds,
            worker_instructions: p.worker_instructions,
            judge_instructions: p.judge_instructions,
            vault_collections: p.vault.map(|v| v.collections),
            phases: p.phases,
            // A person's setting (`cairn project configure --stale-after-days`).
            stale_after_days: None,
        },
    )
}

/// Coverage status.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CoverageStatus {
    Covered,
    HasIssues,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecordCoverageParams {
    /// Relative file path examined.
    #[schemars(length(min = 1, max = metric_limits::FILE_PATH_MAX))]
    pub(crate) file_path: String,
    /// Research concept, free text (e.g. test_coverage, error_handling, type safety).
    #[schemars(length(min = 1, max = metric_limits::CONCEPT_MAX))]
    pub(crate) concept: String,
    /// covered = no issues found, has_issues = a ticket was created.
    pub(crate) status: CoverageStatus,
    /// The ticket created, if status is has_issues (optional; must name an issue).
    #[schemars(length(min = 1, max = issue_limits::REF_MAX))]
    pub(crate) ticket_id: Option<String>,
    /// Brief observation.
    #[schemars(length(max = metric_limits::NOTES_MAX))]
    pub(crate) notes: Option<String>,
}

fn record_coverage(cx: &ToolCtx<'_>, p: RecordCoverageParams) -> Result<Coverage> {
    let status = match p.status {
        CoverageStatus::Covered => "covered",
        CoverageStatus::HasIssues => "has_issues",
    };
    cx.cairn.record_coverage(
        &bound(cx)?,
        &NewCoverage {
            file_path: p.file_path,
            concept: p.concept,
            status: status.into(),
            ticket_id: p.ticket_id,
            notes: p.notes,
        },
        &cx.work.actor,
    )
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestHealthParams {
    /// Total test cases after this run.
    #[schemars(range(max = metric_limits::TEST_COUNT_MAX))]
    pub(crate) test_count: u64,
    /// Test files modified in this run.
    #[schemars(range(max = metric_limits::TEST_FILES_CHANGED_MAX))]
    pub(crate) test_files_changed: Option<u64>,
    /// New test cases added.
    #[schemars(range(max = metric_limits::TEST_COUNT_MAX))]
    pub(crate) tests_added: Option<u64>,
    /// Test cases removed or consolidated.
    #[schemars(range(max = metric_limits::TEST_COUNT_MAX))]
    pub(crate) tests_removed: Option<u64>,
    /// Suite duration in milliseconds.
    #[schemars(range(max = metric_limits::EXECUTION_TIME_MS_MAX))]
    pub(crate) execution_time_ms: Option<u64>,
}

fn record_test_health(cx: &ToolCtx<'_>, p: TestHealthParams) -> Result<TestHealth> {
    cx.cairn.record_test_health(
        &bound(cx)?,
        &NewTestHealth {
            test_count: p.test_count,
            test_files_changed: p.test_files_changed,
            tests_added: p.tests_added,
            tests_removed: p.tests_removed,
            execution_time_ms: p.execution_time_ms,
        },
        &cx.work.actor,
    )
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueryRunEventsParams {
    /// Events across all runs of this issue.
    #[schemars(length(min = 1, max = issue_limits::REF_MAX))]
    pub(crate) issue_id: Option<String>,
    /// Events of one run.
    #[schemars(length(min = 1, max = crate::trail::runs::RUN_ID_MAX))]
    pub(crate) run_id: Option<String>,
    pub(crate) event_type: Option<EventType>,
    pub(crate) event_subtype: Option<EventSubtype>,
    /// Max results (default 100, max 500).
    #[schemars(range(min = 1, max = crate::trail::runs::QUERY_LIMIT_MAX))]
    pub(crate) limit: Option<u32>,
    /// Pagination offset.
    #[schemars(range(max = crate::trail::runs::QUERY_OFFSET_MAX))]
    pub(crate) offset: Option<u64>,
}

fn query_run_events(cx: &ToolCtx<'_>, p: QueryRunEventsParams) -> Result<RunEventPage> {
    cx.cairn.query_run_events(&RunEventQuery {
        issue: p.issue_id,
        run_id: p.run_id,
        event_type: p.event_type,
        event_subtype: p.event_subtype,
        limit: p.limit,
        offset: p.offset,
    })
}

// Rows of the scope matrix that several tools share; the Colibri tools take the row of
// their Symphony counterpart (`crate::access::scope`, docs/colibri.md).

/// `get_issue`: the profiles that read and discuss an issue.
pub(super) const ISSUE_READERS: &[Profile] = &[Worker, Researcher, Judge, Architect, Planner];
/// `update_issue_status`.
pub(super) const STATUS_CHANGERS: &[Profile] = &[Worker, Judge, Planner];
/// `create_issue`.
pub(super) const ISSUE_CREATORS: &[Profile] = &[Worker, Scanner, Architect, Intake];
/// `list_issues`.
pub(super) const ISSUE_LISTERS: &[Profile] =
    &[Worker, Researcher, Scanner, Architect, Planner, Intake];
/// `approve_pr`, `reject_pr`: the judge's verdict tools.
pub(super) const JUDGE: &[Profile] = &[Judge];

pub(crate) fn tools() -> Vec<ToolDef> {
    [issue_tools(), pr_tools(), project_tools()]
        .into_iter()
        .flatten()
        .collect()
}

/// The issue: read it, change its status, findings and comments, new issues and sub-tasks.
fn issue_tools() -> Vec<ToolDef> {
    let add = Effect::Additive { idempotent: false };
    let change = Effect::Destructive { idempotent: false };
    vec![
        tool(
            "get_issue",
            "Read an issue with its findings, comments, status history, PRs and runs. Defaults to the current issue.",
            Effect::ReadOnly,
            json!({}),
            get_issue,
        )
        .profiles(ISSUE_READERS),
        tool(
            "get_issue_status",
            "Quick status check: status, labels, last 5 finding summaries and last 3 run outcomes. Defaults to the current issue.",
            Effect::ReadOnly,
            json!({}),
            get_issue_status,
        )
        .profiles(ISSUE_READERS),
        tool(
            "update_issue_status",
            "Change the current issue's status, from in_progress only: review (done), todo (give up) or blocked (need human input).",
            change,
            json!({"status": "review", "reason": "Implementation complete, all tests pass"}),
            update_issue_status,
        )
        .profiles(STATUS_CHANGERS)
        .bound(),
        tool(
            "add_finding",
            "Record a structured finding (test result, bug, pattern, gap) on the current issue. Findings are append-only.",
            add,
            json!({"category": "bug", "summary": "Race condition in worktree cleanup", "files": ["src/workspace.rs"]}),
            add_finding,
        )
        .profiles(&Profile::ALL)
        .bound(),
        tool(
            "add_comment",
            "Post a comment on the current issue.",
            add,
            json!({"content": "Found the root cause: the migration was missing a NOT NULL constraint"}),
            add_comment,
        )
        .profiles(ISSUE_READERS)
        .bound(),
        tool(
            "create_issue",
            "Create a new issue on the current project's board.",
            add,
            json!({"title": "Add input validation to POST /api/issues", "priority": 2, "labels": ["validation"]}),
            create_issue,
        )
        .profiles(ISSUE_CREATORS),
        tool(
            "create_subtask",
            "Create a sub-task of the current issue; the current issue is blocked until its sub-tasks are done.",
            add,
            json!({"title": "Add unit tests for dispatcher priority sorting", "priority": 2}),
            create_subtask,
        )
        .profiles(&[Worker, Planner])
        .bound(),
        tool(
            "list_issues",
            "List issues in the current project, most urgent first.",
            Effect::ReadOnly,
            json!({"status": "backlog", "limit": 20}),
            list_issues,
        )
        .profiles(ISSUE_LISTERS),
    ]
}

/// The issue's PR: create it, and the judge's verdict.
fn pr_tools() -> Vec<ToolDef> {
    let add = Effect::Additive { idempotent: false };
    let change = Effect::Destructive { idempotent: false };
    vec![
        tool(
            "create_pr",
            "Create a local PR record from a diff with gate results; computes per-file stats and a risk score and moves the issue from in_progress to review. Verifies the worktree when the server has one (result.worktree.verified).",
            add,
            json!({"diff": "diff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-old\n+new\n", "branch_name": "symphony/SYM-001", "base_branch": "main", "gate_results": [{"command": "cargo test", "label": "Tests", "exit_code": 0, "output": "42 passed", "required": true}]}),
            create_pr,
        )
        .profiles(&[Worker])
        .bound(),
        tool(
            "approve_pr",
            "Approve the current issue's open PR. The issue stays in review for a human merge.",
            change,
            json!({"reason": "Changes match the requirements, all gates pass"}),
            approve_pr,
        )
        .profiles(JUDGE)
        .bound(),
        tool(
            "reject_pr",
            "Reject the current issue's open PR; moves the issue to todo and records the reason and fix instructions as a comment.",
            change,
            json!({"reason": "Missing error handling", "fix_instructions": "Return 400 for validation errors"}),
            reject_pr,
        )
        .profiles(JUDGE)
        .bound(),
    ]
}

/// The project's configuration, its research coverage and test health, the agents' run events.
fn project_tools() -> Vec<ToolDef> {
    let add = Effect::Additive { idempotent: false };
    let change = Effect::Destructive { idempotent: false };
    vec![
        tool(
            "configure_project",
            "Configure the current project: gates, sensitive paths, risk thresholds, instructions, vault collections. Named sections replace stored ones.",
            change,
            json!({"sensitive_paths": ["server/database/*", ".env*"], "risk_thresholds": {"lowLines": 50, "highLines": 500, "lowFiles": 3, "highFiles": 15}}),
            configure_project,
        )
        .profiles(&[]),
        tool(
            "record_coverage",
            "Record research coverage for a file and concept; the latest observation replaces an earlier one.",
            Effect::Destructive { idempotent: true },
            json!({"file_path": "src/dispatcher.rs", "concept": "error_handling", "status": "covered"}),
            record_coverage,
        )
        .profiles(&[Scanner])
        .bound(),
        tool(
            "record_test_health",
            "Record test health metrics after a test run; answers with the change against the project's previous count.",
            add,
            json!({"test_count": 150, "tests_added": 5, "tests_removed": 1, "test_files_changed": 3, "execution_time_ms": 30000}),
            record_test_health,
        )
        .profiles(&[Worker])
        .bound(),
        tool(
            "query_run_events",
            "Query recorded agent run events by run_id or issue_id (one is required), filtered by type and subtype, paged.",
            Effect::ReadOnly,
            json!({"issue_id": "SYM-1", "event_subtype": "tool_use", "limit": 50}),
            query_run_events,
        )
        .profiles(&[Researcher, Judge, Architect]),
    ]
}
