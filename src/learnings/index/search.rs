//! One search on one view of the index: BM25 statistics summed over the disk index and
//! the tail, the query expanded into index terms, the top-k collection with the
//! blend's filters, and each candidate's per-slot field weights.

use std::collections::{BTreeMap, BinaryHeap, HashMap};

use tantivy::query::{
    Bm25StatisticsProvider, Bm25Weight, BooleanQuery, BoostQuery, EnableScoring, Occur, Query,
    TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocId, DocSet, Score, Searcher, Term};

use crate::error::Result;

use super::super::lifecycle;
use super::super::meta::Meta;
use super::super::query::{
    Evidence, FIELD_WEIGHTS, MAX_EXPANSIONS, PREFIX_BOOST, ParsedQuery, SEMANTIC_FLOOR, Slot,
};
use super::super::tail::Tail;

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
    pub query: &'a ParsedQuery,
    pub scope: &'a SearchScope,
    pub min_quality: Option<u8>,
    /// Candidates taken by BM25 (and by cosine) before the blend re-ranks them.
    pub candidates: usize,
    pub limit: usize,
    /// The query's embedding, when the model is available (and the ranking uses it).
    pub vector: Option<&'a [f32]>,
    pub ranking: Ranking,
    /// Superseded learnings are candidates too.
    pub include_superseded: bool,
    /// Archived learnings are candidates too.
    pub include_archived: bool,
}

/// A search on one view (see [`LearningIndex::search`]).
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
    let lexicon = match s.scope {
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
    };
    let slots = expand(s.query, open, &lexicon)?;
    // Each slot's idf (of its most frequent term): the weights of field priority.
    let mut slot_idf = Vec::with_capacity(slots.len());
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    // Each clause's term and boost, to score the tail with.
    let mut scored: Vec<(&Term, Score)> = Vec::new();
    for terms in &slots {
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
                scored.push((term, 1.0));
                q
            } else {
                scored.push((term, PREFIX_BOOST));
                Box::new(BoostQuery::new(q, PREFIX_BOOST))
            };
            clauses.push((Occur::Should, q));
        }
        slot_idf.push(idf(max_df, docs));
    }
    let meta = &open.meta;
    let project = match s.scope {
        SearchScope::Project(p) | SearchScope::OtherProjects(p) => {
            Some(meta.project_ids.get(p).copied())
        }
        SearchScope::All => None,
    };
    let project_ok = |p: u32| -> bool {
        match (s.scope, project) {
            (SearchScope::Project(_), Some(want)) => want == Some(p),
            (SearchScope::OtherProjects(_), Some(not)) => not != Some(p),
            _ => true,
        }
    };
    let accepts = |m: &Meta| -> bool {
        project_ok(m.project)
            && (s.include_superseded || !m.superseded)
            && (s.include_archived || !m.archived)
            && (m.verified || s.min_quality.is_none_or(|q| m.quality >= q))
    };
    // The quality the blend weighs: the standing one, times AGE_FACTOR once aged; 50 for
    // every learning under `FixedQuality`.
    let now = lifecycle::now_secs();
    let blend_quality = |m: &Meta| -> u8 {
        if s.ranking == Ranking::FixedQuality {
            50
        } else if meta.stale(m, now) {
            (f32::from(m.quality) * lifecycle::AGE_FACTOR).round() as u8
        } else {
            m.quality
        }
    };

    let k = s.candidates.max(s.limit).max(1);
    let mut heap: BinaryHeap<Candidate> = BinaryHeap::with_capacity(k + 1);
    let mut offer = |c: Candidate| {
        heap.push(c);
        if heap.len() > k {
            heap.pop();
        }
        heap.peek().filter(|_| heap.len() >= k).map(|c| c.score)
    };
    let lexical = s.ranking != Ranking::Dense && !clauses.is_empty();
    if lexical {
        let query = BooleanQuery::new(clauses);
        let weight = query
            .weight(EnableScoring::enabled_from_statistics_provider(
                &stats, &open.disk,
            ))
            .map_err(index_err)?;
        let mut threshold: Score = 0.0;
        for (ord, seg) in open.disk.segment_readers().iter().enumerate() {
            if seg.num_docs() == 0 {
                continue;
            }
            let seqs = seg.fast_fields().u64("seq").map_err(index_err)?;
            weight
                .for_each_pruning(threshold, seg, &mut |doc, score| {
                    let seq = seqs.first(doc).unwrap_or(0);
                    if meta.get(seq).is_some_and(|m| accepts(&m)) {
                        let at = Hit::Disk {
                            segment: ord as u32,
                            doc,
                        };
                        if let Some(worst) = offer(Candidate { score, at, seq }) {
                            threshold = worst;
                        }
                    }
                    threshold
                })
                .map_err(index_err)?;
        }
        // The tail: the same BM25 weights, applied to its counted terms.
        if let Some(tail) = &open.tail {
            let mut weights = Vec::with_capacity(scored.len());
            for &(term, boost) in &scored {
                let (Some(slot), Some(word)) = (fields.slot(term.field()), word_of(term)) else {
                    continue;
                };
                let w =
                    Bm25Weight::for_terms(&stats, std::slice::from_ref(term)).map_err(index_err)?;
                weights.push((slot, word, w, boost));
            }
            let mut scores = vec![None; tail.docs() as usize];
            for (slot, word, w, boost) in &weights {
                tail.score_into(*slot, word, w, *boost, &mut scores);
            }
            for (doc, score) in scores.into_iter().enumerate() {
                let Some(score) = score else { continue };
                let doc = doc as u32;
                let seq = tail.seq(doc);
                if meta.get(seq).is_some_and(|m| accepts(&m)) {
                    let at = Hit::Tail { doc };
                    offer(Candidate { score, at, seq });
                }
            }
        }
    }

    let lexical_hits = heap.into_vec();
    let weights = slot_weights(&lexical_hits, open, &slots, &lexicon)?;
    let mut seqs: Vec<u64> = Vec::with_capacity(lexical_hits.len());
    let mut evidence: Vec<Evidence> = Vec::with_capacity(lexical_hits.len());
    let mut position: HashMap<u64, usize> = HashMap::with_capacity(lexical_hits.len());
    for (c, w) in lexical_hits.iter().zip(&weights) {
        let Some(m) = meta.get(c.seq) else { continue };
        position.insert(c.seq, seqs.len());
        seqs.push(c.seq);
        evidence.push(Evidence {
            bm25: c.score,
            field_priority: super::super::query::field_priority(w, &slot_idf),
            cosine: None,
            quality: blend_quality(&m),
        });
    }
    let semantic = s.ranking != Ranking::Lexical && s.vector.is_some();
    if let Some(v) = s.vector.filter(|_| semantic) {
        let nearest = open.vectors.top_k(v, k, project_ok, |seq| {
            meta.get(seq).is_some_and(|m| accepts(&m))
        });
        for (seq, cos) in nearest {
            if let Some(&i) = position.get(&seq) {
                evidence[i].cosine = Some(cos);
            } else if s.ranking == Ranking::Dense || cos >= SEMANTIC_FLOOR {
                let Some(m) = meta.get(seq) else { continue };
                position.insert(seq, seqs.len());
                seqs.push(seq);
                evidence.push(Evidence {
                    bm25: 0.0,
                    field_priority: 0.0,
                    cosine: Some(cos),
                    quality: blend_quality(&m),
                });
            }
        }
        // Lexical candidates beyond the nearest k still get their similarity.
        for (seq, e) in seqs.iter().zip(evidence.iter_mut()) {
            if e.cosine.is_none() {
                e.cosine = open.vectors.cosine(v, *seq);
            }
        }
    }
    let scores = super::super::query::blend(&evidence, semantic);
    let mut ranked: Vec<Ranked> = seqs
        .iter()
        .zip(&evidence)
        .zip(scores)
        .filter_map(|((seq, e), score)| {
            let m = meta.get(*seq)?;
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
            })
        })
        .collect();
    ranked.sort_by(|a, b| b.key.total_cmp(&a.key).then(b.seq.cmp(&a.seq)));
    ranked.truncate(s.limit);
    Ok(ranked)
}

/// Each slot's index terms, one per (field, term), each marked exact (the word or its
/// stem) or a prefix expansion. Exact slots keep their term even when absent (it still
/// counts in the slot's idf).
pub(super) fn expand(
    query: &ParsedQuery,
    open: &Open,
    lex: &Lexicon,
) -> Result<Vec<Vec<(Term, bool)>>> {
    let mut out = Vec::with_capacity(query.slots.len());
    for slot in &query.slots {
        let words: Vec<(String, bool)> = match slot {
            Slot::Exact(t) => vec![(format!("{}{t}", lex.key), true)],
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
