//! Work in a bound session: start-up binding, workspace check, phases, memory files.

use crate::error::Result;
use crate::memory::{MemoryScope, MemoryWritten};
use crate::phases::{Phase, PhaseClaim, PhaseCompletion, PhaseVerdict};
use crate::session::{Session, SessionArgs, WorktreeCheck};
use crate::workspace::WorkspaceInfo;

use super::Cairn;

impl Cairn {
    /// Verify that the session's worktree belongs to the bound issue (see the module
    /// docs).
    pub fn verify_workspace(&self, session: &Session) -> Result<WorkspaceInfo> {
        crate::workspace::verify_workspace(&self.store, session)
    }

    /// Replace one of the session profile's memory files (see the module docs).
    pub fn update_memory(
        &self,
        session: &Session,
        scope: MemoryScope,
        filename: &str,
        content: &str,
    ) -> Result<MemoryWritten> {
        crate::memory::update_memory(session, scope, filename, content)
    }

    /// `complete_phase`.
    pub fn complete_phase(&self, session: &Session, p: &PhaseCompletion) -> Result<PhaseClaim> {
        crate::phases::complete_phase(&self.store, session, p)
    }

    /// `approve_phase` / `reject_phase`.
    pub fn judge_phase(
        &self,
        session: &Session,
        phase: Phase,
        artifact_hash: &str,
        approved: bool,
        reason: Option<&str>,
        fix_instructions: Option<&str>,
    ) -> Result<PhaseVerdict> {
        crate::phases::judge_phase(
            &self.store,
            session,
            phase,
            artifact_hash,
            approved,
            reason,
            fix_instructions,
        )
    }

    /// The worktree check of `complete_phase` and `create_pr`.
    pub fn worktree_check(&self, session: &Session) -> Result<WorktreeCheck> {
        crate::session::worktree_check(&self.store, session)
    }

    /// Check start-up arguments against the database and build the binding.
    pub fn bind(&self, args: &SessionArgs) -> Result<Session> {
        crate::session::bind(&self.store, args)
    }
}
