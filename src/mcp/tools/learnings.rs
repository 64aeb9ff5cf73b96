//! Learning tools: `add_learning` (on the bound issue; merged into a learning that says
//! the same), `search_learnings` (in the bound project, or in the other projects with
//! `cross_project`) and `learning_feedback` (the bound issue's verdict on a learning of
//! its project).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::access::scope::Profile::*;
use crate::error::Result;
use crate::learnings::{
    Added, Learning, LearningSearch, LearningType, NewFeedback, NewLearning, Outcome,
    SearchResults, SearchScope, Trust, limits,
};
use crate::mcp::lanes::Lane;
use crate::mcp::tool::{Effect, ToolCtx, ToolDef, tool};
use crate::text::{Cleaned, cleaned};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddLearningParams {
    /// The lesson, starting with its subject (at least 50 characters).
    #[schemars(length(min = limits::PATTERN_MIN, max = limits::PATTERN_MAX))]
    pub(crate) pattern: String,
    /// When and where it applies (at least 100 characters when given).
    #[schemars(length(min = limits::CONTEXT_MIN, max = limits::CONTEXT_MAX))]
    pub(crate) context: Option<String>,
    /// Relative directory or file prefixes it applies to.
    #[serde(default)]
    #[schemars(
        length(max = limits::APPLIES_TO_MAX),
        inner(length(min = 1, max = limits::APPLIES_TO_ITEM_MAX))
    )]
    pub(crate) applies_to: Vec<String>,
    /// convention, gotcha or pattern (default pattern).
    pub(crate) learning_type: Option<LearningType>,
    /// Merge into a learning of this project that already says the same (default true):
    /// the answer is then that learning, with `merged: true`. false stores a second one.
    pub(crate) merge: Option<bool>,
    /// Ids of learnings of this project that this one replaces. Your own issue's
    /// unverified learnings leave default results at once (`superseded`); another
    /// issue's, or a verified one, stay beside yours until a person or independent
    /// evidence accepts (`proposed`; at most 3 per call, 10 pending per issue). A learning
    /// that supersedes others is not merged.
    #[serde(default)]
    #[schemars(
        length(max = limits::SUPERSEDES_MAX),
        inner(length(min = 1, max = limits::ID_MAX))
    )]
    pub(crate) supersedes: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LearningFeedbackParams {
    /// The learning (an id from search_learnings), of the bound issue's project.
    #[schemars(length(min = 1, max = limits::ID_MAX))]
    pub(crate) learning_id: String,
    /// helped, not_relevant or wrong. The bound issue's latest verdict on a learning
    /// replaces its earlier one.
    pub(crate) outcome: Outcome,
    /// What happened, for the people who review it.
    #[schemars(length(max = limits::NOTE_MAX))]
    pub(crate) note: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchLearningsParams {
    /// Words to search for; stemmed, the last word also matches as a prefix, `word*` too;
    /// identifiers such as `health_check_interval` also match whole.
    #[schemars(length(min = 1, max = limits::QUERY_MAX))]
    pub(crate) query: String,
    /// Max results (default 50, max 100).
    #[schemars(range(min = 1, max = limits::LIMIT_MAX))]
    pub(crate) limit: Option<u32>,
    /// Search the other projects instead of the current one (default false).
    #[serde(default)]
    pub(crate) cross_project: bool,
    /// Leave out learnings below this quality (0-100, a number as the spec says: 40.5
    /// keeps 41 and up); verified learnings always pass.
    #[schemars(range(min = 0, max = limits::QUALITY_MAX))]
    pub(crate) min_quality_score: Option<f64>,
    /// Return superseded learnings too, each with `superseded_by` naming its successor
    /// (default false).
    #[serde(default)]
    pub(crate) include_superseded: bool,
    /// Leave out learnings below this trust level: flagged < agent (one agent's word) <
    /// confirmed (other issues recorded it or found it helpful) < verified (by a person).
    pub(crate) min_trust: Option<Trust>,
}

fn add(cx: &ToolCtx<'_>, p: AddLearningParams) -> Result<Cleaned<Added>> {
    cleaned(|| {
        let issue = cx.work.require_issue()?;
        cx.cairn.add_learning(&NewLearning {
            issue: issue.id.clone(),
            pattern: p.pattern,
            context: p.context,
            applies_to: p.applies_to,
            learning_type: p.learning_type,
            created_by: cx.work.actor.clone(),
            agent_type: agent_type(cx),
            merge: p.merge.unwrap_or(true),
            supersedes: p.supersedes,
            person: false,
        })
    })
}

/// The session's agent type as recorded with a confirmation or a verdict.
fn agent_type(cx: &ToolCtx<'_>) -> String {
    cx.work
        .agent_type
        .clone()
        .unwrap_or_else(|| cx.work.actor.clone())
}

fn feedback(cx: &ToolCtx<'_>, p: LearningFeedbackParams) -> Result<Cleaned<Learning>> {
    cleaned(|| {
        let issue = cx.work.require_issue()?;
        cx.cairn.learning_feedback(&NewFeedback {
            learning_id: p.learning_id,
            issue: issue.id.clone(),
            outcome: p.outcome,
            note: p.note,
            agent_type: agent_type(cx),
            actor: cx.work.actor.clone(),
        })
    })
}

fn search(cx: &ToolCtx<'_>, p: SearchLearningsParams) -> Result<SearchResults> {
    let project = cx.work.require_project()?.to_string();
    cx.cairn.search_learnings(&LearningSearch {
        query: p.query,
        scope: if p.cross_project {
            SearchScope::OtherProjects(project)
        } else {
            SearchScope::Project(project)
        },
        limit: p.limit.map(|l| l as usize),
        // Qualities are whole numbers: "at least 40.5" is "at least 41". The schema
        // bounds the value to 0..=100, so the cast cannot truncate.
        min_quality_score: p.min_quality_score.map(|q| q.ceil() as u8),
        include_superseded: p.include_superseded,
        // Archiving and holding are a person's decisions: no agent argument brings
        // those learnings back.
        include_archived: false,
        min_trust: p.min_trust,
    })
}

pub(crate) fn tools() -> Vec<ToolDef> {
    vec![
        tool(
            "add_learning",
            "Record a reusable pattern or gotcha on the current issue for future agents. Pattern at least 50 characters, context at least 100 when given; a duplicate pattern on the same issue is refused with the existing id. A lesson this project already has (said another way) is merged: the answer is the existing learning with merged: true, and your issue counts as a confirmation (merge: false stores a second one). supersedes: [ids] replaces outdated learnings of this project: your own issue's at once, another issue's or a verified one only as a proposal a person or independent evidence accepts (both stay in results until then). A text that tells the reader to act dangerously (fetch and run code, credentials, disabling checks, production targets, instructions to a model) is held for a person: only your issue sees it until released.",
            Effect::Additive { idempotent: false },
            json!({
                "pattern": "Nuxt auto-imports files in app/utils/ — don't add explicit imports or you'll get already-defined errors",
                "context": "Nuxt 4 convention applies to all files in app/utils/, app/composables/, and app/components/ directories. The auto-import system scans these dirs at build time.",
                "applies_to": ["app/utils/", "app/composables/"],
                "learning_type": "gotcha"
            }),
            add,
        )
        .profiles(&[Worker, Researcher, Judge, Scanner, Architect, Planner])
        .bound(),
        tool(
            "search_learnings",
            "Search learnings of the current project (or the other projects with cross_project), ranked by 50% relevance (BM25 fused with embedding similarity, so paraphrases match) + 30% field priority (how much of the query matched, pattern > applies_to > context) + 20% quality (scaled by relevance; from feedback evidence unless a person rated it; halved for stale learnings; +15 for learnings a person verified). Stemmed words; the last word also matches as a prefix, counting less than an exact word; identifiers joined by _ . or - (health_check_interval, producer.go) also match whole. Every hit has trust: flagged, agent (one agent's word), confirmed (other issues recorded it or found it helpful) or verified (by a person); min_trust leaves out those below. Superseded learnings are left out unless include_superseded; a proposed successor and the learning it would replace are both shown, linked by proposed_supersedes / proposed_successors.",
            Effect::ReadOnly,
            json!({ "query": "auto-import", "min_quality_score": 40 }),
            search,
        )
        .profiles(&[Worker, Researcher, Judge, Scanner, Architect, Planner])
        // What agents do before nearly every step: never behind the heavier tools.
        .lane(Lane::Reserved),
        tool(
            "learning_feedback",
            "Say how a learning did for the current issue: helped, not_relevant or wrong (with an optional note). One standing verdict per learning per issue (the latest wins); a verdict from the learning's own issue counts for nothing. Quality follows the evidence (helped from an issue later approved or done counts more); wrong from two issues flags the learning for review.",
            Effect::Additive { idempotent: true },
            json!({ "learning_id": "lrn_0123456789abcdef", "outcome": "helped", "note": "the retry rule fixed the flaky upload test" }),
            feedback,
        )
        .profiles(&[Worker, Researcher, Judge])
        .bound(),
    ]
}
