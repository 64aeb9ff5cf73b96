//! No document starves the others (issue 62, item 3): a large Markdown file in a followed
//! root, or sent through `vault_update`, while another session searches learnings with
//! queries the model has never seen, another root is edited, and the daemon is stopped.
//! The real daemon, the real model, real files.
//!
//! Every check is counted, not timed: a search answers while the file's embedding is
//! provably still running (the file is not stored before and after, and the daemon's
//! `cairn_model_queries_beside_documents_total` counts query runs made while a document
//! batch ran); the other root's edit is in the database while the large file is not; the
//! lease's heartbeat moves while the large file is not stored. The durations (search
//! latency, the edit's delay, SIGTERM to exit) and the daemon's RSS are printed for the
//! record; SIGTERM's exit is held to the product's bound of 5 s. Nothing sleeps to
//! synchronise: every wait polls its condition (every [`POLL`]) under a deadline.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::Env;
use crate::daemon::{Daemon, http, http_within, mint};

/// A deadline that only catches a hang.
const HANG: Duration = Duration::from_secs(120);
/// The product's bound on a SIGTERM's exit with a large file being embedded.
const STOP_BOUND: Duration = Duration::from_secs(5);
/// How often a wait looks at its condition again (a poll interval, not a guess at how
/// long anything takes).
const POLL: Duration = Duration::from_millis(20);
/// The per-file budget (`MAX_FILE_CHUNKS`, docs/vault.md "A per-file budget").
const BUDGET: usize = 8_192;

/// Write `bytes` of distinct paragraphs (about 400 bytes each, a heading every twenty)
/// to `path`; the number of chunks the vault's chunker makes of it.
fn large_markdown(path: &Path, bytes: usize, seed: u64) -> usize {
    const WORDS: [&str; 48] = [
        "cache",
        "queue",
        "retry",
        "lease",
        "index",
        "vector",
        "commit",
        "rollback",
        "schema",
        "shard",
        "replica",
        "backoff",
        "token",
        "session",
        "worker",
        "batch",
        "stream",
        "parser",
        "buffer",
        "socket",
        "thread",
        "kernel",
        "signal",
        "journal",
        "ledger",
        "invoice",
        "tenant",
        "billing",
        "export",
        "import",
        "migration",
        "deadline",
        "timeout",
        "budget",
        "latency",
        "quorum",
        "follower",
        "leader",
        "snapshot",
        "checksum",
        "manifest",
        "bundle",
        "plugin",
        "gateway",
        "router",
        "fixture",
        "harness",
        "probe",
    ];
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    let mut written = 0;
    let mut i = 0usize;
    while written < bytes {
        let mut para = String::new();
        if i.is_multiple_of(20) {
            para.push_str(&format!("## Section {seed}-{}\n\n", i / 20));
        }
        para.push_str(&format!("Paragraph {seed}-{i}:"));
        while para.len() < 400 {
            para.push(' ');
            para.push_str(WORDS[next() % WORDS.len()]);
        }
        para.push_str(".\n\n");
        let para = &para[..para.len().min(bytes - written)];
        out.write_all(para.as_bytes()).unwrap();
        written += para.len();
        i += 1;
    }
    out.flush().unwrap();
    drop(out);
    cairn::vault::chunk::chunk_markdown(&std::fs::read(path).unwrap())
        .chunks
        .len()
}

/// Documents stored under `path` (any root), from the database.
fn stored(env: &Env, path: &str) -> i64 {
    env.store()
        .read(|c| {
            c.query_row(
                "SELECT count(*) FROM vault_documents WHERE path = ?1",
                [path],
                |r| r.get::<_, i64>(0),
            )
        })
        .unwrap()
}

/// Chunks stored for documents at `path`.
fn stored_chunks(env: &Env, path: &str) -> i64 {
    env.store()
        .read(|c| {
            c.query_row(
                "SELECT count(*) FROM vault_chunks c JOIN vault_documents d
                 ON c.document_id = d.id WHERE d.path = ?1",
                [path],
                |r| r.get::<_, i64>(0),
            )
        })
        .unwrap()
}

/// The stored text of the chunks of `path`, joined.
fn stored_text(env: &Env, path: &str) -> String {
    let texts: Vec<String> = env
        .store()
        .read(|c| {
            c.query_map(
                "SELECT c.text FROM vault_chunks c JOIN vault_documents d
                 ON c.document_id = d.id WHERE d.path = ?1 ORDER BY c.ordinal",
                [path],
                |r| r.get(0),
            )
        })
        .unwrap();
    texts.join("\n")
}

/// The heartbeat of the lease on the root recorded for directory `dir`.
fn heartbeat(env: &Env, dir: &Path) -> Option<String> {
    let dir = dir.to_string_lossy().into_owned();
    env.store()
        .read(|c| {
            c.query_row(
                "SELECT heartbeat_at FROM vault_roots WHERE dir = ?1 AND prefix = ''",
                [dir.as_str()],
                |r| r.get::<_, Option<String>>(0),
            )
        })
        .unwrap()
}

/// One sample of the daemon's `/metrics` (a metric without labels).
fn metric(d: &Daemon, name: &str) -> f64 {
    let r = http(d.addr, "GET", "/metrics", &[], None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{}", r.body))
}

/// The daemon's resident memory, in MiB.
fn rss_mib(d: &Daemon) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.child.id())).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS");
    kb / 1024.0
}

/// Poll `done` until it holds; panics with `what` after [`HANG`].
fn wait_until(what: &str, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < HANG, "{what}: not after {HANG:?}");
        std::thread::sleep(POLL);
    }
    started.elapsed()
}

/// A `search_learnings` of a query the model has never seen (`n` makes it new); its
/// latency. The answer must be a success with the learning recorded for the test.
fn search(d: &Daemon, token: &str, n: usize) -> Duration {
    let query = format!("why did the nightly export number {n} time out after the schema change");
    let started = Instant::now();
    let r = d.call(token, "search_learnings", json!({"query": query}));
    let took = started.elapsed();
    assert_eq!(r["isError"], false, "{r}");
    took
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A project `shop` whose agents have recorded one learning (embedded), and a token for
/// another agent's session there.
fn searcher(env: &Env) -> String {
    env.project("shop", None);
    let issue = env.issue("shop", "exports");
    env.add_learning(
        &issue,
        "The nightly export times out when a migration locks the ledger table",
        None,
        &[],
        false,
    );
    mint(env, &["--project-id", "shop"]).0
}

/// Stop the daemon with SIGTERM; how long it took to exit (held to [`STOP_BOUND`]).
fn stop(mut d: Daemon) -> Duration {
    d.term();
    let started = Instant::now();
    loop {
        if let Some(status) = d.child.try_wait().unwrap() {
            let took = started.elapsed();
            assert!(status.success(), "{status:?}");
            assert!(took < STOP_BOUND, "SIGTERM took {took:?}");
            return took;
        }
        assert!(started.elapsed() < HANG, "the daemon did not exit");
        std::thread::sleep(POLL);
    }
}

/// A 2 MiB file written into a followed root: while it is embedded, another session's
/// never-seen searches answer beside its batches, an edit in another followed root is
/// indexed, the lease's heartbeat moves; SIGTERM ends the daemon within 5 s and leaves
/// nothing of the file stored; the next daemon takes the file up again. A 16 MiB file
/// in the other root is over the per-file budget: skipped, and status says why.
#[test]
fn a_large_file_in_a_followed_root_starves_no_search_no_root_and_no_stop() {
    let env = Env::new();
    let token = searcher(&env);
    let base = std::fs::canonicalize(env.path()).unwrap();
    let big_root = base.join("handbook");
    let small_root = base.join("notes");
    std::fs::create_dir_all(&big_root).unwrap();
    std::fs::write(
        big_root.join("intro.md"),
        "# Intro\n\nThe handbook of the shop.\n",
    )
    .unwrap();
    std::fs::create_dir_all(&small_root).unwrap();
    std::fs::write(
        small_root.join("plan.md"),
        "# Plan\n\nShip the importer first.\n",
    )
    .unwrap();
    let huge = large_markdown(&small_root.join("huge.md"), (16 << 20) - 1024, 16);
    assert!(huge > BUDGET, "{huge} chunks");
    for root in [&big_root, &small_root] {
        let s = env.json(&["reindex", &root.to_string_lossy()]);
        assert_eq!(s["files_changed"], 1, "{s}");
        if root == &small_root {
            assert_eq!(s["files_skipped"], 1, "{s}");
            let why = s["skipped"][0]["reason"].as_str().unwrap();
            assert!(
                why.contains(&format!("{huge} chunks"))
                    && why.contains(&format!("budget of {BUDGET}")),
                "{s}"
            );
        }
    }

    let d = Daemon::start(&env, &[], &[]);
    d.wait_for("warm:");
    // Status says why the 16 MiB file is not indexed, once the claim's rescan ran.
    wait_until("status names the file over the budget", || {
        let st = env.json(&["vault", "status"]);
        st["collections"].as_array().unwrap().iter().any(|c| {
            c["roots"].as_array().unwrap().iter().any(|r| {
                r["following"] == "watching"
                    && r["reason"]
                        .as_str()
                        .is_some_and(|w| w.contains("huge.md has") && w.contains("per-file budget"))
            })
        })
    });
    assert_eq!(stored(&env, "huge.md"), 0);
    let quiet: Vec<Duration> = (0..5).map(|n| search(&d, &token, n)).collect();
    let rss_before = rss_mib(&d);

    let chunks = large_markdown(&big_root.join("big.md"), 2 << 20, 2);
    assert!(chunks > 4000 && chunks <= BUDGET, "{chunks} chunks");
    let texts = metric(&d, "cairn_model_texts_total");
    // Its embedding is under way: the model embeds chunks, none of the file is stored.
    wait_until("the large file's embedding to start", || {
        metric(&d, "cairn_model_texts_total") >= texts + 64.0
    });
    let lease = heartbeat(&env, &big_root);
    assert!(lease.is_some());
    let beside = metric(&d, "cairn_model_queries_beside_documents_total");
    assert_eq!(stored(&env, "big.md"), 0);
    let busy: Vec<Duration> = (100..105).map(|n| search(&d, &token, n)).collect();
    assert_eq!(
        stored(&env, "big.md"),
        0,
        "the file was embedded before the searches ended"
    );
    assert!(
        metric(&d, "cairn_model_queries_beside_documents_total") >= beside + 1.0,
        "no search ran beside a document batch"
    );

    // Another root stays fresh.
    std::fs::write(
        small_root.join("plan.md"),
        "# Plan\n\nShip the exporter before the importer.\n",
    )
    .unwrap();
    let edit = wait_until("the other root's edit to be indexed", || {
        stored_text(&env, "plan.md").contains("exporter")
    });
    assert_eq!(
        stored(&env, "big.md"),
        0,
        "the file was embedded before the edit"
    );

    // The lease is renewed while the batch runs (every HEARTBEAT, 15 s).
    wait_until("the lease's heartbeat to move", || {
        heartbeat(&env, &big_root) != lease
    });
    assert_eq!(
        stored(&env, "big.md"),
        0,
        "the file was embedded before the heartbeat"
    );
    let rss_during = rss_mib(&d);
    let done_before_stop = metric(&d, "cairn_model_texts_total") - texts;

    let took = stop(d);
    assert_eq!(stored(&env, "big.md"), 0);
    assert_eq!(stored_chunks(&env, "big.md"), 0);
    eprintln!(
        "[figures] {chunks} chunks; search_learnings median {:?} idle, {:?} during the \
         embedding (max {:?}); the other root's edit indexed in {edit:?}; RSS {rss_before:.0} \
         MiB before, {rss_during:.0} MiB during; {done_before_stop} chunks embedded before \
         SIGTERM, which took {took:?} to exit",
        median(quiet),
        median(busy.clone()),
        busy.iter().max().unwrap()
    );

    // The next daemon takes the file up again (the database is the truth).
    let d = Daemon::start(&env, &[], &[]);
    let texts = metric(&d, "cairn_model_texts_total");
    wait_until("the restarted daemon to embed the file again", || {
        metric(&d, "cairn_model_texts_total") >= texts + 64.0
    });
    stop(d);
    assert_eq!(stored(&env, "big.md"), 0);
}

/// `vault_update` of a 16 MiB file is refused at once with a structured error naming the
/// budget; of a 2 MiB file, it embeds while another session's never-seen searches answer
/// beside it, and SIGTERM ends the daemon within 5 s with the call answered and nothing
/// of the file stored.
#[test]
fn vault_update_of_a_large_file_starves_no_search_and_a_file_over_the_budget_is_refused() {
    let env = Env::new();
    let token = searcher(&env);
    let repo = std::fs::canonicalize(env.path()).unwrap().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    env.project("p", Some(&repo));
    let huge = large_markdown(&repo.join("docs/huge.md"), (16 << 20) - 1024, 16);
    let chunks = large_markdown(&repo.join("docs/big.md"), 2 << 20, 2);
    let (agent, _) = mint(&env, &["--project-id", "p"]);
    let d = Daemon::start(&env, &[], &[]);
    d.wait_for("warm:");

    let refused = d.call(&agent, "vault_update", json!({"path": "docs/huge.md"}));
    assert_eq!(refused["isError"], true, "{refused}");
    let envelope: Value =
        serde_json::from_str(refused["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(envelope["error"]["code"], "ERR_INVALID_INPUT", "{envelope}");
    assert_eq!(
        envelope["error"]["details"]["errors"][0]["field"], "path",
        "{envelope}"
    );
    let text = envelope.to_string();
    assert!(
        text.contains(&format!("{huge} chunks")) && text.contains(&format!("budget of {BUDGET}")),
        "{envelope}"
    );
    assert_eq!(stored(&env, "docs/huge.md"), 0);

    let texts = metric(&d, "cairn_model_texts_total");
    let (answer, took) = std::thread::scope(|s| {
        let call = s.spawn(|| {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "vault_update", "arguments": {"path": "docs/big.md"}}});
            let auth = format!("Bearer {agent}");
            // It runs until SIGTERM, however long the searches before it take.
            http_within(
                d.addr,
                "POST",
                "/mcp",
                &[("Authorization", &auth)],
                Some(&body.to_string()),
                Duration::from_secs(1800),
            )
        });
        wait_until("vault_update's embedding to start", || {
            metric(&d, "cairn_model_texts_total") >= texts + 64.0
        });
        let beside = metric(&d, "cairn_model_queries_beside_documents_total");
        let busy: Vec<Duration> = (200..205).map(|n| search(&d, &token, n)).collect();
        assert!(
            !call.is_finished(),
            "vault_update ended before the searches"
        );
        assert_eq!(stored(&env, "docs/big.md"), 0);
        assert!(
            metric(&d, "cairn_model_queries_beside_documents_total") >= beside + 1.0,
            "no search ran beside a document batch"
        );
        eprintln!(
            "[figures] vault_update of {chunks} chunks: search_learnings median {:?}, max {:?} beside it",
            median(busy.clone()),
            busy.iter().max().unwrap()
        );
        d.term();
        let started = Instant::now();
        let answer = call.join().unwrap();
        (answer, started)
    });
    // The call in flight was answered (an error saying the server stops), and the daemon
    // ended within the bound.
    assert_eq!(answer.status, 200, "{}", answer.body);
    let result = &answer.json()["result"];
    assert_eq!(result["isError"], true, "{result}");
    assert!(result.to_string().contains("stopping"), "{result}");
    let mut d = d;
    loop {
        if let Some(status) = d.child.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(took.elapsed() < HANG, "the daemon did not exit");
        std::thread::sleep(POLL);
    }
    let took = took.elapsed();
    eprintln!("[figures] SIGTERM during vault_update: exited in {took:?}");
    assert!(took < STOP_BOUND, "SIGTERM took {took:?}");
    assert_eq!(stored(&env, "docs/big.md"), 0);
    assert_eq!(stored_chunks(&env, "docs/big.md"), 0);
}

/// A run told to stop (a follower stopping, or the process) ends between model runs with
/// an error that says so, storing nothing of the files it had not embedded whole; the
/// next run stores each file whole. In process, with the test embedder.
#[test]
fn a_stopped_reindex_stores_nothing_of_its_files_and_the_next_run_stores_them_whole() {
    use cairn::vault::reindex::ReindexOptions;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("cairn.db");
    let docs = tmp.path().join("docs");
    let chunks = large_markdown(&docs.join("big.md"), 256 << 10, 3);
    std::fs::write(docs.join("small.md"), "# Small\n\nOne chunk.\n").unwrap();
    let cairn =
        cairn::Cairn::open_with_embedder(&db, Box::new(cairn::embed::HashEmbedder::new())).unwrap();
    let stop = Arc::new(AtomicBool::new(true));
    let opts = ReindexOptions {
        dir: docs.clone(),
        stop: Some(stop.clone()),
        ..Default::default()
    };
    let err = cairn.vault_reindex(&opts, &|_| {}).unwrap_err();
    assert!(err.to_string().contains("stopping"), "{err}");
    let count = |sql: &str| -> i64 {
        rusqlite::Connection::open(&db)
            .unwrap()
            .query_row(sql, [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count("SELECT count(*) FROM vault_documents"), 0);
    assert_eq!(count("SELECT count(*) FROM vault_chunks"), 0);

    stop.store(false, Ordering::SeqCst);
    let s = cairn.vault_reindex(&opts, &|_| {}).unwrap();
    assert_eq!(s.files_changed, 2, "{s:?}");
    assert_eq!(s.chunks_embedded, chunks + 1, "{s:?}");
    assert_eq!(
        count(
            "SELECT count(*) FROM vault_chunks c JOIN vault_documents d ON c.document_id = d.id WHERE d.path = 'big.md'"
        ),
        chunks as i64
    );
}
