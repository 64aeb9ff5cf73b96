//! The Colibri phase-0 tools (besides `server_ping`/`server_health`): `task_*`,
//! `thought_record*`, `audit_*`, `merkle_*`, `skill_list`. Wire parameters with the
//! document's limits, converted to facade calls with the session's [`crate::access::context::WorkContext`];
//! what a session may name and change is [`crate::colibri::binding`]'s to decide.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::access::scope::Profile;
use crate::colibri::audit::{
    AuditScope, AuditSessionStarted, ChainVerification, MerkleFinalized, MerkleRootView,
    VerifyTarget,
};
use crate::colibri::skills::{SkillFilter, SkillList};
use crate::colibri::tasks::{
    NextActions, SortBy, SortOrder, TaskCreate, TaskCreated, TaskPage, TaskQuery, TaskUpdate,
    TaskUpdated, TaskView,
};
use crate::colibri::thoughts::{
    NewThought, ThoughtList, ThoughtQuery, ThoughtRecorded, ThoughtType,
};
use crate::colibri::{Priority, limits};
use crate::error::Result;
use crate::issues::Status;
use crate::issues::limits as issue_limits;
use crate::work::prs::limits as prs_limits;

use super::trail::{ISSUE_CREATORS, ISSUE_LISTERS, ISSUE_READERS, JUDGE, STATUS_CHANGERS};
use crate::mcp::tool::{Effect, ToolCtx, ToolDef, tool};
use crate::text::{Cleaned, cleaned};

/// A task status on the wire (the issue [`Status`] names).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StatusArg(Status);

impl<'de> Deserialize<'de> for StatusArg {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Status::parse(&s)
            .map(StatusArg)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown status {s:?}")))
    }
}

impl JsonSchema for StatusArg {
    fn schema_name() -> Cow<'static, str> {
        Status::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        Status::json_schema(generator)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskCreateParams {
    /// 1-256 characters.
    #[schemars(length(min = 1, max = limits::TITLE_MAX))]
    pub(crate) title: String,
    /// Markdown body, up to 8000 characters.
    #[schemars(length(max = limits::DESCRIPTION_MAX))]
    pub(crate) description: Option<String>,
    /// Project slug.
    #[schemars(length(min = 1, max = issue_limits::SLUG_MAX))]
    pub(crate) project: String,
    /// Parent task id, for a sub-task (same project).
    #[schemars(length(min = 1, max = limits::TASK_ID_MAX))]
    pub(crate) parent_id: Option<String>,
    /// Default normal.
    pub(crate) priority: Option<Priority>,
    /// Up to 20 tags of 1-64 characters.
    #[schemars(length(max = issue_limits::LABELS_MAX), inner(length(min = 1, max = issue_limits::LABEL_MAX)))]
    pub(crate) labels: Option<Vec<String>>,
    /// Agent or user id; default "unassigned".
    #[schemars(length(min = 1, max = limits::ACTOR_MAX))]
    pub(crate) assignee: Option<String>,
    /// Planning estimate, 0-1000 hours.
    #[schemars(range(min = 0, max = limits::ESTIMATE_HOURS_MAX))]
    pub(crate) estimate_hours: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskGetParams {
    /// Task id (PFX-N; T-N also accepted).
    #[schemars(length(min = 1, max = limits::TASK_ID_MAX))]
    pub(crate) task_id: String,
    /// Include the thought ids of the task's chain.
    pub(crate) include_thought_trail: Option<bool>,
    /// Include the direct sub-tasks.
    pub(crate) include_dependents: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskUpdateParams {
    /// Task id (PFX-N; T-N also accepted).
    #[schemars(length(min = 1, max = limits::TASK_ID_MAX))]
    pub(crate) task_id: String,
    /// New status; must follow the transition table.
    pub(crate) status: Option<StatusArg>,
    /// 0-100.
    #[schemars(range(min = 0, max = limits::PROGRESS_MAX))]
    pub(crate) progress: Option<u8>,
    /// Replaces the description (up to 8000 characters).
    #[schemars(length(max = limits::DESCRIPTION_MAX))]
    pub(crate) description: Option<String>,
    pub(crate) priority: Option<Priority>,
    #[schemars(length(min = 1, max = limits::ACTOR_MAX))]
    pub(crate) assignee: Option<String>,
    /// Replaces every label (up to 20).
    #[schemars(length(max = issue_limits::LABELS_MAX), inner(length(min = 1, max = issue_limits::LABEL_MAX)))]
    pub(crate) labels: Option<Vec<String>>,
    /// Required when status is blocked.
    #[schemars(length(min = 1, max = limits::BLOCKED_REASON_MAX))]
    pub(crate) blocked_reason: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskListParams {
    /// Project slug.
    #[schemars(length(min = 1, max = issue_limits::SLUG_MAX))]
    pub(crate) project: Option<String>,
    /// Any of these statuses.
    #[schemars(length(max = limits::STATUS_FILTER_MAX))]
    pub(crate) status: Option<Vec<StatusArg>>,
    /// Any of these priorities.
    #[schemars(length(max = limits::PRIORITY_FILTER_MAX))]
    pub(crate) priority: Option<Vec<Priority>>,
    #[schemars(length(min = 1, max = limits::ACTOR_MAX))]
    pub(crate) assignee: Option<String>,
    /// Tasks carrying this label.
    #[schemars(length(min = 1, max = issue_limits::LABEL_MAX))]
    pub(crate) label: Option<String>,
    /// ISO-8601; created strictly after.
    #[schemars(length(min = 1, max = limits::TIMESTAMP_MAX))]
    pub(crate) created_after: Option<String>,
    /// ISO-8601; created strictly before.
    #[schemars(length(min = 1, max = limits::TIMESTAMP_MAX))]
    pub(crate) created_before: Option<String>,
    /// Words to find in title or description (all must match, as prefixes).
    #[schemars(length(max = limits::SEARCH_MAX))]
    pub(crate) search: Option<String>,
    /// Default 50, max 500.
    #[schemars(range(min = 1, max = limits::LIST_LIMIT_MAX))]
    pub(crate) limit: Option<u32>,
    /// Default 0.
    #[schemars(range(min = 0, max = limits::OFFSET_MAX))]
    pub(crate) offset: Option<u32>,
    /// Default updated.
    pub(crate) sort_by: Option<SortBy>,
    /// Default desc.
    pub(crate) sort_order: Option<SortOrder>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskNextActionsParams {
    /// Project slug; default the server's bound project.
    #[schemars(length(min = 1, max = issue_limits::SLUG_MAX))]
    pub(crate) project: Option<String>,
    /// Default 20, max 100.
    #[schemars(range(min = 1, max = limits::NEXT_ACTIONS_LIMIT_MAX))]
    pub(crate) limit: Option<u32>,
    /// Also list blocked tasks with their reasons.
    pub(crate) include_blocked: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ThoughtRecordParams {
    /// Task id (PFX-N; T-N also accepted).
    #[schemars(length(min = 1, max = limits::TASK_ID_MAX))]
    pub(crate) task_id: String,
    #[serde(rename = "type")]
    pub(crate) kind: ThoughtType,
    /// The decision text, 1-5000 characters.
    #[schemars(length(min = 1, max = limits::THOUGHT_CONTENT_MAX))]
    pub(crate) content: String,
    /// Git branch, for context.
    #[schemars(length(min = 1, max = prs_limits::BRANCH_MAX))]
    pub(crate) branch: Option<String>,
    /// Git commit (4-64 hex digits).
    #[schemars(regex(pattern = r"^[0-9a-fA-F]{4,64}$"), length(max = limits::COMMIT_SHA_MAX))]
    pub(crate) commit_sha: Option<String>,
    /// Tests executed.
    #[schemars(length(max = limits::TESTS_RUN_MAX), inner(length(min = 1, max = limits::TEST_NAME_MAX)))]
    pub(crate) tests_run: Option<Vec<String>>,
    /// Blocking issues.
    #[schemars(length(max = limits::BLOCKERS_MAX), inner(length(min = 1, max = limits::BLOCKER_MAX)))]
    pub(crate) blockers: Option<Vec<String>>,
    /// Arbitrary JSON object, at most 16 KiB serialized.
    pub(crate) metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ThoughtRecordListParams {
    /// Only this task's chain.
    #[schemars(length(min = 1, max = limits::TASK_ID_MAX))]
    pub(crate) task_id: Option<String>,
    /// Only the records of this audit session (A-N).
    #[schemars(length(min = 1, max = limits::SESSION_ID_MAX))]
    pub(crate) session_id: Option<String>,
    /// Only this thought type.
    #[serde(rename = "type")]
    pub(crate) kind: Option<ThoughtType>,
    /// Default 100, max 500.
    #[schemars(range(min = 1, max = limits::THOUGHT_LIST_LIMIT_MAX))]
    pub(crate) limit: Option<u32>,
    /// Verify hash integrity of the chains involved.
    pub(crate) verify_chain: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditSessionStartParams {
    /// Task being audited.
    #[schemars(length(min = 1, max = limits::TASK_ID_MAX))]
    pub(crate) task_id: String,
    /// Who conducts the audit.
    #[schemars(length(min = 1, max = limits::ACTOR_MAX))]
    pub(crate) auditor_id: String,
    /// Why (e.g. "proof review").
    #[schemars(length(max = limits::AUDIT_REASON_MAX))]
    pub(crate) reason: Option<String>,
    /// shallow = the task only (default); deep = with all sub-tasks.
    pub(crate) scope: Option<AuditScope>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditVerifyChainParams {
    /// Verify this session's records (A-N).
    #[schemars(length(min = 1, max = limits::SESSION_ID_MAX))]
    pub(crate) session_id: Option<String>,
    /// Verify this task's chains.
    #[schemars(length(min = 1, max = limits::TASK_ID_MAX))]
    pub(crate) task_id: Option<String>,
    /// Include every record with its hash.
    pub(crate) full_trace: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MerkleFinalizeParams {
    /// Session to finalize (A-N).
    #[schemars(length(min = 1, max = limits::SESSION_ID_MAX))]
    pub(crate) session_id: String,
    /// Only this task's records (a task of the session).
    #[schemars(length(min = 1, max = limits::TASK_ID_MAX))]
    pub(crate) task_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MerkleRootParams {
    /// Session (A-N).
    #[schemars(length(min = 1, max = limits::SESSION_ID_MAX))]
    pub(crate) session_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SkillListParams {
    /// Case-insensitive substring of the name or description.
    #[schemars(length(min = 1, max = limits::SKILL_SEARCH_MAX))]
    pub(crate) search: Option<String>,
    /// A declared capability.
    #[schemars(length(min = 1, max = limits::CAPABILITY_MAX))]
    pub(crate) capability: Option<String>,
}

fn task_create(cx: &ToolCtx<'_>, p: TaskCreateParams) -> Result<Cleaned<TaskCreated>> {
    cleaned(|| {
        cx.cairn.task_create(
            cx.work,
            &TaskCreate {
                title: p.title,
                description: p.description,
                project: p.project,
                parent: p.parent_id,
                priority: p.priority,
                labels: p.labels.unwrap_or_default(),
                assignee: p.assignee,
                estimate_hours: p.estimate_hours,
            },
        )
    })
}

fn task_get(cx: &ToolCtx<'_>, p: TaskGetParams) -> Result<TaskView> {
    cx.cairn.task_get(
        cx.work,
        &p.task_id,
        p.include_thought_trail.unwrap_or(false),
        p.include_dependents.unwrap_or(false),
    )
}

fn task_update(cx: &ToolCtx<'_>, p: TaskUpdateParams) -> Result<Cleaned<TaskUpdated>> {
    cleaned(|| {
        cx.cairn.task_update(
            cx.work,
            &TaskUpdate {
                task: p.task_id,
                status: p.status.map(|s| s.0),
                progress: p.progress,
                description: p.description,
                priority: p.priority,
                assignee: p.assignee,
                labels: p.labels,
                blocked_reason: p.blocked_reason,
            },
        )
    })
}

fn task_list(cx: &ToolCtx<'_>, p: TaskListParams) -> Result<TaskPage> {
    cx.cairn.task_list(&TaskQuery {
        project: p.project,
        statuses: p
            .status
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.0)
            .collect(),
        priorities: p.priority.unwrap_or_default(),
        assignee: p.assignee,
        label: p.label,
        created_after: p.created_after,
        created_before: p.created_before,
        search: p.search,
        limit: p.limit.map(|l| l as usize),
        offset: p.offset.map(|o| o as usize),
        sort_by: p.sort_by.unwrap_or_default(),
        sort_order: p.sort_order.unwrap_or_default(),
    })
}

fn task_next_actions(cx: &ToolCtx<'_>, p: TaskNextActionsParams) -> Result<NextActions> {
    cx.cairn.task_next_actions(
        cx.work,
        p.project.as_deref(),
        p.limit.map(|l| l as usize),
        p.include_blocked.unwrap_or(false),
    )
}

fn thought_record(cx: &ToolCtx<'_>, p: ThoughtRecordParams) -> Result<Cleaned<ThoughtRecorded>> {
    cleaned(|| {
        cx.cairn.thought_record(
            cx.work,
            &NewThought {
                task: p.task_id,
                kind: p.kind,
                content: p.content,
                branch: p.branch,
                commit_sha: p.commit_sha,
                tests_run: p.tests_run.unwrap_or_default(),
                blockers: p.blockers.unwrap_or_default(),
                metadata: p.metadata,
            },
        )
    })
}

fn thought_record_list(cx: &ToolCtx<'_>, p: ThoughtRecordListParams) -> Result<ThoughtList> {
    cx.cairn.thought_list(
        cx.work,
        &ThoughtQuery {
            task: p.task_id,
            session: p.session_id,
            kind: p.kind,
            limit: p.limit.map(|l| l as usize),
            verify_chain: p.verify_chain.unwrap_or(false),
        },
    )
}

fn audit_session_start(
    cx: &ToolCtx<'_>,
    p: AuditSessionStartParams,
) -> Result<AuditSessionStarted> {
    cx.cairn.audit_session_start(
        cx.work,
        &p.task_id,
        &p.auditor_id,
        p.reason.as_deref(),
        p.scope.unwrap_or_default(),
    )
}

fn audit_verify_chain(cx: &ToolCtx<'_>, p: AuditVerifyChainParams) -> Result<ChainVerification> {
    cx.cairn.audit_verify(
        cx.work,
        &VerifyTarget {
            session: p.session_id,
            task: p.task_id,
            full_trace: p.full_trace.unwrap_or(false),
        },
    )
}

fn merkle_finalize(cx: &ToolCtx<'_>, p: MerkleFinalizeParams) -> Result<MerkleFinalized> {
    cx.cairn
        .merkle_finalize(cx.work, &p.session_id, p.task_id.as_deref())
}

fn merkle_root(cx: &ToolCtx<'_>, p: MerkleRootParams) -> Result<MerkleRootView> {
    cx.cairn.merkle_root(&p.session_id)
}

fn skill_list(cx: &ToolCtx<'_>, p: SkillListParams) -> Result<SkillList> {
    cx.cairn.list_work_skills(
        cx.work,
        &SkillFilter {
            search: p.search,
            capability: p.capability,
        },
    )
}

pub(crate) fn tools() -> Vec<ToolDef> {
    [task_tools(), thought_tools(), audit_and_skill_tools()]
        .into_iter()
        .flatten()
        .collect()
}

/// Tasks: create, read, update, list, and what to do next.
fn task_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "task_create",
            "Create a task (an issue) in a project's backlog. Returns its task_id (PFX-N).",
            Effect::Additive { idempotent: false },
            json!({"title": "Wire up task_create MCP handler", "project": "colibri",
                   "priority": "high", "labels": ["phase-0", "mcp"], "estimate_hours": 4}),
            task_create,
        )
        .profiles(ISSUE_CREATORS),
        tool(
            "task_get",
            "One task with all its metadata; optionally its thought trail and sub-tasks.",
            Effect::ReadOnly,
            json!({"task_id": "COLIBRI-42", "include_dependents": true}),
            task_get,
        )
        .profiles(ISSUE_READERS),
        tool(
            "task_update",
            "Update a task's fields. Status changes follow Colibri's transition table; \
             blocked needs blocked_reason; done and cancelled are terminal.",
            Effect::Destructive { idempotent: false },
            json!({"task_id": "COLIBRI-42", "status": "in_progress", "progress": 45,
                   "assignee": "agent-bob"}),
            task_update,
        )
        .profiles(STATUS_CHANGERS),
        tool(
            "task_list",
            "List tasks with filters (project, status, priority, assignee, label, dates, \
             full-text search), sorting and paging.",
            Effect::ReadOnly,
            json!({"project": "colibri", "status": ["todo", "in_progress"],
                   "sort_by": "priority", "sort_order": "desc", "limit": 10}),
            task_list,
        )
        .profiles(ISSUE_LISTERS),
        tool(
            "task_next_actions",
            "The project's todo tasks by priority, with unmet dependency counts; \
             optionally the blocked ones with reasons.",
            Effect::ReadOnly,
            json!({"project": "colibri", "limit": 5}),
            task_next_actions,
        )
        .profiles(ISSUE_LISTERS),
    ]
}

/// A task's thought chain: record and list.
fn thought_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "thought_record",
            "Append a hash-chained decision record to a task's thought chain.",
            Effect::Additive { idempotent: false },
            json!({"task_id": "COLIBRI-42", "type": "reflection",
                   "content": "Completed the handler; all tests pass.",
                   "branch": "feature/task-create", "commit_sha": "a3f7d9b2c",
                   "tests_run": ["task_create.test.ts"], "blockers": []}),
            thought_record,
        )
        .profiles(ISSUE_READERS),
        tool(
            "thought_record_list",
            "A task's or an audit session's thought chain in order; verify_chain checks \
             every hash link.",
            Effect::ReadOnly,
            json!({"task_id": "COLIBRI-42", "verify_chain": true}),
            thought_record_list,
        )
        .profiles(ISSUE_READERS),
    ]
}

/// Audit sessions and their Merkle roots; the skills of the project.
fn audit_and_skill_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "audit_session_start",
            "Open an audit session on a task (shallow: the task; deep: with its sub-tasks).",
            Effect::Additive { idempotent: false },
            json!({"task_id": "COLIBRI-42", "auditor_id": "agent-auditor",
                   "reason": "Proof review before finalization", "scope": "deep"}),
            audit_session_start,
        )
        .profiles(JUDGE),
        tool(
            "audit_verify_chain",
            "Verify the hash chains (thoughts and work trail) of a session or a task: \
             integrity score and broken links.",
            Effect::ReadOnly,
            json!({"session_id": "A-0002"}),
            audit_verify_chain,
        )
        .profiles(ISSUE_READERS),
        tool(
            "merkle_finalize",
            "Build the Merkle tree over a session's records and freeze its root (once).",
            Effect::Additive { idempotent: false },
            json!({"session_id": "A-0002"}),
            merkle_finalize,
        )
        .profiles(JUDGE),
        tool(
            "merkle_root",
            "The current Merkle root of a session and whether it is finalized.",
            Effect::ReadOnly,
            json!({"session_id": "A-0002"}),
            merkle_root,
        )
        .profiles(ISSUE_READERS),
        tool(
            "skill_list",
            "Skills from .agents/skills/*/SKILL.md front matter; malformed files are \
             listed in errors.",
            Effect::ReadOnly,
            json!({"search": "tier1"}),
            skill_list,
        )
        .profiles(&Profile::ALL),
    ]
}
