//! When two learnings say the same (docs/learnings.md, "Merging" and "Restatements in
//! results"): the duplicate rule a new learning is merged by ([`same_lesson`]: embeddings
//! at least [`DUPLICATE_COSINE`] similar, enough words in common, no guard telling the
//! texts apart), and the looser rule a search lists a restatement under its head by
//! ([`restates`]).

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::learnings::STOP_WORDS;
use crate::learnings::text::normalize_pattern;

/// Embedding similarity from which two learnings may be the same lesson.
pub const DUPLICATE_COSINE: f32 = 0.87;
/// Word overlap (Jaccard of the normal form's words) from which two learnings may be
/// the same lesson: below every duplicate the rule merges on the pairs set (the lowest
/// was 0.22), and cheap, so a learning is embedded for the check only when a candidate
/// passes it and the guards.
pub(crate) const DUPLICATE_JACCARD: f64 = 0.2;
/// Embedding similarity from which a search lists a learning under a higher-ranked one
/// as a restatement (`similar`) instead of giving it a place of its own. Looser than
/// [`DUPLICATE_COSINE`]: nothing is lost when two distinct lessons are grouped (both are
/// shown in full), while a restatement left apart takes the place of another lesson.
/// Chosen on the tuning queries of the lifecycle set (docs/learnings.md, "Restatements
/// in results").
pub(crate) const SIMILAR_COSINE: f32 = 0.8;
/// Below [`SIMILAR_COSINE`], a learning is still listed under a hit it restates when
/// their embeddings are at least this similar, the code of one (its backticked spans,
/// names with `.`, `_`, `/` or `-`, its numbers) is nearly all in the other
/// ([`RESTATE_CONTAINMENT`]) and the negation and number guards pass
/// ([`restates`]): a one-line summary beside the long account of the same
/// lesson, which this model's cosine puts far apart. Chosen on the tune halves of the
/// pairs set and of the lifecycle set's queries (docs/learnings.md, "Restatements in
/// results").
pub(crate) const RESTATE_COSINE: f32 = 0.45;
/// Share of the shorter side's code tokens found in the other from which two loosely
/// similar learnings restate each other (see [`RESTATE_COSINE`]).
pub(crate) const RESTATE_CONTAINMENT: f64 = 0.85;
/// Learnings of the project (best BM25 matches of the new text) compared with a new one.
pub(crate) const DUPLICATE_CANDIDATES: usize = 10;

/// The words that turn a statement around.
const NEGATIONS: [&str; 10] = [
    "not", "no", "never", "without", "cannot", "avoid", "nothing", "none", "neither", "nor",
];

static WORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[a-z]+(?:'[a-z]+)?").expect("static regex"));
static TOKEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[a-z0-9]+(?:[._/-][a-z0-9]+)*").expect("static regex"));
/// A name of several parts: `.spec.replicas`, `--no-verify`, `src/main.rs`.
static NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[a-z0-9]+(?:[._/-][a-z0-9]+)+").expect("static regex"));
static NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\d+(?:[.:]\d+)*").expect("static regex"));
static CODE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"`([^`]+)`").expect("static regex"));

/// What the guards of the duplicate rule compare: negation words, numbers, identifiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Signature {
    negations: usize,
    numbers: HashSet<String>,
    identifiers: HashSet<String>,
}

/// `text` lower-cased, with typographic apostrophes made plain.
fn lowered(text: &str) -> String {
    text.to_lowercase().replace('\u{2019}', "'")
}

/// The negation words of a lower-cased text, counted in its prose: a negation quoted in
/// code (an error message) or inside a name (a flag such as `--no-verify`) states
/// nothing.
fn negations(lower: &str) -> usize {
    let prose = CODE.replace_all(lower, " ");
    let prose = NAME.replace_all(&prose, " ");
    WORD.find_iter(&prose)
        .filter(|w| NEGATIONS.contains(&w.as_str()) || w.as_str().ends_with("n't"))
        .count()
}

/// The numbers and versions of a text.
fn numbers(text: &str) -> HashSet<String> {
    NUMBER
        .find_iter(text)
        .map(|m| m.as_str().to_string())
        .collect()
}

impl Signature {
    pub(crate) fn of(text: &str) -> Signature {
        let lower = lowered(text);
        let mut identifiers: HashSet<String> = CODE
            .captures_iter(text)
            // A sentence's full stop inside the quotes is not part of the identifier.
            .map(|c| c[1].trim_end_matches(['.', ',', ';', ':']).to_lowercase())
            .collect();
        identifiers.extend(
            TOKEN
                .find_iter(&lower)
                .map(|m| m.as_str())
                .filter(|t| t.contains(['.', '_', '/']))
                .map(String::from),
        );
        Signature {
            negations: negations(&lower),
            numbers: numbers(text),
            identifiers,
        }
    }
    /// Which guard tells `self` and `other` apart, if one does.
    pub(crate) fn differs(&self, other: &Signature) -> Option<&'static str> {
        if self.negations != other.negations {
            Some("negation")
        } else if both_ways(&self.numbers, &other.numbers) {
            Some("numbers")
        } else if both_ways(&self.identifiers, &other.identifiers) {
            Some("identifiers")
        } else {
            None
        }
    }
}

/// What a restatement's code half compares ([`restates`]): the code tokens of a text
/// (the words of its backticked spans, its names with `.`, `_`, `/` or `-`, its
/// numbers), with the negation and number guards of [`Signature`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CodeSignature {
    negations: usize,
    numbers: HashSet<String>,
    tokens: HashSet<String>,
}

impl CodeSignature {
    pub(crate) fn of(text: &str) -> CodeSignature {
        let lower = lowered(text);
        let numbers = numbers(text);
        let mut tokens: HashSet<String> = CODE
            .captures_iter(&lower)
            .flat_map(|c| {
                TOKEN
                    .find_iter(&c[1])
                    .map(|m| m.as_str().to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        tokens.extend(
            TOKEN
                .find_iter(&lower)
                .map(|m| m.as_str())
                .filter(|t| t.contains(['.', '_', '/', '-']))
                .map(String::from),
        );
        tokens.extend(numbers.iter().cloned());
        CodeSignature {
            negations: negations(&lower),
            numbers,
            tokens,
        }
    }

    /// Whether the code of the one with fewer code tokens is nearly all in the other (at
    /// least [`RESTATE_CONTAINMENT`] of it), with the same count of negations and no
    /// number each side lacks.
    fn shares_code_with(&self, other: &CodeSignature) -> bool {
        let fewer = self.tokens.len().min(other.tokens.len());
        fewer > 0
            && self.negations == other.negations
            && !both_ways(&self.numbers, &other.numbers)
            && self.tokens.intersection(&other.tokens).count() as f64 / fewer as f64
                >= RESTATE_CONTAINMENT
    }
}

/// Whether two learnings whose embeddings are `cosine` similar restate each other (a
/// search lists one under the other): at least [`SIMILAR_COSINE`]; or at least
/// [`RESTATE_COSINE`] with the code of one nearly all in the other and the negation and
/// number guards passing. `signatures` are read only when the cosine does not decide.
pub(crate) fn restates<'s>(
    cosine: f32,
    signatures: impl FnOnce() -> Option<(&'s CodeSignature, &'s CodeSignature)>,
) -> bool {
    cosine >= SIMILAR_COSINE
        || (cosine >= RESTATE_COSINE && signatures().is_some_and(|(a, b)| a.shares_code_with(b)))
}

/// Whether each side holds something the other lacks: a changed value, not a detail
/// one side left out.
fn both_ways(a: &HashSet<String>, b: &HashSet<String>) -> bool {
    a.difference(b).next().is_some() && b.difference(a).next().is_some()
}

/// The words of a text's duplicate normal form.
fn words(text: &str) -> HashSet<String> {
    normalize_pattern(text)
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(String::from)
        .collect()
}

/// Jaccard similarity of the words of two texts (their duplicate normal forms).
pub fn word_overlap(a: &str, b: &str) -> f64 {
    jaccard(&words(a), &words(b))
}

fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        0.0
    } else {
        a.intersection(b).count() as f64 / union as f64
    }
}

/// Words of the candidate search kept from a new learning's text.
const CANDIDATE_WORDS: usize = 12;

/// The query that finds a new learning's candidates: its [`CANDIDATE_WORDS`] longest
/// distinct words (longer words are the rarer, more specific ones), so the search costs
/// the same for a long text as for a short one.
pub(crate) fn candidate_query(text: &str) -> String {
    let form = normalize_pattern(text);
    let mut seen = HashSet::new();
    let mut words: Vec<&str> = form
        .split(' ')
        .filter(|w| w.chars().count() >= 3 && !STOP_WORDS.contains(w) && seen.insert(*w))
        .collect();
    words.sort_by_key(|w| std::cmp::Reverse(w.chars().count()));
    words.truncate(CANDIDATE_WORDS);
    words.join(" ")
}

/// A new learning's text as the cheap half of the duplicate rule reads it, once for all
/// its candidates: its words and its [`Signature`].
pub(crate) struct Lesson {
    words: HashSet<String>,
    signature: Signature,
}

impl Lesson {
    pub(crate) fn of(text: &str) -> Lesson {
        Lesson {
            words: words(text),
            signature: Signature::of(text),
        }
    }

    /// The cheap half of the rule: enough words in common with `other` and no guard
    /// telling the texts apart. Only a candidate that passes it is compared by
    /// embedding.
    pub(crate) fn plausible(&self, other: &str) -> bool {
        jaccard(&self.words, &words(other)) >= DUPLICATE_JACCARD
            && self.signature.differs(&Signature::of(other)).is_none()
    }
}

/// The duplicate rule: embeddings at least [`DUPLICATE_COSINE`] similar, at least
/// [`DUPLICATE_JACCARD`] of the words in common, and no guard telling the texts apart.
pub fn same_lesson(cosine: f32, a: &str, b: &str) -> bool {
    cosine >= DUPLICATE_COSINE && Lesson::of(a).plausible(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_tell_apart_negations_values_and_identifiers() {
        let a = "Run `cargo clippy` before pushing: CI fails on warnings since 1.80.";
        assert!(same_lesson(0.95, a, a));
        assert!(!same_lesson(0.86, a, a), "below the threshold");
        let neg = "Do not run `cargo clippy` before pushing: CI fails on warnings since 1.80.";
        assert_eq!(
            Signature::of(a).differs(&Signature::of(neg)),
            Some("negation")
        );
        let ver = "Run `cargo clippy` before pushing: CI fails on warnings since 1.81.";
        assert_eq!(
            Signature::of(a).differs(&Signature::of(ver)),
            Some("numbers")
        );
        let tool = "Run `cargo fmt` before pushing: CI fails on warnings since 1.80.";
        assert_eq!(
            Signature::of(a).differs(&Signature::of(tool)),
            Some("identifiers")
        );
        // A detail left out on one side is not a different lesson.
        let shorter = "Run `cargo clippy` before pushing: CI fails on warnings.";
        assert_eq!(Signature::of(a).differs(&Signature::of(shorter)), None);
        let curly = "Don\u{2019}t skip `cargo clippy`";
        assert_eq!(Signature::of(curly).negations, 1);
        // A negation quoted in code or inside a flag states nothing.
        let quoted = "The job failed with `cannot connect: no route to host`; pass `--no-verify`.";
        assert_eq!(Signature::of(quoted).negations, 0);
        assert_eq!(
            Signature::of("use uv sync --no-install-project").negations,
            0
        );
    }

    #[test]
    fn a_summary_restates_the_long_account_whose_code_it_shares() {
        // The lifecycle set's K082 beside K042 (cosine 0.49 with the real model).
        let summary = "Produce to orders.v1 with the order_id as message key, always: Kafka \
                       only keeps events in order within one partition.";
        let account = "Order events go to the `orders.v1` topic keyed by `order_id` \
                       (services/api/events/producer.py), so every event of one order lands \
                       in one partition. Keying by `customer_id` spreads them over partitions.";
        let restates_by = |cosine: f32, a: &str, b: &str| {
            let (a, b) = (CodeSignature::of(a), CodeSignature::of(b));
            restates(cosine, || Some((&a, &b)))
        };
        assert!(restates_by(0.49, summary, account));
        assert!(restates_by(0.49, account, summary), "symmetric");
        // Below the floor, the code does not matter.
        assert!(!restates_by(RESTATE_COSINE - 0.01, summary, account));
        // From SIMILAR_COSINE on, the cosine alone decides and the texts are not read.
        assert!(restates(SIMILAR_COSINE, || panic!("read")));
        // Code the summary has and the account lacks: another lesson.
        let other = "Produce to payments.v2 with the payment_id as message key, always.";
        assert!(!restates_by(0.6, other, account));
        // The guards hold: a negation, or a number each side lacks.
        let negated = "Never produce to orders.v1 with the order_id as message key.";
        assert!(!restates_by(0.6, negated, account));
        let v =
            |n: &str| format!("Produce to `orders.v1` keyed by `order_id`; retention {n} days.");
        assert!(!restates_by(0.6, &v("7"), &v("14")));
        assert!(restates_by(0.6, &v("7"), &v("7")));
        // Texts without code restate nothing by their code.
        assert!(!restates_by(
            0.6,
            "Keep events in order.",
            "Keep events in order."
        ));
        // A text that cannot be read restates nothing below SIMILAR_COSINE.
        assert!(!restates(0.6, || None));
    }
}
