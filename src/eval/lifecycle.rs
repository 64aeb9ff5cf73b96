//! The learnings lifecycle measured (docs/learnings.md, "Lifecycle"):
//!
//! - [`pairs`]: the duplicate rule on a labelled set of pairs
//!   (`tests/eval/learning-pairs.jsonl`), precision and recall per split, beside a
//!   lexical-only rule (word Jaccard ≥ [`JACCARD`]) and a dense-only one (cosine ≥
//!   [`DUPLICATE_COSINE`], no guards), with the real model's embeddings; and the looser
//!   rule by which a search lists a restatement under its hit ([`restates`]).
//! - [`lifecycle`]: a timeline set (`tests/eval/learnings-lifecycle.jsonl`) replayed
//!   through the domain API (add with merging and `supersedes`, feedback, issues done or
//!   approved through their real paths), then graded queries: merge precision and
//!   recall, the stale-answer rate, duplicate clutter in the top 10, and MRR with
//!   quality from evidence against quality fixed at 50, lexical-only and dense-only,
//!   per split.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::Cairn;
use crate::embed::dot;
use crate::error::{Error, FieldError, Result};
use crate::issues::{NewIssue, NewProject, Status};
use crate::learnings::{
    CodeSignature, DUPLICATE_COSINE, LearningSearch, LearningType, NewFeedback, NewLearning,
    Outcome, Ranking, SearchScope, restates, same_lesson, word_overlap,
};
use crate::work::prs::{NewPullRequest, Review};

use super::metrics::{Qrels, QueryScore, Summary};

/// The lexical-only baseline's threshold: the lowest word Jaccard with precision 1 on
/// the pairs' tune split (recall 0.12).
pub(crate) const JACCARD: f64 = 0.9;
const ACTOR: &str = "eval";
const DEPTH: usize = 10;

/// One side of a pair.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PairSide {
    pub(crate) pattern: String,
    #[serde(default)]
    pub(crate) context: Option<String>,
}

impl PairSide {
    fn text(&self) -> String {
        match &self.context {
            Some(c) => format!("{}\n{c}", self.pattern),
            None => self.pattern.clone(),
        }
    }
}

/// One labelled pair.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Pair {
    pub(crate) a: PairSide,
    pub(crate) b: PairSide,
    /// `duplicate` or `distinct`.
    pub(crate) label: String,
    pub(crate) kind: String,
    /// `tune` or `holdout`.
    pub(crate) split: String,
}

/// Precision and recall of one rule on one split.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Scores {
    pub(crate) precision: f64,
    pub(crate) recall: f64,
    pub(crate) merged_right: usize,
    pub(crate) merged_wrong: usize,
    pub(crate) missed: usize,
}

impl Scores {
    fn add(&mut self, merged: bool, duplicate: bool) {
        match (merged, duplicate) {
            (true, true) => self.merged_right += 1,
            (true, false) => self.merged_wrong += 1,
            (false, true) => self.missed += 1,
            (false, false) => {}
        }
    }

    fn finish(mut self) -> Scores {
        let merged = self.merged_right + self.merged_wrong;
        self.precision = if merged == 0 {
            1.0
        } else {
            self.merged_right as f64 / merged as f64
        };
        let duplicates = self.merged_right + self.missed;
        self.recall = if duplicates == 0 {
            0.0
        } else {
            self.merged_right as f64 / duplicates as f64
        };
        self
    }
}

/// The pairs report: per split, the rule and the two baselines.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PairsReport {
    pub(crate) pairs: usize,
    /// split → rule (`cairn`, `lexical`, `dense`, `similar`) → scores.
    pub(crate) splits: BTreeMap<String, BTreeMap<String, Scores>>,
    /// kind → (pairs, merged by the rule), both splits.
    pub(crate) kinds: BTreeMap<String, (usize, usize)>,
}

/// Measure the duplicate rule on the pairs in `path`.
pub(crate) fn pairs(
    cairn: &Cairn,
    path: &Path,
    progress: &mut impl FnMut(&str),
) -> Result<PairsReport> {
    let pairs = read_set::<Pair>(path)?;
    progress(&format!("embedding {} pairs", pairs.len()));
    let texts: Vec<String> = pairs
        .iter()
        .flat_map(|p| [p.a.text(), p.b.text()])
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = cairn.embed_texts(&refs)?;
    let mut splits: BTreeMap<String, BTreeMap<String, Scores>> = BTreeMap::new();
    let mut kinds: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (i, p) in pairs.iter().enumerate() {
        let (a, b) = (&texts[2 * i], &texts[2 * i + 1]);
        let cosine = dot(&vectors[2 * i], &vectors[2 * i + 1]);
        let duplicate = p.label == "duplicate";
        let rule = same_lesson(cosine, a, b);
        let split = splits.entry(p.split.clone()).or_default();
        split
            .entry("cairn".into())
            .or_default()
            .add(rule, duplicate);
        split
            .entry("lexical".into())
            .or_default()
            .add(word_overlap(a, b) >= JACCARD, duplicate);
        split
            .entry("dense".into())
            .or_default()
            .add(cosine >= DUPLICATE_COSINE, duplicate);
        let (code_a, code_b) = (CodeSignature::of(a), CodeSignature::of(b));
        let grouped = restates(cosine, || Some((&code_a, &code_b)));
        split
            .entry("similar".into())
            .or_default()
            .add(grouped, duplicate);
        let k = kinds.entry(p.kind.clone()).or_default();
        k.0 += 1;
        k.1 += usize::from(rule);
    }
    for split in splits.values_mut() {
        for s in split.values_mut() {
            *s = s.finish();
        }
    }
    Ok(PairsReport {
        pairs: pairs.len(),
        splits,
        kinds,
    })
}

/// One line of the lifecycle set.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line {
    Learning(LearningLine),
    Feedback {
        learning: String,
        issue: String,
        outcome: Outcome,
    },
    Outcome {
        issue: String,
        /// `done` or `approved`.
        outcome: String,
    },
    Query(QueryLine),
}

/// A learning of the timeline, with its labels.
#[derive(Debug, Clone, Deserialize)]
struct LearningLine {
    key: String,
    project: String,
    issue: String,
    pattern: String,
    #[serde(default)]
    context: Option<String>,
    #[serde(default)]
    applies_to: Vec<String>,
    #[serde(default)]
    learning_type: Option<LearningType>,
    #[serde(default)]
    duplicate_of: Option<String>,
    #[serde(default)]
    near_miss_of: Option<String>,
    #[serde(default)]
    supersedes: Vec<String>,
}

/// A graded query of the timeline.
#[derive(Debug, Clone, Deserialize)]
struct QueryLine {
    #[allow(dead_code)]
    key: String,
    #[allow(dead_code)]
    category: String,
    query: String,
    project: String,
    relevant: HashMap<String, u32>,
    split: String,
}

/// The stale-answer count: queries answered by a successor where a learning it
/// superseded ranks above it.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct StaleAnswers {
    /// Queries whose answer superseded something.
    pub(crate) queries: usize,
    /// ... where a superseded learning ranks above its successor in default results.
    pub(crate) default_results: usize,
    /// ... and with `include_superseded` (what ranking alone would do).
    pub(crate) including_superseded: usize,
}

/// The lifecycle report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LifecycleReport {
    pub(crate) learnings: usize,
    /// Rows stored (the rest were merged).
    pub(crate) stored: usize,
    /// Merges against the set's labels (duplicates must merge; near misses and the rest
    /// must not).
    pub(crate) merges: Scores,
    /// Near misses that were merged (must be 0).
    pub(crate) near_misses_merged: usize,
    pub(crate) stale_answers: StaleAnswers,
    /// split → duplicate clutter in the top 10 of default results.
    pub(crate) clutter: BTreeMap<String, Clutter>,
    /// split → system (`cairn`, `quality_50`, `lexical`, `dense`) → figures.
    pub(crate) splits: BTreeMap<String, BTreeMap<String, Summary>>,
}

const SYSTEMS: [(&str, Ranking); 4] = [
    ("cairn", Ranking::Blend),
    ("quality_50", Ranking::FixedQuality),
    ("lexical", Ranking::Lexical),
    ("dense", Ranking::Dense),
];

/// Replay the lifecycle set in `path` into a temporary database and measure it.
pub(crate) fn lifecycle(path: &Path, progress: &mut impl FnMut(&str)) -> Result<LifecycleReport> {
    let lines = read_set::<Line>(path)?;
    let dir = tempfile::tempdir().map_err(|e| Error::io(Path::new("tempdir"), e))?;
    let cairn = Cairn::open(&dir.path().join("eval.db"))?;
    let mut replay = Replay::default();
    for (n, line) in lines.into_iter().enumerate() {
        if n % 50 == 0 {
            progress(&format!("replaying line {}", n + 1));
        }
        replay.line(&cairn, line)?;
    }
    let labels = Labels::of(&replay);
    progress(&format!("running {} queries", replay.queries.len()));
    let mut grades = Grades::default();
    for query in &replay.queries {
        grades.query(&cairn, &replay, &labels, query)?;
    }
    let splits = grades
        .scored
        .into_iter()
        .map(|(split, systems)| {
            (
                split,
                systems
                    .into_iter()
                    .map(|(name, s)| (name, Summary::mean(&s)))
                    .collect(),
            )
        })
        .collect();
    Ok(LifecycleReport {
        learnings: replay.learnings,
        stored: replay.key_of.len(),
        merges: replay.merges.finish(),
        near_misses_merged: replay.near_misses_merged,
        stale_answers: grades.stale,
        clutter: grades.clutter,
        splits,
    })
}

/// The timeline replayed through the domain API, and what its labels say of the result.
#[derive(Default)]
struct Replay {
    /// Set label → Cairn id of issues.
    issues: Issues,
    /// Learning key → learning id.
    ids: HashMap<String, String>,
    /// Id → the key of the learning that created it (what queries grade).
    key_of: HashMap<String, String>,
    /// Superseded id → the id of its successor.
    successor_of: HashMap<String, String>,
    /// (key, key it is labelled a duplicate of).
    same: Vec<(String, String)>,
    /// (key, key it is labelled a near miss of).
    near: Vec<(String, String)>,
    merges: Scores,
    near_misses_merged: usize,
    learnings: usize,
    queries: Vec<QueryLine>,
}

impl Replay {
    fn line(&mut self, cairn: &Cairn, line: Line) -> Result<()> {
        match line {
            Line::Learning(learning) => self.learning(cairn, learning)?,
            Line::Feedback {
                learning,
                issue: label,
                outcome,
            } => {
                let id = lookup(&self.ids, &learning)?;
                let project = cairn.learning(&id)?.learning.project;
                let issue_id = self.issues.get(cairn, &project, &label)?;
                cairn.learning_feedback(&NewFeedback {
                    learning_id: id,
                    issue: issue_id,
                    outcome,
                    note: None,
                    agent_type: ACTOR.into(),
                    actor: ACTOR.into(),
                })?;
            }
            Line::Outcome {
                issue: label,
                outcome,
            } => {
                let issue_id = self.issues.ids.get(&label).cloned().ok_or_else(|| {
                    Error::invalid(label.clone(), "an outcome for an issue never mentioned")
                })?;
                finish_issue(cairn, &issue_id, &outcome)?;
            }
            Line::Query(query) => self.queries.push(query),
        }
        Ok(())
    }

    /// Add a learning with merging, accept the supersessions it proposes, and score
    /// its merge against its labels.
    fn learning(&mut self, cairn: &Cairn, line: LearningLine) -> Result<()> {
        let LearningLine {
            key,
            project,
            issue: label,
            pattern,
            context,
            applies_to,
            learning_type,
            duplicate_of,
            near_miss_of,
            supersedes,
        } = line;
        self.learnings += 1;
        let issue_id = self.issues.get(cairn, &project, &label)?;
        let supersedes = supersedes
            .iter()
            .map(|k| lookup(&self.ids, k))
            .collect::<Result<Vec<_>>>()?;
        let added = cairn.add_learning(&NewLearning {
            issue: issue_id,
            pattern,
            context,
            applies_to,
            learning_type,
            created_by: ACTOR.into(),
            agent_type: ACTOR.into(),
            merge: true,
            supersedes: supersedes.clone(),
            person: false,
        })?;
        let id = added.learning.id.clone();
        // The timeline's supersessions are the world changing: a person accepts
        // each proposal the agent made (docs/learnings.md, "Supersession").
        for old in &added.proposed {
            cairn.supersede_learning(old, &id, ACTOR)?;
        }
        let right = match &duplicate_of {
            Some(target) => {
                self.same.push((key.clone(), target.clone()));
                added.merged && self.ids.get(target) == Some(&id)
            }
            None => false,
        };
        // A merge into another learning than the labelled one is a wrong merge.
        self.merges.add(
            added.merged,
            duplicate_of.is_some() && (right || !added.merged),
        );
        if let Some(target) = &near_miss_of {
            self.near.push((key.clone(), target.clone()));
            self.near_misses_merged += usize::from(added.merged);
        }
        for old in &supersedes {
            self.successor_of.insert(old.clone(), id.clone());
        }
        self.key_of.entry(id.clone()).or_insert_with(|| key.clone());
        self.ids.insert(key, id);
        Ok(())
    }

    /// The labelled (duplicate or near miss) pairs `pairs` by id (merged keys share
    /// their target's).
    fn by_id<'a>(
        &'a self,
        pairs: &'a [(String, String)],
    ) -> impl Iterator<Item = (&'a String, &'a String)> {
        pairs.iter().map(|(a, b)| (&self.ids[a], &self.ids[b]))
    }
}

/// Whether two ids are labelled duplicates of one lesson (through any chain of
/// `duplicate_of`: each id's lesson is the end of its chain) or a labelled near miss.
struct Labels {
    /// Id → its lesson's id, for the ids labelled a duplicate.
    lesson: HashMap<String, String>,
    /// Both orders of each labelled near miss.
    near: HashSet<(String, String)>,
}

impl Labels {
    fn of(replay: &Replay) -> Labels {
        let target: HashMap<&String, &String> = replay.by_id(&replay.same).collect();
        let lesson = target
            .keys()
            .map(|&start| {
                let mut id = start;
                for _ in 0..=target.len() {
                    match target.get(id) {
                        Some(&t) if t != id => id = t,
                        _ => break,
                    }
                }
                (start.clone(), id.clone())
            })
            .collect();
        let near = replay
            .by_id(&replay.near)
            .flat_map(|(a, b)| [(a.clone(), b.clone()), (b.clone(), a.clone())])
            .collect();
        Labels { lesson, near }
    }

    fn labelled(&self, a: &String, b: &String) -> bool {
        self.lesson.get(a).unwrap_or(a) == self.lesson.get(b).unwrap_or(b)
            || self.near.contains(&(a.clone(), b.clone()))
    }
}

/// What the graded queries add up to.
#[derive(Default)]
struct Grades {
    stale: StaleAnswers,
    /// Split → duplicate clutter.
    clutter: BTreeMap<String, Clutter>,
    /// Split → system → each query's score.
    scored: BTreeMap<String, BTreeMap<String, Vec<QueryScore>>>,
}

impl Grades {
    fn query(
        &mut self,
        cairn: &Cairn,
        replay: &Replay,
        labels: &Labels,
        query: &QueryLine,
    ) -> Result<()> {
        let answers: HashSet<String> = query
            .relevant
            .keys()
            .map(|k| lookup(&replay.ids, k))
            .collect::<Result<_>>()?;
        let default = search(cairn, query, Ranking::Blend, false)?;
        self.count_stale(cairn, replay, query, &answers, &default)?;
        self.count_clutter(replay, labels, &query.split, &default);
        let qrels: Qrels = query.relevant.clone();
        for (name, ranking) in SYSTEMS {
            let ranked: Vec<String> = search(cairn, query, ranking, false)?
                .read()
                .into_iter()
                .map(|id| replay.key_of.get(&id).cloned().unwrap_or(id))
                .collect();
            self.scored
                .entry(query.split.clone())
                .or_default()
                .entry(name.to_string())
                .or_default()
                .push(QueryScore::of(&ranked, &qrels));
        }
        Ok(())
    }

    /// A query answered by a successor: whether a learning it superseded ranks above
    /// it, in default results and with `include_superseded`.
    fn count_stale(
        &mut self,
        cairn: &Cairn,
        replay: &Replay,
        query: &QueryLine,
        answers: &HashSet<String>,
        default: &Found,
    ) -> Result<()> {
        let including = search(cairn, query, Ranking::Blend, true)?.read();
        let rank = |list: &[String], id: &str| list.iter().position(|x| x == id);
        let stale_in = |list: &[String]| {
            replay.successor_of.iter().any(|(old, new)| {
                answers.contains(new)
                    && rank(list, old).is_some_and(|o| rank(list, new).is_none_or(|n| o < n))
            })
        };
        if replay
            .successor_of
            .values()
            .any(|new| answers.contains(new))
        {
            self.stale.queries += 1;
            self.stale.default_results += usize::from(stale_in(&default.read()));
            self.stale.including_superseded += usize::from(stale_in(&including));
        }
        Ok(())
    }

    /// The labelled pairs a query's default results show apart or group.
    fn count_clutter(&mut self, replay: &Replay, labels: &Labels, split: &str, default: &Found) {
        let c = self.clutter.entry(split.to_string()).or_default();
        c.queries += 1;
        c.cluttered += usize::from(
            replay
                .by_id(&replay.same)
                .any(|(a, b)| a != b && default.placed(a) && default.placed(b)),
        );
        c.grouped_restatements += replay
            .by_id(&replay.same)
            .filter(|(a, b)| default.grouped(a, b))
            .count();
        c.grouped_near_misses += replay
            .by_id(&replay.near)
            .filter(|(a, b)| default.grouped(a, b))
            .count();
        c.grouped_others += default
            .0
            .iter()
            .filter_map(|(id, under)| Some((id, under.as_ref()?)))
            .filter(|(id, head)| !labels.labelled(id, head))
            .count();
    }
}

/// The learnings one search for `query` in its project found, in reading order, and
/// where each was listed.
fn search(
    cairn: &Cairn,
    query: &QueryLine,
    ranking: Ranking,
    include_superseded: bool,
) -> Result<Found> {
    let r = cairn.search_learnings_ranked(
        &LearningSearch {
            query: query.query.clone(),
            scope: SearchScope::Project(query.project.clone()),
            limit: Some(DEPTH),
            min_quality_score: None,
            include_superseded,
            include_archived: false,
            min_trust: None,
        },
        ranking,
    )?;
    Ok(Found(
        r.listed()
            .map(|(l, under)| (l.id.clone(), under.map(|h| h.id.clone())))
            .collect(),
    ))
}

/// What one search found: every learning's id in reading order (each hit, then those
/// listed under it as `similar`), with the hit it was listed under.
struct Found(Vec<(String, Option<String>)>);

impl Found {
    /// The ids in reading order.
    fn read(&self) -> Vec<String> {
        self.0.iter().map(|(id, _)| id.clone()).collect()
    }

    /// Where `id` was found: `Some(None)` with a place of its own, `Some(Some(hit))`
    /// listed under `hit`.
    fn under(&self, id: &str) -> Option<Option<&str>> {
        self.0
            .iter()
            .find(|(x, _)| x == id)
            .map(|(_, h)| h.as_deref())
    }

    /// Whether `id` was found with a place of its own.
    fn placed(&self, id: &str) -> bool {
        self.under(id) == Some(None)
    }

    /// Whether one of `a` and `b` was listed under the other.
    fn grouped(&self, a: &str, b: &str) -> bool {
        self.under(a) == Some(Some(b)) || self.under(b) == Some(Some(a))
    }
}

/// Duplicate clutter in one split's default results.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Clutter {
    pub(crate) queries: usize,
    /// Queries whose top 10 gives two learnings that say the same a place of their own
    /// (one listed under the other as `similar` is not clutter).
    pub(crate) cluttered: usize,
    /// (Query, labelled duplicate pair) with one listed under the other.
    pub(crate) grouped_restatements: usize,
    /// (Query, labelled near-miss pair) with one listed under the other: distinct
    /// lessons grouped (both still shown).
    pub(crate) grouped_near_misses: usize,
    /// (Query, learning listed under a hit) where the two are neither a labelled
    /// duplicate nor a labelled near miss: other lessons grouped (both still shown).
    pub(crate) grouped_others: usize,
}

/// The set's projects and issues, created on first mention.
#[derive(Default)]
struct Issues {
    projects: HashSet<String>,
    /// Set label → issue id.
    ids: HashMap<String, String>,
}

impl Issues {
    fn get(&mut self, cairn: &Cairn, project: &str, label: &str) -> Result<String> {
        if !self.projects.contains(project) {
            cairn.create_project(&NewProject {
                slug: project.to_string(),
                name: project.to_string(),
                prefix: None,
                path: None,
            })?;
            self.projects.insert(project.to_string());
        }
        if let Some(id) = self.ids.get(label) {
            return Ok(id.clone());
        }
        let id = cairn
            .create_issue(&NewIssue {
                project: project.to_string(),
                title: format!("Lifecycle set issue {label}"),
                ..Default::default()
            })?
            .id;
        self.ids.insert(label.to_string(), id.clone());
        Ok(id)
    }
}

/// Every line of the JSONL file at `path` as `T`; every line that does not parse is an
/// error, named with the file.
fn read_set<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let (rows, errors) = super::jsonl::<T>(&text);
    if errors.is_empty() {
        Ok(rows)
    } else {
        Err(Error::InvalidInput(
            errors
                .into_iter()
                .map(|e| FieldError::new(format!("{} {}", path.display(), e.field), e.message))
                .collect(),
        ))
    }
}

fn lookup(ids: &HashMap<String, String>, key: &str) -> Result<String> {
    ids.get(key)
        .cloned()
        .ok_or_else(|| Error::invalid(key.to_string(), "names a learning not recorded before"))
}

/// Finish an issue's work through the real paths: `done` is a status change,
/// `approved` an approved PR.
fn finish_issue(cairn: &Cairn, issue_id: &str, outcome: &str) -> Result<()> {
    match outcome {
        "done" => {
            for to in [Status::InProgress, Status::Review, Status::Done] {
                cairn.update_issue_status(issue_id, to, None, ACTOR, false)?;
            }
        }
        "approved" => {
            cairn.update_issue_status(issue_id, Status::InProgress, None, ACTOR, false)?;
            crate::work::prs::create_pr(
                &cairn.store,
                issue_id,
                &NewPullRequest {
                    diff: "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-a\n+b\n".into(),
                    branch_name: "eval".into(),
                    base_branch: "main".into(),
                    gate_results: Vec::new(),
                },
                ACTOR,
            )?;
            cairn.review_pr(issue_id, Review::Approve, None, None, ACTOR)?;
        }
        other => {
            return Err(Error::invalid(
                "outcome",
                format!("unknown outcome {other:?}; done or approved"),
            ));
        }
    }
    Ok(())
}
