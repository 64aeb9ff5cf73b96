//! What follows when an issue's work is approved (a phase verdict or a PR) or reaches
//! done, beyond the trail's own records: a step of a domain above the trail (today the
//! learnings', which weighs the `helped` verdicts the issue gave more), run in the
//! transaction of the change. The trail and the work call [`issue_approved`] and name no
//! domain above them; the facade registers the step when it opens a database
//! (`Cairn::open_at`).

use std::sync::OnceLock;

use crate::error::Result;
use crate::store::db::Conn;

/// A step run when an issue's work is approved: `(tx, issue_id, actor)`, inside the
/// transaction of the change (an error rolls the change back).
pub(crate) type Step = fn(&Conn<'_>, &str, &str) -> Result<()>;

static STEP: OnceLock<Step> = OnceLock::new();

/// Register the step run on every approval. The facade registers the one step there is
/// each time it opens a database; the first registration of the process stands.
pub(crate) fn register(step: Step) {
    let _ = STEP.set(step);
}

/// The work of `issue_id` was approved (a phase verdict or a PR) or reached done: run
/// the registered step, in the caller's transaction.
pub(crate) fn issue_approved(tx: &Conn<'_>, issue_id: &str, actor: &str) -> Result<()> {
    match STEP.get() {
        Some(step) => step(tx, issue_id, actor),
        None => Ok(()),
    }
}
