//! Learnings: reusable patterns and gotchas an agent records on an issue, searched by
//! every later agent.
//!
//! - this file: the domain API on [`Learnings`] (`add_learning`, `search_learnings`,
//!   `learning`, `verify_learning`, `rate_learning`, `reindex_learnings`), the quality
//!   gates, and the SQLite side (table `learnings`, history in `learning_history`).
//! - [`text`]: which characters a learning may hold; the duplicate-pattern normal form.
//! - [`query`]: agent text → search slots (stemming, prefixes, no parse failures) and
//!   the ranking blend with its documented normalisation.
//! - [`index`]: the derived tantivy index, its cross-process life cycle, the search.
//! - [`meta`]: each learning's standing as a search needs it, kept per process.
//! - [`lifecycle`]: merges, supersession, feedback and the quality it implies, age, the
//!   history rows.
//! - [`semantic`]: learning embeddings (the vault's model), backfill, exact cosine.
//!
//! Decisions where the spec is silent: a learning belongs to the project its issue had
//! when it was recorded; `learning_type` defaults to `pattern`; surrounding whitespace
//! of pattern and context is trimmed, everything else is stored as given (after the
//! character policy of [`text`]); `applies_to` entries are relative path prefixes
//! (no absolute paths, no `..`, no `~`).

mod graph;
mod hold;
mod index;
mod lifecycle;
mod meta;
mod query;
mod semantic;
mod sizes;
mod tail;
mod text;
pub(crate) mod trust;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::store::db::{Conn, Row, params};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use graph::GRAPH_MIN;
pub use index::{IndexerStats, LearningIndex, Ranking, SearchScope};
pub(crate) use lifecycle::{CodeSignature, issue_approved, restates};
pub use lifecycle::{DUPLICATE_COSINE, FeedbackCounts, Outcome, same_lesson, word_overlap};
pub use query::{STOP_WORDS, ScoreBreakdown};
pub(crate) use sizes::{Activity, Day, Sizes};
pub(crate) use text::normalize_pattern;
pub use trust::Trust;

use crate::base::{new_id, now_iso};
use crate::embed::Embed;
use crate::error::{Error, FieldError, Result};
use crate::issues::{find_project, resolve_issue_id};
use crate::store::Store;

/// Limits on learning fields, shared by the CLI and the MCP schemas.
pub(crate) mod limits {
    pub(crate) const PATTERN_MIN: usize = 50;
    pub(crate) const PATTERN_MAX: usize = 2_000;
    pub(crate) const CONTEXT_MIN: usize = 100;
    pub(crate) const CONTEXT_MAX: usize = 10_000;
    pub(crate) const APPLIES_TO_MAX: usize = 20;
    pub(crate) const APPLIES_TO_ITEM_MAX: usize = 512;
    pub(crate) const QUERY_MAX: usize = 1_000;
    pub(crate) const LIMIT_DEFAULT: usize = 50;
    pub(crate) const LIMIT_MAX: usize = 100;
    pub(crate) const NOTE_MAX: usize = 1_000;
    pub(crate) const ID_MAX: usize = 64;
    /// Learnings one new learning may supersede (an agent may propose at most
    /// [`super::lifecycle::PROPOSALS_PER_CALL`] of them).
    pub(crate) const SUPERSEDES_MAX: usize = 20;
    /// Entries of each kind the review queue lists.
    pub(crate) const REVIEW_MAX: usize = 200;
    /// Quality scores run from 0 to this.
    pub(crate) const QUALITY_MAX: u8 = 100;
    /// Candidates taken by BM25 before the blend: `max(2 × limit, 100)`.
    pub(crate) const CANDIDATES_MIN: usize = 100;
}

/// What kind of lesson a learning is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LearningType {
    Convention,
    Gotcha,
    Pattern,
}

impl LearningType {
    pub(crate) const ALL: [LearningType; 3] = [
        LearningType::Convention,
        LearningType::Gotcha,
        LearningType::Pattern,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LearningType::Convention => "convention",
            LearningType::Gotcha => "gotcha",
            LearningType::Pattern => "pattern",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<LearningType> {
        LearningType::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// A recorded learning.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Learning {
    pub id: String,
    pub(crate) pattern: String,
    pub(crate) context: Option<String>,
    /// Path prefixes the learning applies to.
    pub(crate) applies_to: Vec<String>,
    pub(crate) learning_type: LearningType,
    /// 0-100; new learnings start at 50.
    pub(crate) quality_score: u8,
    /// Verified by a person.
    pub(crate) verified: bool,
    /// Identifier of the issue it was recorded on.
    pub(crate) issue: String,
    /// Slug of its project.
    pub(crate) project: String,
    pub(crate) created_by: String,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    /// The learning that replaced this one, if any (it then leaves default results).
    pub(crate) superseded_by: Option<String>,
    /// When a person archived it (it then leaves every search until restored); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub archived_at: Option<String>,
    /// Other issues that recorded the same lesson (merged into this one).
    pub confirmations: u32,
    /// The standing verdicts of issues that used it.
    pub feedback: FeedbackCounts,
    /// Issues said it is wrong: a person should review it (`cairn learnings verify`).
    pub(crate) needs_review: bool,
    /// Unverified and nobody confirmed it or found it helpful for the project's age
    /// limit: its quality counts less in the ranking.
    pub(crate) stale: bool,
    /// How far to trust it: `held` (its text directs the reader to act dangerously:
    /// waiting for a person), `flagged` (said to be wrong), `agent` (one agent's word),
    /// `confirmed` (other issues recorded or used it), `verified` (by a person).
    pub trust: Trust,
    /// Held: the rules its text matched (docs/security.md, "Memory poisoning"). Absent
    /// otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_rules: Vec<String>,
    /// Learnings this one proposes to supersede, waiting for a person or independent
    /// evidence; until then both stay in results. Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub proposed_supersedes: Vec<String>,
    /// Learnings proposed to supersede this one (it stays in results until a proposal is
    /// accepted). Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub proposed_successors: Vec<String>,
}

/// A learning as `add_learning` answers: the one recorded, or the existing learning the
/// new one was merged into.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Added {
    #[serde(flatten)]
    pub learning: Learning,
    /// The lesson was already recorded in this project: no row was added; the existing
    /// learning (this one) got a confirmation from the new one's issue.
    pub merged: bool,
    /// Embedding similarity with the learning it was merged into (1 for the same text).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-format" = "float"))]
    pub(crate) similarity: Option<f32>,
    /// Learnings this one superseded (at once: they were this issue's own, unverified).
    pub(crate) superseded: Vec<String>,
    /// Learnings this one proposes to supersede (another issue's, or verified): they
    /// stay in results until a person or independent evidence accepts. Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) proposed: Vec<String>,
}

/// What a new learning needs.
#[derive(Debug, Clone)]
pub struct NewLearning {
    /// Issue id or identifier.
    pub issue: String,
    pub pattern: String,
    pub context: Option<String>,
    pub applies_to: Vec<String>,
    pub learning_type: Option<LearningType>,
    pub created_by: String,
    /// The agent type of the session, or `cli` (recorded with a confirmation).
    pub agent_type: String,
    /// Merge into an existing learning of the project that says the same (default);
    /// `false` stores a second row on purpose.
    pub merge: bool,
    /// Learnings (of the same project) this one replaces; a learning that supersedes
    /// others is never merged.
    pub supersedes: Vec<String>,
    /// A person records it (the CLI, the page): its supersessions take effect at once.
    /// An agent's supersession of another issue's learning, or of a verified one, is a
    /// proposal (see [`lifecycle::propose`]).
    pub person: bool,
}

/// One search request.
#[derive(Debug, Clone)]
pub struct LearningSearch {
    pub query: String,
    /// Project references (id or slug) are resolved before searching.
    pub scope: SearchScope,
    /// Default 50, at most 100.
    pub limit: Option<usize>,
    /// Learnings below this quality are left out, unless verified.
    pub min_quality_score: Option<u8>,
    /// Return superseded learnings too (marked with `superseded_by`).
    pub include_superseded: bool,
    /// Return archived and held learnings too (marked with `archived_at`, `trust:
    /// held`): a person's view; no agent argument sets it.
    pub include_archived: bool,
    /// Leave out learnings below this trust level.
    pub min_trust: Option<Trust>,
}

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

/// One issue's verdict on a learning (`learning_feedback`).
#[derive(Debug, Clone)]
pub struct NewFeedback {
    pub learning_id: String,
    /// Issue id or identifier: the issue the verdict comes from.
    pub issue: String,
    pub outcome: Outcome,
    pub note: Option<String>,
    pub agent_type: String,
    pub actor: String,
}

/// One search hit: the learning and its score.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(transform = score_after_updated_at)]
pub(crate) struct LearningHit {
    #[serde(flatten)]
    pub(crate) learning: Learning,
    pub(crate) score: ScoreBreakdown,
    /// Lower-ranked learnings that say much the same as this one (embeddings at least 0.8 similar, or at least 0.45 with nearly all the code of one in the other), listed here instead of taking places of their own; best first. An answer lists at most `limit` of them in all. Absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) similar: Vec<SimilarHit>,
    /// More restatements of this hit that were found but left out (an answer lists at most `limit` restatements in all). Absent when none.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) similar_omitted: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A hit's schema lists `score` as required right after `updated_at`, where `tools/list`
/// has shown it since before [`Learning`] gained its lifecycle fields.
fn score_after_updated_at(schema: &mut schemars::Schema) {
    let Some(serde_json::Value::Array(required)) = schema.get_mut("required") else {
        return;
    };
    if let Some(i) = required.iter().position(|r| r == "score") {
        let score = required.remove(i);
        let at = required
            .iter()
            .position(|r| r == "updated_at")
            .map_or(required.len(), |u| u + 1);
        required.insert(at, score);
    }
}

/// A learning listed under a hit it restates.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(transform = score_after_updated_at)]
pub(crate) struct SimilarHit {
    #[serde(flatten)]
    pub(crate) learning: Learning,
    pub(crate) score: ScoreBreakdown,
    /// Cosine similarity of its embedding with the hit's.
    pub(crate) similarity: f32,
}

/// Search results, best first.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SearchResults {
    pub(crate) results: Vec<LearningHit>,
    pub count: usize,
    /// Whether semantic recall (embeddings) took part; when false, `semantic_unavailable`
    /// says why and the ranking is lexical.
    pub(crate) semantic: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) semantic_unavailable: Option<String>,
}

impl SearchResults {
    /// Every learning found, in reading order (each hit, then those listed under it),
    /// with the hit it is listed under (`None` for a hit).
    pub(crate) fn listed(&self) -> impl Iterator<Item = (&Learning, Option<&Learning>)> {
        self.results.iter().flat_map(|h| {
            std::iter::once((&h.learning, None))
                .chain(h.similar.iter().map(|s| (&s.learning, Some(&h.learning))))
        })
    }

    /// Every learning found, in reading order.
    pub fn learnings(&self) -> impl Iterator<Item = &Learning> {
        self.listed().map(|(l, _)| l)
    }
}

/// One entry of a learning's history.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HistoryEntry {
    /// `created`, `verified`, `rated`, `merged`, `supersedes`, `superseded`, `feedback`,
    /// `outcome`, `flagged` or `aged`.
    pub event: String,
    pub(crate) quality_before: Option<u8>,
    pub(crate) quality_after: u8,
    pub(crate) verified_before: Option<bool>,
    pub(crate) verified_after: bool,
    pub actor: String,
    pub(crate) note: Option<String>,
    pub(crate) at: String,
    /// The issue the change came from (merged, feedback, outcome, flagged).
    pub(crate) issue: Option<String>,
    /// The other learning (supersedes, superseded).
    pub(crate) related: Option<String>,
}

/// A learning with its supersession chain and history, oldest first.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LearningDetail {
    #[serde(flatten)]
    pub learning: Learning,
    /// Learnings this one replaced, and the ones they replaced, nearest first.
    pub(crate) predecessors: Vec<String>,
    /// Its successor, that one's successor, ..., the current learning last.
    pub(crate) successors: Vec<String>,
    pub history: Vec<HistoryEntry>,
}

/// A pending proposal that `new` supersede `old`, with both sides as they stand.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Proposal {
    pub old: Learning,
    pub new: Learning,
    /// The proposer's issue (identifier).
    pub issue: String,
    pub actor: String,
    pub at: String,
}

/// What waits for a person: held learnings, supersession proposals, flagged learnings.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReviewQueue {
    pub held: Vec<Learning>,
    pub proposals: Vec<Proposal>,
    pub flagged: Vec<Learning>,
}

/// What a rebuild did.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReindexReport {
    /// Learnings in the rebuilt index.
    pub learnings: u64,
    /// Learnings whose ageing was recorded in their history now.
    pub(crate) aged: u64,
    /// Learnings that had no embedding and were embedded now.
    pub(crate) embedded: u64,
    /// Why learnings could not be embedded (the model is missing), if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) semantic_unavailable: Option<String>,
    pub(crate) millis: u64,
}

static SELECT_LEARNING: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
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

fn learning_from_row(r: &Row) -> crate::error::Result<Learning> {
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

fn load_by_id(c: &Conn<'_>, id: &str) -> Result<Learning> {
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
fn with_proposals<'l>(
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

/// The rules of [`hold`] a learning's text (pattern and context, as embedded) matches:
/// empty when an agent's learning of this text may be served.
pub(crate) fn held_rules(pattern: &str, context: Option<&str>) -> Vec<&'static str> {
    hold::held_rules(&semantic::embedding_text(pattern, context))
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
fn load_by_seqs(c: &Conn<'_>, seqs: &[u64]) -> Result<HashMap<u64, Learning>> {
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

fn trimmed_len(
    errors: &mut Vec<FieldError>,
    field: &str,
    text: &str,
    min: usize,
    max: usize,
    hint: &str,
) {
    let n = text.chars().count();
    if n < min {
        errors.push(FieldError::new(
            field,
            format!("must be at least {min} characters (got {n}); {hint}"),
        ));
    } else if n > max {
        errors.push(FieldError::new(
            field,
            format!("must be at most {max} characters (got {n})"),
        ));
    }
}

/// Check an `applies_to` entry: a relative path prefix.
fn check_prefix(field: &str, p: &str) -> Option<FieldError> {
    let bad = |m: &str| Some(FieldError::new(field, m.to_string()));
    if p.trim().is_empty() {
        return bad("must not be blank; give a path prefix such as \"src/api/\"");
    }
    if p.chars().count() > limits::APPLIES_TO_ITEM_MAX {
        return bad(&format!(
            "must be at most {} characters",
            limits::APPLIES_TO_ITEM_MAX
        ));
    }
    let b = p.as_bytes();
    if b[0] == b'/' || b[0] == b'\\' || b[0] == b'~' || (b.len() > 1 && b[1] == b':') {
        return bad(
            "must be a path relative to the repository root (no leading /, \\, ~ or drive letter)",
        );
    }
    if p.split(['/', '\\']).any(|c| c == "..") {
        return bad("must not contain a `..` component");
    }
    None
}

/// Validate and clean a new learning; every problem, with its field.
fn validate(new: &NewLearning) -> Result<(String, Option<String>, Vec<String>)> {
    let mut errors = Vec::new();
    let pattern = match crate::text::strict("pattern", &new.pattern) {
        Ok(p) => p.trim().to_string(),
        Err(e) => {
            errors.push(e);
            String::new()
        }
    };
    if errors.is_empty() {
        trimmed_len(
            &mut errors,
            "pattern",
            &pattern,
            limits::PATTERN_MIN,
            limits::PATTERN_MAX,
            "start with the subject and say what to do or avoid, and why",
        );
        if pattern.chars().count() >= limits::PATTERN_MIN
            && !pattern.chars().any(char::is_alphabetic)
        {
            errors.push(FieldError::new("pattern", "must contain words"));
        }
    }
    let context = match &new.context {
        None => None,
        Some(c) => match crate::text::strict("context", c) {
            Ok(c) => {
                let c = c.trim().to_string();
                trimmed_len(
                    &mut errors,
                    "context",
                    &c,
                    limits::CONTEXT_MIN,
                    limits::CONTEXT_MAX,
                    "say when and where the pattern applies, or leave context out",
                );
                Some(c)
            }
            Err(e) => {
                errors.push(e);
                None
            }
        },
    };
    if new.applies_to.len() > limits::APPLIES_TO_MAX {
        errors.push(FieldError::new(
            "applies_to",
            format!("at most {} path prefixes", limits::APPLIES_TO_MAX),
        ));
    }
    let mut applies_to = Vec::new();
    for (i, p) in new.applies_to.iter().enumerate() {
        let field = format!("applies_to[{i}]");
        match crate::text::exact(&field, p).map(|()| p.clone()) {
            Ok(p) => match check_prefix(&field, &p) {
                Some(e) => errors.push(e),
                None => applies_to.push(p),
            },
            Err(e) => errors.push(e),
        }
    }
    if new.supersedes.len() > limits::SUPERSEDES_MAX {
        errors.push(FieldError::new(
            "supersedes",
            format!("at most {} learning ids", limits::SUPERSEDES_MAX),
        ));
    }
    for (i, id) in new.supersedes.iter().enumerate() {
        if let Err(e) = check_id(&format!("supersedes[{i}]"), id) {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok((pattern, context, applies_to))
    } else {
        Err(Error::InvalidInput(errors))
    }
}

/// Check a learning id given by a caller: a plain `lrn_...` token.
fn check_id(field: &str, id: &str) -> std::result::Result<(), FieldError> {
    let ok = !id.is_empty()
        && id.len() <= limits::ID_MAX
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!(
                "must be a learning id such as \"lrn_0123456789abcdef\" (letters, digits and _, at most {} characters)",
                limits::ID_MAX
            ),
        ))
    }
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

fn check_note(note: Option<&str>) -> Result<Option<String>> {
    let Some(n) = note else { return Ok(None) };
    let n = crate::text::strict("note", n).map_err(|e| Error::InvalidInput(vec![e]))?;
    if n.chars().count() > limits::NOTE_MAX {
        return Err(Error::invalid(
            "note",
            format!("must be at most {} characters", limits::NOTE_MAX),
        ));
    }
    Ok(Some(n))
}

/// What the learnings operations work over: the store, the process's tantivy index of
/// it, and the embedding model (shared with the vault).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Learnings<'a> {
    pub(crate) store: &'a Store,
    pub(crate) index: &'a LearningIndex,
    pub(crate) embedder: &'a dyn Embed,
}

impl Learnings<'_> {
    /// Record learnings, all in one transaction, then index them (or wake the background
    /// indexer: see [`index`]); they are searchable when this returns. Each passes the
    /// quality gates; a pattern already recorded on the same issue (same normal form)
    /// is refused with [`Error::Conflict`] naming the existing learning. A learning that
    /// says the same as one of its project ([`lifecycle`], "Merging") is merged into it
    /// unless `merge` is false or it supersedes others.
    pub(crate) fn add_learnings(&self, items: &[NewLearning]) -> Result<Vec<Added>> {
        let mut clean = Vec::with_capacity(items.len());
        for new in items {
            clean.push(validate(new)?);
        }
        let texts: Vec<String> = clean
            .iter()
            .map(|(p, c, _)| semantic::embedding_text(p, c.as_deref()))
            .collect();
        // The duplicate check's cheap half first: the project's best BM25 matches of each
        // text that share enough words and pass the guards. Only a learning with such a
        // candidate needs its embedding for the check.
        let mut candidates: Vec<Vec<Candidate>> = vec![Vec::new(); items.len()];
        for (n, new) in items.iter().enumerate() {
            if merges(new) {
                candidates[n] = self.plausible_duplicates(&new.issue, &texts[n])?;
            }
        }
        // A one-shot process embeds every learning before the transaction (a few ms per
        // text) and stores the vectors in it; a long-lived one embeds only those with a
        // candidate (their vector is stored too) and leaves the rest to its background
        // indexer (see [`semantic`]). Without the model the learnings are stored alone,
        // backfilled later, and merged only on the same normal form.
        let one_shot = self.index.deferred_from() == u64::MAX;
        let wanted: Vec<usize> = (0..items.len())
            .filter(|&n| one_shot || !candidates[n].is_empty())
            .collect();
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; items.len()];
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
        // The dense half, read before the transaction and re-checked in it.
        let mut similar: Vec<Option<(String, f32)>> = vec![None; items.len()];
        for (n, v) in vectors.iter().enumerate() {
            if let (Some(v), false) = (v, candidates[n].is_empty()) {
                similar[n] = self.closest_duplicate(v, &candidates[n])?;
            }
        }
        let added = self.store.write(|tx| {
            let mut added = Vec::with_capacity(items.len());
            for (n, (new, (pattern, context, applies_to))) in items.iter().zip(clean).enumerate() {
                let issue_id = resolve_issue_id(tx, &new.issue)?
                    .ok_or_else(|| Error::not_found("issue", &new.issue))?;
                let (project_id, identifier): (String, String) = tx.query_row(
                    "SELECT project_id, identifier FROM issues WHERE id = ?1",
                    [&issue_id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?;
                let norm = text::normalize_pattern(&pattern);
                let existing: Option<String> = tx
                    .prepare("SELECT id FROM learnings WHERE issue_id = ?1 AND pattern_norm = ?2")?
                    .query_opt(params![issue_id, norm], |r| r.get(0))?;
                if let Some(existing_id) = existing {
                    return Err(Error::Conflict {
                        message: format!(
                            "{identifier} already has this pattern (compared ignoring case, \
                             spacing and punctuation) as learning {existing_id}; record a \
                             different lesson or refine the existing one"
                        ),
                        existing_id: Some(existing_id),
                    });
                }
                if merges(new) {
                    let same_form: Option<String> = tx
                        .prepare(&format!(
                            "SELECT id FROM learnings WHERE project_id = ?1 AND pattern_norm = ?2
                               AND {IN_CIRCULATION} ORDER BY seq LIMIT 1"
                        ))?
                        .query_opt(params![project_id, norm], |r| r.get(0))?;
                    let into = match same_form {
                        Some(id) => Some((id, 1.0)),
                        None => match similar[n].take() {
                            Some((id, cos)) if is_current(tx, &id)? => Some((id, cos)),
                            _ => None,
                        },
                    };
                    if let Some((id, similarity)) = into {
                        lifecycle::confirm(
                            tx,
                            &id,
                            &lifecycle::Confirmation {
                                issue_id: &issue_id,
                                agent_type: &new.agent_type,
                                actor: &new.created_by,
                                similarity,
                            },
                        )?;
                        added.push((id, true, Some(similarity), Vec::new(), Vec::new()));
                        continue;
                    }
                }
                let id = new_id("lrn");
                let now = now_iso();
                let kind = new.learning_type.unwrap_or(LearningType::Pattern);
                // A person's text is theirs to judge; an agent's that directs the reader
                // to act dangerously waits for one.
                let held = if new.person {
                    Vec::new()
                } else {
                    held_rules(&pattern, context.as_deref())
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
                    issue_id,
                    project_id,
                    pattern,
                    norm,
                    context,
                    serde_json::to_string(&applies_to)?,
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
                        issue_id: Some(&issue_id),
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
                            issue_id: Some(&issue_id),
                            related_id: None,
                            before: Some((50, false)),
                            at: &now,
                        },
                    )?;
                }
                let (mut superseded, mut proposed) = (Vec::new(), Vec::new());
                for old in &new.supersedes {
                    if new.person || own_unverified(tx, old, &issue_id)? {
                        lifecycle::supersede(tx, old, &id, &new.created_by, None)?;
                        superseded.push(old.clone());
                    } else {
                        proposed.push(old.clone());
                    }
                }
                if proposed.len() > lifecycle::PROPOSALS_PER_CALL {
                    return Err(Error::invalid(
                        "supersedes",
                        format!(
                            "an agent may propose to supersede at most {} learnings of other \
                             issues (or verified ones) per call; {} given",
                            lifecycle::PROPOSALS_PER_CALL,
                            proposed.len()
                        ),
                    ));
                }
                for old in &proposed {
                    lifecycle::propose(tx, old, &id, &issue_id, &new.created_by)?;
                }
                if let Some(v) = &vectors[n] {
                    let seq: i64 =
                        tx.query_row("SELECT seq FROM learnings WHERE id = ?1", [&id], |r| {
                            r.get(0)
                        })?;
                    semantic::insert(tx, seq as u64, self.embedder.model_id(), v)?;
                }
                added.push((id, false, None, superseded, proposed));
            }
            Ok(added)
        })?;
        self.index.after_insert(self.store);
        self.store.read(|c| {
            added
                .iter()
                .map(|(id, merged, similarity, superseded, proposed)| {
                    Ok(Added {
                        learning: load_by_id(c, id)?,
                        merged: *merged,
                        similarity: *similarity,
                        superseded: superseded.clone(),
                        proposed: proposed.clone(),
                    })
                })
                .collect()
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
                vector: None,
                ranking: Ranking::Lexical,
                include_superseded: false,
                include_archived: false,
                min_trust: None,
                // A lexical ranking groups nothing.
                signature: &|_| None,
            },
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

    /// Search learnings: BM25 over pattern, applies_to and context fused with embedding
    /// similarity, blended with field priority and quality (see [`query`]).
    pub(crate) fn search_learnings(&self, s: &LearningSearch) -> Result<SearchResults> {
        self.search_learnings_ranked(s, Ranking::Blend)
    }

    /// [`Learnings::search_learnings`] under another ordering: `cairn eval` compares the
    /// blend with BM25 alone and cosine alone on the same candidates and filters.
    pub(crate) fn search_learnings_ranked(
        &self,
        s: &LearningSearch,
        ranking: Ranking,
    ) -> Result<SearchResults> {
        let mut errors = Vec::new();
        let n = s.query.chars().count();
        if n > limits::QUERY_MAX {
            errors.push(FieldError::new(
                "query",
                format!("must be at most {} characters (got {n})", limits::QUERY_MAX),
            ));
        }
        let limit = s.limit.unwrap_or(limits::LIMIT_DEFAULT);
        if !(1..=limits::LIMIT_MAX).contains(&limit) {
            errors.push(FieldError::new(
                "limit",
                format!("must be between 1 and {}", limits::LIMIT_MAX),
            ));
        }
        if s.min_quality_score.is_some_and(|q| q > limits::QUALITY_MAX) {
            errors.push(FieldError::new(
                "min_quality_score",
                format!("must be between 0 and {}", limits::QUALITY_MAX),
            ));
        }
        if !errors.is_empty() {
            return Err(Error::InvalidInput(errors));
        }
        let parsed = query::parse(&s.query)?;
        let scope = match &s.scope {
            SearchScope::Project(r) => SearchScope::Project(self.project_id(r)?),
            SearchScope::OtherProjects(r) => SearchScope::OtherProjects(self.project_id(r)?),
            SearchScope::All => SearchScope::All,
        };
        let (vector, semantic_unavailable) = match ranking {
            Ranking::Lexical => (None, Some("lexical ranking requested".to_string())),
            Ranking::Blend | Ranking::FixedQuality | Ranking::Dense => {
                match self.embedder.embed_query(&s.query) {
                    Ok(v) => {
                        // Not the caller's failure: the learnings stay lexical until a later
                        // search or `reindex` embeds them.
                        if let Err(e) = self.backfill_embeddings(semantic::BACKFILL_PER_SEARCH) {
                            tracing::warn!("embedding learnings that had none failed ({e})");
                        }
                        (Some(v), None)
                    }
                    Err(e) => (None, Some(e.to_string())),
                }
            }
        };
        let ranked = self.index.search(
            self.store,
            &index::IndexSearch {
                query: &parsed,
                scope: &scope,
                min_quality: s.min_quality_score,
                candidates: (2 * limit).max(limits::CANDIDATES_MIN),
                limit,
                vector: vector.as_deref(),
                ranking,
                include_superseded: s.include_superseded,
                include_archived: s.include_archived,
                min_trust: s.min_trust,
                signature: &|seq| self.signature(seq),
            },
        )?;
        // One snapshot and one lock round-trip for all rows.
        let results = self.store.snapshot(|c| {
            let mut out: Vec<LearningHit> = Vec::with_capacity(ranked.len());
            // Head seq → its place in `out`.
            let mut place: HashMap<u64, usize> = HashMap::new();
            let seqs: Vec<u64> = ranked.iter().map(|r| r.seq).collect();
            let mut rows = load_by_seqs(c, &seqs)?;
            for r in &ranked {
                let Some(mut learning) = rows.remove(&r.seq) else {
                    continue;
                };
                // Report the standing the blend used (the same snapshot).
                learning.quality_score = r.quality;
                learning.verified = r.verified;
                // A restatement whose head is gone (deleted since the index saw it)
                // stands on its own.
                match r
                    .similar_to
                    .and_then(|(h, sim)| Some((*place.get(&h)?, sim)))
                {
                    Some((i, similarity)) => out[i].similar.push(SimilarHit {
                        learning,
                        score: r.score,
                        similarity,
                    }),
                    None => {
                        place.insert(r.seq, out.len());
                        out.push(LearningHit {
                            learning,
                            score: r.score,
                            similar: Vec::new(),
                            similar_omitted: r.similar_omitted,
                        });
                    }
                }
            }
            out.truncate(limit);
            Ok(out)
        })?;
        Ok(SearchResults {
            count: results.len(),
            results,
            semantic: vector.is_some(),
            semantic_unavailable,
        })
    }

    /// The [`lifecycle::CodeSignature`] of learning `seq`'s text as embedded (pattern and
    /// context), for grouping restatements: kept by the index, or read now; `None` when
    /// it cannot be read (it then restates nothing by its code).
    fn signature(&self, seq: u64) -> Option<std::sync::Arc<lifecycle::CodeSignature>> {
        self.index.signature(seq, || {
            crate::metrics::cost::count(crate::metrics::cost::Unit::TextsRead, 1);
            self.store.read(|c| {
                c.query_opt(
                    "SELECT pattern, context FROM learnings WHERE seq = ?1",
                    [seq as i64],
                    |r| {
                        let context: Option<String> = r.get(1)?;
                        Ok(semantic::embedding_text(
                            &r.get::<_, String>(0)?,
                            context.as_deref(),
                        ))
                    },
                )
            })
        })
    }

    /// Embed up to `max` learnings that have no embedding yet (see [`semantic`]), of
    /// those a background indexer does not embed; returns how many. Needs the model.
    fn backfill_embeddings(&self, max: usize) -> Result<usize> {
        let after = self.index.embedded_upto.load(Ordering::Relaxed);
        let (n, reached) = if max == usize::MAX {
            semantic::backfill_all(self.store, self.embedder)?
        } else {
            let span = semantic::Span {
                after,
                below: self.index.deferred_from(),
            };
            semantic::backfill(self.store, self.embedder, span, max, semantic::Urgency::Now)?
        };
        self.index
            .embedded_upto
            .fetch_max(reached, Ordering::Relaxed);
        if n > 0 {
            tracing::info!(learnings = n, "embedded learnings that had no embedding");
        }
        Ok(n)
    }

    fn project_id(&self, reference: &str) -> Result<String> {
        self.store.read(|c| {
            find_project(c, reference)?
                .map(|p| p.id)
                .ok_or_else(|| Error::ProjectNotFound(reference.to_string()))
        })
    }

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

    fn change_standing(
        &self,
        id: &str,
        change: Standing,
        actor: &str,
        note: Option<&str>,
    ) -> Result<Learning> {
        let note = check_note(note)?;
        let event = match change {
            Standing::Rate(_) => "rated",
            Standing::Verify => "verified",
            Standing::Flag => "flagged",
            Standing::Archive => "archived",
            Standing::Restore => "restored",
            Standing::Release => "released",
        };
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
                    lifecycle::requalify(tx, id, &now)?;
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
                            message: format!(
                                "learning {id} is not held: there is nothing to release"
                            ),
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
                                format!(
                                    "learning {id} is not archived: there is nothing to restore"
                                )
                            },
                            existing_id: None,
                        });
                    }
                    tx.execute(
                        "UPDATE learnings SET archived_at = ?2, updated_at = ?3 WHERE id = ?1",
                        params![id, archive.then_some(now.as_str()), now],
                    )?;
                }
            }
            lifecycle::record(
                tx,
                id,
                &lifecycle::Change {
                    event,
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
            lifecycle::supersede(tx, old, new, actor, None)?;
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
            lifecycle::reject(tx, old, new, actor, note.as_deref())?;
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
            lifecycle::unsupersede(tx, old, actor, note.as_deref())?;
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

    /// Record an issue's verdict on a learning of its project (the issue's latest verdict
    /// stands); quality follows the evidence unless a person rated it. Returns the
    /// learning as it is now.
    pub(crate) fn learning_feedback(&self, f: &NewFeedback) -> Result<Learning> {
        check_id("learning_id", &f.learning_id).map_err(|e| Error::InvalidInput(vec![e]))?;
        let note = check_note(f.note.as_deref())?;
        self.store.write(|tx| {
            let issue_id = resolve_issue_id(tx, &f.issue)?
                .ok_or_else(|| Error::not_found("issue", &f.issue))?;
            lifecycle::give_feedback(
                tx,
                &lifecycle::Verdict {
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

    /// Record an `aged` history entry for every learning that aged since it was last
    /// fresh (a reindex runs this; `show` does it for its learning).
    pub(crate) fn record_aging(&self) -> Result<usize> {
        let now = lifecycle::now_secs();
        self.store
            .write(|tx| lifecycle::record_aging(tx, None, now))
    }

    /// See [`crate::Cairn::wait_for_learning_graphs`].
    pub(crate) fn wait_for_graphs(&self) -> Result<usize> {
        self.index.wait_for_graphs(self.store)
    }

    /// Rebuild the learnings index from SQLite, and embed every learning that has no
    /// embedding (when the model is available).
    pub(crate) fn reindex_learnings(&self) -> Result<ReindexReport> {
        let t = Instant::now();
        let n = self.index.rebuild(self.store)?;
        let aged = self.record_aging()? as u64;
        let (embedded, semantic_unavailable) = match self.embedder.load() {
            Ok(()) => (self.backfill_embeddings(usize::MAX)? as u64, None),
            Err(e) => (0, Some(e.to_string())),
        };
        Ok(ReindexReport {
            learnings: n,
            aged,
            embedded,
            semantic_unavailable,
            millis: t.elapsed().as_millis() as u64,
        })
    }
}

#[cfg(test)]
mod group_commit_tests {
    //! The background indexer of a long-lived process, in-process: every acknowledged
    //! write is found by the next search, and commits are grouped.

    use super::*;
    use crate::embed::HashEmbedder;
    use crate::embed::foreground::Foreground;
    use crate::embed::{EmbedderConfig, ModelEmbedder};
    use crate::issues::{NewIssue, NewProject, create_issue, create_project};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    struct Fixture {
        _dir: tempfile::TempDir,
        store: Store,
        index: LearningIndex,
        embedder: Arc<dyn Embed>,
        foreground: Arc<Foreground>,
        issue: String,
    }

    /// A database with one project and issue, a learnings index with its background
    /// indexer started, and no model (lexical search only: fast and deterministic).
    /// A fixture whose embedder has no model (learnings stay lexical).
    fn fixture() -> Fixture {
        fixture_with(Arc::new(ModelEmbedder::new(EmbedderConfig {
            model_dir: Some("/nonexistent/cairn-model".into()),
            ..Default::default()
        })))
    }

    fn fixture_with(embedder: Arc<dyn Embed>) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("cairn.db");
        let store = Store::open(&db).unwrap();
        create_project(
            &store,
            &NewProject {
                slug: "web".into(),
                name: "web".into(),
                prefix: None,
                path: None,
            },
        )
        .unwrap();
        let issue = create_issue(
            &store,
            &NewIssue {
                project: "web".into(),
                title: "Learn things".into(),
                ..Default::default()
            },
        )
        .unwrap()
        .identifier;
        let index = LearningIndex::new(store.index_dir().join("learnings"));
        let foreground = Arc::new(Foreground::default());
        index
            .start_indexer(store.location(), embedder.clone(), foreground.clone())
            .unwrap();
        Fixture {
            _dir: dir,
            store,
            index,
            embedder,
            foreground,
            issue,
        }
    }

    impl Fixture {
        fn learnings(&self) -> Learnings<'_> {
            Learnings {
                store: &self.store,
                index: &self.index,
                embedder: &*self.embedder,
            }
        }

        /// Record a learning whose pattern holds the word `marker`; its id.
        fn add(&self, marker: &str) -> String {
            self.learnings()
                .add_learning(&NewLearning {
                    issue: self.issue.clone(),
                    pattern: format!(
                        "When touching the {marker} module always run the migration check first, \
                         or the deploy fails"
                    ),
                    context: None,
                    applies_to: vec![],
                    learning_type: None,
                    created_by: "test".into(),
                    agent_type: "test".into(),
                    merge: false,
                    supersedes: Vec::new(),
                    person: false,
                })
                .unwrap()
                .learning
                .id
        }

        /// The first ten hits of a search for `query` over every project.
        fn search(&self, query: &str) -> Vec<LearningHit> {
            self.learnings()
                .search_learnings(&LearningSearch {
                    query: query.into(),
                    scope: SearchScope::All,
                    limit: Some(10),
                    min_quality_score: None,
                    include_superseded: false,
                    include_archived: false,
                    min_trust: None,
                })
                .unwrap()
                .results
        }

        /// The ids a search for `word` returns.
        fn find(&self, word: &str) -> Vec<String> {
            self.search(word)
                .into_iter()
                .map(|h| h.learning.id)
                .collect()
        }

        /// How many learnings the on-disk index holds (read without writing).
        fn on_disk(&self) -> u64 {
            index::disk_watermark(self.index.dir()).unwrap()
        }
    }

    fn marker(t: usize, i: usize) -> String {
        // No marker is a prefix of another (a search expands prefixes).
        format!("zq{}x{}w", ["a", "b", "c", "d", "e", "f", "g", "h"][t], i)
    }

    #[test]
    fn a_query_word_no_learning_has_weighs_nothing_in_field_priority() {
        let f = fixture();
        let id = f.add("zqaxw");
        f.add("zqbxw");
        let priority = |query: &str| {
            let hits = f.search(query);
            let hit = hits.iter().find(|h| h.learning.id == id).expect(query);
            hit.score.field_priority
        };
        assert_eq!(priority("migration check"), 1.0);
        // A misspelt word, and a compound whose words are all new: every query word
        // the learnings have is still in its pattern.
        assert_eq!(priority("migration check migrashun"), 1.0);
        assert_eq!(priority("migration check deploy_window_qzms"), 1.0);
        // A word another learning has still counts against this one.
        assert!(priority("migration check zqbxw") < 0.7);
    }

    #[test]
    fn a_write_is_found_by_the_very_next_search() {
        let f = fixture();
        for i in 0..30 {
            let m = marker(0, i);
            let id = f.add(&m);
            assert_eq!(
                f.find(&m),
                vec![id],
                "learning {i} not found right after its write"
            );
        }
        f.index.flush();
        assert_eq!(f.on_disk(), 30);
    }

    #[test]
    fn writes_from_many_threads_are_all_found_and_committed_in_groups() {
        const THREADS: usize = 8;
        const EACH: usize = 25;
        let f = fixture();
        let written: Vec<(String, String)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let f = &f;
                    s.spawn(move || {
                        (0..EACH)
                            .map(|i| {
                                let m = marker(t, i);
                                let id = f.add(&m);
                                // Read your own write, while the others keep writing.
                                assert_eq!(f.find(&m), vec![id.clone()], "{m} not found");
                                (m, id)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        assert_eq!(written.len(), THREADS * EACH);
        for (m, id) in &written {
            assert_eq!(f.find(m), vec![id.clone()], "{m}");
        }
        f.index.flush();
        let stats = f.index.indexer_stats();
        assert_eq!(stats.indexed, (THREADS * EACH) as u64, "{stats:?}");
        assert!(stats.commits >= 1, "{stats:?}");
        assert!(
            stats.commits < (THREADS * EACH) as u64,
            "one commit per write: {stats:?}"
        );
        assert_eq!(f.on_disk(), (THREADS * EACH) as u64);
    }

    /// The background indexer starts its commits at least `COMMIT_SPACING` apart: learnings
    /// written one by one in between are found through the tail, and one commit takes
    /// them all.
    #[test]
    fn commits_are_spaced_and_writes_between_them_are_found() {
        const WRITES: usize = 30;
        const PAUSE: Duration = Duration::from_millis(20);
        let f = fixture();
        let started = Instant::now();
        for i in 0..WRITES {
            let m = marker(0, i);
            let id = f.add(&m);
            assert_eq!(f.find(&m), vec![id], "{m} not found right after its write");
            std::thread::sleep(PAUSE);
        }
        let spell = started.elapsed();
        f.index.flush();
        let stats = f.index.indexer_stats();
        assert_eq!(stats.indexed, WRITES as u64, "{stats:?}");
        assert_eq!(f.on_disk(), WRITES as u64);
        // Without spacing each write (20 ms apart, a round takes a few) gets a commit.
        assert!(
            stats.commits < WRITES as u64 / 2,
            "{stats:?}: the writes were not grouped"
        );
        // Rounds start at least COMMIT_SPACING apart, plus the flush's own round.
        let most = spell.as_millis() / index::COMMIT_SPACING.as_millis() + 2;
        assert!(
            u128::from(stats.commits) <= most,
            "{} commits for {WRITES} writes over {spell:?}: more than one per {:?}",
            stats.commits,
            index::COMMIT_SPACING
        );
    }

    /// A long-lived process acknowledges a learning before embedding it: the indexer
    /// thread embeds it afterwards, and a flush (a server's clean exit) waits for that.
    #[test]
    fn the_indexer_embeds_acknowledged_learnings_after_the_write() {
        let embedder = Arc::new(HashEmbedder::new());
        let f = fixture_with(embedder.clone());
        assert_eq!(f.index.deferred_from(), 1, "no learning before the indexer");
        for i in 0..12 {
            f.add(&marker(0, i));
        }
        f.index.flush();
        assert_eq!(f.index.indexer_stats().embedded, 12);
        let rows: i64 = f
            .store
            .read(|c| {
                c.query_row(
                    "SELECT count(*) FROM learning_embeddings WHERE model = ?1",
                    [embedder.model_id()],
                    |r| r.get(0),
                )
            })
            .unwrap();
        assert_eq!(rows, 12);
        // The writes themselves embedded nothing: every text went through the indexer.
        assert_eq!(embedder.stats().texts, 12);
    }

    /// While a call is in flight the indexer does not embed: it waits for a quiet moment,
    /// and runs anyway once [`semantic::BACKGROUND_PATIENCE`] has passed (a server that is
    /// never quiet still embeds what it acknowledged). The learning is found lexically
    /// all along.
    #[test]
    fn background_embedding_waits_for_a_quiet_moment_or_its_patience() {
        let embedder = Arc::new(HashEmbedder::new());
        let f = fixture_with(embedder.clone());
        let call = f.foreground.begin();
        let started = Instant::now();
        let m = marker(0, 0);
        let id = f.add(&m);
        assert_eq!(f.find(&m), vec![id], "found before it is embedded");
        while f.index.indexer_stats().embedded == 0 {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "never embedded while a call stayed in flight: the patience floor is broken"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let waited = started.elapsed();
        assert!(
            waited >= semantic::BACKGROUND_PATIENCE,
            "embedded after {waited:?} with a call in flight: it did not wait for a quiet moment"
        );
        assert_eq!(f.index.indexer_stats().embedded, 1);
        drop(call);
        // Quiet: the next learning is embedded (and a flush waits for it).
        f.add(&marker(0, 1));
        f.index.flush();
        assert_eq!(f.index.indexer_stats().embedded, 2);
    }
}
