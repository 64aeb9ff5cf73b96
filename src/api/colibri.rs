//! The Colibri vocabulary: tasks, thoughts, audit sessions and Merkle roots.

use crate::colibri::audit::{
    AuditScope, AuditSessionStarted, ChainVerification, MerkleFinalized, MerkleRootView,
    VerifyTarget,
};
use crate::colibri::skills::{SkillFilter, SkillList};
use crate::colibri::tasks::{
    NextActions, TaskCreate, TaskCreated, TaskPage, TaskQuery, TaskUpdate, TaskUpdated, TaskView,
};
use crate::colibri::thoughts::{NewThought, ThoughtList, ThoughtQuery, ThoughtRecorded};
use crate::context::WorkContext;
use crate::error::Result;

use super::Cairn;

impl Cairn {
    /// Create a task in `backlog`, attributed to `actor`.
    pub fn task_create(&self, actor: &str, new: &TaskCreate) -> Result<TaskCreated> {
        crate::colibri::tasks::task_create(&self.store, actor, new)
    }

    /// One task, optionally with its thought trail and its direct sub-tasks.
    pub fn task_get(
        &self,
        task: &str,
        include_thought_trail: bool,
        include_dependents: bool,
    ) -> Result<TaskView> {
        crate::colibri::tasks::task_get(
            &self.store,
            task,
            include_thought_trail,
            include_dependents,
        )
    }

    /// Change a task's fields.
    pub fn task_update(&self, actor: &str, upd: &TaskUpdate) -> Result<TaskUpdated> {
        crate::colibri::tasks::task_update(&self.store, actor, upd)
    }

    /// Filter, sort and page tasks.
    pub fn task_list(&self, q: &TaskQuery) -> Result<TaskPage> {
        crate::colibri::tasks::task_list(&self.store, q)
    }

    /// The project's `todo` tasks, most urgent first (then fewest unmet dependencies,
    /// then oldest), and with `include_blocked` its blocked tasks with their reasons.
    /// `limit` defaults to [`crate::colibri::limits::NEXT_ACTIONS_LIMIT_DEFAULT`].
    pub fn task_next_actions(
        &self,
        project: &str,
        limit: Option<usize>,
        include_blocked: bool,
    ) -> Result<NextActions> {
        crate::colibri::tasks::task_next_actions(&self.store, project, limit, include_blocked)
    }

    /// Open an audit session on a task.
    pub fn audit_session_start(
        &self,
        task: &str,
        auditor_id: &str,
        reason: Option<&str>,
        scope: AuditScope,
    ) -> Result<AuditSessionStarted> {
        crate::colibri::audit::audit_session_start(&self.store, task, auditor_id, reason, scope)
    }

    /// Verify the chains of a session's tasks, of one task, or of one task within a
    /// session.
    pub fn audit_verify(&self, target: &VerifyTarget) -> Result<ChainVerification> {
        crate::colibri::audit::audit_verify(&self.store, target)
    }

    /// Build the session's Merkle tree over its records and freeze it.
    pub fn merkle_finalize(
        &self,
        session: &str,
        task: Option<&str>,
        agent_issue: Option<&str>,
    ) -> Result<MerkleFinalized> {
        crate::colibri::audit::merkle_finalize(&self.store, session, task, agent_issue)
    }

    /// The session's root.
    pub fn merkle_root(&self, session: &str) -> Result<MerkleRootView> {
        crate::colibri::audit::merkle_root(&self.store, session)
    }

    /// Append a thought to its task's chain, attributed to `actor`.
    pub fn thought_record(&self, actor: &str, new: &NewThought) -> Result<ThoughtRecorded> {
        crate::colibri::thoughts::thought_record(&self.store, actor, new)
    }

    /// The thoughts of a task, of an audit session, or of every task.
    pub fn thought_list(&self, q: &ThoughtQuery) -> Result<ThoughtList> {
        crate::colibri::thoughts::thought_list(&self.store, q)
    }

    /// The skills of a piece of work's checkout (or its project's path).
    pub fn list_work_skills(&self, work: &WorkContext, filter: &SkillFilter) -> Result<SkillList> {
        crate::colibri::skills::list_work_skills(&self.store, work, filter)
    }
}
