//! Learning tools: `add_learning` (on the bound issue) and `search_learnings` (in the
//! bound project, or in the other projects with `cross_project`).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::error::Result;
use crate::learnings::{
    Learning, LearningSearch, LearningType, NewLearning, SearchResults, SearchScope, limits,
};
use crate::mcp::lanes::Lane;
use crate::mcp::tool::{Effect, ToolCtx, ToolDef, tool};
use crate::scope::Profile::*;
use crate::text::{Cleaned, cleaned};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddLearningParams {
    /// The lesson, starting with its subject (at least 50 characters).
    #[schemars(length(min = limits::PATTERN_MIN, max = limits::PATTERN_MAX))]
    pub pattern: String,
    /// When and where it applies (at least 100 characters when given).
    #[schemars(length(min = limits::CONTEXT_MIN, max = limits::CONTEXT_MAX))]
    pub context: Option<String>,
    /// Relative directory or file prefixes it applies to.
    #[serde(default)]
    #[schemars(
        length(max = limits::APPLIES_TO_MAX),
        inner(length(min = 1, max = limits::APPLIES_TO_ITEM_MAX))
    )]
    pub applies_to: Vec<String>,
    /// convention, gotcha or pattern (default pattern).
    pub learning_type: Option<LearningType>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchLearningsParams {
    /// Words to search for; stemmed, the last word also matches as a prefix, `word*` too.
    #[schemars(length(min = 1, max = limits::QUERY_MAX))]
    pub query: String,
    /// Max results (default 50, max 100).
    #[schemars(range(min = 1, max = limits::LIMIT_MAX))]
    pub limit: Option<u32>,
    /// Search the other projects instead of the current one (default false).
    #[serde(default)]
    pub cross_project: bool,
    /// Leave out learnings below this quality (0-100, a number as the spec says: 40.5
    /// keeps 41 and up); verified learnings always pass.
    #[schemars(range(min = 0, max = limits::QUALITY_MAX))]
    pub min_quality_score: Option<f64>,
}

fn add(cx: &ToolCtx<'_>, p: AddLearningParams) -> Result<Cleaned<Learning>> {
    cleaned(|| {
        let issue = cx.work.require_issue()?;
        cx.cairn.add_learning(&NewLearning {
            issue: issue.id.clone(),
            pattern: p.pattern,
            context: p.context,
            applies_to: p.applies_to,
            learning_type: p.learning_type,
            created_by: cx.work.actor.clone(),
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
    })
}

pub fn tools() -> Vec<ToolDef> {
    vec![
        tool(
            "add_learning",
            "Record a reusable pattern or gotcha on the current issue for future agents. Pattern at least 50 characters, context at least 100 when given; a duplicate pattern on the same issue is refused with the existing id.",
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
            "Search learnings of the current project (or the other projects with cross_project), ranked by 50% relevance (BM25 fused with embedding similarity, so paraphrases match) + 30% field priority (how much of the query matched, pattern > applies_to > context) + 20% quality (scaled by relevance). Stemmed words; the last word also matches as a prefix, counting less than an exact word.",
            Effect::ReadOnly,
            json!({ "query": "auto-import", "min_quality_score": 40 }),
            search,
        )
        .profiles(&[Worker, Researcher, Judge, Scanner, Architect, Planner])
        // What agents do before nearly every step: never behind the heavier tools.
        .lane(Lane::Reserved),
    ]
}
