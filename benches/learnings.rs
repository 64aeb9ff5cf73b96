//! Learnings search on deterministic corpora at 10k, 100k and (on request) 1M learnings:
//! search latency (criterion's mean/median, and p50/p99 from a timing loop over a fixed
//! set of natural-language queries), add latency, full rebuild time, and the same corpus,
//! queries and blend on SQLite FTS5 as the baseline; a summary table at the end puts every
//! corpus on one line with issue 59's goals (lexical p50 < 2 ms, hybrid p50 < 10 ms with a
//! never-seen query, recall@10 of the semantic half >= 0.98).
//!
//! Corpora (`benches/learning_corpus.rs`): `LEARNINGS_BENCH_CORPORA` (default
//! `hard,zipf`) names the generators: `hard`, every word drawn from short lists (each
//! word in several percent of all learnings: the hard case for the lexical half), and
//! `zipf`, word frequencies that follow real learnings (Zipf draws over the ranked words
//! of `tests/eval/*.jsonl`'s learnings, their real queries). `LEARNINGS_BENCH_SIZES`
//! lists the sizes, built for each generator, each `N` (N learnings spread over 10
//! projects) or `NxP` (over P projects); searches go to project `proj3` (`proj0` when
//! there is one). Default `10000,100000,100000x1`: the last puts 100,000 learnings in
//! the searched project, past [`GRAPH_MIN`], so its semantic half goes through the HNSW
//! graph. The million: `LEARNINGS_BENCH_SIZES=1000000x1,1000000x100` (building each
//! corpus takes a while once, the one-project graph 25 minutes or more; see
//! docs/perf/learnings.md for the figures and times). An empty `LEARNINGS_BENCH_SIZES=` runs
//! only the comparison of binaries below.
//!
//! **A previous build beside this one.** `CAIRN_BENCH_BASELINE=/path/to/old/cairn` (or a
//! commit, or `label=path`; several, comma-separated; `benches/binaries.rs`) first
//! compares the binaries on `LEARNINGS_BENCH_BASELINE_SIZES` (default `10000x1`, in each
//! corpus): each binary seeds its own database with the same learnings through its
//! `add_learning` (an older binary knows only its own schema; no model while seeding, the
//! vectors written as below), then the hybrid search runs through each binary's `cairn
//! serve` (stdio, one call at a time; three rounds, the binaries in turn): p50 with
//! never-seen and with repeated queries, the ratio current / baseline, and the model
//! alone (raw ONNX Runtime, `tests/reference_embed.py --single`) on the same never-seen
//! texts. The lexical-only ranking has no MCP switch, so it is measured in process only
//! (this build). For example:
//!
//! ```text
//! CAIRN_BENCH_BASELINE=4d0619d,23a9a57 LEARNINGS_BENCH_SIZES= cargo bench --bench learnings
//! ```
//!
//! Semantic part: the corpus is recorded without the model (embedding a million texts
//! would take hours). Each learning then gets a vector in the model's space from the
//! model's embeddings of its words (each distinct word embedded once), so that learnings
//! sharing words lie near each other as sentence embeddings do: in the hard corpus their
//! sum plus a little seeded noise, normalised; in the Zipf corpus their SIF mean (each
//! word weighted by its rarity, the corpus's common direction removed: a plain sum of
//! Zipf text is its frequent words, every vector within a cosine of 0.94-0.98 of every
//! other). Query vectors are the model's own. The hybrid search latency
//! (query embedding by the real model, nearest vectors, BM25, blend) is representative;
//! its ranking on these vectors is not, and they are harder for the graph than the
//! model's own (docs/perf/learnings.md). `LEARNINGS_BENCH_VECTORS=model` builds separate
//! corpora whose learnings are embedded by the model, as Cairn embeds them (through
//! `Cairn::reindex_learnings`): about 7 ms per learning on 2 cores, so two hours for a
//! million. The embedding commits as it goes and an interrupted build resumes there.
//!
//! Lexical searches are timed as searches the view has not answered before (a view keeps
//! its last searches' candidates; `lexical_round`), and each corpus reports the lexical
//! half's work per query (postings read, documents scored) and, for a run under a postings
//! budget, its recall against BM25's exact answer: run once with
//! `CAIRN_LEARNINGS_POSTINGS_BUDGET=0` (no budget) to write the reference, then without it.
//!
//! Hybrid latency is reported apart for never-seen queries (every text new, so the
//! model runs) and repeated ones (answered by the query-vector cache). For a project
//! past [`GRAPH_MIN`], the recall@10 of the graph against an exact scan over the same
//! vectors, the time to read the vectors and build the graph, and the memory they take
//! are reported too.
//!
//! Run: `cargo bench --bench learnings`. Corpora are built once and cached under
//! `target/bench-corpus/` (delete it to rebuild). The add and rebuild figures work on a
//! scratch copy of each corpus (5 GB for the Zipf million): `LEARNINGS_BENCH_ADD=0`
//! skips them.
//!
//! The FTS5 baseline: an external-content FTS5 table over `learnings` (pattern,
//! applies_to, context; `porter unicode61`), queried with the same words OR-ed (stop
//! words dropped, the last word and `word*` as prefixes), filtered to the same project
//! by a join, ranked in SQL by the same blend: `0.5·s/(s+ref) + 0.3·field + 0.2·q`,
//! where `s = -bm25()`, `ref` is the sum of the words' idf from `fts5vocab` document
//! counts, and the field term is the best column that matched (per-column `bm25()`),
//! then the same number of rows is hydrated. Per-word field priority (as tantivy's
//! path computes it) has no FTS5 equivalent; the best-column form is the closest.

#![allow(clippy::print_stdout)]

mod binaries;
mod learning_corpus;
mod reference;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cairn::Cairn;
use cairn::embed::{DIMENSION, Embed, EmbedderConfig, MODEL_ID, ModelEmbedder};
use cairn::issues::{NewIssue, NewProject};
use cairn::learnings::{
    GRAPH_MIN, LearningSearch, NewLearning, Ranking, STOP_WORDS, SearchResults, SearchScope,
};
use cairn::metrics::cost::measure;
use criterion::{Criterion, criterion_group, criterion_main};
use learning_corpus::{Corpus, Gen, Generator, queries};
use rusqlite::{Connection, params};

/// Corpus format versions, the hard one's and the Zipf one's: bump when a generator
/// changes.
const CORPUS_VERSION: u32 = 3;
const ZIPF_VERSION: u32 = 2;
const PER_ISSUE: usize = 40;
const LIMIT: usize = 50;

/// The generated learning `g` as the bench records it on `issue`.
fn bench_learning(issue: &str, g: Gen) -> NewLearning {
    NewLearning {
        issue: issue.to_string(),
        pattern: g.pattern,
        context: g.context,
        applies_to: g.applies_to,
        learning_type: None,
        created_by: "bench".into(),
        agent_type: "bench".into(),
        merge: false,
        supersedes: Vec::new(),
        person: false,
    }
}

fn norm(s: &str) -> String {
    s.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

/// A corpus: `n` learnings of one of the two corpora spread over `projects` projects.
#[derive(Debug, Clone, Copy)]
struct Spec {
    n: usize,
    projects: usize,
    corpus: Corpus,
}

impl Spec {
    fn parse(s: &str, corpus: Corpus) -> Option<Spec> {
        let (n, projects) = s.trim().split_once('x').unwrap_or((s.trim(), "10"));
        let spec = Spec {
            n: n.parse().ok()?,
            projects: projects.parse().ok()?,
            corpus,
        };
        (spec.projects > 0).then_some(spec)
    }

    fn label(&self) -> String {
        let n = if self.n >= 1_000_000 {
            format!("{}M", self.n / 1_000_000)
        } else {
            format!("{}k", self.n / 1000)
        };
        let corpus = self.corpus.name();
        match self.projects {
            10 => format!("{corpus}-{n}"),
            1 => format!("{corpus}-{n}-one-project"),
            p => format!("{corpus}-{n}-{p}-projects"),
        }
    }

    /// The project searched.
    fn project(&self) -> String {
        format!("proj{}", 3 % self.projects)
    }

    /// Learnings in the searched project.
    fn in_project(&self) -> usize {
        let issues = self.n.div_ceil(PER_ISSUE);
        let p = 3 % self.projects;
        let mine = (0..issues).filter(|i| i % self.projects == p).count();
        (mine * PER_ISSUE).min(self.n)
    }
}

/// Whether the corpus's vectors are the model's own (`LEARNINGS_BENCH_VECTORS=model`)
/// rather than sums of word embeddings (the default, `words`).
fn model_vectors() -> bool {
    match std::env::var("LEARNINGS_BENCH_VECTORS").as_deref() {
        Ok("model") => true,
        Ok("words") | Err(_) => false,
        Ok(other) => panic!("LEARNINGS_BENCH_VECTORS={other}: use words or model"),
    }
}

/// The cached corpus (built on first use), with its FTS5 baseline table.
fn corpus(spec: Spec) -> PathBuf {
    let Spec { n, projects, .. } = spec;
    let dir = target_dir().join("bench-corpus");
    let model = model_vectors();
    let suffix = if model { "-model" } else { "" };
    let name = match spec.corpus {
        Corpus::Hard => format!("learnings-{n}x{projects}-v{CORPUS_VERSION}{suffix}"),
        Corpus::Zipf => format!("learnings-zipf-{n}x{projects}-v{ZIPF_VERSION}{suffix}"),
    };
    let db = dir.join(format!("{name}.db"));
    let done = dir.join(format!("{name}.done"));
    if done.exists() {
        return db;
    }
    // The text and its FTS5 table are in place; the model's embedding was interrupted.
    let texts = dir.join(format!("{name}.texts"));
    if texts.exists() {
        let t = Instant::now();
        embed_by_model(&db, n);
        std::fs::write(&done, "").unwrap();
        println!(
            "finished embedding the corpus of {n} learnings in {:.1}s",
            t.elapsed().as_secs_f64()
        );
        return db;
    }
    let _ = std::fs::remove_file(&db);
    let _ = std::fs::remove_dir_all(cairn::store::index_dir_for(&db));
    std::fs::create_dir_all(&dir).unwrap();
    let t = Instant::now();
    let no_model = ModelEmbedder::new(EmbedderConfig {
        model_dir: Some(dir.join("no-model")),
        ..Default::default()
    });
    let cairn = Cairn::open_with_embedder(&db, Box::new(no_model)).unwrap();
    let mut generator = Generator::new(spec.corpus, 42);
    let mut seen = HashSet::new();
    let mut batch = Vec::new();
    let mut issue = String::new();
    for i in 0..n {
        if i % PER_ISSUE == 0 {
            let p = (i / PER_ISSUE) % projects;
            let slug = format!("proj{p}");
            if cairn.project(&slug).is_err() {
                cairn
                    .create_project(&NewProject {
                        slug: slug.clone(),
                        name: slug.clone(),
                        ..Default::default()
                    })
                    .unwrap();
            }
            issue = cairn
                .create_issue(&NewIssue {
                    project: slug,
                    title: format!("Issue {i}"),
                    ..Default::default()
                })
                .unwrap()
                .id;
        }
        let g = loop {
            let g = generator.next();
            if seen.insert((issue.clone(), norm(&g.pattern))) {
                break g;
            }
        };
        batch.push(bench_learning(&issue, g));
        if batch.len() == 5_000 {
            cairn.add_learnings(&batch).unwrap();
            batch.clear();
        }
    }
    if !batch.is_empty() {
        cairn.add_learnings(&batch).unwrap();
    }
    drop(cairn);
    let c = Connection::open(&db).unwrap();
    c.execute_batch(
        "CREATE VIRTUAL TABLE bench_fts USING fts5(pattern, applies_to, context,
             content='learnings', content_rowid='seq', tokenize='porter unicode61', prefix='2 3');
         INSERT INTO bench_fts(bench_fts) VALUES('rebuild');
         CREATE VIRTUAL TABLE bench_fts_vocab USING fts5vocab('bench_fts', 'row');",
    )
    .unwrap();
    if model {
        drop(c);
        std::fs::write(&texts, "").unwrap();
        embed_by_model(&db, n);
    } else {
        word_vectors(&c, spec.corpus);
        drop(c);
    }
    std::fs::write(&done, "").unwrap();
    println!(
        "built corpus of {n} learnings in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    db
}

fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// A learning's vector from its text.
type SentenceVector<'a> = dyn Fn(&str) -> Vec<f32> + 'a;

/// Every learning's vector in the model's space (see the module docs): for the hard
/// corpus the sum of its words' embeddings plus a little noise; for the Zipf corpus the
/// SIF recipe ([`sif`]).
fn word_vectors(c: &Connection, corpus: Corpus) {
    let rows: Vec<(i64, String)> = c
        .prepare("SELECT seq, pattern || ' ' || ifnull(context, '') FROM learnings ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    // In a fixed order, so that the model's batches (and so its vectors) are the same
    // at every build.
    let vocabulary: Vec<String> = rows
        .iter()
        .flat_map(|(_, t)| words(t))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let embedder = ModelEmbedder::default();
    let texts: Vec<&str> = vocabulary.iter().map(String::as_str).collect();
    let vectors = embedder.embed_batch(&texts).unwrap();
    let of: HashMap<&str, &[f32]> = texts
        .iter()
        .copied()
        .zip(vectors.iter().map(Vec::as_slice))
        .collect();
    let vector: Box<SentenceVector> = match corpus {
        Corpus::Hard => {
            let rng = std::cell::RefCell::new(cairn::base::rng::SplitMix64::new(99));
            Box::new(move |text| {
                let mut rng = rng.borrow_mut();
                let mut v: Vec<f32> = (0..DIMENSION)
                    .map(|_| (rng.below(2_001) as f32 / 1_000.0 - 1.0) * 0.02)
                    .collect();
                for w in words(text) {
                    for (x, y) in v.iter_mut().zip(of[w.as_str()]) {
                        *x += y;
                    }
                }
                v
            })
        }
        Corpus::Zipf => Box::new(sif(&rows, &of)),
    };
    c.execute_batch("BEGIN").unwrap();
    let mut st = c
        .prepare(
            "INSERT INTO learning_embeddings(learning_seq, model, embedding) VALUES (?1, ?2, ?3)",
        )
        .unwrap();
    for (seq, text) in &rows {
        let mut v = vector(text);
        cairn::embed::l2_normalize(&mut v);
        let blob: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        st.execute(params![seq, MODEL_ID, blob]).unwrap();
    }
    drop(st);
    c.execute_batch("COMMIT").unwrap();
}

/// The Zipf corpus's sentence vectors: SIF (Arora, Liang and Ma, "A simple but
/// tough-to-beat baseline for sentence embeddings", 2017): the mean of the words'
/// embeddings, each weighted by `a / (a + p(w))` (`p` the word's share of the corpus's
/// words, `a` 1e-3), minus its projection on the common direction (here the mean of all
/// the sentence vectors, where the paper takes the first principal component). A plain
/// sum of a Zipf text's words is dominated by its frequent words: every vector then
/// lies within a cosine of 0.94-0.98 of every other (a sample of 3,000 at 100,000), where
/// the model's own embeddings of the 488 real learnings of `tests/eval` spread over
/// 0.01-0.36 (5th to 95th percentile of the pairwise cosines; SIF: -0.14 to 0.14).
fn sif<'a>(
    rows: &[(i64, String)],
    of: &'a HashMap<&str, &[f32]>,
) -> impl Fn(&str) -> Vec<f32> + 'a {
    const A: f64 = 1e-3;
    let mut counts: HashMap<String, u64> = HashMap::new();
    for (_, t) in rows {
        for w in words(t) {
            *counts.entry(w).or_default() += 1;
        }
    }
    let total: u64 = counts.values().sum();
    let weight: HashMap<String, f32> = counts
        .into_iter()
        .map(|(w, n)| (w, (A / (A + n as f64 / total as f64)) as f32))
        .collect();
    let mean = move |text: &str| {
        let mut v = vec![0.0f32; DIMENSION];
        let mut n = 0;
        for w in words(text) {
            let k = weight[&w];
            for (x, y) in v.iter_mut().zip(of[w.as_str()]) {
                *x += k * y;
            }
            n += 1;
        }
        for x in &mut v {
            *x /= n.max(1) as f32;
        }
        v
    };
    let mut common = vec![0.0f32; DIMENSION];
    for (_, t) in rows {
        for (x, y) in common.iter_mut().zip(mean(t)) {
            *x += y;
        }
    }
    cairn::embed::l2_normalize(&mut common);
    move |text| {
        let mut v = mean(text);
        let along = cairn::embed::dot(&v, &common);
        for (x, u) in v.iter_mut().zip(&common) {
            *x -= along * u;
        }
        v
    }
}

/// Every learning embedded by the model, as Cairn embeds learnings that have no vector,
/// with progress on stderr every 30 s.
fn embed_by_model(db: &Path, n: usize) {
    let t = Instant::now();
    let count = |c: &Connection| -> i64 {
        c.query_row("SELECT count(*) FROM learning_embeddings", [], |r| r.get(0))
            .unwrap()
    };
    let counting = Connection::open(db).unwrap();
    let from = count(&counting);
    let finished = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let finished = &finished;
        s.spawn(move || {
            let mut next = Duration::from_secs(30);
            while !finished.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
                if t.elapsed() >= next {
                    next += Duration::from_secs(30);
                    let now = count(&counting);
                    let each = t.elapsed().as_secs_f64() * 1e3 / (now - from).max(1) as f64;
                    eprintln!("embedding the corpus: {now} of {n} learnings ({each:.1} ms each)");
                }
            }
        });
        Cairn::open(db).unwrap().reindex_learnings().unwrap();
        finished.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}

/// The searched project's vectors, by learning id (the exact scan the graph is measured
/// against).
fn project_vectors(db: &Path, project: &str) -> Vec<(String, Vec<f32>)> {
    let c = Connection::open(db).unwrap();
    c.prepare(
        "SELECT l.id, e.embedding FROM learnings l
         JOIN learning_embeddings e ON e.learning_seq = l.seq
         JOIN projects p ON p.id = l.project_id WHERE p.slug = ?1",
    )
    .unwrap()
    .query_map([project], |r| {
        let blob: Vec<u8> = r.get(1)?;
        let v = blob
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok((r.get(0)?, v))
    })
    .unwrap()
    .collect::<rusqlite::Result<_>>()
    .unwrap()
}

/// The process's resident memory, from /proc (0 where there is none).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Copy a corpus (database and index) into a temp dir, for benches that write.
fn scratch_copy(db: &Path) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let to = tmp.path().join("c.db");
    std::fs::copy(db, &to).unwrap();
    let from_idx = cairn::store::index_dir_for(db).join("learnings");
    let to_idx = cairn::store::index_dir_for(&to).join("learnings");
    std::fs::create_dir_all(&to_idx).unwrap();
    for e in std::fs::read_dir(&from_idx).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to_idx.join(e.file_name())).unwrap();
        }
    }
    (tmp, to)
}

/// One search of `project`: lexical only (BM25, field priority, quality, no
/// embedding), the hybrid blend (query embedding included), or dense only.
fn search_in(
    cairn: &Cairn,
    project: &str,
    q: &str,
    ranking: Ranking,
    limit: usize,
) -> SearchResults {
    cairn
        .search_learnings_ranked(&asked(project, q, limit), ranking)
        .unwrap()
}

/// A search of `q` in `project`, `limit` places, no filter.
fn asked(project: &str, q: &str, limit: usize) -> LearningSearch {
    LearningSearch {
        query: q.to_string(),
        scope: SearchScope::Project(project.into()),
        limit: Some(limit),
        min_quality_score: None,
        include_superseded: false,
        include_archived: false,
        min_trust: None,
    }
}

/// The lexical-only search of `q` in `project` as a search never asked before on this
/// view: round `round` (1-49) asks for a minimum quality of `round`, under every bench
/// learning's (50), so every round finds the same learnings, but no round's search is
/// one the view kept from an earlier round (a view keeps its last searches' candidates
/// and answers the same search again without scoring, docs/learnings.md).
fn lexical_round(cairn: &Cairn, project: &str, q: &str, round: u8) -> usize {
    let s = LearningSearch {
        min_quality_score: Some(round),
        ..asked(project, q, LIMIT)
    };
    cairn
        .search_learnings_ranked(&s, Ranking::Lexical)
        .unwrap()
        .count
}

/// The FTS5 baseline: same words, same project filter, the blend in SQL.
struct Fts5 {
    conn: Connection,
    project: String,
    docs: f64,
}

impl Fts5 {
    fn open(db: &Path, project: &str) -> Fts5 {
        let conn = Connection::open(db).unwrap();
        // The same page access as the store's connection.
        conn.pragma_update(None, "mmap_size", 256 * 1024 * 1024)
            .unwrap();
        let project: String = conn
            .query_row("SELECT id FROM projects WHERE slug = ?1", [project], |r| {
                r.get(0)
            })
            .unwrap();
        let docs: f64 = conn
            .query_row("SELECT count(*) FROM learnings", [], |r| r.get(0))
            .unwrap();
        Fts5 {
            conn,
            project,
            docs,
        }
    }

    fn search(&self, q: &str) -> usize {
        let words: Vec<String> = q
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty() && !STOP_WORDS.contains(w))
            .map(String::from)
            .collect();
        let last = words.len().saturating_sub(1);
        let mut reference = 0.0;
        let mut vocab = self
            .conn
            .prepare_cached(
                "SELECT ifnull(max(doc), 0) FROM bench_fts_vocab WHERE term >= ?1 AND term < ?1 || 'zzzz'",
            )
            .unwrap();
        let mut terms = Vec::new();
        for (i, w) in words.iter().enumerate() {
            let stem: String = w.chars().take(5).collect();
            let df: f64 = vocab.query_row([&stem], |r| r.get(0)).unwrap();
            reference += (1.0 + (self.docs - df + 0.5) / (df + 0.5)).ln();
            terms.push(if i == last {
                format!("\"{w}\"*")
            } else {
                format!("\"{w}\"")
            });
        }
        let query = terms.join(" OR ");
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT l.id, l.pattern, l.context, l.applies_to, l.quality_score, l.verified,
                   0.5 * (-bm25(bench_fts)) / ((-bm25(bench_fts)) + ?3)
                   + 0.3 * (CASE WHEN bm25(bench_fts, 1.0, 0.0, 0.0) < 0 THEN 1.0
                                 WHEN bm25(bench_fts, 0.0, 1.0, 0.0) < 0 THEN 0.6 ELSE 0.3 END)
                   + 0.2 * l.quality_score / 100.0 AS score
                 FROM bench_fts JOIN learnings l ON l.seq = bench_fts.rowid
                 WHERE bench_fts MATCH ?1 AND l.project_id = ?2
                 ORDER BY score DESC LIMIT ?4",
            )
            .unwrap();
        let rows = st
            .query_map(params![query, self.project, reference, LIMIT as i64], |r| {
                r.get::<_, String>(0)
            })
            .unwrap();
        rows.count()
    }
}

fn percentiles(mut xs: Vec<Duration>) -> (Duration, Duration) {
    xs.sort();
    let at = |p: f64| xs[((xs.len() as f64 - 1.0) * p).round() as usize];
    (at(0.50), at(0.99))
}

/// The corpora of `LEARNINGS_BENCH_CORPORA` (default both, `hard,zipf`).
fn corpora() -> Vec<Corpus> {
    let list = std::env::var("LEARNINGS_BENCH_CORPORA").unwrap_or_else(|_| "hard,zipf".into());
    list.split(',')
        .map(|c| {
            Corpus::parse(c)
                .unwrap_or_else(|| panic!("LEARNINGS_BENCH_CORPORA: {c:?} (use hard, zipf)"))
        })
        .collect()
}

/// The corpora to build: every size of `var` (or `default`) in every corpus.
fn specs(var: &str, default: &str) -> Vec<Spec> {
    let list = std::env::var(var).unwrap_or_else(|_| default.to_string());
    corpora()
        .into_iter()
        .flat_map(|corpus| {
            list.split(',')
                .filter_map(move |s| Spec::parse(s, corpus))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// One corpus's figures, for the summary at the end.
struct Summary {
    label: String,
    in_project: usize,
    lexical: (Duration, Duration),
    fts5: Duration,
    never_seen: Duration,
    repeated: Duration,
    embedding: Duration,
    /// Strict recall@10 of the graph; `None` for an exact scan (recall 1 by definition).
    recall: Option<f64>,
    /// Reading the vectors and building the graph.
    semantic_setup: Duration,
    /// The machine's load average (1 minute) when the timing loops started.
    load: f64,
}

fn bench(c: &mut Criterion) {
    if std::env::var_os("CAIRN_BENCH_BASELINE").is_some() {
        compare_binaries(&specs("LEARNINGS_BENCH_BASELINE_SIZES", "10000x1"));
    }
    let mut summaries = Vec::new();
    for spec in specs("LEARNINGS_BENCH_SIZES", "10000,100000,100000x1") {
        let qs = queries(spec.corpus);
        let db = corpus(spec);
        let label = spec.label();
        let project = spec.project();
        let search = |cairn: &Cairn, q: &str, ranking: Ranking| {
            search_in(cairn, &project, q, ranking, LIMIT).count
        };

        // The semantic half's memory and set-up: the vectors read, and the graph built
        // where the searched project has one.
        let cairn = Cairn::open(&db).unwrap();
        let rss = rss_bytes();
        let t = Instant::now();
        let points = cairn.wait_for_learning_graphs().unwrap();
        let semantic_setup = t.elapsed();
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        println!(
            "[{label}] {} learnings in {project}; vectors read{}: {:.1} s, resident memory +{:.0} MiB",
            spec.in_project(),
            if points > 0 {
                format!(" and a graph of {points} points built")
            } else {
                format!(" (exact scan: under GRAPH_MIN {GRAPH_MIN})")
            },
            semantic_setup.as_secs_f64(),
            mib(rss_bytes().saturating_sub(rss)),
        );

        // Search: tantivy path (the real API) and the FTS5 baseline. Every lexical search
        // timed is one the view has not answered before (`lexical_round`): criterion's in
        // rounds 25-49, the timing loop's in rounds 1-24.
        let fts = Fts5::open(&db, &project);
        lexical_work(&cairn, &project, &label, &qs);
        for q in &qs {
            fts.search(q);
        }
        let mut i = 0;
        c.bench_function(&format!("learnings/search/tantivy/{label}"), |b| {
            b.iter(|| {
                i += 1;
                let round = 25 + (i / qs.len()) % 25;
                lexical_round(&cairn, &project, &qs[i % qs.len()], round as u8)
            })
        });
        let mut j = 0;
        let mut g = c.benchmark_group("learnings/search/fts5");
        g.sample_size(10);
        g.bench_function(&label, |b| {
            b.iter(|| {
                j += 1;
                fts.search(&qs[j % qs.len()])
            })
        });
        g.finish();

        let load = binaries::load_average();
        let mut tantivy_times = Vec::new();
        let mut hits = 0;
        for round in 1..=24 {
            for q in &qs {
                let t = Instant::now();
                hits += lexical_round(&cairn, &project, q, round);
                tantivy_times.push(t.elapsed());
            }
        }
        // Hybrid: the real default search, query embedding included; apart, queries never
        // seen before (each text new: the model runs every time, as for most of what agents
        // ask) and repeated ones (the same forty again: the query-vector cache answers).
        let hybrid = |texts: &[String]| {
            let times = texts
                .iter()
                .map(|q| {
                    let t = Instant::now();
                    search(&cairn, q, Ranking::Blend);
                    t.elapsed()
                })
                .collect();
            percentiles(times)
        };
        let never_seen: Vec<String> = (0..3)
            .flat_map(|round| qs.iter().map(move |q| format!("{q} (case {round})")))
            .collect();
        let (np50, np99) = hybrid(&never_seen);
        hybrid(&qs);
        let repeated: Vec<String> = (0..3).flat_map(|_| qs.iter().cloned()).collect();
        let (rp50, rp99) = hybrid(&repeated);
        let embedder = ModelEmbedder::default();
        embedder.load().unwrap();
        let mut embed_times = Vec::new();
        for q in &never_seen {
            let t = Instant::now();
            embedder.embed_query(q).unwrap();
            embed_times.push(t.elapsed());
        }
        let (ep50, _) = percentiles(embed_times);
        let recall = (points > 0).then(|| recall(&cairn, &embedder, &db, &project, &label, &qs));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "[{label}] hybrid search p50/p99: never-seen queries {:.3}/{:.3} ms, repeated \
             queries {:.3}/{:.3} ms (query embedding alone p50 {:.3} ms)",
            ms(np50),
            ms(np99),
            ms(rp50),
            ms(rp99),
            ms(ep50)
        );
        let mut fts_times = Vec::new();
        for _ in 0..3 {
            for q in &qs {
                let t = Instant::now();
                fts.search(q);
                fts_times.push(t.elapsed());
            }
        }
        let (tp50, tp99) = percentiles(tantivy_times);
        let (fp50, fp99) = percentiles(fts_times);
        println!(
            "[{label}] search p50/p99: tantivy {:.3}/{:.3} ms, FTS5 {:.3}/{:.3} ms; \
             p50 ratio {:.1}x (avg {:.1} hits/query); load average {load:.1}",
            tp50.as_secs_f64() * 1e3,
            tp99.as_secs_f64() * 1e3,
            fp50.as_secs_f64() * 1e3,
            fp99.as_secs_f64() * 1e3,
            fp50.as_secs_f64() / tp50.as_secs_f64(),
            hits as f64 / (24 * qs.len()) as f64
        );
        summaries.push(Summary {
            label: label.clone(),
            in_project: spec.in_project(),
            lexical: (tp50, tp99),
            fts5: fp50,
            never_seen: np50,
            repeated: rp50,
            embedding: ep50,
            recall,
            semantic_setup,
            load,
        });
        drop(cairn);
        drop(fts);

        if std::env::var("LEARNINGS_BENCH_ADD").as_deref() != Ok("0") {
            add_and_rebuild(c, spec, &db, &label, &project);
        }
    }
    summarize(&summaries);
}

/// Add (criterion) and a full rebuild, on a scratch copy of the corpus (as large as the
/// corpus: `LEARNINGS_BENCH_ADD=0` skips both).
fn add_and_rebuild(c: &mut Criterion, spec: Spec, db: &Path, label: &str, project: &str) {
    let (_tmp, copy) = scratch_copy(db);
    let cairn = Cairn::open(&copy).unwrap();
    let issue = cairn
        .create_issue(&NewIssue {
            project: project.to_string(),
            title: "bench adds".into(),
            ..Default::default()
        })
        .unwrap()
        .id;
    let mut generator = Generator::new(spec.corpus, 7);
    let mut k = 0u64;
    let mut g = c.benchmark_group("learnings/add");
    g.sample_size(20);
    g.bench_function(label, |b| {
        b.iter(|| {
            k += 1;
            let mut gen_ = generator.next();
            gen_.pattern = format!("{} (bench add {k})", gen_.pattern);
            cairn.add_learning(&bench_learning(&issue, gen_)).unwrap()
        })
    });
    g.finish();
    let t = Instant::now();
    let r = cairn.reindex_learnings().unwrap();
    println!(
        "[{label}] full rebuild of {} learnings: {:.2} s",
        r.learnings,
        t.elapsed().as_secs_f64()
    );
}

/// Every corpus on one line, with the goals of issue 59: lexical p50 below 2 ms, hybrid
/// p50 below 10 ms with a never-seen query, recall@10 of the semantic half 0.98 or more.
fn summarize(all: &[Summary]) {
    if all.is_empty() {
        return;
    }
    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1e3);
    println!(
        "\n| corpus | learnings in the project | lexical p50 / p99 ms (goal < 2) | FTS5 p50 ms \
         | hybrid p50 ms, never-seen (goal < 10) | hybrid p50 ms, repeated | query embedding \
         p50 ms | recall@10 (goal >= 0.98) | vectors read + graph s | load average |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for s in all {
        println!(
            "| {} | {} | {} / {} | {} | {} | {} | {} | {} | {:.1} | {:.1} |",
            s.label,
            s.in_project,
            ms(s.lexical.0),
            ms(s.lexical.1),
            ms(s.fts5),
            ms(s.never_seen),
            ms(s.repeated),
            ms(s.embedding),
            s.recall
                .map_or("1 (exact scan)".to_string(), |r| format!("{r:.3}")),
            s.semantic_setup.as_secs_f64(),
            s.load
        );
    }
}

/// The work of each query's lexical-only search, never asked before on this view
/// (`cairn::metrics::cost`: postings the union may walk, documents scored), and its
/// answer against BM25's exact one. Each run writes its answers (the ids of the top
/// `LIMIT`) to `target/bench-corpus/<label>-lexical-<budget>.json`, where `<budget>` is
/// `CAIRN_LEARNINGS_POSTINGS_BUDGET` (`default` when unset); a run under a budget reports
/// recall@10 and @`LIMIT` against the file of a run with `CAIRN_LEARNINGS_POSTINGS_BUDGET=0`
/// (no budget: every search exact), when there is one.
fn lexical_work(cairn: &Cairn, project: &str, label: &str, qs: &[String]) {
    let budget = std::env::var("CAIRN_LEARNINGS_POSTINGS_BUDGET").unwrap_or("default".into());
    let file = |b: &str| {
        target_dir()
            .join("bench-corpus")
            .join(format!("{label}-lexical-{b}.json"))
    };
    let (mut postings, mut scored) = (Vec::new(), Vec::new());
    let mut answers: Vec<Vec<String>> = Vec::new();
    for q in qs {
        let (results, work) = measure(|| search_in(cairn, project, q, Ranking::Lexical, LIMIT));
        postings.push(work.postings_read);
        scored.push(work.documents_scored);
        answers.push(results.learnings().map(|l| l.id.clone()).collect());
    }
    let median = |xs: &mut Vec<u64>| {
        xs.sort_unstable();
        (xs[xs.len() / 2], xs[xs.len() - 1])
    };
    let ((pm, px), (sm, sx)) = (median(&mut postings), median(&mut scored));
    println!(
        "[{label}] lexical work per never-seen query (budget {budget}): postings read median \
         {pm}, max {px}; documents scored median {sm}, max {sx}"
    );
    std::fs::write(file(&budget), serde_json::to_string(&answers).unwrap()).unwrap();
    let exact: Option<Vec<Vec<String>>> = std::fs::read(file("0"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if let Some(exact) = exact.filter(|e| budget != "0" && e.len() == answers.len()) {
        for k in [10, LIMIT] {
            let (mut found, mut wanted) = (0, 0);
            for (got, want) in answers.iter().zip(&exact) {
                let want: HashSet<&String> = want.iter().take(k).collect();
                wanted += want.len();
                found += got.iter().take(k).filter(|id| want.contains(id)).count();
            }
            println!(
                "[{label}] lexical recall@{k} against BM25's exact answer: {:.3} ({found} of {wanted})",
                found as f64 / wanted.max(1) as f64
            );
        }
    }
}

/// Recall@10 of the dense search through the graph against an exact scan of the same
/// vectors, on never-seen query texts (embedded by the model, as a search embeds them);
/// the strict figure.
fn recall(
    cairn: &Cairn,
    embedder: &ModelEmbedder,
    db: &Path,
    project: &str,
    label: &str,
    queries: &[String],
) -> f64 {
    let vectors = project_vectors(db, project);
    let by_id: HashMap<&str, &[f32]> = vectors
        .iter()
        .map(|(id, v)| (id.as_str(), v.as_slice()))
        .collect();
    let (mut found, mut wanted, mut within) = (0, 0, 0);
    let mut times = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        let text = format!("{q} (recall {i})");
        let v = embedder.embed_query(&text).unwrap();
        let mut exact: Vec<(&str, f32)> = vectors
            .iter()
            .map(|(id, x)| (id.as_str(), cairn::embed::dot(&v, x)))
            .collect();
        exact.sort_by(|a, b| b.1.total_cmp(&a.1));
        search_in(cairn, project, &text, Ranking::Dense, 10);
        let t = Instant::now();
        let got = search_in(cairn, project, &text, Ranking::Dense, 10);
        times.push(t.elapsed());
        let listed: HashSet<&str> = got.learnings().map(|l| l.id.as_str()).collect();
        wanted += 10;
        found += exact[..10]
            .iter()
            .filter(|(id, _)| listed.contains(id))
            .count();
        // ann-benchmarks' recall: a neighbour counts when it is as near as the tenth
        // exact one (within 1e-3), so that ties at the tenth place do not count as misses.
        let mut scores: Vec<f32> = listed
            .iter()
            .map(|id| cairn::embed::dot(&v, by_id[id]))
            .collect();
        scores.sort_by(|a, b| b.total_cmp(a));
        within += scores
            .iter()
            .take(10)
            .filter(|s| **s >= exact[9].1 - 1e-3)
            .count();
    }
    let (p50, _) = percentiles(times);
    let strict = found as f64 / wanted as f64;
    println!(
        "[{label}] graph recall@10 against the exact scan: {strict:.3} ({found} of {wanted}); \
         within the tenth exact score (ann-benchmarks): {:.3}; dense-only search p50 {:.3} ms \
         (query vector cached)",
        within as f64 / wanted as f64,
        p50.as_secs_f64() * 1e3
    );
    strict
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);

/// The binaries of `CAIRN_BENCH_BASELINE` beside this build's (`benches/binaries.rs`):
/// each corpus of `specs` seeded by each binary into its own database (cached under
/// `target/bench-corpus/binaries/`), then the hybrid search through each binary's `cairn
/// serve` (stdio, the searched project's issue), the binaries in turn, beside the model
/// alone on the same never-seen texts.
fn compare_binaries(specs: &[Spec]) {
    let bins = binaries::binaries();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for spec in specs {
        let label = spec.label();
        let dbs: Vec<(PathBuf, String)> = bins
            .iter()
            .map(|b| rt.block_on(seed_by(b, *spec)))
            .collect();
        let qs = queries(spec.corpus);
        let rounds = 3;
        // times[binary]: (never-seen, repeated) latencies over every round.
        let mut times: Vec<(Vec<Duration>, Vec<Duration>)> =
            bins.iter().map(|_| Default::default()).collect();
        let mut loads = Vec::new();
        let mut never_seen_texts = Vec::new();
        for round in 0..rounds {
            for j in 0..bins.len() {
                let b = (round + j) % bins.len();
                let (db, issue) = &dbs[b];
                loads.push(binaries::load_average());
                let texts: Vec<String> = qs
                    .iter()
                    .map(|q| format!("{q} (release case {round})"))
                    .collect();
                let (never, repeated) = rt.block_on(searches(&bins[b], db, issue, &qs, &texts));
                times[b].0.extend(never);
                times[b].1.extend(repeated);
                if j == 0 {
                    never_seen_texts.extend(texts);
                }
            }
        }
        let model = |threads: usize, spin: &str| -> f64 {
            let out = reference::run(
                &never_seen_texts,
                &["--single".into(), threads.to_string(), spin.into()],
            );
            let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
            v["p50_ms"].as_f64().unwrap()
        };
        let model_p50 = model(1, "off").min(model(2, "default"));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let p50s: Vec<(f64, f64)> = times
            .into_iter()
            .map(|(never, repeated)| (ms(percentiles(never).0), ms(percentiles(repeated).0)))
            .collect();
        println!(
            "\n[{label}] the hybrid search through `cairn serve` (stdio, {rounds} rounds of {} \
             never-seen and {} repeated queries, the binaries in turn; load average {}-{}); \
             model alone: raw ONNX Runtime on the same never-seen texts, best of 1 and 2 threads\n",
            qs.len(),
            qs.len(),
            loads.iter().copied().fold(f64::INFINITY, f64::min),
            loads.iter().copied().fold(0.0, f64::max),
        );
        let mut head = "| figure |".to_string();
        for b in &bins {
            head += &format!(" {} |", b.label);
        }
        head += " model alone |";
        for b in &bins[1..] {
            head += &format!(" {} / {} |", bins[0].label, b.label);
        }
        println!("{head}\n{}|", "|---".repeat(1 + 2 * bins.len()));
        for (figure, of, model) in [
            (
                "p50 ms, never-seen queries",
                (|p: &(f64, f64)| p.0) as fn(&(f64, f64)) -> f64,
                format!("{model_p50:.2}"),
            ),
            ("p50 ms, repeated queries", |p| p.1, "-".to_string()),
        ] {
            let mut line = format!("| {figure} |");
            for p in &p50s {
                line += &format!(" {:.2} |", of(p));
            }
            line += &format!(" {model} |");
            for p in &p50s[1..] {
                line += &format!(" {:.2}x |", of(&p50s[0]) / of(p));
            }
            println!("{line}");
        }
    }
}

/// The learnings of `spec`, in the order and projects of the bench's own corpus, seeded
/// into a database of `bin` through its `add_learning` (one issue per project, no model:
/// the vectors are the corpus's word sums, written as [`corpus`] writes them); the
/// database and the searched project's issue. Cached by the binary's size and time.
async fn seed_by(bin: &binaries::Binary, spec: Spec) -> (PathBuf, String) {
    let meta = std::fs::metadata(&bin.path).unwrap();
    let stamp = meta
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let name = format!(
        "{}-{}x{}-v{}",
        spec.corpus.name(),
        spec.n,
        spec.projects,
        match spec.corpus {
            Corpus::Hard => CORPUS_VERSION,
            Corpus::Zipf => ZIPF_VERSION,
        }
    );
    // A directory per binary and corpus: the database, its indexes wherever this binary
    // keeps them, and the seeded issue once complete.
    let dir = target_dir()
        .join("bench-corpus/binaries")
        .join(format!(
            "{}-{}-{stamp}",
            bin.label.replace(['/', ' '], "_"),
            meta.len()
        ))
        .join(name);
    let db = dir.join("cairn.db");
    let done = dir.join("done");
    let project = spec.project();
    if let Ok(issue) = std::fs::read_to_string(&done) {
        return (db, issue);
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let t = Instant::now();
    let mut generator = Generator::new(spec.corpus, 42);
    let mut seen = HashSet::new();
    let mut by_project: Vec<Vec<serde_json::Value>> = vec![Vec::new(); spec.projects];
    for i in 0..spec.n {
        let p = (i / PER_ISSUE) % spec.projects;
        let g = loop {
            let g = generator.next();
            if seen.insert((p, norm(&g.pattern))) {
                break g;
            }
        };
        let mut args = serde_json::json!({"pattern": g.pattern, "applies_to": g.applies_to});
        if let Some(c) = g.context {
            args["context"] = c.into();
        }
        by_project[p].push(args);
    }
    let no_model = dir.join("no-model");
    let no_model = no_model.to_string_lossy();
    let mut searched = String::new();
    for (p, learnings) in by_project.into_iter().enumerate() {
        let slug = format!("proj{p}");
        bin.cli(
            &db,
            &["project", "create", "--slug", &slug, "--name", &slug],
        );
        let args = ["issue", "create", "--project", &slug, "--title", "corpus"];
        let issue = bin.cli(&db, &args).trim().to_string();
        let (c, _) = bin
            .stdio(&db, &issue, &[], &[("CAIRN_MODEL_DIR", &no_model)])
            .await;
        binaries::add_learnings(&c, learnings, 8).await;
        let _ = c.cancel().await;
        if slug == project {
            searched = issue;
        }
    }
    let c = Connection::open(&db).unwrap();
    word_vectors(&c, spec.corpus);
    drop(c);
    std::fs::write(&done, &searched).unwrap();
    println!(
        "[{}] {} seeded {} learnings in {:.1} s",
        spec.label(),
        bin.label,
        spec.n,
        t.elapsed().as_secs_f64()
    );
    (db, searched)
}

/// Through one `cairn serve` of `bin` bound to `issue`: the repeated queries once to warm
/// the cache, then each never-seen text and each repeated query, timed one call at a
/// time.
async fn searches(
    bin: &binaries::Binary,
    db: &Path,
    issue: &str,
    repeated: &[String],
    never_seen: &[String],
) -> (Vec<Duration>, Vec<Duration>) {
    let (c, _) = bin.stdio(db, issue, &["--no-daemon"], &[]).await;
    let search = async |q: &str| {
        let args = serde_json::json!({"query": q, "limit": LIMIT});
        let t = Instant::now();
        assert!(binaries::call(&c, "search_learnings", args).await, "{q}");
        t.elapsed()
    };
    for q in repeated {
        search(q).await;
    }
    let mut never = Vec::new();
    for q in never_seen {
        never.push(search(q).await);
    }
    let mut again = Vec::new();
    for q in repeated {
        again.push(search(q).await);
    }
    let _ = c.cancel().await;
    (never, again)
}
