//! `cairn eval vault`: the vault's ranking measured on a BEIR-format set, with
//! lexical-only and dense-only baselines, their reciprocal-rank fusion, and the
//! ranking's variants in the same run.
//!
//! - **Corpus**: a BEIR `corpus.jsonl` (`_id`, `title`, `text`; given as the file or a
//!   directory holding it), or a directory of documents in any format the vault reads
//!   (source code too with `--code`; document id = path relative to the directory). It is indexed into a temporary database through the
//!   real ingest path (`cairn reindex`): each BEIR document becomes one Markdown file
//!   (`# title`, then the text), chunked as usual.
//! - **Queries**: BEIR `queries.jsonl` (`_id`, `text`); the category is
//!   `metadata.category` or `category` when present, else `all`.
//! - **Qrels**: BEIR TSV with the header `query-id corpus-id score`. Only queries with at
//!   least one judged-relevant document are scored. A corpus id `path#Heading` judges a
//!   section: a hit of document `path` whose heading path contains `Heading`; a query
//!   judged by sections is scored on the ranking of distinct sections.
//! - **Figures**: each system returns its top [`TOP_K`] chunks (what an agent sees);
//!   the document ranking is their distinct documents in order of first appearance;
//!   nDCG@10, MRR@10, Recall@5 and Hit@10 over it ([`super::metrics`]), per category; p50
//!   latency of one search (query embedding included for the systems that embed); and
//!   the mean number of distinct documents among the [`TOP_K`] chunks.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::Cairn;
use crate::error::{Error, Result};
use crate::vault::documents::VaultHit;
use crate::vault::reindex::ReindexOptions;
use crate::vault::rerank::{MAX_PER_DOCUMENT, OLD_OVERLAP_WEIGHT, Ranking, Sources, Weights};

use super::metrics::{Qrels, QueryScore, Summary, by_category, p50, rrf};

/// Chunks each system returns per query.
pub(crate) const TOP_K: usize = 10;
/// Category of queries that carry none.
const NO_CATEGORY: &str = "all";
/// Collection the corpus is indexed under.
const COLLECTION: &str = "eval";
/// The baselines' names, and their reciprocal-rank fusion (k = 60, over each one's
/// first [`TOP_K`] chunks, judged as the systems are).
const LEXICAL_ONLY: &str = "lexical-only";
const DENSE_ONLY: &str = "dense-only";
const RRF_K: f64 = 60.0;

/// What to evaluate.
#[derive(Debug, Clone)]
pub(crate) struct VaultEvalOptions {
    pub(crate) corpus: PathBuf,
    pub(crate) queries: PathBuf,
    pub(crate) qrels: PathBuf,
    /// Also run a grid of lexical weights × caps (for choosing the defaults).
    pub(crate) sweep: bool,
    /// Index source code in a corpus directory too (`cairn reindex --code`).
    pub(crate) code: bool,
}

/// One system's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SystemReport {
    pub(crate) name: String,
    /// Where candidates come from: `dense`, `lexical` or `dense+bm25`.
    pub(crate) sources: String,
    /// Weights of BM25 and keyword overlap in `score` (the rest is cosine), for chunks of
    /// documents, of documents when the query names an identifier a candidate holds, and
    /// of source code.
    pub(crate) prose: Weights,
    pub(crate) identifier: Weights,
    pub(crate) code: Weights,
    /// `None`: no per-document cap.
    pub(crate) max_per_document: Option<usize>,
    pub(crate) overall: Summary,
    pub(crate) categories: BTreeMap<String, Summary>,
    /// Median latency of one search, milliseconds.
    pub(crate) p50_ms: f64,
    /// Mean distinct documents among the top chunks.
    pub(crate) distinct_documents: f64,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct VaultEvalReport {
    pub(crate) corpus: String,
    pub(crate) documents: usize,
    pub(crate) chunks: usize,
    /// Queries scored (those with a relevant document).
    pub(crate) queries: usize,
    pub(crate) top_k: usize,
    pub(crate) systems: Vec<SystemReport>,
}

/// One query as read.
#[derive(Debug, Clone)]
struct Query {
    id: String,
    text: String,
    category: String,
}

fn bad(field: &str, msg: impl Into<String>) -> Error {
    Error::invalid(field, msg)
}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::io(path, e)
}

/// Non-empty lines of a file, parsed as JSON objects.
fn jsonl(path: &Path, field: &str) -> Result<Vec<serde_json::Value>> {
    let file = std::fs::File::open(path).map_err(|e| io(path, e))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| io(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line).map_err(|e| {
            bad(
                field,
                format!("{} line {}: not JSON ({e})", path.display(), i + 1),
            )
        })?;
        out.push(v);
    }
    Ok(out)
}

/// The `_id` of a JSONL record (a string, or a number written as one).
fn record_id(v: &serde_json::Value, path: &Path, field: &str) -> Result<String> {
    match &v["_id"] {
        serde_json::Value::String(s) if !s.is_empty() => Ok(s.clone()),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        _ => Err(bad(
            field,
            format!("{}: a record without a string `_id`", path.display()),
        )),
    }
}

fn read_queries(path: &Path) -> Result<Vec<Query>> {
    jsonl(path, "queries")?
        .iter()
        .map(|v| {
            let category = v["metadata"]["category"]
                .as_str()
                .or_else(|| v["category"].as_str())
                .unwrap_or(NO_CATEGORY)
                .to_string();
            Ok(Query {
                id: record_id(v, path, "queries")?,
                text: v["text"].as_str().unwrap_or_default().to_string(),
                category,
            })
        })
        .collect()
}

/// Qrels by query id, from a BEIR TSV (header line first).
fn read_qrels(path: &Path) -> Result<HashMap<String, Qrels>> {
    let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
    let mut out: HashMap<String, Qrels> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let cols: Vec<&str> = line.split('\t').map(str::trim).collect();
        if line.trim().is_empty() || (i == 0 && cols.first() == Some(&"query-id")) {
            continue;
        }
        let [q, d, g] = cols[..] else {
            return Err(bad(
                "qrels",
                format!(
                    "{} line {}: expected `query-id<TAB>corpus-id<TAB>score`",
                    path.display(),
                    i + 1
                ),
            ));
        };
        let grade: u32 = g.parse().map_err(|_| {
            bad(
                "qrels",
                format!(
                    "{} line {}: score {g:?} is not a whole number",
                    path.display(),
                    i + 1
                ),
            )
        })?;
        out.entry(q.to_string())
            .or_default()
            .insert(d.to_string(), grade);
    }
    Ok(out)
}

/// The corpus on disk as Markdown: the directory to index and the map from relative
/// path to document id (identity for a Markdown corpus).
struct Prepared {
    dir: PathBuf,
    ids: Option<HashMap<String, String>>,
    documents: usize,
}

/// Write a BEIR corpus as one Markdown file per document under `into`.
fn write_beir(corpus: &Path, into: &Path) -> Result<Prepared> {
    let dir = into.join("corpus");
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let mut ids = HashMap::new();
    for (i, v) in jsonl(corpus, "corpus")?.iter().enumerate() {
        let id = record_id(v, corpus, "corpus")?;
        let title = v["title"].as_str().unwrap_or_default().trim();
        let text = v["text"].as_str().unwrap_or_default();
        let name = format!("d{i:07}.md");
        let path = dir.join(&name);
        let mut f = std::fs::File::create(&path).map_err(|e| io(&path, e))?;
        let body = if title.is_empty() {
            format!("{text}\n")
        } else {
            format!("# {title}\n\n{text}\n")
        };
        f.write_all(body.as_bytes()).map_err(|e| io(&path, e))?;
        ids.insert(name, id);
    }
    Ok(Prepared {
        dir,
        documents: ids.len(),
        ids: Some(ids),
    })
}

/// BM25 and overlap weights, without a path part.
fn bm25_overlap(lexical: f32, overlap: f32) -> Weights {
    Weights {
        lexical,
        overlap,
        path: 0.0,
    }
}

/// A ranking with one set of weights for prose (with or without an identifier named)
/// and code alike.
fn uniform(sources: Sources, weights: Weights, max_per_document: Option<usize>) -> Ranking {
    Ranking {
        sources,
        prose: weights,
        identifier: weights,
        code: weights,
        max_per_document,
    }
}

/// The systems every run reports.
fn systems(sweep: bool) -> Vec<(String, Ranking)> {
    let d = Ranking::default();
    let cap = Some(MAX_PER_DOCUMENT);
    let no_bm25 = |k: Weights| Weights { lexical: 0.0, ..k };
    let bm25_only = |k: Weights| Weights {
        lexical: k.lexical + k.overlap,
        overlap: 0.0,
        ..k
    };
    let mut out = vec![
        ("cairn".to_string(), d),
        (
            "cairn, no cap".to_string(),
            Ranking {
                max_per_document: None,
                ..d
            },
        ),
        (
            "cairn, cap 3".to_string(),
            Ranking {
                max_per_document: Some(3),
                ..d
            },
        ),
        (
            "cairn, without the identifier weights".to_string(),
            Ranking {
                identifier: d.prose,
                ..d
            },
        ),
        (
            "cairn, code weighed as prose".to_string(),
            Ranking { code: d.prose, ..d },
        ),
        (
            "cairn, code without its path part".to_string(),
            Ranking {
                code: Weights {
                    path: 0.0,
                    ..d.code
                },
                ..d
            },
        ),
        (
            "cairn, no BM25 (dense + overlap, cap)".to_string(),
            Ranking {
                sources: Sources::Dense,
                prose: no_bm25(d.prose),
                identifier: no_bm25(d.identifier),
                code: no_bm25(d.code),
                ..d
            },
        ),
        (
            "BM25 fusion only (no overlap, cap)".to_string(),
            Ranking {
                prose: bm25_only(d.prose),
                identifier: bm25_only(d.identifier),
                code: bm25_only(d.code),
                ..d
            },
        ),
        (
            "keyword overlap rerank (before), no cap".to_string(),
            uniform(Sources::Dense, bm25_overlap(0.0, OLD_OVERLAP_WEIGHT), None),
        ),
        (
            "keyword overlap rerank, cap".to_string(),
            uniform(Sources::Dense, bm25_overlap(0.0, OLD_OVERLAP_WEIGHT), cap),
        ),
        (
            format!("{LEXICAL_ONLY} (BM25 chunks)"),
            uniform(Sources::Lexical, bm25_overlap(0.0, 0.0), None),
        ),
        (
            format!("{DENSE_ONLY} (cosine)"),
            uniform(Sources::Dense, bm25_overlap(0.0, 0.0), None),
        ),
    ];
    if sweep {
        out.extend(sweep_systems());
    }
    out
}

/// The `--sweep` grid: [`SWEEP`] × caps 1, 2 and none.
fn sweep_systems() -> impl Iterator<Item = (String, Ranking)> {
    SWEEP.into_iter().flat_map(|(wl, wo)| {
        [Some(1), Some(2), None].map(|c| {
            (
                format!(
                    "sweep bm25={wl} overlap={wo} cap={}",
                    c.map_or("none".into(), |c| c.to_string())
                ),
                uniform(Sources::Both, bm25_overlap(wl, wo), c),
            )
        })
    })
}

/// The `--sweep` grid of BM25 and overlap weights (for prose and code alike).
const SWEEP: [(f32, f32); 20] = [
    (0.1, 0.0),
    (0.2, 0.0),
    (0.3, 0.0),
    (0.0, 0.1),
    (0.0, 0.2),
    (0.05, 0.1),
    (0.05, 0.15),
    (0.1, 0.05),
    (0.1, 0.1),
    (0.1, 0.15),
    (0.1, 0.2),
    (0.15, 0.1),
    (0.15, 0.15),
    (0.2, 0.1),
    (0.2, 0.15),
    (0.2, 0.2),
    (0.25, 0.1),
    (0.25, 0.15),
    (0.3, 0.1),
    (0.3, 0.15),
];

fn sources_name(r: &Ranking) -> &'static str {
    match r.sources {
        Sources::Dense => "dense",
        Sources::Lexical => "lexical",
        Sources::Both => "dense+bm25",
    }
}

/// The key a hit is judged under: its document id, or `id#heading` when the query's
/// judgements name sections (`path#Heading`: the hit's document is `path` and its
/// heading path contains `Heading`). A hit under two judged sections (a section and its
/// parent) is judged under the innermost, the one found last in its heading path: taken
/// in the judgements' (hash) order, one run judged it under one and the next run under
/// the other, and the handbook's nDCG@10 moved by 0.013 between runs of one binary.
fn judged_key(doc: &str, heading_path: &str, qrels: &Qrels) -> String {
    let innermost = qrels
        .keys()
        .filter_map(|k| {
            let (d, h) = k.split_once('#')?;
            (d == doc).then(|| heading_path.rfind(h).map(|at| (at, k)))?
        })
        .max();
    if let Some((_, k)) = innermost {
        return k.clone();
    }
    if qrels.keys().any(|k| k.contains('#')) {
        format!("{doc}#{heading_path}")
    } else {
        doc.to_string()
    }
}

/// The queries with at least one relevant document, and the judgements.
fn read_set(opts: &VaultEvalOptions) -> Result<(Vec<Query>, HashMap<String, Qrels>)> {
    let queries = read_queries(&opts.queries)?;
    let qrels = read_qrels(&opts.qrels)?;
    let queries: Vec<Query> = queries
        .into_iter()
        .filter(|q| qrels.get(&q.id).is_some_and(|j| j.values().any(|&g| g > 0)))
        .collect();
    if queries.is_empty() {
        return Err(bad(
            "queries",
            "no query has a relevant document in the qrels; check that the ids match",
        ));
    }
    Ok((queries, qrels))
}

/// The corpus as a directory to index: a directory of documents as it is, a BEIR file
/// written as Markdown under `tmp`.
fn prepare(opts: &VaultEvalOptions, tmp: &Path, progress: &dyn Fn(&str)) -> Result<Prepared> {
    if opts.corpus.is_dir() && !opts.corpus.join("corpus.jsonl").is_file() {
        return Ok(Prepared {
            dir: opts.corpus.clone(),
            ids: None,
            documents: 0,
        });
    }
    let file = if opts.corpus.is_dir() {
        opts.corpus.join("corpus.jsonl")
    } else {
        opts.corpus.clone()
    };
    progress(&format!("writing {} as Markdown", file.display()));
    write_beir(&file, tmp)
}

/// Index the prepared corpus into `cairn` through `cairn reindex`'s path: (documents,
/// chunks).
fn index(
    cairn: &Cairn,
    prepared: &Prepared,
    code: bool,
    progress: &dyn Fn(&str),
) -> Result<(usize, usize)> {
    progress("indexing the corpus (embedding every chunk; about 25-40 chunks/s on 2 cores)");
    let started = Instant::now();
    let summary = cairn.vault_reindex(
        &ReindexOptions {
            dir: prepared.dir.clone(),
            collection: Some(COLLECTION.into()),
            files: crate::vault::formats::FileFilter {
                code,
                ..Default::default()
            },
            ..Default::default()
        },
        &|_| {},
    )?;
    let chunks = summary.chunks_embedded + summary.chunks_reused;
    progress(&format!(
        "indexed {} documents, {chunks} chunks in {:.1}s",
        summary.files_seen,
        started.elapsed().as_secs_f64()
    ));
    let documents = match prepared.ids {
        Some(_) => prepared.documents,
        None => summary.files_seen,
    };
    Ok((documents, chunks))
}

/// Per system (the systems, then the fusion of the baselines): each query's category
/// and figures, the latencies, and the sum over queries of distinct documents.
struct Scores {
    scores: Vec<Vec<(String, QueryScore)>>,
    latency: Vec<Vec<f64>>,
    distinct: Vec<f64>,
}

/// One system's hits judged: the ranking of distinct judged keys, and how many
/// distinct documents the hits hold.
fn judge(
    hits: &[VaultHit],
    judged: &Qrels,
    doc_id: &dyn Fn(&str) -> String,
) -> (Vec<String>, usize) {
    let mut keys: Vec<String> = Vec::new();
    let mut docs: Vec<String> = Vec::new();
    for h in hits {
        let d = doc_id(&h.path);
        let k = judged_key(&d, &h.metadata.heading_path, judged);
        if !keys.contains(&k) {
            keys.push(k);
        }
        if !docs.contains(&d) {
            docs.push(d);
        }
    }
    (keys, docs.len())
}

/// Run every query under every system (and the fusion of the two baselines, one row
/// more, when both run).
fn run_queries(
    cairn: &Cairn,
    queries: &[Query],
    qrels: &HashMap<String, Qrels>,
    systems: &[(String, Ranking)],
    doc_id: &dyn Fn(&str) -> String,
    progress: &dyn Fn(&str),
) -> Result<Scores> {
    let position = |prefix: &str| systems.iter().position(|(n, _)| n.starts_with(prefix));
    let (lexical, dense) = (position(LEXICAL_ONLY), position(DENSE_ONLY));
    let fused = systems.len();
    let mut s = Scores {
        scores: vec![Vec::new(); fused + 1],
        latency: vec![Vec::new(); fused + 1],
        distinct: vec![0.0; fused + 1],
    };
    // Warm up: the model and both indexes load on the first search.
    cairn.vault_search(&queries[0].text, Some(TOP_K), None, None)?;
    for (qi, q) in queries.iter().enumerate() {
        if qi % 50 == 0 {
            progress(&format!("query {}/{}", qi + 1, queries.len()));
        }
        let t = Instant::now();
        let vector = cairn.vault_query_vector(&q.text)?;
        let embed_ms = t.elapsed().as_secs_f64() * 1e3;
        let judged = &qrels[&q.id];
        let mut ranked: Vec<Vec<String>> = Vec::with_capacity(systems.len());
        for (si, (_, ranking)) in systems.iter().enumerate() {
            let t = Instant::now();
            let hits = cairn.vault_rank(&q.text, Some(&vector), TOP_K, None, ranking)?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            s.latency[si].push(if ranking.sources.dense() {
                ms + embed_ms
            } else {
                ms
            });
            let (keys, docs) = judge(&hits, judged, doc_id);
            s.distinct[si] += docs as f64;
            s.scores[si].push((q.category.clone(), QueryScore::of(&keys, judged)));
            ranked.push(keys);
        }
        if let (Some(l), Some(d)) = (lexical, dense) {
            let keys = rrf(&[&ranked[d], &ranked[l]], RRF_K);
            let mut docs: Vec<&str> = keys
                .iter()
                .map(|k| k.split('#').next().unwrap_or(k))
                .collect();
            docs.sort_unstable();
            docs.dedup();
            s.distinct[fused] += docs.len() as f64;
            let both = s.latency[l].last().unwrap_or(&0.0) + s.latency[d].last().unwrap_or(&0.0);
            s.latency[fused].push(both);
            s.scores[fused].push((q.category.clone(), QueryScore::of(&keys, judged)));
        }
    }
    Ok(s)
}

/// Each system's figures, the fusion of the baselines last when it ran.
fn reports(systems: &[(String, Ranking)], mut s: Scores, queries: usize) -> Vec<SystemReport> {
    let none = Weights {
        lexical: 0.0,
        overlap: 0.0,
        path: 0.0,
    };
    let baseline = Ranking {
        sources: Sources::Both,
        prose: none,
        identifier: none,
        code: none,
        max_per_document: None,
    };
    let rrf_row = s
        .scores
        .last()
        .is_some_and(|v| !v.is_empty())
        .then(|| ("rrf (dense-only, lexical-only)".to_string(), baseline));
    systems
        .iter()
        .chain(rrf_row.as_ref())
        .enumerate()
        .map(|(si, (name, r))| {
            let (overall, categories) =
                by_category(s.scores[si].iter().map(|(c, q)| (c.as_str(), *q)));
            SystemReport {
                name: name.clone(),
                sources: sources_name(r).into(),
                prose: r.prose,
                identifier: r.identifier,
                code: r.code,
                max_per_document: r.max_per_document,
                overall,
                categories,
                p50_ms: p50(&mut s.latency[si]),
                distinct_documents: s.distinct[si] / queries as f64,
            }
        })
        .collect()
}

/// Run the evaluation; progress goes to `progress` (stderr in the CLI).
pub(crate) fn run(opts: &VaultEvalOptions, progress: &dyn Fn(&str)) -> Result<VaultEvalReport> {
    let (queries, qrels) = read_set(opts)?;
    let tmp = tempfile::tempdir().map_err(|e| io(Path::new("temporary directory"), e))?;
    let prepared = prepare(opts, tmp.path(), progress)?;
    let cairn = Cairn::open(&tmp.path().join("eval.db"))?;
    let (documents, chunks) = index(&cairn, &prepared, opts.code, progress)?;
    let doc_id = |path: &str| -> String {
        match &prepared.ids {
            Some(ids) => ids.get(path).cloned().unwrap_or_else(|| path.to_string()),
            None => path.to_string(),
        }
    };
    let systems = systems(opts.sweep);
    let scores = run_queries(&cairn, &queries, &qrels, &systems, &doc_id, progress)?;
    Ok(VaultEvalReport {
        corpus: opts.corpus.display().to_string(),
        documents,
        chunks,
        queries: queries.len(),
        top_k: TOP_K,
        systems: reports(&systems, scores, queries.len()),
    })
}

/// The report as text: one table overall, one per category when there are several.
pub(crate) fn render(r: &VaultEvalReport) -> String {
    let mut out = format!(
        "corpus {}: {} documents, {} chunks; {} queries; top {} chunks per query\n\n",
        r.corpus, r.documents, r.chunks, r.queries, r.top_k
    );
    let table = |out: &mut String, title: &str, pick: &dyn Fn(&SystemReport) -> Option<Summary>| {
        out.push_str(&format!(
            "{title}\n{:<42} {:>7} {:>7} {:>8} {:>7} {:>9} {:>8}\n",
            "system", "nDCG@10", "MRR@10", "Recall@5", "Hit@10", "docs/top", "p50 ms"
        ));
        for s in &r.systems {
            if let Some(m) = pick(s) {
                out.push_str(&format!(
                    "{:<42} {:>7.3} {:>7.3} {:>8.3} {:>7.3} {:>9.2} {:>8.2}\n",
                    s.name, m.ndcg10, m.mrr10, m.recall5, m.hit10, s.distinct_documents, s.p50_ms
                ));
            }
        }
        out.push('\n');
    };
    table(&mut out, "overall", &|s| Some(s.overall));
    let categories: Vec<String> = r
        .systems
        .first()
        .map(|s| s.categories.keys().cloned().collect())
        .unwrap_or_default();
    if categories.len() > 1 {
        for c in &categories {
            table(
                &mut out,
                &format!(
                    "category {c} ({} queries)",
                    r.systems[0].categories[c].queries
                ),
                &|s| s.categories.get(c).copied(),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qrels_skip_the_header_and_refuse_malformed_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("q.tsv");
        std::fs::write(
            &p,
            "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq2\td3\t1\n",
        )
        .unwrap();
        let q = read_qrels(&p).unwrap();
        assert_eq!(q["q1"]["d1"], 2);
        assert_eq!(q["q1"]["d2"], 0);
        assert_eq!(q["q2"].len(), 1);
        std::fs::write(&p, "query-id\tcorpus-id\tscore\nq1 d1\n").unwrap();
        assert!(read_qrels(&p).is_err());
        std::fs::write(&p, "q1\td1\thigh\n").unwrap();
        assert!(read_qrels(&p).is_err());
    }

    #[test]
    fn a_hit_under_two_judged_sections_is_judged_under_the_innermost() {
        // Each map hashes with its own keys, so its order differs between maps.
        for _ in 0..20 {
            let q: Qrels = [
                ("a.md#Parent".to_string(), 1),
                ("a.md#Child".to_string(), 2),
            ]
            .into();
            assert_eq!(judged_key("a.md", "Doc > Parent > Child", &q), "a.md#Child");
            assert_eq!(judged_key("a.md", "Doc > Parent", &q), "a.md#Parent");
            assert_eq!(judged_key("a.md", "Doc > Other", &q), "a.md#Doc > Other");
            assert_eq!(judged_key("b.md", "Doc > Child", &q), "b.md#Doc > Child");
        }
    }

    #[test]
    fn query_categories_come_from_metadata_or_a_field() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("queries.jsonl");
        std::fs::write(
            &p,
            "{\"_id\":\"a\",\"text\":\"x\",\"metadata\":{\"category\":\"paraphrase\"}}\n\n\
             {\"_id\":2,\"text\":\"y\",\"category\":\"keyword\"}\n{\"_id\":\"c\",\"text\":\"z\"}\n",
        )
        .unwrap();
        let q = read_queries(&p).unwrap();
        let got: Vec<(&str, &str)> = q
            .iter()
            .map(|q| (q.id.as_str(), q.category.as_str()))
            .collect();
        assert_eq!(got, [("a", "paraphrase"), ("2", "keyword"), ("c", "all")]);
        std::fs::write(&p, "{\"text\":\"no id\"}\n").unwrap();
        assert!(read_queries(&p).is_err());
    }
}
