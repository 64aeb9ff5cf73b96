//! The work tools of the session's own workspace: `verify_workspace`, `complete_phase`,
//! `approve_phase`, `reject_phase`, `move_issue`, `update_memory`.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::error::Result;
use crate::mcp::registry::{Effect, NoParams, ToolCtx, ToolDef, tool};
use crate::memory::{MemoryScope, MemoryWritten};
use crate::workspace::WorkspaceInfo;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMemoryParams {
    /// project (this project only) or global (all projects).
    pub scope: MemoryScope,
    /// File name like codebase-notes.md: letters, digits, '-', '_', ending in .md.
    #[schemars(length(min = 1, max = 255), regex(pattern = r"^[a-zA-Z0-9_-]+\.md$"))]
    pub filename: String,
    /// Full content; replaces the file. At most 10,000 characters.
    #[schemars(length(max = 10000))]
    pub content: String,
}

fn verify_workspace(cx: &ToolCtx<'_>, _p: NoParams) -> Result<WorkspaceInfo> {
    cx.cairn.verify_workspace(cx.session)
}

fn update_memory(cx: &ToolCtx<'_>, p: UpdateMemoryParams) -> Result<MemoryWritten> {
    cx.cairn
        .update_memory(cx.session, p.scope, &p.filename, &p.content)
}

pub fn tools() -> Vec<ToolDef> {
    vec![
        tool(
            "verify_workspace",
            "Step 0: check that you are in your issue's worktree (its .symphony-worktree marker). \
             Fails with recovery instructions when you are not.",
            Effect::ReadOnly,
            json!({}),
            verify_workspace,
        )
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
        ),
    ]
}
