//! What a session may name and change in the Colibri vocabulary, over its
//! [`WorkContext`] (`docs/colibri.md`). Every caller of the facade's Colibri operations
//! goes through these rules; no adapter can skip them.
//!
//! - `T-N` (the document's task id) is task N of the session's bound project; without a
//!   bound project, or when `T-N` is also the identifier of another project's issue, it
//!   is refused with a message naming the real identifiers.
//! - An agent session (one with an agent type) changes only its bound issue: a task it
//!   updates, records a thought on, opens an audit on or finalizes is that issue, and it
//!   creates tasks only in its bound project (a sub-task only under its bound issue). A
//!   session without an agent type (the orchestrator's, a person's) acts on any issue.

use crate::access::context::WorkContext;
use crate::error::{Error, Result};
use crate::issues::{issue, project};
use crate::store::Store;

/// The rules of one session.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Binding<'a> {
    store: &'a Store,
    work: &'a WorkContext,
}

impl<'a> Binding<'a> {
    pub(crate) fn new(store: &'a Store, work: &'a WorkContext) -> Self {
        Binding { store, work }
    }

    /// Whether this session is an agent's (bound by a profile), not the orchestrator's.
    pub(crate) fn is_agent(&self) -> bool {
        self.work.agent_type.is_some()
    }

    fn agent(&self) -> &str {
        self.work.agent_type.as_deref().unwrap_or("agent")
    }

    /// A task reference as the domain resolves it: `T-N` becomes the bound project's
    /// `PFX-N`; anything else is passed on. `field` names the argument in errors.
    pub(crate) fn task_ref(&self, field: &str, reference: &str) -> Result<String> {
        let Some(n) = super::task_number(reference) else {
            return Ok(reference.to_string());
        };
        let Some(pid) = &self.work.project_id else {
            return Err(Error::invalid(
                field,
                format!(
                    "{reference} is a project-scoped task number and this server has no bound \
                     project; pass the task's identifier (PFX-N) instead"
                ),
            ));
        };
        let project = project(self.store, pid)?;
        let identifier = format!("{}-{n}", project.prefix);
        if let Ok(literal) = issue(self.store, reference)
            && literal.project_id != project.id
        {
            return Err(Error::invalid(
                field,
                format!(
                    "{reference} is ambiguous: it is the identifier of {} in project {}, and \
                     task {n} of this server's project {} is {identifier}; pass the identifier \
                     you mean",
                    literal.identifier, literal.project_slug, project.slug
                ),
            ));
        }
        match issue(self.store, &identifier) {
            Ok(_) => Ok(identifier),
            Err(_) => Err(Error::TaskNotFound(format!(
                "{reference} (task {n} of project {} would be {identifier}, which does not exist)",
                project.slug
            ))),
        }
    }

    /// A task this session may change: for an agent, its bound issue only; for the
    /// orchestrator, any task.
    pub(crate) fn target_task(&self, field: &str, reference: &str) -> Result<String> {
        let r = self.task_ref(field, reference)?;
        if !self.is_agent() {
            return Ok(r);
        }
        let bound = self.work.require_issue()?;
        let target =
            issue(self.store, &r).map_err(|_| Error::TaskNotFound(reference.to_string()))?;
        if target.id != bound.id {
            return Err(Error::PermissionDenied(format!(
                "this {} session changes only its bound issue {}; {} is another issue (ask the \
                 orchestrator, or record a finding on your issue)",
                self.agent(),
                bound.identifier,
                target.identifier
            )));
        }
        Ok(r)
    }

    /// A project this session may create tasks in: for an agent, its bound project only.
    pub(crate) fn check_create_in(&self, project_ref: &str) -> Result<()> {
        if !self.is_agent() {
            return Ok(());
        }
        let bound = self.work.require_project()?;
        let project = project(self.store, project_ref)?;
        if project.id != bound {
            return Err(Error::PermissionDenied(format!(
                "this {} session creates tasks only in its bound project; {} is another project",
                self.agent(),
                project.slug
            )));
        }
        Ok(())
    }

    /// The project a listing is about: the one named, else the bound one.
    pub(crate) fn project_or_bound(&self, named: Option<&str>) -> Result<String> {
        match (named, &self.work.project_id) {
            (Some(p), _) => Ok(p.to_string()),
            (None, Some(bound)) => Ok(bound.clone()),
            (None, None) => Err(Error::invalid(
                "project",
                "no project is bound to this server; name the project slug",
            )),
        }
    }

    /// The issue whose audit sessions an agent may finalize without naming a task (its
    /// bound issue); `None` for the orchestrator (any session).
    pub(crate) fn finalizing_issue(&self) -> Result<Option<String>> {
        if self.is_agent() {
            Ok(Some(self.work.require_issue()?.id.clone()))
        } else {
            Ok(None)
        }
    }
}
