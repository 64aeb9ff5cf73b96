//! Rank metrics over graded relevance judgements (qrels), as BEIR and TREC define them.
//!
//! A judgement maps a document key to a grade (`0` = not relevant, higher = more
//! relevant). A ranking is the list of document keys a system returned, best first.
//!
//! - nDCG@k uses the exponential gain `2^grade - 1` and the `log2(rank + 1)` discount;
//!   the ideal ranking is the judged documents sorted by grade.
//! - MRR@k is `1 / rank` of the first document with a grade above zero within the
//!   first `k`, else 0.
//! - Recall@k is the share of the documents with a grade above zero found in the
//!   first `k`.
//! - Hit@k is 1 when a document with a grade above zero is in the first `k`, else 0:
//!   its mean is the share of queries answered in the first `k`.

use std::collections::{BTreeMap, HashMap};

/// Graded judgements of one query: document key → grade.
pub(crate) type Qrels = HashMap<String, u32>;

/// nDCG@k of `ranking` under `qrels`; 0 when no document is relevant.
pub(crate) fn ndcg_at(ranking: &[String], qrels: &Qrels, k: usize) -> f64 {
    let gain = |grade: u32| 2f64.powi(grade as i32) - 1.0;
    let discount = |i: usize| (i as f64 + 2.0).log2();
    let dcg: f64 = ranking
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, key)| gain(qrels.get(key).copied().unwrap_or(0)) / discount(i))
        .sum();
    let mut ideal: Vec<u32> = qrels.values().copied().filter(|&g| g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, &g)| gain(g) / discount(i))
        .sum();
    if idcg == 0.0 { 0.0 } else { dcg / idcg }
}

/// The rank (from 1) of the first relevant document within the first `k`.
pub(crate) fn first_relevant(ranking: &[String], qrels: &Qrels, k: usize) -> Option<usize> {
    ranking
        .iter()
        .take(k)
        .position(|key| qrels.get(key).is_some_and(|&g| g > 0))
        .map(|i| i + 1)
}

/// Reciprocal rank of the first relevant document within the first `k`.
pub(crate) fn mrr_at(ranking: &[String], qrels: &Qrels, k: usize) -> f64 {
    first_relevant(ranking, qrels, k).map_or(0.0, |r| 1.0 / r as f64)
}

/// Share of the relevant documents found within the first `k`; 0 when none is relevant.
pub(crate) fn recall_at(ranking: &[String], qrels: &Qrels, k: usize) -> f64 {
    let relevant = qrels.values().filter(|&&g| g > 0).count();
    if relevant == 0 {
        return 0.0;
    }
    let found = ranking
        .iter()
        .take(k)
        .filter(|key| qrels.get(*key).is_some_and(|&g| g > 0))
        .count();
    found as f64 / relevant as f64
}

/// The figures of one query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct QueryScore {
    pub(crate) ndcg10: f64,
    pub(crate) mrr10: f64,
    pub(crate) recall5: f64,
    pub(crate) hit10: f64,
}

impl QueryScore {
    /// Score one ranking: nDCG@10, MRR@10, Recall@5 and Hit@10.
    pub(crate) fn of(ranking: &[String], qrels: &Qrels) -> QueryScore {
        QueryScore {
            ndcg10: ndcg_at(ranking, qrels, 10),
            mrr10: mrr_at(ranking, qrels, 10),
            recall5: recall_at(ranking, qrels, 5),
            hit10: match first_relevant(ranking, qrels, 10) {
                Some(_) => 1.0,
                None => 0.0,
            },
        }
    }
}

/// Means of [`QueryScore`]s over a set of queries.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct Summary {
    pub(crate) queries: usize,
    pub(crate) ndcg10: f64,
    pub(crate) mrr10: f64,
    pub(crate) recall5: f64,
    /// The share of queries with a relevant document in the first 10.
    pub(crate) hit10: f64,
}

impl Summary {
    /// Mean of `scores`; all zeros for an empty set.
    pub(crate) fn mean<'a>(scores: impl IntoIterator<Item = &'a QueryScore>) -> Summary {
        let mut s = Summary {
            queries: 0,
            ndcg10: 0.0,
            mrr10: 0.0,
            recall5: 0.0,
            hit10: 0.0,
        };
        for q in scores {
            s.queries += 1;
            s.ndcg10 += q.ndcg10;
            s.mrr10 += q.mrr10;
            s.recall5 += q.recall5;
            s.hit10 += q.hit10;
        }
        if s.queries > 0 {
            let n = s.queries as f64;
            s.ndcg10 /= n;
            s.mrr10 /= n;
            s.recall5 /= n;
            s.hit10 /= n;
        }
        s
    }
}

/// The overall summary and one per category (categories in name order).
pub(crate) fn by_category<'a>(
    scored: impl IntoIterator<Item = (&'a str, QueryScore)>,
) -> (Summary, BTreeMap<String, Summary>) {
    let mut all = Vec::new();
    let mut groups: BTreeMap<String, Vec<QueryScore>> = BTreeMap::new();
    for (category, score) in scored {
        all.push(score);
        groups.entry(category.to_string()).or_default().push(score);
    }
    let per = groups
        .into_iter()
        .map(|(c, v)| (c, Summary::mean(&v)))
        .collect();
    (Summary::mean(&all), per)
}

/// Reciprocal-rank fusion of `lists` (Cormack, Clarke and Büttcher, SIGIR 2009): each key
/// scores `Σ 1 / (k + rank)` over the lists it is in (rank from 1); best first, ties in
/// first-seen order.
pub(crate) fn rrf(lists: &[&[String]], k: f64) -> Vec<String> {
    let mut score: HashMap<&str, (f64, usize)> = HashMap::new();
    let mut seen = 0;
    for list in lists {
        for (rank, key) in list.iter().enumerate() {
            let e = score.entry(key.as_str()).or_insert_with(|| {
                seen += 1;
                (0.0, seen)
            });
            e.0 += 1.0 / (k + rank as f64 + 1.0);
        }
    }
    let mut fused: Vec<(&str, (f64, usize))> = score.into_iter().collect();
    fused.sort_by(|a, b| b.1.0.total_cmp(&a.1.0).then(a.1.1.cmp(&b.1.1)));
    fused.into_iter().map(|(k, _)| k.to_string()).collect()
}

/// The median of `samples` (milliseconds, say); 0 for none.
pub(crate) fn p50(samples: &mut [f64]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_by(f64::total_cmp);
    samples[(samples.len() - 1) / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qrels(pairs: &[(&str, u32)]) -> Qrels {
        pairs.iter().map(|(k, g)| (k.to_string(), *g)).collect()
    }

    fn ranking(keys: &[&str]) -> Vec<String> {
        keys.iter().map(|k| k.to_string()).collect()
    }

    #[test]
    fn rrf_ranks_what_both_lists_rank_high_first() {
        let a = ranking(&["x", "y", "z"]);
        let b = ranking(&["y", "w", "x"]);
        // y: 1/62 + 1/61; x: 1/61 + 1/63; w: 1/62; z: 1/63.
        assert_eq!(rrf(&[&a, &b], 60.0), ranking(&["y", "x", "w", "z"]));
        // Equal scores keep the order first seen.
        assert_eq!(
            rrf(&[&ranking(&["p"]), &ranking(&["q"])], 60.0),
            ranking(&["p", "q"])
        );
    }

    #[test]
    fn perfect_ranking_scores_one() {
        let q = qrels(&[("a", 2), ("b", 1)]);
        let s = QueryScore::of(&ranking(&["a", "b", "c"]), &q);
        assert_eq!(
            s,
            QueryScore {
                ndcg10: 1.0,
                mrr10: 1.0,
                recall5: 1.0,
                hit10: 1.0
            }
        );
    }

    #[test]
    fn ndcg_matches_a_hand_computation() {
        // Grades 2 and 1 found at ranks 2 and 1 (swapped): DCG = 1/log2(2) + 3/log2(3);
        // IDCG = 3/log2(2) + 1/log2(3).
        let q = qrels(&[("a", 2), ("b", 1)]);
        let got = ndcg_at(&ranking(&["b", "a"]), &q, 10);
        let want = (1.0 + 3.0 / 3f64.log2()) / (3.0 + 1.0 / 3f64.log2());
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }

    #[test]
    fn mrr_and_recall_look_only_at_the_cut() {
        let q = qrels(&[("x", 1), ("y", 1), ("z", 0)]);
        let r = ranking(&["z", "n1", "x", "n2", "n3", "y"]);
        assert_eq!(mrr_at(&r, &q, 10), 1.0 / 3.0);
        assert_eq!(mrr_at(&r, &q, 2), 0.0);
        assert_eq!(recall_at(&r, &q, 5), 0.5);
        assert_eq!(recall_at(&r, &q, 6), 1.0);
        // Hit@10: one relevant document in the first 10 is enough.
        assert_eq!(QueryScore::of(&r, &q).hit10, 1.0);
        let late: Vec<String> = (0..10).map(|i| format!("n{i}")).chain(r).collect();
        assert_eq!(QueryScore::of(&late, &q).hit10, 0.0);
    }

    #[test]
    fn no_relevant_document_scores_zero() {
        let q = qrels(&[("z", 0)]);
        assert_eq!(
            QueryScore::of(&ranking(&["z"]), &q),
            QueryScore {
                ndcg10: 0.0,
                mrr10: 0.0,
                recall5: 0.0,
                hit10: 0.0
            }
        );
    }

    #[test]
    fn categories_are_averaged_separately() {
        let one = QueryScore {
            ndcg10: 1.0,
            mrr10: 1.0,
            recall5: 1.0,
            hit10: 1.0,
        };
        let zero = QueryScore {
            ndcg10: 0.0,
            mrr10: 0.0,
            recall5: 0.0,
            hit10: 0.0,
        };
        let (all, per) = by_category([("keyword", one), ("paraphrase", zero), ("keyword", one)]);
        assert_eq!(all.queries, 3);
        assert!((all.mrr10 - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(per["keyword"].mrr10, 1.0);
        assert_eq!(per["paraphrase"].mrr10, 0.0);
    }

    #[test]
    fn median() {
        assert_eq!(p50(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(p50(&mut [4.0, 1.0, 2.0, 3.0]), 2.0);
        assert_eq!(p50(&mut []), 0.0);
    }
}
