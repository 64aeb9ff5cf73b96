//! How the vault ranks chunks: dense candidates (HNSW, cosine) and lexical candidates
//! (BM25 over chunks, [`super::lexical`]) fused into one score, then a per-document cap.
//!
//! - `cosine`: the query's and the chunk's embeddings (exact, from the stored vector,
//!   also for chunks only BM25 found).
//! - `lexical`: the chunk's BM25 score over the best BM25 score among the query's
//!   candidates (0 to 1; 0 for a chunk without a query word).
//! - `overlap`: the IDF-weighted share of the query's keywords found in the chunk's heading
//!   path and text, IDF computed among the candidates ([`overlaps`]).
//! - `path` (source code only): the same share in the words of the item's path (its
//!   heading path: module, containers, name), split as identifiers are
//!   ([`super::lexical::path_words`]): `crc32 › Hasher › new_with_keys` is `crc32`,
//!   `Hasher`, `new`, `with`, `keys`; `getCalendarType` is `get`, `Calendar`, `Type` (and
//!   itself).
//! - `score = (1 − a − b − c)·cosine + a·lexical + b·overlap + c·path`: the ranking key,
//!   what results are sorted by and `min_score` filters on. `a`, `b` and `c` are the
//!   chunk's [`Weights`]: [`PROSE`] for documents (`c` = 0), [`CODE`] for source code,
//!   where the embedding of a sentence and a function's code are further apart and the
//!   words of identifiers, above all those of the item's own path, carry more.
//! - **A query that names an identifier** ([`identifiers`]: `snake_case`, `CamelCase`,
//!   `a::b`, `a.b`, `--flag`, `macro!`, `#[attr]`, `X-Header`, backticked or quoted text)
//!   that a candidate holds verbatim ([`names_a_held_identifier`]) weighs prose by
//!   [`PROSE_IDENTIFIER`] instead: the lexical parts carry the ranking when the exact
//!   name matches, since the embedding of a bare name says little about which text
//!   defines it. Code keeps [`CODE`].
//! - At most `max_per_document` chunks of one document ([`MAX_PER_DOCUMENT`] by default),
//!   so that one long document does not fill the list. In source code the unit is the
//!   item (a function, a type: the chunk's heading path), not the file: a module's items
//!   answer different questions, as different documents do.
//!
//! The weights and the cap were measured with `cairn eval vault` (figures in
//! docs/vault.md, "Ranking"); other [`Ranking`]s stay selectable for that comparison.

use std::collections::{HashMap, HashSet};

/// The weights of the lexical parts of `score`; cosine takes the rest.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Weights {
    /// Of the lexical (BM25) part.
    pub lexical: f32,
    /// Of the keyword overlap.
    pub overlap: f32,
    /// Of the keyword overlap with the item's path (source code).
    pub path: f32,
}

impl Weights {
    /// `(1 − a − b − c)·cosine + a·lexical + b·overlap + c·path`.
    pub(crate) fn score(self, cosine: f32, lexical: f32, overlap: f32, path: f32) -> f32 {
        (1.0 - self.lexical - self.overlap - self.path) * cosine
            + self.lexical * lexical
            + self.overlap * overlap
            + self.path * path
    }
}

/// The weights of a chunk of a document (prose, every format but code).
pub const PROSE: Weights = Weights {
    lexical: 0.1,
    overlap: 0.1,
    path: 0.0,
};
/// The weights of a chunk of a document when the query names an identifier that a
/// candidate holds verbatim ([`names_a_held_identifier`]).
pub const PROSE_IDENTIFIER: Weights = Weights {
    lexical: 0.25,
    overlap: 0.2,
    path: 0.0,
};
/// The weights of a chunk of source code.
pub const CODE: Weights = Weights {
    lexical: 0.15,
    overlap: 0.1,
    path: 0.15,
};
/// The earlier ranking's overlap weight: `cosine + 0.2 × overlap`, scaled to sum to one.
pub(crate) const OLD_OVERLAP_WEIGHT: f32 = 0.2 / 1.2;
/// Default cap of chunks per document in one result list.
pub(crate) const MAX_PER_DOCUMENT: usize = 2;
/// Fewest candidates fetched from each index.
const MIN_CANDIDATES: usize = 40;

/// Where candidates come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sources {
    /// HNSW only (cosine).
    Dense,
    /// BM25 only; `score = lexical`.
    Lexical,
    /// Both, fused.
    Both,
}

impl Sources {
    /// Whether the query embedding is needed.
    pub(crate) fn dense(self) -> bool {
        self != Sources::Lexical
    }
    /// Whether BM25 candidates are fetched.
    pub(crate) fn lexical(self) -> bool {
        self != Sources::Dense
    }
}

/// A ranking: candidate sources, the weights of the fused score for prose, for prose
/// when the query names an identifier a candidate holds, and for code, the per-document
/// cap (`None`: no cap).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ranking {
    pub sources: Sources,
    pub prose: Weights,
    pub identifier: Weights,
    pub code: Weights,
    pub max_per_document: Option<usize>,
}

impl Default for Ranking {
    fn default() -> Self {
        Ranking {
            sources: Sources::Both,
            prose: PROSE,
            identifier: PROSE_IDENTIFIER,
            code: CODE,
            max_per_document: Some(MAX_PER_DOCUMENT),
        }
    }
}

impl Ranking {
    /// Whether any keyword overlap is weighed (else it is not computed).
    pub(crate) fn overlap(&self) -> bool {
        [self.prose, self.identifier, self.code]
            .iter()
            .any(|w| w.overlap != 0.0)
    }
    /// Whether the overlap with the item's path is weighed (else it is not computed).
    pub(crate) fn path(&self) -> bool {
        [self.prose, self.identifier, self.code]
            .iter()
            .any(|w| w.path != 0.0)
    }
}

/// How many candidates to fetch from each index for `top_k` results.
pub(crate) fn candidates(top_k: usize) -> usize {
    (top_k * 4).max(MIN_CANDIDATES)
}

/// One candidate chunk before ranking.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Candidate {
    pub(crate) chunk: u64,
    /// The unit the cap counts (any key unique per unit): its document, or for source
    /// code its item (the document and the heading path).
    pub(crate) unit: String,
    /// Whether it is source code (weighed by [`Ranking::code`]).
    pub(crate) code: bool,
    pub(crate) cosine: f32,
    /// Raw BM25 score; 0 when BM25 did not return the chunk.
    pub(crate) bm25: f32,
    /// Keyword overlap (0 to 1, [`overlaps`]); computed when its weight is not zero.
    pub(crate) overlap: f32,
    /// Keyword overlap with the item's path (0 to 1, [`overlaps`] of
    /// [`super::lexical::path_words`]; 0 for prose); computed when its weight is not zero.
    pub(crate) path: f32,
}

/// A ranked candidate: index into the input, `score`, normalised `lexical`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ranked {
    pub(crate) index: usize,
    pub(crate) score: f32,
    pub(crate) lexical: f32,
}

/// Score, sort (ties by chunk id) and cap `candidates`; at most `top_k`. `identifier`:
/// the query names an identifier a candidate holds verbatim, so prose is weighed by
/// [`Ranking::identifier`].
pub(crate) fn rank(
    candidates: &[Candidate],
    ranking: &Ranking,
    identifier: bool,
    top_k: usize,
) -> Vec<Ranked> {
    let prose = match identifier {
        true => ranking.identifier,
        false => ranking.prose,
    };
    let best_bm25 = candidates.iter().map(|c| c.bm25).fold(0.0f32, f32::max);
    let mut ranked: Vec<Ranked> = candidates
        .iter()
        .enumerate()
        .map(|(index, c)| {
            let lexical = if best_bm25 > 0.0 {
                c.bm25 / best_bm25
            } else {
                0.0
            };
            let score = match ranking.sources {
                Sources::Lexical => lexical,
                _ => match c.code {
                    true => ranking.code,
                    false => prose,
                }
                .score(c.cosine, lexical, c.overlap, c.path),
            };
            Ranked {
                index,
                score,
                lexical,
            }
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(candidates[a.index].chunk.cmp(&candidates[b.index].chunk))
    });
    let mut per_doc: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::with_capacity(top_k);
    for r in ranked {
        if out.len() == top_k {
            break;
        }
        let n = per_doc
            .entry(candidates[r.index].unit.as_str())
            .or_default();
        if ranking.max_per_document.is_some_and(|cap| *n >= cap) {
            continue;
        }
        *n += 1;
        out.push(r);
    }
    out
}

/// Whether a word of a query has the shape of an identifier: `_` inside it
/// (`lock_timeout`), `::` (`Uuid::new_v4`), a `.` between a letter or digit and a letter
/// (`auth.revocations.v1`, `Cargo.lock`), a lower-case letter or digit before an
/// upper-case one (`OnceCell`, `AtomicU128`), a leading `--` (`--locked`) or `#`
/// (`#[instrument]`), a trailing `!` (`bitflags!`), a letter before `<` (`Hmac<Sha256>`), a
/// `-` joined to an upper-case letter or digit (`X-Request-Deadline`, `SHA-256`), or a
/// letter before `:` and a lower-case letter (`gitleaks:allow`). Plain words, capitalised
/// or not, are not.
fn is_identifier(word: &str) -> bool {
    let b = word.as_bytes();
    let pair = |f: &dyn Fn(u8, u8) -> bool| b.windows(2).any(|w| f(w[0], w[1]));
    let triple = |f: &dyn Fn(u8, u8, u8) -> bool| b.windows(3).any(|w| f(w[0], w[1], w[2]));
    word.trim_matches('_').contains('_')
        || word.contains("::")
        || triple(&|a, m, c| a.is_ascii_alphanumeric() && m == b'.' && c.is_ascii_alphabetic())
        || pair(&|a, c| (a.is_ascii_lowercase() || a.is_ascii_digit()) && c.is_ascii_uppercase())
        || word.starts_with("--")
        || (b.len() > 1 && (word.ends_with('!') || word.starts_with('#')))
        || pair(&|a, c| a.is_ascii_alphabetic() && c == b'<')
        || triple(&|a, m, c| {
            m == b'-'
                && ((a.is_ascii_alphanumeric() && (c.is_ascii_uppercase() || c.is_ascii_digit()))
                    || (a.is_ascii_uppercase() && c.is_ascii_alphabetic()))
        })
        || triple(&|a, m, c| a.is_ascii_alphabetic() && m == b':' && c.is_ascii_lowercase())
}

/// Most identifiers of one query looked for in the candidates: a query names a few, and
/// each is searched for in every candidate's text.
const MAX_IDENTIFIERS: usize = 16;

/// The identifiers a query names, each once, in order, at most [`MAX_IDENTIFIERS`]: its
/// backticked and double-quoted spans, then its words (split at whitespace, trimmed of
/// `.,;?()"'` and backticks) of identifier shape ([`is_identifier`]).
pub(crate) fn identifiers(query: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for quote in ['`', '"'] {
        // The odd pieces lie between two quotes, but for the last piece after a quote
        // that is never closed.
        let pieces: Vec<&str> = query.split(quote).collect();
        for i in (1..pieces.len().saturating_sub(1)).step_by(2) {
            if !pieces[i].is_empty() && !out.contains(&pieces[i]) {
                out.push(pieces[i]);
            }
        }
    }
    for word in query.split_whitespace() {
        let w = word.trim_matches(|c| ".,;?()\"'`".contains(c));
        if !w.is_empty() && is_identifier(w) && !out.contains(&w) {
            out.push(w);
        }
    }
    out.truncate(MAX_IDENTIFIERS);
    out
}

/// Whether `query` names an identifier ([`identifiers`]) that one of `texts` (the
/// candidates' texts and heading paths) holds verbatim, case and punctuation included.
pub(crate) fn names_a_held_identifier<'a>(
    query: &str,
    mut texts: impl Iterator<Item = &'a str>,
) -> bool {
    let named = identifiers(query);
    !named.is_empty() && texts.any(|t| named.iter().any(|i| t.contains(i)))
}

pub(crate) const STOP_WORDS: &[&str] = &[
    "the", "and", "for", "are", "how", "what", "who", "does", "our", "should", "when", "can",
    "after", "has", "have", "been", "while", "out", "into", "which", "this", "that", "with",
    "from", "its", "not", "but", "all", "any", "you", "your", "they", "them", "their", "there",
    "was", "were", "will", "would", "about", "than", "then", "also", "only", "one", "two", "get",
    "why", "where", "use", "used", "using",
];

fn stem(w: &str) -> &str {
    for suffix in ["ing", "ies", "es", "ed", "s", "ly"] {
        if let Some(base) = w.strip_suffix(suffix)
            && base.len() >= 4
        {
            return base;
        }
    }
    w
}

/// The keywords of a text: its words of at least 3 characters, lowercased, without
/// the stop words, stemmed.
pub(crate) fn keywords(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    each_word(text, &mut String::new(), |w| {
        if !STOP_WORDS.contains(&w) {
            out.insert(stem(w).to_string());
        }
    });
    out
}

/// Calls `f` with each word of `text` of at least 3 characters, lowercased, in order
/// and with repeats. `buf` is scratch space, so a long text costs no allocation per word.
fn each_word(text: &str, buf: &mut String, mut f: impl FnMut(&str)) {
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        buf.clear();
        if word.is_ascii() {
            if word.len() < 3 {
                continue;
            }
            buf.push_str(word);
            buf.make_ascii_lowercase();
        } else {
            // Unicode lowercasing depends on context (a final sigma), so the whole word.
            buf.push_str(&word.to_lowercase());
            if buf.chars().count() < 3 {
                continue;
            }
        }
        f(buf);
    }
}

/// The keyword overlap (0 to 1) of the query with each candidate text. The query's
/// keywords are summed in sorted order, so the same query and candidates give the same
/// bits every time (a set's iteration order differs between calls, and float sums in
/// another order differ in the last bits: a `min_score` equal to a hit's score would
/// then keep or drop it by chance).
pub(crate) fn overlaps(query: &str, candidates: &[String]) -> Vec<f32> {
    let mut q: Vec<String> = keywords(query).into_iter().collect();
    q.sort_unstable();
    // Which of the query's keywords each candidate has: only those are looked up, so a
    // candidate's own keyword set is never built. Its stop words need no check: each
    // stems to itself (the test below), and the query's keywords hold none.
    let mut buf = String::new();
    let docs: Vec<Vec<bool>> = candidates
        .iter()
        .map(|text| {
            let mut has = vec![false; q.len()];
            each_word(text, &mut buf, |word| {
                let k = stem(word);
                if let Ok(i) = q.binary_search_by(|keyword| keyword.as_str().cmp(k)) {
                    has[i] = true;
                }
            });
            has
        })
        .collect();
    let n = docs.len() as f32;
    let weights: Vec<f32> = (0..q.len())
        .map(|i| {
            let df = docs.iter().filter(|d| d[i]).count() as f32;
            ((n + 1.0) / (df + 0.5)).ln()
        })
        .collect();
    let total: f32 = weights.iter().sum();
    docs.iter()
        .map(|d| {
            if total <= 0.0 {
                return 0.0;
            }
            weights
                .iter()
                .zip(d)
                .filter(|&(_, &has)| has)
                .map(|(x, _)| x)
                .sum::<f32>()
                / total
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(chunk: u64, unit: &str, cosine: f32, bm25: f32) -> Candidate {
        Candidate {
            chunk,
            unit: unit.into(),
            code: false,
            cosine,
            bm25,
            overlap: 0.0,
            path: 0.0,
        }
    }

    #[test]
    fn score_is_the_fused_rank_key_in_descending_order() {
        let c = [
            cand(1, "a", 0.50, 0.0),
            cand(2, "b", 0.45, 10.0),
            cand(3, "c", 0.60, 2.0),
        ];
        let w = |lexical| Weights {
            lexical,
            overlap: 0.0,
            path: 0.0,
        };
        let fused = Ranking {
            prose: w(0.2),
            ..Ranking::default()
        };
        let r = rank(&c, &fused, false, 10);
        let order: Vec<u64> = r.iter().map(|x| c[x.index].chunk).collect();
        // b: 0.8·0.45 + 0.2·1 = 0.56; c: 0.48 + 0.2·0.2 = 0.52; a: 0.40.
        assert_eq!(order, [2, 3, 1]);
        assert!((r[0].score - 0.56).abs() < 1e-6 && (r[0].lexical - 1.0).abs() < 1e-6);
        assert!((r[1].score - 0.52).abs() < 1e-6);
        assert!(r.windows(2).all(|w| w[0].score >= w[1].score));
        let dense = Ranking {
            sources: Sources::Dense,
            prose: w(0.0),
            code: w(0.0),
            ..Ranking::default()
        };
        let order: Vec<u64> = rank(&c, &dense, false, 10)
            .iter()
            .map(|x| c[x.index].chunk)
            .collect();
        assert_eq!(order, [3, 1, 2]);
    }

    #[test]
    fn code_chunks_are_weighed_by_the_code_weights() {
        // The same parts, once as prose and once as code: each scored by its own weights.
        let mut c = [cand(1, "a.md", 0.5, 10.0), cand(2, "a.rs", 0.5, 10.0)];
        c[1].code = true;
        for x in &mut c {
            x.overlap = 0.5;
            x.path = 0.5;
        }
        let r = rank(&c, &Ranking::default(), false, 10);
        let score = |chunk| r.iter().find(|x| c[x.index].chunk == chunk).unwrap().score;
        assert!((score(1) - PROSE.score(0.5, 1.0, 0.5, 0.5)).abs() < 1e-6);
        assert!((score(2) - CODE.score(0.5, 1.0, 0.5, 0.5)).abs() < 1e-6);
        // Lexical parts above the cosine weigh more in code.
        assert!(score(2) > score(1));
    }

    #[test]
    fn a_held_identifier_weighs_prose_by_the_identifier_weights() {
        // A chunk close in meaning without the name, and the code chunk that holds it.
        let mut c = [
            cand(1, "whoami.md", 0.34, 0.0),
            cand(2, "monostate.md", 0.03, 8.0),
        ];
        c[1].overlap = 1.0;
        let order = |identifier| -> Vec<u64> {
            rank(&c, &Ranking::default(), identifier, 10)
                .iter()
                .map(|x| c[x.index].chunk)
                .collect()
        };
        // 0.8·0.34 = 0.272 against 0.8·0.03 + 0.1 + 0.1 = 0.224.
        assert_eq!(order(false), [1, 2]);
        // 0.55·0.34 = 0.187 against 0.55·0.03 + 0.25 + 0.2 = 0.4665.
        assert_eq!(order(true), [2, 1]);
        let r = rank(&c, &Ranking::default(), true, 10);
        assert!((r[0].score - PROSE_IDENTIFIER.score(0.03, 1.0, 1.0, 0.0)).abs() < 1e-6);
        // Code keeps its weights.
        c[1].code = true;
        let r = rank(&c, &Ranking::default(), true, 10);
        let code = r.iter().find(|x| c[x.index].chunk == 2).unwrap();
        assert!((code.score - CODE.score(0.03, 1.0, 1.0, 0.0)).abs() < 1e-6);
    }

    #[test]
    fn identifiers_are_the_words_shaped_like_code_and_quoted_text() {
        for (query, named) in [
            ("Uuid::new_v4", &["Uuid::new_v4"][..]),
            ("SET lock_timeout", &["lock_timeout"]),
            ("OnceCell and Lazy", &["OnceCell"]),
            ("AtomicU128 AtomicF64", &["AtomicU128", "AtomicF64"]),
            ("auth.revocations.v1", &["auth.revocations.v1"]),
            ("share one Cargo.lock, please", &["Cargo.lock"]),
            ("X-Request-Deadline", &["X-Request-Deadline"]),
            ("SHA-256 hash", &["SHA-256"]),
            ("bitflags! macro", &["bitflags!"]),
            ("#[derive(Builder)]", &["#[derive(Builder)]"]),
            ("#imports and #components", &["#imports", "#components"]),
            (
                "Hmac<Sha256> new_from_slice",
                &["Hmac<Sha256>", "new_from_slice"],
            ),
            ("cargo build --locked", &["--locked"]),
            ("gitleaks:allow", &["gitleaks:allow"]),
            ("HTTP__CLIENT__TIMEOUT_MS", &["HTTP__CLIENT__TIMEOUT_MS"]),
            ("why does `make test` fail", &["make test"]),
            (
                "error \"connection reset by peer\" at start",
                &["connection reset by peer"],
            ),
            ("(`is_match`)?", &["is_match"]),
        ] {
            assert_eq!(identifiers(query), named, "{query}");
        }
        for plain in [
            "Either Left Right",
            "kubectl argo rollouts promote",
            "how do I retry a failed request?",
            "blameless post-incident review",
            "Note: the end. _private_ a - b ! # an \"unclosed quote",
        ] {
            assert!(
                identifiers(plain).is_empty(),
                "{plain}: {:?}",
                identifiers(plain)
            );
        }
        // A query of many names looks for the first few.
        let many: String = (0..500).map(|i| format!("name_{i} ")).collect();
        assert_eq!(identifiers(&many).len(), MAX_IDENTIFIERS);
        assert_eq!(identifiers(&many)[0], "name_0");
        let texts = ["kind: MustBe!(\"success\"),", "![WhoAmI Logo]"];
        assert!(names_a_held_identifier("MustBe!", texts.into_iter()));
        // No identifier named, or none held verbatim.
        assert!(!names_a_held_identifier("must be", texts.into_iter()));
        assert!(!names_a_held_identifier("lock_timeout", texts.into_iter()));
        assert!(!names_a_held_identifier("mustbe!", texts.into_iter()));
    }

    #[test]
    fn the_cap_keeps_at_most_n_chunks_per_document_and_fills_from_others() {
        let c: Vec<Candidate> = (0..6)
            .map(|i| {
                cand(
                    i,
                    if i < 4 { "long" } else { "other" },
                    0.9 - i as f32 * 0.1,
                    0.0,
                )
            })
            .collect();
        let docs = |r: &Ranking, k| -> Vec<&str> {
            rank(&c, r, false, k)
                .iter()
                .map(|x| c[x.index].unit.as_str())
                .collect()
        };
        let capped = Ranking::default();
        assert_eq!(docs(&capped, 4), ["long", "long", "other", "other"]);
        let one = Ranking {
            max_per_document: Some(1),
            ..capped
        };
        assert_eq!(docs(&one, 4), ["long", "other"]);
        let none = Ranking {
            max_per_document: None,
            ..capped
        };
        assert_eq!(docs(&none, 4), ["long"; 4]);
    }

    #[test]
    fn stop_words_stem_to_themselves() {
        for w in STOP_WORDS {
            assert_eq!(stem(w), *w);
        }
    }

    #[test]
    fn overlaps_match_the_keyword_sets_of_the_texts() {
        // What `overlaps` computes without building each text's keyword set, computed
        // with the sets, each built the plain way.
        fn set(text: &str) -> HashSet<String> {
            text.split(|c: char| !c.is_alphanumeric())
                .map(str::to_lowercase)
                .filter(|w| w.chars().count() >= 3 && !STOP_WORDS.contains(&w.as_str()))
                .map(|w| stem(&w).to_string())
                .collect()
        }
        fn by_sets(query: &str, texts: &[String]) -> Vec<f32> {
            let mut q: Vec<String> = set(query).into_iter().collect();
            q.sort_unstable();
            let docs: Vec<HashSet<String>> = texts.iter().map(|t| set(t)).collect();
            let n = docs.len() as f32;
            let weights: Vec<f32> = q
                .iter()
                .map(|w| {
                    ((n + 1.0) / (docs.iter().filter(|d| d.contains(w)).count() as f32 + 0.5)).ln()
                })
                .collect();
            let total: f32 = weights.iter().sum();
            docs.iter()
                .map(|d| {
                    let got: f32 = q
                        .iter()
                        .zip(&weights)
                        .filter(|(w, _)| d.contains(*w))
                        .map(|(_, x)| x)
                        .sum();
                    if total <= 0.0 { 0.0 } else { got / total }
                })
                .collect()
        }
        let texts: Vec<String> = [
            "Retrying FAILED requests: the client retries with jitter.",
            "ΟΔΥΣΣΕΥΣ and the ΣΕΙΡΗΝΕΣ: Greek capitals lowercase with a final sigma",
            "İstanbul DİKKAT: dotted capitals grow when lowercased",
            "Straße, naïve café, 東京 and ＦＵＬＬＷＩＤＴＨ letters",
            "",
            "the and for: nothing but stop words",
            "THE Client SHOULD be Using retries, which DOES help; there were Failures",
        ]
        .map(String::from)
        .to_vec();
        for query in [
            "how do retries of failed requests work",
            "οδυσσευς σειρηνες",
            "istanbul dikkat dotted",
            "STRASSE café 東京 ｆｕｌｌｗｉｄｔｈ",
            "the and",
            "using the client which does fail there",
        ] {
            let fast = overlaps(query, &texts);
            let sets = by_sets(query, &texts);
            assert!(
                fast.iter()
                    .zip(&sets)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{query}: {fast:?} != {sets:?}"
            );
        }
        // The cases above do match something.
        assert!(overlaps("retries jitter", &texts)[0] > 0.9);
        assert!(overlaps("σειρηνες", &texts)[1] > 0.9);
    }

    #[test]
    fn overlaps_are_the_same_bits_on_every_call() {
        let query = "rotate expired signing certificates before renewal deadlines without \
                     downtime across regional clusters";
        let texts: Vec<String> = [
            "Renewal of signing certificates: rotate them before the deadline.",
            "Regional clusters roll out without downtime.",
            "Expired certificates break the deadlines of every regional renewal.",
        ]
        .map(String::from)
        .to_vec();
        let first = overlaps(query, &texts);
        assert!(first.iter().all(|&o| o > 0.0 && o < 1.0), "{first:?}");
        // Each call builds fresh sets with their own iteration order.
        for _ in 0..50 {
            let again = overlaps(query, &texts);
            assert!(
                first
                    .iter()
                    .zip(&again)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{first:?} vs {again:?}"
            );
        }
    }

    #[test]
    fn keywords_drop_stop_words_and_stem() {
        let k = keywords("How should the client retry failed requests?");
        let mut v: Vec<_> = k.into_iter().collect();
        v.sort();
        assert_eq!(v, ["client", "fail", "request", "retry"]);
    }

    #[test]
    fn rare_shared_keywords_weigh_most() {
        let c = [
            "retry the request".to_string(),
            "retry with jitter".to_string(),
            "nothing here".to_string(),
        ];
        let o = overlaps("retry jitter", &c);
        assert!(o[1] > o[0] && o[0] > o[2], "{o:?}");
        assert_eq!(o[2], 0.0);
        assert!((o[1] - 1.0).abs() < 1e-6);
        assert_eq!(overlaps("the and", &c), [0.0, 0.0, 0.0]);
    }
}
