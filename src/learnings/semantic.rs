//! Semantic recall: one embedding per learning (its pattern and context, by the vault's
//! model), stored in SQLite (`learning_embeddings`, migration 0007) and searched exactly
//! (cosine over the project's vectors, in memory).
//!
//! **Life cycle.**
//! - *Add*: in a one-shot process (`cairn learnings add`), `add_learnings` embeds the
//!   new texts before its write transaction and inserts the vectors in it, so a learning
//!   and its embedding commit together. A long-lived process (`cairn serve`, `cairn
//!   daemon`) acknowledges the write first: its background indexer embeds the learning
//!   right after indexing it, [`BACKGROUND_BATCH`] at a time, each run once no tool call
//!   is in flight and no query uses the model, or after [`BACKGROUND_PATIENCE`] at most
//!   ([`crate::embed::foreground`], [`Embed::embed_idle`]): on a saturated host the embeddings lag
//!   behind the writes, and catch up at the first quiet moment. Until then the
//!   learning is found lexically (as every acknowledged write is); a clean exit waits for
//!   it, and after `kill -9` the next process embeds it. When the model is missing, the
//!   learning is stored without one (the add never fails for it).
//! - *Backfill*: learnings without an embedding (recorded without the model, before
//!   migration 0007, or acknowledged by a process killed before it embedded them) are
//!   embedded by the next search that has the model, at most [`BACKFILL_PER_SEARCH`] per
//!   search, and all at once by `cairn learnings reindex`. In a process with a background
//!   indexer the search embeds only those recorded before the indexer started; the
//!   indexer embeds the rest. Each process remembers up to which `seq` it found none
//!   missing, so the check costs one empty range scan once caught up.
//! - *Embedder*: each vector is stored with its embedder's
//!   [`model_id`](crate::embed::Embed::model_id); the in-memory [`Vectors`] hold
//!   the model's ([`MODEL_ID`]) only, so a test embedder's vectors are never compared
//!   with the model's.
//! - *Other processes*: the in-memory [`Vectors`] are caught up before each search by the
//!   table's `id`, a watermark that only grows (read in the same snapshot as the
//!   learnings' `max(seq)`, so every vector read belongs to a learning already known).
//!
//! **Cost.** Exact cosine over one project's vectors: 384 multiply-adds per learning,
//! about 2 ms per 10,000 learnings on a loaded core (memory-bound; see
//! docs/learnings.md); the vectors take 1.5 KB per learning. A project with
//! [`graph_min`](super::graph::graph_min) learnings or more is searched through an HNSW
//! graph built in the background ([`super::graph`]), exactly until it is built.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::embed::foreground::Foreground;
use crate::store::db::{Conn, params};

use crate::embed::vector::{decode_vector, encode_vector};
use crate::embed::{DIMENSION, Embed, MODEL_ID, dot};
use crate::error::Result;
use crate::store::Store;

use super::graph::{Graph, graph_min};

/// Learnings a search embeds at most when it finds some without an embedding.
pub(crate) const BACKFILL_PER_SEARCH: usize = 32;
/// Learnings embedded per model call during a full backfill (`reindex`).
const BACKFILL_BATCH: usize = 256;
/// Learnings the background indexer embeds per model run: a call that arrives
/// meanwhile waits for at most this many (a few milliseconds each).
pub(crate) const BACKGROUND_BATCH: usize = 4;
/// How long the background indexer's embedding waits for a quiet moment (no call in
/// flight, no query using the model) before it runs anyway, so a server that is never
/// quiet still embeds what it acknowledged ([`BACKGROUND_BATCH`] per this interval).
pub(crate) const BACKGROUND_PATIENCE: Duration = Duration::from_millis(250);

/// The text a learning is embedded from: its pattern, then its context.
pub(crate) fn embedding_text(pattern: &str, context: Option<&str>) -> String {
    match context {
        Some(c) => format!("{pattern}\n{c}"),
        None => pattern.to_string(),
    }
}

/// Store the embedding of learning `seq` by the embedder `model` (no-op when it has
/// one).
pub(crate) fn insert(tx: &Conn<'_>, seq: u64, model: &str, vector: &[f32]) -> Result<()> {
    tx.prepare(
        "INSERT INTO learning_embeddings(learning_seq, model, embedding)
         VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
    )?
    .execute(params![seq as i64, model, encode_vector(vector)])?;
    Ok(())
}

/// Learnings with `after < seq < below` that have no embedding, at most `limit`, by
/// `seq`.
fn missing(c: &Conn<'_>, span: Span, limit: usize) -> Result<Vec<(u64, String)>> {
    let mut st = c.prepare(
        "SELECT l.seq, l.pattern, l.context FROM learnings l
         WHERE l.seq > ?1 AND l.seq < ?2
           AND NOT EXISTS (SELECT 1 FROM learning_embeddings e WHERE e.learning_seq = l.seq)
         ORDER BY l.seq LIMIT ?3",
    )?;
    let rows = st.query_map(
        params![span.after as i64, span.below_i64(), limit as i64],
        |r| {
            let pattern: String = r.get(1)?;
            let context: Option<String> = r.get(2)?;
            Ok((
                r.get::<_, i64>(0)? as u64,
                embedding_text(&pattern, context.as_deref()),
            ))
        },
    )?;
    rows.collect::<crate::error::Result<Vec<_>>>()
}

/// The learnings a backfill looks at: `after < seq < below`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    pub(crate) after: u64,
    pub(crate) below: u64,
}

impl Span {
    /// Every learning past `after`.
    pub(crate) fn after(after: u64) -> Span {
        Span {
            after,
            below: u64::MAX,
        }
    }

    fn below_i64(self) -> i64 {
        i64::try_from(self.below).unwrap_or(i64::MAX)
    }
}

/// How a backfill runs the model: now (a search or `reindex` waits for it), or in the
/// background indexer, once no call is in flight and no query uses the model
/// ([`Foreground::wait_quiet`], [`Embed::embed_idle`]), or after [`BACKGROUND_PATIENCE`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Urgency<'a> {
    Now,
    Idle(&'a Foreground),
}

/// Embed up to `limit` learnings of `span` that have none. Returns how many were
/// embedded and the `seq` up to which none is missing any more.
pub(crate) fn backfill(
    store: &Store,
    embedder: &dyn Embed,
    span: Span,
    limit: usize,
    urgency: Urgency<'_>,
) -> Result<(usize, u64)> {
    if span.after.saturating_add(1) >= span.below {
        // Nothing can be missing (a search's span once the indexer took over).
        return Ok((0, span.after));
    }
    let (upto, rows) = store.read(|c| {
        let max: i64 = c.query_row("SELECT coalesce(max(seq), 0) FROM learnings", [], |r| {
            r.get(0)
        })?;
        let upto = (max as u64).min(span.below.saturating_sub(1));
        Ok((upto, missing(c, span, limit)?))
    })?;
    if rows.is_empty() {
        return Ok((0, upto.max(span.after)));
    }
    let texts: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    let vectors = match urgency {
        Urgency::Now => embedder.embed_batch(&texts)?,
        Urgency::Idle(foreground) => {
            let deadline = Instant::now() + BACKGROUND_PATIENCE;
            foreground.wait_quiet(deadline);
            embedder.embed_idle(&texts, deadline.saturating_duration_since(Instant::now()))?
        }
    };
    store.write(|tx| {
        for ((seq, _), v) in rows.iter().zip(&vectors) {
            insert(tx, *seq, embedder.model_id(), v)?;
        }
        Ok(())
    })?;
    let reached = if rows.len() < limit {
        upto.max(span.after)
    } else {
        rows.last().map_or(span.after, |r| r.0)
    };
    Ok((rows.len(), reached))
}

/// Embed every learning that has no embedding (for `reindex`); returns how many.
pub(crate) fn backfill_all(store: &Store, embedder: &dyn Embed) -> Result<(usize, u64)> {
    let mut after = 0;
    let mut total = 0;
    loop {
        let (n, reached) = backfill(
            store,
            embedder,
            Span::after(after),
            BACKFILL_BATCH,
            Urgency::Now,
        )?;
        total += n;
        after = reached;
        if n < BACKFILL_BATCH {
            return Ok((total, after));
        }
    }
}

/// The vectors of one project, contiguous, and their graph once they are many.
#[derive(Debug, Default)]
struct Block {
    seqs: Vec<u64>,
    data: Vec<f32>,
    graph: Option<Graph>,
}

/// Per-process copy of every learning's embedding, grouped by project (interned ids
/// of the index's metadata cache).
#[derive(Debug)]
pub(crate) struct Vectors {
    /// Largest `learning_embeddings.id` read.
    upto: u64,
    blocks: HashMap<u32, Block>,
    /// `seq` → (project, position in its block).
    at: HashMap<u64, (u32, usize)>,
    /// Learnings from which a project's block gets a graph ([`graph_min`]).
    graph_min: usize,
}

impl Default for Vectors {
    fn default() -> Self {
        Vectors {
            upto: 0,
            blocks: HashMap::new(),
            at: HashMap::new(),
            graph_min: graph_min(),
        }
    }
}

impl Vectors {
    /// Read the embeddings with `id` in `(upto, to]`; `project` maps a `seq` to its
    /// project (every such `seq` is known to the caller's metadata).
    pub(crate) fn refresh(
        &mut self,
        store: &Store,
        to: u64,
        project: impl Fn(u64) -> Option<u32>,
    ) -> Result<()> {
        if to <= self.upto {
            return Ok(());
        }
        let rows: Vec<(u64, Vec<f32>)> = store.read(|c| {
            let mut st = c.prepare(
                "SELECT learning_seq, embedding FROM learning_embeddings
                 WHERE id > ?1 AND id <= ?2 AND model = ?3 ORDER BY id",
            )?;
            let mut rows = st.query(params![self.upto as i64, to as i64, MODEL_ID])?;
            let mut out = Vec::new();
            while let Some(r) = rows.next()? {
                let seq: i64 = r.get(0)?;
                let blob: Vec<u8> = r.get(1)?;
                out.push((seq as u64, decode_vector(seq, &blob)?));
            }
            Ok(out)
        })?;
        for (seq, v) in rows {
            if let Some(p) = project(seq) {
                self.push(p, seq, &v);
            }
        }
        self.follow();
        self.upto = to;
        Ok(())
    }

    /// Hand what the blocks gained to their graphs' builder ([`Graph::follow`]).
    fn follow(&mut self) {
        for b in self.blocks.values_mut() {
            Graph::follow(&mut b.graph, self.graph_min, &b.seqs, &b.data);
        }
    }

    /// Points the blocks' graphs hold now.
    pub(crate) fn graph_points(&self) -> usize {
        self.blocks
            .values()
            .filter_map(|b| b.graph.as_ref().map(Graph::covered))
            .sum()
    }

    /// Wait until every block's graph covers all that was handed to it, and tell how
    /// many points the graphs hold.
    pub(crate) fn wait_for_graphs(&self) -> usize {
        self.blocks
            .values()
            .filter_map(|b| b.graph.as_ref().map(Graph::wait_covered))
            .sum()
    }

    /// Largest `learning_embeddings.id` read.
    pub(crate) fn upto(&self) -> u64 {
        self.upto
    }

    fn push(&mut self, project: u32, seq: u64, v: &[f32]) {
        if self.at.contains_key(&seq) {
            return;
        }
        let b = self.blocks.entry(project).or_default();
        self.at.insert(seq, (project, b.seqs.len()));
        b.seqs.push(seq);
        b.data.extend_from_slice(v);
    }

    /// Learning `seq`'s embedding, if it has one.
    pub(crate) fn vector(&self, seq: u64) -> Option<&[f32]> {
        let (p, i) = self.at.get(&seq)?;
        let b = self.blocks.get(p)?;
        Some(&b.data[i * DIMENSION..(i + 1) * DIMENSION])
    }

    /// Cosine similarity of `query` and learning `seq`, if it has a vector.
    pub(crate) fn cosine(&self, query: &[f32], seq: u64) -> Option<f32> {
        self.vector(seq).map(|v| dot(query, v))
    }

    /// The `k` learnings most similar to `query` (a unit vector) as `(seq, cosine)`,
    /// best first, among the projects `project_ok` allows and the learnings `accept`s.
    pub(crate) fn top_k(
        &self,
        query: &[f32],
        k: usize,
        project_ok: impl Fn(u32) -> bool,
        accept: impl Fn(u64) -> bool,
    ) -> Vec<(u64, f32)> {
        // A total order (score, then the newer learning), so the selection is exact
        // and deterministic whatever order the blocks are visited in.
        let by_score = |a: &(u64, f32), b: &(u64, f32)| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0));
        // The best `k` so far, cut back whenever it reaches `2k`: memory stays small
        // (no large buffer allocated and faulted in per search) and the cost linear.
        let cap = 2 * k.max(1);
        let mut hits: Vec<(u64, f32)> = Vec::with_capacity(cap);
        let mut compared = 0;
        let keep = |hits: &mut Vec<(u64, f32)>| {
            if hits.len() > k && k > 0 {
                hits.select_nth_unstable_by(k - 1, by_score);
                hits.truncate(k);
            }
        };
        for (p, b) in &self.blocks {
            if !project_ok(*p) {
                continue;
            }
            // The graph's answer for the positions it covers, the rest scanned.
            let mut from = 0;
            let covered = b.graph.as_ref().map_or(0, Graph::covered);
            if let Some(g) = b.graph.as_ref().filter(|_| covered > 0) {
                let in_graph = |seq: u64| self.at.get(&seq).is_some_and(|&(_, i)| i < covered);
                if let Some(seqs) = g.nearest(query, k, |seq| in_graph(seq) && accept(seq)) {
                    for seq in seqs {
                        if let Some(v) = self.vector(seq) {
                            compared += 1;
                            hits.push((seq, dot(query, v)));
                        }
                    }
                    from = covered;
                }
            }
            let rest = b.seqs[from..]
                .iter()
                .zip(b.data[from * DIMENSION..].chunks_exact(DIMENSION));
            for (seq, v) in rest {
                if accept(*seq) {
                    compared += 1;
                    hits.push((*seq, dot(query, v)));
                    if hits.len() >= cap {
                        keep(&mut hits);
                    }
                }
            }
        }
        keep(&mut hits);
        crate::metrics::cost::count(crate::metrics::cost::Unit::VectorsCompared, compared);
        hits.sort_by(by_score);
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(xs: &[f32]) -> Vec<f32> {
        let mut v = vec![0.0; DIMENSION];
        v[..xs.len()].copy_from_slice(xs);
        crate::embed::l2_normalize(&mut v);
        v
    }

    #[test]
    fn top_k_is_exact_and_filtered() {
        let mut vs = Vectors::default();
        for (seq, p, x) in [
            (1u64, 0u32, [1.0, 0.0]),
            (2, 0, [0.8, 0.6]),
            (3, 1, [1.0, 0.1]),
            (4, 0, [0.0, 1.0]),
        ] {
            vs.push(p, seq, &unit(&x));
        }
        assert_eq!(vs.at.len(), 4);
        let q = unit(&[1.0, 0.0]);
        let all = vs.top_k(&q, 10, |_| true, |_| true);
        assert_eq!(all.iter().map(|h| h.0).collect::<Vec<_>>(), [1, 3, 2, 4]);
        let p0 = vs.top_k(&q, 2, |p| p == 0, |_| true);
        assert_eq!(p0.iter().map(|h| h.0).collect::<Vec<_>>(), [1, 2]);
        let no1 = vs.top_k(&q, 1, |p| p == 0, |s| s != 1);
        assert_eq!(no1.iter().map(|h| h.0).collect::<Vec<_>>(), [2]);
        assert!((all[0].1 - 1.0).abs() < 1e-6);
        assert!((vs.cosine(&q, 2).unwrap() - 0.8).abs() < 1e-6);
        assert_eq!(vs.cosine(&q, 9), None);
    }

    /// `n` unit vectors around 40 topics (an embedding's clusters), seeded.
    fn clustered(n: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut rng = crate::base::rng::SplitMix64::new(seed);
        let mut noise = |scale: f32| -> Vec<f32> {
            (0..DIMENSION)
                .map(|_| (rng.below(2_001) as f32 / 1_000.0 - 1.0) * scale)
                .collect()
        };
        let topics: Vec<Vec<f32>> = (0..40).map(|_| noise(1.0)).collect();
        (0..n)
            .map(|i| {
                let mut v: Vec<f32> = topics[i % topics.len()]
                    .iter()
                    .zip(noise(0.8))
                    .map(|(t, e)| t + e)
                    .collect();
                crate::embed::l2_normalize(&mut v);
                v
            })
            .collect()
    }

    /// The same vectors with and without a graph (`graph_min` 1,000), project 0 holding
    /// `n` of them and project 1 a few.
    fn pair(n: usize) -> (Vectors, Vectors, Vec<Vec<f32>>) {
        let data = clustered(n, 11);
        let mut exact = Vectors {
            graph_min: usize::MAX,
            ..Vectors::default()
        };
        let mut graphed = Vectors {
            graph_min: 1_000,
            ..Vectors::default()
        };
        for vs in [&mut exact, &mut graphed] {
            for (i, v) in data.iter().enumerate() {
                vs.push(u32::from(i % 100 == 0), i as u64 + 1, v);
            }
            vs.follow();
        }
        (exact, graphed, clustered(100, 12))
    }

    #[test]
    fn a_graph_finds_what_the_exact_scan_finds() {
        let (exact, graphed, queries) = pair(4_000);
        assert_eq!(
            graphed.wait_for_graphs(),
            3_960,
            "project 0's block is in its graph"
        );
        assert!(exact.blocks.values().all(|b| b.graph.is_none()));
        assert!(graphed.blocks[&1].graph.is_none(), "40 vectors stay exact");
        let (mut found, mut wanted) = (0, 0);
        // A search asks for its 100 nearest (`CANDIDATES_MIN`); the first ten are read.
        for q in &queries {
            let want = exact.top_k(q, 100, |p| p == 0, |_| true)[..10].to_vec();
            let got = graphed.top_k(q, 100, |p| p == 0, |_| true)[..10].to_vec();
            // The graph's neighbours carry the exact scan's scores.
            for (seq, cos) in &got {
                assert_eq!(Some(*cos), exact.cosine(q, *seq));
            }
            wanted += want.len();
            found += got.iter().filter(|h| want.contains(h)).count();
        }
        let recall = found as f64 / wanted as f64;
        assert!(recall >= 0.98, "recall@10 {recall:.3}");
        // Filters hold through the graph: every other learning refused.
        let odd = graphed.top_k(&queries[0], 10, |p| p == 0, |s| s % 2 == 1);
        assert_eq!(odd.len(), 10);
        assert!(odd.iter().all(|(s, _)| s % 2 == 1));
    }

    #[test]
    fn vectors_past_the_graph_are_scanned_until_the_builder_has_them() {
        let (_, mut graphed, _) = pair(2_000);
        graphed.wait_for_graphs();
        // Fewer new vectors than a job: never handed over, found by the scan.
        let fresh = clustered(3, 13);
        for (i, v) in fresh.iter().enumerate() {
            graphed.push(0, 10_000 + i as u64, v);
        }
        graphed.follow();
        let b = &graphed.blocks[&0];
        assert!(b.graph.as_ref().unwrap().covered() < b.seqs.len());
        for (i, v) in fresh.iter().enumerate() {
            let top = graphed.top_k(v, 1, |p| p == 0, |_| true);
            assert_eq!(top[0].0, 10_000 + i as u64);
        }
        // A job's worth more: handed over, and then covered.
        for (i, v) in clustered(super::super::graph::FOLLOW_POINTS, 14)
            .iter()
            .enumerate()
        {
            graphed.push(0, 20_000 + i as u64, v);
        }
        graphed.follow();
        let len = graphed.blocks[&0].seqs.len();
        assert_eq!(graphed.wait_for_graphs(), len);
        let last = graphed.vector(20_000).unwrap().to_vec();
        assert_eq!(graphed.top_k(&last, 1, |p| p == 0, |_| true)[0].0, 20_000);
    }

    #[test]
    fn top_k_bounded_selection_equals_a_full_sort() {
        // Many more vectors than 2k, with ties (repeated vectors): the selection cut back
        // whenever full must give exactly the full sort's first k, ties by newer seq.
        let mut rng = crate::base::rng::SplitMix64::new(5);
        let mut vs = Vectors::default();
        let mut all = Vec::new();
        let q = unit(&[0.3, -0.2, 0.9, 0.1]);
        for seq in 1..=1_000u64 {
            let x: Vec<f32> = (0..4).map(|_| (rng.below(9) as f32 - 4.0) / 4.0).collect();
            let v = unit(&x);
            vs.push((seq % 3) as u32, seq, &v);
            if seq % 3 != 1 {
                all.push((seq, dot(&q, &v)));
            }
        }
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        for k in [1, 7, 50] {
            let got = vs.top_k(&q, k, |p| p != 1, |_| true);
            assert_eq!(got, all[..k].to_vec(), "k = {k}");
        }
    }
}
