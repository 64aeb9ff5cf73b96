//! A person's decisions on learnings: what waits for review (held learnings, proposals,
//! flagged learnings), the standing changes (verify, flag, archive, restore, release,
//! rate) and the supersessions a person makes, rejects or undoes.

use crate::base::now_iso;
use crate::error::{Error, Result};
use crate::learnings::load::{SELECT_LEARNING, learning_from_row, load_by_id, with_proposals};
use crate::learnings::validate::{check_id, check_note};
use crate::learnings::{Learning, Learnings, Proposal, ReviewQueue, limits};
use crate::store::db::{Conn, params};

use super::*;

/// What a person changes of a learning's standing.
#[derive(Debug, Clone, Copy)]
enum Standing {
    Rate(u8),
    Verify,
    Flag,
    Archive,
    Restore,
    Release,
}

impl Standing {
    /// The history event of the change.
    fn event(self) -> &'static str {
        match self {
            Standing::Rate(_) => "rated",
            Standing::Verify => "verified",
            Standing::Flag => "flagged",
            Standing::Archive => "archived",
            Standing::Restore => "restored",
            Standing::Release => "released",
        }
    }
}

/// Write `change` to learning `id`, whose `archived_at` and held state are as given:
/// refused when there is nothing to release, archive or restore.
fn apply_standing(
    tx: &Conn<'_>,
    id: &str,
    change: Standing,
    archived: Option<String>,
    held: bool,
    now: &str,
) -> Result<()> {
    match change {
        Standing::Rate(s) => {
            tx.execute(
                "UPDATE learnings SET quality_score = ?2, rated = 1, updated_at = ?3
                 WHERE id = ?1",
                params![id, s, now],
            )?;
        }
        Standing::Verify => {
            // A person who verifies a held learning has read it: it is released.
            tx.execute(
                "UPDATE learnings SET verified = 1, flagged = 0, held_at = NULL,
                     updated_at = ?2
                 WHERE id = ?1",
                params![id, now],
            )?;
            // A verified learning keeps at least the prior (one rule, there).
            requalify(tx, id, now)?;
        }
        Standing::Flag => {
            tx.execute(
                "UPDATE learnings SET flagged = 1, verified = 0, updated_at = ?2
                 WHERE id = ?1",
                params![id, now],
            )?;
        }
        Standing::Release => {
            if !held {
                return Err(Error::Conflict {
                    message: format!("learning {id} is not held: there is nothing to release"),
                    existing_id: None,
                });
            }
            tx.execute(
                "UPDATE learnings SET held_at = NULL, updated_at = ?2 WHERE id = ?1",
                params![id, now],
            )?;
        }
        Standing::Archive | Standing::Restore => {
            let archive = matches!(change, Standing::Archive);
            if archived.is_some() == archive {
                return Err(Error::Conflict {
                    message: if archive {
                        format!(
                            "learning {id} is archived already (at {})",
                            archived.unwrap_or_default()
                        )
                    } else {
                        format!("learning {id} is not archived: there is nothing to restore")
                    },
                    existing_id: None,
                });
            }
            tx.execute(
                "UPDATE learnings SET archived_at = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, archive.then_some(now), now],
            )?;
        }
    }
    Ok(())
}

impl Learnings<'_> {
    /// Mark a learning verified by a person (which clears a review flag); recorded in
    /// its history.
    pub(crate) fn verify_learning(
        &self,
        id: &str,
        actor: &str,
        note: Option<&str>,
    ) -> Result<Learning> {
        self.change_standing(id, Standing::Verify, actor, note)
    }

    /// A person says a learning is wrong: it is flagged for review (`needs_review`) and
    /// no longer verified, until someone verifies it again. Recorded in its history.
    pub(crate) fn flag_learning(
        &self,
        id: &str,
        actor: &str,
        note: Option<&str>,
    ) -> Result<Learning> {
        self.change_standing(id, Standing::Flag, actor, note)
    }

    /// A person takes a learning out of circulation without a successor: it leaves every
    /// search (the page's "archived" filter brings it back) and is never merged into,
    /// but stays readable by id. Recorded in its history; [`Self::restore_learning`]
    /// undoes it.
    pub(crate) fn archive_learning(
        &self,
        id: &str,
        actor: &str,
        note: Option<&str>,
    ) -> Result<Learning> {
        self.change_standing(id, Standing::Archive, actor, note)
    }

    /// A person releases a held learning: it is served to every agent from now on.
    /// Recorded in its history.
    pub(crate) fn release_learning(
        &self,
        id: &str,
        actor: &str,
        note: Option<&str>,
    ) -> Result<Learning> {
        self.change_standing(id, Standing::Release, actor, note)
    }

    /// Bring an archived learning back into circulation. Recorded in its history.
    pub(crate) fn restore_learning(
        &self,
        id: &str,
        actor: &str,
        note: Option<&str>,
    ) -> Result<Learning> {
        self.change_standing(id, Standing::Restore, actor, note)
    }

    /// Set a learning's quality score (0-100); from then on evidence no longer moves it.
    /// Recorded in its history.
    pub(crate) fn rate_learning(
        &self,
        id: &str,
        score: u8,
        actor: &str,
        note: Option<&str>,
    ) -> Result<Learning> {
        if score > limits::QUALITY_MAX {
            return Err(Error::invalid(
                "score",
                format!("must be between 0 and {}", limits::QUALITY_MAX),
            ));
        }
        self.change_standing(id, Standing::Rate(score), actor, note)
    }

    /// Apply a person's `change` to learning `id` and record it in its history (with an
    /// optional note); the learning as it is now.
    fn change_standing(
        &self,
        id: &str,
        change: Standing,
        actor: &str,
        note: Option<&str>,
    ) -> Result<Learning> {
        let note = check_note(note)?;
        self.store.write(|tx| {
            let (quality, verified, archived, held): (u8, bool, Option<String>, bool) = tx
                .query_opt(
                    "SELECT quality_score, verified, archived_at, held_at IS NOT NULL
                     FROM learnings WHERE id = ?1",
                    [id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )?
                .ok_or_else(|| Error::not_found("learning", id))?;
            let now = now_iso();
            apply_standing(tx, id, change, archived, held, &now)?;
            record(
                tx,
                id,
                &Change {
                    event: change.event(),
                    actor,
                    note: note.as_deref(),
                    issue_id: None,
                    related_id: None,
                    before: Some((quality, verified)),
                    at: &now,
                },
            )?;
            load_by_id(tx, id)
        })
    }

    /// A person replaces `old` by `new` (same project) at once, accepting an agent's
    /// proposal of the pair if there is one: `old` leaves default results and points to
    /// `new`. Returns `old` as it is now.
    pub(crate) fn supersede_learning(&self, old: &str, new: &str, actor: &str) -> Result<Learning> {
        for (field, id) in [("old", old), ("by", new)] {
            check_id(field, id).map_err(|e| Error::InvalidInput(vec![e]))?;
        }
        let out = self.store.write(|tx| {
            supersede(tx, old, new, actor, None)?;
            load_by_id(tx, old)
        })?;
        self.index.after_insert(self.store);
        Ok(out)
    }

    /// A person rejects an agent's proposal that `new` supersede `old`: both stay as
    /// they are, unlinked. Returns `old` as it is now.
    pub(crate) fn reject_supersession(
        &self,
        old: &str,
        new: &str,
        actor: &str,
        note: Option<&str>,
    ) -> Result<Learning> {
        for (field, id) in [("old", old), ("by", new)] {
            check_id(field, id).map_err(|e| Error::InvalidInput(vec![e]))?;
        }
        let note = check_note(note)?;
        let out = self.store.write(|tx| {
            reject(tx, old, new, actor, note.as_deref())?;
            load_by_id(tx, old)
        })?;
        self.index.after_insert(self.store);
        Ok(out)
    }

    /// A person undoes the supersession of `old`: it is back in every default result
    /// with its history, confirmations and verdicts; its former successor stays as it
    /// is (archive it if it should go). Returns `old` as it is now.
    pub(crate) fn unsupersede_learning(
        &self,
        old: &str,
        actor: &str,
        note: Option<&str>,
    ) -> Result<Learning> {
        check_id("id", old).map_err(|e| Error::InvalidInput(vec![e]))?;
        let note = check_note(note)?;
        let out = self.store.write(|tx| {
            unsupersede(tx, old, actor, note.as_deref())?;
            load_by_id(tx, old)
        })?;
        self.index.after_insert(self.store);
        Ok(out)
    }

    /// What waits for a person: held learnings, pending supersession proposals (with
    /// both sides), flagged learnings; oldest first, at most [`limits::REVIEW_MAX`] of
    /// each.
    pub(crate) fn review_queue(&self) -> Result<ReviewQueue> {
        self.store.snapshot(|c| {
            let select = &*SELECT_LEARNING;
            let list = |cond: &str| -> Result<Vec<Learning>> {
                let mut rows: Vec<Learning> = c.query_map(
                    &format!(
                        "{select} WHERE {cond} AND l.archived_at IS NULL ORDER BY l.seq LIMIT {}",
                        limits::REVIEW_MAX
                    ),
                    [],
                    learning_from_row,
                )?;
                with_proposals(c, rows.iter_mut())?;
                Ok(rows)
            };
            let held = list("l.held_at IS NOT NULL")?;
            let flagged = list("l.flagged = 1 AND l.held_at IS NULL")?;
            let pairs: Vec<(String, String, String, String, String)> = c.query_map(
                &format!(
                    "SELECT p.old_id, p.new_id, i.identifier, p.actor, p.at
                     FROM learning_proposals p JOIN issues i ON i.id = p.issue_id
                     ORDER BY p.at, p.old_id, p.new_id LIMIT {}",
                    limits::REVIEW_MAX
                ),
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )?;
            let mut proposals = Vec::with_capacity(pairs.len());
            for (old, new, issue, actor, at) in pairs {
                proposals.push(Proposal {
                    old: load_by_id(c, &old)?,
                    new: load_by_id(c, &new)?,
                    issue,
                    actor,
                    at,
                });
            }
            Ok(ReviewQueue {
                held,
                proposals,
                flagged,
            })
        })
    }
}
