//! Learnings: `add_learning` quality gates, the ranking blend on a small hand-written
//! set and hostile queries over MCP in process (set-up through the facade), and through
//! the real binary the index life cycle across processes (two servers, a writer killed
//! mid-commit, a deleted index directory, a busy writer, the group commit of `cairn
//! serve`), ratings from another process, and the model switched off for a process.

use std::fs::File;

use serde_json::{Value, json};

use crate::common::{Client, Env, error_fields, reading, sqlite_only};

/// A project `web` with one issue; returns the issue identifier.
fn setup(env: &Env) -> String {
    env.project("web", None);
    env.issue("web", "Learn things")
}

/// Record a learning as `cairn learnings add` does, through the facade (a one-shot
/// writer beside the server); returns its id.
fn add(env: &Env, issue: &str, pattern: &str, context: Option<&str>, applies: &[&str]) -> String {
    env.add_learning(issue, pattern, context, applies, true)["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Record a learning through the CLI with one environment variable set; its output,
/// whatever the exit status.
fn add_with(env: &Env, issue: &str, pattern: &str, var: (&str, &str)) -> std::process::Output {
    env.cmd(&[
        "learnings",
        "add",
        "--issue",
        issue,
        "--pattern",
        pattern,
        "--json",
    ])
    .env(var.0, var.1)
    .output()
    .unwrap()
}

/// The learnings a search finds, in reading order (see [`reading`]).
async fn search(c: &Client, args: Value) -> Vec<Value> {
    reading(&c.ok("search_learnings", args).await)
}

fn ids(hits: &[Value]) -> Vec<String> {
    hits.iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect()
}

fn total(hit: &Value) -> f64 {
    hit["score"]["total"].as_f64().unwrap()
}

#[tokio::test]
async fn add_learning_applies_the_quality_gates() {
    let env = Env::new();
    let issue = setup(&env);
    let c = env.serve_local(&["--issue-id", &issue]).await;
    let pattern = "Nuxt auto-imports files in app/utils/ — don't add explicit imports or you'll get already-defined errors";
    let context = "Nuxt 4 convention applies to all files in app/utils/, app/composables/, and app/components/ directories. The auto-import system scans these dirs at build time.";
    let l = c
        .ok(
            "add_learning",
            json!({"pattern": pattern, "context": context, "applies_to": ["app/utils/"], "learning_type": "gotcha"}),
        )
        .await;
    assert_eq!(l["quality_score"], 50);
    assert_eq!(l["verified"], false);
    assert_eq!(l["issue"], issue.as_str());
    assert_eq!(l["project"], "web");
    // get_issue shows the learnings recorded on the issue.
    let shown = c.ok("get_issue", json!({})).await;
    assert_eq!(shown["learnings"][0]["id"], l["id"], "{shown:#}");
    assert_eq!(shown["learnings"][0]["pattern"], pattern);
    assert_eq!(l["learning_type"], "gotcha");
    assert_eq!(l["pattern"], pattern);
    let id = l["id"].as_str().unwrap();

    // Same pattern after case, whitespace and punctuation folding: refused with the id.
    let dup = c
        .err_code(
            "add_learning",
            json!({"pattern": "NUXT auto imports files in app utils: don't add explicit imports, or you'll get already defined errors!!"}),
            "ERR_CONFLICT",
        )
        .await;
    assert_eq!(dup["error"]["details"]["existing_id"], id, "{dup:#}");

    // Short pattern and context: schema errors naming both fields.
    let short = c
        .err_code(
            "add_learning",
            json!({"pattern": "use TDD", "context": "always"}),
            "ERR_INVALID_INPUT",
        )
        .await;
    let mut fields = error_fields(&short);
    fields.sort();
    assert_eq!(fields, ["context", "pattern"]);
    // 50 characters of padding are not 50 characters of pattern.
    let padded = format!("use TDD{}", " ".repeat(60));
    let body = c
        .err_code(
            "add_learning",
            json!({"pattern": padded}),
            "ERR_INVALID_INPUT",
        )
        .await;
    assert_eq!(error_fields(&body), ["pattern"]);
    // A long enough pattern of short and common words only gives the duplicate check
    // nothing to search for: it is recorded (it once failed on a `query` the tool has
    // not got).
    for words in [
        "it is what it is and so it is, as it was, as it will be, and it is so",
        "ab cd ef gh ij kl mn op qr st uv wx yz ab cd ef gh ij kl mn op qr st",
    ] {
        let l = c.ok("add_learning", json!({"pattern": words})).await;
        assert_eq!(l["merged"], false, "{l:#}");
    }

    // applies_to: relative prefixes only.
    let long = "Prefer the repository's typed query builder over raw SQL strings in handlers";
    for bad in [
        "/etc/passwd",
        "../outside/",
        "src/../../x",
        "~/notes",
        "C:\\x",
        " ",
    ] {
        let body = c
            .err_code(
                "add_learning",
                json!({"pattern": long, "applies_to": ["src/", bad]}),
                "ERR_INVALID_INPUT",
            )
            .await;
        assert_eq!(error_fields(&body), ["applies_to[1]"], "{bad}: {body:#}");
    }

    // Hidden characters: bidi overrides and tag characters refused, zero-width stripped.
    for hostile in ["\u{202E}", "\u{E0041}", "\u{1B}[2J"] {
        let body = c
            .err_code(
                "add_learning",
                json!({"pattern": format!("{long}{hostile} and more words")}),
                "ERR_INVALID_INPUT",
            )
            .await;
        assert!(
            body["error"]["message"].as_str().unwrap().contains("U+"),
            "{body:#}"
        );
    }
    let l = c
        .ok(
            "add_learning",
            json!({"pattern": format!("{long}\u{200B} with care")}),
        )
        .await;
    assert_eq!(
        l["pattern"].as_str().unwrap(),
        format!("{long} with care"),
        "zero-width space stripped"
    );
    assert_eq!(l["learning_type"], "pattern", "default type");
    c.close().await;

    // Without a bound issue, add_learning says how to bind one; search needs a project.
    let unbound = env.serve_local(&[]).await;
    unbound
        .err_code(
            "add_learning",
            json!({"pattern": format!("{long} again")}),
            "ERR_NO_BOUND_ISSUE",
        )
        .await;
    unbound
        .err_code(
            "search_learnings",
            json!({"query": "sql"}),
            "ERR_FAILED_PRECONDITION",
        )
        .await;
    unbound.close().await;
}

#[tokio::test]
async fn pattern_match_beats_context_only_and_hits_carry_their_score() {
    let env = Env::new();
    let issue = setup(&env);
    let in_context = add(
        &env,
        &issue,
        "Keep schema changes small and reviewable so that rollbacks stay cheap and predictable",
        Some(
            "Applies when changing tables: every migration should come with a test that applies \
             it to a copy of the production schema before it is merged.",
        ),
        &[],
    );
    let in_pattern = add(
        &env,
        &issue,
        "Database migration files are numbered and must never be edited after they ship to main",
        None,
        &["migrations/"],
    );
    let c = env.serve_local(&["--issue-id", &issue]).await;
    let hits = search(&c, json!({"query": "migration"})).await;
    assert_eq!(ids(&hits), [in_pattern.clone(), in_context.clone()]);
    let top = &hits[0];
    for key in [
        "id",
        "pattern",
        "context",
        "applies_to",
        "learning_type",
        "quality_score",
        "verified",
        "issue",
        "project",
    ] {
        assert!(top.get(key).is_some(), "{key} missing: {top:#}");
    }
    assert_eq!(top["applies_to"], json!(["migrations/"]));
    assert_eq!(top["issue"], issue.as_str());
    assert_eq!(top["project"], "web");
    let s = &top["score"];
    let (r, f, q) = (
        s["relevance"].as_f64().unwrap(),
        s["field_priority"].as_f64().unwrap(),
        s["quality"].as_f64().unwrap(),
    );
    assert!(
        (total(top) - (0.5 * r + 0.3 * f + 0.2 * q)).abs() < 1e-4,
        "{s}"
    );
    assert_eq!(f, 1.0, "matched in the pattern");
    assert!((q - 0.5 * r).abs() < 1e-6, "quality 50 scaled by relevance");
    assert!(r > 0.0 && r <= 1.0);
    assert_eq!(s["lexical"], 1.0, "the best BM25 of the query");
    assert!(
        (hits[1]["score"]["field_priority"].as_f64().unwrap() - 0.3).abs() < 1e-6,
        "context-only match"
    );
    // applies_to counts between the two.
    let hits = search(&c, json!({"query": "migrations/"})).await;
    let by_path = hits
        .iter()
        .find(|h| h["id"] == in_pattern.as_str())
        .unwrap();
    assert_eq!(
        by_path["score"]["field_priority"], 1.0,
        "also in the pattern"
    );
    c.close().await;
}

#[tokio::test]
async fn quality_breaks_near_ties_and_ratings_from_other_processes_count() {
    let env = Env::new();
    let issue = setup(&env);
    let version = add(
        &env,
        &issue,
        "Redis cache keys need a version prefix so that deploys can invalidate stale entries",
        None,
        &[],
    );
    let tenant = add(
        &env,
        &issue,
        "Redis cache keys need a tenant prefix so that tenants never read each other's entries",
        None,
        &[],
    );
    let c = env.serve_local(&["--issue-id", &issue]).await;
    let q = json!({"query": "redis cache key prefix"});
    let before = search(&c, q.clone()).await;
    assert_eq!(before.len(), 2);
    let gap = (total(&before[0]) - total(&before[1])).abs();
    // A near tie: smaller than what the ratings below move (quality weighs 0.2, scaled by
    // relevance; the ratings differ by 0.6).
    let relevance = |h: &Value| h["score"]["relevance"].as_f64().unwrap();
    let moved = 0.2 * 0.6 * relevance(&before[0]).min(relevance(&before[1]));
    assert!(
        gap < moved / 2.0,
        "a near tie to start with: {gap} vs {moved}"
    );

    // Rated by a person through the CLI (another process): the server's next search uses it.
    env.ok(&["learnings", "rate", &tenant, "90"]);
    env.ok(&["learnings", "rate", &version, "30"]);
    let after = search(&c, q.clone()).await;
    assert_eq!(ids(&after), [tenant.clone(), version.clone()]);
    assert_eq!(after[0]["quality_score"], 90);
    let relevance = after[0]["score"]["relevance"].as_f64().unwrap();
    assert!((after[0]["score"]["quality"].as_f64().unwrap() - 0.9 * relevance).abs() < 1e-6);

    env.ok(&["learnings", "rate", &tenant, "10"]);
    env.ok(&["learnings", "rate", &version, "95"]);
    let flipped = search(&c, q).await;
    assert_eq!(ids(&flipped), [version.clone(), tenant.clone()]);

    // Both ratings and a verification are in the history.
    env.ok(&["learnings", "verify", &tenant, "--note", "checked in prod"]);
    let shown = env.json(&["learnings", "show", &tenant]);
    let events: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["event"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["created", "rated", "rated", "verified"]);
    let last = shown["history"].as_array().unwrap().last().unwrap();
    assert_eq!(last["note"], "checked in prod");
    assert_eq!(last["actor"], "cli");
    assert_eq!(shown["verified"], true);
    assert_eq!(shown["quality_score"], 10);
    let bad = env.run(&["learnings", "rate", &tenant, "101"]);
    assert_eq!(bad.status.code(), Some(2));
    let missing = env.run(&["learnings", "verify", "lrn_nope"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("not found"));
    c.close().await;
}

#[tokio::test]
async fn stemming_prefixes_quality_floor_and_cross_project() {
    let env = Env::new();
    let issue = setup(&env);
    let import = add(
        &env,
        &issue,
        "Always import the logger from lib/log instead of calling console directly in handlers",
        None,
        &[],
    );
    let nuxt = add(
        &env,
        &issue,
        "Nuxt auto-import scans app/utils at build time, so explicit import lines cause duplicates",
        None,
        &["app/utils/"],
    );
    let c = env.serve_local(&["--issue-id", &issue]).await;
    // Stemming: `imports` (not the last word, so not a prefix) finds `import`.
    let hits = search(&c, json!({"query": "imports qqqzzz"})).await;
    assert!(ids(&hits).contains(&import), "{hits:#?}");
    // Prefix on the last word: `auto-imp` finds `auto-import`.
    let hits = search(&c, json!({"query": "auto-imp"})).await;
    assert_eq!(ids(&hits)[0], nuxt);
    // Explicit `*` anywhere.
    let hits = search(&c, json!({"query": "logg* qqqzzz"})).await;
    assert_eq!(ids(&hits), std::slice::from_ref(&import));

    // min_quality_score: low-quality learnings drop out unless verified.
    let flaky_low = add(
        &env,
        &issue,
        "Flaky websocket tests usually mean the fake clock was not advanced before asserting",
        None,
        &[],
    );
    let flaky_verified = add(
        &env,
        &issue,
        "Flaky snapshot tests come from unsorted map keys; sort keys before serialising output",
        None,
        &[],
    );
    let flaky_default = add(
        &env,
        &issue,
        "Flaky e2e tests on CI were caused by a shared tmp dir; give each worker its own dir",
        None,
        &[],
    );
    let cairn = env.open();
    cairn.rate_learning(&flaky_low, 20, "cli", None).unwrap();
    cairn
        .rate_learning(&flaky_verified, 20, "cli", None)
        .unwrap();
    cairn.verify_learning(&flaky_verified, "cli", None).unwrap();
    let hits = search(&c, json!({"query": "flaky tests", "min_quality_score": 40})).await;
    let mut found = ids(&hits);
    found.sort();
    let mut want = vec![flaky_verified.clone(), flaky_default.clone()];
    want.sort();
    assert_eq!(found, want);
    assert_eq!(search(&c, json!({"query": "flaky tests"})).await.len(), 3);
    let one = search(&c, json!({"query": "flaky tests", "limit": 1})).await;
    assert_eq!(one.len(), 1);

    // cross_project: the other projects instead of the current one.
    env.project("api", None);
    let api_issue = env.issue("api", "Api work");
    let api_flaky = add(
        &env,
        &api_issue,
        "Flaky contract tests in the api come from a mock server that reuses ports between runs",
        None,
        &[],
    );
    let cross = search(&c, json!({"query": "flaky tests", "cross_project": true})).await;
    assert_eq!(ids(&cross), std::slice::from_ref(&api_flaky));
    assert_eq!(cross[0]["project"], "api");
    let own = search(&c, json!({"query": "flaky tests"})).await;
    assert!(!ids(&own).contains(&api_flaky));
    assert_eq!(own.len(), 3);
    c.close().await;
}

#[tokio::test]
async fn hostile_queries_get_results_or_a_clear_validation_error() {
    let env = Env::new();
    let issue = setup(&env);
    add(
        &env,
        &issue,
        "Nuxt auto-import scans app/utils at build time, so explicit import lines cause duplicates",
        None,
        &[],
    );
    let c = env.serve_local(&["--issue-id", &issue]).await;
    for q in [
        "auto-import",
        "foo:bar",
        "\"unbalanced quote",
        "nuxt)) OR ((",
        "title:nuxt AND -import +scan ~2 ^3 [a TO z] {x}",
        "nu*",
        "x*y*z*",
        "ünïcödé 日本語 nuxt",
        "'; DROP TABLE learnings; --",
        "\\u0000 nuxt",
    ] {
        let r = c.call("search_learnings", json!({"query": q})).await;
        assert_ne!(r.is_error, Some(true), "{q}: {:?}", crate::common::body(&r));
    }
    for q in ["", "   ", "*", "AND OR NOT (", "\"(", "the of and"] {
        let body = c
            .err_code("search_learnings", json!({"query": q}), "ERR_INVALID_INPUT")
            .await;
        assert_eq!(error_fields(&body), ["query"], "{q}: {body:#}");
    }
    let long = "word ".repeat(300);
    c.err_code(
        "search_learnings",
        json!({"query": long}),
        "ERR_INVALID_INPUT",
    )
    .await;
    c.err_code(
        "search_learnings",
        json!({"query": "nuxt", "limit": 101}),
        "ERR_INVALID_INPUT",
    )
    .await;
    // Still serving.
    assert_eq!(search(&c, json!({"query": "auto-import"})).await.len(), 1);
    c.close().await;
}

#[tokio::test]
async fn two_servers_on_one_database_see_each_others_learnings() {
    let env = Env::new();
    let issue = setup(&env);
    let second_issue = env.issue("web", "Other work");
    let a = env.serve(&["--issue-id", &issue]).await;
    let b = env.serve(&["--issue-id", &second_issue]).await;
    // Both have an open reader before anything is added.
    assert!(search(&a, json!({"query": "kubernetes"})).await.is_empty());
    assert!(search(&b, json!({"query": "kubernetes"})).await.is_empty());
    let from_a = a
        .ok(
            "add_learning",
            json!({"pattern": "Kubernetes liveness probes must not hit the database or a slow query restarts pods"}),
        )
        .await;
    // Read your own writes, and the other server's next search.
    assert_eq!(
        ids(&search(&a, json!({"query": "kubernetes"})).await),
        [from_a["id"].as_str().unwrap()]
    );
    assert_eq!(
        ids(&search(&b, json!({"query": "kubernetes"})).await),
        [from_a["id"].as_str().unwrap()]
    );
    let from_b = b
        .ok(
            "add_learning",
            json!({"pattern": "Kubernetes readiness gates should wait for cache warm-up before taking traffic"}),
        )
        .await;
    let seen_by_a = ids(&search(&a, json!({"query": "kubernetes"})).await);
    assert_eq!(seen_by_a.len(), 2);
    assert!(seen_by_a.contains(&from_b["id"].as_str().unwrap().to_string()));
    // Interleaved adds from both, then each sees all.
    for n in 0..5 {
        for (c, who) in [(&a, "alpha"), (&b, "beta")] {
            c.ok(
                "add_learning",
                // The same lesson under two names: stored apart on purpose (what this
                // test counts is rows written by two servers).
                json!({"pattern": format!("Kubernetes {who} note number {n}: resource limits belong in the chart values file"), "merge": false}),
            )
            .await;
        }
    }
    for c in [&a, &b] {
        assert_eq!(search(c, json!({"query": "kubernetes"})).await.len(), 12);
    }
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn a_writer_killed_mid_commit_loses_no_acknowledged_learning() {
    let env = Env::new();
    let issue = setup(&env);
    let live = env.serve(&["--issue-id", &issue]).await;
    let mut acked = Vec::new();
    for n in 0..3 {
        acked.push(add(
            &env,
            &issue,
            &format!(
                "Terraform state lock number {n} must be released by the same pipeline that took it"
            ),
            None,
            &[],
        ));
    }
    // Abort between writing the segment files and publishing the commit.
    let out = add_with(
        &env,
        &issue,
        "Terraform plan output is stale after a merge; always re-plan before applying changes",
        ("CAIRN_FAILPOINT", "learnings-index-commit"),
    );
    assert!(!out.status.success(), "the failpoint aborts the writer");
    // A new process and the live server both find every learning SQLite holds.
    let hits = env.json(&["learnings", "search", "terraform"]);
    let found: Vec<String> = ids(&reading(&hits));
    assert_eq!(found.len(), 4, "{found:?}");
    for id in &acked {
        assert!(found.contains(id));
    }
    assert_eq!(search(&live, json!({"query": "terraform"})).await.len(), 4);

    // Killed during a full rebuild: still nothing lost.
    for n in 0..40 {
        live.ok(
            "add_learning",
            json!({"pattern": format!("Helm chart note {n}: pin every subchart version so that rebuilds are reproducible")}),
        )
        .await;
    }
    // A full rebuild killed after writing its segments, before publishing the commit.
    let out = env
        .cmd(&["learnings", "reindex"])
        .env("CAIRN_FAILPOINT", "learnings-index-commit")
        .output()
        .unwrap();
    assert!(!out.status.success(), "the failpoint aborts the rebuild");
    let hits = env.json(&["learnings", "search", "helm chart", "--limit", "100"]);
    assert_eq!(reading(&hits).len(), 40);
    assert_eq!(search(&live, json!({"query": "terraform"})).await.len(), 4);
    live.close().await;
}

#[tokio::test]
async fn group_commit_a_learning_is_found_by_the_very_next_search_through_mcp() {
    // `cairn serve` acknowledges after the SQLite commit and indexes in the background;
    // the next search must still see the write, every time.
    let env = Env::new();
    let issue = setup(&env);
    let c = env.serve(&["--issue-id", &issue]).await;
    for n in 0..20 {
        let marker = format!("zqmcp{n}w");
        let l = c
            .ok(
                "add_learning",
                json!({"pattern": format!("Webpack {marker} chunks must be named explicitly or cache busting breaks on deploy")}),
            )
            .await;
        // First (its marker word matches no other learning; the others may follow on
        // semantic similarity).
        assert_eq!(
            ids(&search(&c, json!({"query": marker})).await).first(),
            l["id"].as_str().map(String::from).as_ref(),
            "learning {n} not found right after it was acknowledged"
        );
    }
    c.close().await;
    // The server flushed its indexer on exit: the index holds every learning.
    let hits = env.json(&["learnings", "search", "webpack", "--limit", "100"]);
    assert_eq!(reading(&hits).len(), 20);
}

#[tokio::test]
async fn group_commit_a_server_killed_while_indexing_loses_no_acknowledged_write() {
    let env = Env::new();
    let issue = setup(&env);
    // The background indexer aborts the server on its first commit, after writing the
    // segment files and before publishing them.
    let c = env
        .serve_env(
            &["--issue-id", &issue],
            &[("CAIRN_FAILPOINT", "learnings-index-commit")],
        )
        .await;
    // At most as many as one search returns, so that the search below shows them all.
    const MOST: usize = 100;
    let mut acked = Vec::new();
    let mut died = false;
    for n in 0..MOST {
        let args = json!({"pattern": format!("Redis key {n} must carry a TTL or the cache grows without bound in production")});
        let p = rmcp::model::CallToolRequestParams::new("add_learning")
            .with_arguments(args.as_object().unwrap().clone());
        match c.service.call_tool(p).await {
            Ok(r) if r.is_error != Some(true) => {
                acked.push(crate::common::body(&r)["id"].as_str().unwrap().to_string())
            }
            _ => {
                died = true;
                break;
            }
        }
    }
    if !died {
        // A slow machine acknowledges them all before the first commit ends; the
        // failpoint stops the server when it does. (The bound only keeps a server that
        // never commits from hanging the test.)
        died = tokio::time::timeout(std::time::Duration::from_secs(120), c.service.waiting())
            .await
            .is_ok();
    }
    assert!(
        died,
        "the failpoint never fired: the server did not index in the background"
    );
    // The indexer commits only what was acknowledged, so the crash came after at least
    // one acknowledgement: otherwise the checks below would check nothing.
    assert!(
        !acked.is_empty(),
        "nothing was acknowledged before the crash"
    );
    // A new process finds every acknowledged learning (and the index catches up).
    let hits = env.json(&["learnings", "search", "redis", "--limit", &MOST.to_string()]);
    let found = ids(&reading(&hits));
    for id in &acked {
        assert!(
            found.contains(id),
            "acknowledged {id} lost; found {found:?}"
        );
    }
    let after_restart = env.serve(&["--issue-id", &issue]).await;
    assert_eq!(
        search(&after_restart, json!({"query": "redis", "limit": 100}))
            .await
            .len(),
        found.len()
    );
    after_restart.close().await;
}

#[tokio::test]
async fn a_deleted_index_directory_is_rebuilt_from_the_database() {
    let env = Env::new();
    let issue = setup(&env);
    let c = env.serve(&["--issue-id", &issue]).await;
    for n in 0..3 {
        add(
            &env,
            &issue,
            &format!(
                "Postgres advisory lock {n} keys must be derived from the tenant id, not the row id"
            ),
            None,
            &[],
        );
    }
    assert_eq!(search(&c, json!({"query": "advisory"})).await.len(), 3);
    let dir = env.index_dir().join("learnings");
    assert!(dir.join("meta.json").exists());
    std::fs::remove_dir_all(&dir).unwrap();
    // A new process rebuilds it; the live server notices too and keeps finding everything.
    let hits = env.json(&["learnings", "search", "advisory"]);
    assert_eq!(reading(&hits).len(), 3);
    assert!(dir.join("meta.json").exists());
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(search(&c, json!({"query": "advisory"})).await.len(), 3);
    c.ok(
        "add_learning",
        json!({"pattern": "Postgres advisory locks are per session; a pooled connection can leak one"}),
    )
    .await;
    assert_eq!(search(&c, json!({"query": "advisory"})).await.len(), 4);
    // And on demand.
    let r = env.json(&["learnings", "reindex"]);
    assert_eq!(r["learnings"], 4);
    assert_eq!(search(&c, json!({"query": "advisory"})).await.len(), 4);
    c.close().await;
}

#[tokio::test]
async fn a_busy_writer_never_blocks_search_and_the_tail_scores_the_same() {
    let env = Env::new();
    let issue = setup(&env);
    add(
        &env,
        &issue,
        "GraphQL resolvers must batch database loads with a dataloader to avoid N+1 queries",
        None,
        &[],
    );
    let c = env.serve(&["--issue-id", &issue]).await;
    assert_eq!(search(&c, json!({"query": "graphql"})).await.len(), 1);
    // Hold tantivy's writer lock as another process would.
    let lock_path = env.index_dir().join("learnings/.tantivy-writer.lock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .unwrap();
    lock.try_lock().expect("take the writer lock");
    // The add is acknowledged after a bounded wait for the writer, without indexing;
    // it says so on stderr.
    let out = add_with(
        &env,
        &issue,
        "GraphQL subscriptions need a keep-alive ping or proxies close idle websockets",
        ("CAIRN_LOG", "info"),
    );
    assert!(out.status.success(), "{out:?}");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("learnings index writer busy"),
        "the writer lock was not contended: {log}"
    );
    let tail = serde_json::from_slice::<Value>(&out.stdout).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The search answers while the writer is still held: the tail is scored in memory.
    let hits = search(&c, json!({"query": "graphql subscriptions"})).await;
    assert_eq!(ids(&hits)[0], tail);
    let tail_scores: Vec<f64> = hits.iter().map(total).collect();
    lock.unlock().unwrap();
    drop(lock);
    // Once the writer is free the row gets indexed; the scores do not change.
    env.ok(&["learnings", "reindex"]);
    let hits = search(&c, json!({"query": "graphql subscriptions"})).await;
    assert_eq!(ids(&hits)[0], tail);
    let indexed_scores: Vec<f64> = hits.iter().map(total).collect();
    assert_eq!(tail_scores.len(), indexed_scores.len());
    for (a, b) in tail_scores.iter().zip(&indexed_scores) {
        assert!(
            (a - b).abs() < 1e-4,
            "{tail_scores:?} vs {indexed_scores:?}"
        );
    }
    c.close().await;
}

#[tokio::test]
async fn field_priority_weighs_how_much_of_the_query_matched_not_an_average() {
    // The issue's failure mode: a learning matching one common query word in its
    // pattern scored field priority 1.0, the answer matching most words in its context
    // 0.3, and the one-word match ranked first.
    let env = Env::new();
    let issue = setup(&env);
    let mut one_word = Vec::new();
    for (i, topic) in ["reviewers", "branches", "feature flags", "dashboards"]
        .iter()
        .enumerate()
    {
        one_word.push(add(
            &env,
            &issue,
            &format!("Too many {topic} slow the team down; keep the number small and prune them every sprint ({i})"),
            None,
            &[],
        ));
    }
    let answer = add(
        &env,
        &issue,
        "Size the API connection pool per pod so that all pods together stay under the database limit",
        Some(
            "Seen in production as `FATAL: sorry, too many clients already` from Postgres when \
             the deployment scaled out: every new pod opened its full pool and the server \
             refused further clients until old pods drained.",
        ),
        &["services/api/db/"],
    );
    let c = env.serve_local(&["--issue-id", &issue]).await;
    let hits = search(
        &c,
        json!({"query": "FATAL: sorry, too many clients already"}),
    )
    .await;
    assert_eq!(ids(&hits)[0], answer, "{hits:#?}");
    let fp = |id: &str| {
        hits.iter().find(|h| h["id"] == id).unwrap()["score"]["field_priority"]
            .as_f64()
            .unwrap()
    };
    for w in &one_word {
        if hits.iter().any(|h| h["id"] == w.as_str()) {
            assert!(
                fp(w) < fp(&answer),
                "one common word in the pattern: {hits:#?}"
            );
        }
    }
    c.close().await;
}

/// A pasted error string ranks first the learning quoting it verbatim, by the in-order
/// phrase bonus alone (docs/learnings.md, "Relevance"): the answer is below another
/// learning on every other signal (BM25, cosine, field priority, rating), which has the
/// same words out of order; a third learning, nearest by embedding, keeps that one's
/// relevance under 1. Without the bonus the answer ranks second (measured with the
/// 2706b87 binary on these learnings: total 0.782 against 0.880).
#[tokio::test]
async fn a_verbatim_error_string_ranks_the_learning_quoting_it_first() {
    let env = Env::new();
    let issue = setup(&env);
    let answer = add(
        &env,
        &issue,
        "When Postgres answers `FATAL: sorry, too many clients already`, size the API \
         connection pool per pod so that all pods together stay under max_connections",
        Some(
            "Seen in production when the deployment scaled out: every new pod opened its \
             full pool and the server refused further connections until old pods drained.",
        ),
        &[],
    );
    let scrambled = add(
        &env,
        &issue,
        "Too many idle clients already hold Postgres connections: the FATAL limit is \
         reached, sorry to say, unless pgbouncer pools them",
        Some(
            "Seen on the reporting replica where dashboards opened sessions and never \
             closed them; pgbouncer in transaction mode fixed it.",
        ),
        &[],
    );
    add(
        &env,
        &issue,
        "Sorry, the server is full: it accepts no more clients until some disconnect",
        Some(
            "Seen during a traffic spike when the autoscaler doubled the API pods and \
             logins started failing within a minute.",
        ),
        &[],
    );
    add(
        &env,
        &issue,
        "Redis eviction policy is volatile-lru in production: keys without a TTL are never evicted",
        Some(
            "Seen when the cache filled up and writes started failing with OOM errors \
             instead of evicting old sessions.",
        ),
        &[],
    );
    let c = env.serve_local(&["--issue-id", &issue]).await;
    let hits = search(
        &c,
        json!({"query": "FATAL: sorry, too many clients already"}),
    )
    .await;
    assert_eq!(
        ids(&hits)[..2],
        [answer.clone(), scrambled.clone()],
        "{hits:#?}"
    );
    let (a, s) = (&hits[0], &hits[1]);
    let signal = |h: &Value, k: &str| h["score"][k].as_f64().unwrap();
    assert!(signal(a, "lexical") < signal(s, "lexical"), "{hits:#?}");
    assert!(signal(a, "semantic") < signal(s, "semantic"), "{hits:#?}");
    assert!(
        signal(a, "field_priority") <= signal(s, "field_priority"),
        "{hits:#?}"
    );
    assert_eq!(a["quality_score"], s["quality_score"]);
    // The bonus is inside relevance, which stays at most 1, and the weights hold.
    assert!(signal(s, "relevance") < 1.0, "{hits:#?}");
    assert_eq!(signal(a, "relevance"), 1.0, "{hits:#?}");
    for h in [a, s] {
        let want = 0.5 * signal(h, "relevance")
            + 0.3 * signal(h, "field_priority")
            + 0.2 * signal(h, "quality");
        assert!((total(h) - want).abs() < 1e-6, "{h:#}");
    }
    c.close().await;
}

#[tokio::test]
async fn prefix_expansion_never_outranks_an_exact_match() {
    let env = Env::new();
    let issue = setup(&env);
    let synchronous = add(
        &env,
        &issue,
        "Synchronous handlers block the event loop: synchronous drivers belong in synchronous routes only",
        None,
        &[],
    );
    let exact = add(
        &env,
        &issue,
        "Run uv sync with the locked flag in CI so that the lockfile, not the resolver, decides versions",
        None,
        &[],
    );
    let c = env.serve_local(&["--issue-id", &issue]).await;
    let hits = search(&c, json!({"query": "sync"})).await;
    assert_eq!(
        ids(&hits),
        [exact.clone(), synchronous.clone()],
        "{hits:#?}"
    );
    let lexical = |i: usize| hits[i]["score"]["lexical"].as_f64().unwrap();
    assert_eq!(lexical(0), 1.0);
    assert!(lexical(1) < 0.5, "an expansion counts less: {hits:#?}");
    assert!(
        hits[1]["score"]["field_priority"].as_f64().unwrap()
            < hits[0]["score"]["field_priority"].as_f64().unwrap()
    );
    // Written out, the longer word is an exact match again.
    let hits = search(&c, json!({"query": "synchronous"})).await;
    assert_eq!(ids(&hits)[0], synchronous);
    c.close().await;
}

#[tokio::test]
async fn a_high_rating_cannot_flood_an_unrelated_query() {
    let env = Env::new();
    let issue = setup(&env);
    let answer = add(
        &env,
        &issue,
        "Redis eviction policy is volatile-lru in production: keys without a TTL are never evicted",
        None,
        &[],
    );
    let popular = add(
        &env,
        &issue,
        "Redis key naming policy: prefix every key with the owning service name and a colon",
        None,
        &[],
    );
    let cairn = env.open();
    cairn.rate_learning(&answer, 30, "cli", None).unwrap();
    cairn.verify_learning(&answer, "cli", None).unwrap();
    cairn.rate_learning(&popular, 95, "cli", None).unwrap();
    let c = env.serve_local(&["--issue-id", &issue]).await;
    let hits = search(&c, json!({"query": "redis eviction policy"})).await;
    assert_eq!(ids(&hits), [answer.clone(), popular.clone()], "{hits:#?}");
    // Quality counts in proportion to relevance; a person's verification adds 15
    // (docs/learnings.md, "Trust in the ranking").
    for h in &hits {
        let s = &h["score"];
        let bonus = if h["trust"] == "verified" { 15.0 } else { 0.0 };
        let q = (h["quality_score"].as_f64().unwrap() + bonus).min(100.0) / 100.0;
        let r = s["relevance"].as_f64().unwrap();
        assert!((s["quality"].as_f64().unwrap() - q * r).abs() < 1e-6, "{s}");
    }
    c.close().await;
}

#[tokio::test]
async fn semantic_recall_finds_paraphrases_is_backfilled_and_says_when_it_is_off() {
    let env = Env::new();
    let issue = setup(&env);
    let no_model = [("CAIRN_MODEL_DIR", "/nonexistent-cairn-models")];
    let add_without_model = |pattern: &str| -> String {
        let out = env
            .cmd(&[
                "learnings",
                "add",
                "--issue",
                &issue,
                "--pattern",
                pattern,
                "--json",
            ])
            .envs(no_model)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["id"].as_str().unwrap().to_string()
    };
    let pool = add_without_model(
        "Postgres connection pool: each API pod opens twenty connections, so scaling the \
         deployment past the server's max_connections makes new sessions fail",
    );
    add_without_model(
        "Prettier runs with the repository config only; never reformat generated files by hand",
    );
    let paraphrase = json!({"query": "too many database clients when adding more replicas"});

    // Without the model: lexical only, and the result says so.
    let off = env.serve_env(&["--issue-id", &issue], &no_model).await;
    let r = off.ok("search_learnings", paraphrase.clone()).await;
    assert_eq!(r["semantic"], false);
    assert!(
        r["semantic_unavailable"]
            .as_str()
            .unwrap()
            .contains("model"),
        "{r:#}"
    );
    assert_eq!(r["count"], 0, "no word in common: {r:#}");
    let r = off
        .ok("search_learnings", json!({"query": "prettier"}))
        .await;
    assert_eq!(r["count"], 1);
    assert!(r["results"][0]["score"].get("semantic").is_none());
    off.close().await;

    // With the model: the learnings recorded without it are backfilled by the search,
    // and the paraphrase finds its answer.
    let on = env.serve(&["--issue-id", &issue]).await;
    let r = on.ok("search_learnings", paraphrase.clone()).await;
    assert_eq!(r["semantic"], true, "{r:#}");
    assert!(r.get("semantic_unavailable").is_none());
    let hits = r["results"].as_array().unwrap();
    assert_eq!(ids(hits)[0], pool, "{r:#}");
    assert_eq!(hits[0]["score"]["lexical"], 0.0);
    assert!(hits[0]["score"]["semantic"].as_f64().unwrap() > 0.25);

    // A learning added with the model is embedded at once, and another process sees it.
    let cache = add(
        &env,
        &issue,
        "TanStack Query keeps data fresh for staleTime; set it per query instead of refetching on every focus",
        None,
        &[],
    );
    let r = on
        .ok(
            "search_learnings",
            json!({"query": "stop refetch when window gets focus again"}),
        )
        .await;
    let hits = r["results"].as_array().unwrap();
    assert_eq!(ids(hits)[0], cache, "{r:#}");
    assert!(
        hits[0]["score"]["semantic"].as_f64().unwrap() > 0.25,
        "{r:#}"
    );
    on.close().await;

    // reindex embeds what is still missing (nothing now) and says so.
    let report = env.json(&["learnings", "reindex"]);
    assert_eq!(report["learnings"], 3);
    assert_eq!(report["embedded"], 0);
}

#[test]
fn reindex_backfills_embeddings_of_learnings_recorded_without_the_model() {
    let env = Env::new();
    let issue = setup(&env);
    for i in 0..3 {
        let out = env
            .cmd(&[
                "learnings",
                "add",
                "--issue",
                &issue,
                "--pattern",
                &format!(
                    "Lesson number {i}: keep migrations reversible and test the down step in CI"
                ),
            ])
            .env("CAIRN_MODEL_DIR", "/nonexistent-cairn-models")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let off = env
        .cmd(&["learnings", "reindex", "--json"])
        .env("CAIRN_MODEL_DIR", "/nonexistent-cairn-models")
        .output()
        .unwrap();
    let off: Value = serde_json::from_slice(&off.stdout).unwrap();
    assert_eq!(off["embedded"], 0);
    assert!(off["semantic_unavailable"].is_string(), "{off:#}");
    let on = env.json(&["learnings", "reindex"]);
    assert_eq!(on["learnings"], 3);
    assert_eq!(on["embedded"], 3, "{on:#}");
    assert!(on.get("semantic_unavailable").is_none());
    assert_eq!(env.json(&["learnings", "reindex"])["embedded"], 0);
}

/// MRR@10 floors on the held-out parts (overall, identifier, keyword, paraphrase,
/// symptom): set 0 is tests/eval/learnings.jsonl, 1 the independent set.
/// Measured at their introduction: 0.909, 0.944, 1.000, 0.756, 0.981 and 0.926, 1.000,
/// 1.000, 0.762, 0.952. Set 0's overall and symptom floors were raised by what the
/// in-order phrase bonus gained (issue 60: 0.910 → 0.921, symptom 0.962 → 1.000).
const FLOORS: [(usize, [f64; 5]); 2] = [
    (0, [0.89, 0.90, 0.95, 0.70, 0.95]),
    (1, [0.90, 0.95, 0.95, 0.72, 0.91]),
];

/// The tests the PostgreSQL pass skips (`-- --skip sqlite_only::`, README): each says why
/// it would prove nothing there.
mod sqlite_only {
    use super::*;

    /// The regression guard of the ranking, with the real model: `cairn eval learnings` on
    /// both checked-in sets in one run. On the tuning part (where the weights were chosen)
    /// the blend is at least BM25 alone, cosine alone and the reciprocal-rank fusions (the
    /// blend with cosine, BM25 with cosine) on MRR@10 and nDCG@10, overall and in every
    /// category; on the held-out parts (the set's own, and the independent set)
    /// it stays above absolute floors, set a little under what was measured
    /// (docs/learnings.md, "Evaluation that cannot flatter").
    #[test]
    fn cairn_eval_learnings_holds_on_held_out_queries() {
        sqlite_only("store-free: `cairn eval learnings` ranks in its own temporary SQLite store");
        let env = Env::new();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/eval");
        // The sets are valid, and every query is in the part the documented rule puts it.
        for (set, how) in [
            ("learnings.jsonl", None),
            ("learnings-heldout.jsonl", Some("--all-heldout")),
        ] {
            let set = dir.join(set);
            for script in ["check_set.py", "split.py"] {
                let mut cmd = std::process::Command::new("python3");
                cmd.arg(dir.join(script)).arg(&set);
                if script == "split.py" {
                    cmd.args(how).arg("--check");
                }
                let out = cmd.output().unwrap();
                assert!(out.status.success(), "{script} {}: {out:?}", set.display());
            }
        }
        let out = env
            .cmd(&[
                "eval",
                "learnings",
                dir.join("learnings.jsonl").to_str().unwrap(),
                dir.join("learnings-heldout.jsonl").to_str().unwrap(),
                "--json",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        let sets = r["sets"].as_array().unwrap();
        assert_eq!(sets.len(), 2, "{r:#}");
        let system = |set: usize, name: &str| -> Value {
            assert_eq!(sets[set]["semantic"], true, "{r:#}");
            sets[set]["systems"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["system"] == name)
                .unwrap_or_else(|| panic!("no {name}: {r:#}"))
                .clone()
        };
        let figure = |s: &Value, part: &str, cat: Option<&str>, m: &str| -> f64 {
            let p = &s["parts"][part];
            match cat {
                None => p["overall"][m].as_f64(),
                Some(c) => p["categories"][c][m].as_f64(),
            }
            .unwrap_or_else(|| panic!("{part} {cat:?} {m}: {s:#}"))
        };
        let cats = [
            None,
            Some("identifier"),
            Some("keyword"),
            Some("paraphrase"),
            Some("symptom"),
        ];
        let cairn = system(0, "cairn");
        for cat in cats {
            for m in ["mrr10", "ndcg10"] {
                let c = figure(&cairn, "tune", cat, m);
                for baseline in ["lexical", "dense", "rrf", "rrf-lexical-dense"] {
                    let b = figure(&system(0, baseline), "tune", cat, m);
                    assert!(c >= b, "tune {cat:?} {m}: cairn {c:.3}, {baseline} {b:.3}");
                }
            }
        }
        // Every query's outcome is listed, and the parts' figures are their means.
        for set in sets {
            let rows = set["per_query"].as_array().unwrap();
            assert_eq!(Some(rows.len() as u64), set["queries"].as_u64(), "{set:#}");
            for sys in set["systems"].as_array().unwrap() {
                let name = sys["system"].as_str().unwrap();
                for (part, p) in sys["parts"].as_object().unwrap() {
                    let mine: Vec<&Value> = rows
                        .iter()
                        .filter(|q| q["part"] == part.as_str())
                        .map(|q| &q["systems"][name])
                        .collect();
                    for o in &mine {
                        let mrr = o["mrr10"].as_f64().unwrap();
                        let at = o["relevant_at"].as_f64().map_or(0.0, |r| 1.0 / r);
                        assert!((mrr - at).abs() < 1e-9, "{name}: {o}");
                        assert!(o["top"].as_array().unwrap().len() <= 3, "{o}");
                    }
                    let mean = mine
                        .iter()
                        .map(|o| o["mrr10"].as_f64().unwrap())
                        .sum::<f64>()
                        / mine.len() as f64;
                    let reported = p["overall"]["mrr10"].as_f64().unwrap();
                    assert!(
                        (mean - reported).abs() < 1e-9,
                        "{name} {part}: per-query mean {mean} against {reported}"
                    );
                }
            }
        }
        // Floors on the held-out parts: MRR@10 overall and per kind.
        for (set, floors) in FLOORS {
            let cairn = system(set, "cairn");
            for (cat, floor) in cats.iter().zip(floors) {
                let got = figure(&cairn, "heldout", *cat, "mrr10");
                assert!(
                    got >= floor,
                    "set {set} held out {cat:?}: MRR@10 {got:.3} under its floor {floor}"
                );
            }
        }
    }
}
