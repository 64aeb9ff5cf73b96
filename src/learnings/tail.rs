//! The tail of the learnings index: learnings past the disk index's watermark,
//! counted in memory and scored with tantivy's own BM25 weights.
//!
//! A search that finds new learnings (another session's, or its own session's last
//! `add_learning`) must score them before the background indexer has committed them.
//! Building a tantivy segment for them cost a search about a millisecond and a half of
//! CPU whatever the number of rows (a term-dictionary builder per field, fast-field
//! and posting writers, all allocated and dropped again), more than the rest of the
//! search. The tail here is what BM25 needs and nothing more: each learning's token count
//! per field (its field norm) and each term's postings with their frequencies.
//!
//! Scores are the disk index's: the weights are [`tantivy::query::Bm25Weight`]s built
//! from the statistics summed over the disk index and the tail, field norms are
//! quantised with tantivy's [`FieldNormReader::fieldnorm_to_id`], and the words come
//! from the same analysis as the indexed documents ([`super::index`]'s `Row`). Only the
//! order in which one document's term scores are added can differ from tantivy's, so a
//! score can differ in its last bits.

use std::collections::BTreeMap;
use std::ops::Bound;

use tantivy::Score;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::query::Bm25Weight;
use tantivy::tokenizer::MAX_TOKEN_LEN;

/// Searchable fields: the three text fields, then their project-scoped twins.
pub(super) const SLOTS: usize = 6;

/// One learning's analysed words per field slot (`None`: the field is absent).
pub(super) type Words = [Option<Vec<String>>; SLOTS];

/// The learnings `(from, to]`, counted for BM25.
#[cfg_attr(test, derive(Debug, PartialEq))]
pub(super) struct Tail {
    pub(super) from: u64,
    pub(super) to: u64,
    /// Each document's `seq`, by document number.
    seqs: Vec<u64>,
    /// Per slot, each document's field norm id.
    norms: [Vec<u8>; SLOTS],
    /// Per slot, the tokens of every document.
    tokens: [u64; SLOTS],
    /// Per slot, each word's postings: (document, term frequency), documents ascending.
    terms: [BTreeMap<String, Vec<(u32, u32)>>; SLOTS],
}

impl Tail {
    /// Count `docs` (`seq` and words, in `seq` order) as the part `(from, to]`.
    pub(super) fn new(from: u64, to: u64, docs: impl IntoIterator<Item = (u64, Words)>) -> Tail {
        let mut tail = Tail {
            from,
            to,
            seqs: Vec::new(),
            norms: Default::default(),
            tokens: [0; SLOTS],
            terms: Default::default(),
        };
        for (seq, words) in docs {
            let doc = tail.seqs.len() as u32;
            tail.seqs.push(seq);
            for (slot, words) in words.into_iter().enumerate() {
                let mut norm = 0u32;
                // tantivy drops (and does not count) an over-long token.
                for w in words
                    .into_iter()
                    .flatten()
                    .filter(|w| w.len() <= MAX_TOKEN_LEN)
                {
                    norm += 1;
                    let postings = tail.terms[slot].entry(w).or_default();
                    match postings.last_mut() {
                        Some((d, tf)) if *d == doc => *tf += 1,
                        _ => postings.push((doc, 1)),
                    }
                }
                tail.tokens[slot] += u64::from(norm);
                tail.norms[slot].push(FieldNormReader::fieldnorm_to_id(norm));
            }
        }
        tail
    }

    /// Append the part `next`, which starts where this one ends: its documents follow
    /// this part's, so every posting list stays in document order. Costs what `next`
    /// holds, not what this part holds.
    pub(super) fn append(&mut self, next: Tail) {
        debug_assert_eq!(self.to, next.from);
        let offset = self.seqs.len() as u32;
        self.seqs.extend(next.seqs);
        for (slot, terms) in next.terms.into_iter().enumerate() {
            self.norms[slot].extend(&next.norms[slot]);
            self.tokens[slot] += next.tokens[slot];
            for (word, postings) in terms {
                self.terms[slot]
                    .entry(word)
                    .or_default()
                    .extend(postings.into_iter().map(|(doc, tf)| (doc + offset, tf)));
            }
        }
        self.to = next.to;
    }

    /// Documents in this part.
    pub(super) fn docs(&self) -> u64 {
        self.seqs.len() as u64
    }

    /// The `seq` of document `doc`.
    pub(super) fn seq(&self, doc: u32) -> u64 {
        self.seqs[doc as usize]
    }

    /// Tokens of every document in `slot` (BM25's field length total).
    pub(super) fn total_tokens(&self, slot: usize) -> u64 {
        self.tokens[slot]
    }

    /// The postings of `word` in `slot`.
    pub(super) fn postings(&self, slot: usize, word: &str) -> &[(u32, u32)] {
        self.terms[slot].get(word).map_or(&[], Vec::as_slice)
    }

    /// Whether document `doc` holds `word` in `slot`.
    pub(super) fn contains(&self, slot: usize, word: &str, doc: u32) -> bool {
        self.postings(slot, word)
            .binary_search_by_key(&doc, |p| p.0)
            .is_ok()
    }

    /// The words of `slot` that start with `prefix`, with their document frequencies.
    pub(super) fn starting_with<'a>(
        &'a self,
        slot: usize,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a str, u64)> + 'a {
        self.terms[slot]
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(move |(w, _)| w.starts_with(prefix))
            .map(|(w, p)| (w.as_str(), p.len() as u64))
    }

    /// Add `weight × boost` for every document holding `word` in `slot` to `scores`
    /// (indexed by document), as tantivy's term scorer would score it: to every such
    /// document when the term `adds` documents, else only to those already scored.
    pub(super) fn score_into(
        &self,
        slot: usize,
        word: &str,
        weight: &Bm25Weight,
        boost: Score,
        adds: bool,
        scores: &mut [Option<Score>],
    ) {
        for &(doc, tf) in self.postings(slot, word) {
            let acc = &mut scores[doc as usize];
            if adds || acc.is_some() {
                let s = weight.score(self.norms[slot][doc as usize], tf) * boost;
                *acc = Some(acc.unwrap_or(0.0) + s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &[&str]) -> Option<Vec<String>> {
        Some(s.iter().map(|w| w.to_string()).collect())
    }

    #[test]
    fn counts_norms_frequencies_and_prefixes() {
        let docs = vec![
            (
                7,
                [
                    words(&["cach", "warm", "cach"]),
                    words(&[]),
                    None,
                    None,
                    None,
                    None,
                ],
            ),
            (
                9,
                [words(&["cache"]), None, words(&["warm"]), None, None, None],
            ),
        ];
        let t = Tail::new(6, 9, docs);
        assert_eq!(t.docs(), 2);
        assert_eq!((t.seq(0), t.seq(1)), (7, 9));
        assert_eq!(t.total_tokens(0), 4);
        assert_eq!(t.total_tokens(2), 1);
        assert_eq!(t.postings(0, "cach"), &[(0, 2)]);
        assert!(t.contains(0, "warm", 0) && !t.contains(0, "warm", 1));
        assert!(t.contains(2, "warm", 1));
        let p: Vec<_> = t.starting_with(0, "cach").collect();
        assert_eq!(p, vec![("cach", 1), ("cache", 1)]);
        assert_eq!(t.norms[0], vec![3, 1]);
        assert_eq!(t.norms[1], vec![0, 0]);
        let w = Bm25Weight::for_one_term(1, 2, 2.0);
        let mut scores = vec![None; 2];
        t.score_into(0, "cach", &w, 1.0, true, &mut scores);
        assert_eq!(scores[0], Some(w.score(3, 2)));
        assert_eq!(scores[1], None);
        // A term that adds no documents scores only those already scored: document 1
        // holds "warm" in slot 2 but no adding term.
        t.score_into(2, "warm", &w, 1.0, false, &mut scores);
        assert_eq!(scores[1], None);
        t.score_into(0, "warm", &w, 1.0, false, &mut scores);
        assert_eq!(scores[0], Some(w.score(3, 2) + w.score(3, 1)));
    }
}
