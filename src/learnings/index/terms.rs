//! The query in index terms: each slot's terms (prefixes expanded over the disk index
//! and the tail), their BM25 clauses and idf over both, and each candidate's per-slot
//! field weights (field priority's input).

use std::collections::BTreeMap;

use tantivy::query::{Bm25StatisticsProvider, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocId, DocSet, Score, Searcher, Term};

use crate::error::Result;

use super::super::query::{FIELD_WEIGHTS, MAX_EXPANSIONS, PREFIX_BOOST, ParsedQuery, Slot};
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

impl Lexicon {
    /// The fields a search of `scope` reads: a project's scoped terms, or every
    /// project's plain ones.
    pub(super) fn of(scope: &SearchScope, fields: Fields) -> Lexicon {
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
pub(super) struct Clauses<'t> {
    pub(super) queries: Vec<(Occur, Box<dyn Query>)>,
    /// Each clause's term and boost, to score the tail with.
    pub(super) scored: Vec<(&'t Term, Score)>,
    /// Each slot's idf (of its most frequent term): the weights of field priority.
    pub(super) slot_idf: Vec<f32>,
}

impl<'t> Clauses<'t> {
    pub(super) fn of(
        slots: &'t [Vec<(Term, bool)>],
        stats: &Combined<'_>,
        docs: u64,
    ) -> Result<Self> {
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
