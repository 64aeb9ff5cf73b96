//! Two hosts on one PostgreSQL database (issue 12): each host runs its own `cairn daemon`
//! with its own `--cache-dir` (learnings index, HNSW graph, BM25 index), and agents'
//! `cairn serve` forward to their host's daemon. What one host writes, the other finds
//! on its next call; a host whose cache directory is deleted rebuilds it from the
//! database; and a host's daemon, woken by `LISTEN/NOTIFY`, catches its caches up in the
//! background, before any search on it.
//!
//! These tests use PostgreSQL whatever `CAIRN_TEST_STORE` says, and the real model.
//! Nothing sleeps to synchronise: conditions are polled against a deadline.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::pg::PgCluster;
use crate::common::{Client, Env};
use crate::daemon::Daemon;

/// A generous bound that only catches a hang.
const DEADLINE: Duration = Duration::from_secs(90);

const LEARNING: &str =
    "Ferry timetables must be read from the harbour feed, never hard-coded in the client";
const DOC: &str = "# Harbour\n\n## Ferries\n\nThe night ferry to the lighthouse island leaves \
                   from pier nine at a quarter past eleven.\n";
const VAULT_QUERY: &str = "when does the night ferry leave for the lighthouse island";

/// Host A's set-up on the shared database: project `p` (vault collection `p`) whose
/// repository is a git worktree with `docs/harbour.md`, and issue P-1 bound to it. Returns (worktree, issue).
fn project(a: &Env) -> (PathBuf, String) {
    let wt = a.path().join("wt");
    std::fs::create_dir_all(wt.join("docs")).unwrap();
    let out = Command::new("git")
        .arg("-C")
        .arg(&wt)
        .args(["init", "-q", "-b", "symphony/P-1"])
        .output()
        .expect("git runs");
    assert!(out.status.success(), "{out:?}");
    a.project("p", Some(&wt));
    // search_knowledge searches the project's collections; vault_update files the
    // document under the first one.
    a.ok(&["project", "configure", "p", "--vault-collection", "p"]);
    let issue = a.issue("p", "Harbour timetables");
    std::fs::write(wt.join(".symphony-worktree"), format!("{issue}\n")).unwrap();
    std::fs::write(wt.join("docs/harbour.md"), DOC).unwrap();
    (wt, issue)
}

/// `cairn serve` on `host`, bound to `issue`, forwarding to that host's daemon (checked
/// by the caller through the daemon's request count).
async fn agent(host: &Env, issue: &str, wt: Option<&Path>) -> Client {
    let wt = wt.map(|p| p.to_string_lossy().into_owned());
    let mut flags = vec!["--issue-id", issue];
    if let Some(wt) = &wt {
        flags.extend(["--worktree-path", wt.as_str()]);
    }
    host.serve(&flags).await
}

/// What host B's agent sees: learning ids, finding summaries, vault_retrieve paths and
/// search_knowledge paths.
#[derive(Debug, PartialEq)]
struct Seen {
    learnings: Vec<String>,
    findings: Vec<String>,
    retrieved: Vec<String>,
    knowledge: Vec<String>,
}

fn strings(v: &Value, list: &str, field: &str) -> Vec<String> {
    v[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {v}"))
        .iter()
        .map(|x| x[field].as_str().unwrap().to_string())
        .collect()
}

async fn seen(c: &Client) -> Seen {
    let l = c
        .ok(
            "search_learnings",
            json!({"query": "ferry timetables harbour feed"}),
        )
        .await;
    let issue = c.ok("get_issue", json!({})).await;
    let r = c
        .ok("vault_retrieve", json!({"query": VAULT_QUERY, "top_k": 3}))
        .await;
    let k = c
        .ok(
            "search_knowledge",
            json!({"query": VAULT_QUERY, "top_k": 3}),
        )
        .await;
    Seen {
        learnings: strings(&l, "results", "id"),
        findings: strings(&issue, "findings", "summary"),
        retrieved: strings(&r, "results", "path"),
        knowledge: strings(&k, "results", "path"),
    }
}

fn requests(d: &Daemon) -> u64 {
    d.health()["requests_served"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn what_one_host_writes_the_other_finds_and_a_deleted_cache_is_rebuilt() {
    let url = PgCluster::shared().create_database("multihost");
    let (a, b) = (Env::host(&url), Env::host(&url));
    let (wt, issue) = project(&a);
    let da = Daemon::start(&a, &[], &[]);
    let db = Daemon::start(&b, &[], &[]);
    assert_eq!(da.health()["following_changes"], true);
    assert_eq!(db.health()["following_changes"], true);

    // Host A writes a learning, a finding and a vault document.
    let before_a = requests(&da);
    let ca = agent(&a, &issue, Some(&wt)).await;
    let learning = ca.ok("add_learning", json!({"pattern": LEARNING})).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    ca.ok(
        "add_finding",
        json!({"category": "architecture", "summary": "Timetables come from the harbour feed"}),
    )
    .await;
    let u = ca
        .ok("vault_update", json!({"path": "docs/harbour.md"}))
        .await;
    assert_eq!(u["changed"], true, "{u}");
    ca.close().await;
    assert!(requests(&da) >= before_a + 3, "host A's agent forwarded");

    // Host B finds all three on its first calls.
    let before_b = requests(&db);
    let cb = agent(&b, &issue, None).await;
    let first = seen(&cb).await;
    cb.close().await;
    assert!(requests(&db) >= before_b + 4, "host B's agent forwarded");
    assert_eq!(first.learnings, std::slice::from_ref(&learning));
    assert_eq!(first.findings, ["Timetables come from the harbour feed"]);
    assert_eq!(
        first.retrieved.first().map(String::as_str),
        Some("docs/harbour.md")
    );
    assert_eq!(
        first.knowledge.first().map(String::as_str),
        Some("docs/harbour.md")
    );
    // Host B's caches are its own: nothing of them is in host A's cache directory.
    let b_index = index_dir(&b);
    assert!(b_index.join("learnings/meta.json").exists());
    assert!(!b_index.starts_with(a.path()));

    // Stop host B, delete its whole cache directory, start it again: it rebuilds from the
    // database and answers the same.
    drop(db);
    let cache_b = b.db.parent().unwrap().to_path_buf();
    std::fs::remove_dir_all(&cache_b).unwrap();
    assert!(!cache_b.exists());
    let db = Daemon::start(&b, &[], &[]);
    let cb = agent(&b, &issue, None).await;
    let again = seen(&cb).await;
    cb.close().await;
    assert_eq!(again, first);
    assert_eq!(
        learnings_on_disk(&b),
        1,
        "host B's learnings index was rebuilt"
    );
    drop(db);
    drop(da);
}

/// `<cache>/postgres.index/` of a host.
fn index_dir(host: &Env) -> PathBuf {
    let mut s = host.db.as_os_str().to_os_string();
    s.push(".index");
    s.into()
}

/// Entries in one of a host's on-disk tantivy indexes (`learnings`, `vault-bm25`), 0
/// while it does not exist yet; read without writing it.
fn docs_on_disk(host: &Env, name: &str) -> u64 {
    let Ok(index) = tantivy::Index::open_in_dir(index_dir(host).join(name)) else {
        return 0;
    };
    index
        .reader_builder()
        .reload_policy(tantivy::ReloadPolicy::Manual)
        .try_into()
        .map(|r: tantivy::IndexReader| r.searcher().num_docs())
        .unwrap_or(0)
}

fn learnings_on_disk(host: &Env) -> u64 {
    docs_on_disk(host, "learnings")
}

fn chunks_on_disk(host: &Env) -> u64 {
    docs_on_disk(host, "vault-bm25")
}

/// Poll `done` until it holds or [`DEADLINE`] passes; `what` names it in the failure.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_on_one_host_wakes_the_other_hosts_daemon_which_catches_up_before_any_search() {
    let url = PgCluster::shared().create_database("notify");
    let (a, b) = (Env::host(&url), Env::host(&url));
    let (wt, issue) = project(&a);
    let da = Daemon::start(&a, &[], &[]);
    let db = Daemon::start(&b, &[], &[]);
    // B's listener is up (it says so once its LISTEN is in place), its warm-up (which
    // searches the vault) is over, and so is the catch-up its listener runs on
    // connecting: from here on only a notification (or a call) makes B index anything.
    assert_eq!(db.health()["following_changes"], true);
    eventually("host B warm and caught up once", || {
        let h = db.health();
        h["warm"] == true && h["background_catch_ups"].as_u64().unwrap() >= 1
    });
    let served_b = requests(&db);
    let catch_ups = db.health()["background_catch_ups"].as_u64().unwrap();
    assert_eq!(learnings_on_disk(&b), 0);
    assert_eq!(chunks_on_disk(&b), 0);

    let ca = agent(&a, &issue, Some(&wt)).await;
    ca.ok("add_learning", json!({"pattern": LEARNING})).await;
    ca.ok("vault_update", json!({"path": "docs/harbour.md"}))
        .await;
    ca.close().await;

    // Host B's daemon catches its on-disk indexes up by itself: nobody calls it.
    eventually("host B indexed the learning in the background", || {
        learnings_on_disk(&b) == 1
    });
    eventually("host B indexed the chunk in the background", || {
        chunks_on_disk(&b) >= 1
    });
    let h = db.health();
    assert!(
        h["background_catch_ups"].as_u64().unwrap() > catch_ups,
        "{h}"
    );
    assert_eq!(
        h["requests_served"].as_u64().unwrap(),
        served_b,
        "no call reached host B"
    );
    drop(db);
    drop(da);
}
