//! Query text → search terms, and the ranking blend.
//!
//! **Parsing.** Agent text is never handed to a query parser: it is cut into words
//! (runs of letters and digits, as the index's tokenizer does), so quotes, colons,
//! parentheses, `AND`/`OR`/`NOT` and dashes are only separators and nothing can fail to
//! parse. Each word becomes one *slot*:
//! - a word followed by `*`, and the last word of the query when it has at least
//!   [`IMPLICIT_PREFIX_MIN`] characters, is a **prefix** slot: it matches every indexed
//!   term that starts with the word or with its stem (capped at [`MAX_EXPANSIONS`]
//!   terms, the most frequent first);
//! - any other word is an **exact** slot on its English stem (`imports` → `import`);
//! - stop words ([`STOP_WORDS`]) are dropped unless written with `*`.
//!
//! **Compound identifiers.** Words joined by `_`, `.` or `-` (`health_check_interval`,
//! `enable.idempotence`, `producer.go`, `rds-v3.2.0`) are also indexed whole, lower-cased
//! and unstemmed ([`compounds`]), beside their words. Each compound of a query is one
//! more exact slot, searched only when some learning of the scope has it: a query
//! naming an identifier finds the learnings that name it ahead of those that merely
//! share its words.
//!
//! Slots are OR-ed (a learning matches when any slot matches, in any field), and scored
//! by BM25 summed over the three fields. At most [`MAX_SLOTS`] distinct slots are used.
//!
//! **Prefix expansions** never outrank exact matches: an indexed term equal to the
//! prefix (or its stem) counts fully, every longer term it expands to counts
//! [`PREFIX_BOOST`] in BM25 and in field priority.
//!
//! **Blend.** `score = 0.5·relevance + 0.3·field_priority + 0.2·quality`, each in
//! `[0, 1]`, computed over one query's candidates (the best lexical ones and, with the
//! model, the nearest ones by embedding):
//! - `relevance` fuses `lexical = bm25 / best bm25 among the candidates` and, when the
//!   model is available, `semantic = (cos − floor) / (best cos − floor)` (clamped at 0,
//!   `floor` = [`SEMANTIC_FLOOR`]) as `share·lexical + (1 − share)·semantic`. Both are
//!   normalised by the query's best candidate, so the spread within one query is kept
//!   whole (the top hit has relevance near 1, a hit half as good near 0.5).
//! - The lexical `share` follows the query ([`lexical_share`]): it grows from
//!   [`LEXICAL_SHARE_MIN`] to [`LEXICAL_SHARE_MAX`] with the best field priority among
//!   the candidates, i.e. with how much of the query's distinctive words one learning
//!   matches. A query whose words barely occur, or match only generic terms, is ranked
//!   mostly by the embedding; one whose rare words (an identifier, an error string) one
//!   learning names is ranked mostly by BM25.
//! - `field_priority` says *how much* of the query matched *where*: each query slot
//!   counts the best field it occurs in (pattern 1.0, applies_to 0.6, context 0.3; a
//!   prefix expansion × [`PREFIX_BOOST`]), weighted by the slot's idf, summed over
//!   **all** query slots and divided by their total idf. Matching one common word in the
//!   pattern therefore scores little; matching most of the query's rare words scores high.
//!   A slot no learning of the scope has (a misspelt word, a word of another project)
//!   weighs nothing: it would lower every candidate's field priority alike.
//! - An **in-order phrase** adds to `relevance` (still at most 1): a candidate among the
//!   blend's first [`PHRASE_CANDIDATES`] whose text (pattern and context) holds a run of
//!   the query's words in the query's order, verbatim, gets [`PHRASE_STEP`] per word of
//!   the run beyond two, at most [`PHRASE_MAX`] ([`phrase_bonus`]; the run counts its
//!   words that are not stop words, [`ParsedQuery::in_order_run`]). A pasted error string
//!   or command thus ranks the learning quoting it first, where BM25 alone would and the
//!   embedding does not. The scores are blended again with it; the words in order are
//!   kept by the index's view, read once per learning and process (`index/view.rs`).
//! - `quality = quality_score / 100 × relevance`: a rating decides between hits of about
//!   the same relevance and cannot lift an unrelated learning over a relevant one. The
//!   quality weighed is the standing one, halved once aged, plus
//!   [`super::lifecycle::VERIFIED_BONUS`] for a verified learning (`index/search.rs`).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::LazyLock;

use serde::Serialize;
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};

use crate::error::{Error, Result};

/// Name under which [`analyzer`] is registered on every learnings index.
/// (The name is the index format's version: an index written with another name has
/// another schema, and is rebuilt.)
pub(crate) const TOKENIZER: &str = "cairn_en_compounds";

/// Tokens this long (bytes) or longer are not indexed (hashes, base64 blobs).
const LONG_TOKEN: usize = 40;

/// Words too common to search for: Lucene's English list plus question words that
/// agents put in natural-language queries ("how do I ...").
pub const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with", "how", "do", "does", "did", "i", "we", "you",
    "what", "why", "which", "can", "should", "would", "my", "our",
];

/// The last query word becomes a prefix when it has at least this many characters.
pub(crate) const IMPLICIT_PREFIX_MIN: usize = 3;
/// At most this many indexed terms stand for one prefix slot.
pub(crate) const MAX_EXPANSIONS: usize = 16;
/// At most this many distinct slots are searched; further words are ignored.
pub(crate) const MAX_SLOTS: usize = 32;

/// Blend weights.
pub(crate) const W_RELEVANCE: f32 = 0.5;
pub(crate) const W_FIELD: f32 = 0.3;
pub(crate) const W_QUALITY: f32 = 0.2;

/// Field-priority weight of a match in the pattern, applies_to and context fields.
pub(crate) const FIELD_WEIGHTS: [f32; 3] = [1.0, 0.6, 0.3];
/// Weight of a prefix expansion (an indexed term longer than the prefix) relative to an
/// exact match, in BM25 and in field priority.
pub(crate) const PREFIX_BOOST: f32 = 0.3;
/// Share of the lexical part in `relevance` when semantic recall is on, for a query
/// no candidate matches on any distinctive word ([`lexical_share`]).
pub(crate) const LEXICAL_SHARE_MIN: f32 = 0.3;
/// The same, for a query whose every word one candidate has in its pattern.
pub(crate) const LEXICAL_SHARE_MAX: f32 = 0.7;
/// The in-order phrase bonus is looked for among the blend's first this many candidates.
pub(crate) const PHRASE_CANDIDATES: usize = 10;
/// Relevance added per word of an in-order phrase beyond two ([`phrase_bonus`]).
pub(crate) const PHRASE_STEP: f32 = 0.25;
/// At most this much relevance comes of an in-order phrase.
pub(crate) const PHRASE_MAX: f32 = 0.5;
/// Cosine similarity at which the semantic part is 0; a learning matching no query word
/// joins the candidates only above it.
pub(crate) const SEMANTIC_FLOOR: f32 = 0.25;

/// The analyzer of the indexed fields: words, ≤ 40 bytes, lower-cased, stop words
/// removed, English (Snowball) stems.
pub(crate) fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(LONG_TOKEN))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(
            STOP_WORDS.iter().map(|w| w.to_string()),
        ))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// The stem of one lower-case word, or `None` for a stop word or an over-long word.
fn stem(word: &str) -> Option<String> {
    static ANALYZER: LazyLock<TextAnalyzer> = LazyLock::new(analyzer);
    let mut a = ANALYZER.clone();
    let mut stream = a.token_stream(word);
    let mut out = None;
    while let Some(t) = stream.next() {
        out = Some(t.text.clone());
    }
    out
}

/// One unit of the query.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Slot {
    /// An indexed term (a stem).
    Exact(String),
    /// Indexed terms starting with any of these strings.
    Prefix(Vec<String>),
    /// A compound identifier, indexed whole ([`compounds`]); searched only when some
    /// learning of the scope has it.
    Compound(String),
}

/// A query cut into slots.
#[derive(Debug, Clone)]
pub(crate) struct ParsedQuery {
    pub(crate) slots: Vec<Slot>,
    /// Every word of the query in order ([`word_id`]), with whether it counts in an
    /// in-order phrase (it is not a stop word).
    words: Vec<(u32, bool)>,
}

impl ParsedQuery {
    fn new(slots: Vec<Slot>, words: &[(String, bool)]) -> Self {
        let words = words
            .iter()
            .map(|(w, _)| (word_id(w), !STOP_WORDS.contains(&w.as_str())))
            .collect();
        ParsedQuery { slots, words }
    }

    /// Whether some text could hold an in-order phrase of this query worth a bonus (the
    /// query has at least three words that count).
    pub(crate) fn has_phrase(&self) -> bool {
        self.words.iter().filter(|(_, counts)| *counts).count() > 2
    }

    /// The longest run of this query's words found in `text` ([`word_ids`]) in the same
    /// order with nothing between them, counted in the words that are not stop words.
    pub(crate) fn in_order_run(&self, text: &[u32]) -> usize {
        // The run (its counted words; `None`: no run) ending at the previous query word
        // and each text word.
        let mut prev: Vec<Option<usize>> = vec![None; text.len() + 1];
        let mut cur = prev.clone();
        let mut best = 0;
        for &(word, counts) in &self.words {
            cur.fill(None);
            for (j, &t) in text.iter().enumerate() {
                if t == word {
                    let run = prev[j].unwrap_or(0) + usize::from(counts);
                    best = best.max(run);
                    cur[j + 1] = Some(run);
                }
            }
            std::mem::swap(&mut prev, &mut cur);
        }
        best
    }
}

/// The relevance an in-order phrase of `run` counted words adds: [`PHRASE_STEP`] per
/// word beyond two, at most [`PHRASE_MAX`].
pub(crate) fn phrase_bonus(run: usize) -> f32 {
    (PHRASE_STEP * run.saturating_sub(2) as f32).min(PHRASE_MAX)
}

/// A word as an in-order phrase compares it: a hash of its lower-cased form (the same
/// for one word throughout the process; 32 bits, so that a run of three or more falsely
/// matched words is out of reach).
fn word_id(word: &str) -> u32 {
    let mut h = DefaultHasher::new();
    word.hash(&mut h);
    h.finish() as u32
}

/// The words of `text` in order ([`word_id`]), as [`ParsedQuery::in_order_run`] reads
/// them.
pub(crate) fn word_ids(text: &str) -> Box<[u32]> {
    words_of(text).iter().map(|(w, _)| word_id(w)).collect()
}

/// Cut agent text into slots. Fails only with a validation error: blank text, or text
/// with no searchable word.
pub(crate) fn parse(text: &str) -> Result<ParsedQuery> {
    if text.trim().is_empty() {
        return Err(Error::invalid(
            "query",
            "must not be empty or blank; give a few words, e.g. \"auto-import utils\"",
        ));
    }
    let words = words_of(text);
    if words.is_empty() {
        return Err(Error::invalid(
            "query",
            "has no words to search for (only punctuation or operators); give a few words, e.g. \
             \"auto-import utils\"",
        ));
    }
    let mut slots = slots_of(&words, true);
    for c in compounds(text) {
        let slot = Slot::Compound(c);
        if !slots.contains(&slot) && slots.len() < MAX_SLOTS {
            slots.push(slot);
        }
    }
    if slots.is_empty() {
        return Err(Error::invalid(
            "query",
            format!(
                "has only common words that are not indexed ({}); add a distinctive word",
                words
                    .iter()
                    .map(|w| w.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    Ok(ParsedQuery::new(slots, &words))
}

/// Cut a text Cairn wrote itself (the duplicate check's words of a new learning) into
/// exact slots: no word is a half-typed prefix. `None` when no word is searchable.
pub(crate) fn parse_words(text: &str) -> Option<ParsedQuery> {
    let words = words_of(text);
    let slots = slots_of(&words, false);
    (!slots.is_empty()).then(|| ParsedQuery::new(slots, &words))
}

/// The lower-cased words of `text` (runs of letters and digits), each with whether a
/// `*` follows it.
fn words_of(text: &str) -> Vec<(String, bool)> {
    let chars: Vec<char> = text.chars().collect();
    spans(&chars, &[])
        .into_iter()
        .map(|(start, end)| {
            let word = chars[start..end].iter().collect::<String>().to_lowercase();
            (word, chars.get(end) == Some(&'*'))
        })
        .collect()
}

/// The compound identifiers of `text`, lower-cased: runs of letters and digits joined by
/// single `_`, `.` or `-` (`--health-interval` gives `health-interval`; a sentence's
/// final `.` joins nothing). Those of [`LONG_TOKEN`] bytes or more are left out.
pub(crate) fn compounds(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    spans(&chars, &['_', '.', '-'])
        .into_iter()
        .map(|(start, end)| &chars[start..end])
        .filter(|c| c.iter().any(|ch| !ch.is_alphanumeric()))
        .map(|c| c.iter().collect::<String>().to_lowercase())
        .filter(|c| c.len() < LONG_TOKEN)
        .collect()
}

/// The `[start, end)` spans of `chars` that are runs of letters and digits, a run going
/// on across one of `joiners` that has a letter or digit on both sides.
fn spans(chars: &[char], joiners: &[char]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_alphanumeric() {
            i += 1;
            continue;
        }
        let start = i;
        loop {
            while i < chars.len() && chars[i].is_alphanumeric() {
                i += 1;
            }
            let joins = i + 1 < chars.len()
                && joiners.contains(&chars[i])
                && chars[i + 1].is_alphanumeric();
            if !joins {
                break;
            }
            i += 1;
        }
        out.push((start, i));
    }
    out
}

/// The slots of `words`: a starred word, and with `implicit_prefix` the last word, match
/// as prefixes; stop words and over-long tokens are dropped.
fn slots_of(words: &[(String, bool)], implicit_prefix: bool) -> Vec<Slot> {
    let last = words.len().saturating_sub(1);
    let mut slots: Vec<Slot> = Vec::new();
    for (n, (word, starred)) in words.iter().enumerate() {
        if word.len() >= LONG_TOKEN {
            continue;
        }
        let stemmed = stem(word);
        let implicit = implicit_prefix
            && n == last
            && stemmed.is_some()
            && word.chars().count() >= IMPLICIT_PREFIX_MIN;
        let slot = if *starred || implicit {
            let mut prefixes = vec![word.clone()];
            match &stemmed {
                // The stem is a prefix of the word (`imports` → `import`): the stem's
                // prefix already covers every term the word's prefix would.
                Some(s) if s != word && word.starts_with(s.as_str()) => prefixes = vec![s.clone()],
                Some(s) if s != word => prefixes.push(s.clone()),
                _ => {}
            }
            Slot::Prefix(prefixes)
        } else if let Some(s) = stemmed {
            Slot::Exact(s)
        } else {
            continue;
        };
        if !slots.contains(&slot) && slots.len() < MAX_SLOTS {
            slots.push(slot);
        }
    }
    slots
}

/// The score of a hit, its three components (each in `[0, 1]`) and the evidence behind
/// its relevance.
#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema)]
pub struct ScoreBreakdown {
    /// `0.5·relevance + 0.3·field_priority + 0.2·quality`.
    pub(crate) total: f32,
    /// Lexical and semantic relevance fused; 1 = the best candidate of this query on both.
    pub(crate) relevance: f32,
    /// How much of the query (idf-weighted) matched where: pattern 1.0, applies_to 0.6,
    /// context 0.3; prefix expansions count less.
    pub(crate) field_priority: f32,
    /// quality_score / 100 × relevance.
    pub(crate) quality: f32,
    /// BM25 over the best BM25 among this query's candidates (0 = no query word matched).
    pub(crate) lexical: f32,
    /// Cosine similarity of query and learning embeddings; absent without semantic search.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) semantic: Option<f32>,
}

/// What is known of one candidate before the blend.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CandidateSignals {
    /// BM25 score (0 when no query word matched).
    pub(crate) bm25: f32,
    /// Per-slot field weights already reduced to the idf-weighted share.
    pub(crate) field_priority: f32,
    /// Cosine similarity, when semantic search ran and the learning has an embedding.
    pub(crate) cosine: Option<f32>,
    pub(crate) quality: u8,
    /// The longest in-order phrase of the query in the learning's text
    /// ([`ParsedQuery::in_order_run`]); 0 where it was not looked for.
    pub(crate) phrase_run: usize,
}

/// Field priority: `Σ idf·best_field_weight / Σ idf` over **all** query slots.
pub(crate) fn field_priority(slot_weights: &[f32], slot_idf: &[f32]) -> f32 {
    let total: f32 = slot_idf.iter().sum();
    if total <= 0.0 {
        return 0.0;
    }
    let matched: f32 = slot_weights.iter().zip(slot_idf).map(|(w, i)| w * i).sum();
    (matched / total).clamp(0.0, 1.0)
}

/// The lexical share of `relevance` for one query: from [`LEXICAL_SHARE_MIN`] to
/// [`LEXICAL_SHARE_MAX`], linear in the best field priority among its candidates (how
/// much of the query's idf, and in which field, the best-matching learning has).
pub(crate) fn lexical_share(candidates: &[CandidateSignals]) -> f32 {
    let coverage = candidates
        .iter()
        .map(|c| c.field_priority)
        .fold(0.0f32, f32::max)
        .clamp(0.0, 1.0);
    LEXICAL_SHARE_MIN + (LEXICAL_SHARE_MAX - LEXICAL_SHARE_MIN) * coverage
}

/// Blend one query's candidates (see the module docs). `semantic` says whether the
/// query was embedded (a candidate without `cosine` then counts 0 there).
pub(crate) fn blend(candidates: &[CandidateSignals], semantic: bool) -> Vec<ScoreBreakdown> {
    let share = lexical_share(candidates);
    let best_bm25 = candidates.iter().map(|c| c.bm25).fold(0.0f32, f32::max);
    let best_cos = candidates
        .iter()
        .filter_map(|c| c.cosine)
        .fold(SEMANTIC_FLOOR, f32::max);
    candidates
        .iter()
        .map(|c| {
            let lexical = if best_bm25 > 0.0 {
                c.bm25 / best_bm25
            } else {
                0.0
            };
            let fused = if semantic {
                let sem = match c.cosine {
                    Some(cos) if best_cos > SEMANTIC_FLOOR => {
                        ((cos - SEMANTIC_FLOOR) / (best_cos - SEMANTIC_FLOOR)).clamp(0.0, 1.0)
                    }
                    _ => 0.0,
                };
                share * lexical + (1.0 - share) * sem
            } else {
                lexical
            };
            let relevance = (fused + phrase_bonus(c.phrase_run)).min(1.0);
            let quality = f32::from(c.quality.min(100)) / 100.0 * relevance;
            ScoreBreakdown {
                total: W_RELEVANCE * relevance + W_FIELD * c.field_priority + W_QUALITY * quality,
                relevance,
                field_priority: c.field_priority,
                quality,
                lexical,
                semantic: if semantic { c.cosine } else { None },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(q: &str) -> Vec<Slot> {
        parse(q).unwrap().slots
    }

    #[test]
    fn words_are_stemmed_and_the_last_is_a_prefix() {
        assert_eq!(
            slots("fixing imports tests"),
            vec![
                Slot::Exact("fix".into()),
                Slot::Exact("import".into()),
                Slot::Prefix(vec!["test".into()]),
            ]
        );
        assert_eq!(
            slots("auto-imp"),
            vec![
                Slot::Exact("auto".into()),
                Slot::Prefix(vec!["imp".into()]),
                Slot::Compound("auto-imp".into())
            ]
        );
        assert_eq!(
            slots("mig* schema"),
            vec![
                Slot::Prefix(vec!["mig".into()]),
                Slot::Prefix(vec!["schema".into()])
            ]
        );
    }

    #[test]
    fn compound_identifiers_are_whole_terms_beside_their_words() {
        assert_eq!(
            compounds(
                "Set health_check_interval=30 in producer.go; see --health-interval, \
                 rds-v3.2.0 and sync.OnceValues. Done. a__b x- -y"
            ),
            [
                "health_check_interval",
                "producer.go",
                "health-interval",
                "rds-v3.2.0",
                "sync.oncevalues"
            ]
        );
        assert!(compounds("plain words, no identifier.").is_empty());
        assert!(compounds(&format!("{}_b", "a".repeat(40))).is_empty());
        assert_eq!(
            slots("services/worker/kafka/producer.go"),
            [
                Slot::Exact("servic".into()),
                Slot::Exact("worker".into()),
                Slot::Exact("kafka".into()),
                Slot::Exact("produc".into()),
                Slot::Exact("go".into()),
                Slot::Compound("producer.go".into()),
            ]
        );
        // Cairn's own words (the duplicate check) stay words.
        assert_eq!(
            parse_words("enable.idempotence").unwrap().slots,
            [Slot::Exact("enabl".into()), Slot::Exact("idempot".into())]
        );
    }

    #[test]
    fn cairns_own_words_are_exact_and_may_be_none() {
        let q = parse_words("synchronous uv").unwrap();
        assert_eq!(
            q.slots,
            [Slot::Exact("synchron".into()), Slot::Exact("uv".into())]
        );
        assert!(parse_words("").is_none());
        assert!(parse_words("it is what it is").is_none());
        assert!(parse_words("!!! ???").is_none());
    }

    #[test]
    fn hostile_text_never_fails_to_parse() {
        for q in [
            "foo:bar",
            "\"unbalanced",
            "a) OR (b",
            "title:\"x\" AND -y +z ~2 ^3 [a TO b] {c}",
            "ünïcödé 日本語 テスト",
            "x*y*z*",
            "\\ / ; ' ` $ % word",
        ] {
            assert!(!slots(q).is_empty(), "{q}");
        }
        for q in ["", "   ", "*", "\"(", "AND OR NOT (", "the"] {
            let e = parse(q).unwrap_err();
            assert_eq!(e.kind(), crate::error::ErrorKind::InvalidInput, "{q}");
        }
    }

    #[test]
    fn slots_are_capped_and_deduplicated() {
        let many: String = (0..100).map(|i| format!("word{i} ")).collect();
        assert_eq!(slots(&many).len(), MAX_SLOTS);
        assert_eq!(slots("cache caching cached").len(), 2);
    }

    fn lexical(bm25: f32, field_priority: f32, quality: u8) -> CandidateSignals {
        CandidateSignals {
            bm25,
            field_priority,
            cosine: None,
            quality,
            phrase_run: 0,
        }
    }

    #[test]
    fn blend_is_weighted_and_keeps_the_spread() {
        let s = blend(&[lexical(4.0, 1.0, 50), lexical(2.0, 0.3, 50)], false);
        assert!((s[0].relevance - 1.0).abs() < 1e-6);
        assert!(
            (s[1].relevance - 0.5).abs() < 1e-6,
            "half the BM25, half the relevance"
        );
        for x in &s {
            let want = 0.5 * x.relevance + 0.3 * x.field_priority + 0.2 * x.quality;
            assert!((x.total - want).abs() < 1e-6);
            assert!(x.semantic.is_none());
        }
        assert!((s[0].quality - 0.5).abs() < 1e-6);
        assert!(
            (s[1].quality - 0.25).abs() < 1e-6,
            "quality scales with relevance"
        );
    }

    #[test]
    fn field_priority_weighs_how_much_of_the_query_matched() {
        // Failure mode of the averaged form: one common word in the pattern scored 1.0,
        // five rare words mostly in the context scored 0.3.
        let idf = [0.5, 3.0, 3.0, 3.0, 3.0, 3.0];
        let one_common_in_pattern = field_priority(&[1.0, 0.0, 0.0, 0.0, 0.0, 0.0], &idf);
        let five_rare_in_context = field_priority(&[0.0, 1.0, 0.3, 0.3, 0.3, 0.3], &idf);
        assert!(one_common_in_pattern < 0.05, "{one_common_in_pattern}");
        assert!(five_rare_in_context > 0.35, "{five_rare_in_context}");
        assert_eq!(field_priority(&[1.0, 1.0], &[2.0, 1.0]), 1.0);
        assert_eq!(field_priority(&[0.0], &[0.0]), 0.0);
    }

    #[test]
    fn quality_decides_near_ties_but_cannot_flood() {
        // An unrelated learning rated 100 (a third of the best BM25, same field
        // priority) stays below a relevant one rated 0.
        let s = blend(&[lexical(9.0, 0.5, 0), lexical(3.0, 0.5, 100)], false);
        assert!(s[0].total > s[1].total, "{s:?}");
        // Near tie: the better rated wins.
        let s = blend(&[lexical(10.0, 0.5, 30), lexical(9.8, 0.5, 90)], false);
        assert!(s[1].total > s[0].total, "{s:?}");
    }

    #[test]
    fn semantic_evidence_is_fused_into_relevance() {
        let with = |bm25, cos| CandidateSignals {
            bm25,
            field_priority: 0.0,
            cosine: Some(cos),
            quality: 50,
            phrase_run: 0,
        };
        let s = blend(&[with(5.0, SEMANTIC_FLOOR), with(0.0, 0.75)], true);
        // No candidate matches a distinctive word in a field: the embedding leads.
        assert!((s[0].relevance - LEXICAL_SHARE_MIN).abs() < 1e-6);
        assert!((s[1].relevance - (1.0 - LEXICAL_SHARE_MIN)).abs() < 1e-6);
        assert_eq!(s[1].semantic, Some(0.75));
        assert_eq!(s[1].lexical, 0.0);
    }

    #[test]
    fn the_lexical_share_follows_how_much_of_the_query_one_learning_matches() {
        let fp = |field_priority| CandidateSignals {
            bm25: 1.0,
            field_priority,
            cosine: Some(0.5),
            quality: 50,
            phrase_run: 0,
        };
        assert_eq!(lexical_share(&[]), LEXICAL_SHARE_MIN);
        assert_eq!(lexical_share(&[fp(0.0), fp(0.0)]), LEXICAL_SHARE_MIN);
        assert_eq!(lexical_share(&[fp(0.2), fp(1.0)]), LEXICAL_SHARE_MAX);
        let half = lexical_share(&[fp(0.5), fp(0.1)]);
        assert!((half - (LEXICAL_SHARE_MIN + LEXICAL_SHARE_MAX) / 2.0).abs() < 1e-6);
        // An exact identifier in one learning's pattern: BM25 leads, and that learning
        // ranks first though another is nearer by embedding.
        let id = CandidateSignals {
            bm25: 8.0,
            field_priority: 1.0,
            cosine: Some(0.45),
            quality: 50,
            phrase_run: 0,
        };
        let near = CandidateSignals {
            bm25: 1.0,
            field_priority: 0.1,
            cosine: Some(0.6),
            quality: 50,
            phrase_run: 0,
        };
        let s = blend(&[id, near], true);
        assert!(s[0].total > s[1].total, "{s:?}");
        // Generic words only (low field priority everywhere): the nearer one wins.
        let generic = |bm25, cosine| CandidateSignals {
            bm25,
            field_priority: 0.1,
            cosine: Some(cosine),
            quality: 50,
            phrase_run: 0,
        };
        let s = blend(&[generic(8.0, 0.35), generic(2.0, 0.6)], true);
        assert!(s[1].total > s[0].total, "{s:?}");
    }

    #[test]
    fn the_in_order_run_counts_words_in_the_query_order_without_stop_words() {
        let run = |q: &str, text: &str| parse(q).unwrap().in_order_run(&word_ids(text));
        let text = "Postgres said: FATAL: sorry, too many clients already (pool of 20).";
        assert_eq!(run("FATAL: sorry, too many clients already", text), 6);
        // Case and punctuation are separators only; a stop word inside the run is
        // matched but not counted ("of").
        assert_eq!(run("too-many CLIENTS already (pool of 20)", text), 6);
        assert_eq!(
            run("the pool of connections", text),
            1,
            "`of` counts nothing"
        );
        // The words out of order, or with a word between them, break the run.
        assert_eq!(run("clients many too sorry", text), 1);
        assert_eq!(run("sorry many", text), 1);
        assert_eq!(run("many clients", "many more clients"), 1);
        // The best run wherever it starts, in the query and in the text.
        assert_eq!(
            run("pool timeout: too many clients already", text),
            4,
            "too many clients already"
        );
        assert!(!parse("too many").unwrap().has_phrase());
        assert!(!parse("what is the pool for").unwrap().has_phrase());
        assert!(parse("pool many clients").unwrap().has_phrase());
    }

    #[test]
    fn an_in_order_phrase_adds_relevance_from_three_words_capped() {
        assert_eq!(phrase_bonus(0), 0.0);
        assert_eq!(phrase_bonus(2), 0.0);
        assert_eq!(phrase_bonus(3), PHRASE_STEP);
        assert_eq!(phrase_bonus(4), PHRASE_MAX);
        assert_eq!(phrase_bonus(9), PHRASE_MAX);
        let quoting = |run| CandidateSignals {
            phrase_run: run,
            ..lexical(3.0, 0.4, 50)
        };
        // Three quarters of the best BM25: below the best without a phrase, above it
        // with one; relevance stays at most 1, and the weights hold.
        let s = blend(&[lexical(4.0, 0.3, 50), quoting(2)], false);
        assert!(s[1].total < s[0].total, "{s:?}");
        let s = blend(&[lexical(4.0, 0.3, 50), quoting(3)], false);
        assert!(
            (s[1].relevance - (0.75 + PHRASE_STEP)).abs() < 1e-6,
            "{s:?}"
        );
        let s = blend(&[lexical(4.0, 0.3, 50), quoting(6)], false);
        assert!((s[1].relevance - 1.0).abs() < 1e-6, "{s:?}");
        assert!(s[1].total > s[0].total, "{s:?}");
        for x in &s {
            let want = 0.5 * x.relevance + 0.3 * x.field_priority + 0.2 * x.quality;
            assert!((x.total - want).abs() < 1e-6);
        }
    }
}
