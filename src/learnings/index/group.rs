//! Restatements grouped under the learning they restate, so that a search's places hold
//! different lessons.

use std::cell::OnceCell;

use crate::embed::dot;
use crate::metrics::cost::{Unit, count};

use super::super::lifecycle::{self, CodeSignature};

use super::*;

/// Restatements listed under the learning they restate, so that the `limit` places of a
/// search hold `limit` different lessons. Walking the ranking best first, a learning
/// that restates a group's head ([`lifecycle::restates`]: by embedding, or by embedding
/// and code, whose [`CodeSignature`]s are read only then, at most once per learning) joins the most
/// similar such head's group; any other learning heads a new group. At most `limit`
/// restatements are listed in all (the best ranked); the others are counted on their
/// head and left out, so an answer holds at most `2 · limit` learnings however many
/// copies a lesson has. The walk ends where a group beyond the `limit`-th would begin.
/// The result is in rank order, each restatement marked with its head.
pub(super) fn group<'v>(
    ranked: Vec<Ranked>,
    limit: usize,
    vector: impl Fn(u64) -> Option<&'v [f32]>,
    signature: impl Fn(u64) -> Option<Arc<CodeSignature>>,
) -> Vec<Ranked> {
    /// A group's head: its vector, its place in `out` and its code, read at most once.
    struct Head<'v> {
        vector: Option<&'v [f32]>,
        at: usize,
        code: OnceCell<Option<Arc<CodeSignature>>>,
    }
    let mut listed = 0;
    let mut out: Vec<Ranked> = Vec::with_capacity(ranked.len().min(2 * limit));
    let mut heads: Vec<Head<'v>> = Vec::with_capacity(limit);
    let mut walked = 0;
    let mut compared = 0;
    for mut r in ranked {
        walked += 1;
        let own = vector(r.seq);
        let code: OnceCell<Option<Arc<CodeSignature>>> = OnceCell::new();
        let mut closest: Option<(usize, f32)> = None;
        if let Some(v) = own {
            for (i, head) in heads.iter().enumerate() {
                let Some(h) = head.vector else { continue };
                let cos = dot(v, h);
                compared += 1;
                // The most similar head wins (the later one among equals).
                if closest.is_some_and(|(_, best)| best > cos) {
                    continue;
                }
                let head_seq = out[head.at].seq;
                if lifecycle::restates(cos, || {
                    Some((
                        code.get_or_init(|| signature(r.seq)).as_deref()?,
                        head.code.get_or_init(|| signature(head_seq)).as_deref()?,
                    ))
                }) {
                    closest = Some((i, cos));
                }
            }
        }
        match closest {
            Some((i, _)) if listed == limit => {
                out[heads[i].at].similar_omitted += 1;
                continue;
            }
            Some((i, cos)) => {
                listed += 1;
                r.similar_to = Some((out[heads[i].at].seq, cos));
            }
            None if heads.len() == limit => break,
            None => heads.push(Head {
                vector: own,
                at: out.len(),
                code,
            }),
        }
        out.push(r);
    }
    count(Unit::CandidatesGrouped, walked);
    count(Unit::VectorsCompared, compared);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A unit vector at `angle` radians in the plane of the first two axes, or along the
    /// third axis for `None`.
    fn at(angle: Option<f32>) -> Vec<f32> {
        let mut v = vec![0.0; crate::embed::DIMENSION];
        match angle {
            Some(a) => (v[0], v[1]) = (a.cos(), a.sin()),
            None => v[2] = 1.0,
        }
        v
    }

    fn ranked(seq: u64, key: f32) -> Ranked {
        Ranked {
            seq,
            key,
            score: ScoreBreakdown {
                total: key,
                relevance: key,
                field_priority: 0.0,
                quality: 0.0,
                lexical: 0.0,
                semantic: None,
            },
            quality: 50,
            verified: false,
            similar_to: None,
            similar_omitted: 0,
        }
    }

    #[test]
    fn restatements_join_their_most_similar_head_and_free_places() {
        // 1 and 3 are 60° apart (cosine 0.5); 2 is 20° from 1 (0.94) and 40° from 3
        // (0.77); 4 is 35° from 1 (0.82) and 25° from 3 (0.91); 5 is orthogonal to all;
        // 6 has no vector.
        let vectors: HashMap<u64, Vec<f32>> = [
            (1, at(Some(0.0))),
            (2, at(Some(20f32.to_radians()))),
            (3, at(Some(60f32.to_radians()))),
            (4, at(Some(35f32.to_radians()))),
            (5, at(None)),
        ]
        .into_iter()
        .collect();
        let list: Vec<Ranked> = (1..=6).map(|s| ranked(s, 10.0 - s as f32)).collect();
        let run = |limit| {
            group(
                list.clone(),
                limit,
                |seq| vectors.get(&seq).map(Vec::as_slice),
                |_| None,
            )
            .iter()
            .map(|r| {
                (
                    r.seq,
                    r.similar_to.map(|(h, c)| (h, (c * 100.0).round() as u32)),
                )
            })
            .collect::<Vec<_>>()
        };
        // 4 restates both heads: the closer one takes it.
        assert_eq!(
            run(2),
            [(1, None), (2, Some((1, 94))), (3, None), (4, Some((3, 91)))]
        );
        // The walk ends where a group beyond the limit would begin.
        assert_eq!(run(1), [(1, None), (2, Some((1, 94)))]);
        // A learning without a vector heads a group of its own and draws none.
        assert_eq!(run(6).len(), 6);
        assert_eq!(run(6)[5], (6, None));
        assert_eq!(run(6)[4], (5, None));
        assert!(
            group(
                list.clone(),
                6,
                |seq| vectors.get(&seq).map(Vec::as_slice),
                |_| None
            )
            .iter()
            .all(|r| r.similar_omitted == 0)
        );
    }

    #[test]
    fn at_most_limit_restatements_are_listed_and_the_rest_counted() {
        // Seven copies of one lesson (1-7), then another lesson (8): with two places, the
        // lesson, two of its copies, the other lesson; four copies counted, not listed.
        let one = at(Some(0.0));
        let other = at(None);
        let list: Vec<Ranked> = (1..=8).map(|s| ranked(s, 10.0 - s as f32)).collect();
        let out = group(
            list,
            2,
            |seq| Some(if seq == 8 { &other } else { &one }),
            |_| None,
        );
        let seqs: Vec<u64> = out.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 8]);
        assert_eq!(out[0].similar_omitted, 4);
        assert!(out[1..].iter().all(|r| r.similar_omitted == 0));
        assert_eq!(out[1].similar_to.map(|(h, _)| h), Some(1));
        assert_eq!(out[2].similar_to.map(|(h, _)| h), Some(1));
        assert_eq!(out[3].similar_to, None);
    }

    #[test]
    fn a_loosely_similar_learning_sharing_its_heads_code_is_listed_under_it() {
        // 1 and 2 are 60° apart (cosine 0.5): below SIMILAR_COSINE, above RESTATE_COSINE.
        // 2 holds all of 1's code and is listed under it; 3, as similar to 1 but with code
        // of its own, takes a place; 4 is 70° from 1 (cosine 0.34), below the floor.
        let vectors: HashMap<u64, Vec<f32>> = [
            (1, at(Some(0.0))),
            (2, at(Some(60f32.to_radians()))),
            (3, at(Some(-60f32.to_radians()))),
            (4, at(Some(70f32.to_radians()))),
        ]
        .into_iter()
        .collect();
        let texts: HashMap<u64, &str> = [
            (1, "Key `orders.v1` by `order_id`."),
            (
                2,
                "Order events go to orders.v1 keyed by order_id, one partition per order.",
            ),
            (3, "Key `payments.v2` by `payment_id`."),
            (4, "Key `orders.v1` by `order_id` too."),
        ]
        .into_iter()
        .collect();
        let read = std::cell::Cell::new(0);
        let list: Vec<Ranked> = (1..=4).map(|s| ranked(s, 10.0 - s as f32)).collect();
        let out = group(
            list,
            3,
            |seq| vectors.get(&seq).map(Vec::as_slice),
            |seq| {
                read.set(read.get() + 1);
                texts.get(&seq).map(|t| Arc::new(CodeSignature::of(t)))
            },
        );
        let got: Vec<(u64, Option<u64>)> = out
            .iter()
            .map(|r| (r.seq, r.similar_to.map(|(h, _)| h)))
            .collect();
        assert_eq!(got, [(1, None), (2, Some(1)), (3, None), (4, None)]);
        // Each learning's text is read once at most.
        assert!(read.get() <= 4, "read {} times", read.get());
    }
}
