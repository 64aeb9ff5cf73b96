//! The work an agent does on its bound issue, beside the trail it records: the tools of
//! the "work" family and the PR flow.
//!
//! - [`workspace`]: is this session in the bound issue's worktree (the `.symphony-worktree`
//!   marker, the branch)?
//! - [`phases`]: phase completion claims, judge verdicts, phase contracts, a project's
//!   pipeline.
//! - [`prs`]: local PR records, diff stats and the risk score.
//! - [`moves`]: moving an issue to another project.
//! - [`memory`]: agent memory files under the Symphony root.
//!
//! What these record goes into the trail through [`crate::trail`]'s API
//! boundary (`findings::append_finding`, `findings::add_comment_in`, `status`); the trail
//! knows nothing of them.

pub(crate) mod memory;
pub(crate) mod moves;
pub(crate) mod phases;
pub mod prs;
pub(crate) mod workspace;
