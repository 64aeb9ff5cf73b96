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
//! - **N, never-seen searches beside the model** (not in the default list; issue 39): B
//!   with every session calling only `search_learnings` with U's never-sent texts, once
//!   with one session (a lone query's latency) and once with all K (CPU per search and
//!   searches per second under load); beside them, the same texts embedded by the model
//!   alone, raw ONNX Runtime in Python on the same model files
//!   (`tests/reference_embed.py --single`: tokenize, run at batch 1, pool, one text at a
//!   time): per-text p50 with one intra-op thread and with two, CPU per text with one,
//!   and texts per second with one one-thread process per core at once. One table puts
//!   each daemon figure beside the model's, with the goals, and the texts per run of the
//!   daemon's model (`cairn_model_texts_total` over `cairn_model_runs_total` on its
//!   `/metrics`, read before and after; every topology with a daemon prints it).
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
//! Knobs: `CAIRN_LOAD_SESSIONS` (8), `CAIRN_LOAD_CALLS` (300), `CAIRN_LOAD_TOPOLOGIES`
//! (`a,b,l,c,u,p,m`; add `t` for T, `n` for N), `CAIRN_LOAD_THINK_MS` (20, P's pause), `CAIRN_LOAD_KEEPALIVE` (1),
//! `CAIRN_LOAD_DAEMON_LOG` (`warn`: the daemon's `CAIRN_LOG`; `cairn::mcp::server=debug`
//! logs each call's time in its handler, to tell it from the transport's).

#![allow(clippy::print_stderr, clippy::print_stdout)]

mod reference;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
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

type Client = RunningService<RoleClient, ()>;

fn cairn() -> &'static str {
    env!("CARGO_BIN_EXE_cairn")
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Run the CLI on `db`; its stdout, or a panic with its stderr.
fn cli(db: &Path, args: &[&str]) -> String {
    let out = Command::new(cairn())
        .arg("--db")
        .arg(db)
        .args(args)
        .env("CAIRN_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cairn {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A seeded database directory.
struct Seed {
    dir: tempfile::TempDir,
    issues: Vec<String>,
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
        }
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

async fn seed(sessions: usize) -> Seed {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cairn.db");
    let docs = repo().join("samples/docs");
    let docs = docs.to_string_lossy();
    cli(
        &db,
        &[
            "project", "create", "--slug", "web", "--name", "web", "--path", &docs,
        ],
    );
    cli(&db, &["reindex", &docs, "--project", "web"]);
    let issues: Vec<String> = (0..sessions)
        .map(|i| {
            cli(
                &db,
                &[
                    "issue",
                    "create",
                    "--project",
                    "web",
                    "--title",
                    &format!("Session {i}"),
                ],
            )
            .trim()
            .to_string()
        })
        .collect();
    let (c, _) = stdio(&db, &issues[0], &[]).await;
    for i in 0..100 {
        call(&c, "add_learning", add_learning_args(usize::MAX, i)).await;
    }
    let _ = c.cancel().await;
    Seed { dir, issues }
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
        "server_ping" => json!({}),
        _ => unreachable!(),
    }
}

/// Call a tool; whether it succeeded.
async fn call(c: &Client, tool: &str, args: Value) -> bool {
    let Value::Object(map) = args else {
        unreachable!()
    };
    let p = CallToolRequestParams::new(tool.to_string()).with_arguments(map);
    match c.call_tool(p).await {
        Ok(r) => r.is_error != Some(true),
        Err(_) => false,
    }
}

/// Start `cairn serve` bound to `issue`; the client and the server's pid.
async fn stdio(db: &Path, issue: &str, extra: &[&str]) -> (Client, u32) {
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let (transport, _) =
        TokioChildProcess::builder(tokio::process::Command::new(cairn()).configure(|c| {
            c.arg("--db")
                .arg(db)
                .arg("serve")
                .args(["--issue-id", issue])
                .args(&extra);
            c.env("CAIRN_LOG", "warn");
        }))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = transport.id().unwrap();
    (().serve(transport).await.unwrap(), pid)
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
    /// `/metrics`): how far concurrent queries shared runs. NaN without a daemon.
    texts_per_model_run: f64,
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
    }
}

async fn topology_a(seed: &Seed, calls: usize) -> Figures {
    let db = seed.db();
    let mut clients = Vec::new();
    let mut pids = Vec::new();
    for issue in &seed.issues {
        let (c, pid) = stdio(&db, issue, &["--no-daemon"]).await;
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
    fn start(db: &Path, args: &[&str]) -> Daemon {
        let mut child = Command::new(cairn())
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
    let mut daemon = Daemon::start(&db, daemon_args);
    wait_warm(&mut daemon).await;
    let mut clients = Vec::new();
    for issue in &seed.issues {
        let token = cli(&db, &["session", "new", "--issue", issue])
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
    let mut daemon = Daemon::start(&db, &[]);
    wait_warm(&mut daemon).await;
    let mut clients = Vec::new();
    let mut pids = vec![daemon.pid()];
    for issue in &seed.issues {
        let (c, pid) = stdio(&db, issue, &[]).await;
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
        "\nT: B with each tool alone (every session calls only that tool, or those tools in turn)\n"
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

/// N: never-seen searches through the daemon, alone and from every session, beside the
/// model alone on the same texts (see the module's documentation).
async fn never_seen(seed: &Seed, calls: usize) {
    // B with `sessions` of the seed's sessions, each calling only `search_learnings` with
    // never-sent texts.
    let searches = async |sessions: usize| {
        let mut copy = seed.copy();
        copy.issues.truncate(sessions);
        let mut f = topology_b(
            &copy,
            calls,
            &["search_learnings"],
            Queries::Unique,
            Duration::ZERO,
            &[],
        )
        .await;
        f.name = format!("N{sessions}: {sessions} session(s), never-seen searches only");
        print(&f);
        f
    };
    let k = seed.issues.len();
    let lone = searches(1).await;
    let loaded = searches(k).await;
    let texts: Vec<String> = (0..k)
        .flat_map(|s| {
            (0..calls).map(move |i| {
                args("search_learnings", s, i, Queries::Unique)["query"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
        })
        .collect();
    eprintln!(
        "[load] N: the model alone on the same {} texts",
        texts.len()
    );
    let one = model_single(&texts, 1, "off");
    let two = model_single(&texts, 2, "default");
    // One one-thread process per core, all at once: what the model alone embeds per
    // second on this machine.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let parts: Vec<&[String]> = texts.chunks(texts.len().div_ceil(cores)).collect();
    let model_qps: f64 = std::thread::scope(|sc| {
        let running: Vec<_> = parts
            .iter()
            .map(|part| sc.spawn(move || model_single(part, 1, "off")))
            .collect();
        running
            .into_iter()
            .map(|h| 1e3 / h.join().unwrap().mean_ms)
            .sum()
    });
    let lone_p50 = pct(&lone.per_tool[0], 0.5);
    let model_p50 = one.p50_ms.min(two.p50_ms);
    let qps = loaded.calls as f64 / loaded.wall.as_secs_f64();
    println!(
        "\nN: never-seen searches beside the model alone (the same texts; model: raw ONNX \
         Runtime, one text at a time: p50 {:.2} ms with 1 thread, {:.2} ms with 2; CPU {:.2} \
         ms per text with 1 thread)\n",
        one.p50_ms, two.p50_ms, one.cpu_ms
    );
    println!("| figure | Cairn daemon | model alone | Cairn vs model | goal |");
    println!("|---|---|---|---|---|");
    println!(
        "| lone never-seen search p50 ms (model: one text, best of 1 and 2 threads) | {lone_p50:.2} | \
         {model_p50:.2} | {:+.2} ms | at most +1 ms |",
        lone_p50 - model_p50
    );
    println!(
        "| CPU ms per never-seen search, {k} sessions (model: per text, 1 thread) | {:.2} | {:.2} \
         | {:.2}x | at most 1.2x |",
        loaded.cpu_ms_per_call,
        one.cpu_ms,
        loaded.cpu_ms_per_call / one.cpu_ms
    );
    println!(
        "| never-seen searches per second, {k} sessions (model: texts/s, one 1-thread process \
         per core) | {qps:.0} | {model_qps:.0} | {:.2}x | at least 0.8x |",
        qps / model_qps
    );
    println!(
        "| texts per model run, {k} sessions (model alone: one per run) | {:.2} | 1 | - | - |",
        loaded.texts_per_model_run
    );
    println!(
        "| CPU ms per lone never-seen search (model: per text, 1 thread) | {:.2} | {:.2} | {:.2}x | - |",
        lone.cpu_ms_per_call,
        one.cpu_ms,
        lone.cpu_ms_per_call / one.cpu_ms
    );
}

fn print(f: &Figures) {
    println!(
        "\n{}: {} calls, {} errors, {:.1} s, {:.0} calls/s, peak RSS of all Cairn processes {:.0} MiB, \
         their CPU {:.2} ms per call",
        f.name,
        f.calls,
        f.errors,
        f.wall.as_secs_f64(),
        f.calls as f64 / f.wall.as_secs_f64(),
        f.rss_mib,
        f.cpu_ms_per_call
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

fn side_by_side(all: &[Figures]) {
    let Some(base) = all.first() else { return };
    let mut head = "| figure |".to_string();
    let mut rule = "|---|".to_string();
    for f in all {
        head += &format!(" {} |", f.name);
        rule += "---|";
    }
    for f in &all[1..] {
        head += &format!(" {} / {} |", short(&f.name), short(&base.name));
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
    for (label, value) in rows {
        let mut line = format!("| {label} |");
        for f in all {
            line += &format!(" {:.2} |", value(f));
        }
        let b = value(base);
        for f in &all[1..] {
            let v = value(f);
            line += &if b == 0.0 {
                " - |".to_string()
            } else {
                format!(" {:.3} |", v / b)
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
    let think = Duration::from_millis(env_usize("CAIRN_LOAD_THINK_MS", 20) as u64);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        eprintln!("[load] seeding: samples/docs into the vault, {sessions} issues, 100 learnings");
        let seed = seed(sessions).await;
        println!(
            "[load] {sessions} sessions x {calls} calls ({} each of {}), one database, {} cores",
            calls / TOOLS.len(),
            TOOLS.join(", "),
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
        let mut all = Vec::new();
        for t in wanted.split(',') {
            match t.trim() {
                "t" => {
                    tools_alone(&seed, calls).await;
                    continue;
                }
                "n" => {
                    never_seen(&seed, calls).await;
                    continue;
                }
                _ => {}
            }
            let copy = seed.copy();
            let f = match t.trim() {
                "a" => topology_a(&copy, calls).await,
                "b" => {
                    topology_b(&copy, calls, &TOOLS, Queries::Repeated, Duration::ZERO, &[]).await
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
                "u" => topology_b(&copy, calls, &TOOLS, Queries::Unique, Duration::ZERO, &[]).await,
                "m" => {
                    NO_MERGE.store(true, Ordering::Relaxed);
                    let f =
                        topology_b(&copy, calls, &TOOLS, Queries::Repeated, Duration::ZERO, &[])
                            .await;
                    NO_MERGE.store(false, Ordering::Relaxed);
                    f
                }
                "p" => topology_b(&copy, calls, &TOOLS, Queries::Repeated, think, &[]).await,
                "c" => topology_c(&copy, calls).await,
                other => panic!("unknown topology {other:?} (a, b, l, c, u, p, m, t, n)"),
            };
            print(&f);
            all.push(f);
        }
        side_by_side(&all);
    });
}
