//! `cairn eval learnings SET`: the learnings search measured on a graded set.
//!
//! The set is JSONL (format: `docs/learnings.md`, "Evaluation"): `learning` lines and
//! `query` lines. The run loads every learning into a fresh temporary database through
//! the real add path (`add_learnings`, embeddings included), applies `quality` and
//! `verified` through the domain API (`rate_learning`, `verify_learning`), then runs
//! every query through the real search, bound to the query's project (or
//! `cross_project`), three times: the blend, BM25 alone and cosine alone
//! ([`Ranking`]), on the same filters, and two baselines fused from them
//! ([`super::metrics::rrf`]): the reciprocal-rank fusion of the blend and cosine
//! (`rrf`), and that of BM25 and cosine (`rrf-lexical-dense`). Each query
//! belongs to the set's tuning part or its held-out part (`part`, written by
//! `tests/eval/split.py` by topic cluster); the figures are reported for the whole set
//! and for each part. Latency is per query, end to end (query embedding included).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::Cairn;
use crate::error::{Error, FieldError, Result};
use crate::issues::{NewIssue, NewProject};
use crate::learnings::{LearningSearch, LearningType, NewLearning, Ranking, SearchScope};

use super::metrics::{QueryScore, Summary, by_category, first_relevant, p50, rrf};

/// The query categories of a set.
pub(crate) const CATEGORIES: [&str; 4] = ["identifier", "keyword", "paraphrase", "symptom"];
/// Results the metrics look at.
const DEPTH: usize = 10;
/// Results taken from the blend and from cosine for their fusion. The search takes at
/// least `limits::CANDIDATES_MIN` (100) candidates either way, so the first 10 are those
/// a search for 10 returns.
const FUSED_DEPTH: usize = 50;
/// RRF's rank constant, as its authors and most systems set it.
const RRF_K: f64 = 60.0;
const ACTOR: &str = "eval";

/// One learning of a set.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetLearning {
    pub(crate) key: String,
    pub(crate) project: String,
    pub(crate) pattern: String,
    #[serde(default)]
    pub(crate) context: Option<String>,
    #[serde(default)]
    pub(crate) applies_to: Vec<String>,
    #[serde(default)]
    pub(crate) learning_type: Option<LearningType>,
    #[serde(default)]
    pub(crate) quality: Option<u8>,
    #[serde(default)]
    pub(crate) verified: bool,
}

/// One graded query of a set.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetQuery {
    pub(crate) key: String,
    pub(crate) category: String,
    pub(crate) query: String,
    pub(crate) project: String,
    /// Learning key → grade (2 the answer, 1 partly useful).
    pub(crate) relevant: HashMap<String, u32>,
    #[serde(default)]
    pub(crate) cross_project: bool,
    /// The part of the set the query is in (default: tuning).
    #[serde(default)]
    pub(crate) part: Part,
}

/// Where a query of a set may be looked at: weights and fusion are chosen on the tuning
/// part only; the held-out part is reported, never tuned on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Part {
    #[default]
    Tune,
    Heldout,
}

impl Part {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Part::Tune => "tune",
            Part::Heldout => "heldout",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line {
    Learning(SetLearning),
    Query(SetQuery),
}

/// A parsed, checked evaluation set.
#[derive(Debug, Clone)]
pub(crate) struct EvalSet {
    pub(crate) learnings: Vec<SetLearning>,
    pub(crate) queries: Vec<SetQuery>,
}

impl EvalSet {
    /// Parse JSONL text; every problem is reported with its line number.
    pub(crate) fn parse(text: &str) -> Result<EvalSet> {
        let mut learnings = Vec::new();
        let mut queries = Vec::new();
        let (lines, mut errors) = super::jsonl::<Line>(text);
        for line in lines {
            match line {
                Line::Learning(l) => learnings.push(l),
                Line::Query(q) => queries.push(q),
            }
        }
        let mut keys = HashSet::new();
        for l in &learnings {
            if !keys.insert(l.key.as_str()) {
                errors.push(FieldError::new(l.key.clone(), "duplicate learning key"));
            }
        }
        let mut query_keys = HashSet::new();
        for q in &queries {
            if !query_keys.insert(q.key.as_str()) {
                errors.push(FieldError::new(q.key.clone(), "duplicate query key"));
            }
            if !CATEGORIES.contains(&q.category.as_str()) {
                errors.push(FieldError::new(
                    q.key.clone(),
                    format!("category must be one of {}", CATEGORIES.join(", ")),
                ));
            }
            for k in q.relevant.keys().filter(|k| !keys.contains(k.as_str())) {
                errors.push(FieldError::new(
                    q.key.clone(),
                    format!("grades unknown learning {k}"),
                ));
            }
        }
        if queries.is_empty() {
            errors.push(FieldError::new("set", "has no query lines"));
        }
        if errors.is_empty() {
            Ok(EvalSet { learnings, queries })
        } else {
            Err(Error::InvalidInput(errors))
        }
    }

    /// Read and parse a set file.
    pub(crate) fn load(path: &Path) -> Result<EvalSet> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        EvalSet::parse(&text)
    }
}

/// The figures of one ranking on some queries: overall and per category.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Figures {
    pub(crate) overall: Summary,
    pub(crate) categories: BTreeMap<String, Summary>,
}

/// The figures of one ranking.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SystemReport {
    /// `cairn`, `lexical`, `dense`, `rrf` (of `cairn` and `dense`) or
    /// `rrf-lexical-dense` (of `lexical` and `dense`).
    pub(crate) system: String,
    /// On the whole set.
    pub(crate) overall: Summary,
    pub(crate) categories: BTreeMap<String, Summary>,
    /// On each part the set has (`tune`, `heldout`).
    pub(crate) parts: BTreeMap<Part, Figures>,
    /// Median search latency in milliseconds (query embedding included; for a fusion,
    /// both searches it fuses).
    pub(crate) p50_ms: f64,
}

/// One query's outcome under one ranking.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Outcome {
    /// The rank (from 1) of the first relevant learning (graded 1 or 2) in the top 10,
    /// if any: what MRR@10 reads.
    pub(crate) relevant_at: Option<usize>,
    pub(crate) ndcg10: f64,
    pub(crate) mrr10: f64,
    /// The keys of the first three learnings, in order.
    pub(crate) top: Vec<String>,
}

/// One query and its outcome under each ranking (`--json` only: which queries a
/// ranking misses, and what it puts first instead).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct QueryReport {
    pub(crate) key: String,
    pub(crate) part: Part,
    pub(crate) category: String,
    /// By system name, as in [`EvalReport::systems`].
    pub(crate) systems: BTreeMap<String, Outcome>,
}

/// The result of a run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct EvalReport {
    /// The set's file name.
    pub(crate) set: String,
    pub(crate) learnings: usize,
    pub(crate) queries: usize,
    /// Whether the embedding model was available (else `dense` is empty and `cairn` is
    /// lexical).
    pub(crate) semantic: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) semantic_unavailable: Option<String>,
    /// Seconds spent loading the set (adds, embeddings, ratings).
    pub(crate) load_seconds: f64,
    pub(crate) systems: Vec<SystemReport>,
    /// Every query, in the set's order.
    pub(crate) per_query: Vec<QueryReport>,
}

/// The rankings searched, in report order; [`FUSIONS`] follow them.
const SYSTEMS: [(&str, Ranking); 3] = [
    ("cairn", Ranking::Blend),
    ("lexical", Ranking::Lexical),
    ("dense", Ranking::Dense),
];
const BLEND: usize = 0;
const LEXICAL: usize = 1;
const DENSE: usize = 2;
const _: () = assert!(
    matches!(SYSTEMS[BLEND].1, Ranking::Blend)
        && matches!(SYSTEMS[LEXICAL].1, Ranking::Lexical)
        && matches!(SYSTEMS[DENSE].1, Ranking::Dense)
);
/// The reciprocal-rank fusions reported after [`SYSTEMS`]: name and the two systems
/// fused (indexes into [`SYSTEMS`]).
const FUSIONS: [(&str, [usize; 2]); 2] = [
    ("rrf", [BLEND, DENSE]),
    ("rrf-lexical-dense", [LEXICAL, DENSE]),
];

/// Load `set` (named `name` in the report) into a temporary database and measure the
/// three rankings and the fusions. `progress` receives one line per step (for stderr).
pub(crate) fn run(set: &EvalSet, name: &str, mut progress: impl FnMut(&str)) -> Result<EvalReport> {
    let dir = tempfile::tempdir().map_err(|e| Error::io(Path::new("tempdir"), e))?;
    let cairn = Cairn::open(&dir.path().join("eval.db"))?;
    let started = Instant::now();
    let ids = load(&cairn, set, &mut progress)?;
    let load_seconds = started.elapsed().as_secs_f64();
    let keys: HashMap<&str, &str> = ids
        .iter()
        .map(|(k, id)| (id.as_str(), k.as_str()))
        .collect();

    let mut runs = Runs::new(set.queries.len());
    for (n, q) in set.queries.iter().enumerate() {
        if n % 25 == 0 {
            progress(&format!("query {}/{}", n + 1, set.queries.len()));
        }
        let ranked = runs.rank(&cairn, &keys, q)?;
        runs.score(q, &ranked);
    }
    let systems = runs
        .names
        .iter()
        .zip(&runs.scored)
        .zip(runs.latency.iter_mut())
        .map(|((name, scores), lat)| system_report(name, scores, lat))
        .collect();
    Ok(EvalReport {
        set: name.to_string(),
        learnings: set.learnings.len(),
        queries: set.queries.len(),
        semantic: runs.semantic,
        semantic_unavailable: runs.semantic_unavailable,
        load_seconds,
        systems,
        per_query: runs.per_query,
    })
}

/// The queries run so far, per system (in the order of `names`: [`SYSTEMS`], then
/// [`FUSIONS`]).
struct Runs<'a> {
    names: Vec<&'static str>,
    scored: Vec<Vec<(&'a SetQuery, QueryScore)>>,
    /// Milliseconds per query.
    latency: Vec<Vec<f64>>,
    semantic: bool,
    semantic_unavailable: Option<String>,
    per_query: Vec<QueryReport>,
}

impl<'a> Runs<'a> {
    fn new(queries: usize) -> Self {
        let names: Vec<&str> = SYSTEMS
            .iter()
            .map(|(n, _)| *n)
            .chain(FUSIONS.iter().map(|(n, _)| *n))
            .collect();
        Runs {
            scored: vec![Vec::new(); names.len()],
            latency: vec![Vec::new(); names.len()],
            names,
            semantic: true,
            semantic_unavailable: None,
            per_query: Vec::with_capacity(queries),
        }
    }

    /// The keys each system ranks for `q` (up to [`FUSED_DEPTH`]), timing the searches.
    fn rank(
        &mut self,
        cairn: &Cairn,
        keys: &HashMap<&str, &str>,
        q: &SetQuery,
    ) -> Result<Vec<Vec<String>>> {
        let search = LearningSearch {
            query: q.query.clone(),
            scope: if q.cross_project {
                SearchScope::OtherProjects(q.project.clone())
            } else {
                SearchScope::Project(q.project.clone())
            },
            limit: Some(FUSED_DEPTH),
            min_quality_score: None,
            include_superseded: false,
            include_archived: false,
            min_trust: None,
        };
        let mut ranked: Vec<Vec<String>> = Vec::with_capacity(self.names.len());
        for (i, (_, ranking)) in SYSTEMS.iter().enumerate() {
            let t = Instant::now();
            let r = cairn.search_learnings_ranked(&search, *ranking)?;
            self.latency[i].push(t.elapsed().as_secs_f64() * 1000.0);
            if *ranking == Ranking::Blend && !r.semantic {
                self.semantic = false;
                self.semantic_unavailable = r.semantic_unavailable.clone();
            }
            ranked.push(
                r.learnings()
                    .filter_map(|l| keys.get(l.id.as_str()).map(|k| k.to_string()))
                    .collect(),
            );
        }
        for (f, (_, [a, b])) in FUSIONS.iter().enumerate() {
            let fused = rrf(&[&ranked[*a], &ranked[*b]], RRF_K);
            ranked.push(fused);
            let both =
                self.latency[*a].last().unwrap_or(&0.0) + self.latency[*b].last().unwrap_or(&0.0);
            self.latency[SYSTEMS.len() + f].push(both);
        }
        Ok(ranked)
    }

    /// Score each system's top 10 for `q`.
    fn score(&mut self, q: &'a SetQuery, ranked: &[Vec<String>]) {
        let mut outcomes = BTreeMap::new();
        for (i, (name, ranking)) in self.names.iter().zip(ranked).enumerate() {
            let top10 = &ranking[..ranking.len().min(DEPTH)];
            let score = QueryScore::of(top10, &q.relevant);
            self.scored[i].push((q, score));
            outcomes.insert(
                name.to_string(),
                Outcome {
                    relevant_at: first_relevant(top10, &q.relevant, DEPTH),
                    ndcg10: score.ndcg10,
                    mrr10: score.mrr10,
                    top: ranking.iter().take(3).cloned().collect(),
                },
            );
        }
        self.per_query.push(QueryReport {
            key: q.key.clone(),
            part: q.part,
            category: q.category.clone(),
            systems: outcomes,
        });
    }
}

/// One system's figures on the whole set and on each of its parts.
fn system_report(
    name: &str,
    scores: &[(&SetQuery, QueryScore)],
    latency: &mut [f64],
) -> SystemReport {
    let (overall, categories) = by_category(scores.iter().map(|(q, s)| (q.category.as_str(), *s)));
    let mut parts = BTreeMap::new();
    for part in [Part::Tune, Part::Heldout] {
        let mine: Vec<(&str, QueryScore)> = scores
            .iter()
            .filter(|(q, _)| q.part == part)
            .map(|(q, s)| (q.category.as_str(), *s))
            .collect();
        if !mine.is_empty() {
            let (overall, categories) = by_category(mine);
            parts.insert(
                part,
                Figures {
                    overall,
                    categories,
                },
            );
        }
    }
    SystemReport {
        system: name.to_string(),
        overall,
        categories,
        parts,
        p50_ms: p50(latency),
    }
}

/// Create the set's projects (one issue each), add its learnings, apply ratings and
/// verifications. Returns learning key → id.
fn load(
    cairn: &Cairn,
    set: &EvalSet,
    progress: &mut impl FnMut(&str),
) -> Result<Vec<(String, String)>> {
    let mut projects: Vec<&str> = set
        .learnings
        .iter()
        .map(|l| l.project.as_str())
        .chain(set.queries.iter().map(|q| q.project.as_str()))
        .collect();
    projects.sort_unstable();
    projects.dedup();
    let mut issues = HashMap::new();
    for (i, slug) in projects.iter().enumerate() {
        cairn.create_project(&NewProject {
            slug: slug.to_string(),
            name: slug.to_string(),
            prefix: Some(format!("EV{}", char::from(b'A' + (i % 26) as u8))),
            path: None,
        })?;
        let issue = cairn.create_issue(&NewIssue {
            project: slug.to_string(),
            title: "Evaluation set learnings".to_string(),
            ..Default::default()
        })?;
        issues.insert(*slug, issue.identifier);
    }
    let mut ids = Vec::with_capacity(set.learnings.len());
    for (n, batch) in set.learnings.chunks(32).enumerate() {
        progress(&format!(
            "adding learnings {}/{}",
            (n * 32 + batch.len()),
            set.learnings.len()
        ));
        let new: Vec<NewLearning> = batch
            .iter()
            .map(|l| NewLearning {
                issue: issues[l.project.as_str()].clone(),
                pattern: l.pattern.clone(),
                context: l.context.clone(),
                applies_to: l.applies_to.clone(),
                learning_type: l.learning_type,
                created_by: ACTOR.to_string(),
                agent_type: ACTOR.to_string(),
                // The graded set's learnings are distinct lessons by design; merging is
                // measured on the lifecycle set.
                merge: false,
                supersedes: Vec::new(),
                person: false,
            })
            .collect();
        let added = cairn.add_learnings(&new).map_err(|e| in_set(e, batch))?;
        for (l, a) in batch.iter().zip(added.into_iter().map(|a| a.learning)) {
            if let Some(q) = l.quality {
                cairn.rate_learning(&a.id, q, ACTOR, None)?;
            }
            if l.verified {
                cairn.verify_learning(&a.id, ACTOR, None)?;
            }
            ids.push((l.key.clone(), a.id));
        }
    }
    Ok(ids)
}

/// Name the set's learning keys in an add error (the set is invalid, not Cairn).
fn in_set(e: Error, batch: &[SetLearning]) -> Error {
    match e {
        Error::InvalidInput(fields) => Error::InvalidInput(
            fields
                .into_iter()
                .map(|f| {
                    FieldError::new(
                        format!(
                            "{} (in learnings {}..{})",
                            f.field,
                            batch.first().map_or("", |l| l.key.as_str()),
                            batch.last().map_or("", |l| l.key.as_str())
                        ),
                        f.message,
                    )
                })
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reports_every_problem_with_its_place() {
        let text = r#"{"type":"learning","key":"L1","project":"p","pattern":"x"}
{"type":"learning","key":"L1","project":"p","pattern":"y"}
{"type":"query","key":"Q1","category":"vibes","query":"a","project":"p","relevant":{"L9":2}}
not json
"#;
        let Err(Error::InvalidInput(errors)) = EvalSet::parse(text) else {
            panic!("invalid set accepted")
        };
        let text: Vec<String> = errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        let all = text.join("\n");
        assert!(all.contains("L1: duplicate learning key"), "{all}");
        assert!(all.contains("Q1: category must be one of"), "{all}");
        assert!(all.contains("Q1: grades unknown learning L9"), "{all}");
        assert!(all.contains("line 4"), "{all}");
    }
}
