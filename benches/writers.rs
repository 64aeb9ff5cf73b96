//! The writers benchmark of issue 12: `cargo bench --bench writers`.
//!
//! SQLite and PostgreSQL side by side in one run: 1, 8 and 32 concurrent writers, each
//! calling `add_learning` (three writes in four) and `add_finding` (one in four) through
//! the facade as fast as it can, while one reader calls `search_learnings` in a loop.
//! Measured per cell: **acknowledged writes per second** (calls that returned `Ok`,
//! over the time from the start signal until every writer has returned), and the
//! reader's **search latency p50 and p99** while the writers run.
//!
//! **Embedder.** The cells use the deterministic `HashEmbedder`
//! (`Cairn::open_at_with_embedder`), so that they measure the store and the indexes,
//! not the ONNX model (tens of milliseconds a text on this machine, which would hide
//! every store effect). Two extra cells run the real model (8 writers, one process
//! handle) to show what an agent sees; they are skipped, and say so, when the model is
//! missing.
//!
//! **Topologies (the choice).** A `Cairn` holds one writing database connection,
//! shared by its threads behind a mutex, and a pool of reading ones (one per read
//! running at once); the writes of one handle are therefore serialized in the process
//! before the database sees them. Two topologies are measured:
//!
//! - `handles`: every writer has its own `Cairn` (its own connection and its own
//!   background indexer, as `cairn serve` starts it), and the reader another: N
//!   processes (or N hosts) writing at once, as far as the database is concerned. The
//!   handles live in one process rather than in N child processes: the database sees
//!   the same N connections either way (SQLite locks the file per connection, in the
//!   process as across processes; PostgreSQL serves each connection by its own backend),
//!   and one process spares the measurement N copies of the start-up and the MCP/JSON
//!   layer, which are not what differs between the stores. All handles share one index
//!   directory (one host): the background indexers take turns on tantivy's writer lock,
//!   whoever holds it indexes every new row, the same work on either store.
//! - `shared`: one `Cairn` for the writers and the reader, as in `cairn daemon` (one
//!   process per host, every session's writes on one connection, reads on the pool).
//!
//! **Stores.** `sqlite`: a file in a temporary directory (WAL, `synchronous=NORMAL`,
//! as the store opens it: a commit does not wait for the disk). `postgres`: a throwaway
//! cluster started as the tests start theirs (`tests/common/pg.rs`, included below), but
//! with PostgreSQL's durable defaults (`fsync`, `synchronous_commit=on`: a commit waits
//! for its WAL flush), over TCP on loopback. `pg-async`: the same cluster, the cell's
//! database set to `synchronous_commit=off` (a commit does not wait for the WAL flush;
//! a crash can lose the last commits but never breaks the database), the setting
//! closest to SQLite's. Writers are serialized on both stores (SQLite `BEGIN
//! IMMEDIATE`, PostgreSQL an advisory transaction lock), so throughput is bounded by one
//! write transaction at a time; what concurrency changes is the waiting.
//!
//! **Cells.** Each cell runs in a child process of this binary (fresh memory, no
//! background indexer of an earlier cell left running) on a fresh database seeded with
//! one project, one issue per writer and [`SEED`] learnings. Results come back as one
//! JSON line on stdout; progress is on stderr. After each cell the database must hold
//! exactly the seed plus every acknowledged write (the cell fails otherwise).
//!
//! Printed (stdout): a Markdown table per cell (writes/s, learnings and findings
//! written, failed calls, searches, search p50/p99), then PostgreSQL over SQLite ratios.
//!
//! Knobs: `WRITERS_BENCH_SECONDS` (8: measured seconds per cell), `WRITERS_BENCH_WRITERS`
//! (`1,8,32`), `WRITERS_BENCH_MODEL` (`1`; `0` skips the real-model cells).

#![allow(clippy::print_stderr, clippy::print_stdout)]

#[allow(dead_code)]
#[path = "../tests/common/pg.rs"]
mod pg;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use cairn::Cairn;
use cairn::embed::HashEmbedder;
use cairn::issues::{NewIssue, NewProject};
use cairn::learnings::{LearningSearch, NewLearning, SearchScope};
use cairn::store::Location;
use cairn::trail::{FindingCategory, NewFinding};
use serde_json::{Value, json};

/// Learnings in the database before a cell starts (the search corpus).
const SEED: usize = 1_000;
/// Seed of the real-model cells: embedding 1,000 texts with the model takes minutes.
const SEED_MODEL: usize = 200;
/// Environment of a child process: the cell to run (see [`Cell::encode`]).
const CELL_ENV: &str = "WRITERS_BENCH_CELL";
/// Environment of a child process: the PostgreSQL database URL of its cell.
const URL_ENV: &str = "WRITERS_BENCH_URL";
const PROJECT: &str = "bench";
/// The writer number in the seed learnings' text (writers are numbered from 0).
const SEED_WRITER: usize = 1_000;

const SUBJECTS: [&str; 12] = [
    "schema migrations",
    "retry loops",
    "cache keys",
    "feature toggles",
    "error messages",
    "release pipeline",
    "cursor pagination",
    "structured logging",
    "token rotation",
    "job queues",
    "test data",
    "request throttling",
];

const ADVICE: [&str; 8] = [
    "run it inside one transaction so that a failure leaves nothing half done",
    "log the request id with every line so that a trace can be followed across services",
    "keep the timeout below the load balancer's or the client retries twice",
    "write the test against the public interface, never against private helpers",
    "read the configuration once at start and refuse to start when it is invalid",
    "prefer an explicit allow list over a deny list for anything an agent controls",
    "measure before and after with the benchmark, not with a stopwatch in a test",
    "name the error after what the caller can do about it, not after where it happened",
];

const QUERIES: [&str; 8] = [
    "how to retry failed jobs in the queue",
    "schema migrations in one transaction",
    "cache keys after a release",
    "structured logging request id",
    "feature toggles configuration",
    "cursor pagination timeout",
    "token rotation",
    "request throttling tests",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreKind {
    Sqlite,
    Postgres,
    PgAsync,
}

impl StoreKind {
    fn name(self) -> &'static str {
        match self {
            StoreKind::Sqlite => "sqlite",
            StoreKind::Postgres => "postgres",
            StoreKind::PgAsync => "pg-async",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Topology {
    /// One `Cairn` (connection) per writer, and one for the reader.
    Handles,
    /// One `Cairn` for every writer and the reader (a daemon).
    Shared,
}

impl Topology {
    fn name(self) -> &'static str {
        match self {
            Topology::Handles => "handles",
            Topology::Shared => "shared",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cell {
    store: StoreKind,
    topology: Topology,
    writers: usize,
    /// The real embedding model instead of the `HashEmbedder`.
    model: bool,
}

impl Cell {
    fn embedder(&self) -> &'static str {
        if self.model { "model" } else { "hash" }
    }

    fn encode(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            self.store.name(),
            self.topology.name(),
            self.writers,
            self.embedder()
        )
    }

    fn decode(s: &str) -> Cell {
        let parts: Vec<&str> = s.split(':').collect();
        let store = match parts[0] {
            "sqlite" => StoreKind::Sqlite,
            "postgres" => StoreKind::Postgres,
            "pg-async" => StoreKind::PgAsync,
            other => panic!("unknown store {other}"),
        };
        let topology = match parts[1] {
            "handles" => Topology::Handles,
            "shared" => Topology::Shared,
            other => panic!("unknown topology {other}"),
        };
        Cell {
            store,
            topology,
            writers: parts[2].parse().expect("writers"),
            model: parts[3] == "model",
        }
    }

    fn seed(&self) -> usize {
        if self.model { SEED_MODEL } else { SEED }
    }
}

/// What a cell measured.
#[derive(Debug, Clone)]
struct Outcome {
    cell: Cell,
    secs: f64,
    learnings: u64,
    findings: u64,
    errors: u64,
    searches: usize,
    p50_ms: f64,
    p99_ms: f64,
}

impl Outcome {
    fn writes_per_sec(&self) -> f64 {
        (self.learnings + self.findings) as f64 / self.secs
    }

    fn to_json(&self) -> Value {
        json!({
            "secs": self.secs,
            "learnings": self.learnings,
            "findings": self.findings,
            "errors": self.errors,
            "searches": self.searches,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
        })
    }

    fn from_json(cell: Cell, v: &Value) -> Outcome {
        let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
        Outcome {
            cell,
            secs: f("secs"),
            learnings: f("learnings") as u64,
            findings: f("findings") as u64,
            errors: f("errors") as u64,
            searches: f("searches") as usize,
            p50_ms: f("p50_ms"),
            p99_ms: f("p99_ms"),
        }
    }
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn seconds() -> f64 {
    env_or("WRITERS_BENCH_SECONDS", "8")
        .parse()
        .expect("WRITERS_BENCH_SECONDS: a number of seconds")
}

fn main() {
    match std::env::var(CELL_ENV) {
        Ok(cell) => child(Cell::decode(&cell)),
        Err(_) => parent(),
    }
}

// ---------------------------------------------------------------------------------
// The parent: the cluster, the cells, the tables.

fn parent() {
    let writer_counts: Vec<usize> = env_or("WRITERS_BENCH_WRITERS", "1,8,32")
        .split(',')
        .map(|w| w.trim().parse().expect("WRITERS_BENCH_WRITERS: numbers"))
        .collect();
    let model = env_or("WRITERS_BENCH_MODEL", "1") != "0";
    let mut cells = Vec::new();
    for topology in [Topology::Handles, Topology::Shared] {
        for &writers in &writer_counts {
            for store in [StoreKind::Sqlite, StoreKind::Postgres, StoreKind::PgAsync] {
                cells.push(Cell {
                    store,
                    topology,
                    writers,
                    model: false,
                });
            }
        }
    }
    let model_available = model && model_present();
    if model_available {
        for store in [StoreKind::Sqlite, StoreKind::Postgres, StoreKind::PgAsync] {
            cells.push(Cell {
                store,
                topology: Topology::Shared,
                writers: 8,
                model: true,
            });
        }
    }
    eprintln!(
        "writers bench: {} cells of {}s; starting a PostgreSQL cluster (durable defaults)",
        cells.len(),
        seconds()
    );
    let cluster = pg::PgCluster::start_with("");
    let version = psql_value(&cluster, "SHOW server_version");
    let started = Instant::now();
    let mut outcomes = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        eprintln!(
            "[{}/{}] {} ({:.0}s elapsed)",
            i + 1,
            cells.len(),
            cell.encode(),
            started.elapsed().as_secs_f64()
        );
        let out = run_child(&cluster, *cell);
        eprintln!(
            "    {:.0} writes/s, search p50 {:.2} ms, p99 {:.2} ms",
            out.writes_per_sec(),
            out.p50_ms,
            out.p99_ms
        );
        outcomes.push(out);
    }
    print_report(&outcomes, &version, model, model_available);
    eprintln!(
        "writers bench: done in {:.0}s",
        started.elapsed().as_secs_f64()
    );
}

/// Whether the real model can be loaded (the model's files and ONNX Runtime).
fn model_present() -> bool {
    use cairn::embed::{Embed, ModelEmbedder};
    match ModelEmbedder::default().embed_query("probe") {
        Ok(_) => true,
        Err(e) => {
            eprintln!("writers bench: real model unavailable, its cells are skipped ({e})");
            false
        }
    }
}

fn psql_value(cluster: &pg::PgCluster, sql: &str) -> String {
    let out = cluster
        .psql("postgres")
        .args(["-At", "-c", sql])
        .output()
        .expect("run psql");
    assert!(out.status.success(), "psql {sql}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Run one cell in a child process of this binary and read its outcome.
fn run_child(cluster: &pg::PgCluster, cell: Cell) -> Outcome {
    let exe = std::env::current_exe().expect("current exe");
    let mut cmd = Command::new(exe);
    cmd.env(CELL_ENV, cell.encode())
        .env("CAIRN_LOG", "warn")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    if cell.store != StoreKind::Sqlite {
        let url = cluster.create_database("writers");
        if cell.store == StoreKind::PgAsync {
            let db = pg::PgCluster::database_of(&url);
            let status = cluster
                .psql("postgres")
                .arg("-c")
                .arg(format!("ALTER DATABASE {db} SET synchronous_commit = off"))
                .status()
                .expect("run psql");
            assert!(status.success(), "ALTER DATABASE {db}");
        }
        cmd.env(URL_ENV, url);
    }
    let out = cmd.output().expect("run a cell");
    assert!(
        out.status.success(),
        "cell {} failed: {}",
        cell.encode(),
        out.status
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("cell {}: no result line in {stdout:?}", cell.encode()));
    Outcome::from_json(cell, &serde_json::from_str(line).expect("result JSON"))
}

fn print_report(outcomes: &[Outcome], version: &str, model: bool, model_available: bool) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("## Writers benchmark: SQLite vs PostgreSQL\n");
    println!(
        "{cores} cores; PostgreSQL {version} (loopback TCP, durable defaults; pg-async = \
         synchronous_commit=off); SQLite WAL, synchronous=NORMAL; {:.0} s per cell; seed \
         {SEED} learnings. Embedder: HashEmbedder (the store is measured, not the ONNX \
         model){}.\n",
        seconds(),
        if model_available {
            format!("; rows marked `model` use the real model (seed {SEED_MODEL})")
        } else if model {
            "; the real model was unavailable, its rows are missing".to_string()
        } else {
            String::new()
        }
    );
    println!(
        "| topology | writers | store | embedder | writes/s | learnings | findings | failed | \
         searches | search p50 ms | search p99 ms |"
    );
    println!("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for o in outcomes {
        println!(
            "| {} | {} | {} | {} | {:.0} | {} | {} | {} | {} | {:.2} | {:.2} |",
            o.cell.topology.name(),
            o.cell.writers,
            o.cell.store.name(),
            o.cell.embedder(),
            o.writes_per_sec(),
            o.learnings,
            o.findings,
            o.errors,
            o.searches,
            o.p50_ms,
            o.p99_ms
        );
    }
    println!("\n### PostgreSQL / SQLite (same topology, writers, embedder)\n");
    println!("| topology | writers | embedder | store | writes/s | search p50 | search p99 |");
    println!("|---|---:|---|---|---:|---:|---:|");
    for o in outcomes
        .iter()
        .filter(|o| o.cell.store != StoreKind::Sqlite)
    {
        let Some(base) = outcomes.iter().find(|b| {
            b.cell
                == Cell {
                    store: StoreKind::Sqlite,
                    ..o.cell
                }
        }) else {
            continue;
        };
        println!(
            "| {} | {} | {} | {} | {:.2}x | {:.2}x | {:.2}x |",
            o.cell.topology.name(),
            o.cell.writers,
            o.cell.embedder(),
            o.cell.store.name(),
            o.writes_per_sec() / base.writes_per_sec(),
            o.p50_ms / base.p50_ms,
            o.p99_ms / base.p99_ms
        );
    }
}

// ---------------------------------------------------------------------------------
// A child: one cell.

fn child(cell: Cell) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let location = match std::env::var(URL_ENV) {
        Ok(url) => Location::Postgres {
            url,
            cache: tmp.path().join("cache"),
        },
        Err(_) => Location::File(tmp.path().join("cairn.db")),
    };
    let open = || -> Cairn {
        let cairn = if cell.model {
            Cairn::open_at(&location)
        } else {
            Cairn::open_at_with_embedder(&location, Box::new(HashEmbedder::new()))
        }
        .expect("open the database");
        cairn
            .index_learnings_in_background()
            .expect("start the learnings indexer");
        cairn
    };
    let t = Instant::now();
    let issues = seed(&location, cell);
    eprintln!(
        "    seeded {} learnings and {} issues in {:.1}s",
        cell.seed(),
        issues.len(),
        t.elapsed().as_secs_f64()
    );
    // The handles: the reader's first, then one per writer (or the reader's for all).
    let reader = Arc::new(open());
    let writer_handles: Vec<Arc<Cairn>> = (0..cell.writers)
        .map(|_| match cell.topology {
            Topology::Shared => reader.clone(),
            Topology::Handles => Arc::new(open()),
        })
        .collect();
    // Warm the reader (index opened, caches filled; the model loaded) before timing.
    search(&reader, 0).expect("warm-up search");

    let stop = Arc::new(AtomicBool::new(false));
    let learnings = Arc::new(AtomicU64::new(0));
    let findings = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(cell.writers + 2));
    let mut threads = Vec::new();
    for (w, handle) in writer_handles.into_iter().enumerate() {
        let issue = issues[w].clone();
        let (stop, barrier) = (stop.clone(), barrier.clone());
        let (learnings, findings, errors) = (learnings.clone(), findings.clone(), errors.clone());
        threads.push(std::thread::spawn(move || {
            barrier.wait();
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let ok = if n % 4 == 3 {
                    handle
                        .add_finding(&issue, &finding(w, n), "bench")
                        .map(|_| &findings)
                } else {
                    handle
                        .add_learning(&learning(&issue, w, n))
                        .map(|_| &learnings)
                };
                match ok {
                    Ok(counter) => {
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        if errors.fetch_add(1, Ordering::Relaxed) < 3 {
                            eprintln!("    writer {w}: {e}");
                        }
                    }
                }
                n += 1;
            }
        }));
    }
    let search_thread = {
        let (stop, barrier, reader) = (stop.clone(), barrier.clone(), reader.clone());
        std::thread::spawn(move || {
            barrier.wait();
            let mut latencies = Vec::new();
            let mut q = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                search(&reader, q).expect("search while writing");
                latencies.push(t.elapsed());
                q += 1;
            }
            latencies
        })
    };
    barrier.wait();
    let start = Instant::now();
    // The measurement window (a timer, not a synchronisation: the threads stop on the
    // flag and are joined).
    std::thread::sleep(Duration::from_secs_f64(seconds()));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("writer thread");
    }
    let secs = start.elapsed().as_secs_f64();
    let mut latencies = search_thread.join().expect("search thread");
    latencies.sort();
    let pct = |p: f64| -> f64 {
        if latencies.is_empty() {
            return f64::NAN;
        }
        let i = ((latencies.len() - 1) as f64 * p).round() as usize;
        latencies[i].as_secs_f64() * 1e3
    };
    let outcome = Outcome {
        cell,
        secs,
        learnings: learnings.load(Ordering::Relaxed),
        findings: findings.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        searches: latencies.len(),
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
    };
    check_counts(&reader, &outcome);
    println!("{}", outcome.to_json());
}

/// The database holds exactly the seed and every acknowledged write.
fn check_counts(cairn: &Cairn, o: &Outcome) {
    let (l, f): (i64, i64) = cairn
        .store()
        .read(|c| {
            Ok((
                c.query_row("SELECT count(*) FROM learnings", [], |r| r.get(0))?,
                c.query_row(
                    "SELECT count(*) FROM trail_records WHERE kind = 'finding'",
                    [],
                    |r| r.get(0),
                )?,
            ))
        })
        .expect("count rows");
    assert_eq!(
        l as u64,
        o.cell.seed() as u64 + o.learnings,
        "learnings in the database vs seed + acknowledged"
    );
    assert_eq!(
        f as u64, o.findings,
        "findings in the database vs acknowledged"
    );
}

fn search(cairn: &Cairn, q: usize) -> cairn::error::Result<usize> {
    cairn
        .search_learnings(&LearningSearch {
            query: QUERIES[q % QUERIES.len()].to_string(),
            scope: SearchScope::All,
            limit: None,
            min_quality_score: None,
            include_superseded: false,
            include_archived: false,
            min_trust: None,
        })
        .map(|r| r.count)
}

/// The project, one issue per writer (plus the seed's), and the seed learnings; returns
/// the writers' issue identifiers.
fn seed(location: &Location, cell: Cell) -> Vec<String> {
    let cairn = if cell.model {
        Cairn::open_at(location)
    } else {
        Cairn::open_at_with_embedder(location, Box::new(HashEmbedder::new()))
    }
    .expect("open the database");
    cairn
        .create_project(&NewProject {
            slug: PROJECT.into(),
            name: PROJECT.into(),
            prefix: None,
            path: None,
        })
        .expect("create the project");
    let issue = |title: String| {
        cairn
            .create_issue(&NewIssue {
                project: PROJECT.into(),
                title,
                ..Default::default()
            })
            .expect("create an issue")
            .identifier
    };
    let seed_issue = issue("Seed learnings".into());
    let items: Vec<NewLearning> = (0..cell.seed())
        .map(|n| learning(&seed_issue, SEED_WRITER, n))
        .collect();
    for chunk in items.chunks(250) {
        cairn.add_learnings(chunk).expect("seed learnings");
    }
    (0..cell.writers)
        .map(|w| issue(format!("Writer {w}")))
        .collect()
}

/// Learning `n` of writer `w`: unique on its issue, varied words.
fn learning(issue: &str, w: usize, n: usize) -> NewLearning {
    let mut rng = cairn::base::rng::SplitMix64::new((w as u64).wrapping_mul(1_000_003) ^ n as u64);
    let subject = SUBJECTS[rng.below(SUBJECTS.len() as u64) as usize];
    let advice = ADVICE[rng.below(ADVICE.len() as u64) as usize];
    let other = SUBJECTS[rng.below(SUBJECTS.len() as u64) as usize];
    NewLearning {
        issue: issue.to_string(),
        pattern: format!("For {subject}, {advice} (case {w}-{n})"),
        context: Some(format!(
            "Seen while working on {other} next to {subject}: the first attempt failed in \
             review and the second one held up under load, see writer {w} note {n}."
        )),
        applies_to: vec![format!("src/{}/", subject.replace(' ', "_"))],
        learning_type: None,
        created_by: "bench".into(),
        agent_type: "test".into(),
        merge: false,
        supersedes: Vec::new(),
        person: false,
    }
}

fn finding(w: usize, n: usize) -> NewFinding {
    NewFinding {
        category: FindingCategory::CodePattern,
        summary: format!("Writer {w} observed pattern {n} in the retry path"),
        details: Some("The retry loop re-reads the configuration on every attempt.".into()),
        files: vec![format!("src/retry_{}.rs", n % 7)],
    }
}
