//! Quality from evidence (docs/learnings.md, "Quality from evidence"): the verdicts
//! issues give ([`give_feedback`]), the confirmations of a merged duplicate
//! ([`confirm`]) and the approval of the issues that said `helped` ([`issue_approved`])
//! make a Beta posterior mean ([`evidence_quality`]), unless a person rated the learning.

use serde::{Deserialize, Serialize};

use crate::base::now_iso;
use crate::error::{Error, Result};
use crate::issues::resolve_issue_id;
use crate::learnings::load::load_by_id;
use crate::learnings::validate::{check_id, check_note};
use crate::learnings::{Learning, Learnings, NewFeedback};
use crate::store::db::{Conn, params};

use super::*;

/// How a learning did for an issue, in the words of the agent that used it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It applied and helped with the work.
    Helped,
    /// It did not apply to this work (says little about its truth).
    NotRelevant,
    /// It is wrong or outdated: following it caused a problem.
    Wrong,
}

impl Outcome {
    pub(crate) const ALL: [Outcome; 3] = [Outcome::Helped, Outcome::NotRelevant, Outcome::Wrong];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Helped => "helped",
            Outcome::NotRelevant => "not_relevant",
            Outcome::Wrong => "wrong",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

/// The standing verdicts on a learning, one per issue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FeedbackCounts {
    pub helped: u32,
    pub(crate) not_relevant: u32,
    pub(crate) wrong: u32,
}

/// The evidence quality is derived from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct QualityEvidence {
    /// `helped` verdicts of issues not (yet) approved or done.
    pub(crate) helped: u32,
    /// `helped` verdicts of issues whose work was approved (a phase or PR) or done.
    pub(crate) helped_approved: u32,
    /// Other issues that recorded the same lesson (merged here).
    pub(crate) confirmations: u32,
    pub(crate) not_relevant: u32,
    pub(crate) wrong: u32,
}

/// Beta prior: as if 2 issues had found it helpful and 2 had not (mean 50).
pub(crate) const PRIOR: f64 = 2.0;
/// Weight of a `helped` verdict.
pub(crate) const W_HELPED: f64 = 1.0;
/// Weight of a `helped` verdict from an issue whose work was then approved or done.
pub(crate) const W_HELPED_APPROVED: f64 = 3.0;
/// Weight of an independent recording of the same lesson.
pub(crate) const W_CONFIRMED: f64 = 1.0;
/// Weight (against) of `not_relevant`: it did not apply, which says little of its truth.
pub(crate) const W_NOT_RELEVANT: f64 = 0.5;
/// Weight (against) of `wrong`: as much as a `helped`, so that one verdict moves a new
/// learning by 10 points either way (50 → 40), not a third of its standing (it was 2.0:
/// 50 → 33, one agent's word against a lesson). Two issues' `wrong` (33) still flag it
/// for review; the lifecycle set's MRR and nDCG are the same as with 2.0 on both parts
/// (docs/learnings.md, "Quality from evidence").
pub(crate) const W_WRONG: f64 = 1.0;

/// The quality (0-100) the evidence supports: the posterior mean of a Beta(PRIOR,
/// PRIOR) prior after weighted successes `s` and failures `f`,
/// `100 · (PRIOR + s) / (2·PRIOR + s + f)`, rounded.
pub(crate) fn evidence_quality(e: &QualityEvidence) -> u8 {
    let s = W_HELPED * f64::from(e.helped)
        + W_HELPED_APPROVED * f64::from(e.helped_approved)
        + W_CONFIRMED * f64::from(e.confirmations);
    let f = W_NOT_RELEVANT * f64::from(e.not_relevant) + W_WRONG * f64::from(e.wrong);
    (100.0 * (PRIOR + s) / (2.0 * PRIOR + s + f)).round() as u8
}

/// Whether the work of an issue (`issue` an `issues` alias in scope) was approved (a
/// phase verdict or a PR) or is done. SQL, shared by the quality and the hooks.
const APPROVED: &str = "(i.status = 'done'
    OR EXISTS (SELECT 1 FROM pull_requests pr WHERE pr.issue_id = i.id AND pr.status = 'approved')
    OR EXISTS (SELECT 1 FROM trail_records t WHERE t.issue_id = i.id
               AND t.category = 'phase_verdict' AND t.body LIKE '%\"verdict\":\"approved\"%'))";

/// SQL: verdict `f` comes from an issue other than its learning's own (verdicts a
/// learning's own issue gave before that rule are not counted either).
const OTHERS: &str =
    "f.issue_id <> (SELECT own.issue_id FROM learnings own WHERE own.id = f.learning_id)";

fn evidence_of(c: &Conn<'_>, learning_id: &str) -> Result<QualityEvidence> {
    let sql = format!(
        "SELECT
           (SELECT count(*) FROM learning_feedback f JOIN issues i ON i.id = f.issue_id
            WHERE f.learning_id = ?1 AND f.outcome = 'helped' AND NOT {APPROVED} AND {OTHERS}),
           (SELECT count(*) FROM learning_feedback f JOIN issues i ON i.id = f.issue_id
            WHERE f.learning_id = ?1 AND f.outcome = 'helped' AND {APPROVED} AND {OTHERS}),
           (SELECT count(*) FROM learning_confirmations WHERE learning_id = ?1),
           (SELECT count(*) FROM learning_feedback f
            WHERE f.learning_id = ?1 AND f.outcome = 'not_relevant' AND {OTHERS}),
           (SELECT count(*) FROM learning_feedback f
            WHERE f.learning_id = ?1 AND f.outcome = 'wrong' AND {OTHERS})"
    );
    c.query_row(&sql, [learning_id], |r| {
        Ok(QualityEvidence {
            helped: r.get(0)?,
            helped_approved: r.get(1)?,
            confirmations: r.get(2)?,
            not_relevant: r.get(3)?,
            wrong: r.get(4)?,
        })
    })
}

/// Recompute a learning's quality from its evidence, unless a person rated it; a
/// verified learning keeps at least the prior's 50. Returns the standing before.
pub(crate) fn requalify(tx: &Conn<'_>, id: &str, at: &str) -> Result<(u8, bool)> {
    let (quality, verified, rated): (u8, bool, bool) = tx
        .query_opt(
            "SELECT quality_score, verified, rated FROM learnings WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?
        .ok_or_else(|| Error::not_found("learning", id))?;
    let before = (quality, verified);
    if !rated {
        let mut q = evidence_quality(&evidence_of(tx, id)?);
        if before.1 {
            q = q.max(50);
        }
        if q != before.0 {
            tx.execute(
                "UPDATE learnings SET quality_score = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, q, at],
            )?;
        }
    }
    Ok(before)
}

/// Who merged a duplicate in, and how close it was.
pub(crate) struct Confirmation<'a> {
    pub(crate) issue_id: &'a str,
    pub(crate) agent_type: &'a str,
    pub(crate) actor: &'a str,
    pub(crate) similarity: f32,
}

/// Record that another issue recorded the same lesson as `learning_id`: a confirmation
/// (one per issue; the learning's own issue confirms nothing), fresh again, quality
/// requalified, history `merged`.
pub(crate) fn confirm(tx: &Conn<'_>, learning_id: &str, c: &Confirmation<'_>) -> Result<()> {
    let origin: String = tx.query_row(
        "SELECT issue_id FROM learnings WHERE id = ?1",
        [learning_id],
        |r| r.get(0),
    )?;
    if origin == c.issue_id {
        return Ok(());
    }
    let at = now_iso();
    let added = tx.execute(
        "INSERT INTO learning_confirmations(learning_id, issue_id, agent_type, actor,
            similarity, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
        params![
            learning_id,
            c.issue_id,
            c.agent_type,
            c.actor,
            f64::from(c.similarity),
            at
        ],
    )?;
    if added == 0 {
        return Ok(());
    }
    tx.execute(
        "UPDATE learnings SET fresh_at = ?2 WHERE id = ?1",
        params![learning_id, at],
    )?;
    let before = requalify(tx, learning_id, &at)?;
    let note = format!(
        "the same lesson recorded again (similarity {:.3})",
        c.similarity
    );
    record(
        tx,
        learning_id,
        &Change {
            event: "merged",
            actor: c.actor,
            note: Some(&note),
            issue_id: Some(c.issue_id),
            related_id: None,
            before: Some(before),
            at: &at,
        },
    )?;
    accept_by_evidence(tx, learning_id)?;
    Ok(())
}

/// One verdict on a learning from an issue.
pub(crate) struct Verdict<'a> {
    pub(crate) learning_id: &'a str,
    pub(crate) issue_id: &'a str,
    pub(crate) outcome: Outcome,
    pub(crate) note: Option<&'a str>,
    pub(crate) agent_type: &'a str,
    pub(crate) actor: &'a str,
}

/// `wrong` verdicts from this many issues flag a learning for review.
pub(crate) const FLAG_AFTER_WRONG: u32 = 2;

/// Record an issue's verdict on a learning of the issue's project (the latest verdict
/// of an issue replaces its earlier one); requalify; flag it after
/// [`FLAG_AFTER_WRONG`] `wrong` verdicts.
pub(crate) fn give_feedback(tx: &Conn<'_>, v: &Verdict<'_>) -> Result<()> {
    let own_issue = verdict_target(tx, v)?;
    let at = now_iso();
    // A learning's own issue vouches for nothing: its verdict is kept in the history for
    // the people who read it, and moves neither quality, trust nor acceptance.
    let own = own_issue == v.issue_id;
    let before = if own {
        standing(tx, v.learning_id)?
    } else {
        store_verdict(tx, v, &at)?
    };
    let mut note = match v.note {
        Some(n) => format!("{}: {n}", v.outcome.as_str()),
        None => v.outcome.as_str().to_string(),
    };
    if own {
        note.push_str(" (from the learning's own issue: counts for nothing)");
    }
    record(
        tx,
        v.learning_id,
        &Change {
            event: "feedback",
            actor: v.actor,
            note: Some(&note),
            issue_id: Some(v.issue_id),
            related_id: None,
            before: Some(before),
            at: &at,
        },
    )?;
    if own {
        return Ok(());
    }
    if v.outcome == Outcome::Wrong {
        flag_when_wrong_enough(tx, v, &at)?;
    }
    accept_by_evidence(tx, v.learning_id)?;
    Ok(())
}

/// The issue a verdict's learning was recorded on, once the verdict may be given: the
/// learning exists, is served to the verdict's issue (a held learning is served to no
/// other issue, not even as the answer to a verdict) and belongs to its project.
fn verdict_target(tx: &Conn<'_>, v: &Verdict<'_>) -> Result<String> {
    let (learning_project, own_issue, held): (String, String, bool) = tx
        .query_opt(
            "SELECT project_id, issue_id, held_at IS NOT NULL FROM learnings WHERE id = ?1",
            [v.learning_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?
        .ok_or_else(|| Error::not_found("learning", v.learning_id))?;
    if held && own_issue != v.issue_id {
        return Err(Error::not_found("learning", v.learning_id));
    }
    let issue_project: String = tx.query_row(
        "SELECT project_id FROM issues WHERE id = ?1",
        [v.issue_id],
        |r| r.get(0),
    )?;
    if learning_project != issue_project {
        return Err(Error::not_found(
            "learning",
            format!(
                "{} in this project (feedback is given on learnings of the bound issue's project)",
                v.learning_id
            ),
        ));
    }
    Ok(own_issue)
}

/// Store another issue's verdict (replacing that issue's earlier one), make the
/// learning fresh again when it helped, and requalify it. Returns the standing before.
fn store_verdict(tx: &Conn<'_>, v: &Verdict<'_>, at: &str) -> Result<(u8, bool)> {
    tx.execute(
        "INSERT INTO learning_feedback(learning_id, issue_id, outcome, note, agent_type, actor, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (learning_id, issue_id) DO UPDATE SET outcome = excluded.outcome,
             note = excluded.note, agent_type = excluded.agent_type, actor = excluded.actor,
             at = excluded.at",
        params![
            v.learning_id,
            v.issue_id,
            v.outcome.as_str(),
            v.note,
            v.agent_type,
            v.actor,
            at
        ],
    )?;
    if v.outcome == Outcome::Helped {
        tx.execute(
            "UPDATE learnings SET fresh_at = ?2 WHERE id = ?1",
            params![v.learning_id, at],
        )?;
    }
    requalify(tx, v.learning_id, at)
}

/// After a `wrong` verdict: flag the learning for review once [`FLAG_AFTER_WRONG`]
/// issues said so (history `flagged`), unless it is flagged already.
fn flag_when_wrong_enough(tx: &Conn<'_>, v: &Verdict<'_>, at: &str) -> Result<()> {
    let (wrong, flagged): (u32, bool) = tx.query_row(
        "SELECT (SELECT count(*) FROM learning_feedback
                 WHERE learning_id = ?1 AND outcome = 'wrong'), flagged
         FROM learnings WHERE id = ?1",
        [v.learning_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    if wrong < FLAG_AFTER_WRONG || flagged {
        return Ok(());
    }
    let before = standing(tx, v.learning_id)?;
    tx.execute(
        "UPDATE learnings SET flagged = 1, updated_at = ?2 WHERE id = ?1",
        params![v.learning_id, at],
    )?;
    let note = format!("{wrong} issues said it is wrong: a person should review it");
    record(
        tx,
        v.learning_id,
        &Change {
            event: "flagged",
            actor: "cairn",
            note: Some(&note),
            issue_id: Some(v.issue_id),
            related_id: None,
            before: Some(before),
            at,
        },
    )
}

/// The work of `issue_id` was approved (a phase verdict or a PR) or reached done: its
/// `helped` verdicts count more. Called in the transaction of that change; each learning
/// gets one `outcome` history entry per issue.
pub(crate) fn issue_approved(tx: &Conn<'_>, issue_id: &str, actor: &str) -> Result<()> {
    let ids: Vec<String> = tx
        .prepare(
            "SELECT f.learning_id FROM learning_feedback f
             WHERE f.issue_id = ?1 AND f.outcome = 'helped'
               AND NOT EXISTS (SELECT 1 FROM learning_history h
                               WHERE h.learning_id = f.learning_id AND h.issue_id = ?1
                                 AND h.event = 'outcome')
             ORDER BY f.learning_id",
        )?
        .query_map([issue_id], |r| r.get(0))?
        .collect::<Result<_>>()?;
    let at = now_iso();
    for id in ids {
        let before = requalify(tx, &id, &at)?;
        record(
            tx,
            &id,
            &Change {
                event: "outcome",
                actor,
                note: Some("the issue that found it helpful was approved or done"),
                issue_id: Some(issue_id),
                related_id: None,
                before: Some(before),
                at: &at,
            },
        )?;
    }
    Ok(())
}

impl Learnings<'_> {
    /// Record an issue's verdict on a learning of its project (the issue's latest verdict
    /// stands); quality follows the evidence unless a person rated it. Returns the
    /// learning as it is now.
    pub(crate) fn learning_feedback(&self, f: &NewFeedback) -> Result<Learning> {
        check_id("learning_id", &f.learning_id).map_err(|e| Error::InvalidInput(vec![e]))?;
        let note = check_note(f.note.as_deref())?;
        self.store.write(|tx| {
            let issue_id = resolve_issue_id(tx, &f.issue)?
                .ok_or_else(|| Error::not_found("issue", &f.issue))?;
            give_feedback(
                tx,
                &Verdict {
                    learning_id: &f.learning_id,
                    issue_id: &issue_id,
                    outcome: f.outcome,
                    note: note.as_deref(),
                    agent_type: &f.agent_type,
                    actor: &f.actor,
                },
            )?;
            load_by_id(tx, &f.learning_id)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quality_is_a_beta_posterior_mean() {
        assert_eq!(evidence_quality(&QualityEvidence::default()), 50);
        let helped = QualityEvidence {
            helped: 1,
            ..Default::default()
        };
        assert_eq!(evidence_quality(&helped), 60); // (2+1)/(4+1)
        let approved = QualityEvidence {
            helped_approved: 1,
            ..Default::default()
        };
        assert_eq!(evidence_quality(&approved), 71); // (2+3)/(4+3)
        let wrong = QualityEvidence {
            wrong: 2,
            ..Default::default()
        };
        assert_eq!(evidence_quality(&wrong), 33); // 2/(4+2)
        let one_wrong = QualityEvidence {
            wrong: 1,
            ..Default::default()
        };
        assert_eq!(evidence_quality(&one_wrong), 40); // 2/(4+1): one verdict moves it 10
        let not_relevant = QualityEvidence {
            not_relevant: 1,
            ..Default::default()
        };
        assert_eq!(evidence_quality(&not_relevant), 44); // 2/4.5
    }
}
