//! The life of a learning after it is recorded (docs/learnings.md, "Lifecycle"):
//!
//! - **Merging.** A new learning that says the same as one of its project is not stored
//!   twice: the existing one gets a confirmation from the new one's issue. Two texts
//!   say the same when their embeddings are at least [`DUPLICATE_COSINE`] similar and
//!   no guard tells them apart ([`same_lesson`]): a different count of negation words,
//!   numbers or versions only one side has, code identifiers or paths only one side
//!   has. The threshold and guards were chosen on the tune half of
//!   `tests/eval/learning-pairs.jsonl` for precision ≥ 0.97 (`cairn eval learnings`
//!   reports the held-out half).
//! - **Superseding.** A newer learning replaces older ones of its project; they leave
//!   default results and point to it. An agent's supersession of another issue's or a
//!   verified learning is a proposal ([`propose`]) a person or independent evidence
//!   ([`accept_by_evidence`]) accepts; every supersession can be undone
//!   ([`unsupersede`]).
//! - **Quality from evidence.** Feedback verdicts (one standing verdict per issue, never
//!   the learning's own issue's),
//!   confirmations, and whether the issues that said `helped` were approved or done,
//!   make a Beta posterior mean ([`evidence_quality`]) unless a person rated it.
//! - **Age.** An unverified learning nobody confirmed or found helpful for
//!   [`STALE_AFTER_DAYS`] (per project: `settings.learnings.stale_after_days`) has its
//!   quality term multiplied by [`AGE_FACTOR`] at search time.
//! - **History.** Every change is a row of `learning_history` (append-only in the
//!   database too), with who, when, the issue it came from and the other learning.
//!
//! | module | owns |
//! | --- | --- |
//! | [`duplicates`] | the duplicate rule and its guards, restatements, a new learning's candidates |
//! | [`evidence`] | verdicts, confirmations, approvals and the quality they make |
//! | [`supersession`] | supersessions, proposals, their acceptance, rejection and undoing |
//! | [`age`] | ageing, and what the blend adds to the stored quality |
//! | [`review`] | a person's decisions: the review queue, standing changes, supersessions made, rejected or undone |
//! | this file | the history rows every change appends |

mod age;
mod duplicates;
mod evidence;
mod review;
mod supersession;

pub(crate) use age::*;
pub use duplicates::*;
pub use evidence::*;
pub(crate) use supersession::*;

use crate::error::{Error, Result};
use crate::store::db::{Conn, params};

/// A learning's quality and verified flag, the standing a history row records.
fn standing(c: &Conn<'_>, id: &str) -> Result<(u8, bool)> {
    c.query_opt(
        "SELECT quality_score, verified FROM learnings WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?
    .ok_or_else(|| Error::not_found("learning", id))
}

/// One change for the history.
pub(crate) struct Change<'a> {
    pub(crate) event: &'a str,
    pub(crate) actor: &'a str,
    pub(crate) note: Option<&'a str>,
    pub(crate) issue_id: Option<&'a str>,
    pub(crate) related_id: Option<&'a str>,
    /// The standing before the change (`None` for `created`).
    pub(crate) before: Option<(u8, bool)>,
    pub(crate) at: &'a str,
}

/// Append `change` to the history of `learning_id`, with the standing after it.
pub(crate) fn record(tx: &Conn<'_>, learning_id: &str, change: &Change<'_>) -> Result<()> {
    tx.prepare(
        "INSERT INTO learning_history(learning_id, event, quality_before, quality_after,
            verified_before, verified_after, actor, note, at, issue_id, related_id)
         SELECT id, ?2, ?3, quality_score, ?4, verified, ?5, ?6, ?7, ?8, ?9
         FROM learnings WHERE id = ?1",
    )?
    .execute(params![
        learning_id,
        change.event,
        change.before.map(|b| b.0),
        change.before.map(|b| b.1),
        change.actor,
        change.note,
        change.at,
        change.issue_id,
        change.related_id
    ])?;
    Ok(())
}
