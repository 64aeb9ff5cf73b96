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

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::base::{iso_of, now_iso, unix_of};
use crate::error::{Error, Result};
use crate::store::db::{Conn, params};

/// Embedding similarity from which two learnings may be the same lesson.
pub const DUPLICATE_COSINE: f32 = 0.87;
/// Word overlap (Jaccard of the normal form's words) from which two learnings may be
/// the same lesson: below every duplicate the rule merges on the pairs set (the lowest
/// was 0.22), and cheap, so a learning is embedded for the check only when a candidate
/// passes it and the guards.
pub(crate) const DUPLICATE_JACCARD: f64 = 0.2;
/// Embedding similarity from which a search lists a learning under a higher-ranked one
/// as a restatement (`similar`) instead of giving it a place of its own. Looser than
/// [`DUPLICATE_COSINE`]: nothing is lost when two distinct lessons are grouped (both are
/// shown in full), while a restatement left apart takes the place of another lesson.
/// Chosen on the tuning queries of the lifecycle set (docs/learnings.md, "Restatements
/// in results").
pub(crate) const SIMILAR_COSINE: f32 = 0.8;
/// Below [`SIMILAR_COSINE`], a learning is still listed under a hit it restates when
/// their embeddings are at least this similar, the code of one (its backticked spans,
/// names with `.`, `_`, `/` or `-`, its numbers) is nearly all in the other
/// ([`RESTATE_CONTAINMENT`]) and the negation and number guards pass
/// ([`restates`]): a one-line summary beside the long account of the same
/// lesson, which this model's cosine puts far apart. Chosen on the tune halves of the
/// pairs set and of the lifecycle set's queries (docs/learnings.md, "Restatements in
/// results").
pub(crate) const RESTATE_COSINE: f32 = 0.45;
/// Share of the shorter side's code tokens found in the other from which two loosely
/// similar learnings restate each other (see [`RESTATE_COSINE`]).
pub(crate) const RESTATE_CONTAINMENT: f64 = 0.85;
/// Learnings of the project (best BM25 matches of the new text) compared with a new one.
pub(crate) const DUPLICATE_CANDIDATES: usize = 10;

/// The words that turn a statement around.
const NEGATIONS: [&str; 10] = [
    "not", "no", "never", "without", "cannot", "avoid", "nothing", "none", "neither", "nor",
];

static WORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[a-z]+(?:'[a-z]+)?").expect("static regex"));
static TOKEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[a-z0-9]+(?:[._/-][a-z0-9]+)*").expect("static regex"));
/// A name of several parts: `.spec.replicas`, `--no-verify`, `src/main.rs`.
static NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[a-z0-9]+(?:[._/-][a-z0-9]+)+").expect("static regex"));
static NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\d+(?:[.:]\d+)*").expect("static regex"));
static CODE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"`([^`]+)`").expect("static regex"));

/// What the guards of the duplicate rule compare: negation words, numbers, identifiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Signature {
    negations: usize,
    numbers: HashSet<String>,
    identifiers: HashSet<String>,
}

/// `text` lower-cased, with typographic apostrophes made plain.
fn lowered(text: &str) -> String {
    text.to_lowercase().replace('\u{2019}', "'")
}

/// The negation words of a lower-cased text, counted in its prose: a negation quoted in
/// code (an error message) or inside a name (a flag such as `--no-verify`) states
/// nothing.
fn negations(lower: &str) -> usize {
    let prose = CODE.replace_all(lower, " ");
    let prose = NAME.replace_all(&prose, " ");
    WORD.find_iter(&prose)
        .filter(|w| NEGATIONS.contains(&w.as_str()) || w.as_str().ends_with("n't"))
        .count()
}

/// The numbers and versions of a text.
fn numbers(text: &str) -> HashSet<String> {
    NUMBER
        .find_iter(text)
        .map(|m| m.as_str().to_string())
        .collect()
}

impl Signature {
    pub(crate) fn of(text: &str) -> Signature {
        let lower = lowered(text);
        let mut identifiers: HashSet<String> = CODE
            .captures_iter(text)
            // A sentence's full stop inside the quotes is not part of the identifier.
            .map(|c| c[1].trim_end_matches(['.', ',', ';', ':']).to_lowercase())
            .collect();
        identifiers.extend(
            TOKEN
                .find_iter(&lower)
                .map(|m| m.as_str())
                .filter(|t| t.contains(['.', '_', '/']))
                .map(String::from),
        );
        Signature {
            negations: negations(&lower),
            numbers: numbers(text),
            identifiers,
        }
    }
    /// Which guard tells `self` and `other` apart, if one does.
    pub(crate) fn differs(&self, other: &Signature) -> Option<&'static str> {
        if self.negations != other.negations {
            Some("negation")
        } else if both_ways(&self.numbers, &other.numbers) {
            Some("numbers")
        } else if both_ways(&self.identifiers, &other.identifiers) {
            Some("identifiers")
        } else {
            None
        }
    }
}

/// What a restatement's code half compares ([`restates`]): the code tokens of a text
/// (the words of its backticked spans, its names with `.`, `_`, `/` or `-`, its
/// numbers), with the negation and number guards of [`Signature`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CodeSignature {
    negations: usize,
    numbers: HashSet<String>,
    tokens: HashSet<String>,
}

impl CodeSignature {
    pub(crate) fn of(text: &str) -> CodeSignature {
        let lower = lowered(text);
        let numbers = numbers(text);
        let mut tokens: HashSet<String> = CODE
            .captures_iter(&lower)
            .flat_map(|c| {
                TOKEN
                    .find_iter(&c[1])
                    .map(|m| m.as_str().to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        tokens.extend(
            TOKEN
                .find_iter(&lower)
                .map(|m| m.as_str())
                .filter(|t| t.contains(['.', '_', '/', '-']))
                .map(String::from),
        );
        tokens.extend(numbers.iter().cloned());
        CodeSignature {
            negations: negations(&lower),
            numbers,
            tokens,
        }
    }

    /// Whether the code of the one with fewer code tokens is nearly all in the other (at
    /// least [`RESTATE_CONTAINMENT`] of it), with the same count of negations and no
    /// number each side lacks.
    fn shares_code_with(&self, other: &CodeSignature) -> bool {
        let fewer = self.tokens.len().min(other.tokens.len());
        fewer > 0
            && self.negations == other.negations
            && !both_ways(&self.numbers, &other.numbers)
            && self.tokens.intersection(&other.tokens).count() as f64 / fewer as f64
                >= RESTATE_CONTAINMENT
    }
}

/// Whether two learnings whose embeddings are `cosine` similar restate each other (a
/// search lists one under the other): at least [`SIMILAR_COSINE`]; or at least
/// [`RESTATE_COSINE`] with the code of one nearly all in the other and the negation and
/// number guards passing. `signatures` are read only when the cosine does not decide.
pub(crate) fn restates<'s>(
    cosine: f32,
    signatures: impl FnOnce() -> Option<(&'s CodeSignature, &'s CodeSignature)>,
) -> bool {
    cosine >= SIMILAR_COSINE
        || (cosine >= RESTATE_COSINE && signatures().is_some_and(|(a, b)| a.shares_code_with(b)))
}

/// Whether each side holds something the other lacks: a changed value, not a detail
/// one side left out.
fn both_ways(a: &HashSet<String>, b: &HashSet<String>) -> bool {
    a.difference(b).next().is_some() && b.difference(a).next().is_some()
}

/// The words of a text's duplicate normal form.
fn words(text: &str) -> HashSet<String> {
    super::text::normalize_pattern(text)
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(String::from)
        .collect()
}

/// Jaccard similarity of the words of two texts (their duplicate normal forms).
pub fn word_overlap(a: &str, b: &str) -> f64 {
    jaccard(&words(a), &words(b))
}

fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        0.0
    } else {
        a.intersection(b).count() as f64 / union as f64
    }
}

/// Words of the candidate search kept from a new learning's text.
const CANDIDATE_WORDS: usize = 12;

/// The query that finds a new learning's candidates: its [`CANDIDATE_WORDS`] longest
/// distinct words (longer words are the rarer, more specific ones), so the search costs
/// the same for a long text as for a short one.
pub(crate) fn candidate_query(text: &str) -> String {
    let form = super::text::normalize_pattern(text);
    let mut seen = HashSet::new();
    let mut words: Vec<&str> = form
        .split(' ')
        .filter(|w| w.chars().count() >= 3 && !super::STOP_WORDS.contains(w) && seen.insert(*w))
        .collect();
    words.sort_by_key(|w| std::cmp::Reverse(w.chars().count()));
    words.truncate(CANDIDATE_WORDS);
    words.join(" ")
}

/// A new learning's text as the cheap half of the duplicate rule reads it, once for all
/// its candidates: its words and its [`Signature`].
pub(crate) struct Lesson {
    words: HashSet<String>,
    signature: Signature,
}

impl Lesson {
    pub(crate) fn of(text: &str) -> Lesson {
        Lesson {
            words: words(text),
            signature: Signature::of(text),
        }
    }

    /// The cheap half of the rule: enough words in common with `other` and no guard
    /// telling the texts apart. Only a candidate that passes it is compared by
    /// embedding.
    pub(crate) fn plausible(&self, other: &str) -> bool {
        jaccard(&self.words, &words(other)) >= DUPLICATE_JACCARD
            && self.signature.differs(&Signature::of(other)).is_none()
    }
}

/// The duplicate rule: embeddings at least [`DUPLICATE_COSINE`] similar, at least
/// [`DUPLICATE_JACCARD`] of the words in common, and no guard telling the texts apart.
pub fn same_lesson(cosine: f32, a: &str, b: &str) -> bool {
    cosine >= DUPLICATE_COSINE && Lesson::of(a).plausible(b)
}

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
pub(crate) struct Evidence {
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
pub(crate) fn evidence_quality(e: &Evidence) -> u8 {
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

fn evidence_of(c: &Conn<'_>, learning_id: &str) -> Result<Evidence> {
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
        Ok(Evidence {
            helped: r.get(0)?,
            helped_approved: r.get(1)?,
            confirmations: r.get(2)?,
            not_relevant: r.get(3)?,
            wrong: r.get(4)?,
        })
    })
}

/// A learning's quality and verified flag, the standing a history row records.
fn standing(c: &Conn<'_>, id: &str) -> Result<(u8, bool)> {
    c.query_opt(
        "SELECT quality_score, verified FROM learnings WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?
    .ok_or_else(|| Error::not_found("learning", id))
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
    let (learning_project, own_issue, held): (String, String, bool) = tx
        .query_opt(
            "SELECT project_id, issue_id, held_at IS NOT NULL FROM learnings WHERE id = ?1",
            [v.learning_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?
        .ok_or_else(|| Error::not_found("learning", v.learning_id))?;
    // A held learning is served to no other issue, not even as the answer to a verdict.
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
    let at = now_iso();
    // A learning's own issue vouches for nothing: its verdict is kept in the history for
    // the people who read it, and moves neither quality, trust nor acceptance.
    let own = own_issue == v.issue_id;
    let before = if own {
        standing(tx, v.learning_id)?
    } else {
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
        requalify(tx, v.learning_id, &at)?
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
        let (wrong, flagged): (u32, bool) = tx.query_row(
            "SELECT (SELECT count(*) FROM learning_feedback
                     WHERE learning_id = ?1 AND outcome = 'wrong'), flagged
             FROM learnings WHERE id = ?1",
            [v.learning_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        if wrong >= FLAG_AFTER_WRONG && !flagged {
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
                    at: &at,
                },
            )?;
        }
    }
    accept_by_evidence(tx, v.learning_id)?;
    Ok(())
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

/// Points a person's verification (trust `verified`) adds to the quality the blend weighs
/// (at most 100). Measured on the tuning part of `tests/eval/learnings.jsonl` (32 verified
/// learnings): nDCG@10 0.950 → 0.953, MRR@10 0.959 → 0.963, every other part and set
/// unchanged or better (docs/learnings.md, "Trust in the ranking"). The other levels
/// are not in the blend: no evaluation set has confirmed or flagged learnings to
/// measure them on, and quality already carries the evidence they come from.
pub(crate) const VERIFIED_BONUS: u8 = 15;

/// Days after which an unverified learning nobody confirmed or found helpful ages.
pub(crate) const STALE_AFTER_DAYS: u32 = 180;
/// What ageing multiplies the quality term of the blend by.
pub(crate) const AGE_FACTOR: f32 = 0.5;

/// A project's age limit in seconds: `settings.learnings.stale_after_days` (at least 1),
/// else [`STALE_AFTER_DAYS`].
pub(crate) fn stale_after_secs(settings: &str) -> i64 {
    let days = serde_json::from_str::<serde_json::Value>(settings)
        .ok()
        .and_then(|v| v.pointer("/learnings/stale_after_days")?.as_u64())
        .filter(|d| *d >= 1)
        .unwrap_or(u64::from(STALE_AFTER_DAYS))
        .min(100 * 365);
    days as i64 * 86_400
}

/// Whether a learning is aged at `now` (seconds).
pub(crate) fn is_stale(verified: bool, fresh_at: i64, stale_after: i64, now: i64) -> bool {
    !verified && now.saturating_sub(fresh_at) > stale_after
}

/// The current time in seconds since the Unix epoch.
pub(crate) fn now_secs() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Record an `aged` history entry (dated when it aged) for every learning (or only
/// `only`) that aged and has none since it was last fresh. Returns how many.
pub(crate) fn record_aging(tx: &Conn<'_>, only: Option<&str>, now: i64) -> Result<usize> {
    let sql = format!(
        "SELECT l.id, coalesce(l.fresh_at, l.created_at), p.settings
         FROM learnings l JOIN projects p ON p.id = l.project_id
         WHERE l.verified = 0 {}
           AND NOT EXISTS (SELECT 1 FROM learning_history h
                           WHERE h.learning_id = l.id AND h.event = 'aged'
                             AND h.at >= coalesce(l.fresh_at, l.created_at))
         ORDER BY l.seq",
        if only.is_some() { "AND l.id = ?1" } else { "" }
    );
    let mut st = tx.prepare(&sql)?;
    let row = |r: &crate::store::db::Row| Ok((r.get(0)?, r.get(1)?, r.get(2)?));
    let rows: Vec<(String, String, String)> = match only {
        Some(id) => st.query_map([id], row)?.collect::<Result<_>>()?,
        None => st.query_map([], row)?.collect::<Result<_>>()?,
    };
    let mut n = 0;
    for (id, fresh, settings) in rows {
        let Some(fresh_at) = unix_of(&fresh) else {
            continue;
        };
        let limit = stale_after_secs(&settings);
        if !is_stale(false, fresh_at, limit, now) {
            continue;
        }
        let at = iso_of(fresh_at + limit);
        let note = format!(
            "nobody confirmed it or found it helpful for {} days: its quality counts {AGE_FACTOR}× in the ranking",
            limit / 86_400
        );
        let before = standing(tx, &id)?;
        record(
            tx,
            &id,
            &Change {
                event: "aged",
                actor: "cairn",
                note: Some(&note),
                issue_id: None,
                related_id: None,
                before: Some(before),
                at: &at,
            },
        )?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_tell_apart_negations_values_and_identifiers() {
        let a = "Run `cargo clippy` before pushing: CI fails on warnings since 1.80.";
        assert!(same_lesson(0.95, a, a));
        assert!(!same_lesson(0.86, a, a), "below the threshold");
        let neg = "Do not run `cargo clippy` before pushing: CI fails on warnings since 1.80.";
        assert_eq!(
            Signature::of(a).differs(&Signature::of(neg)),
            Some("negation")
        );
        let ver = "Run `cargo clippy` before pushing: CI fails on warnings since 1.81.";
        assert_eq!(
            Signature::of(a).differs(&Signature::of(ver)),
            Some("numbers")
        );
        let tool = "Run `cargo fmt` before pushing: CI fails on warnings since 1.80.";
        assert_eq!(
            Signature::of(a).differs(&Signature::of(tool)),
            Some("identifiers")
        );
        // A detail left out on one side is not a different lesson.
        let shorter = "Run `cargo clippy` before pushing: CI fails on warnings.";
        assert_eq!(Signature::of(a).differs(&Signature::of(shorter)), None);
        let curly = "Don\u{2019}t skip `cargo clippy`";
        assert_eq!(Signature::of(curly).negations, 1);
        // A negation quoted in code or inside a flag states nothing.
        let quoted = "The job failed with `cannot connect: no route to host`; pass `--no-verify`.";
        assert_eq!(Signature::of(quoted).negations, 0);
        assert_eq!(
            Signature::of("use uv sync --no-install-project").negations,
            0
        );
    }

    #[test]
    fn a_summary_restates_the_long_account_whose_code_it_shares() {
        // The lifecycle set's K082 beside K042 (cosine 0.49 with the real model).
        let summary = "Produce to orders.v1 with the order_id as message key, always: Kafka \
                       only keeps events in order within one partition.";
        let account = "Order events go to the `orders.v1` topic keyed by `order_id` \
                       (services/api/events/producer.py), so every event of one order lands \
                       in one partition. Keying by `customer_id` spreads them over partitions.";
        let restates_by = |cosine: f32, a: &str, b: &str| {
            let (a, b) = (CodeSignature::of(a), CodeSignature::of(b));
            restates(cosine, || Some((&a, &b)))
        };
        assert!(restates_by(0.49, summary, account));
        assert!(restates_by(0.49, account, summary), "symmetric");
        // Below the floor, the code does not matter.
        assert!(!restates_by(RESTATE_COSINE - 0.01, summary, account));
        // From SIMILAR_COSINE on, the cosine alone decides and the texts are not read.
        assert!(restates(SIMILAR_COSINE, || panic!("read")));
        // Code the summary has and the account lacks: another lesson.
        let other = "Produce to payments.v2 with the payment_id as message key, always.";
        assert!(!restates_by(0.6, other, account));
        // The guards hold: a negation, or a number each side lacks.
        let negated = "Never produce to orders.v1 with the order_id as message key.";
        assert!(!restates_by(0.6, negated, account));
        let v =
            |n: &str| format!("Produce to `orders.v1` keyed by `order_id`; retention {n} days.");
        assert!(!restates_by(0.6, &v("7"), &v("14")));
        assert!(restates_by(0.6, &v("7"), &v("7")));
        // Texts without code restate nothing by their code.
        assert!(!restates_by(
            0.6,
            "Keep events in order.",
            "Keep events in order."
        ));
        // A text that cannot be read restates nothing below SIMILAR_COSINE.
        assert!(!restates(0.6, || None));
    }

    #[test]
    fn quality_is_a_beta_posterior_mean() {
        assert_eq!(evidence_quality(&Evidence::default()), 50);
        let helped = Evidence {
            helped: 1,
            ..Default::default()
        };
        assert_eq!(evidence_quality(&helped), 60); // (2+1)/(4+1)
        let approved = Evidence {
            helped_approved: 1,
            ..Default::default()
        };
        assert_eq!(evidence_quality(&approved), 71); // (2+3)/(4+3)
        let wrong = Evidence {
            wrong: 2,
            ..Default::default()
        };
        assert_eq!(evidence_quality(&wrong), 33); // 2/(4+2)
        let one_wrong = Evidence {
            wrong: 1,
            ..Default::default()
        };
        assert_eq!(evidence_quality(&one_wrong), 40); // 2/(4+1): one verdict moves it 10
        let not_relevant = Evidence {
            not_relevant: 1,
            ..Default::default()
        };
        assert_eq!(evidence_quality(&not_relevant), 44); // 2/4.5
    }

    #[test]
    fn age_limit_comes_from_the_project_settings() {
        assert_eq!(stale_after_secs("{}"), 180 * 86_400);
        assert_eq!(
            stale_after_secs(r#"{"learnings":{"stale_after_days":30}}"#),
            30 * 86_400
        );
        assert_eq!(
            stale_after_secs(r#"{"learnings":{"stale_after_days":0}}"#),
            180 * 86_400
        );
        assert!(is_stale(false, 0, 10, 11));
        assert!(!is_stale(true, 0, 10, 11));
        assert!(!is_stale(false, 0, 10, 10));
    }
}
