//! The work tools of the session's own workspace: `verify_workspace`, `complete_phase`,
//! `approve_phase`, `reject_phase`, `move_issue`, `update_memory`.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::access::scope::Profile::{self, *};
use crate::error::Result;
use crate::issues::limits as issue_limits;
use crate::mcp::tool::{Effect, NoParams, ToolCtx, ToolDef, tool};
use crate::text::{Cleaned, cleaned};
use crate::work::memory::{self, MemoryScope, MemoryWritten};
use crate::work::moves::MovedIssue;
use crate::work::phases::limits as phase_limits;
use crate::work::phases::{Confidence, Phase, PhaseClaim, PhaseCompletion, PhaseVerdict};
use crate::work::workspace::WorkspaceInfo;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateMemoryParams {
    /// project (this project only) or global (all projects).
    pub(crate) scope: MemoryScope,
    /// File name like codebase-notes.md: letters, digits, '-', '_', ending in .md.
    #[schemars(length(min = 1, max = memory::FILENAME_MAX), regex(pattern = memory::FILENAME_PATTERN))]
    pub(crate) filename: String,
    /// Full content; replaces the file. At most 10,000 characters.
    #[schemars(length(max = memory::CONTENT_MAX))]
    pub(crate) content: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompletePhaseParams {
    /// Phase being completed: research, architecture, grooming or ready.
    pub(crate) completed_phase: Phase,
    /// The phase contract's version (currently 1). Required unless ready.
    #[schemars(range(min = 1, max = phase_limits::CONTRACT_VERSION_MAX))]
    pub(crate) contract_version: Option<u32>,
    /// Artifact path relative to project_path, inside docs/tickets/. Required unless ready.
    #[schemars(length(min = 1, max = crate::paths::PATH_MAX))]
    pub(crate) artifact_path: Option<String>,
    /// SHA-256 (hex) of the artifact file. Required unless ready.
    #[schemars(regex(pattern = r"^[0-9a-fA-F]{64}$"), length(min = phase_limits::HASH_LEN, max = phase_limits::HASH_LEN))]
    pub(crate) artifact_hash: Option<String>,
    /// Brief summary of the artifact.
    #[schemars(length(min = 1, max = phase_limits::SUMMARY_MAX))]
    pub(crate) summary: String,
    /// Unresolved questions.
    #[serde(default)]
    #[schemars(length(max = phase_limits::OPEN_QUESTIONS_MAX), inner(length(min = 1, max = phase_limits::OPEN_QUESTION_MAX)))]
    pub(crate) open_questions: Vec<String>,
    /// high, medium (default) or low.
    #[serde(default)]
    pub(crate) confidence: Confidence,
    /// Where to promote the artifact, relative to project_path, inside docs/.
    #[schemars(length(min = 1, max = crate::paths::PATH_MAX))]
    pub(crate) promote_to: Option<String>,
    /// Suggested next phase (a phase of the project's pipeline). Required unless ready.
    #[schemars(length(min = 1, max = phase_limits::PHASE_NAME_MAX))]
    pub(crate) recommended_next_phase: Option<String>,
    /// Absolute path of the project root: your worktree or the project's path.
    #[schemars(length(min = 1, max = crate::paths::PATH_MAX))]
    pub(crate) project_path: String,
    /// Phase contracts directory relative to project_path (default prompts/phases/).
    #[schemars(length(min = 1, max = crate::paths::PATH_MAX))]
    pub(crate) contracts_dir: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovePhaseParams {
    /// Phase being approved.
    pub(crate) phase: Phase,
    /// SHA-256 of the artifact approved; must match the latest claim.
    #[schemars(regex(pattern = r"^[0-9a-fA-F]{64}$"), length(min = phase_limits::HASH_LEN, max = phase_limits::HASH_LEN))]
    pub(crate) artifact_hash: String,
    /// Approval reason.
    #[schemars(length(max = phase_limits::REASON_MAX))]
    pub(crate) reason: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RejectPhaseParams {
    /// Phase being rejected.
    pub(crate) phase: Phase,
    /// SHA-256 of the artifact rejected; must match the latest claim.
    #[schemars(regex(pattern = r"^[0-9a-fA-F]{64}$"), length(min = phase_limits::HASH_LEN, max = phase_limits::HASH_LEN))]
    pub(crate) artifact_hash: String,
    /// Rejection reason.
    #[schemars(length(min = 1, max = phase_limits::REASON_MAX))]
    pub(crate) reason: String,
    /// What the agent should fix.
    #[schemars(length(max = phase_limits::FIX_INSTRUCTIONS_MAX))]
    pub(crate) fix_instructions: Option<String>,
}

fn complete_phase(cx: &ToolCtx<'_>, p: CompletePhaseParams) -> Result<Cleaned<PhaseClaim>> {
    cleaned(|| {
        cx.cairn.complete_phase(
            cx.work,
            &PhaseCompletion {
                completed_phase: p.completed_phase,
                contract_version: p.contract_version,
                artifact_path: p.artifact_path,
                artifact_hash: p.artifact_hash,
                summary: p.summary,
                open_questions: p.open_questions,
                confidence: p.confidence,
                promote_to: p.promote_to,
                recommended_next_phase: p.recommended_next_phase,
                project_path: p.project_path,
                contracts_dir: p.contracts_dir,
            },
        )
    })
}

fn approve_phase(cx: &ToolCtx<'_>, p: ApprovePhaseParams) -> Result<Cleaned<PhaseVerdict>> {
    cleaned(|| {
        cx.cairn.judge_phase(
            cx.work,
            p.phase,
            &p.artifact_hash,
            true,
            p.reason.as_deref(),
            None,
        )
    })
}

fn reject_phase(cx: &ToolCtx<'_>, p: RejectPhaseParams) -> Result<Cleaned<PhaseVerdict>> {
    cleaned(|| {
        cx.cairn.judge_phase(
            cx.work,
            p.phase,
            &p.artifact_hash,
            false,
            Some(&p.reason),
            p.fix_instructions.as_deref(),
        )
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MoveIssueParams {
    /// Destination project: its id or slug.
    #[schemars(length(min = 1, max = issue_limits::REF_MAX))]
    pub(crate) target_project_id: String,
    /// Why the issue is being moved.
    #[schemars(length(min = 1, max = crate::work::moves::REASON_MAX))]
    pub(crate) reason: String,
}

fn move_issue(cx: &ToolCtx<'_>, p: MoveIssueParams) -> Result<MovedIssue> {
    let bound = cx.work.require_issue()?;
    cx.cairn
        .move_issue(&bound.id, &p.target_project_id, &p.reason, &cx.work.actor)
}

fn verify_workspace(cx: &ToolCtx<'_>, _p: NoParams) -> Result<WorkspaceInfo> {
    cx.cairn.verify_workspace(cx.work)
}

fn update_memory(cx: &ToolCtx<'_>, p: UpdateMemoryParams) -> Result<Cleaned<MemoryWritten>> {
    cleaned(|| {
        cx.cairn
            .update_memory(cx.work, p.scope, &p.filename, &p.content)
    })
}

pub(crate) fn tools() -> Vec<ToolDef> {
    vec![
        tool(
            "verify_workspace",
            "Step 0: check that you are in your issue's worktree (its .symphony-worktree marker). \
             Fails with recovery instructions when you are not.",
            Effect::ReadOnly,
            json!({}),
            verify_workspace,
        )
        .profiles(&[Worker, Researcher, Architect, Planner])
        .bound(),
        tool(
            "complete_phase",
            "Submit a phase completion claim. Checks your workspace (when the server has one; \
             result.worktree.verified) and the artifact (path in docs/tickets/, SHA-256, \
             length, headings, the contract's sections) first.",
            Effect::Additive { idempotent: false },
            json!({
                "completed_phase": "architecture",
                "contract_version": 1,
                "artifact_path": "docs/tickets/SYM-033/design.md",
                "artifact_hash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                "summary": "Design proposes token counting middleware with 3 budget tiers",
                "recommended_next_phase": "grooming",
                "project_path": "/path/to/worktree"
            }),
            complete_phase,
        )
        .profiles(&[Worker, Researcher, Architect, Planner])
        .bound(),
        tool(
            "approve_phase",
            "Record a judge approval of the latest phase claim (its artifact_hash must match). \
             The orchestrator advances the phase.",
            Effect::Additive { idempotent: false },
            json!({
                "phase": "architecture",
                "artifact_hash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                "reason": "Design is coherent, all required sections present"
            }),
            approve_phase,
        )
        .profiles(&[Judge])
        .bound(),
        tool(
            "reject_phase",
            "Record a judge rejection of the latest phase claim, with reason and fix \
             instructions posted as a comment.",
            Effect::Additive { idempotent: false },
            json!({
                "phase": "architecture",
                "artifact_hash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                "reason": "Missing rollback strategy",
                "fix_instructions": "Add a rollout section covering how to revert"
            }),
            reject_phase,
        )
        .profiles(&[Judge])
        .bound(),
        tool(
            "move_issue",
            "Move your issue to another project: new identifier there, status todo, phase label \
             kept or reset, artifacts copied, moved-from/skip labels added.",
            Effect::Destructive { idempotent: false },
            json!({
                "target_project_id": "podium",
                "reason": "Implementation requires changes to podium.api, not symphony"
            }),
            move_issue,
        )
        .profiles(&[Planner])
        .bound(),
        tool(
            "update_memory",
            "Persist private notes for future runs of your agent profile (scope project or \
             global). Replaces the whole file atomically.",
            Effect::Destructive { idempotent: true },
            json!({
                "scope": "project",
                "filename": "codebase-notes.md",
                "content": "# Codebase Notes\n\n- Use WAL mode for SQLite"
            }),
            update_memory,
        )
        .profiles(&Profile::ALL),
    ]
}
