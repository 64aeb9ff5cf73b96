//! A deterministic stand-in for the embedding model, **for tests and benchmarks only**:
//! no command or tool of Cairn constructs it (the binary always runs
//! [`super::model::ModelEmbedder`]); a test or benchmark passes it to
//! [`crate::Cairn::open_with_embedder`].
//!
//! A text's vector is its lower-cased words (runs of letters and digits) and adjacent
//! word pairs, each hashed (FNV-1a, 64 bits) to one of [`DIMENSION`] coordinates with a
//! sign taken from the hash, summed (words weigh 1, pairs 0.5) and L2-normalised. The
//! same text gives the same vector on every run and platform; texts sharing words have
//! a higher cosine than texts sharing none. It knows no synonyms: paraphrase
//! retrieval is the real model's job, measured by the tests and figures that run it.
//!
//! Its [`HASH_MODEL_ID`] is stored like the real model's, so a graph or document
//! embedded by one is never served to the other (it is re-embedded or refused, as after
//! any model change).

use std::sync::atomic::{AtomicU64, Ordering};

use super::embedder::{DIMENSION, Embed, EmbedStats};
use super::error::Result;
use super::vector::l2_normalize;

/// The identifier stored with the hash embedder's vectors.
pub const HASH_MODEL_ID: &str = "cairn-test-hash-384-v1";
/// Weight of an adjacent word pair relative to a word.
const PAIR_WEIGHT: f32 = 0.5;

/// The deterministic test embedder (see the module docs).
#[derive(Debug, Default)]
pub struct HashEmbedder {
    texts: AtomicU64,
    batches: AtomicU64,
    words: AtomicU64,
}

impl HashEmbedder {
    /// A new handle; it needs no files.
    pub fn new() -> HashEmbedder {
        HashEmbedder::default()
    }

    /// The vector of one text.
    #[cfg(test)]
    pub(crate) fn vector(text: &str) -> Vec<f32> {
        Self::vector_and_words(text).0
    }

    fn vector_and_words(text: &str) -> (Vec<f32>, usize) {
        let lower = text.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        let mut v = vec![0.0f32; DIMENSION];
        let mut add = |feature: &[&[u8]], weight: f32| {
            let h = fnv1a(feature);
            let slot = (h % DIMENSION as u64) as usize;
            let sign = if (h >> 32) & 1 == 0 { 1.0 } else { -1.0 };
            v[slot] += sign * weight;
        };
        for w in &words {
            add(&[b"w:", w.as_bytes()], 1.0);
        }
        for pair in words.windows(2) {
            add(
                &[b"p:", pair[0].as_bytes(), b" ", pair[1].as_bytes()],
                PAIR_WEIGHT,
            );
        }
        if words.is_empty() {
            // No word at all: one fixed direction, so the vector is still a unit vector.
            v[0] = 1.0;
        }
        l2_normalize(&mut v);
        (v, words.len())
    }
}

/// FNV-1a over the concatenated parts.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Embed for HashEmbedder {
    fn model_id(&self) -> &str {
        HASH_MODEL_ID
    }

    fn dimension(&self) -> usize {
        DIMENSION
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let mut words = 0;
        let out = texts
            .iter()
            .map(|t| {
                let (v, n) = Self::vector_and_words(t);
                words += n;
                v
            })
            .collect();
        if !texts.is_empty() {
            self.batches.fetch_add(1, Ordering::Relaxed);
        }
        self.texts.fetch_add(texts.len() as u64, Ordering::Relaxed);
        self.words.fetch_add(words as u64, Ordering::Relaxed);
        Ok(out)
    }

    /// Texts, calls and words (as tokens; no padding).
    fn stats(&self) -> EmbedStats {
        EmbedStats {
            texts: self.texts.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            tokens: self.words.load(Ordering::Relaxed),
            ..EmbedStats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::vector::dot;

    #[test]
    fn vectors_are_deterministic_unit_length_and_related_texts_are_closer() {
        let e = HashEmbedder::new();
        let texts = [
            "Retry the failed request with exponential backoff",
            "retry a failed request, with backoff",
            "The ferry to Zanzibar leaves the harbour at seven",
            "",
        ];
        let v = e.embed_batch(&texts).unwrap();
        for x in &v {
            assert_eq!(x.len(), DIMENSION);
            assert!((dot(x, x) - 1.0).abs() < 1e-5);
        }
        assert_eq!(
            v[0],
            HashEmbedder::vector(texts[0]),
            "same text, same vector"
        );
        let related = dot(&v[0], &v[1]);
        let unrelated = dot(&v[0], &v[2]);
        assert!(related > 0.5, "related {related}");
        assert!(unrelated < 0.3, "unrelated {unrelated}");
        // Fixed across runs and platforms: a pinned coordinate of a pinned text.
        let pinned = HashEmbedder::vector("alpha");
        let nonzero: Vec<usize> = (0..DIMENSION).filter(|&i| pinned[i] != 0.0).collect();
        assert_eq!(nonzero.len(), 1);
        assert_eq!(
            nonzero[0],
            (fnv1a(&[b"w:", b"alpha"]) % DIMENSION as u64) as usize
        );
        assert_eq!(fnv1a(&[b"a"]), 0xaf63_dc4c_8601_ec8c, "FNV-1a of \"a\"");
        let s = e.stats();
        assert_eq!((s.texts, s.batches), (4, 1));
        assert_eq!(e.model_id(), HASH_MODEL_ID);
    }
}
