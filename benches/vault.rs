//! Knowledge Vault benchmarks: `cargo bench --bench vault`.
//!
//! Corpora (see `benches/corpus.rs` for the real chunks):
//! - **real vectors**: the first [`REAL`] distinct real Markdown chunks (samples/docs, then
//!   the Markdown of the crates in Cargo.lock from cargo's registry), embedded once with
//!   Cairn's embedder and cached in `target/bench-cache/real-<n>.f32` (little-endian f32).
//! - **10k / 100k**: the real vectors (10k is all real), plus synthetic neighbours for 100k: neighbour `j` is real
//!   vector `j mod n` plus gaussian noise (σ = [`NOISE`] per dimension, cosine ≈ 0.93 to
//!   its source), renormalised. Queries: 200 other noisy copies of real vectors
//!   (σ = [`NOISE`]), so each has true near neighbours among real and synthetic points.
//!   The 100k graph is built once and cached as a saved index in `target/bench-cache/`.
//!
//! Printed figures (stderr): recall@10 against exact search and p50 latency per `ef`,
//! exact-search p50, `vault_retrieve` p50 through MCP, a no-change reindex of 1,000
//! files, and `cairn serve` start to `tools/list` with a 100k-chunk vault. Criterion
//! times the HNSW and exact searches at 100k.
//!
//! **Reindex** (`cargo bench --bench vault -- reindex`, a few minutes): `cairn reindex`
//! against raw ONNX Runtime in its best configuration (Python `onnxruntime`, same model
//! files, max length 256, tokenized once, token-sorted batches of 32, same thread count;
//! ORT's default spinning and spinning off both measured), on short and on long
//! documents, interleaved rounds, chunks/s, CPU-seconds per chunk and padding ratio.
//! `CAIRN_BENCH_ROUNDS` (default 3) and `CAIRN_BENCH_CHUNKS` (default 320 per corpus)
//! scale it.
//!
//! **Formats** (`cargo bench --bench vault -- formats`, a few minutes): the same documents
//! written in every format the vault reads (`benches/format_corpus.rs`), reindexed in
//! rotating order; time per chunk against Markdown's. `CAIRN_BENCH_ROUNDS` (3) and
//! `CAIRN_BENCH_DOCS` (120 documents of 4 sections) scale it.
//!
//! Filters: `reindex`, `formats`, `vault_search`, `vault_pipeline`.

#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use cairn::Cairn;
use cairn::base::rng::SplitMix64;
use cairn::embed::hnsw::{IndexManifest, VectorIndex, brute_force_search};
use cairn::embed::{DIMENSION, Embed, EmbedderConfig, MODEL_ID, ModelEmbedder, Spin};
use cairn::vault::formats::FileFilter;
use cairn::vault::live::SEARCH_EF;
use cairn::vault::reindex::ReindexOptions;
use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};

mod corpus;
mod format_corpus;
mod reference;

/// Real chunks embedded for the search corpora.
const REAL: usize = 10_000;
/// Per-dimension noise of synthetic neighbours and queries.
const NOISE: f32 = 0.02;
const QUERIES: usize = 200;
const BIG: usize = 100_000;

fn cache_dir() -> PathBuf {
    let d = corpus::repo().join("target/bench-cache");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The real vectors, embedded once and cached.
fn real_vectors() -> Vec<Vec<f32>> {
    let path = cache_dir().join(format!("real-{REAL}.f32"));
    if let Ok(bytes) = std::fs::read(&path) {
        return bytes
            .chunks_exact(DIMENSION * 4)
            .map(|v| {
                v.chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect()
            })
            .collect();
    }
    let texts = corpus::real_chunks(REAL);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let started = Instant::now();
    let vectors = ModelEmbedder::default().embed_batch(&refs).unwrap();
    eprintln!(
        "embedded {} real chunks in {:.1} s (cached in {})",
        vectors.len(),
        started.elapsed().as_secs_f64(),
        path.display()
    );
    let bytes: Vec<u8> = vectors
        .iter()
        .flatten()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    std::fs::write(&path, bytes).unwrap();
    vectors
}

/// A synthetic neighbour of `of`: `of` plus gaussian noise, renormalised.
fn neighbour(rng: &mut SplitMix64, of: &[f32]) -> Vec<f32> {
    let mut v: Vec<f32> = of.iter().map(|x| x + NOISE * rng.gauss()).collect();
    cairn::embed::l2_normalize(&mut v);
    v
}

/// `n` vectors: the real ones, then synthetic neighbours.
fn corpus_of(real: &[Vec<f32>], n: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|j| {
            if j < real.len() {
                real[j].clone()
            } else {
                neighbour(&mut rng, &real[j % real.len()])
            }
        })
        .collect()
}

fn queries(real: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let mut rng = SplitMix64::new(0xC0FFEE);
    (0..QUERIES)
        .map(|i| neighbour(&mut rng, &real[(i * 7919) % real.len()]))
        .collect()
}

fn manifest() -> IndexManifest {
    IndexManifest::new(MODEL_ID, DIMENSION, cairn::vault::chunk::CHUNKER_VERSION, 0)
}

/// The graph over `data` (ids 1..=n), built once and cached as a saved index.
fn graph(data: &[Vec<f32>], name: &str) -> VectorIndex {
    let dir = cache_dir().join(name);
    if let Ok(Some((index, m))) = VectorIndex::load(&dir)
        && m.points == data.len()
    {
        return index;
    }
    let index = VectorIndex::new(DIMENSION, data.len());
    let items: Vec<(u64, &[f32])> = data
        .iter()
        .enumerate()
        .map(|(i, v)| (i as u64 + 1, v.as_slice()))
        .collect();
    let started = Instant::now();
    for batch in items.chunks(10_000) {
        index.insert_batch(batch).unwrap();
    }
    eprintln!(
        "built the {name} graph ({} points) in {:.1} s",
        data.len(),
        started.elapsed().as_secs_f64()
    );
    index.save(&dir, &manifest()).unwrap();
    index
}

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn recall_sweep(name: &str, data: &[Vec<f32>], index: &VectorIndex, qs: &[Vec<f32>]) {
    let items: Vec<(u64, &[f32])> = data
        .iter()
        .enumerate()
        .map(|(i, v)| (i as u64 + 1, v.as_slice()))
        .collect();
    let mut exact_times = Vec::new();
    let truth: Vec<Vec<u64>> = qs
        .iter()
        .map(|q| {
            let t = Instant::now();
            let r = brute_force_search(&items, q, 10);
            exact_times.push(t.elapsed());
            r.into_iter().map(|(id, _)| id).collect()
        })
        .collect();
    let exact = p50(exact_times);
    eprintln!(
        "[{name}] exact search p50 {:.3} ms",
        exact.as_secs_f64() * 1e3
    );
    for ef in [16, 32, 64, SEARCH_EF, 200, 400] {
        let mut times = Vec::new();
        let mut found = 0;
        for (q, t) in qs.iter().zip(&truth) {
            let s = Instant::now();
            let r = index.search(q, 10, ef, |_| true).unwrap();
            times.push(s.elapsed());
            found += r.iter().filter(|(id, _)| t.contains(id)).count();
        }
        let p = p50(times);
        eprintln!(
            "[{name}] ef {ef:>3}: recall@10 {:.4}, p50 {:.3} ms, {:.1}x faster than exact",
            found as f64 / (10 * qs.len()) as f64,
            p.as_secs_f64() * 1e3,
            exact.as_secs_f64() / p.as_secs_f64()
        );
    }
}

fn search_benches(c: &mut Criterion) {
    if !wanted("vault_search") {
        return;
    }
    let real = real_vectors();
    let qs = queries(&real);
    let ten = corpus_of(&real, 10_000, 10);
    let g10 = graph(&ten, "hnsw-10k");
    recall_sweep("10k", &ten, &g10, &qs);
    let big = corpus_of(&real, BIG, 100);
    let g100 = graph(&big, "hnsw-100k");
    recall_sweep("100k", &big, &g100, &qs);

    let items: Vec<(u64, &[f32])> = big
        .iter()
        .enumerate()
        .map(|(i, v)| (i as u64 + 1, v.as_slice()))
        .collect();
    let mut g = c.benchmark_group("vault_search_100k");
    g.sample_size(20).measurement_time(Duration::from_secs(5));
    let mut i = 0;
    g.bench_function("hnsw_ef100_top10", |b| {
        b.iter(|| {
            i = (i + 1) % qs.len();
            g100.search(&qs[i], 10, SEARCH_EF, |_| true).unwrap()
        })
    });
    g.bench_function("exact_top10", |b| {
        b.iter(|| {
            i = (i + 1) % qs.len();
            brute_force_search(&items, &qs[i], 10)
        })
    });
    g.finish();
    serve_start_with_big_vault(&big);
}

/// A database whose vault holds `data` as chunks (one document per 100), with the graph
/// saved where `cairn serve` would find it.
fn big_vault_db(data: &[Vec<f32>], dir: &Path) -> PathBuf {
    let db = dir.join("cairn.db");
    Cairn::open(&db).unwrap();
    let mut c = rusqlite::Connection::open(&db).unwrap();
    let tx = c.transaction().unwrap();
    for (i, v) in data.iter().enumerate() {
        if i % 100 == 0 {
            tx.execute(
                "INSERT INTO vault_documents(root_key, path, collection, content_hash,
                 chunker_version, embed_model, indexed_at)
                 VALUES ('dir:/bench', ?1, 'bench', 'h', ?2, ?3, 'now')",
                rusqlite::params![format!("doc{}.md", i / 100), 1, MODEL_ID],
            )
            .unwrap();
        }
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        tx.execute(
            "INSERT INTO vault_chunks(id, document_id, ordinal, text, heading_path, line_start,
             line_end, content_hash, embedding)
             VALUES (?1, ?2, ?3, 'chunk', '[]', 1, 1, 'h', ?4)",
            rusqlite::params![i as i64 + 1, (i / 100) as i64 + 1, (i % 100) as i64, bytes],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    db
}

fn serve_start_with_big_vault(big: &[Vec<f32>]) {
    let tmp = tempfile::tempdir().unwrap();
    let db = big_vault_db(big, tmp.path());
    let mut m = manifest();
    m.watermark = big.len() as u64;
    let index = VectorIndex::load(&cache_dir().join("hnsw-100k"))
        .unwrap()
        .unwrap()
        .0;
    index
        .save(&PathBuf::from(format!("{}.index/vault", db.display())), &m)
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut times = Vec::new();
    for _ in 0..10 {
        times.push(rt.block_on(async {
            let started = Instant::now();
            let client = connect(&db, &[]).await;
            client.list_all_tools().await.unwrap();
            let t = started.elapsed();
            let _ = client.cancel().await;
            t
        }));
    }
    eprintln!(
        "cairn serve start to tools/list with a {}-chunk vault: p50 {:.1} ms",
        big.len(),
        p50(times).as_secs_f64() * 1e3
    );
}

async fn connect(db: &Path, flags: &[&str]) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    let transport = TokioChildProcess::builder(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_cairn")).configure(|c| {
            c.arg("--db").arg(db).arg("serve").args(&flags);
            c.env("CAIRN_LOG", "warn");
        }),
    )
    .stderr(Stdio::null())
    .spawn()
    .unwrap()
    .0;
    ().serve(transport).await.unwrap()
}

/// One measured embedding run over a corpus.
#[derive(Debug, Clone, Copy)]
struct Run {
    chunks: usize,
    seconds: f64,
    cpu_seconds: f64,
    tokens: u64,
    padding: u64,
}

impl Run {
    fn chunks_per_s(&self) -> f64 {
        self.chunks as f64 / self.seconds
    }
    fn cpu_per_chunk(&self) -> f64 {
        self.cpu_seconds / self.chunks as f64
    }
    fn padding_ratio(&self) -> f64 {
        self.padding as f64 / self.tokens.max(1) as f64
    }
}

/// Raw ONNX Runtime (Python, same model files): the reference script's `--time` mode
/// (tokenized once, token-sorted batches of 32, max length 256), model load excluded.
fn raw_ort(texts: &[String], spin: &str) -> Run {
    let out = reference::run(
        texts,
        &["--time".into(), threads().to_string(), spin.into()],
    );
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    Run {
        chunks: texts.len(),
        seconds: v["seconds"].as_f64().unwrap(),
        cpu_seconds: v["cpu_seconds"].as_f64().unwrap(),
        tokens: v["tokens"].as_u64().unwrap(),
        padding: v["padding"].as_u64().unwrap(),
    }
}

/// CPU seconds (user + system, all threads) this process has used.
fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0 // USER_HZ
}

/// `cairn reindex` of `docs` into a fresh database, model load excluded (a one-file
/// reindex with the same settings loads it first). Whole reindex: read, chunk, embed,
/// commit, index; source code too with `code` (`--code`).
fn cairn_reindex(docs: &Path, spin: Spin, code: bool) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let warm = tmp.path().join("warm");
    std::fs::create_dir_all(&warm).unwrap();
    std::fs::write(warm.join("w.md"), "# Warm up\n\nLoads the model.\n").unwrap();
    let cairn = Cairn::open(&tmp.path().join("cairn.db")).unwrap();
    let opts = |dir: &Path| ReindexOptions {
        dir: dir.to_path_buf(),
        threads: Some(threads()),
        spin: Some(spin),
        files: FileFilter {
            code,
            ..Default::default()
        },
        ..Default::default()
    };
    cairn.vault_reindex(&opts(&warm), &|_| {}).unwrap();
    let cpu = process_cpu_seconds();
    let s = cairn.vault_reindex(&opts(docs), &|_| {}).unwrap();
    assert_eq!(
        s.files_changed,
        s.files_seen,
        "a file of {} was not indexed",
        docs.display()
    );
    Run {
        chunks: s.chunks_embedded,
        seconds: s.seconds,
        cpu_seconds: process_cpu_seconds() - cpu,
        tokens: s.tokens_embedded,
        padding: s.padding_tokens,
    }
}

/// Copy corpus Markdown files whose chunks average short (< 300 bytes) into `dir` until
/// they hold at least `chunks` chunks; their chunk texts.
fn short_corpus(dir: &Path, chunks: usize) -> Vec<String> {
    let mut texts = Vec::new();
    for (i, f) in corpus::markdown_files().into_iter().enumerate() {
        let bytes = std::fs::read(&f).unwrap();
        let file_texts = chunk_texts(&bytes);
        if file_texts.is_empty()
            || file_texts.iter().map(String::len).sum::<usize>() / file_texts.len() >= 300
        {
            continue;
        }
        texts.extend(file_texts);
        std::fs::write(dir.join(format!("f{i:05}.md")), bytes).unwrap();
        if texts.len() >= chunks {
            break;
        }
    }
    texts
}

/// Long documents: the corpus holds few files whose chunks are long, so each corpus
/// file's prose paragraphs (outside code fences, at least 80 bytes) are regrouped under
/// headings into sections just under the chunker's budget, so that each section is one
/// chunk near the cap (abstract-like chunks of 150-200 tokens). Written to `dir` until
/// they hold at least `chunks` chunks; their chunk texts.
fn long_corpus(dir: &Path, chunks: usize) -> Vec<String> {
    use cairn::vault::chunk::{TOKEN_BUDGET, approx_tokens};
    let mut texts = Vec::new();
    for (i, f) in corpus::markdown_files().into_iter().enumerate() {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        let mut paragraphs = Vec::new();
        let (mut fence, mut current) = (false, String::new());
        for line in text.lines() {
            let t = line.trim_start();
            if t.starts_with("```") || t.starts_with("~~~") {
                fence = !fence;
                continue;
            }
            if fence || t.is_empty() || t.starts_with(['#', '|', '<', '!', '[', '>']) {
                if current.len() >= 80 {
                    paragraphs.push(std::mem::take(&mut current));
                }
                current.clear();
                continue;
            }
            current.push_str(t);
            current.push(' ');
        }
        let mut doc = String::from("# Notes\n");
        let mut section = String::new();
        let mut parts = 0;
        let budget = TOKEN_BUDGET * 9 / 10;
        for p in paragraphs {
            if !section.is_empty() && approx_tokens(&section) + approx_tokens(&p) > budget {
                parts += 1;
                doc.push_str(&format!("\n## Part {parts}\n\n{section}"));
                section.clear();
            }
            section.push_str(&p);
            section.push_str("\n\n");
        }
        if parts == 0 {
            continue;
        }
        texts.extend(chunk_texts(doc.as_bytes()));
        std::fs::write(dir.join(format!("f{i:05}.md")), doc).unwrap();
        if texts.len() >= chunks {
            break;
        }
    }
    texts
}

/// The texts the model sees for a Markdown file's chunks.
fn chunk_texts(bytes: &[u8]) -> Vec<String> {
    cairn::vault::chunk::chunk_markdown(bytes)
        .chunks
        .iter()
        .map(|c| c.embedding_text())
        .collect()
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A measured configuration: its label and one run.
type Config<'a> = (&'a str, Box<dyn Fn() -> Run + 'a>);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `cairn reindex` against the best raw ONNX Runtime configuration, on short and on long
/// documents: per round, raw with ORT's default (spinning) and with spinning off, and
/// Cairn with spinning on and off, interleaved (the order rotates each round) so a
/// shared machine's load hits all four alike. Medians over the rounds, and the ratios
/// taken per round (paired) before their median.
fn reindex_bench() {
    let rounds = env_usize("CAIRN_BENCH_ROUNDS", 3);
    let chunks = env_usize("CAIRN_BENCH_CHUNKS", 320);
    let tmp = tempfile::tempdir().unwrap();
    for (name, short) in [("short", true), ("long", false)] {
        let docs = tmp.path().join(name);
        std::fs::create_dir_all(&docs).unwrap();
        let texts = if short {
            short_corpus(&docs, chunks)
        } else {
            long_corpus(&docs, chunks)
        };
        assert!(!texts.is_empty(), "no {name} documents in the corpus");
        let configs: [Config<'_>; 4] = [
            (
                "raw ORT, default (spin)",
                Box::new(|| raw_ort(&texts, "default")),
            ),
            ("raw ORT, spin off", Box::new(|| raw_ort(&texts, "off"))),
            (
                "cairn reindex, spin on",
                Box::new(|| cairn_reindex(&docs, Spin::On, false)),
            ),
            (
                "cairn reindex, spin off",
                Box::new(|| cairn_reindex(&docs, Spin::Off, false)),
            ),
        ];
        let mut runs: Vec<Vec<Run>> = vec![Vec::new(); configs.len()];
        for round in 0..rounds {
            for k in 0..configs.len() {
                let c = (k + round) % configs.len();
                let r = (configs[c].1)();
                assert_eq!(r.chunks, texts.len(), "{}", configs[c].0);
                runs[c].push(r);
            }
        }
        eprintln!(
            "[reindex {name}] {} chunks ({} files, mean {:.0} bytes, {:.0} tokens), {} threads, \
             {rounds} rounds interleaved, medians:",
            texts.len(),
            std::fs::read_dir(&docs).unwrap().count(),
            texts.iter().map(String::len).sum::<usize>() as f64 / texts.len() as f64,
            runs[0][0].tokens as f64 / texts.len() as f64,
            threads()
        );
        let med = |c: usize, f: fn(&Run) -> f64| median(runs[c].iter().map(f).collect());
        for (c, (label, _)) in configs.iter().enumerate() {
            eprintln!(
                "[reindex {name}]   {label:<24} {:>6.1} chunks/s  {:.4} CPU-s/chunk  \
                 padding {:.1}%  (chunks/s per round: {})",
                med(c, Run::chunks_per_s),
                med(c, Run::cpu_per_chunk),
                100.0 * med(c, Run::padding_ratio),
                runs[c]
                    .iter()
                    .map(|r| format!("{:.1}", r.chunks_per_s()))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        // Paired per round (the four runs of a round share the machine's load): Cairn's
        // better configuration over raw's better one, and like against like.
        let paired = |f: &dyn Fn(usize) -> f64| median((0..rounds).map(f).collect());
        let cps = |c: usize, r: usize| runs[c][r].chunks_per_s();
        let best = paired(&|r| cps(2, r).max(cps(3, r)) / cps(0, r).max(cps(1, r)));
        let on = paired(&|r| cps(2, r) / cps(0, r));
        let off = paired(&|r| cps(3, r) / cps(1, r));
        let cpu = paired(&|r| runs[3][r].cpu_per_chunk() / runs[1][r].cpu_per_chunk());
        eprintln!(
            "[reindex {name}]   cairn / raw, median of per-round ratios: best {:.0}%, spin on vs \
             default {:.0}%, spin off vs off {:.0}%; CPU per chunk (spin off) {:.0}%",
            100.0 * best,
            100.0 * on,
            100.0 * off,
            100.0 * cpu,
        );
    }
}

/// Reindex throughput per format (issue 58): the same documents written in every format
/// ([`format_corpus`]), each format reindexed into a fresh database once per round, the
/// formats in an order that rotates each round (a shared machine's load hits all alike),
/// ONNX Runtime not spinning. Per format: chunks, model tokens per chunk, the median
/// over the rounds of wall and CPU time per chunk, and the median of the per-round ratios
/// of its time per chunk to Markdown's (paired: the runs of a round share the load).
fn formats_bench() {
    use format_corpus::FORMATS;
    let rounds = env_usize("CAIRN_BENCH_ROUNDS", 3);
    let docs = format_corpus::documents(env_usize("CAIRN_BENCH_DOCS", 120));
    let tmp = tempfile::tempdir().unwrap();
    let dirs = FORMATS.map(|(_, ext)| {
        let dir = tmp.path().join(ext);
        format_corpus::write(&docs, ext, &dir);
        dir
    });
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); FORMATS.len()];
    for round in 0..rounds {
        for k in 0..FORMATS.len() {
            let f = (k + round) % FORMATS.len();
            runs[f].push(cairn_reindex(&dirs[f], Spin::Off, FORMATS[f].1 == "rs"));
            eprintln!("[formats] round {} {}: done", round + 1, FORMATS[f].0);
        }
    }
    let ms_per_chunk = |r: &Run| 1e3 * r.seconds / r.chunks as f64;
    eprintln!(
        "[formats] {} documents of {} sections, {} threads, {rounds} rounds rotated, \
         medians:",
        docs.len(),
        format_corpus::SECTIONS,
        threads()
    );
    eprintln!(
        "[formats]   {:<17} {:>6} {:>11} {:>9} {:>9} {:>11}  ms per chunk per round",
        "format", "chunks", "tokens/chk", "ms/chunk", "CPU ms", "vs Markdown"
    );
    for (f, (label, _)) in FORMATS.iter().enumerate() {
        let ratio = median(
            (0..rounds)
                .map(|r| ms_per_chunk(&runs[f][r]) / ms_per_chunk(&runs[0][r]))
                .collect(),
        );
        eprintln!(
            "[formats]   {label:<17} {:>6} {:>11.1} {:>9.2} {:>9.2} {:>10.2}x  {}",
            runs[f][0].chunks,
            runs[f][0].tokens as f64 / runs[f][0].chunks as f64,
            median(runs[f].iter().map(ms_per_chunk).collect()),
            1e3 * median(runs[f].iter().map(Run::cpu_per_chunk).collect()),
            ratio,
            runs[f]
                .iter()
                .map(|r| format!("{:.2}", ms_per_chunk(r)))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
}

/// Whether the bench `name` was asked for: no filter arguments, or one contained in it.
fn wanted(name: &str) -> bool {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
}

fn pipeline_benches(_c: &mut Criterion) {
    if wanted("reindex") {
        reindex_bench();
    }
    if wanted("formats") {
        formats_bench();
    }
    if !wanted("vault_pipeline") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cairn = Cairn::open(&tmp.path().join("cairn.db")).unwrap();
    ModelEmbedder::new(EmbedderConfig::default())
        .load()
        .unwrap();
    cairn.vault_search("warm up", Some(1), None, None).unwrap();

    // A no-change reindex of 1,000 files.
    let notes = tmp.path().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    for i in 0..1000 {
        std::fs::write(
            notes.join(format!("n{i:04}.md")),
            format!("# Note {i}\n\nShort note number {i}.\n"),
        )
        .unwrap();
    }
    let opts = ReindexOptions {
        dir: notes,
        ..Default::default()
    };
    cairn.vault_reindex(&opts, &|_| {}).unwrap();
    let mut times = Vec::new();
    for _ in 0..5 {
        let s = cairn.vault_reindex(&opts, &|_| {}).unwrap();
        assert_eq!(s.files_unchanged, 1000);
        times.push(Duration::from_secs_f64(s.seconds));
    }
    eprintln!(
        "no-change reindex of 1,000 files: p50 {:.0} ms",
        p50(times).as_secs_f64() * 1e3
    );

    // vault_retrieve end to end through MCP with the model loaded.
    let db = tmp.path().join("cairn.db");
    drop(cairn);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = connect(&db, &[]).await;
        let call = |q: &str| {
            let mut p = CallToolRequestParams::new("vault_retrieve");
            p = p.with_arguments(
                serde_json::json!({"query": q, "top_k": 5})
                    .as_object()
                    .unwrap()
                    .clone(),
            );
            client.call_tool(p)
        };
        call("warm up the model").await.unwrap();
        let queries = [
            "retry pattern with exponential backoff",
            "how to configure logging",
            "serialize a struct to JSON",
            "async runtime and tasks",
            "licence and contribution guidelines",
        ];
        let mut times = Vec::new();
        for i in 0..50 {
            let t = Instant::now();
            let r = call(queries[i % queries.len()]).await.unwrap();
            times.push(t.elapsed());
            assert_ne!(r.is_error, Some(true));
        }
        eprintln!(
            "vault_retrieve through MCP (model loaded, 1,000 chunks): p50 {:.1} ms",
            p50(times).as_secs_f64() * 1e3
        );
        let _ = client.cancel().await;
    });
}

criterion_group!(benches, search_benches, pipeline_benches);
criterion_main!(benches);
