//! Learnings read from the database as the API answers them: one row with its pending
//! proposals, a search's hits by `seq`, an issue's learnings as a [`Reader`] may see
//! them, and one learning's detail (its supersession chain and history).

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::store::db::{Conn, Row};

use super::validate::check_id;
use super::*;

pub(crate) static SELECT_LEARNING: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    SELECT_LEARNING_TEMPLATE.replace("{independent}", trust::INDEPENDENT)
});

const SELECT_LEARNING_TEMPLATE: &str = "SELECT l.id, l.pattern, l.context, l.applies_to, l.learning_type,
        l.quality_score, l.verified, i.identifier, p.slug, l.created_by, l.created_at,
        l.updated_at, l.superseded_by, l.flagged, coalesce(l.fresh_at, l.created_at), p.settings,
        (SELECT count(*) FROM learning_confirmations c WHERE c.learning_id = l.id),
        (SELECT count(*) FROM learning_feedback f WHERE f.learning_id = l.id AND f.outcome = 'helped'),
        (SELECT count(*) FROM learning_feedback f WHERE f.learning_id = l.id AND f.outcome = 'not_relevant'),
        (SELECT count(*) FROM learning_feedback f WHERE f.learning_id = l.id AND f.outcome = 'wrong'),
        l.archived_at, l.seq, l.held_at IS NOT NULL, l.held_rules, {independent}
    FROM learnings l JOIN issues i ON i.id = l.issue_id JOIN projects p ON p.id = l.project_id";

pub(crate) fn learning_from_row(r: &Row) -> crate::error::Result<Learning> {
    let applies: String = r.get(3)?;
    let kind: String = r.get(4)?;
    let verified: bool = r.get(6)?;
    let fresh: String = r.get(14)?;
    let settings: String = r.get(15)?;
    let needs_review: bool = r.get(13)?;
    let held: bool = r.get(22)?;
    let held_rules: Option<String> = r.get(23)?;
    let stale = crate::base::unix_of(&fresh).is_some_and(|f| {
        lifecycle::is_stale(
            verified,
            f,
            lifecycle::stale_after_secs(&settings),
            lifecycle::now_secs(),
        )
    });
    Ok(Learning {
        id: r.get(0)?,
        pattern: r.get(1)?,
        context: r.get(2)?,
        applies_to: serde_json::from_str(&applies).unwrap_or_default(),
        learning_type: LearningType::parse(&kind).unwrap_or(LearningType::Pattern),
        quality_score: r.get(5)?,
        verified,
        issue: r.get(7)?,
        project: r.get(8)?,
        created_by: r.get(9)?,
        created_at: r.get(10)?,
        updated_at: r.get(11)?,
        superseded_by: r.get(12)?,
        archived_at: r.get(20)?,
        needs_review,
        stale,
        trust: Trust::of(held, needs_review, verified, r.get(24)?),
        held_rules: held_rules
            .filter(|_| held)
            .map(|h| h.split(',').map(String::from).collect())
            .unwrap_or_default(),
        proposed_supersedes: Vec::new(),
        proposed_successors: Vec::new(),
        confirmations: r.get(16)?,
        feedback: FeedbackCounts {
            helped: r.get(17)?,
            not_relevant: r.get(18)?,
            wrong: r.get(19)?,
        },
    })
}

pub(crate) fn load_by_id(c: &Conn<'_>, id: &str) -> Result<Learning> {
    let select = &*SELECT_LEARNING;
    let mut st = c.prepare(&format!("{select} WHERE l.id = ?1"))?;
    let mut l = st
        .query_opt([id], learning_from_row)?
        .ok_or_else(|| Error::not_found("learning", id))?;
    with_proposals(c, std::iter::once(&mut l))?;
    Ok(l)
}

/// Fill in the pending supersession proposals each learning makes or is named by, read
/// by one statement.
pub(crate) fn with_proposals<'l>(
    c: &Conn<'_>,
    learnings: impl IntoIterator<Item = &'l mut Learning>,
) -> Result<()> {
    let mut by_id: HashMap<String, &'l mut Learning> =
        learnings.into_iter().map(|l| (l.id.clone(), l)).collect();
    if by_id.is_empty() {
        return Ok(());
    }
    let ids: Vec<&String> = by_id.keys().collect();
    let ids = serde_json::to_string(&ids)?;
    let among = c.dialect().json_elements("?1", false);
    let pairs: Vec<(String, String)> = c.query_map(
        &format!(
            "SELECT old_id, new_id FROM learning_proposals
             WHERE old_id IN ({among}) OR new_id IN ({among}) ORDER BY at, old_id, new_id"
        ),
        [&ids],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    for (old, new) in pairs {
        if let Some(l) = by_id.get_mut(&old) {
            l.proposed_successors.push(new.clone());
        }
        if let Some(l) = by_id.get_mut(&new) {
            l.proposed_supersedes.push(old);
        }
    }
    Ok(())
}

/// Who reads a learning: a person (the CLI, the page: everything, marked), or an agent
/// bound to an issue (or to none), who never sees an archived learning nor a held one
/// of another issue.
#[derive(Debug, Clone, Copy)]
pub enum Reader<'a> {
    Person,
    /// The agent's bound issue id, if any.
    Agent(Option<&'a str>),
}

impl Reader<'_> {
    /// The agent of a session, bound to its issue if it has one.
    pub(crate) fn agent(work: &crate::access::context::WorkContext) -> Reader<'_> {
        Reader::Agent(work.issue.as_ref().map(|i| i.id.as_str()))
    }

    /// Whether this reader may see `l`, recorded on issue `issue_id`.
    fn sees(&self, l: &Learning, issue_id: &str) -> bool {
        match self {
            Reader::Person => true,
            Reader::Agent(bound) => {
                l.archived_at.is_none() && (l.trust != Trust::Held || *bound == Some(issue_id))
            }
        }
    }
}

/// The learnings recorded on one issue (by id), oldest first, as `reader` may see them:
/// part of `get_issue`.
pub(crate) fn learnings_of_issue(
    c: &Conn<'_>,
    issue_id: &str,
    reader: Reader<'_>,
) -> Result<Vec<Learning>> {
    let select = &*SELECT_LEARNING;
    let mut st = c.prepare(&format!("{select} WHERE l.issue_id = ?1 ORDER BY l.seq"))?;
    let mut rows: Vec<Learning> = st
        .query_map([issue_id], learning_from_row)?
        .collect::<crate::error::Result<_>>()?;
    rows.retain(|l| reader.sees(l, issue_id));
    with_proposals(c, rows.iter_mut())?;
    Ok(rows)
}

/// The learnings of `seqs` that exist, by seq, read by one statement (a search's hits).
pub(crate) fn load_by_seqs(c: &Conn<'_>, seqs: &[u64]) -> Result<HashMap<u64, Learning>> {
    let among = c.dialect().json_elements("?1", true);
    let seqs = serde_json::to_string(seqs)?;
    let select = &*SELECT_LEARNING;
    let mut rows: HashMap<u64, Learning> = c
        .query_map(
            &format!("{select} WHERE l.seq IN ({among})"),
            [&seqs],
            |r| Ok((r.get::<_, i64>("seq")? as u64, learning_from_row(r)?)),
        )?
        .into_iter()
        .collect();
    crate::metrics::cost::count(crate::metrics::cost::Unit::RowsRead, rows.len() as u64);
    with_proposals(c, rows.values_mut())?;
    Ok(rows)
}

impl Learnings<'_> {
    /// One learning with its supersession chain and history (an `aged` entry is
    /// recorded first if it aged since the last look).
    pub(crate) fn learning(&self, id: &str) -> Result<LearningDetail> {
        check_id("id", id).map_err(|e| Error::InvalidInput(vec![e]))?;
        let now = lifecycle::now_secs();
        self.store
            .write(|tx| lifecycle::record_aging(tx, Some(id), now))?;
        self.store.snapshot(|c| {
            let learning = load_by_id(c, id)?;
            let mut st = c.prepare(
                "SELECT h.event, h.quality_before, h.quality_after, h.verified_before,
                        h.verified_after, h.actor, h.note, h.at, i.identifier, h.related_id
                 FROM learning_history h LEFT JOIN issues i ON i.id = h.issue_id
                 WHERE h.learning_id = ?1 ORDER BY h.id",
            )?;
            let history = st
                .query_map([id], |r| {
                    Ok(HistoryEntry {
                        event: r.get(0)?,
                        quality_before: r.get(1)?,
                        quality_after: r.get(2)?,
                        verified_before: r.get(3)?,
                        verified_after: r.get(4)?,
                        actor: r.get(5)?,
                        note: r.get(6)?,
                        at: r.get(7)?,
                        issue: r.get(8)?,
                        related: r.get(9)?,
                    })
                })?
                .collect::<crate::error::Result<Vec<_>>>()?;
            // The chain both ways, bounded (a chain is acyclic by construction).
            let mut successors = Vec::new();
            let mut at = learning.superseded_by.clone();
            while let Some(next) = at.filter(|_| successors.len() < 1_000) {
                at = c
                    .query_opt(
                        "SELECT superseded_by FROM learnings WHERE id = ?1",
                        [&next],
                        |r| r.get::<_, Option<String>>(0),
                    )?
                    .flatten();
                successors.push(next);
            }
            let mut predecessors = Vec::new();
            let mut frontier = vec![id.to_string()];
            while let Some(cur) = frontier.pop().filter(|_| predecessors.len() < 1_000) {
                let before: Vec<String> = c
                    .prepare("SELECT id FROM learnings WHERE superseded_by = ?1 ORDER BY seq DESC")?
                    .query_map([&cur], |r| r.get(0))?
                    .collect::<crate::error::Result<_>>()?;
                for b in before {
                    predecessors.push(b.clone());
                    frontier.insert(0, b);
                }
            }
            Ok(LearningDetail {
                learning,
                predecessors,
                successors,
                history,
            })
        })
    }

    /// One learning as `reader` may see it (see [`Reader`]); not found otherwise.
    pub(crate) fn learning_as(&self, id: &str, reader: Reader<'_>) -> Result<LearningDetail> {
        let detail = self.learning(id)?;
        let issue_id: Option<String> = self.store.read(|c| {
            c.query_opt("SELECT issue_id FROM learnings WHERE id = ?1", [id], |r| {
                r.get(0)
            })
        })?;
        match issue_id {
            Some(issue) if reader.sees(&detail.learning, &issue) => Ok(detail),
            _ => Err(Error::not_found("learning", id)),
        }
    }
}
