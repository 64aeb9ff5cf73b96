//! The vault following its docs (issue 34): `cargo bench --bench follow`.
//!
//! Side by side in one run, with the real model, on 2 cores as CI has them:
//!
//! - **Single edits**: edit-to-searchable latency (p50, p95) of one file of a followed
//!   root of [`FILES`] documents: from the write until `vault_search` returns the new text
//!   (the follower in this process, as in the daemon), and how many of them a `fresh: true`
//!   search answered within its bound ([`FRESH_WAIT`]: the first wait is that long).
//! - **A burst**: every one of the [`FILES`] files rewritten at once (copied in by `cp`, a
//!   child process, so the writes cost this process nothing). Settle time, and this
//!   process's CPU-seconds (every thread: inotify, the follower, ONNX Runtime) per chunk
//!   embedded, beside `cairn reindex` of the same change on an identical copy (the
//!   reindex pipeline in this process, same thread count, no spinning): the ratio.
//! - **Idle**: a real `cairn daemon` following a root of [`IDLE_FILES`] unchanged files;
//!   its CPU over [`IDLE_WINDOW`] as a share of one core.
//!
//! `CAIRN_BENCH_EDITS` (default 40) sets the number of single edits.

#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::Cairn;
use cairn::embed::Spin;
use cairn::vault::follow_files::{FRESH_WAIT, FollowScope};
use cairn::vault::reindex::ReindexOptions;

/// Documents of the followed root (single edits and the burst).
const FILES: usize = 1000;
/// Documents of the idle daemon's root.
const IDLE_FILES: usize = 10_000;
/// How long the idle daemon is watched.
const IDLE_WINDOW: Duration = Duration::from_secs(30);

/// CPU-seconds this process has used (user + system, every thread).
fn process_cpu_seconds() -> f64 {
    cpu_seconds_of("self")
}

fn cpu_seconds_of(pid: &str) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}

/// A document of two short sections; `version` changes every sentence.
fn doc(i: usize, version: &str) -> String {
    format!(
        "# Service {i}\n\nService {i} retries {version} requests with backoff; its timeout is {} seconds.\n\n\
         ## Operations {i}\n\nOn call for service {i}: restart the {version} worker, then check the queue depth.\n",
        i % 60
    )
}

fn write_tree(dir: &Path, n: usize, version: &str) {
    for i in 0..n {
        let p = dir.join(format!("area{}/doc{i}.md", i % 20));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, doc(i, version)).unwrap();
    }
}

fn copy_over(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-r")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let followed = base.join("followed");
    let baseline = base.join("baseline");
    let staged = base.join("staged");
    write_tree(&followed, FILES, "first");
    write_tree(&baseline, FILES, "first");
    write_tree(&staged, FILES, "second");

    let cairn = Arc::new(Cairn::open(&base.join("bench.db")).unwrap());
    let reindex = |dir: &Path| {
        cairn
            .vault_reindex(
                &ReindexOptions {
                    dir: dir.to_path_buf(),
                    spin: Some(Spin::Off),
                    ..Default::default()
                },
                &|_| {},
            )
            .unwrap()
    };
    eprintln!("indexing two roots of {FILES} files ...");
    reindex(&followed);
    reindex(&baseline);
    let root = cairn
        .vault_followed_roots()
        .unwrap()
        .into_iter()
        .find(|r| r.path() == followed)
        .unwrap();
    let follower = cairn.follow_vault(FollowScope::Root(root.id)).unwrap();

    // Single edits.
    let edits: usize = std::env::var("CAIRN_BENCH_EDITS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let mut latencies = Vec::new();
    let mut fresh_in_bound = 0;
    for e in 0..edits {
        let i = (e * 37) % FILES;
        let token = format!("quokka{e}x");
        let path = followed.join(format!("area{}/doc{i}.md", i % 20));
        std::fs::write(&path, doc(i, &token)).unwrap();
        let t0 = Instant::now();
        // The first wait is a `fresh: true` search's.
        let mut bound = FRESH_WAIT;
        loop {
            let f = cairn.vault_wait_fresh(None, bound).unwrap();
            let hits = cairn
                .vault_search(&format!("restart the {token} worker"), Some(5), None, None)
                .unwrap();
            if hits.iter().any(|h| h.text.contains(&token)) {
                if f.complete && bound == FRESH_WAIT {
                    fresh_in_bound += 1;
                }
                break;
            }
            bound = Duration::from_secs(10);
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "edit {e} never searchable"
            );
        }
        latencies.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);

    // A burst: every file rewritten.
    let chunks_before = chunk_ids(&cairn);
    let cpu0 = process_cpu_seconds();
    let t0 = Instant::now();
    copy_over(&staged, &followed);
    loop {
        let f = cairn
            .vault_wait_fresh(None, Duration::from_secs(120))
            .unwrap();
        if f.complete && cairn.vault_sync(None, Duration::ZERO).unwrap().complete {
            break;
        }
    }
    let settle = t0.elapsed().as_secs_f64();
    let follow_cpu = process_cpu_seconds() - cpu0;
    let follow_chunks = chunk_ids(&cairn) - chunks_before;
    drop(follower);

    // The same change through `cairn reindex`.
    copy_over(&staged, &baseline);
    let cpu0 = process_cpu_seconds();
    let s = reindex(&baseline);
    let reindex_cpu = process_cpu_seconds() - cpu0;

    // Idle: a daemon following IDLE_FILES unchanged files.
    let idle = idle_daemon(&base);

    let per = |cpu: f64, n: u64| cpu / n.max(1) as f64 * 1000.0;
    println!("vault following (issue 34), {FILES} files, 2 chunks each, real model");
    println!(
        "  single edit to searchable: p50 {:.0} ms, p95 {:.0} ms, max {:.0} ms ({} edits; debounce 300 ms)",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.95),
        latencies.last().unwrap(),
        latencies.len()
    );
    println!(
        "  a `fresh: true` search (waits at most {} ms) answered with the edit: {fresh_in_bound} of {} edits",
        FRESH_WAIT.as_millis(),
        latencies.len()
    );
    println!(
        "  burst of {FILES} files: settled in {settle:.1} s; follower {follow_cpu:.1} CPU-s for {follow_chunks} chunks = {:.1} ms/chunk",
        per(follow_cpu, follow_chunks)
    );
    println!(
        "  cairn reindex of the same change: {:.1} s, {reindex_cpu:.1} CPU-s for {} chunks = {:.1} ms/chunk",
        s.seconds,
        s.chunks_embedded,
        per(reindex_cpu, s.chunks_embedded as u64)
    );
    println!(
        "  ratio (follower / reindex, CPU per chunk): {:.2}",
        per(follow_cpu, follow_chunks) / per(reindex_cpu, s.chunks_embedded as u64)
    );
    println!(
        "  idle daemon following {IDLE_FILES} files: {:.2}% of a core over {} s",
        idle * 100.0,
        IDLE_WINDOW.as_secs()
    );
}

/// The highest chunk id: chunks are never reused, so the difference is chunks written.
fn chunk_ids(cairn: &Cairn) -> u64 {
    cairn
        .store()
        .read(|c| {
            c.query_row("SELECT coalesce(max(id), 0) FROM vault_chunks", [], |r| {
                r.get::<_, i64>(0)
            })
        })
        .unwrap() as u64
}

/// A `cairn daemon` following [`IDLE_FILES`] files: its CPU share over [`IDLE_WINDOW`].
fn idle_daemon(base: &Path) -> f64 {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_cairn"));
    let dir = base.join("idle");
    for i in 0..IDLE_FILES {
        let p = dir.join(format!("d{}/n{i}.md", i % 100));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("# Note {i}\n\nnote {i}\n")).unwrap();
    }
    let db = base.join("idle.db");
    eprintln!("indexing {IDLE_FILES} files for the idle daemon ...");
    let status = Command::new(&bin)
        .arg("--db")
        .arg(&db)
        .arg("reindex")
        .arg(&dir)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let mut child = Command::new(&bin)
        .arg("--db")
        .arg(&db)
        .args(["daemon", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    // Let it start, claim and rescan the root, and warm up.
    let sync = || {
        Command::new(&bin)
            .arg("--db")
            .arg(&db)
            .args(["vault", "sync", "--timeout", "120s"])
            .stdout(Stdio::null())
            .status()
            .unwrap()
    };
    let started = Instant::now();
    while !std::fs::read_to_string(format!("{}.daemon.json", db.display()))
        .is_ok_and(|s| !s.is_empty())
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the daemon did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(sync().success());
    std::thread::sleep(Duration::from_secs(10));
    let cpu0 = cpu_seconds_of(&pid);
    std::thread::sleep(IDLE_WINDOW);
    let share = (cpu_seconds_of(&pid) - cpu0) / IDLE_WINDOW.as_secs_f64();
    let _ = child.kill();
    let _ = child.wait();
    share
}
