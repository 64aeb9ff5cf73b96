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
//! Slots are OR-ed (a learning matches when any slot matches, in any field), and scored
//! by BM25 summed over the three fields. At most [`MAX_SLOTS`] distinct slots are used.
//!
//! **Blend.** `score = 0.5·bm25 + 0.3·field_priority + 0.2·quality`, each in `[0, 1]`:
//! - `bm25 = s / (s + s_ref)`, where `s` is the learning's BM25 score and `s_ref` is
//!   the score of a learning holding every query slot once in a field of average length
//!   (the sum over slots of the idf of the slot's most frequent term). It depends on the
//!   query and the corpus, never on the other results: 0.5 means "as good as a plain
//!   match of every query word", and a learning matching one rare word of five stays low
//!   even when it is the best hit. (A per-result-set min-max would give every top hit 1.)
//! - `field_priority` says *where* the query matched: each matched slot counts the
//!   best field it occurs in — pattern 1.0, applies_to 0.6, context 0.3 — averaged
//!   over the matched slots. How *much* of the query matched is BM25's job.
//! - `quality = quality_score / 100`.

use std::sync::LazyLock;

use serde::Serialize;
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};

use crate::error::{Error, Result};

/// Name under which [`analyzer`] is registered on every learnings index.
pub(crate) const TOKENIZER: &str = "cairn_en";

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
pub const IMPLICIT_PREFIX_MIN: usize = 3;
/// At most this many indexed terms stand for one prefix slot.
pub const MAX_EXPANSIONS: usize = 16;
/// At most this many distinct slots are searched; further words are ignored.
pub const MAX_SLOTS: usize = 32;

/// Blend weights.
pub const W_BM25: f32 = 0.5;
pub const W_FIELD: f32 = 0.3;
pub const W_QUALITY: f32 = 0.2;

/// Field-priority weight of a match in the pattern, applies_to and context fields.
pub const FIELD_WEIGHTS: [f32; 3] = [1.0, 0.6, 0.3];

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Slot {
    /// An indexed term (a stem).
    Exact(String),
    /// Indexed terms starting with any of these strings.
    Prefix(Vec<String>),
}

/// A query cut into slots.
#[derive(Debug, Clone)]
pub(crate) struct ParsedQuery {
    pub slots: Vec<Slot>,
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
    let chars: Vec<char> = text.chars().collect();
    let mut words: Vec<(String, bool)> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_alphanumeric() {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && chars[i].is_alphanumeric() {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect::<String>().to_lowercase();
        let starred = chars.get(i) == Some(&'*');
        words.push((word, starred));
    }
    if words.is_empty() {
        return Err(Error::invalid(
            "query",
            "has no words to search for (only punctuation or operators); give a few words, e.g. \
             \"auto-import utils\"",
        ));
    }
    let last = words.len() - 1;
    let mut slots: Vec<Slot> = Vec::new();
    for (n, (word, starred)) in words.iter().enumerate() {
        if word.len() >= LONG_TOKEN {
            continue;
        }
        let stemmed = stem(word);
        let implicit =
            n == last && stemmed.is_some() && word.chars().count() >= IMPLICIT_PREFIX_MIN;
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
    Ok(ParsedQuery { slots })
}

/// The score of a hit and its three components, each in `[0, 1]`.
#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema)]
pub struct ScoreBreakdown {
    /// `0.5·bm25 + 0.3·field_priority + 0.2·quality`.
    pub total: f32,
    /// Normalised BM25: `s / (s + s_ref)`, 0.5 = every query word matched once.
    pub bm25: f32,
    /// Where the query matched: pattern 1.0, applies_to 0.6, context 0.3, averaged over matched words.
    pub field_priority: f32,
    /// quality_score / 100.
    pub quality: f32,
}

impl ScoreBreakdown {
    /// Blend a raw BM25 score, the query's reference score, the per-slot best-field
    /// weights of the matched slots, and a quality score.
    pub(crate) fn blend(raw: f32, reference: f32, slot_weights: &[f32], quality: u8) -> Self {
        let bm25 = if raw > 0.0 && reference > 0.0 {
            raw / (raw + reference)
        } else {
            0.0
        };
        let matched: Vec<f32> = slot_weights.iter().copied().filter(|w| *w > 0.0).collect();
        let field_priority = if matched.is_empty() {
            0.0
        } else {
            matched.iter().sum::<f32>() / matched.len() as f32
        };
        let quality = f32::from(quality.min(100)) / 100.0;
        ScoreBreakdown {
            total: W_BM25 * bm25 + W_FIELD * field_priority + W_QUALITY * quality,
            bm25,
            field_priority,
            quality,
        }
    }
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
            vec![Slot::Exact("auto".into()), Slot::Prefix(vec!["imp".into()])]
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
            assert_eq!(e.code(), "ERR_INVALID_INPUT", "{q}");
        }
    }

    #[test]
    fn slots_are_capped_and_deduplicated() {
        let many: String = (0..100).map(|i| format!("word{i} ")).collect();
        assert_eq!(slots(&many).len(), MAX_SLOTS);
        assert_eq!(slots("cache caching cached").len(), 2);
    }

    #[test]
    fn blend_is_stable_and_weighted() {
        let s = ScoreBreakdown::blend(2.0, 2.0, &[1.0, 0.0], 50);
        assert!((s.bm25 - 0.5).abs() < 1e-6);
        assert!((s.field_priority - 1.0).abs() < 1e-6);
        assert!((s.total - (0.25 + 0.3 + 0.1)).abs() < 1e-6);
        // The same raw score means the same bm25 component whatever else is found.
        let weak = ScoreBreakdown::blend(0.2, 2.0, &[0.3], 50);
        assert!(weak.bm25 < 0.1);
        let ctx = ScoreBreakdown::blend(2.0, 2.0, &[0.3, 0.3], 50);
        assert!(ctx.total < s.total);
    }
}
