//! Searching learnings: the request checked, the query parsed and embedded, the index's
//! search ([`index`]), and its hits read back in one snapshot with their restatements
//! listed under them.

use std::collections::HashMap;

use crate::error::{Error, FieldError, Result};
use crate::issues::find_project;
use crate::store::db::Conn;

use super::load::load_by_seqs;
use super::*;

/// The learnings an index holds from which a search embeds a query the model has not
/// seen beside its lexical half, on a thread of its own. Below it the lexical half is
/// shorter than the thread's start and join (measured through the daemon: 0.09 ms on 300
/// learnings, 0.28 ms on 5,000, against 0.11-0.26 ms to start the thread and 0.05-0.08 ms
/// to join it; docs/perf/daemon.md, "A never-seen search without a thread of its own").
const BESIDE_FROM: u64 = 5_000;

/// The query's embedding, or why there is none (the search is then lexical).
struct QueryVector {
    vector: Option<Vec<f32>>,
    unavailable: Option<String>,
}

impl Learnings<'_> {
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
        let limit = check_search(s)?;
        let parsed = query::parse(&s.query)?;
        let scope = match &s.scope {
            SearchScope::Project(r) => SearchScope::Project(self.project_id(r)?),
            SearchScope::OtherProjects(r) => SearchScope::OtherProjects(self.project_id(r)?),
            SearchScope::All => SearchScope::All,
        };
        let search = index::IndexSearch {
            query: &parsed,
            scope: &scope,
            min_quality: s.min_quality_score,
            candidates: (2 * limit).max(limits::CANDIDATES_MIN),
            limit,
            ranking,
            include_superseded: s.include_superseded,
            include_archived: s.include_archived,
            min_trust: s.min_trust,
            signature: &|seq| self.signature(seq),
        };
        let (query_vector, lexical) = self.embed_beside_lexical(&s.query, ranking, &search)?;
        let QueryVector {
            vector,
            unavailable: semantic_unavailable,
        } = query_vector;
        let ranked = self
            .index
            .rank(self.store, &search, lexical, vector.as_deref())?;
        // One snapshot and one lock round-trip for all rows.
        let results = self.store.snapshot(|c| hits(c, &ranked, limit))?;
        Ok(SearchResults {
            count: results.len(),
            results,
            semantic: vector.is_some(),
            semantic_unavailable,
        })
    }

    /// The query's vector ([`Self::query_vector`]) and the lexical half of the index's
    /// search. Neither needs the other: on an index of [`BESIDE_FROM`] learnings or more,
    /// where the lexical half takes longer than a thread's start and join, they run side by side
    /// (issue 59), the embedding on a thread of its own whose work is counted in this
    /// call ([`crate::metrics::cost`]; should the thread not start, it runs here after the
    /// lexical half). On a smaller index both run here, one after the other.
    fn embed_beside_lexical(
        &self,
        text: &str,
        ranking: Ranking,
        search: &index::IndexSearch<'_>,
    ) -> Result<(QueryVector, index::LexicalHalf)> {
        // Nothing to overlap when no model runs, and little on a small index: a thread's
        // start and join would cost more than the overlap gains.
        if ranking == Ranking::Lexical
            || self.embedder.has_query(text)
            || self.index.learnings_held() < BESIDE_FROM
        {
            let lexical = self.index.lexical(self.store, search)?;
            return Ok((self.query_vector(text, ranking), lexical));
        }
        crate::metrics::cost::count(crate::metrics::cost::Unit::ThreadsStarted, 1);
        std::thread::scope(|scope| {
            let embedding = std::thread::Builder::new()
                .name("learnings-query".into())
                .spawn_scoped(scope, || {
                    crate::metrics::cost::measure(|| self.query_vector(text, ranking))
                });
            let lexical = self.index.lexical(self.store, search);
            let vector = match embedding {
                Ok(thread) => {
                    let (vector, work) = thread
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                    crate::metrics::cost::count_all(&work);
                    vector
                }
                Err(e) => {
                    tracing::warn!("no thread to embed the query on ({e}); embedding it here");
                    self.query_vector(text, ranking)
                }
            };
            Ok((vector, lexical?))
        })
    }

    /// The query's embedding when the ranking uses one, or why there is none. Embedding
    /// a query also embeds a few learnings that had no embedding yet
    /// ([`semantic::BACKFILL_PER_SEARCH`]).
    fn query_vector(&self, text: &str, ranking: Ranking) -> QueryVector {
        let (vector, unavailable) = match ranking {
            Ranking::Lexical => (None, Some("lexical ranking requested".to_string())),
            Ranking::Blend | Ranking::FixedQuality | Ranking::Dense => {
                match self.embedder.embed_query(text) {
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
        QueryVector {
            vector,
            unavailable,
        }
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

    fn project_id(&self, reference: &str) -> Result<String> {
        self.store.read(|c| {
            find_project(c, reference)?
                .map(|p| p.id)
                .ok_or_else(|| Error::ProjectNotFound(reference.to_string()))
        })
    }
}

/// The limit of a search request, once its fields are checked; every problem, with its
/// field.
fn check_search(s: &LearningSearch) -> Result<usize> {
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
    if errors.is_empty() {
        Ok(limit)
    } else {
        Err(Error::InvalidInput(errors))
    }
}

/// The hits of a ranking, read by one statement: each with its learning, reporting the
/// standing the blend used; a restatement listed under its head (or on its own when
/// its head is gone); at most `limit` hits.
fn hits(c: &Conn<'_>, ranked: &[index::Ranked], limit: usize) -> Result<Vec<LearningHit>> {
    let mut out: Vec<LearningHit> = Vec::with_capacity(ranked.len());
    // Head seq → its place in `out`.
    let mut place: HashMap<u64, usize> = HashMap::new();
    let seqs: Vec<u64> = ranked.iter().map(|r| r.seq).collect();
    let mut rows = load_by_seqs(c, &seqs)?;
    for r in ranked {
        let Some(mut learning) = rows.remove(&r.seq) else {
            continue;
        };
        // Report the standing the blend used (the same snapshot).
        learning.quality_score = r.quality;
        learning.verified = r.verified;
        // A restatement whose head is gone (deleted since the index saw it) stands on
        // its own.
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
}
