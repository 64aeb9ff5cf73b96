//! Writing learnings: the quality gates, the duplicate check (its cheap BM25 half before
//! any embedding, the dense half after), the merge into an existing learning or the new
//! row with its history, hold and supersessions, all in one transaction.

use crate::base::{new_id, now_iso};
use crate::error::{Error, Result};
use crate::issues::resolve_issue_id;
use crate::store::db::{Conn, params};

use super::load::load_by_id;
use super::validate::{Valid, validate};
use super::*;

/// The rules of [`hold`] a learning's text (pattern and context, as embedded) matches:
/// empty when an agent's learning of this text may be served.
pub(crate) fn held_rules(pattern: &str, context: Option<&str>) -> Vec<&'static str> {
    hold::held_rules(&semantic::embedding_text(pattern, context))
}

/// A learning a new one may duplicate: its `seq`, id and embedded text.
#[derive(Debug, Clone)]
struct Candidate {
    seq: u64,
    id: String,
    text: String,
}

/// Whether a new learning may be merged into an existing one.
fn merges(new: &NewLearning) -> bool {
    new.merge && new.supersedes.is_empty()
}

/// The SQL condition of a learning in circulation: neither superseded nor archived (the
/// only learnings a new one may merge into).
const IN_CIRCULATION: &str = "superseded_by IS NULL AND archived_at IS NULL";

/// Whether learning `old` was recorded on `issue_id` and is not verified: an agent of
/// that issue replaces it at once (it corrects its own issue's word). Not found: the
/// supersession's own check names it.
fn own_unverified(c: &Conn<'_>, old: &str, issue_id: &str) -> Result<bool> {
    Ok(c.query_opt(
        "SELECT issue_id, verified FROM learnings WHERE id = ?1",
        [old],
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?)),
    )?
    .is_some_and(|(issue, verified)| issue == issue_id && !verified))
}

/// Whether learning `id` exists and is in circulation.
fn is_current(c: &Conn<'_>, id: &str) -> Result<bool> {
    Ok(c.query_opt(
        &format!("SELECT 1 FROM learnings WHERE id = ?1 AND {IN_CIRCULATION}"),
        [id],
        |r| r.get::<_, i64>(0),
    )?
    .is_some())
}

/// Refuse a pattern its issue already has (the same normal form `norm`), naming the
/// existing learning.
fn refuse_repeat(tx: &Conn<'_>, home: &Home, norm: &str) -> Result<()> {
    let existing: Option<String> = tx
        .prepare("SELECT id FROM learnings WHERE issue_id = ?1 AND pattern_norm = ?2")?
        .query_opt(params![home.issue_id, norm], |r| r.get(0))?;
    match existing {
        Some(existing_id) => Err(Error::Conflict {
            message: format!(
                "{} already has this pattern (compared ignoring case, spacing and \
                 punctuation) as learning {existing_id}; record a different lesson or \
                 refine the existing one",
                home.identifier
            ),
            existing_id: Some(existing_id),
        }),
        None => Ok(()),
    }
}

/// The learning of the project a new one is merged into, with their similarity: the
/// first in circulation with the same normal form (similarity 1), else `similar` (the
/// closest by embedding, read before the transaction) if it is still in circulation.
fn merge_target(
    tx: &Conn<'_>,
    home: &Home,
    norm: &str,
    similar: Option<(String, f32)>,
) -> Result<Option<(String, f32)>> {
    let same_form: Option<String> = tx
        .prepare(&format!(
            "SELECT id FROM learnings WHERE project_id = ?1 AND pattern_norm = ?2
               AND {IN_CIRCULATION} ORDER BY seq LIMIT 1"
        ))?
        .query_opt(params![home.project_id, norm], |r| r.get(0))?;
    Ok(match same_form {
        Some(id) => Some((id, 1.0)),
        None => match similar {
            Some((id, cos)) if is_current(tx, &id)? => Some((id, cos)),
            _ => None,
        },
    })
}

/// Insert a new learning's row with its `created` history, and hold it for a person
/// when an agent's text directs the reader to act dangerously (history `held`). Its id.
fn insert(
    tx: &Conn<'_>,
    new: &NewLearning,
    home: &Home,
    valid: &Valid,
    norm: &str,
) -> Result<String> {
    let id = new_id("lrn");
    let now = now_iso();
    let kind = new.learning_type.unwrap_or(LearningType::Pattern);
    // A person's text is theirs to judge; an agent's that directs the reader to act
    // dangerously waits for one.
    let held = if new.person {
        Vec::new()
    } else {
        held_rules(&valid.pattern, valid.context.as_deref())
    };
    let held_rules = (!held.is_empty()).then(|| held.join(","));
    tx.prepare(
        "INSERT INTO learnings(id, issue_id, project_id, pattern, pattern_norm, context,
            applies_to, learning_type, created_by, created_at, updated_at, fresh_at,
            held_at, held_rules)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?10, ?11, ?12)",
    )?
    .execute(params![
        id,
        home.issue_id,
        home.project_id,
        valid.pattern,
        norm,
        valid.context,
        serde_json::to_string(&valid.applies_to)?,
        kind.as_str(),
        new.created_by,
        now,
        held_rules.as_ref().map(|_| now.as_str()),
        held_rules
    ])?;
    lifecycle::record(
        tx,
        &id,
        &lifecycle::Change {
            event: "created",
            actor: &new.created_by,
            note: None,
            issue_id: Some(&home.issue_id),
            related_id: None,
            before: None,
            at: &now,
        },
    )?;
    if let Some(rules) = &held_rules {
        let note = format!(
            "held for a person: its text matched {rules} (docs/security.md, \
             \"Memory poisoning\")"
        );
        lifecycle::record(
            tx,
            &id,
            &lifecycle::Change {
                event: "held",
                actor: "cairn",
                note: Some(&note),
                issue_id: Some(&home.issue_id),
                related_id: None,
                before: Some((50, false)),
                at: &now,
            },
        )?;
    }
    Ok(id)
}

/// The supersessions new learning `id` asks for: at once for a person, or for its own
/// issue's unverified learnings; a proposal otherwise (at most
/// [`lifecycle::PROPOSALS_PER_CALL`] of them). Returns (superseded, proposed).
fn supersede_or_propose(
    tx: &Conn<'_>,
    new: &NewLearning,
    home: &Home,
    id: &str,
) -> Result<(Vec<String>, Vec<String>)> {
    let (mut superseded, mut proposed) = (Vec::new(), Vec::new());
    for old in &new.supersedes {
        if new.person || own_unverified(tx, old, &home.issue_id)? {
            lifecycle::supersede(tx, old, id, &new.created_by, None)?;
            superseded.push(old.clone());
        } else {
            proposed.push(old.clone());
        }
    }
    if proposed.len() > lifecycle::PROPOSALS_PER_CALL {
        return Err(Error::invalid(
            "supersedes",
            format!(
                "an agent may propose to supersede at most {} learnings of other issues (or \
                 verified ones) per call; {} given",
                lifecycle::PROPOSALS_PER_CALL,
                proposed.len()
            ),
        ));
    }
    for old in &proposed {
        lifecycle::propose(tx, old, id, &home.issue_id, &new.created_by)?;
    }
    Ok((superseded, proposed))
}

/// What the write transaction did with one new learning, before it is read back.
struct Written {
    id: String,
    merged: bool,
    similarity: Option<f32>,
    superseded: Vec<String>,
    proposed: Vec<String>,
}

/// The issue a new learning is recorded on: its id, identifier and project.
struct Home {
    issue_id: String,
    identifier: String,
    project_id: String,
}

impl Home {
    fn of(tx: &Conn<'_>, issue: &str) -> Result<Home> {
        let issue_id =
            resolve_issue_id(tx, issue)?.ok_or_else(|| Error::not_found("issue", issue))?;
        let (project_id, identifier): (String, String) = tx.query_row(
            "SELECT project_id, identifier FROM issues WHERE id = ?1",
            [&issue_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok(Home {
            issue_id,
            identifier,
            project_id,
        })
    }
}

impl Learnings<'_> {
    /// Record learnings, all in one transaction, then index them (or wake the background
    /// indexer: see [`index`]); they are searchable when this returns. Each passes the
    /// quality gates; a pattern already recorded on the same issue (same normal form)
    /// is refused with [`Error::Conflict`] naming the existing learning. A learning that
    /// says the same as one of its project ([`lifecycle`], "Merging") is merged into it
    /// unless `merge` is false or it supersedes others.
    pub(crate) fn add_learnings(&self, items: &[NewLearning]) -> Result<Vec<Added>> {
        let valid = items.iter().map(validate).collect::<Result<Vec<Valid>>>()?;
        let texts: Vec<String> = valid
            .iter()
            .map(|v| semantic::embedding_text(&v.pattern, v.context.as_deref()))
            .collect();
        let candidates = self.duplicate_candidates(items, &texts)?;
        let vectors = self.embed_for_write(&texts, &candidates);
        // The dense half, read before the transaction and re-checked in it.
        let mut similar = self.closest_duplicates(&vectors, &candidates)?;
        let written = self.store.write(|tx| {
            let mut written = Vec::with_capacity(items.len());
            for (n, (new, valid)) in items.iter().zip(valid).enumerate() {
                written.push(self.write_one(
                    tx,
                    new,
                    valid,
                    similar[n].take(),
                    vectors[n].as_deref(),
                )?);
            }
            Ok(written)
        })?;
        self.index.after_insert(self.store);
        self.store.read(|c| {
            written
                .iter()
                .map(|w| {
                    Ok(Added {
                        learning: load_by_id(c, &w.id)?,
                        merged: w.merged,
                        similarity: w.similarity,
                        superseded: w.superseded.clone(),
                        proposed: w.proposed.clone(),
                    })
                })
                .collect()
        })
    }

    /// The duplicate check's cheap half first: for each learning that may merge, the
    /// project's best BM25 matches of its text that share enough words and pass the
    /// guards. Only a learning with such a candidate needs its embedding for the check.
    fn duplicate_candidates(
        &self,
        items: &[NewLearning],
        texts: &[String],
    ) -> Result<Vec<Vec<Candidate>>> {
        let mut candidates: Vec<Vec<Candidate>> = vec![Vec::new(); items.len()];
        for (n, new) in items.iter().enumerate() {
            if merges(new) {
                candidates[n] = self.plausible_duplicates(&new.issue, &texts[n])?;
            }
        }
        Ok(candidates)
    }

    /// The vectors stored with the new learnings. A one-shot process embeds every
    /// learning before the transaction (a few ms per text) and stores the vectors in it; a
    /// long-lived one embeds only those with a candidate (their vector is stored too) and
    /// leaves the rest to its background indexer (see [`semantic`]). Without the model the
    /// learnings are stored alone, backfilled later, and merged only on the same normal
    /// form.
    fn embed_for_write(
        &self,
        texts: &[String],
        candidates: &[Vec<Candidate>],
    ) -> Vec<Option<Vec<f32>>> {
        let one_shot = self.index.deferred_from() == u64::MAX;
        let wanted: Vec<usize> = (0..texts.len())
            .filter(|&n| one_shot || !candidates[n].is_empty())
            .collect();
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        if !wanted.is_empty() {
            let refs: Vec<&str> = wanted.iter().map(|&n| texts[n].as_str()).collect();
            match self.embedder.embed_batch(&refs) {
                Ok(vs) => {
                    for (n, v) in wanted.iter().zip(vs) {
                        vectors[*n] = Some(v);
                    }
                }
                Err(e) => {
                    tracing::warn!("learnings stored without embeddings ({e}); backfilled later")
                }
            }
        }
        vectors
    }

    /// For each new learning with a vector and candidates, the candidate it duplicates
    /// by embedding, if one does ([`Self::closest_duplicate`]).
    fn closest_duplicates(
        &self,
        vectors: &[Option<Vec<f32>>],
        candidates: &[Vec<Candidate>],
    ) -> Result<Vec<Option<(String, f32)>>> {
        let mut similar: Vec<Option<(String, f32)>> = vec![None; vectors.len()];
        for (n, v) in vectors.iter().enumerate() {
            if let (Some(v), false) = (v, candidates[n].is_empty()) {
                similar[n] = self.closest_duplicate(v, &candidates[n])?;
            }
        }
        Ok(similar)
    }

    /// One new learning in the write transaction: refused when its issue has the same
    /// pattern already; merged into the learning of its project it duplicates (the same
    /// normal form, or `similar` if still in circulation); otherwise inserted with its
    /// history, hold, supersessions and vector.
    fn write_one(
        &self,
        tx: &Conn<'_>,
        new: &NewLearning,
        valid: Valid,
        similar: Option<(String, f32)>,
        vector: Option<&[f32]>,
    ) -> Result<Written> {
        let home = Home::of(tx, &new.issue)?;
        let norm = text::normalize_pattern(&valid.pattern);
        refuse_repeat(tx, &home, &norm)?;
        if merges(new)
            && let Some((id, similarity)) = merge_target(tx, &home, &norm, similar)?
        {
            lifecycle::confirm(
                tx,
                &id,
                &lifecycle::Confirmation {
                    issue_id: &home.issue_id,
                    agent_type: &new.agent_type,
                    actor: &new.created_by,
                    similarity,
                },
            )?;
            return Ok(Written {
                id,
                merged: true,
                similarity: Some(similarity),
                superseded: Vec::new(),
                proposed: Vec::new(),
            });
        }
        let id = insert(tx, new, &home, &valid, &norm)?;
        let (superseded, proposed) = supersede_or_propose(tx, new, &home, &id)?;
        if let Some(v) = vector {
            let seq: i64 = tx.query_row("SELECT seq FROM learnings WHERE id = ?1", [&id], |r| {
                r.get(0)
            })?;
            semantic::insert(tx, seq as u64, self.embedder.model_id(), v)?;
        }
        Ok(Written {
            id,
            merged: false,
            similarity: None,
            superseded,
            proposed,
        })
    }

    /// The current learnings of `issue`'s project among the best BM25 matches of `text`
    /// that pass the cheap half of the duplicate rule ([`lifecycle::Lesson::plausible`]).
    fn plausible_duplicates(&self, issue: &str, text: &str) -> Result<Vec<Candidate>> {
        let Some(project_id) = self.store.read(|c| {
            let Some(id) = resolve_issue_id(c, issue)? else {
                return Ok(None);
            };
            c.query_opt("SELECT project_id FROM issues WHERE id = ?1", [&id], |r| {
                r.get::<_, String>(0)
            })
        })?
        else {
            return Ok(Vec::new());
        };
        // A text without a searchable word has no candidates (the same normal form
        // still merges, in the write transaction).
        let Some(words) = query::parse_words(&lifecycle::candidate_query(text)) else {
            return Ok(Vec::new());
        };
        let ranked = self.index.search(
            self.store,
            &index::IndexSearch {
                query: &words,
                scope: &SearchScope::Project(project_id),
                min_quality: None,
                candidates: lifecycle::DUPLICATE_CANDIDATES,
                limit: lifecycle::DUPLICATE_CANDIDATES,
                ranking: Ranking::Lexical,
                include_superseded: false,
                include_archived: false,
                min_trust: None,
                // A lexical ranking groups nothing.
                signature: &|_| None,
            },
            None,
        )?;
        let lesson = lifecycle::Lesson::of(text);
        self.store.read(|c| {
            let mut st = c.prepare(&format!(
                "SELECT id, pattern, context FROM learnings WHERE seq = ?1 AND {IN_CIRCULATION}"
            ))?;
            let mut out = Vec::new();
            for r in &ranked {
                let row = st.query_opt([r.seq as i64], |row| {
                    let pattern: String = row.get(1)?;
                    let context: Option<String> = row.get(2)?;
                    Ok((
                        row.get::<_, String>(0)?,
                        semantic::embedding_text(&pattern, context.as_deref()),
                    ))
                })?;
                if let Some((id, other)) = row
                    && lesson.plausible(&other)
                {
                    out.push(Candidate {
                        seq: r.seq,
                        id,
                        text: other,
                    });
                }
            }
            Ok(out)
        })
    }

    /// The candidate most similar to `vector` by embedding, if at least
    /// [`DUPLICATE_COSINE`]. A candidate not embedded yet (a background indexer's) is
    /// embedded now.
    fn closest_duplicate(
        &self,
        vector: &[f32],
        candidates: &[Candidate],
    ) -> Result<Option<(String, f32)>> {
        let seqs: Vec<u64> = candidates.iter().map(|c| c.seq).collect();
        let mut cosines = self.index.cosines(self.store, vector, &seqs)?;
        let missing: Vec<usize> = (0..candidates.len())
            .filter(|&i| cosines[i].is_none())
            .collect();
        if !missing.is_empty() {
            let refs: Vec<&str> = missing
                .iter()
                .map(|&i| candidates[i].text.as_str())
                .collect();
            if let Ok(vs) = self.embedder.embed_batch(&refs) {
                for (i, w) in missing.iter().zip(vs) {
                    cosines[*i] = Some(crate::embed::dot(vector, &w));
                }
            }
        }
        Ok(candidates
            .iter()
            .zip(cosines)
            .filter_map(|(c, cos)| Some((c, cos?)))
            .filter(|(_, cos)| *cos >= DUPLICATE_COSINE)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(c, cos)| (c.id.clone(), cos)))
    }

    /// Record one learning (see [`Learnings::add_learnings`]).
    pub(crate) fn add_learning(&self, new: &NewLearning) -> Result<Added> {
        let mut out = self.add_learnings(std::slice::from_ref(new))?;
        out.pop()
            .ok_or_else(|| Error::Internal("no learning recorded".into()))
    }
}
