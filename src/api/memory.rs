//! The agents' memory and rule files in and out of Cairn; candidate learnings.

use crate::error::Result;
use crate::learnings::Added;
use crate::memory::candidates::Candidate;
use crate::memory::export::{ExportReport, ExportRequest};
use crate::memory::import::{ImportReport, ImportRequest};

use super::Cairn;

impl Cairn {
    /// Record the items of memory and rule files as learnings of a project.
    pub fn import_memory(&self, req: &ImportRequest) -> Result<ImportReport> {
        crate::memory::import::import(&self.learnings(), req)
    }

    /// Write a project's trusted learnings as a managed section of a file.
    pub fn export_learnings(&self, req: &ExportRequest) -> Result<ExportReport> {
        crate::memory::export::export(&self.store, req)
    }

    /// Find the lessons a stored run shows and hold them for a person.
    pub fn propose_candidates(&self, run_id: &str) -> Result<Vec<Candidate>> {
        crate::memory::candidates::propose(&self.store, run_id)
    }

    /// Candidate learnings, by status and project.
    pub fn candidates(
        &self,
        status: Option<&str>,
        project: Option<&str>,
    ) -> Result<Vec<Candidate>> {
        crate::memory::candidates::list(&self.store, status, project)
    }

    /// A person accepts a candidate: recorded as a learning through the add path.
    pub fn accept_candidate(
        &self,
        id: &str,
        pattern: Option<&str>,
        actor: &str,
    ) -> Result<(Candidate, Added)> {
        crate::memory::candidates::accept(&self.learnings(), id, pattern, actor)
    }

    /// A person rejects a candidate.
    pub fn reject_candidate(&self, id: &str, actor: &str) -> Result<Candidate> {
        crate::memory::candidates::reject(&self.store, id, actor)
    }
}
