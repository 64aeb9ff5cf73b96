//! The types the learnings API takes and answers: a learning as served, what a new
//! learning, a search and a verdict need, and what searches, reviews and rebuilds
//! return.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{FeedbackCounts, Outcome, ScoreBreakdown, SearchScope, Trust};

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
