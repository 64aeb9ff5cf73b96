//! The Knowledge Vault through the real binary: `cairn reindex`, `cairn search` and the
//! MCP tools (`vault_retrieve`, `search_knowledge`, `vault_update`, `vault_delete`), with
//! the real embedding model on real SQLite.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::Env;

#[path = "../benches/corpus.rs"]
mod corpus;

fn samples() -> PathBuf {
    corpus::repo().join("samples/docs")
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A small guide with three sections (three chunks).
fn guide(name: &str, configure: &str) -> String {
    format!(
        "# {name} guide\n\n## Install\n\nRun the {name} installer with the default options; it places \
         the binary in /usr/local/bin.\n\n## Configure\n\n{configure}\n\n## Upgrade\n\nStop the {name} \
         service, replace the binary and start the service again.\n"
    )
}

const CONFIGURE: &str = "Edit the configuration file to set the listening port and the log level.";

fn reindex(env: &Env, dir: &Path, extra: &[&str]) -> Value {
    let d = dir.to_string_lossy().into_owned();
    let mut args = vec!["reindex", d.as_str()];
    args.extend_from_slice(extra);
    env.json(&args)
}

fn db(env: &Env) -> rusqlite::Connection {
    let c = rusqlite::Connection::open(&env.db).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c
}

fn count(env: &Env, sql: &str) -> i64 {
    db(env).query_row(sql, [], |r| r.get(0)).unwrap()
}

/// A `min_score` strictly between two distinct scores of a ranking (`scores`, best
/// first), at the first gap after position `from` wider than any rounding of a score on
/// its way through JSON and `f32` (past the last score when there is none): `(n,
/// threshold)`, the first `n` scores (`n > from`) above the threshold, every other below.
fn cut_after(scores: &[f64], from: usize) -> (usize, f64) {
    assert!(from < scores.len(), "{from} >= {}", scores.len());
    let next = |i: usize| scores.get(i + 1).copied().unwrap_or(scores[i] - 2e-3);
    let i = (from..scores.len())
        .find(|&i| scores[i] - next(i) > 1e-4)
        .expect("the last score has a gap below it");
    (i + 1, (scores[i] + next(i)) / 2.0)
}

fn paths(hits: &Value) -> Vec<String> {
    hits["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn retrieval_on_the_sample_docs_finds_the_expected_sections() {
    let env = Env::new();
    let s = reindex(&env, &samples(), &["--collection", "handbook"]);
    // samples/docs/.gitignore ignores drafts/: 14 of the 15 Markdown files are indexed.
    assert_eq!(s["files_seen"], 14, "{s:#}");
    assert_eq!(s["files_changed"], 14);
    assert!(s["root"].as_str().unwrap().starts_with("dir:"));
    let drafts = count(
        &env,
        "SELECT count(*) FROM vault_documents WHERE path LIKE 'drafts/%'",
    );
    assert_eq!(drafts, 0, "drafts/ is ignored by samples/docs/.gitignore");

    let queries: Vec<Value> =
        serde_json::from_str(include_str!("fixtures/retrieval_queries.json")).unwrap();
    assert_eq!(queries.len(), 16);
    let client = env.serve(&[]).await;
    let (mut top1, mut top3) = (0, 0);
    let mut misses = Vec::new();
    for q in &queries {
        let r = client
            .ok("vault_retrieve", json!({"query": q["query"], "top_k": 5}))
            .await;
        let hits = r["results"].as_array().unwrap();
        let rank = hits.iter().position(|h| {
            h["path"] == q["path"]
                && h["metadata"]["heading_path"]
                    .as_str()
                    .unwrap()
                    .contains(q["heading"].as_str().unwrap())
        });
        match rank {
            Some(0) => top1 += 1,
            _ => misses.push((q["query"].clone(), rank, hits[0]["path"].clone())),
        }
        if rank.is_some_and(|r| r < 3) {
            top3 += 1;
        }
        // `score` is the rank key: results come in score order.
        let score = |h: &Value| h["score"].as_f64().unwrap();
        assert!(
            hits.windows(2).all(|w| score(&w[0]) >= score(&w[1])),
            "{r:#}"
        );
        assert!(
            hits.iter()
                .all(|h| score(h) <= 1.0001 && h["cosine"].as_f64().is_some())
        );
        let h = &hits[0];
        assert!(h["score"].as_f64().unwrap() > 0.0 && h["score"].as_f64().unwrap() <= 1.0001);
        assert_eq!(h["metadata"]["collection"], "handbook");
        assert_eq!(h["metadata"]["chunk_hash"].as_str().unwrap().len(), 64);
        assert!(h["metadata"]["line_start"].as_u64().unwrap() >= 1);
        assert!(!h["text"].as_str().unwrap().is_empty());
    }
    eprintln!("sample-docs retrieval: top-1 {top1}/16, top-3 {top3}/16; misses {misses:?}");
    assert!(top1 >= 15, "top-1 {top1}/16: {misses:?}");
    assert_eq!(top3, 16, "{misses:?}");

    // The CLI answers the same query.
    let cli = env.json(&[
        "search",
        "retry pattern with exponential backoff",
        "--top-k",
        "3",
    ]);
    assert_eq!(paths(&cli)[0], "patterns/retry-with-backoff.md");
    // Collection filter: nothing in another collection.
    let none = env.json(&["search", "retry", "--collection", "other"]);
    assert!(paths(&none).is_empty());
    client.close().await;
}

#[test]
fn reindex_is_incremental_and_removes_deleted_files() {
    let env = Env::new();
    let docs = env.path().join("docs");
    write(&docs, "a.md", &guide("Alpha", CONFIGURE));
    write(&docs, "b.md", &guide("Beta", CONFIGURE));
    write(&docs, "sub/c.markdown", &guide("Gamma", CONFIGURE));
    write(&docs, "notes.txt", "not markdown");
    let first = reindex(&env, &docs, &[]);
    assert_eq!(
        first["collection"], "docs",
        "default collection: the directory name"
    );
    assert_eq!(first["files_seen"], 3);
    assert_eq!(first["chunks_embedded"], 9);

    let again = reindex(&env, &docs, &[]);
    assert_eq!(again["files_unchanged"], 3, "{again:#}");
    assert_eq!(again["files_changed"], 0);
    assert_eq!(again["chunks_embedded"], 0);

    let ids_before: Vec<i64> = {
        let c = db(&env);
        let mut st = c
            .prepare("SELECT id FROM vault_chunks ORDER BY id")
            .unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    write(
        &docs,
        "a.md",
        &guide(
            "Alpha",
            "Set the port with ALPHA_PORT; the log level follows RUST_LOG.",
        ),
    );
    let edited = reindex(&env, &docs, &[]);
    assert_eq!(edited["files_changed"], 1, "{edited:#}");
    assert_eq!(edited["files_unchanged"], 2);
    assert_eq!(edited["chunks_embedded"], 1, "only the edited section");
    assert_eq!(edited["chunks_reused"], 2);
    assert_eq!(edited["chunks_removed"], 1);
    let ids_after: HashSet<i64> = {
        let c = db(&env);
        let mut st = c.prepare("SELECT id FROM vault_chunks").unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(ids_after.len(), 9);
    let kept = ids_before.iter().filter(|i| ids_after.contains(i)).count();
    assert_eq!(kept, 8, "unchanged chunks keep their rows and ids");
    assert!(
        ids_after.iter().max() > ids_before.iter().max(),
        "the new chunk gets a fresh, higher id"
    );
    let hit = env.json(&["search", "ALPHA_PORT environment variable", "--top-k", "1"]);
    assert_eq!(paths(&hit), ["a.md"]);
    assert!(
        hit["results"][0]["text"]
            .as_str()
            .unwrap()
            .contains("ALPHA_PORT")
    );

    std::fs::remove_file(docs.join("b.md")).unwrap();
    let removed = reindex(&env, &docs, &[]);
    assert_eq!(removed["files_removed"], 1, "{removed:#}");
    assert_eq!(removed["chunks_removed"], 3);
    assert_eq!(count(&env, "SELECT count(*) FROM vault_documents"), 2);
    let beta = env.json(&["search", "Beta installer", "--top-k", "10"]);
    assert!(!paths(&beta).contains(&"b.md".to_string()), "{beta:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_server_sees_a_reindex_by_another_process() {
    let env = Env::new();
    let docs = env.path().join("docs");
    write(&docs, "a.md", &guide("Alpha", CONFIGURE));
    reindex(&env, &docs, &[]);
    let client = env.serve(&[]).await;
    let query = json!({"query": "When does the ferry to Zanzibar leave the harbour?", "top_k": 3});
    let before = client.ok("vault_retrieve", query.clone()).await;
    assert!(!paths(&before).contains(&"ferry.md".to_string()));

    write(
        &docs,
        "ferry.md",
        "# Ferry\n\n## Timetable\n\nThe ferry to Zanzibar leaves the harbour at 07:00 and 15:30 every day.\n",
    );
    let s = reindex(&env, &docs, &[]);
    assert_eq!(s["files_changed"], 1);
    let after = client.ok("vault_retrieve", query).await;
    assert_eq!(paths(&after)[0], "ferry.md", "{after:#}");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn reindex_and_vault_update_from_a_worktree_address_one_document() {
    let env = Env::new();
    let proj = env.path().join("proj");
    write(&proj, "docs/a.md", &guide("Alpha", CONFIGURE));
    write(&proj, "src/lib.rs", "");
    env.project("proj", Some(&proj));
    // The project is found from the directory: paths are relative to its root.
    let s = reindex(&env, &proj.join("docs"), &[]);
    assert!(s["root"].as_str().unwrap().starts_with("project:"), "{s:#}");
    assert_eq!(s["prefix"], "docs");

    let wt = env.path().join("wt");
    write(
        &wt,
        "docs/a.md",
        &guide(
            "Alpha",
            "In the worktree the port comes from WORKTREE_PORT.",
        ),
    );
    let wt_s = wt.to_string_lossy().into_owned();
    let client = env
        .serve(&["--project-id", "proj", "--worktree-path", &wt_s])
        .await;
    let u = client
        .ok("vault_update", json!({"path": "docs/a.md"}))
        .await;
    assert_eq!(u["path"], "docs/a.md");
    assert_eq!(u["changed"], true);
    assert_eq!(u["embedded"], 1, "{u:#}");
    assert_eq!(u["reused"], 2);
    assert_eq!(
        u["collection"], "docs",
        "an existing document keeps its collection"
    );
    let again = client
        .ok("vault_update", json!({"path": "./docs/a.md"}))
        .await;
    assert_eq!(again["changed"], false);
    assert_eq!(again["embedded"], 0);

    assert_eq!(count(&env, "SELECT count(*) FROM vault_documents"), 1);
    assert_eq!(count(&env, "SELECT count(*) FROM vault_chunks"), 3);
    let r = client
        .ok(
            "vault_retrieve",
            json!({"query": "WORKTREE_PORT", "top_k": 1}),
        )
        .await;
    assert_eq!(paths(&r), ["docs/a.md"]);
    assert!(
        r["results"][0]["text"]
            .as_str()
            .unwrap()
            .contains("WORKTREE_PORT")
    );
    assert!(
        r["results"][0]["metadata"]["root"]
            .as_str()
            .unwrap()
            .starts_with("project:")
    );
    // Reindexing the project's own docs again brings its version back, same document.
    let back = reindex(&env, &proj.join("docs"), &[]);
    assert_eq!(back["files_changed"], 1);
    assert_eq!(back["chunks_embedded"], 1, "only the section that differs");
    assert_eq!(count(&env, "SELECT count(*) FROM vault_documents"), 1);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn vault_update_and_delete_refuse_paths_outside_the_root() {
    let env = Env::new();
    let proj = env.path().join("proj");
    let outside = env.path().join("outside");
    write(&proj, "docs/a.md", &guide("Alpha", CONFIGURE));
    write(
        &outside,
        "secret.md",
        "# Secret\n\nThe launch code is 0000.\n",
    );
    std::os::unix::fs::symlink(&outside, proj.join("docs/escape")).unwrap();
    env.project("proj", Some(&proj));
    let client = env
        .serve(&["--project-id", "proj", "--agent-type", "worker"])
        .await;
    let secret = outside.join("secret.md").to_string_lossy().into_owned();
    for tool in ["vault_update", "vault_delete"] {
        for bad in [
            "../outside/secret.md",
            secret.as_str(),
            "docs/escape/secret.md",
            "docs/a\u{0}.md",
            "docs/../docs/a.md",
        ] {
            let e = client
                .err_code(tool, json!({"path": bad}), "ERR_INVALID_INPUT")
                .await;
            assert!(e["help_prompt"].as_str().is_some(), "{e:#}");
        }
    }
    let missing = client
        .err_code(
            "vault_update",
            json!({"path": "docs/gone.md"}),
            "ERR_NOT_FOUND",
        )
        .await;
    assert!(
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .contains("vault_delete"),
        "{missing:#}"
    );
    client
        .err_code(
            "vault_delete",
            json!({"path": "docs/a.md"}),
            "ERR_NOT_FOUND",
        )
        .await;
    assert_eq!(count(&env, "SELECT count(*) FROM vault_documents"), 0);

    let u = client
        .ok("vault_update", json!({"path": "docs/a.md"}))
        .await;
    assert_eq!(
        u["collection"], "proj",
        "no vault configuration: the project's slug"
    );
    assert_eq!(u["chunks"], 3);
    let d = client
        .ok("vault_delete", json!({"path": "docs/a.md"}))
        .await;
    assert_eq!(d["chunks_removed"], 3);
    assert_eq!(count(&env, "SELECT count(*) FROM vault_chunks"), 0);
    let r = client
        .ok("vault_retrieve", json!({"query": "Alpha installer"}))
        .await;
    assert!(paths(&r).is_empty(), "{r:#}");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn search_knowledge_searches_the_projects_collections() {
    let env = Env::new();
    let proj = env.path().join("proj");
    write(&proj, "handbook/a.md", &guide("Alpha", CONFIGURE));
    write(&proj, "other/b.md", &guide("Beta", CONFIGURE));
    env.project("proj", Some(&proj));
    reindex(&env, &proj.join("handbook"), &[]);
    reindex(&env, &proj.join("other"), &[]);

    let client = env.serve(&["--project-id", "proj"]).await;
    let q = json!({"query": "how do I install the binary?"});
    let e = client
        .err_code("search_knowledge", q.clone(), "ERR_FAILED_PRECONDITION")
        .await;
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.contains("--vault-collection"), "{msg}");
    assert!(msg.contains("configure_project"), "{msg}");

    env.ok(&[
        "project",
        "configure",
        "proj",
        "--vault-collection",
        "handbook",
    ]);
    let r = client.ok("search_knowledge", q.clone()).await;
    assert_eq!(r["collections"], json!(["handbook"]));
    let got = paths(&r);
    assert!(!got.is_empty());
    assert!(got.iter().all(|p| p == "handbook/a.md"), "{r:#}");

    let strict = client
        .ok(
            "search_knowledge",
            json!({"query": "how do I install the binary?", "min_score": 0.99, "max_per_document": 0}),
        )
        .await;
    assert!(paths(&strict).is_empty());
    assert_eq!(strict["below_min_score"], 3, "{strict:#}");
    let best = strict["best_score"].as_f64().unwrap();
    assert!(best > 0.0 && best < 0.99);
    let note = strict["note"].as_str().unwrap();
    assert!(note.contains("3 hits fell below min_score 0.99"), "{note}");
    // min_score filters on the rank key: a cut between two scores, below the second
    // hit's, keeps exactly the hits above it, in the same order.
    let score = |h: &Value| h["score"].as_f64().unwrap();
    let hits = r["results"].as_array().unwrap();
    assert!(hits.len() >= 2, "{r:#}");
    assert!(
        hits.windows(2).all(|w| score(&w[0]) >= score(&w[1])),
        "{r:#}"
    );
    let scores: Vec<f64> = hits.iter().map(score).collect();
    let (expected, cut) = cut_after(&scores, 1);
    let kept = client
        .ok(
            "search_knowledge",
            json!({"query": "how do I install the binary?", "min_score": cut}),
        )
        .await;
    let ids = |v: &[Value]| -> Vec<Value> {
        v.iter()
            .map(|h| h["metadata"]["chunk_id"].clone())
            .collect()
    };
    let kept_hits = kept["results"].as_array().unwrap();
    assert!(kept_hits.iter().all(|h| score(h) >= cut), "{kept:#}");
    assert_eq!(ids(kept_hits), ids(&hits[..expected]), "{kept:#}");
    let below = r["below_min_score"].as_u64().unwrap() as usize;
    assert_eq!(kept["below_min_score"], below + hits.len() - expected);
    client.close().await;

    // Without a bound project it says how to bind one.
    let unbound = env.serve(&[]).await;
    unbound
        .err_code("search_knowledge", q, "ERR_FAILED_PRECONDITION")
        .await;
    unbound.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_lists_tools_without_the_model_and_names_the_fetch_script() {
    let env = Env::new();
    let docs = env.path().join("docs");
    write(&docs, "a.md", &guide("Alpha", CONFIGURE));
    let missing = env.path().join("no-models");
    let missing_s = missing.to_string_lossy().into_owned();
    // The model is loaded on the first call that needs it, never at start-up (the
    // start-up time itself is a figure of `cargo bench --bench vault`).
    let client = env
        .serve_env(&[], &[("CAIRN_MODEL_DIR", missing_s.as_str())])
        .await;
    let tools = client.service.list_all_tools().await.unwrap();
    let by_name = |n: &str| tools.iter().find(|t| t.name == n).unwrap().clone();
    for n in [
        "vault_retrieve",
        "search_knowledge",
        "vault_update",
        "vault_delete",
    ] {
        by_name(n);
    }
    let ann = |n: &str| by_name(n).annotations.unwrap();
    assert_eq!(ann("vault_retrieve").read_only_hint, Some(true));
    assert_eq!(ann("vault_delete").destructive_hint, Some(true));
    assert_eq!(ann("vault_update").idempotent_hint, Some(true));
    assert_eq!(ann("vault_update").read_only_hint, Some(false));
    client.ok("server_ping", json!({})).await;

    let e = client
        .err_code(
            "vault_retrieve",
            json!({"query": "install"}),
            "ERR_MODEL_UNAVAILABLE",
        )
        .await;
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bash models/fetch.sh"),
        "{e:#}"
    );
    client.close().await;
    let out = env
        .cmd(&["reindex", docs.to_str().unwrap()])
        .env("CAIRN_MODEL_DIR", &missing)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bash models/fetch.sh"));
}

#[test]
fn reindex_takes_thread_settings_and_reports_model_tokens() {
    let env = Env::new();
    let docs = env.path().join("docs");
    write(&docs, "a.md", &guide("Alpha", CONFIGURE));
    write(&docs, "b.md", &guide("Beta", CONFIGURE));
    let out = env.run(&["reindex", docs.to_str().unwrap(), "--spin", "sometimes"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("auto, on, off"), "{err}");

    let s = reindex(&env, &docs, &["--threads", "1", "--spin", "on"]);
    assert_eq!(s["chunks_embedded"], 6, "{s:#}");
    let tokens = s["tokens_embedded"].as_u64().unwrap();
    let padding = s["padding_tokens"].as_u64().unwrap();
    // Every chunk carries at least [CLS], a heading and [SEP]; one batch of six pads
    // to its longest member, so some padding but less than the tokens themselves.
    assert!(tokens >= 6 * 5, "{s:#}");
    assert!(padding < tokens, "{s:#}");

    let again = env
        .cmd(&["reindex", docs.to_str().unwrap(), "--json"])
        .env("CAIRN_EMBED_SPIN", "off")
        .env("CAIRN_EMBED_THREADS", "1")
        .output()
        .unwrap();
    assert!(again.status.success());
    let again: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again["files_unchanged"], 2);
    assert_eq!(
        (
            again["tokens_embedded"].as_u64(),
            again["padding_tokens"].as_u64()
        ),
        (Some(0), Some(0))
    );
}

#[test]
fn a_killed_reindex_resumes_without_duplicates() {
    let env = Env::new();
    let docs = env.path().join("docs");
    for i in 0..40 {
        write(
            &docs,
            &format!("f{i:02}.md"),
            &guide(
                &format!("Service{i}"),
                &format!("Service {i} listens on port {}.", 8000 + i),
            ),
        );
    }
    let mut child = env
        .cmd(&["reindex", docs.to_str().unwrap(), "--embed-group", "6"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let n = if env.db.exists() {
            db(&env)
                .query_row("SELECT count(*) FROM vault_documents", [], |r| {
                    r.get::<_, i64>(0)
                })
                .unwrap_or(0)
        } else {
            0
        };
        if n >= 4 {
            break;
        }
        assert!(Instant::now() < deadline, "no progress");
        assert!(
            child.try_wait().unwrap().is_none(),
            "reindex finished too early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let committed = count(&env, "SELECT count(*) FROM vault_documents");
    assert!((4..40).contains(&committed), "killed mid-way: {committed}");
    assert_eq!(
        count(&env, "SELECT count(*) FROM vault_chunks"),
        committed * 3,
        "each committed file has all its chunks"
    );

    let resumed = reindex(&env, &docs, &[]);
    assert_eq!(resumed["files_unchanged"], committed, "{resumed:#}");
    assert_eq!(resumed["files_changed"], 40 - committed);
    assert_eq!(resumed["chunks_embedded"], (40 - committed) * 3);
    assert_eq!(count(&env, "SELECT count(*) FROM vault_documents"), 40);
    assert_eq!(count(&env, "SELECT count(*) FROM vault_chunks"), 120);
    assert_eq!(
        count(
            &env,
            "SELECT count(*) FROM (SELECT document_id, ordinal FROM vault_chunks \
             GROUP BY 1, 2 HAVING count(*) > 1)"
        ),
        0
    );
    let hit = env.json(&[
        "search",
        "Which port does Service 7 listen on?",
        "--top-k",
        "1",
    ]);
    assert_eq!(paths(&hit), ["f07.md"]);
    assert_eq!(reindex(&env, &docs, &[])["files_changed"], 0);
}

#[test]
fn an_index_from_another_chunker_is_refused_until_rebuilt() {
    let env = Env::new();
    let docs = env.path().join("docs");
    write(&docs, "a.md", &guide("Alpha", CONFIGURE));
    reindex(&env, &docs, &[]);
    let vault = PathBuf::from(format!("{}.index/vault", env.db.display()));
    let current = std::fs::read_to_string(vault.join("CURRENT")).unwrap();
    let manifest_path = vault.join(current.trim()).join("manifest.json");
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    m["chunker_version"] = json!(999);
    std::fs::write(&manifest_path, serde_json::to_vec(&m).unwrap()).unwrap();

    for args in [
        vec!["search", "installer"],
        vec!["reindex", docs.to_str().unwrap()],
    ] {
        let out = env.run(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("chunker_version"), "{err}");
        assert!(err.contains("cairn reindex --rebuild"), "{err}");
    }
    let rebuilt = reindex(&env, &docs, &["--rebuild"]);
    assert_eq!(rebuilt["index_points"], 3, "{rebuilt:#}");
    assert_eq!(
        rebuilt["chunks_embedded"], 0,
        "same model: vectors are reused"
    );
    let hit = env.json(&["search", "installer", "--top-k", "1"]);
    assert_eq!(paths(&hit), ["a.md"]);
}

/// Cairn's vectors for 1,000 real texts of the repository (its Markdown, `src/`'s
/// documentation, the graded learnings; see `benches/corpus.rs`) against an independent
/// computation (`tests/reference_embed.py`: Python onnxruntime + tokenizers, mean
/// pooling, L2).
#[test]
fn embedding_fidelity_against_python_onnxruntime() {
    use cairn::vault::embed::{Embedder, dot};
    let texts = corpus::repo_texts(1000);
    assert_eq!(texts.len(), 1000, "the repository holds fewer texts");
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ours = Embedder::default().embed_batch(&refs).unwrap();

    let reference: Vec<Vec<f32>> = corpus::run_reference(&texts, &[])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(reference.len(), texts.len());
    let cosines: Vec<f32> = ours
        .iter()
        .zip(&reference)
        .map(|(a, b)| dot(a, b) / (dot(b, b).sqrt() * dot(a, a).sqrt()))
        .collect();
    let mean = cosines.iter().sum::<f32>() / cosines.len() as f32;
    let min = cosines.iter().copied().fold(f32::MAX, f32::min);
    eprintln!(
        "embedding fidelity over {} real texts: mean cosine {mean:.7}, min {min:.7}",
        texts.len()
    );
    assert!(min >= 0.99999, "min cosine {min}, mean {mean}");
}

/// Batches are formed by token count: the model runs exactly the tokens and padding of
/// the reference's token-sorted batches of 32 (`tests/reference_embed.py --time`, its
/// own tokenizer), on the repository's own texts.
#[test]
fn batches_pad_exactly_as_a_token_sort() {
    use cairn::vault::embed::Embedder;
    let texts = corpus::repo_texts(256);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let e = Embedder::default();
    e.embed_batch(&refs).unwrap();
    let ours = e.stats();
    let raw: Value = serde_json::from_str(
        corpus::run_reference(&texts, &["--time".into(), "1".into(), "off".into()]).trim(),
    )
    .unwrap();
    assert_eq!(ours.texts, texts.len() as u64);
    assert_eq!(ours.batches, texts.len().div_ceil(32) as u64);
    assert_eq!(Some(ours.tokens), raw["tokens"].as_u64(), "{raw}");
    assert_eq!(Some(ours.padding), raw["padding"].as_u64(), "{raw}");
    eprintln!(
        "{} real chunks: {} tokens, padding {:.1}%",
        texts.len(),
        ours.tokens,
        100.0 * ours.padding as f64 / ours.tokens as f64
    );
}

/// `score` is the ranking key (`(1 − a − b)·cosine + a·lexical + b·overlap`): results
/// come in descending `score`, and `min_score` keeps exactly the prefix at or above it.
#[tokio::test(flavor = "multi_thread")]
async fn scores_are_in_rank_order_and_min_score_filters_on_them() {
    use cairn::vault::rerank::{LEXICAL_WEIGHT, OVERLAP_WEIGHT};
    let (a, b) = (f64::from(LEXICAL_WEIGHT), f64::from(OVERLAP_WEIGHT));
    let env = Env::new();
    env.project("proj", Some(&samples()));
    reindex(&env, &samples(), &["--collection", "handbook"]);
    env.ok(&[
        "project",
        "configure",
        "proj",
        "--vault-collection",
        "handbook",
    ]);
    let client = env.serve(&["--project-id", "proj"]).await;
    let queries: Vec<Value> =
        serde_json::from_str(include_str!("fixtures/retrieval_queries.json")).unwrap();
    let score = |h: &Value| h["score"].as_f64().unwrap();
    for q in queries.iter().take(6) {
        let all = client
            .ok(
                "search_knowledge",
                json!({"query": q["query"], "top_k": 10, "min_score": -1.0}),
            )
            .await;
        let hits = all["results"].as_array().unwrap();
        assert_eq!(hits.len(), 10);
        assert_eq!(all["below_min_score"], 0);
        for h in hits {
            let f = |k: &str| h[k].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&f("lexical")), "{h:#}");
            assert!((0.0..=1.0).contains(&f("overlap")), "{h:#}");
            let fused = (1.0 - a - b) * f("cosine") + a * f("lexical") + b * f("overlap");
            assert!((score(h) - fused).abs() < 1e-4, "{h:#}");
        }
        assert!(
            hits.windows(2).all(|w| score(&w[0]) >= score(&w[1])),
            "not in score order: {:?}",
            hits.iter().map(score).collect::<Vec<_>>()
        );
        // vault_retrieve over the same (only) collection ranks the same way.
        let r = client
            .ok("vault_retrieve", json!({"query": q["query"], "top_k": 10}))
            .await;
        let ids = |v: &Value| -> Vec<Value> {
            v["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["metadata"]["chunk_id"].clone())
                .collect()
        };
        assert_eq!(ids(&r), ids(&all));
        // A min_score between two scores, below the fourth hit's, keeps exactly the
        // hits above it: every returned score is at or above it, every dropped one
        // (the rest of the ranking) below.
        let scores: Vec<f64> = hits.iter().map(score).collect();
        let (expected, cut) = cut_after(&scores, 3);
        let k = client
            .ok(
                "search_knowledge",
                json!({"query": q["query"], "top_k": 10, "min_score": cut}),
            )
            .await;
        let kept = k["results"].as_array().unwrap();
        assert!(kept.iter().all(|h| score(h) >= cut), "{k:#}");
        assert_eq!(kept.len(), expected, "{k:#}");
        assert_eq!(k["below_min_score"], 10 - expected);
        assert_eq!(ids(&k)[..], ids(&all)[..expected]);
        assert_eq!(k["best_score"].as_f64().unwrap(), score(&hits[0]));
    }
    client.close().await;
}

/// A long document whose every section matches the query would fill the list; the cap
/// (default 2, `max_per_document`) makes room for other documents.
#[tokio::test(flavor = "multi_thread")]
async fn the_per_document_cap_limits_chunks_of_one_document() {
    let env = Env::new();
    let docs = env.path().join("docs");
    let long: String = (1..=8)
        .map(|i| {
            format!(
                "## Backoff step {i}\n\nRetry step {i}: wait with exponential backoff and jitter \
                 before retrying the failed request.\n\n"
            )
        })
        .collect();
    write(&docs, "long.md", &format!("# Retries\n\n{long}"));
    for name in ["alpha", "beta", "gamma"] {
        write(
            &docs,
            &format!("{name}.md"),
            &format!(
                "# {name}\n\n## Retry\n\nThe {name} client retries failed requests with \
                 backoff.\n\n## Timeouts\n\nThe {name} client gives up after thirty seconds.\n"
            ),
        );
    }
    reindex(&env, &docs, &[]);
    let client = env.serve(&[]).await;
    let q = "retry the failed request with exponential backoff";
    let per_doc = |r: &Value| {
        let mut m: std::collections::HashMap<String, usize> = Default::default();
        for p in paths(r) {
            *m.entry(p).or_default() += 1;
        }
        m
    };
    let uncapped = client
        .ok(
            "vault_retrieve",
            json!({"query": q, "top_k": 6, "max_per_document": 0}),
        )
        .await;
    assert!(per_doc(&uncapped)["long.md"] > 2, "{uncapped:#}");
    let default = client
        .ok("vault_retrieve", json!({"query": q, "top_k": 6}))
        .await;
    let m = per_doc(&default);
    assert_eq!(paths(&default).len(), 6, "{default:#}");
    assert_eq!(m["long.md"], 2, "{m:?}");
    assert!(m.values().all(|&n| n <= 2), "{m:?}");
    let one = client
        .ok(
            "vault_retrieve",
            json!({"query": q, "top_k": 6, "max_per_document": 1}),
        )
        .await;
    let got = paths(&one);
    assert_eq!(got.len(), 4, "four documents, one chunk each: {got:?}");
    assert_eq!(got.iter().collect::<HashSet<_>>().len(), 4);
    // The CLI takes the same option.
    let cli = env.json(&["search", q, "--top-k", "3", "--max-per-document", "1"]);
    assert_eq!(paths(&cli).iter().collect::<HashSet<_>>().len(), 3);
    client.close().await;
}

/// `cairn eval vault` on the small checked-in BEIR set: every system reported, figures
/// in range, the categories of the queries, and the hybrid ranking at least as good as
/// either baseline.
#[test]
fn eval_vault_reports_every_system_on_a_small_beir_set() {
    let env = Env::new();
    let set = corpus::repo().join("tests/eval/vault-beir");
    let s = |p: &str| set.join(p).to_string_lossy().into_owned();
    let r = env.json(&[
        "eval",
        "vault",
        "--corpus",
        &s("corpus.jsonl"),
        "--queries",
        &s("queries.jsonl"),
        "--qrels",
        &s("qrels/test.tsv"),
    ]);
    assert_eq!(r["documents"], 12, "{r:#}");
    assert_eq!(r["queries"], 10);
    assert_eq!(r["top_k"], 10);
    let systems = r["systems"].as_array().unwrap();
    let by = |name: &str| {
        systems
            .iter()
            .find(|s| s["name"].as_str().unwrap().starts_with(name))
            .unwrap_or_else(|| panic!("no system {name}: {r:#}"))
    };
    for s in systems {
        for m in ["ndcg10", "mrr10", "recall5"] {
            let x = s["overall"][m].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&x), "{s:#}");
        }
        assert!(s["p50_ms"].as_f64().unwrap() > 0.0);
        let cats: Vec<&String> = s["categories"].as_object().unwrap().keys().collect();
        assert_eq!(cats, ["keyword", "paraphrase"]);
        assert_eq!(s["categories"]["keyword"]["queries"], 4);
    }
    let cairn = by("cairn");
    assert_eq!(cairn["max_per_document"], 2);
    let mrr = |s: &Value| s["overall"]["mrr10"].as_f64().unwrap();
    let (lexical, dense) = (by("lexical-only"), by("dense-only"));
    assert!(
        mrr(cairn) >= mrr(lexical) && mrr(cairn) >= mrr(dense),
        "{r:#}"
    );
    assert!(mrr(cairn) >= 0.8, "{r:#}");
    // The text report names the same systems.
    let text = env.ok(&[
        "eval",
        "vault",
        "--corpus",
        &s(""),
        "--queries",
        &s("queries.jsonl"),
        "--qrels",
        &s("qrels/test.tsv"),
    ]);
    assert!(text.contains("12 documents"), "{text}");
    assert!(text.contains("category paraphrase (6 queries)"), "{text}");
    assert!(text.contains("dense-only"), "{text}");
}
