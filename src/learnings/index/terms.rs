//! The query in index terms: each slot's terms (prefixes expanded over the disk index
//! and the tail), their BM25 clauses and idf over both (a query over more postings than
//! [`POSTINGS_BUDGET`] narrowed to its rarest words), and each candidate's per-slot field
//! weights (field priority's input).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use tantivy::query::{Bm25StatisticsProvider, BoostQuery, Query, TermQuery};
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

/// Postings a query's terms may hold for all of them to choose the lexical half's
/// candidates: their document frequencies, summed over the scope's fields, the disk index
/// and the tail. A query over more is narrowed ([`Clauses::of`]). Chosen on the bench's Zipf million in one
/// project (docs/perf/learnings.md); a set of a few thousand learnings never reaches it.
pub(crate) const POSTINGS_BUDGET: u64 = 65_536;

/// The budget in force: [`POSTINGS_BUDGET`], or `CAIRN_LEARNINGS_POSTINGS_BUDGET` (read
/// once; `0` for no budget, every search exact), which the bench uses for its reference.
pub(crate) fn postings_budget() -> u64 {
    static BUDGET: OnceLock<u64> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        match std::env::var("CAIRN_LEARNINGS_POSTINGS_BUDGET")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            Some(0) => u64::MAX,
            Some(n) => n,
            None => POSTINGS_BUDGET,
        }
    })
}

/// The query's BM25 clauses: one per indexed term, prefix expansions boosted down.
pub(super) struct Clauses<'t> {
    /// Each clause's term and boost, and whether its word drives.
    pub(super) scored: Vec<Scored<'t>>,
    /// Each slot's idf (of its most frequent term): the weights of field priority.
    pub(super) slot_idf: Vec<f32>,
    /// The postings of the driving words' terms: what their union walks to find the
    /// candidates.
    pub(super) postings: u64,
}

/// One clause of [`Clauses`]: its term, its boost, and whether it drives (a learning is a
/// candidate only if it holds a driving term).
pub(super) struct Scored<'t> {
    pub(super) term: &'t Term,
    pub(super) boost: Score,
    pub(super) drives: bool,
}

impl Scored<'_> {
    /// The clause's query: the term's, boosted down for a prefix expansion.
    pub(super) fn query(&self) -> Box<dyn Query> {
        let q = Box::new(TermQuery::new(
            self.term.clone(),
            IndexRecordOption::WithFreqs,
        ));
        if self.boost == 1.0 {
            q
        } else {
            Box::new(BoostQuery::new(q, self.boost))
        }
    }
}

impl<'t> Clauses<'t> {
    /// The clauses of `slots`. When their terms hold more than [`postings_budget`]
    /// postings and the query has more than one word, the rarest words **drive**: the
    /// slots taken rarest first while their postings stay within the budget (the rarest
    /// always). Only a learning holding a driving word is a candidate, scored by BM25 over
    /// every word; the other words only score those candidates. Under the budget, every
    /// word drives and BM25's top k is exact.
    pub(super) fn of(
        slots: &'t [Vec<(Term, bool)>],
        stats: &Combined<'_>,
        docs: u64,
    ) -> Result<Self> {
        let mut c = Clauses {
            scored: Vec::new(),
            slot_idf: Vec::with_capacity(slots.len()),
            postings: 0,
        };
        // Each slot's first clause, and its postings (its terms' document frequencies).
        let mut slot_postings = Vec::with_capacity(slots.len());
        for terms in slots {
            let (first, mut max_df, mut sum) = (c.scored.len(), 0, 0);
            for (term, exact) in terms {
                let df = stats.doc_freq(term).map_err(index_err)?;
                if df == 0 {
                    continue;
                }
                (max_df, sum) = (max_df.max(df), sum + df);
                c.scored.push(Scored {
                    term,
                    boost: if *exact { 1.0 } else { PREFIX_BOOST },
                    drives: true,
                });
            }
            // A slot no learning of the scope has weighs nothing: it would lower every
            // candidate's field priority alike.
            c.slot_idf
                .push(if max_df == 0 { 0.0 } else { idf(max_df, docs) });
            slot_postings.push((first, sum));
        }
        let sums: Vec<u64> = slot_postings.iter().map(|s| s.1).collect();
        let drives = driving(&sums, postings_budget());
        for (n, &(first, sum)) in slot_postings.iter().enumerate() {
            let end = slot_postings.get(n + 1).map_or(c.scored.len(), |s| s.0);
            c.postings += if drives[n] { sum } else { 0 };
            for s in &mut c.scored[first..end] {
                s.drives = drives[n];
            }
        }
        Ok(c)
    }
}

/// Which slots drive, given each slot's postings (see [`Clauses::of`]): all of them
/// within `budget` or with fewer than two words indexed; otherwise the rarest while their
/// sum stays within it, the rarest always.
fn driving(postings: &[u64], budget: u64) -> Vec<bool> {
    let words = postings.iter().filter(|&&p| p > 0).count();
    if words < 2 || postings.iter().sum::<u64>() <= budget {
        return vec![true; postings.len()];
    }
    let mut order: Vec<usize> = (0..postings.len()).filter(|&i| postings[i] > 0).collect();
    order.sort_by_key(|&i| (postings[i], i));
    let mut drives = vec![false; postings.len()];
    let mut sum = 0u64;
    for (n, i) in order.into_iter().enumerate() {
        if n > 0 && sum + postings[i] > budget {
            break;
        }
        sum += postings[i];
        drives[i] = true;
    }
    drives
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
    use super::driving;

    #[test]
    fn the_rarest_words_drive_a_query_over_the_budget() {
        // Within the budget, or one word: every word drives (BM25 exact).
        assert_eq!(driving(&[40, 30, 30], 100), vec![true; 3]);
        assert_eq!(driving(&[0, 5_000], 100), vec![true; 2]);
        // Over it: the rarest first while their sum stays within it.
        assert_eq!(
            driving(&[5_000, 30, 60, 20, 0], 100),
            vec![false, true, false, true, false]
        );
        // The rarest always, even over the budget alone; a word with no postings never.
        assert_eq!(driving(&[500, 0, 300], 100), vec![false, false, true]);
        // Equal postings: the earlier slot first.
        assert_eq!(driving(&[60, 60, 60], 150), vec![true, true, false]);
    }
}
