//! One search on a view of the index, in two halves. The lexical half ([`lexical_in`]):
//! the query's clauses ([`terms`](super::terms)), the learnings it may return
//! ([`Filter`]), BM25's top k over the disk index and the tail, each candidate's signals.
//! The dense half and the order ([`rank_in`]): each candidate's cosine with the query's
//! vector and the nearest vectors added, the blend's order, restatements grouped
//! ([`group`](super::group)). The lexical half needs no vector, so a search of the
//! learnings runs it while the query is embedded. BM25's candidates and the nearest
//! vectors of a search are kept on the view for a search that asks the same again
//! ([`recent`](super::recent)).

use std::collections::{BinaryHeap, HashMap};

use tantivy::query::{
    Bm25StatisticsProvider, Bm25Weight, BooleanQuery, EnableScoring, Occur, Query,
};
use tantivy::{DocId, Score};

use crate::error::Result;
use crate::metrics::cost::{Unit, count};

use super::super::lifecycle::{self, CodeSignature};
use super::super::meta::Meta;
use super::super::query::{
    CandidateSignals, PHRASE_CANDIDATES, ParsedQuery, SEMANTIC_FLOOR, ScoreBreakdown,
};
use super::super::trust::Trust;

use super::*;

/// A top-k heap entry, ordered so the *worst* candidate is on top.
#[derive(Debug, Clone, Copy)]
pub(super) struct Candidate {
    pub(super) score: Score,
    pub(super) at: Hit,
    pub(super) seq: u64,
}

/// Where a candidate was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Hit {
    /// A document of a segment of the disk index.
    Disk { segment: u32, doc: DocId },
    /// A document of the tail.
    Tail { doc: u32 },
}

impl PartialEq for Candidate {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == std::cmp::Ordering::Equal
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Candidate {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // Min-heap on score; among equals, the newer learning ranks higher.
        o.score.total_cmp(&self.score).then(o.seq.cmp(&self.seq))
    }
}

/// The parameters of one search, in index terms.
pub(crate) struct IndexSearch<'a> {
    pub(crate) query: &'a ParsedQuery,
    pub(crate) scope: &'a SearchScope,
    pub(crate) min_quality: Option<u8>,
    /// Candidates taken by BM25 (and by cosine) before the blend re-ranks them.
    pub(crate) candidates: usize,
    pub(crate) limit: usize,
    pub(crate) ranking: Ranking,
    /// Superseded learnings are candidates too.
    pub(crate) include_superseded: bool,
    /// Archived and held learnings are candidates too (a person's view).
    pub(crate) include_archived: bool,
    /// Learnings below this trust level are not candidates.
    pub(crate) min_trust: Option<Trust>,
    /// A learning's [`CodeSignature`] (of its pattern and context, as embedded), read when
    /// grouping restatements needs it ([`group`]).
    pub(crate) signature: &'a dyn Fn(u64) -> Option<Arc<CodeSignature>>,
}

/// A search on one view (see [`LearningIndex::search`]): its lexical half, then the
/// dense half and the order ([`lexical_in`], [`rank_in`]).
pub(super) fn search_in(
    open: &Open,
    s: &IndexSearch<'_>,
    vector: Option<&[f32]>,
) -> Result<Vec<Ranked>> {
    let lexical = lexical_in(open, s)?;
    Ok(rank_in(open, s, lexical, vector))
}

/// The lexical half of a search, done on one view: BM25's candidates with their field
/// priority and quality, and the time their quality was judged at (the dense half judges
/// its own candidates at the same time). `None` when the view holds no learning.
pub(crate) struct LexicalHalf {
    gathered: Option<Gathered>,
    now: i64,
}

/// The lexical half on one view: BM25's candidates ([`lexical_hits`], or those a search
/// asking the same on this view found, [`Recent`]), each with its standing now.
pub(super) fn lexical_in(open: &Open, s: &IndexSearch<'_>) -> Result<LexicalHalf> {
    let filter = Filter::new(open, s, lifecycle::now_secs());
    let nothing = LexicalHalf {
        gathered: None,
        now: filter.now,
    };
    let (_, fields) = schema();
    let stats = Combined {
        disk: &open.disk,
        tail: open.tail.as_ref(),
        fields,
    };
    let docs = stats.total_num_docs().map_err(index_err)?;
    if docs == 0 {
        return Ok(nothing);
    }
    let key = LexicalKey {
        among: among(s),
        slots: s.query.slots.clone(),
        ranking: s.ranking,
    };
    let hits = open
        .recent
        .lexical(key, || lexical_hits(open, s, &stats, docs, &filter))?;
    let mut gathered = Gathered::default();
    for h in hits.iter() {
        if let Some(m) = open.meta.get(h.seq) {
            gathered.push(
                h.seq,
                CandidateSignals {
                    bm25: h.bm25,
                    field_priority: h.field_priority,
                    cosine: None,
                    quality: filter.blend_quality(&m),
                    phrase_run: 0,
                },
            );
        }
    }
    Ok(LexicalHalf {
        gathered: Some(gathered),
        ..nothing
    })
}

/// BM25's candidates on one view, in stages: the query's terms and their BM25 clauses
/// ([`Clauses::of`]), the learnings it may return ([`Filter`]), the BM25 top k over the
/// disk index and the tail ([`TopK`], [`lexical_candidates`]), and each candidate's field
/// priority.
fn lexical_hits(
    open: &Open,
    s: &IndexSearch<'_>,
    stats: &Combined<'_>,
    docs: u64,
    filter: &Filter<'_>,
) -> Result<Vec<LexicalHit>> {
    let lexicon = Lexicon::of(s.scope, stats.fields);
    let slots = expand(s.query, open, &lexicon)?;
    let clauses = Clauses::of(&slots, stats, docs)?;
    let mut top = TopK::new(candidates_taken(s));
    if s.ranking != Ranking::Dense && !clauses.scored.is_empty() {
        count(Unit::PostingsRead, clauses.postings);
        lexical_candidates(open, stats, &clauses.scored, filter, &mut top)?;
    }
    let lexical_hits = top.heap.into_vec();
    // An order by BM25 alone (the duplicate check's candidates, `cairn eval`'s lexical
    // baseline) needs no field priority: one postings seek per candidate, term and field.
    let weights = match s.ranking {
        Ranking::Lexical => None,
        _ => Some(slot_weights(&lexical_hits, open, &slots, &lexicon)?),
    };
    Ok(lexical_hits
        .iter()
        .enumerate()
        .map(|(n, c)| LexicalHit {
            seq: c.seq,
            bm25: c.score,
            field_priority: weights.as_ref().map_or(0.0, |w| {
                super::super::query::field_priority(&w[n], &clauses.slot_idf)
            }),
        })
        .collect())
}

/// Which learnings search `s` takes as candidates, and how many, as [`Recent`] keys them.
fn among(s: &IndexSearch<'_>) -> Among {
    Among {
        scope: s.scope.clone(),
        min_quality: s.min_quality,
        include_superseded: s.include_superseded,
        include_archived: s.include_archived,
        min_trust: s.min_trust,
        taken: candidates_taken(s),
    }
}

/// The dense half and the order, on one view: the cosine of the query's `vector` (when
/// there is one and the ranking uses it) with each candidate, and the nearest vectors
/// added as candidates ([`Gathered::add_nearest`]); then the blend's order
/// ([`Gathered::rank`]).
pub(super) fn rank_in(
    open: &Open,
    s: &IndexSearch<'_>,
    lexical: LexicalHalf,
    vector: Option<&[f32]>,
) -> Vec<Ranked> {
    let Some(mut gathered) = lexical.gathered else {
        return Vec::new();
    };
    let semantic = s.ranking != Ranking::Lexical && vector.is_some();
    if let Some(v) = vector.filter(|_| semantic) {
        let filter = Filter::new(open, s, lexical.now);
        gathered.add_nearest(open, v, candidates_taken(s), &filter, s.ranking);
    }
    gathered.rank(open, s, semantic)
}

/// Candidates each half takes: the search's, at least its limit, at least one.
fn candidates_taken(s: &IndexSearch<'_>) -> usize {
    s.candidates.max(s.limit).max(1)
}

/// Which learnings a search may return, and the quality the blend weighs for each.
struct Filter<'a> {
    meta: &'a MetaCache,
    s: &'a IndexSearch<'a>,
    /// The scope's project as the cache numbers it (`Some(None)`: a project the cache
    /// has never seen); `None` for every project.
    project: Option<Option<u32>>,
    now: i64,
}

impl<'a> Filter<'a> {
    /// The filter of search `s` on `open`, judging age at `now` (seconds).
    fn new(open: &'a Open, s: &'a IndexSearch<'a>, now: i64) -> Self {
        let meta = &open.meta;
        let project = match s.scope {
            SearchScope::Project(p) | SearchScope::OtherProjects(p) => {
                Some(meta.project_ids.get(p).copied())
            }
            SearchScope::All => None,
        };
        Filter {
            meta,
            s,
            project,
            now,
        }
    }

    fn project_ok(&self, p: u32) -> bool {
        match (self.s.scope, self.project) {
            (SearchScope::Project(_), Some(want)) => want == Some(p),
            (SearchScope::OtherProjects(_), Some(not)) => not != Some(p),
            _ => true,
        }
    }

    fn accepts(&self, m: &Meta) -> bool {
        let s = self.s;
        self.project_ok(m.project)
            && (s.include_superseded || !m.superseded)
            && (s.include_archived || !(m.archived || m.trust == Trust::Held))
            && s.min_trust.is_none_or(|t| m.trust >= t)
            && (m.verified || s.min_quality.is_none_or(|q| m.quality >= q))
    }

    /// Whether learning `seq` is known and may be returned.
    fn accepts_seq(&self, seq: u64) -> bool {
        self.meta.get(seq).is_some_and(|m| self.accepts(&m))
    }

    /// The quality the blend weighs: the standing one, times AGE_FACTOR once aged, plus
    /// [`lifecycle::VERIFIED_BONUS`] for a learning a person verified (trust `verified`);
    /// 50 for every learning under `FixedQuality`.
    fn blend_quality(&self, m: &Meta) -> u8 {
        if self.s.ranking == Ranking::FixedQuality {
            return 50;
        }
        let q = if self.meta.stale(m, self.now) {
            (f32::from(m.quality) * lifecycle::AGE_FACTOR).round() as u8
        } else {
            m.quality
        };
        if m.trust == Trust::Verified {
            q.saturating_add(lifecycle::VERIFIED_BONUS).min(100)
        } else {
            q
        }
    }
}

/// The best `k` candidates so far.
struct TopK {
    k: usize,
    heap: BinaryHeap<Candidate>,
}

impl TopK {
    fn new(k: usize) -> Self {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
        }
    }

    /// Keep `c` if it is among the best `k`; the worst kept score once there are `k`.
    fn offer(&mut self, c: Candidate) -> Option<Score> {
        self.heap.push(c);
        if self.heap.len() > self.k {
            self.heap.pop();
        }
        self.heap
            .peek()
            .filter(|_| self.heap.len() >= self.k)
            .map(|c| c.score)
    }
}

/// BM25's top k over the disk index (block-WAND pruning when every word drives, the
/// filter inside the collection) and over the tail, with the same weights applied to its
/// counted terms. A narrowed query's candidates hold a driving term: on disk, the driving
/// words' union is required and the other words score what it finds.
fn lexical_candidates(
    open: &Open,
    stats: &Combined<'_>,
    scored: &[Scored<'_>],
    filter: &Filter<'_>,
    top: &mut TopK,
) -> Result<()> {
    let clauses = |drives: bool| -> Vec<(Occur, Box<dyn Query>)> {
        scored
            .iter()
            .filter(|c| c.drives == drives)
            .map(|c| (Occur::Should, c.query()))
            .collect()
    };
    let (driving, others) = (clauses(true), clauses(false));
    let query = if others.is_empty() {
        BooleanQuery::new(driving)
    } else {
        let mut narrowed: Vec<(Occur, Box<dyn Query>)> =
            vec![(Occur::Must, Box::new(BooleanQuery::new(driving)))];
        narrowed.extend(others);
        BooleanQuery::new(narrowed)
    };
    let weight = query
        .weight(EnableScoring::enabled_from_statistics_provider(
            stats, &open.disk,
        ))
        .map_err(index_err)?;
    let mut threshold: Score = 0.0;
    let mut offered = 0u64;
    for (ord, seg) in open.disk.segment_readers().iter().enumerate() {
        if seg.num_docs() == 0 {
            continue;
        }
        let seqs = seg.fast_fields().u64("seq").map_err(index_err)?;
        weight
            .for_each_pruning(threshold, seg, &mut |doc, score| {
                offered += 1;
                let seq = seqs.first(doc).unwrap_or(0);
                if filter.accepts_seq(seq) {
                    let at = Hit::Disk {
                        segment: ord as u32,
                        doc,
                    };
                    if let Some(worst) = top.offer(Candidate { score, at, seq }) {
                        threshold = worst;
                    }
                }
                threshold
            })
            .map_err(index_err)?;
    }
    count(Unit::DocumentsScored, offered);
    let Some(tail) = &open.tail else {
        return Ok(());
    };
    let fields = stats.fields;
    // The driving terms first: they choose the tail's candidates, the others score them.
    let mut scores = vec![None; tail.docs() as usize];
    for drives in [true, false] {
        for c in scored.iter().filter(|c| c.drives == drives) {
            let (Some(slot), Some(word)) = (fields.slot(c.term.field()), word_of(c.term)) else {
                continue;
            };
            let w =
                Bm25Weight::for_terms(stats, std::slice::from_ref(c.term)).map_err(index_err)?;
            tail.score_into(slot, word, &w, c.boost, drives, &mut scores);
        }
    }
    for (doc, score) in scores.into_iter().enumerate() {
        let Some(score) = score else { continue };
        count(Unit::DocumentsScored, 1);
        let doc = doc as u32;
        let seq = tail.seq(doc);
        if filter.accepts_seq(seq) {
            top.offer(Candidate {
                score,
                at: Hit::Tail { doc },
                seq,
            });
        }
    }
    Ok(())
}

/// The candidates with their signals, in the order they were found.
#[derive(Default)]
struct Gathered {
    seqs: Vec<u64>,
    signals: Vec<CandidateSignals>,
    position: HashMap<u64, usize>,
}

impl Gathered {
    fn push(&mut self, seq: u64, e: CandidateSignals) {
        self.position.insert(seq, self.seqs.len());
        self.seqs.push(seq);
        self.signals.push(e);
    }

    /// The `k` nearest vectors (or those a search asking the same on this view found,
    /// [`Recent`]): their cosine for the candidates BM25 found, new candidates for the
    /// others (over [`SEMANTIC_FLOOR`], or all of them for the dense baseline); then the
    /// cosine of every BM25 candidate beyond the nearest `k`.
    fn add_nearest(
        &mut self,
        open: &Open,
        v: &[f32],
        k: usize,
        filter: &Filter<'_>,
        ranking: Ranking,
    ) {
        let key = NearestKey {
            among: among(filter.s),
            vector: v.iter().map(|x| x.to_bits()).collect(),
            graph_points: open.vectors.graph_points(),
        };
        let nearest = open.recent.nearest(key, || {
            open.vectors.top_k(
                v,
                k,
                |p| filter.project_ok(p),
                |seq| filter.accepts_seq(seq),
            )
        });
        for &(seq, cos) in nearest.iter() {
            if let Some(&i) = self.position.get(&seq) {
                self.signals[i].cosine = Some(cos);
            } else if ranking == Ranking::Dense || cos >= SEMANTIC_FLOOR {
                let Some(m) = open.meta.get(seq) else {
                    continue;
                };
                self.push(
                    seq,
                    CandidateSignals {
                        bm25: 0.0,
                        field_priority: 0.0,
                        cosine: Some(cos),
                        quality: filter.blend_quality(&m),
                        phrase_run: 0,
                    },
                );
            }
        }
        let mut compared = 0;
        for (seq, e) in self.seqs.iter().zip(self.signals.iter_mut()) {
            if e.cosine.is_none() {
                e.cosine = open.vectors.cosine(v, *seq);
                compared += u64::from(e.cosine.is_some());
            }
        }
        count(Unit::VectorsCompared, compared);
    }

    /// The in-order phrase of the query ([`ParsedQuery::in_order_run`]) in each of the
    /// blend's first [`PHRASE_CANDIDATES`] candidates by `scores`, in the words the view
    /// keeps ([`TextWords`]; no text is read). Whether any holds a phrase worth a bonus.
    fn mark_phrases(
        &mut self,
        open: &Open,
        scores: &[ScoreBreakdown],
        s: &IndexSearch<'_>,
    ) -> bool {
        if !s.query.has_phrase() {
            return false;
        }
        let mut order: Vec<usize> = (0..scores.len()).collect();
        order.sort_by(|&a, &b| {
            scores[b]
                .total
                .total_cmp(&scores[a].total)
                .then(self.seqs[b].cmp(&self.seqs[a]))
        });
        let mut any = false;
        for &i in order.iter().take(PHRASE_CANDIDATES) {
            let run = s.query.in_order_run(open.words.get(self.seqs[i]));
            self.signals[i].phrase_run = run;
            any |= super::super::query::phrase_bonus(run) > 0.0;
        }
        any
    }

    /// The blend's scores (with the in-order phrase bonus for the blend's orders,
    /// [`Self::mark_phrases`]), sorted by the ranking's key (newer first among equals),
    /// cut to the search's limit.
    fn rank(mut self, open: &Open, s: &IndexSearch<'_>, semantic: bool) -> Vec<Ranked> {
        let blend = |signals: &[CandidateSignals]| super::super::query::blend(signals, semantic);
        let mut scores = blend(&self.signals);
        if matches!(s.ranking, Ranking::Blend | Ranking::FixedQuality)
            && self.mark_phrases(open, &scores, s)
        {
            scores = blend(&self.signals);
        }
        let mut ranked: Vec<Ranked> = self
            .seqs
            .iter()
            .zip(&self.signals)
            .zip(scores)
            .filter_map(|((seq, e), score)| {
                let m = open.meta.get(*seq)?;
                let key = match s.ranking {
                    Ranking::Blend | Ranking::FixedQuality => score.total,
                    Ranking::Lexical => e.bm25,
                    Ranking::Dense => e.cosine.unwrap_or(f32::MIN),
                };
                Some(Ranked {
                    seq: *seq,
                    key,
                    score,
                    quality: m.quality,
                    verified: m.verified,
                    similar_to: None,
                    similar_omitted: 0,
                })
            })
            .collect();
        ranked.sort_by(|a, b| b.key.total_cmp(&a.key).then(b.seq.cmp(&a.seq)));
        if semantic {
            group(ranked, s.limit, |seq| open.vectors.vector(seq), s.signature)
        } else {
            ranked.truncate(s.limit);
            ranked
        }
    }
}
