//! The load benchmark of issue 11: `cargo bench --bench load`.
//!
//! K sessions (default 8) each make N mixed MCP calls (default 300) on one database, all
//! at once: `vault_retrieve`, `search_learnings`, `add_learning`, `list_issues`,
//! `add_finding` in turn (so a fifth each; every session's first call is a
//! `vault_retrieve`, timed on its own as the *first-call latency*). Topologies, each on
//! its own copy of one seeded database (samples/docs reindexed into the vault, 100
//! learnings), in one run:
//!
//! - **A, stdio**: K `cairn serve` processes, one per session, each bound to its issue
//!   (`--issue-id`), driven by rmcp stdio clients;
//! - **B, daemon**: one `cairn daemon` and K rmcp Streamable HTTP clients, each with its
//!   own session token (`cairn session new --issue ...`);
//! - **C, forwarders**: one `cairn daemon` and K `cairn serve` processes that forward to
//!   it (what an unchanged client configuration gets once a daemon runs);
//! - **U, unique queries**: B again, but every search sends a text never sent before,
//!   so no query vector comes from the daemon's cache (A, B and C cycle through twelve
//!   subjects, as agents asking about the same areas do);
//! - **L, no lanes**: B again, but the daemon runs every tool handler as soon as its call
//!   arrives (`--shared-lanes 0`), where by default a `search_learnings` never waits while
//!   the other tools share the cores less one (`cairn::mcp::lanes`): the baseline of that
//!   choice, side by side with B;
//! - **M, no duplicate check**: B again, but every `add_learning` sends `merge: false`
//!   (issue 35's duplicate check off): the before of that check, side by side with B;
//! - **T, each tool alone** (not in the default list): B once per tool, every session
//!   calling only that tool, once with only `server_ping` (a call that does no work: what
//!   the transport, the checks and rmcp's per-request service cost), and once alternating
//!   `search_learnings` and `add_learning` (searches while learnings are added); one line
//!   each. It tells the mix's cost apart by tool: a closed loop's latency is set by the
//!   mean cost of every call in it, not by the call being timed.
//! - **N, never-seen searches beside the model** (not in the default list; issues 39 and
//!   59): the search figures of issue 59's table, each a daemon on its own copy of a
//!   database that the binary seeded itself, every session calling one tool only:
//!   never-seen `search_learnings` (U's never-sent texts) with one session (a lone
//!   query's latency) and with all K (CPU per search and searches per second under load),
//!   and repeated queries (the twelve subjects: vectors from the query cache) with all K,
//!   all three on 300 learnings that resemble each other (the corpus of `tests/cost.rs`);
//!   repeated queries alone on the learnings of `tests/eval/learnings.jsonl` (about 200)
//!   and on `CAIRN_LOAD_BIG` (10,000) learnings of the bench's realistic corpus
//!   (`benches/learning_corpus.rs`, Zipf); `get_issue` and `server_ping` alone. Beside
//!   them, the same never-seen texts embedded by the model alone, raw ONNX Runtime in
//!   Python on the same model files (`tests/reference_embed.py --single`: tokenize, run at
//!   batch 1, pool, one text at a time): per-text p50 with one intra-op thread and with
//!   two, CPU per text with one, and texts per second with one one-thread process per
//!   core at once. `CAIRN_LOAD_ROUNDS` (1) repeats the whole in rounds, the binaries
//!   alternating within each workload, the model once per round; one table gives each
//!   figure for every binary (the range over the rounds), the model's, each binary against
//!   the model and the current binary against each baseline (ratios taken within a round),
//!   with the goals, and the load average at the start of every run. The texts per run of
//!   the daemon's model come from `cairn_model_texts_total` over `cairn_model_runs_total`
//!   on its `/metrics`, read before and after (every topology with a daemon prints it;
//!   none for a binary without `/metrics`).
//! - **P, paced**: B again, but each session pauses `CAIRN_LOAD_THINK_MS` (20) between
//!   calls, as an agent thinks between tool calls (for seconds, not milliseconds: 20 ms
//!   is still a hundred times a real agent's rate). A, B, C and U are closed loops: each
//!   session sends its next call as soon as the last returns, so the cores are always
//!   busy and every latency includes queueing for them (mean latency = sessions /
//!   throughput); P shows the latencies of a loaded host below saturation.
//!
//! Printed (stdout): per topology p50/p99 per tool, calls/s over the whole run, peak
//! total RSS of every Cairn process (VmRSS summed from /proc every 100 ms), the CPU time
//! of every Cairn process while the sessions ran, per call (utime + stime from /proc, in
//! 10 ms clock ticks; the lowest-noise figure of what a call costs), first-call p50/max,
//! the embedding lag (learnings still without an embedding when the last call
//! returned, and how long the server took to embed them); then the topologies side by
//! side with ratios to A.
//!
//! The HTTP sessions of B, U and P keep their connection between calls, as the official
//! SDKs' clients (httpx, fetch) and Cairn's forwarders do; rmcp's default client would
//! connect anew for every call (`CAIRN_LOAD_KEEPALIVE=0` measures that).
//!
//! **A previous build beside this one.** `CAIRN_BENCH_BASELINE=/path/to/old/cairn` (a
//! binary, `label=path`, or a commit that the bench builds in release in a worktree under
//! `target/baselines/`; several, comma-separated) runs every topology for each binary in
//! turn, each on a database it seeded itself, and prints each baseline beside the current
//! binary with the ratio current / baseline (`benches/binaries.rs`). For example, this
//! build against the commit before issue 59's round and that round's start, three rounds
//! of N:
//!
//! ```text
//! CAIRN_BENCH_BASELINE=4d0619d,23a9a57 CAIRN_LOAD_TOPOLOGIES=n CAIRN_LOAD_ROUNDS=3 \
//!     cargo bench --bench load
//! ```
//!
//! Knobs: `CAIRN_LOAD_SESSIONS` (8), `CAIRN_LOAD_CALLS` (300), `CAIRN_LOAD_TOPOLOGIES`
//! (`a,b,l,c,u,p,m`; add `t` for T, `n` for N), `CAIRN_LOAD_ROUNDS` (1, N's rounds),
//! `CAIRN_LOAD_BIG` (10,000, N's large seed), `CAIRN_BENCH_BASELINE` (none),
//! `CAIRN_LOAD_THINK_MS` (20, P's pause), `CAIRN_LOAD_KEEPALIVE` (1),
//! `CAIRN_LOAD_DAEMON_LOG` (`warn`: the daemon's `CAIRN_LOG`; `cairn::mcp::server=debug`
//! logs each call's time in its handler, to tell it from the transport's).

#![allow(clippy::print_stderr, clippy::print_stdout)]

mod binaries;
mod learning_corpus;
mod reference;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use binaries::{Binary, Client, call, load_average};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

/// The mixed workload: each session calls these in turn.
const TOOLS: [&str; 5] = [
    "vault_retrieve",
    "search_learnings",
    "add_learning",
    "list_issues",
    "add_finding",
];

const SUBJECTS: [&str; 12] = [
    "database migrations",
    "retry policy",
    "cache invalidation",
    "feature flags",
    "error handling",
    "deployment pipeline",
    "api pagination",
    "logging format",
    "authentication tokens",
    "background jobs",
    "test fixtures",
    "rate limiting",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A seeded database directory.
struct Seed {
    dir: tempfile::TempDir,
    issues: Vec<String>,
    /// The binary that seeded it, and the only one that runs on it and its copies.
    bin: Binary,
}

impl Seed {
    fn db(&self) -> PathBuf {
        self.dir.path().join("cairn.db")
    }

    /// A copy of the seeded directory (database, WAL, indexes) for one topology.
    fn copy(&self) -> Seed {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(self.dir.path(), dir.path());
        Seed {
            dir,
            issues: self.issues.clone(),
            bin: self.bin.clone(),
        }
    }

    /// A new database of `bin` with one project (`slug`, its files at `path` if given)
    /// and `issues` issues in it.
    fn project(bin: &Binary, slug: &str, path: Option<&str>, issues: usize) -> Seed {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("cairn.db");
        let mut create = vec!["project", "create", "--slug", slug, "--name", slug];
        if let Some(path) = path {
            create.extend(["--path", path]);
        }
        bin.cli(&db, &create);
        let issues = (0..issues)
            .map(|i| {
                let title = format!("Session {i}");
                let args = ["issue", "create", "--project", slug, "--title", &title];
                bin.cli(&db, &args).trim().to_string()
            })
            .collect();
        Seed {
            dir,
            issues,
            bin: bin.clone(),
        }
    }

    /// Add `learnings` (`add_learning`'s arguments) on the first issue through a stdio
    /// server, then have the CLI embed every one of them, so that a daemon started on the
    /// seed has no embedding left to do.
    async fn add_learnings(&self, learnings: Vec<Value>) {
        let db = self.db();
        let (c, _) = self.bin.stdio(&db, &self.issues[0], &[], &[]).await;
        binaries::add_learnings(&c, learnings, 4).await;
        let _ = c.cancel().await;
        self.bin.cli(&db, &["learnings", "reindex"]);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else if !e.file_name().to_string_lossy().ends_with(".lock") {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// The mixed workload's seed: samples/docs in the vault, `sessions` issues, 100
/// learnings.
async fn seed(bin: &Binary, sessions: usize) -> Seed {
    let docs = repo().join("samples/docs");
    let docs = docs.to_string_lossy();
    let seed = Seed::project(bin, "web", Some(&docs), sessions);
    bin.cli(&seed.db(), &["reindex", &docs, "--project", "web"]);
    let (c, _) = bin.stdio(&seed.db(), &seed.issues[0], &[], &[]).await;
    for i in 0..100 {
        call(&c, "add_learning", add_learning_args(usize::MAX, i)).await;
    }
    let _ = c.cancel().await;
    seed
}

/// M: every `add_learning` sends `merge: false`, so no duplicate check runs (issue 35's
/// baseline, side by side with B, which checks every learning).
static NO_MERGE: AtomicBool = AtomicBool::new(false);

fn add_learning_args(session: usize, i: usize) -> Value {
    let subject = SUBJECTS[i % SUBJECTS.len()];
    let mut args = json!({
        "pattern": format!(
            "When changing {subject} (session {session}, note {i}) run the full check first, \
             or the release breaks in production"
        ),
        "applies_to": ["src/"],
    });
    if NO_MERGE.load(Ordering::Relaxed) {
        args["merge"] = json!(false);
    }
    args
}

/// Which query texts the searches send: the twelve subjects over and over (what agents
/// asking about the same areas do; the server's query cache answers most), or a text
/// never sent before on every call (every query runs the model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Queries {
    Repeated,
    Unique,
}

fn args(tool: &str, session: usize, i: usize, queries: Queries) -> Value {
    let subject = SUBJECTS[(session * 7 + i) % SUBJECTS.len()];
    let query = |base: String| match queries {
        Queries::Repeated => base,
        Queries::Unique => format!("{base} for service {session} step {i}"),
    };
    match tool {
        "vault_retrieve" => {
            json!({"query": query(format!("how do we handle {subject}")), "top_k": 5})
        }
        "search_learnings" => json!({"query": query(subject.to_string()), "limit": 10}),
        "add_learning" => add_learning_args(session, i),
        "list_issues" => json!({"limit": 20}),
        "add_finding" => json!({
            "category": "bug",
            "summary": format!("Session {session} finding {i}: {subject} fails under load"),
        }),
        "server_ping" | "get_issue" => json!({}),
        _ => unreachable!(),
    }
}

/// Sums VmRSS of a set of processes every 100 ms; keeps the peak.
struct RssSampler {
    pids: Arc<Mutex<Vec<u32>>>,
    peak_kib: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time (user + system, every thread, in clock ticks of 10 ms) a process has used.
fn cpu_ticks(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // The fields after the command name, which is in parentheses and may hold
            // spaces: utime and stime are fields 14 and 15 of the line.
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0)
}

impl RssSampler {
    fn start(pids: Vec<u32>) -> RssSampler {
        let pids = Arc::new(Mutex::new(pids));
        let peak_kib = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (pids, peak, stop) = (pids.clone(), peak_kib.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let total: u64 = pids.lock().unwrap().iter().map(|p| rss_kib(*p)).sum();
                    peak.fetch_max(total, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        RssSampler {
            pids,
            peak_kib,
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> f64 {
        let total: u64 = self.pids.lock().unwrap().iter().map(|p| rss_kib(*p)).sum();
        self.peak_kib.fetch_max(total, Ordering::Relaxed);
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.peak_kib.load(Ordering::Relaxed) as f64 / 1024.0
    }
}

/// What one topology measured.
struct Figures {
    name: String,
    /// The tools the sessions called in turn ([`TOOLS`], or one of them alone).
    tools: &'static [&'static str],
    /// Latencies per tool, in `tools` order (first calls excluded).
    per_tool: Vec<Vec<Duration>>,
    first: Vec<Duration>,
    errors: usize,
    calls: usize,
    wall: Duration,
    rss_mib: f64,
    /// CPU time all Cairn processes used while the sessions ran (background work
    /// included), per call.
    cpu_ms_per_call: f64,
    /// Learnings without an embedding when the last call returned, and how long the
    /// server took from then to embed them all (background embedding waits for quiet).
    lag: Lag,
    /// Texts per run of the daemon's embedding model while the sessions ran (its
    /// `/metrics`): how far concurrent queries shared runs. NaN without a daemon (or
    /// with a binary whose daemon has no `/metrics`).
    texts_per_model_run: f64,
    /// The machine's load average (1 minute) when the sessions started.
    load: f64,
}

struct Lag {
    unembedded: u64,
    /// `None` where no server outlives the sessions (A: each stdio server exits with its
    /// client, and what it had not embedded waits for the next process).
    catch_up: Option<Duration>,
}

/// Count the learnings of `db` that have no embedding; then, if a server outlives the
/// sessions (`wait`), wait until there are none.
fn embedding_lag(db: &Path, wait: bool) -> Lag {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    let missing = || -> u64 {
        c.query_row(
            "SELECT count(*) FROM learnings l WHERE NOT EXISTS \
             (SELECT 1 FROM learning_embeddings e WHERE e.learning_seq = l.seq)",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap() as u64
    };
    let started = Instant::now();
    let unembedded = missing();
    if !wait {
        return Lag {
            unembedded,
            catch_up: None,
        };
    }
    while missing() > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "learnings still unembedded after 5 minutes"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    Lag {
        unembedded,
        catch_up: Some(started.elapsed()),
    }
}

fn pct(xs: &[Duration], p: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v: Vec<f64> = xs.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    v.sort_by(f64::total_cmp);
    let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

/// Run the workload on connected sessions, all at once: each calls `tools` in turn and
/// pauses `think` after every call (zero: a closed loop).
#[allow(clippy::too_many_arguments)] // one call per topology, each argument named there
async fn drive(
    db: &Path,
    server_lives_on: bool,
    name: String,
    clients: Vec<Client>,
    pids: Vec<u32>,
    calls: usize,
    tools: &'static [&'static str],
    queries: Queries,
    think: Duration,
) -> Figures {
    let load = load_average();
    let cpu_before: u64 = pids.iter().map(|p| cpu_ticks(*p)).sum();
    let rss = RssSampler::start(pids.clone());
    let started = Instant::now();
    let sessions = clients.len() as u32;
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(s, c)| {
            tokio::spawn(async move {
                // Paced sessions start spread over one pause, not in step.
                tokio::time::sleep(think * s as u32 / sessions).await;
                let mut out = Vec::with_capacity(calls);
                for i in 0..calls {
                    let tool = tools[i % tools.len()];
                    let t = Instant::now();
                    let ok = call(&c, tool, args(tool, s, i, queries)).await;
                    out.push((i, i % tools.len(), t.elapsed(), ok));
                    if !think.is_zero() {
                        tokio::time::sleep(think).await;
                    }
                }
                (out, c)
            })
        })
        .collect();
    let mut per_tool = vec![Vec::new(); tools.len()];
    let mut first = Vec::new();
    let mut errors = 0;
    let mut total = 0;
    let mut done = Vec::new();
    for t in tasks {
        let (out, c) = t.await.unwrap();
        done.push(c);
        for (i, tool, d, ok) in out {
            total += 1;
            errors += usize::from(!ok);
            if i == 0 {
                first.push(d);
            } else {
                per_tool[tool].push(d);
            }
        }
    }
    let wall = started.elapsed();
    // Before the sessions close: A's stdio servers exit with them.
    let cpu_after: u64 = pids.iter().map(|p| cpu_ticks(*p)).sum();
    for c in done {
        let _ = c.cancel().await;
    }
    let lag = embedding_lag(db, server_lives_on);
    Figures {
        name,
        tools,
        per_tool,
        first,
        errors,
        calls: total,
        wall,
        rss_mib: rss.finish(),
        cpu_ms_per_call: cpu_after.saturating_sub(cpu_before) as f64 * 10.0 / total as f64,
        lag,
        texts_per_model_run: f64::NAN,
        load,
    }
}

async fn topology_a(seed: &Seed, calls: usize) -> Figures {
    let db = seed.db();
    let mut clients = Vec::new();
    let mut pids = Vec::new();
    for issue in &seed.issues {
        let (c, pid) = seed.bin.stdio(&db, issue, &["--no-daemon"], &[]).await;
        clients.push(c);
        pids.push(pid);
    }
    drive(
        &db,
        false,
        "A: stdio".into(),
        clients,
        pids,
        calls,
        &TOOLS,
        Queries::Repeated,
        Duration::ZERO,
    )
    .await
}

/// A running `cairn daemon` on a database.
struct Daemon {
    child: std::process::Child,
    url: String,
}

impl Daemon {
    fn start(bin: &Binary, db: &Path, args: &[&str]) -> Daemon {
        let mut child = bin
            .command()
            .arg("--db")
            .arg(db)
            .arg("daemon")
            .args(args)
            .env(
                "CAIRN_LOG",
                std::env::var("CAIRN_LOAD_DAEMON_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        // The discovery file (`{"url": "http://127.0.0.1:PORT/mcp", ...}`) appears once the
        // daemon listens.
        let discovery = PathBuf::from(format!("{}.daemon.json", db.display()));
        let started = Instant::now();
        let url = loop {
            if let Some(url) = std::fs::read_to_string(&discovery)
                .ok()
                .and_then(|s| serde_json::from_str::<Value>(&s).ok())
                .and_then(|v| v["url"].as_str().map(String::from))
            {
                break url;
            }
            assert!(
                child.try_wait().unwrap().is_none(),
                "cairn daemon exited before listening"
            );
            assert!(started.elapsed() < Duration::from_secs(60), "no daemon");
            std::thread::sleep(Duration::from_millis(20));
        };
        Daemon { child, url }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The MCP endpoint (the discovery file's `url`).
    fn mcp_url(&self) -> String {
        self.url.clone()
    }
}

/// The daemon's `GET /health`, over TCP.
async fn health(mcp_url: &str) -> Option<Value> {
    let url = mcp_url.strip_suffix("/mcp")?;
    let r = reqwest::get(format!("{url}/health")).await.ok()?;
    serde_json::from_str(&r.text().await.ok()?).ok()
}

/// The embedding model's counters on the daemon's `/metrics`: (runs, texts).
async fn model_counters(mcp_url: &str) -> Option<(f64, f64)> {
    let url = mcp_url.strip_suffix("/mcp")?;
    let r = reqwest::get(format!("{url}/metrics")).await.ok()?;
    let text = r.text().await.ok()?;
    let read = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    };
    Some((
        read("cairn_model_runs_total")?,
        read("cairn_model_texts_total")?,
    ))
}

/// Poll the daemon's `/health` until it reports `"warm": true` (model and vault indexes
/// loaded at start), so a session's first call measures a warm host daemon, the topology
/// issue 11 is about, not the daemon's own start.
async fn wait_warm(daemon: &mut Daemon) {
    let started = Instant::now();
    while health(&daemon.url).await.is_none_or(|h| h["warm"] != true) {
        assert!(
            daemon.child.try_wait().unwrap().is_none(),
            "cairn daemon exited before it was warm"
        );
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "daemon never warm"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SIGTERM: a clean stop.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// Whether HTTP sessions keep their connection between calls, as the official Python and
/// TypeScript SDKs do (httpx, fetch), and Cairn's forwarders do; `CAIRN_LOAD_KEEPALIVE=0`
/// uses rmcp's default client instead, which connects anew for every request.
fn keep_alive() -> bool {
    std::env::var("CAIRN_LOAD_KEEPALIVE").map_or(true, |v| v != "0")
}

/// B, L (`daemon_args` lifting the lanes), U (unique queries), P (sessions pausing
/// `think` between calls), or one of T's runs (`tools`: one tool alone).
async fn topology_b(
    seed: &Seed,
    calls: usize,
    tools: &'static [&'static str],
    queries: Queries,
    think: Duration,
    daemon_args: &[&str],
) -> Figures {
    let db = seed.db();
    let mut daemon = Daemon::start(&seed.bin, &db, daemon_args);
    wait_warm(&mut daemon).await;
    let mut clients = Vec::new();
    for issue in &seed.issues {
        let token = seed
            .bin
            .cli(&db, &["session", "new", "--issue", issue])
            .trim()
            .to_string();
        let config =
            StreamableHttpClientTransportConfig::with_uri(daemon.mcp_url()).auth_header(token);
        let transport = if keep_alive() {
            StreamableHttpClientTransport::with_client(reqwest::Client::new(), config)
        } else {
            StreamableHttpClientTransport::from_config(config)
        };
        clients.push(().serve(transport).await.unwrap());
    }
    let name = match (tools, queries, think.is_zero()) {
        (t, _, _) if *t != TOOLS => format!("T: B, {} alone", t.join(" + ")),
        _ if !daemon_args.is_empty() => format!("L: B, daemon {}", daemon_args.join(" ")),
        _ if NO_MERGE.load(Ordering::Relaxed) => "M: B, merge: false (no duplicate check)".into(),
        (_, Queries::Repeated, true) => "B: daemon + HTTP".to_string(),
        (_, Queries::Unique, true) => "U: daemon + HTTP, unique queries".to_string(),
        (_, _, false) => format!("P: B paced, {} ms think time", think.as_millis()),
    };
    let model_before = model_counters(&daemon.mcp_url()).await;
    let mut f = drive(
        &db,
        true,
        name,
        clients,
        vec![daemon.pid()],
        calls,
        tools,
        queries,
        think,
    )
    .await;
    if let (Some((r0, t0)), Some((r1, t1))) =
        (model_before, model_counters(&daemon.mcp_url()).await)
        && r1 > r0
    {
        f.texts_per_model_run = (t1 - t0) / (r1 - r0);
    }
    drop(daemon);
    f
}

async fn topology_c(seed: &Seed, calls: usize) -> Figures {
    let db = seed.db();
    let mut daemon = Daemon::start(&seed.bin, &db, &[]);
    wait_warm(&mut daemon).await;
    let mut clients = Vec::new();
    let mut pids = vec![daemon.pid()];
    for issue in &seed.issues {
        let (c, pid) = seed.bin.stdio(&db, issue, &[], &[]).await;
        clients.push(c);
        pids.push(pid);
    }
    let f = drive(
        &db,
        true,
        "C: daemon + stdio forwarders".into(),
        clients,
        pids,
        calls,
        &TOOLS,
        Queries::Repeated,
        Duration::ZERO,
    )
    .await;
    drop(daemon);
    f
}

/// T's workloads: `server_ping` (a tool call that does nothing: the transport, the token and
/// scope checks, rmcp's per-request service), each tool of [`TOOLS`] alone, and searches
/// of learnings while learnings are added (the learnings tail's work).
static ALONE: [&[&str]; 7] = [
    &["server_ping"],
    &["vault_retrieve"],
    &["search_learnings"],
    &["add_learning"],
    &["list_issues"],
    &["add_finding"],
    &["search_learnings", "add_learning"],
];

/// T: B once per workload of [`ALONE`], each on its own copy of the seed; one line each,
/// CPU per call also as a ratio to `server_ping`'s.
async fn tools_alone(seed: &Seed, calls: usize) {
    let mut runs = Vec::new();
    for tools in ALONE {
        let f = topology_b(
            &seed.copy(),
            calls,
            tools,
            Queries::Repeated,
            Duration::ZERO,
            &[],
        )
        .await;
        runs.push(f);
    }
    println!(
        "\nT: B with each tool alone (every session calls only that tool, or those tools in \
         turn), {}\n",
        seed.bin.label
    );
    println!(
        "| tools | calls/s | first tool's p50 ms | its p99 ms | Cairn CPU ms per call | CPU / server_ping's | errors |"
    );
    println!("|---|---|---|---|---|---|---|");
    let ping = runs[0].cpu_ms_per_call;
    for f in &runs {
        println!(
            "| {} | {:.0} | {:.2} | {:.2} | {:.3} | {:.2} | {} |",
            f.tools.join(" + "),
            f.calls as f64 / f.wall.as_secs_f64(),
            pct(&f.per_tool[0], 0.5),
            pct(&f.per_tool[0], 0.99),
            f.cpu_ms_per_call,
            f.cpu_ms_per_call / ping,
            f.errors
        );
    }
}

/// The model alone on `texts`, one text at a time (`reference_embed.py --single`).
struct Model {
    p50_ms: f64,
    mean_ms: f64,
    cpu_ms: f64,
}

fn model_single(texts: &[String], threads: usize, spin: &str) -> Model {
    let out = reference::run(
        texts,
        &["--single".into(), threads.to_string(), spin.into()],
    );
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let f = |k: &str| v[k].as_f64().unwrap();
    Model {
        p50_ms: f("p50_ms"),
        mean_ms: f("mean_ms"),
        cpu_ms: f("cpu_ms"),
    }
}

/// The model alone on N's never-seen texts, measured once per round.
struct ModelFigures {
    /// p50 per text, the best of one thread (not spinning) and two (ONNX Runtime's
    /// default, spinning).
    p50_ms: f64,
    p50_one_thread: f64,
    p50_two_threads: f64,
    /// CPU per text, one thread.
    cpu_ms: f64,
    /// Texts per second, one one-thread process per core at once.
    per_second: f64,
    load: f64,
}

fn model_alone(texts: &[String]) -> ModelFigures {
    let load = load_average();
    let one = model_single(texts, 1, "off");
    let two = model_single(texts, 2, "default");
    // One one-thread process per core, all at once: what the model alone embeds per
    // second on this machine.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let parts: Vec<&[String]> = texts.chunks(texts.len().div_ceil(cores)).collect();
    let per_second: f64 = std::thread::scope(|sc| {
        let running: Vec<_> = parts
            .iter()
            .map(|part| sc.spawn(move || model_single(part, 1, "off")))
            .collect();
        running
            .into_iter()
            .map(|h| 1e3 / h.join().unwrap().mean_ms)
            .sum()
    });
    ModelFigures {
        p50_ms: one.p50_ms.min(two.p50_ms),
        p50_one_thread: one.p50_ms,
        p50_two_threads: two.p50_ms,
        cpu_ms: one.cpu_ms,
        per_second,
        load,
    }
}

/// The `i`-th of 300 learnings that resemble each other (`tests/cost.rs`'s corpus: twelve
/// subjects in the same sentence shapes, with commands and paths some of them share).
fn similar_learning(i: usize) -> Value {
    const SUBJECTS: [&str; 12] = [
        "billing",
        "checkout",
        "search index",
        "session cache",
        "image upload",
        "email queue",
        "auth tokens",
        "feature flags",
        "rate limiter",
        "audit log",
        "export job",
        "webhooks",
    ];
    let subject = SUBJECTS[i % SUBJECTS.len()];
    let slug = subject.replace(' ', "_");
    let step = i / SUBJECTS.len();
    json!({
        "pattern": format!(
            "When changing the {subject} code, run `make check-{slug}` and the step {step} \
             migration before release, or {subject} breaks in production"
        ),
        "context": format!(
            "Seen on the {subject} service: `src/{slug}/mod.rs` changed without \
             `make check-{slug}`, the release went out and failed at step {step} with a \
             timeout of {} seconds; the fix was to run the checks first.",
            30 + step % 5
        ),
        "applies_to": ["src/"],
    })
}

/// The learnings of `tests/eval/learnings.jsonl` (a realistic set of about 200), as
/// `add_learning`'s arguments.
fn eval_learnings() -> Vec<Value> {
    let text = std::fs::read_to_string(repo().join("tests/eval/learnings.jsonl")).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "learning")
        .map(|v| {
            let mut args = json!({"pattern": v["pattern"]});
            for key in ["context", "applies_to", "learning_type"] {
                if !v[key].is_null() {
                    args[key] = v[key].clone();
                }
            }
            args
        })
        .collect()
}

/// `n` learnings of the bench's realistic corpus (`learning_corpus::Corpus::Zipf`).
fn zipf_learnings(n: usize) -> Vec<Value> {
    let mut g = learning_corpus::Generator::new(learning_corpus::Corpus::Zipf, 42);
    (0..n)
        .map(|_| {
            let l = g.next();
            let mut args = json!({"pattern": l.pattern, "applies_to": l.applies_to});
            if let Some(c) = l.context {
                args["context"] = json!(c);
            }
            args
        })
        .collect()
}

/// N's databases for one binary, each seeded by it.
struct NSeeds {
    /// 300 similar learnings ([`similar_learning`]) on an issue of their own, and one
    /// issue per session.
    similar: Seed,
    /// `tests/eval/learnings.jsonl`'s learnings.
    eval: Seed,
    /// `CAIRN_LOAD_BIG` (10,000) learnings of the realistic corpus.
    big: Seed,
}

async fn n_seeds(bin: &Binary, sessions: usize, big: usize) -> NSeeds {
    let started = Instant::now();
    // The learnings on an issue of their own: the sessions' issues hold none, so that
    // `get_issue` answers with the issue alone (as `scripts/profile_search.py --get-issue`
    // counts it), not with 300 learnings.
    let mut similar = Seed::project(bin, "shop", None, sessions + 1);
    similar
        .add_learnings((0..300).map(similar_learning).collect())
        .await;
    similar.issues.remove(0);
    let eval = Seed::project(bin, "mono", None, 1);
    eval.add_learnings(eval_learnings()).await;
    let large = Seed::project(bin, "big", None, 1);
    large.add_learnings(zipf_learnings(big)).await;
    eprintln!(
        "[load] N: {} seeded its databases in {:.0} s",
        bin.label,
        started.elapsed().as_secs_f64()
    );
    NSeeds {
        similar,
        eval,
        big: large,
    }
}

/// Which of [`NSeeds`] a workload runs on.
#[derive(Clone, Copy)]
enum Which {
    Similar,
    Eval,
    Big,
}

/// One of N's workloads: a daemon on a copy of a seed, one session or every one, each
/// calling `tool` only.
struct Workload {
    seed: Which,
    every_session: bool,
    tool: &'static [&'static str],
    queries: Queries,
    what: &'static str,
}

const LONE: usize = 0;
const LOADED: usize = 1;
const REPEATED: usize = 2;
const EVAL: usize = 3;
const BIG: usize = 4;
const GET_ISSUE: usize = 5;
const PING: usize = 6;

const WORKLOADS: [Workload; 7] = [
    Workload {
        seed: Which::Similar,
        every_session: false,
        tool: &["search_learnings"],
        queries: Queries::Unique,
        what: "1 session, never-seen searches, 300 similar learnings",
    },
    Workload {
        seed: Which::Similar,
        every_session: true,
        tool: &["search_learnings"],
        queries: Queries::Unique,
        what: "every session, never-seen searches, 300 similar learnings",
    },
    Workload {
        seed: Which::Similar,
        every_session: true,
        tool: &["search_learnings"],
        queries: Queries::Repeated,
        what: "every session, repeated queries, 300 similar learnings",
    },
    Workload {
        seed: Which::Eval,
        every_session: false,
        tool: &["search_learnings"],
        queries: Queries::Repeated,
        what: "1 session, repeated queries, tests/eval/learnings.jsonl",
    },
    Workload {
        seed: Which::Big,
        every_session: false,
        tool: &["search_learnings"],
        queries: Queries::Repeated,
        what: "1 session, repeated queries, the large seed",
    },
    Workload {
        seed: Which::Similar,
        every_session: false,
        tool: &["get_issue"],
        queries: Queries::Repeated,
        what: "1 session, get_issue",
    },
    Workload {
        seed: Which::Similar,
        every_session: false,
        tool: &["server_ping"],
        queries: Queries::Repeated,
        what: "1 session, server_ping",
    },
];

/// How a figure compares with the model's: by difference or by ratio.
#[derive(Clone, Copy)]
enum Against {
    Difference,
    Ratio,
}

/// A row of N's table: its label, how to read it off one binary's workloads (in
/// [`WORKLOADS`] order), the model's figure it compares with, and the goal.
type NRow = (
    String,
    Box<dyn Fn(&[Figures]) -> f64>,
    Option<(fn(&ModelFigures) -> f64, Against)>,
    &'static str,
);

/// `lo-hi` of the finite values, or the one value.
fn range(xs: &[f64]) -> String {
    let xs: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    let Some(lo) = xs.iter().copied().reduce(f64::min) else {
        return "-".into();
    };
    let hi = xs.iter().copied().fold(lo, f64::max);
    let digits = if hi >= 100.0 { 0 } else { 2 };
    if (hi - lo).abs() < 0.005 {
        format!("{lo:.digits$}")
    } else {
        format!("{lo:.digits$}-{hi:.digits$}")
    }
}

/// [`range`] with a unit, or `-` where there is no value.
fn with_unit(xs: &[f64], unit: &str) -> String {
    match range(xs) {
        r if r == "-" => r,
        r => r + unit,
    }
}

/// N: never-seen and repeated searches through the daemon, alone and from every session,
/// `get_issue` and `server_ping` alone, for every binary, beside the model alone on the
/// same never-seen texts (see the module's documentation).
async fn never_seen(bins: &[Binary], sessions: usize, calls: usize) {
    let rounds = env_usize("CAIRN_LOAD_ROUNDS", 1).max(1);
    let big = env_usize("CAIRN_LOAD_BIG", 10_000);
    let mut seeds = Vec::new();
    for bin in bins {
        seeds.push(n_seeds(bin, sessions, big).await);
    }
    let texts: Vec<String> = (0..sessions)
        .flat_map(|s| {
            (0..calls).map(move |i| {
                args("search_learnings", s, i, Queries::Unique)["query"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
        })
        .collect();
    let n = bins.len();
    // runs[round][binary][workload], and the model's figures of each round.
    let mut runs: Vec<Vec<Vec<Figures>>> = Vec::new();
    let mut models = Vec::new();
    for round in 0..rounds {
        let mut by_bin: Vec<Vec<Option<Figures>>> = (0..n)
            .map(|_| WORKLOADS.iter().map(|_| None).collect())
            .collect();
        for (w, work) in WORKLOADS.iter().enumerate() {
            // The binaries in turn, each workload and round starting with the next one,
            // so that none always runs first.
            for j in 0..n {
                let b = (round + w + j) % n;
                let seed = match work.seed {
                    Which::Similar => &seeds[b].similar,
                    Which::Eval => &seeds[b].eval,
                    Which::Big => &seeds[b].big,
                };
                let mut copy = seed.copy();
                copy.issues
                    .truncate(if work.every_session { sessions } else { 1 });
                let mut f =
                    topology_b(&copy, calls, work.tool, work.queries, Duration::ZERO, &[]).await;
                f.name = format!("{} N, round {}: {}", bins[b].label, round + 1, work.what);
                print(&f);
                by_bin[b][w] = Some(f);
            }
            if w == LOADED {
                eprintln!(
                    "[load] N: the model alone on the same {} texts",
                    texts.len()
                );
                models.push(model_alone(&texts));
            }
        }
        runs.push(
            by_bin
                .into_iter()
                .map(|ws| ws.into_iter().map(Option::unwrap).collect())
                .collect(),
        );
    }
    n_table(bins, sessions, big, &runs, &models);
}

/// N's table: each figure for every binary (the range over the rounds), the model's, each
/// binary against the model and the current binary against each baseline, per round.
fn n_table(
    bins: &[Binary],
    k: usize,
    big: usize,
    runs: &[Vec<Vec<Figures>>],
    models: &[ModelFigures],
) {
    let p50 = |w: usize| move |f: &[Figures]| pct(&f[w].per_tool[0], 0.5);
    let eval = eval_learnings().len();
    let rows: Vec<NRow> = vec![
        (
            "lone never-seen search p50 ms (model: one text, best of 1 and 2 threads)".into(),
            Box::new(p50(LONE)),
            Some((|m| m.p50_ms, Against::Difference)),
            "at most +1 ms",
        ),
        (
            format!("CPU ms per never-seen search, {k} sessions (model: per text, 1 thread)"),
            Box::new(|f| f[LOADED].cpu_ms_per_call),
            Some((|m| m.cpu_ms, Against::Ratio)),
            "at most 1.2x",
        ),
        (
            format!(
                "never-seen searches per second, {k} sessions (model: texts/s, one 1-thread \
                 process per core)"
            ),
            Box::new(|f| f[LOADED].calls as f64 / f[LOADED].wall.as_secs_f64()),
            Some((|m| m.per_second, Against::Ratio)),
            "at least 0.8x",
        ),
        (
            format!("texts per model run, {k} sessions"),
            Box::new(|f| f[LOADED].texts_per_model_run),
            None,
            "-",
        ),
        (
            format!("repeated query p50 ms, {k} sessions"),
            Box::new(p50(REPEATED)),
            None,
            "-",
        ),
        (
            format!("repeated query p50 ms, lone, {eval} learnings of tests/eval"),
            Box::new(p50(EVAL)),
            None,
            "below 1 ms",
        ),
        (
            format!("repeated query p50 ms, lone, {big} learnings"),
            Box::new(p50(BIG)),
            None,
            "below 1 ms",
        ),
        (
            "get_issue p50 ms, lone".into(),
            Box::new(p50(GET_ISSUE)),
            None,
            "no slower than before",
        ),
        (
            "server_ping p50 ms, lone".into(),
            Box::new(p50(PING)),
            None,
            "-",
        ),
        (
            "CPU ms per lone never-seen search (model: per text, 1 thread)".into(),
            Box::new(|f| f[LONE].cpu_ms_per_call),
            Some((|m| m.cpu_ms, Against::Ratio)),
            "-",
        ),
        (
            "errors, all workloads".into(),
            Box::new(|f| f.iter().map(|x| x.errors as f64).sum()),
            None,
            "0",
        ),
    ];
    let n = bins.len();
    println!(
        "\nN: never-seen and repeated searches beside the model alone ({} round(s); each cell \
         the range over the rounds, ratios taken within a round; model: raw ONNX Runtime on \
         the same never-seen texts, one at a time)\n",
        runs.len()
    );
    let mut head = "| figure |".to_string();
    for b in bins {
        head += &format!(" {} |", b.label);
    }
    head += " model alone |";
    for b in bins {
        head += &format!(" {} vs model |", b.label);
    }
    for b in &bins[1..] {
        head += &format!(" {} / {} |", bins[0].label, b.label);
    }
    head += " goal |";
    let columns = 1 + n + 1 + n + (n - 1) + 1;
    println!("{head}\n{}", "|---".repeat(columns) + "|");
    for (label, of, model, goal) in &rows {
        let value = |round: usize, b: usize| of(&runs[round][b]);
        let rounds = 0..runs.len();
        let mut line = format!("| {label} |");
        for b in 0..n {
            let xs: Vec<f64> = rounds.clone().map(|r| value(r, b)).collect();
            line += &format!(" {} |", range(&xs));
        }
        match model {
            Some((m, against)) => {
                let xs: Vec<f64> = models.iter().map(m).collect();
                line += &format!(" {} |", range(&xs));
                for b in 0..n {
                    let xs: Vec<f64> = rounds
                        .clone()
                        .map(|r| match against {
                            Against::Difference => value(r, b) - m(&models[r]),
                            Against::Ratio => value(r, b) / m(&models[r]),
                        })
                        .collect();
                    line += &match against {
                        Against::Difference => format!(" {} |", with_unit(&xs, " ms")),
                        Against::Ratio => format!(" {} |", with_unit(&xs, "x")),
                    };
                }
            }
            None => line += &" - |".repeat(1 + n),
        }
        for b in 1..n {
            let xs: Vec<f64> = rounds.clone().map(|r| value(r, 0) / value(r, b)).collect();
            line += &format!(" {} |", with_unit(&xs, "x"));
        }
        println!("{line} {goal} |");
    }
    let loads = |b: usize| -> Vec<f64> {
        runs.iter()
            .flat_map(|r| r[b].iter().map(|f| f.load))
            .collect()
    };
    for (b, bin) in bins.iter().enumerate() {
        println!(
            "load average (1 min) at the start of {}'s runs: {}",
            bin.label,
            range(&loads(b))
        );
    }
    println!(
        "load average at the start of the model's runs: {}; model p50 with 1 thread {}, with 2 \
         threads {} ms",
        range(&models.iter().map(|m| m.load).collect::<Vec<_>>()),
        range(&models.iter().map(|m| m.p50_one_thread).collect::<Vec<_>>()),
        range(&models.iter().map(|m| m.p50_two_threads).collect::<Vec<_>>()),
    );
}

fn print(f: &Figures) {
    println!(
        "\n{}: {} calls, {} errors, {:.1} s, {:.0} calls/s, peak RSS of all Cairn processes {:.0} MiB, \
         their CPU {:.2} ms per call; load average {:.1}",
        f.name,
        f.calls,
        f.errors,
        f.wall.as_secs_f64(),
        f.calls as f64 / f.wall.as_secs_f64(),
        f.rss_mib,
        f.cpu_ms_per_call,
        f.load
    );
    println!("| tool | calls | p50 ms | p99 ms |");
    println!("|---|---|---|---|");
    for (tool, xs) in f.tools.iter().zip(&f.per_tool) {
        println!(
            "| {tool} | {} | {:.2} | {:.2} |",
            xs.len(),
            pct(xs, 0.5),
            pct(xs, 0.99)
        );
    }
    println!(
        "| first {} of a session | {} | {:.2} | max {:.2} |",
        f.tools[0],
        f.first.len(),
        pct(&f.first, 0.5),
        pct(&f.first, 1.0)
    );
    if !f.texts_per_model_run.is_nan() {
        println!(
            "the daemon's embedding model ran {:.2} texts per run (queries sharing a run)",
            f.texts_per_model_run
        );
    }
    match f.lag.catch_up {
        Some(d) => println!(
            "learnings awaiting their embedding when the last call returned: {}, all embedded {:.0} ms later",
            f.lag.unembedded,
            d.as_secs_f64() * 1e3
        ),
        None => println!(
            "learnings awaiting their embedding when the last call returned: {} (left to the next process)",
            f.lag.unembedded
        ),
    }
}

/// A row of the side-by-side table: its label and how to read it off a topology.
type Row = (String, Box<dyn Fn(&Figures) -> f64>);

/// The topologies' figures in columns, then the ratio of each pair `(a, b)` of columns
/// as `a / b`.
fn side_by_side(all: &[&Figures], ratios: &[(usize, usize)]) {
    if all.is_empty() {
        return;
    }
    let mut head = "| figure |".to_string();
    let mut rule = "|---|".to_string();
    for f in all {
        head += &format!(" {} |", f.name);
        rule += "---|";
    }
    for (a, b) in ratios {
        head += &format!(" {} / {} |", short(&all[*a].name), short(&all[*b].name));
        rule += "---|";
    }
    println!("\n{head}\n{rule}");
    let mut rows: Vec<Row> = Vec::new();
    for (t, tool) in TOOLS.iter().enumerate() {
        rows.push((
            format!("{tool} p50 ms"),
            Box::new(move |f: &Figures| pct(&f.per_tool[t], 0.5)),
        ));
        rows.push((
            format!("{tool} p99 ms"),
            Box::new(move |f: &Figures| pct(&f.per_tool[t], 0.99)),
        ));
    }
    rows.push((
        "calls/s".into(),
        Box::new(|f: &Figures| f.calls as f64 / f.wall.as_secs_f64()),
    ));
    rows.push((
        "peak total RSS MiB".into(),
        Box::new(|f: &Figures| f.rss_mib),
    ));
    rows.push((
        "Cairn CPU ms per call".into(),
        Box::new(|f: &Figures| f.cpu_ms_per_call),
    ));
    rows.push((
        "first vault_retrieve p50 ms".into(),
        Box::new(|f: &Figures| pct(&f.first, 0.5)),
    ));
    rows.push((
        "first vault_retrieve max ms".into(),
        Box::new(|f: &Figures| pct(&f.first, 1.0)),
    ));
    rows.push((
        "learnings unembedded at the end".into(),
        Box::new(|f: &Figures| f.lag.unembedded as f64),
    ));
    rows.push((
        "embedding catch-up ms".into(),
        Box::new(|f: &Figures| f.lag.catch_up.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)),
    ));
    rows.push(("errors".into(), Box::new(|f: &Figures| f.errors as f64)));
    rows.push(("load average".into(), Box::new(|f: &Figures| f.load)));
    for (label, value) in rows {
        let mut line = format!("| {label} |");
        for f in all {
            line += &format!(" {:.2} |", value(f));
        }
        for (a, b) in ratios {
            let (a, b) = (value(all[*a]), value(all[*b]));
            line += &if b == 0.0 {
                " - |".to_string()
            } else {
                format!(" {:.3} |", a / b)
            };
        }
        println!("{line}");
    }
}

fn short(name: &str) -> &str {
    name.split(':').next().unwrap_or(name)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not used.
    let sessions = env_usize("CAIRN_LOAD_SESSIONS", 8).max(1);
    let calls = env_usize("CAIRN_LOAD_CALLS", 300).max(1);
    let wanted = std::env::var("CAIRN_LOAD_TOPOLOGIES").unwrap_or_else(|_| "a,b,l,c,u,p,m".into());
    let wanted: Vec<&str> = wanted.split(',').map(str::trim).collect();
    let think = Duration::from_millis(env_usize("CAIRN_LOAD_THINK_MS", 20) as u64);
    let bins = binaries::binaries();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        println!(
            "[load] {sessions} sessions x {calls} calls, {} cores; binaries: {}",
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            bins.iter()
                .map(|b| format!("{} ({})", b.label, b.path.display()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        // The mixed workload's seed, one per binary (N seeds its own).
        let mut seeds = Vec::new();
        if wanted.iter().any(|t| *t != "n") {
            for bin in &bins {
                eprintln!(
                    "[load] {}: seeding samples/docs into the vault, {sessions} issues, 100 learnings",
                    bin.label
                );
                seeds.push(seed(bin, sessions).await);
            }
        }
        // figures[binary]: each topology's, in `wanted` order.
        let mut figures: Vec<Vec<Figures>> = bins.iter().map(|_| Vec::new()).collect();
        for (i, t) in wanted.iter().enumerate() {
            match *t {
                "t" => {
                    for seed in &seeds {
                        tools_alone(seed, calls).await;
                    }
                    continue;
                }
                "n" => {
                    never_seen(&bins, sessions, calls).await;
                    continue;
                }
                _ => {}
            }
            // The binaries in turn, each topology starting with the next one.
            for j in 0..bins.len() {
                let b = (i + j) % bins.len();
                let copy = seeds[b].copy();
                let mut f = match *t {
                    "a" => topology_a(&copy, calls).await,
                    "b" => {
                        topology_b(&copy, calls, &TOOLS, Queries::Repeated, Duration::ZERO, &[])
                            .await
                    }
                    "l" => {
                        let no_lanes = ["--shared-lanes", "0"];
                        topology_b(
                            &copy,
                            calls,
                            &TOOLS,
                            Queries::Repeated,
                            Duration::ZERO,
                            &no_lanes,
                        )
                        .await
                    }
                    "u" => {
                        topology_b(&copy, calls, &TOOLS, Queries::Unique, Duration::ZERO, &[])
                            .await
                    }
                    "m" => {
                        NO_MERGE.store(true, Ordering::Relaxed);
                        let f = topology_b(
                            &copy,
                            calls,
                            &TOOLS,
                            Queries::Repeated,
                            Duration::ZERO,
                            &[],
                        )
                        .await;
                        NO_MERGE.store(false, Ordering::Relaxed);
                        f
                    }
                    "p" => topology_b(&copy, calls, &TOOLS, Queries::Repeated, think, &[]).await,
                    "c" => topology_c(&copy, calls).await,
                    other => panic!("unknown topology {other:?} (a, b, l, c, u, p, m, t, n)"),
                };
                if bins.len() > 1 {
                    f.name = format!("{} {}", bins[b].label, f.name);
                }
                print(&f);
                figures[b].push(f);
            }
        }
        // The current binary's topologies, each against the first.
        let current: Vec<&Figures> = figures[0].iter().collect();
        let against_first: Vec<(usize, usize)> = (1..current.len()).map(|i| (i, 0)).collect();
        side_by_side(&current, &against_first);
        // Each baseline beside the current binary, topology by topology: current / baseline.
        for baseline in &figures[1..] {
            let pairs: Vec<&Figures> = current
                .iter()
                .zip(baseline)
                .flat_map(|(c, b)| [*c, b])
                .collect();
            let ratios: Vec<(usize, usize)> =
                (0..current.len()).map(|i| (2 * i, 2 * i + 1)).collect();
            side_by_side(&pairs, &ratios);
        }
    });
}
