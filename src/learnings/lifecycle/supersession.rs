//! Superseding (docs/learnings.md, "Superseding"): a newer learning replaces older ones
//! of its project at once ([`supersede`]), or proposes to ([`propose`]) when an agent
//! supersedes another issue's or a verified learning; a person or independent evidence
//! ([`accept_by_evidence`]) accepts a proposal, a person rejects it ([`reject`]), and
//! every supersession can be undone ([`unsupersede`]).

use crate::base::now_iso;
use crate::error::{Error, Result};
use crate::store::db::{Conn, params};

use super::*;

/// Whether `new` may replace `old`: two learnings of one project, not the same, `old` not
/// superseded already, and no cycle through `new`'s successors.
fn check_supersession(tx: &Conn<'_>, old: &str, new: &str) -> Result<()> {
    let load = |id: &str| -> Result<(String, Option<String>)> {
        tx.query_opt(
            "SELECT project_id, superseded_by FROM learnings WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?
        .ok_or_else(|| Error::not_found("learning", id))
    };
    if old == new {
        return Err(Error::invalid(
            "supersedes",
            "a learning cannot supersede itself",
        ));
    }
    let (old_project, old_by) = load(old)?;
    let (new_project, _) = load(new)?;
    if old_project != new_project {
        // Scope: another project's learnings are not named, as if they did not exist.
        return Err(Error::not_found(
            "learning",
            format!(
                "{old} in this project (a learning supersedes learnings of its own project only)"
            ),
        ));
    }
    if let Some(by) = old_by {
        return Err(Error::Conflict {
            message: format!(
                "{old} is already superseded by {by}; supersede {by} instead, or leave it"
            ),
            existing_id: Some(by),
        });
    }
    // `new` must not descend from `old`'s successors back to `old` (a cycle).
    let mut at = new.to_string();
    for _ in 0..1_000 {
        let Some(next) = load(&at)?.1 else { break };
        if next == old {
            return Err(Error::invalid(
                "supersedes",
                format!(
                    "{new} is itself superseded, through its successors, by {old}: that would be a cycle"
                ),
            ));
        }
        at = next;
    }
    Ok(())
}

/// A history row on both sides of a supersession: `old_event` on `old` naming `new`,
/// `new_event` on `new` naming `old`.
#[allow(clippy::too_many_arguments)]
fn record_pair(
    tx: &Conn<'_>,
    (old, old_event): (&str, &str),
    (new, new_event): (&str, &str),
    actor: &str,
    note: Option<&str>,
    issue_id: Option<&str>,
    before: ((u8, bool), (u8, bool)),
    at: &str,
) -> Result<()> {
    for (id, event, related, before) in [
        (old, old_event, new, before.0),
        (new, new_event, old, before.1),
    ] {
        record(
            tx,
            id,
            &Change {
                event,
                actor,
                note,
                issue_id,
                related_id: Some(related),
                before: Some(before),
                at,
            },
        )?;
    }
    Ok(())
}

/// `old` is replaced by `new` at once (a person's decision, an agent replacing its own
/// issue's unverified learning, or a proposal accepted by evidence): it leaves default
/// results and points to `new`. A pending proposal of the same pair is settled by it;
/// other pending proposals against `old` are rejected (it has a successor now). History
/// on both.
pub(crate) fn supersede(
    tx: &Conn<'_>,
    old: &str,
    new: &str,
    actor: &str,
    note: Option<&str>,
) -> Result<()> {
    check_supersession(tx, old, new)?;
    let now = now_iso();
    let others: Vec<String> = tx.query_map(
        "SELECT new_id FROM learning_proposals WHERE old_id = ?1 AND new_id <> ?2 ORDER BY at",
        params![old, new],
        |r| r.get(0),
    )?;
    for other in others {
        let note = format!("{old} was superseded by {new}");
        reject(tx, old, &other, actor, Some(&note))?;
    }
    tx.execute(
        "DELETE FROM learning_proposals WHERE old_id = ?1 AND new_id = ?2",
        params![old, new],
    )?;
    let before = (standing(tx, old)?, standing(tx, new)?);
    tx.execute(
        "UPDATE learnings SET superseded_by = ?2, updated_at = ?3 WHERE id = ?1",
        params![old, new, now],
    )?;
    record_pair(
        tx,
        (old, "superseded"),
        (new, "supersedes"),
        actor,
        note,
        None,
        before,
        &now,
    )
}

/// Pending supersession proposals one issue may have at once.
pub(crate) const PROPOSALS_PER_ISSUE: u32 = 10;
/// Supersession proposals one call may make.
pub(crate) const PROPOSALS_PER_CALL: usize = 3;

/// An agent of `issue_id` proposes that `new` supersede `old` (a learning of another
/// issue, or a verified one): both stay in results, linked, until a person or
/// independent evidence ([`accept_by_evidence`]) accepts it. Refused past
/// [`PROPOSALS_PER_ISSUE`] pending proposals of the issue.
pub(crate) fn propose(
    tx: &Conn<'_>,
    old: &str,
    new: &str,
    issue_id: &str,
    actor: &str,
) -> Result<()> {
    check_supersession(tx, old, new)?;
    let pending: u32 = tx.query_row(
        "SELECT count(*) FROM learning_proposals WHERE issue_id = ?1",
        [issue_id],
        |r| r.get(0),
    )?;
    if pending >= PROPOSALS_PER_ISSUE {
        return Err(Error::FailedPrecondition(format!(
            "this issue has {pending} supersession proposals waiting for review (at most \
             {PROPOSALS_PER_ISSUE}); a person accepts or rejects them on the review queue \
             (`cairn learnings review`)"
        )));
    }
    let now = now_iso();
    tx.execute(
        "INSERT INTO learning_proposals(old_id, new_id, issue_id, actor, at)
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
        params![old, new, issue_id, actor, now],
    )?;
    let before = (standing(tx, old)?, standing(tx, new)?);
    record_pair(
        tx,
        (old, "proposed"),
        (new, "proposed"),
        actor,
        Some("supersession proposed: both stay in results until it is accepted"),
        Some(issue_id),
        before,
        &now,
    )
}

/// A pending proposal that `new` supersede `old` is rejected (by a person, or because
/// `old` got another successor): the row goes, both keep their standing. History on both.
pub(crate) fn reject(
    tx: &Conn<'_>,
    old: &str,
    new: &str,
    actor: &str,
    note: Option<&str>,
) -> Result<()> {
    let gone = tx.execute(
        "DELETE FROM learning_proposals WHERE old_id = ?1 AND new_id = ?2",
        params![old, new],
    )?;
    if gone == 0 {
        return Err(Error::not_found(
            "supersession proposal",
            format!("{new} superseding {old}"),
        ));
    }
    let now = now_iso();
    let before = (standing(tx, old)?, standing(tx, new)?);
    record_pair(
        tx,
        (old, "rejected"),
        (new, "rejected"),
        actor,
        note,
        None,
        before,
        &now,
    )
}

/// Undo a supersession: `old` is back in circulation with its history, confirmations
/// and verdicts (nothing of them was removed); its former successor stays as it is.
/// Returns the former successor.
pub(crate) fn unsupersede(
    tx: &Conn<'_>,
    old: &str,
    actor: &str,
    note: Option<&str>,
) -> Result<String> {
    let by: Option<String> = tx
        .query_opt(
            "SELECT superseded_by FROM learnings WHERE id = ?1",
            [old],
            |r| r.get(0),
        )?
        .ok_or_else(|| Error::not_found("learning", old))?;
    let Some(by) = by else {
        return Err(Error::Conflict {
            message: format!("learning {old} is not superseded: there is nothing to undo"),
            existing_id: None,
        });
    };
    let now = now_iso();
    let before = (standing(tx, old)?, standing(tx, &by)?);
    tx.execute(
        "UPDATE learnings SET superseded_by = NULL, updated_at = ?2 WHERE id = ?1",
        params![old, now],
    )?;
    record_pair(
        tx,
        (old, "unsuperseded"),
        (&by, "unsuperseded"),
        actor,
        note,
        None,
        before,
        &now,
    )?;
    Ok(by)
}

/// Distinct issues, other than the proposer's and the successor's own, whose `helped`
/// verdict or recording of the same lesson accepts a proposal.
pub(crate) const ACCEPT_AFTER: u32 = 2;

/// Accept the pending proposals of successor `new` that independent evidence supports:
/// at least [`ACCEPT_AFTER`] distinct issues other than the proposer's (and the
/// successor's own) found `new` helpful or recorded the same lesson, no other issue said
/// it is wrong, `new` is neither held nor flagged, and `old` is not verified (a person's
/// verification is undone by a person only). Returns the learnings it superseded.
pub(crate) fn accept_by_evidence(tx: &Conn<'_>, new: &str) -> Result<Vec<String>> {
    let pending: Vec<(String, String, bool)> = tx.query_map(
        "SELECT p.old_id, p.issue_id, o.verified FROM learning_proposals p
         JOIN learnings o ON o.id = p.old_id WHERE p.new_id = ?1 ORDER BY p.at, p.old_id",
        [new],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    if pending.is_empty() {
        return Ok(Vec::new());
    }
    let (own, held, flagged): (String, bool, bool) = tx.query_row(
        "SELECT issue_id, held_at IS NOT NULL, flagged FROM learnings WHERE id = ?1",
        [new],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let wrong: u32 = tx.query_row(
        "SELECT count(*) FROM learning_feedback
         WHERE learning_id = ?1 AND outcome = 'wrong' AND issue_id <> ?2",
        params![new, own],
        |r| r.get(0),
    )?;
    if held || flagged || wrong > 0 {
        return Ok(Vec::new());
    }
    let mut accepted = Vec::new();
    for (old, proposer, verified) in pending {
        if verified {
            continue;
        }
        let support: u32 = tx.query_row(
            "SELECT count(*) FROM (
                SELECT issue_id FROM learning_confirmations WHERE learning_id = ?1
                UNION
                SELECT issue_id FROM learning_feedback WHERE learning_id = ?1 AND outcome = 'helped'
             ) s WHERE s.issue_id <> ?2 AND s.issue_id <> ?3",
            params![new, proposer, own],
            |r| r.get(0),
        )?;
        if support >= ACCEPT_AFTER {
            let note = format!(
                "accepted: {support} issues other than the proposer's found the successor helpful or recorded it too"
            );
            supersede(tx, &old, new, "cairn", Some(&note))?;
            accepted.push(old);
        }
    }
    Ok(accepted)
}
