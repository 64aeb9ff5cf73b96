//! One search on one view of the index: BM25 statistics summed over the disk index and
//! the tail, the query expanded into index terms, the top-k collection with the
//! blend's filters, and each candidate's per-slot field weights.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use tantivy::query::{
    Bm25StatisticsProvider, Bm25Weight, BooleanQuery, BoostQuery, EnableScoring, Occur, Query,
    TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocId, DocSet, Score, Searcher, Term};

use crate::embed::dot;
use crate::error::Result;
use crate::metrics::cost::{Unit, count};

use super::super::lifecycle::{self, CodeSignature};
use super::super::meta::Meta;
use super::super::query::{
    Evidence, FIELD_WEIGHTS, MAX_EXPANSIONS, PREFIX_BOOST, ParsedQuery, SEMANTIC_FLOOR, Slot,
};
use super::super::tail::Tail;
use super::super::trust::Trust;

use super::*;

/// Sums BM25 statistics over the disk index and the tail.
pub(super) struct Combined<'a> {
    pub(super) disk: &'a Searcher,
    pub(super) tail: Option<&'a Tail>,
    pub(super) fields: Fields,
}

impl Bm25StatisticsProvider for Combined<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let tail = match (self.fields.slot(field), self.tail) {
            (Some(slot), Some(t)) => t.total_tokens(slot),
            _ => 0,
        };
        Ok(self.disk.total_num_tokens(field)? + tail)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        let tail = self.tail.map_or(0, Tail::docs);
        Ok(Bm25StatisticsProvider::total_num_docs(self.disk)? + tail)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let tail = match (self.fields.slot(term.field()), word_of(term), self.tail) {
            (Some(slot), Some(word), Some(t)) => t.postings(slot, word).len(),
            _ => 0,
        };
        Ok(self.disk.doc_freq(term)? + tail as u64)
    }
}

/// The word of a text field's term.
pub(super) fn word_of(term: &Term) -> Option<&str> {
    std::str::from_utf8(term.serialized_value_bytes()).ok()
}

/// BM25's idf, as tantivy computes it.
pub(super) fn idf(doc_freq: u64, docs: u64) -> f32 {
    let x = (docs.saturating_sub(doc_freq) as f32 + 0.5) / (doc_freq as f32 + 0.5);
    (1.0 + x).ln()
}

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
    /// The query's embedding, when the model is available (and the ranking uses it).
    pub(crate) vector: Option<&'a [f32]>,
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

/// A search on one view (see [`LearningIndex::search`]), in stages: the query's terms and
/// their BM25 clauses ([`Clauses::of`]), the learnings it may return ([`Filter`]), the
/// BM25 top k over the disk index and the tail ([`TopK`], [`lexical_candidates`]), each
/// candidate's evidence with its cosine and the nearest vectors added
/// ([`Gathered`]), and the blend's order ([`Gathered::rank`]).
pub(super) fn search_in(open: &Open, s: &IndexSearch<'_>) -> Result<Vec<Ranked>> {
    let (_, fields) = schema();
    let stats = Combined {
        disk: &open.disk,
        tail: open.tail.as_ref(),
        fields,
    };
    let docs = stats.total_num_docs().map_err(index_err)?;
    if docs == 0 {
        return Ok(Vec::new());
    }
    let lexicon = Lexicon::of(s.scope, fields);
    let slots = expand(s.query, open, &lexicon)?;
    let clauses = Clauses::of(&slots, &stats, docs)?;
    let filter = Filter::new(open, s);
    let k = s.candidates.max(s.limit).max(1);
    let mut top = TopK::new(k);
    if s.ranking != Ranking::Dense && !clauses.queries.is_empty() {
        lexical_candidates(
            open,
            &stats,
            clauses.queries,
            &clauses.scored,
            &filter,
            &mut top,
        )?;
    }
    let lexical_hits = top.heap.into_vec();
    // An order by BM25 alone (the duplicate check's candidates, `cairn eval`'s lexical
    // baseline) needs no field priority: one postings seek per candidate, term and field.
    let weights = match s.ranking {
        Ranking::Lexical => None,
        _ => Some(slot_weights(&lexical_hits, open, &slots, &lexicon)?),
    };
    let mut gathered = Gathered::default();
    for (n, c) in lexical_hits.iter().enumerate() {
        if let Some(m) = open.meta.get(c.seq) {
            gathered.push(
                c.seq,
                Evidence {
                    bm25: c.score,
                    field_priority: weights.as_ref().map_or(0.0, |w| {
                        super::super::query::field_priority(&w[n], &clauses.slot_idf)
                    }),
                    cosine: None,
                    quality: filter.blend_quality(&m),
                },
            );
        }
    }
    let semantic = s.ranking != Ranking::Lexical && s.vector.is_some();
    if let Some(v) = s.vector.filter(|_| semantic) {
        gathered.add_nearest(open, v, k, &filter, s.ranking);
    }
    Ok(gathered.rank(open, s, semantic))
}

impl Lexicon {
    /// The fields a search of `scope` reads: a project's scoped terms, or every
    /// project's plain ones.
    fn of(scope: &SearchScope, fields: Fields) -> Lexicon {
        match scope {
            SearchScope::Project(p) => Lexicon {
                fields: fields.scoped,
                first_slot: 3,
                key: scoped_term(p, ""),
            },
            SearchScope::OtherProjects(_) | SearchScope::All => Lexicon {
                fields: fields.text,
                first_slot: 0,
                key: String::new(),
            },
        }
    }
}

/// The query's BM25 clauses: one per indexed term, prefix expansions boosted down.
struct Clauses<'t> {
    queries: Vec<(Occur, Box<dyn Query>)>,
    /// Each clause's term and boost, to score the tail with.
    scored: Vec<(&'t Term, Score)>,
    /// Each slot's idf (of its most frequent term): the weights of field priority.
    slot_idf: Vec<f32>,
}

impl<'t> Clauses<'t> {
    fn of(slots: &'t [Vec<(Term, bool)>], stats: &Combined<'_>, docs: u64) -> Result<Self> {
        let mut c = Clauses {
            queries: Vec::new(),
            scored: Vec::new(),
            slot_idf: Vec::with_capacity(slots.len()),
        };
        for terms in slots {
            let mut max_df = 0;
            for (term, exact) in terms {
                let df = stats.doc_freq(term).map_err(index_err)?;
                if df == 0 {
                    continue;
                }
                max_df = max_df.max(df);
                let q: Box<dyn Query> =
                    Box::new(TermQuery::new(term.clone(), IndexRecordOption::WithFreqs));
                let q = if *exact {
                    c.scored.push((term, 1.0));
                    q
                } else {
                    c.scored.push((term, PREFIX_BOOST));
                    Box::new(BoostQuery::new(q, PREFIX_BOOST))
                };
                c.queries.push((Occur::Should, q));
            }
            // A slot no learning of the scope has weighs nothing: it would lower every
            // candidate's field priority alike.
            c.slot_idf
                .push(if max_df == 0 { 0.0 } else { idf(max_df, docs) });
        }
        Ok(c)
    }
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
    fn new(open: &'a Open, s: &'a IndexSearch<'a>) -> Self {
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
            now: lifecycle::now_secs(),
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

/// BM25's top k over the disk index (block-WAND pruning, the filter inside the
/// collection) and over the tail, with the same weights applied to its counted terms.
fn lexical_candidates(
    open: &Open,
    stats: &Combined<'_>,
    clauses: Vec<(Occur, Box<dyn Query>)>,
    scored: &[(&Term, Score)],
    filter: &Filter<'_>,
    top: &mut TopK,
) -> Result<()> {
    let query = BooleanQuery::new(clauses);
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
    let mut weights = Vec::with_capacity(scored.len());
    for &(term, boost) in scored {
        let (Some(slot), Some(word)) = (fields.slot(term.field()), word_of(term)) else {
            continue;
        };
        let w = Bm25Weight::for_terms(stats, std::slice::from_ref(term)).map_err(index_err)?;
        weights.push((slot, word, w, boost));
    }
    let mut scores = vec![None; tail.docs() as usize];
    for (slot, word, w, boost) in &weights {
        tail.score_into(*slot, word, w, *boost, &mut scores);
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

/// The candidates with their evidence, in the order they were found.
#[derive(Default)]
struct Gathered {
    seqs: Vec<u64>,
    evidence: Vec<Evidence>,
    position: HashMap<u64, usize>,
}

impl Gathered {
    fn push(&mut self, seq: u64, e: Evidence) {
        self.position.insert(seq, self.seqs.len());
        self.seqs.push(seq);
        self.evidence.push(e);
    }

    /// The `k` nearest vectors: their cosine for the candidates BM25 found, new
    /// candidates for the others (over [`SEMANTIC_FLOOR`], or all of them for the dense
    /// baseline); then the cosine of every BM25 candidate beyond the nearest `k`.
    fn add_nearest(
        &mut self,
        open: &Open,
        v: &[f32],
        k: usize,
        filter: &Filter<'_>,
        ranking: Ranking,
    ) {
        let nearest = open.vectors.top_k(
            v,
            k,
            |p| filter.project_ok(p),
            |seq| filter.accepts_seq(seq),
        );
        for (seq, cos) in nearest {
            if let Some(&i) = self.position.get(&seq) {
                self.evidence[i].cosine = Some(cos);
            } else if ranking == Ranking::Dense || cos >= SEMANTIC_FLOOR {
                let Some(m) = open.meta.get(seq) else {
                    continue;
                };
                self.push(
                    seq,
                    Evidence {
                        bm25: 0.0,
                        field_priority: 0.0,
                        cosine: Some(cos),
                        quality: filter.blend_quality(&m),
                    },
                );
            }
        }
        let mut compared = 0;
        for (seq, e) in self.seqs.iter().zip(self.evidence.iter_mut()) {
            if e.cosine.is_none() {
                e.cosine = open.vectors.cosine(v, *seq);
                compared += u64::from(e.cosine.is_some());
            }
        }
        count(Unit::VectorsCompared, compared);
    }

    /// The blend's scores, sorted by the ranking's key (newer first among equals), cut to
    /// the search's limit.
    fn rank(self, open: &Open, s: &IndexSearch<'_>, semantic: bool) -> Vec<Ranked> {
        let scores = super::super::query::blend(&self.evidence, semantic);
        let mut ranked: Vec<Ranked> = self
            .seqs
            .iter()
            .zip(&self.evidence)
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

/// Restatements listed under the learning they restate, so that the `limit` places of a
/// search hold `limit` different lessons. Walking the ranking best first, a learning
/// that restates a group's head ([`lifecycle::restates`]: by embedding, or by embedding
/// and code, whose [`CodeSignature`]s are read only then, at most once per learning) joins the most
/// similar such head's group; any other learning heads a new group. At most `limit`
/// restatements are listed in all (the best ranked); the others are counted on their
/// head and left out, so an answer holds at most `2 · limit` learnings however many
/// copies a lesson has. The walk ends where a group beyond the `limit`-th would begin.
/// The result is in rank order, each restatement marked with its head.
pub(super) fn group<'v>(
    ranked: Vec<Ranked>,
    limit: usize,
    vector: impl Fn(u64) -> Option<&'v [f32]>,
    signature: impl Fn(u64) -> Option<Arc<CodeSignature>>,
) -> Vec<Ranked> {
    /// A group's head: its vector, its place in `out` and its code, read at most once.
    struct Head<'v> {
        vector: Option<&'v [f32]>,
        at: usize,
        code: OnceCell<Option<Arc<CodeSignature>>>,
    }
    let mut listed = 0;
    let mut out: Vec<Ranked> = Vec::with_capacity(ranked.len().min(2 * limit));
    let mut heads: Vec<Head<'v>> = Vec::with_capacity(limit);
    let mut walked = 0;
    let mut compared = 0;
    for mut r in ranked {
        walked += 1;
        let own = vector(r.seq);
        let code: OnceCell<Option<Arc<CodeSignature>>> = OnceCell::new();
        let mut closest: Option<(usize, f32)> = None;
        if let Some(v) = own {
            for (i, head) in heads.iter().enumerate() {
                let Some(h) = head.vector else { continue };
                let cos = dot(v, h);
                compared += 1;
                // The most similar head wins (the later one among equals).
                if closest.is_some_and(|(_, best)| best > cos) {
                    continue;
                }
                let head_seq = out[head.at].seq;
                if lifecycle::restates(cos, || {
                    Some((
                        code.get_or_init(|| signature(r.seq)).as_deref()?,
                        head.code.get_or_init(|| signature(head_seq)).as_deref()?,
                    ))
                }) {
                    closest = Some((i, cos));
                }
            }
        }
        match closest {
            Some((i, _)) if listed == limit => {
                out[heads[i].at].similar_omitted += 1;
                continue;
            }
            Some((i, cos)) => {
                listed += 1;
                r.similar_to = Some((out[heads[i].at].seq, cos));
            }
            None if heads.len() == limit => break,
            None => heads.push(Head {
                vector: own,
                at: out.len(),
                code,
            }),
        }
        out.push(r);
    }
    count(Unit::CandidatesGrouped, walked);
    count(Unit::VectorsCompared, compared);
    out
}

/// Each slot's index terms, one per (field, term), each marked exact (the word or its
/// stem) or a prefix expansion. A slot keeps its terms even when no learning has them;
/// [`Clauses::of`] then gives it no clause and no weight.
pub(super) fn expand(
    query: &ParsedQuery,
    open: &Open,
    lex: &Lexicon,
) -> Result<Vec<Vec<(Term, bool)>>> {
    let mut out = Vec::with_capacity(query.slots.len());
    for slot in &query.slots {
        let words: Vec<(String, bool)> = match slot {
            Slot::Exact(t) => vec![(format!("{}{t}", lex.key), true)],
            Slot::Compound(c) => vec![(format!("{}{c}", lex.key), true)],
            Slot::Prefix(prefixes) => {
                let exact: Vec<String> =
                    prefixes.iter().map(|p| format!("{}{p}", lex.key)).collect();
                let mut words: Vec<(String, bool)> =
                    exact.iter().map(|w| (w.clone(), true)).collect();
                for w in prefix_terms(prefixes, open, lex)? {
                    if !exact.contains(&w) {
                        words.push((w, false));
                    }
                }
                words
            }
        };
        let mut terms = Vec::new();
        for (w, exact) in &words {
            for field in lex.fields {
                terms.push((Term::from_field_text(field, w), *exact));
            }
        }
        out.push(terms);
    }
    Ok(out)
}

/// The most frequent indexed terms (summed over fields, segments and the tail) that
/// start with the lexicon's key and one of `prefixes`, at most [`MAX_EXPANSIONS`].
pub(super) fn prefix_terms(prefixes: &[String], open: &Open, lex: &Lexicon) -> Result<Vec<String>> {
    /// Dictionary entries scanned per prefix, field and segment (or the tail).
    const SCAN: usize = 4096;
    let mut freq: BTreeMap<String, u64> = BTreeMap::new();
    for p in prefixes {
        let p = format!("{}{p}", lex.key);
        for seg in open.disk.segment_readers() {
            for field in lex.fields {
                let inv = seg.inverted_index(field).map_err(index_err)?;
                let mut stream = inv
                    .terms()
                    .range()
                    .ge(p.as_bytes())
                    .into_stream()
                    .map_err(index_err)?;
                let mut scanned = 0;
                while stream.advance() && scanned < SCAN {
                    scanned += 1;
                    let key = stream.key();
                    if !key.starts_with(p.as_bytes()) {
                        break;
                    }
                    if let Ok(word) = std::str::from_utf8(key) {
                        *freq.entry(word.to_string()).or_default() +=
                            u64::from(stream.value().doc_freq);
                    }
                }
            }
        }
        if let Some(tail) = &open.tail {
            for slot in lex.first_slot..lex.first_slot + lex.fields.len() {
                for (word, df) in tail.starting_with(slot, &p).take(SCAN) {
                    *freq.entry(word.to_string()).or_default() += df;
                }
            }
        }
    }
    let mut words: Vec<(String, u64)> = freq.into_iter().collect();
    words.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    words.truncate(MAX_EXPANSIONS);
    Ok(words.into_iter().map(|w| w.0).collect())
}

/// For each candidate, each slot's best-field weight (0 when the slot did not match;
/// a prefix expansion × [`PREFIX_BOOST`]), read from the postings: one seek per
/// (candidate, term).
pub(super) fn slot_weights(
    candidates: &[Candidate],
    open: &Open,
    slots: &[Vec<(Term, bool)>],
    lex: &Lexicon,
) -> Result<Vec<Vec<f32>>> {
    let mut out = vec![vec![0.0f32; slots.len()]; candidates.len()];
    let weight =
        |fi: usize, exact: bool| FIELD_WEIGHTS[fi] * if exact { 1.0 } else { PREFIX_BOOST };
    // Group the disk's candidates by segment, docs ascending (postings only seek forward).
    let mut by_segment: BTreeMap<u32, Vec<(DocId, usize)>> = BTreeMap::new();
    for (i, c) in candidates.iter().enumerate() {
        match c.at {
            Hit::Disk { segment, doc } => by_segment.entry(segment).or_default().push((doc, i)),
            Hit::Tail { doc } => {
                // A tail hit comes from the tail the view holds.
                let Some(tail) = &open.tail else { continue };
                for (fi, field) in lex.fields.iter().enumerate() {
                    let f = lex.first_slot + fi;
                    for (slot, terms) in slots.iter().enumerate() {
                        for (term, exact) in terms.iter().filter(|t| t.0.field() == *field) {
                            if word_of(term).is_some_and(|w| tail.contains(f, w, doc)) {
                                let w = &mut out[i][slot];
                                *w = w.max(weight(fi, *exact));
                            }
                        }
                    }
                }
            }
        }
    }
    for (ord, mut docs) in by_segment {
        docs.sort_unstable();
        let seg = open.disk.segment_reader(ord);
        for (fi, field) in lex.fields.iter().enumerate() {
            let inv = seg.inverted_index(*field).map_err(index_err)?;
            for (slot, terms) in slots.iter().enumerate() {
                for (term, exact) in terms.iter().filter(|t| t.0.field() == *field) {
                    let Some(mut postings) = inv
                        .read_postings(term, IndexRecordOption::Basic)
                        .map_err(index_err)?
                    else {
                        continue;
                    };
                    for &(doc, i) in &docs {
                        let at = postings.doc();
                        let at = if at < doc { postings.seek(doc) } else { at };
                        if at == doc {
                            let w = &mut out[i][slot];
                            *w = w.max(weight(fi, *exact));
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unit vector at `angle` radians in the plane of the first two axes, or along the
    /// third axis for `None`.
    fn at(angle: Option<f32>) -> Vec<f32> {
        let mut v = vec![0.0; crate::embed::DIMENSION];
        match angle {
            Some(a) => (v[0], v[1]) = (a.cos(), a.sin()),
            None => v[2] = 1.0,
        }
        v
    }

    fn ranked(seq: u64, key: f32) -> Ranked {
        Ranked {
            seq,
            key,
            score: ScoreBreakdown {
                total: key,
                relevance: key,
                field_priority: 0.0,
                quality: 0.0,
                lexical: 0.0,
                semantic: None,
            },
            quality: 50,
            verified: false,
            similar_to: None,
            similar_omitted: 0,
        }
    }

    #[test]
    fn restatements_join_their_most_similar_head_and_free_places() {
        // 1 and 3 are 60° apart (cosine 0.5); 2 is 20° from 1 (0.94) and 40° from 3
        // (0.77); 4 is 35° from 1 (0.82) and 25° from 3 (0.91); 5 is orthogonal to all;
        // 6 has no vector.
        let vectors: HashMap<u64, Vec<f32>> = [
            (1, at(Some(0.0))),
            (2, at(Some(20f32.to_radians()))),
            (3, at(Some(60f32.to_radians()))),
            (4, at(Some(35f32.to_radians()))),
            (5, at(None)),
        ]
        .into_iter()
        .collect();
        let list: Vec<Ranked> = (1..=6).map(|s| ranked(s, 10.0 - s as f32)).collect();
        let run = |limit| {
            group(
                list.clone(),
                limit,
                |seq| vectors.get(&seq).map(Vec::as_slice),
                |_| None,
            )
            .iter()
            .map(|r| {
                (
                    r.seq,
                    r.similar_to.map(|(h, c)| (h, (c * 100.0).round() as u32)),
                )
            })
            .collect::<Vec<_>>()
        };
        // 4 restates both heads: the closer one takes it.
        assert_eq!(
            run(2),
            [(1, None), (2, Some((1, 94))), (3, None), (4, Some((3, 91)))]
        );
        // The walk ends where a group beyond the limit would begin.
        assert_eq!(run(1), [(1, None), (2, Some((1, 94)))]);
        // A learning without a vector heads a group of its own and draws none.
        assert_eq!(run(6).len(), 6);
        assert_eq!(run(6)[5], (6, None));
        assert_eq!(run(6)[4], (5, None));
        assert!(
            group(
                list.clone(),
                6,
                |seq| vectors.get(&seq).map(Vec::as_slice),
                |_| None
            )
            .iter()
            .all(|r| r.similar_omitted == 0)
        );
    }

    #[test]
    fn at_most_limit_restatements_are_listed_and_the_rest_counted() {
        // Seven copies of one lesson (1-7), then another lesson (8): with two places, the
        // lesson, two of its copies, the other lesson; four copies counted, not listed.
        let one = at(Some(0.0));
        let other = at(None);
        let list: Vec<Ranked> = (1..=8).map(|s| ranked(s, 10.0 - s as f32)).collect();
        let out = group(
            list,
            2,
            |seq| Some(if seq == 8 { &other } else { &one }),
            |_| None,
        );
        let seqs: Vec<u64> = out.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 8]);
        assert_eq!(out[0].similar_omitted, 4);
        assert!(out[1..].iter().all(|r| r.similar_omitted == 0));
        assert_eq!(out[1].similar_to.map(|(h, _)| h), Some(1));
        assert_eq!(out[2].similar_to.map(|(h, _)| h), Some(1));
        assert_eq!(out[3].similar_to, None);
    }

    #[test]
    fn a_loosely_similar_learning_sharing_its_heads_code_is_listed_under_it() {
        // 1 and 2 are 60° apart (cosine 0.5): below SIMILAR_COSINE, above RESTATE_COSINE.
        // 2 holds all of 1's code and is listed under it; 3, as similar to 1 but with code
        // of its own, takes a place; 4 is 70° from 1 (cosine 0.34), below the floor.
        let vectors: HashMap<u64, Vec<f32>> = [
            (1, at(Some(0.0))),
            (2, at(Some(60f32.to_radians()))),
            (3, at(Some(-60f32.to_radians()))),
            (4, at(Some(70f32.to_radians()))),
        ]
        .into_iter()
        .collect();
        let texts: HashMap<u64, &str> = [
            (1, "Key `orders.v1` by `order_id`."),
            (
                2,
                "Order events go to orders.v1 keyed by order_id, one partition per order.",
            ),
            (3, "Key `payments.v2` by `payment_id`."),
            (4, "Key `orders.v1` by `order_id` too."),
        ]
        .into_iter()
        .collect();
        let read = std::cell::Cell::new(0);
        let list: Vec<Ranked> = (1..=4).map(|s| ranked(s, 10.0 - s as f32)).collect();
        let out = group(
            list,
            3,
            |seq| vectors.get(&seq).map(Vec::as_slice),
            |seq| {
                read.set(read.get() + 1);
                texts.get(&seq).map(|t| Arc::new(CodeSignature::of(t)))
            },
        );
        let got: Vec<(u64, Option<u64>)> = out
            .iter()
            .map(|r| (r.seq, r.similar_to.map(|(h, _)| h)))
            .collect();
        assert_eq!(got, [(1, None), (2, Some(1)), (3, None), (4, None)]);
        // Each learning's text is read once at most.
        assert!(read.get() <= 4, "read {} times", read.get());
    }
}
