//! The vector kernels of Cairn: the dot product (the cosine of unit vectors) and L2
//! normalisation, the inner loops of the HNSW graphs, the learnings' exact cosine and the
//! embedders.
//!
//! A crate of its own so that it is compiled optimised in every profile: Cairn's dev
//! and test builds run at opt-level 0 to build fast, and these loops run hundreds of
//! millions of times in the tests that build graphs (about ten times slower
//! unoptimised). Floating-point arithmetic is not reordered at any opt-level, so the
//! results are the same bit for bit in every profile. In release builds (no debug
//! assertions) the functions are `#[inline]`, so callers' loops inline them as they did
//! when the functions lived in Cairn; in dev and test builds they are not, so they are
//! compiled here, optimised, and not again in Cairn unoptimised.

#![forbid(unsafe_code)]

/// Dot product; the cosine similarity of unit vectors. Eight accumulators: a plain
/// iterator sum is one dependent chain of adds that LLVM may not reorder, so it does not
/// vectorise (about 5x slower on 384 floats).
#[cfg_attr(not(debug_assertions), inline)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Scales `v` to unit length (a zero vector stays zero).
#[cfg_attr(not(debug_assertions), inline)]
pub fn l2_normalize(v: &mut [f32]) {
    let norm = dot(v, v).sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}
