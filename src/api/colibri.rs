//! The Colibri vocabulary: tasks, thoughts, audit sessions and Merkle roots.

use crate::access::context::WorkContext;
use crate::colibri::audit::{
    AuditScope, AuditSessionStarted, ChainVerification, MerkleFinalized, MerkleRootView,
    VerifyTarget,
};
use crate::colibri::binding::Binding;
use crate::colibri::skills::{SkillFilter, SkillList};
use crate::colibri::tasks::{
    NextActions, TaskCreate, TaskCreated, TaskPage, TaskQuery, TaskUpdate, TaskUpdated, TaskView,
};
use crate::colibri::thoughts::{NewThought, ThoughtList, ThoughtQuery, ThoughtRecorded};
use crate::error::Result;

use super::Cairn;

impl Cairn {
    /// Create a task in `backlog`, attributed to the session's actor; an agent creates
    /// only in its bound project ([`Binding`]).
    pub(crate) fn task_create(&self, work: &WorkContext, new: &TaskCreate) -> Result<TaskCreated> {
        let b = Binding::new(&self.store, work);
        let mut new = new.clone();
        new.parent = match &new.parent {
            Some(p) => Some(b.target_task("parent_id", p)?),
            None => None,
        };
        b.check_create_in(&new.project)?;
        crate::colibri::tasks::task_create(&self.store, &work.actor, &new)
    }

    /// One task, optionally with its thought trail and its direct sub-tasks.
    pub(crate) fn task_get(
        &self,
        work: &WorkContext,
        task: &str,
        include_thought_trail: bool,
        include_dependents: bool,
    ) -> Result<TaskView> {
        crate::colibri::tasks::task_get(
            &self.store,
            &Binding::new(&self.store, work).task_ref("task_id", task)?,
            include_thought_trail,
            include_dependents,
        )
    }

    /// Change a task's fields; an agent changes only its bound issue.
    pub fn task_update(&self, work: &WorkContext, upd: &TaskUpdate) -> Result<TaskUpdated> {
        let b = Binding::new(&self.store, work);
        let mut upd = upd.clone();
        upd.task = b.target_task("task_id", &upd.task)?;
        crate::colibri::tasks::task_update(&self.store, &work.actor, &upd, b.is_agent())
    }

    /// Filter, sort and page tasks.
    pub(crate) fn task_list(&self, q: &TaskQuery) -> Result<TaskPage> {
        crate::colibri::tasks::task_list(&self.store, q)
    }

    /// The `todo` tasks of `project` (default: the bound one), most urgent first (then
    /// fewest unmet dependencies, then oldest), and with `include_blocked` its blocked
    /// tasks with their reasons. `limit` defaults to
    /// [`crate::colibri::limits::NEXT_ACTIONS_LIMIT_DEFAULT`].
    pub(crate) fn task_next_actions(
        &self,
        work: &WorkContext,
        project: Option<&str>,
        limit: Option<usize>,
        include_blocked: bool,
    ) -> Result<NextActions> {
        let project = Binding::new(&self.store, work).project_or_bound(project)?;
        crate::colibri::tasks::task_next_actions(&self.store, &project, limit, include_blocked)
    }

    /// Open an audit session on a task; an agent audits only its bound issue.
    pub fn audit_session_start(
        &self,
        work: &WorkContext,
        task: &str,
        auditor_id: &str,
        reason: Option<&str>,
        scope: AuditScope,
    ) -> Result<AuditSessionStarted> {
        let task = Binding::new(&self.store, work).target_task("task_id", task)?;
        crate::colibri::audit::audit_session_start(&self.store, &task, auditor_id, reason, scope)
    }

    /// Verify the chains of a session's tasks, of one task, or of one task within a
    /// session.
    pub fn audit_verify(
        &self,
        work: &WorkContext,
        target: &VerifyTarget,
    ) -> Result<ChainVerification> {
        let mut target = target.clone();
        if let Some(t) = &target.task {
            target.task = Some(Binding::new(&self.store, work).task_ref("task_id", t)?);
        }
        crate::colibri::audit::audit_verify(&self.store, &target)
    }

    /// Build the session's Merkle tree over its records and freeze it. Without a task,
    /// an agent finalizes only a session of its own issue.
    pub fn merkle_finalize(
        &self,
        work: &WorkContext,
        session: &str,
        task: Option<&str>,
    ) -> Result<MerkleFinalized> {
        let b = Binding::new(&self.store, work);
        let task = match task {
            Some(t) => Some(b.target_task("task_id", t)?),
            None => None,
        };
        let agent_issue = b.finalizing_issue()?;
        crate::colibri::audit::merkle_finalize(
            &self.store,
            session,
            task.as_deref(),
            agent_issue.as_deref(),
        )
    }

    /// The session's root.
    pub fn merkle_root(&self, session: &str) -> Result<MerkleRootView> {
        crate::colibri::audit::merkle_root(&self.store, session)
    }

    /// Append a thought to its task's chain, attributed to the session's actor; an agent
    /// records only on its bound issue.
    pub fn thought_record(&self, work: &WorkContext, new: &NewThought) -> Result<ThoughtRecorded> {
        let mut new = new.clone();
        new.task = Binding::new(&self.store, work).target_task("task_id", &new.task)?;
        crate::colibri::thoughts::thought_record(&self.store, &work.actor, &new)
    }

    /// The thoughts of a task, of an audit session, or of every task.
    pub(crate) fn thought_list(&self, work: &WorkContext, q: &ThoughtQuery) -> Result<ThoughtList> {
        let mut q = q.clone();
        if let Some(t) = &q.task {
            q.task = Some(Binding::new(&self.store, work).task_ref("task_id", t)?);
        }
        crate::colibri::thoughts::thought_list(&self.store, &q)
    }

    /// The skills of a piece of work's checkout (or its project's path).
    pub(crate) fn list_work_skills(
        &self,
        work: &WorkContext,
        filter: &SkillFilter,
    ) -> Result<SkillList> {
        crate::colibri::skills::list_work_skills(&self.store, work, filter)
    }
}
