//! The learnings lifecycle through the real binary and real clients (docs/learnings.md,
//! "Lifecycle"): near-duplicates merged (and near misses kept apart) through the
//! official Python SDK, supersession, feedback moving the ranking and flagging, scope,
//! the append-only history, and the migration of a database made before it.

use serde_json::{Value, json};

use cairn::error::ErrorKind;
use cairn::learnings::{Learning, LearningSearch, NewLearning, SearchScope};

use crate::common::{Env, error_fields, reading, sqlite_only, to_json};
use crate::mcp_contract::python_sdk;

/// A lesson and its restatement (the pairs set's P002: cosine about 0.99), then the
/// near misses an agent could record next: a negation and another value.
const REDIS: &str = "The api workflow's redis service container needs a health check: `options: --health-cmd \"redis-cli ping\" --health-interval 2s --health-retries 15`. Without one, the job started the tests before Redis accepted connections, and the first tests failed with `Error 111 connecting to localhost:6379. Connection refused.`";
const REDIS_AGAIN: &str = "The api workflow's redis service container needs a health check (`options: --health-cmd \"redis-cli ping\" --health-interval 2s --health-retries 15`); without it the job started the tests before Redis accepted connections and the first tests failed with `Error 111 connecting to localhost:6379. Connection refused`.";
const REDIS_NOT: &str = "The api workflow's redis service container does not need a health check: `options: --health-cmd \"redis-cli ping\" --health-interval 2s --health-retries 15` is not required, the job never starts the tests before Redis accepts connections on `localhost:6379`.";
const REDIS_OTHER_VALUE: &str = "The api workflow's redis service container needs a health check: `options: --health-cmd \"redis-cli ping\" --health-interval 5s --health-retries 40`. Without one, the job started the tests before Redis accepted connections, and the first tests failed with `Error 111 connecting to localhost:6379. Connection refused.`";

/// Project `web` with issues; their identifiers.
fn issues(env: &Env, n: usize) -> Vec<String> {
    env.project("web", None);
    (0..n)
        .map(|i| env.issue("web", &format!("Work item {i}")))
        .collect()
}

/// What `cairn learnings add --issue ISSUE --pattern PATTERN [EXTRA] --json` prints, the
/// learning recorded through the facade (`extra`: nothing, or `--no-merge`).
fn add_cli(env: &Env, issue: &str, pattern: &str, extra: &[&str]) -> Value {
    let merge = match extra {
        [] => true,
        ["--no-merge"] => false,
        _ => panic!("add_cli: unexpected flags {extra:?}"),
    };
    env.add_learning(issue, pattern, None, &[], merge)
}

/// [`add_cli`], the id of the learning it answers with.
fn add_id(env: &Env, issue: &str, pattern: &str, extra: &[&str]) -> String {
    add_cli(env, issue, pattern, extra)["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_paraphrase_from_another_issue_merges_and_near_misses_do_not() {
    let env = Env::new();
    let is = issues(&env, 2);
    let first = add_cli(&env, &is[0], REDIS, &[]);
    let id = first["id"].as_str().unwrap().to_string();
    assert_eq!(first["merged"], false);
    // A worker on the second issue, through the official Python SDK.
    let out = python_sdk(
        &env,
        "auto",
        &["--issue-id", &is[1], "--agent-type", "worker"],
        json!([
            {"tool": "add_learning", "arguments": {"pattern": REDIS_AGAIN}},
            {"tool": "add_learning", "arguments": {"pattern": REDIS_NOT}},
            {"tool": "add_learning", "arguments": {"pattern": REDIS_OTHER_VALUE}},
            {"tool": "add_learning", "arguments": {"pattern": format!("{REDIS_AGAIN} Recorded twice on purpose."), "merge": false}},
            {"tool": "search_learnings", "arguments": {"query": "redis health check"}},
        ]),
    );
    let calls = out["calls"].as_array().unwrap();
    for c in calls {
        assert_eq!(c["is_error"], false, "{c:#}");
    }
    let merged = &calls[0]["structured"];
    assert_eq!(merged["merged"], true, "{merged:#}");
    assert_eq!(
        merged["id"],
        id.as_str(),
        "answered with the existing learning"
    );
    assert!(merged["similarity"].as_f64().unwrap() >= 0.87);
    assert_eq!(merged["confirmations"], 1);
    for c in &calls[1..4] {
        assert_eq!(c["structured"]["merged"], false, "{c:#}");
        assert_ne!(c["structured"]["id"], id.as_str());
    }
    // Four rows: the original, the negation, the other value, the deliberate second
    // (found as hits or listed under one as saying much the same).
    let rows = reading(&calls[4]["structured"]);
    assert_eq!(rows.len(), 4, "{rows:#?}");
    let original = rows.iter().find(|h| h["id"] == id.as_str()).unwrap();
    assert_eq!(original["confirmations"], 1);
    assert_eq!(original["superseded_by"], Value::Null);
    // The confirmation is in the history, with its issue; the same issue again adds none.
    let again = add_cli(&env, &is[1], REDIS_AGAIN, &[]);
    assert_eq!(again["merged"], true);
    assert_eq!(again["confirmations"], 1, "one confirmation per issue");
    let history = env.json(&["learnings", "history", &id]);
    let events: Vec<(&str, Option<&str>)> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["event"].as_str().unwrap(), h["issue"].as_str()))
        .collect();
    assert_eq!(
        events,
        [
            ("created", Some(is[0].as_str())),
            ("merged", Some(is[1].as_str()))
        ]
    );
    // `--no-merge` from the CLI stores a second row too.
    let forced = add_cli(&env, &is[1], REDIS_AGAIN, &["--no-merge"]);
    assert_eq!(forced["merged"], false);
    assert_ne!(forced["id"], id.as_str());
}

/// Two learnings of one lesson that the duplicate rule keeps apart (its identifier guard
/// reads `disruption.consolidationPolicy` and `consolidationPolicy` as different names;
/// cosine 0.92), and another lesson on the same topic (cosine 0.47 and 0.59 with them).
const KARPENTER: &str = "NodePools in platform/karpenter/ (API karpenter.sh/v1beta1) use `disruption.consolidationPolicy: WhenUnderutilized` and `disruption.expireAfter: 720h`, so half-empty nodes are consolidated and every node is replaced at least every 30 days. A NodePool copied from an old example with `WhenEmpty` ran with 60% idle nodes for weeks, because WhenEmpty only removes nodes that have no pods at all.";
const KARPENTER_AGAIN: &str = "Karpenter NodePools under platform/karpenter are set to `consolidationPolicy: WhenUnderutilized` with `expireAfter: 720h` (v1beta1 API). Don't use `WhenEmpty`: it only reclaims nodes with no pods left on them, and a NodePool copied from an example with it ran with 60% of its nodes idle for weeks.";
const KARPENTER_GPU: &str = "Karpenter only launches GPU nodes for pods that request `nvidia.com/gpu` when a NodePool in platform/karpenter/ allows a GPU instance family (g5) in its requirements; without one, the pods stay Pending with `no instance type satisfied resources` in the Karpenter controller logs.";

/// A restatement the merge missed does not take a place of its own in results: it is
/// listed under the learning it restates (`similar`, with its similarity), and the
/// place goes to the next lesson; through the official Python SDK (which checks each
/// result against the tool's output schema) and the CLI.
#[test]
fn a_restatement_is_listed_under_the_hit_it_restates() {
    let env = Env::new();
    let is = issues(&env, 3);
    let first = add_id(&env, &is[0], KARPENTER, &[]);
    let gpu = add_id(&env, &is[2], KARPENTER_GPU, &[]);
    // Recorded before the session: the session's first search embeds what it finds
    // without a vector (a learning the session's own background indexer has not embedded
    // yet would take a place of its own until it is).
    let again = add_cli(&env, &is[1], KARPENTER_AGAIN, &[]);
    assert_eq!(
        again["merged"], false,
        "the rule keeps them apart: {again:#}"
    );
    let again = again["id"].as_str().unwrap();
    let query = "karpenter nodes idle";
    let out = python_sdk(
        &env,
        "auto",
        &["--issue-id", &is[1], "--agent-type", "worker"],
        json!([
            {"tool": "search_learnings", "arguments": {"query": query, "limit": 2}},
            {"tool": "search_learnings", "arguments": {"query": query, "limit": 1}},
        ]),
    );
    let calls = out["calls"].as_array().unwrap();
    for c in calls {
        assert_eq!(c["is_error"], false, "{c:#}");
    }
    // Two places, two lessons: the restatements share the first, the GPU lesson has the
    // second (ranked by the blend: without grouping, the two restatements would fill
    // both places).
    let hits = calls[0]["structured"]["results"].as_array().unwrap();
    assert_eq!(hits.len(), 2, "{hits:#?}");
    assert_eq!(calls[0]["structured"]["count"], 2);
    let pair = [
        hits[0]["id"].as_str().unwrap(),
        hits[0]["similar"][0]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{hits:#?}")),
    ];
    assert!(
        pair.contains(&first.as_str()) && pair.contains(&again),
        "{hits:#?}"
    );
    let similar = hits[0]["similar"].as_array().unwrap();
    assert_eq!(similar.len(), 1, "{hits:#?}");
    let similarity = similar[0]["similarity"].as_f64().unwrap();
    assert!((0.8..1.0).contains(&similarity), "{similarity}");
    assert!(
        similar[0]["score"]["total"].as_f64().unwrap()
            <= hits[0]["score"]["total"].as_f64().unwrap()
    );
    assert_eq!(hits[1]["id"], gpu.as_str());
    assert!(hits[1].get("similar").is_none(), "{hits:#?}");
    // One place: the group alone.
    let one = calls[1]["structured"]["results"].as_array().unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0]["id"], hits[0]["id"]);
    assert_eq!(one[0]["similar"][0]["id"], similar[0]["id"]);
    // The CLI gives the same grouping, in JSON and indented in text.
    let cli = env.json(&["learnings", "search", query, "--limit", "2"]);
    assert_eq!(cli["results"][0]["id"], hits[0]["id"]);
    assert_eq!(cli["results"][0]["similar"][0]["id"], similar[0]["id"]);
    assert_eq!(cli["results"][1]["id"], gpu.as_str());
    let text = env.ok(&["learnings", "search", query, "--limit", "2"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[1].starts_with("  ≈ 0.") && lines[1].contains(similar[0]["id"].as_str().unwrap()),
        "{text}"
    );
}

/// The lifecycle set's K042: a long account of a lesson, with its context.
const ORDERS: &str = "Order events go to the `orders.v1` topic keyed by `order_id` (services/api/events/producer.py), so every event of one order lands in one partition and consumers see created, paid and shipped in that order. Keying by `customer_id` or leaving the key empty spreads them over partitions, and the worker once processed `order.shipped` before `order.paid`.";
const ORDERS_CONTEXT: &str = "The producer had been changed to key by customer_id so that one customer's events would sit together for a loyalty feature. orders.v1 has 24 partitions; after the change the worker saw about 0.3% of orders out of sequence and flagged them as shipped but unpaid. The loyalty consumer now re-keys into its own topic instead.";
/// K082: the same lesson in one line, which the model finds only loosely similar.
const ORDERS_SUMMARY: &str = "Produce to orders.v1 with the order_id as message key, always: Kafka only keeps events in order within one partition.";
/// Another lesson about the same topic, with code of its own.
const ORDERS_RETENTION: &str = "The `orders.v1` topic keeps 7 days of events (`retention.ms` 604800000); a consumer that was down for longer must replay from the `orders_archive` table, not from Kafka.";

/// A one-line summary beside the long account of the same lesson: the model puts them
/// far apart (cosine about 0.49, below `SIMILAR_COSINE`), but all the summary's code is
/// in the account, so a search lists it under the account and the second place goes
/// to another lesson (real model, real index, through the facade).
#[test]
fn a_summary_sharing_the_code_of_a_long_account_is_listed_under_it() {
    let env = Env::new();
    let is = issues(&env, 3);
    let account = env.add_learning(&is[0], ORDERS, Some(ORDERS_CONTEXT), &[], true);
    let summary = env.add_learning(&is[1], ORDERS_SUMMARY, None, &[], true);
    assert_eq!(summary["merged"], false, "the merge rule keeps them apart");
    let retention = env.add_learning(&is[2], ORDERS_RETENTION, None, &[], true);
    let ids = [&account, &summary, &retention].map(|v| v["id"].as_str().unwrap().to_string());
    let search = |limit| {
        to_json(
            &env.open()
                .search_learnings(&LearningSearch {
                    query: "orders.v1 message key order_id partition".into(),
                    scope: SearchScope::All,
                    limit: Some(limit),
                    min_quality_score: None,
                    include_superseded: false,
                    include_archived: false,
                    min_trust: None,
                })
                .unwrap(),
        )
    };
    let out = search(2);
    let hits = out["results"].as_array().unwrap();
    assert_eq!(hits.len(), 2, "{out:#}");
    let pair = [
        hits[0]["id"].as_str().unwrap(),
        hits[0]["similar"][0]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{out:#}")),
    ];
    assert!(
        pair.contains(&ids[0].as_str()) && pair.contains(&ids[1].as_str()),
        "{out:#}"
    );
    let similarity = hits[0]["similar"][0]["similarity"].as_f64().unwrap();
    assert!(
        (0.45..0.8).contains(&similarity),
        "listed by its code, not by the cosine alone: {similarity}"
    );
    assert_eq!(hits[1]["id"], ids[2].as_str(), "{out:#}");
    assert!(hits[1].get("similar").is_none(), "{out:#}");
}

/// The same lesson for another version is another lesson: not merged, even said the
/// same way (through the official Python SDK, from another issue).
#[test]
fn the_same_lesson_for_another_version_is_not_merged() {
    let env = Env::new();
    let is = issues(&env, 2);
    let node = |v: u32| {
        format!(
            "The web app builds and deploys on Node {v}: the Dockerfile pins node:{v}-alpine, CI runs `npm ci` on Node {v}, and `engines.node` in package.json says >={v}."
        )
    };
    let first = add_id(&env, &is[0], &node(18), &[]);
    let out = python_sdk(
        &env,
        "auto",
        &["--issue-id", &is[1], "--agent-type", "worker"],
        json!([
            {"tool": "add_learning", "arguments": {"pattern": node(20)}},
            {"tool": "add_learning", "arguments": {"pattern": node(18)}},
        ]),
    );
    let calls = out["calls"].as_array().unwrap();
    let other = &calls[0]["structured"];
    assert_eq!(other["merged"], false, "{other:#}");
    assert_ne!(other["id"], first.as_str());
    // The control: the same version from the other issue merges.
    let same = &calls[1]["structured"];
    assert_eq!(same["merged"], true, "{same:#}");
    assert_eq!(same["id"], first.as_str());
}

#[tokio::test]
async fn supersedes_hides_the_old_learning_and_include_superseded_shows_it() {
    let env = Env::new();
    let is = issues(&env, 3);
    let old = add_id(
        &env,
        &is[0],
        "Deploys of the web app run on Node 18: the Dockerfile pins node:18-alpine and CI tests against 18.",
        &[],
    );
    let c = env.serve_local(&["--issue-id", &is[1]]).await;
    let new = c
        .ok(
            "add_learning",
            json!({"pattern": "Deploys of the web app run on Node 20 since the upgrade: the Dockerfile pins node:20-alpine and CI tests against 20.", "supersedes": [old]}),
        )
        .await;
    assert_eq!(new["merged"], false);
    // Another issue's learning: a proposal until a person accepts it (the attacks are
    // replayed in tests/poisoning.rs).
    assert_eq!(new["superseded"], json!([]));
    assert_eq!(new["proposed"], json!([old]));
    let new_id = new["id"].as_str().unwrap().to_string();
    env.ok(&["learnings", "supersede", &old, "--by", &new_id]);
    let find = |include: bool| json!({"query": "node version deploys dockerfile", "include_superseded": include});
    let hits = reading(&c.ok("search_learnings", find(false)).await);
    let ids: Vec<&str> = hits.iter().map(|h| h["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [new_id.as_str()], "the superseded learning left");
    let hits = reading(&c.ok("search_learnings", find(true)).await);
    let shown = hits
        .iter()
        .find(|h| h["id"] == old.as_str())
        .expect("include_superseded brings it back")
        .clone();
    assert_eq!(shown["superseded_by"], new_id.as_str());
    c.close().await;
    // The chain, both ways, from the CLI; a chain of two through `supersede`.
    let newest = add_id(
        &env,
        &is[2],
        "Deploys of the web app run on Node 22 now: the Dockerfile pins node:22-alpine and CI tests against 22.",
        &["--no-merge"],
    );
    let r = env.json(&["learnings", "supersede", &new_id, "--by", &newest]);
    assert_eq!(r["superseded_by"], newest.as_str());
    let shown = env.learning_json(&old);
    assert_eq!(shown["successors"], json!([new_id, newest]));
    let shown = env.learning_json(&newest);
    assert_eq!(shown["predecessors"], json!([new_id, old]));
    // No cycle, and a superseded learning is not superseded twice.
    let cycle = env.run(&["learnings", "supersede", &newest, "--by", &old]);
    assert!(!cycle.status.success());
    assert!(
        String::from_utf8_lossy(&cycle.stderr).contains("cycle"),
        "{cycle:?}"
    );
    let twice = env.run(&["learnings", "supersede", &old, "--by", &newest]);
    assert!(!twice.status.success());
    assert!(String::from_utf8_lossy(&twice.stderr).contains("already superseded"));
}

/// Two learnings that match a query equally (the same words around a marker the query
/// does not name), stored apart on purpose.
fn twins(env: &Env, issue: &str) -> (String, String) {
    let mut out = Vec::new();
    for marker in ["alpha", "omega"] {
        let p = format!(
            "Image uploads over 10 MB time out behind the proxy: stream them in chunks from the browser (variant {marker})."
        );
        out.push(add_id(env, issue, &p, &["--no-merge"]));
    }
    (out.remove(0), out.remove(0))
}

#[tokio::test]
async fn feedback_moves_the_ranking_and_two_wrong_verdicts_flag_for_review() {
    let env = Env::new();
    let is = issues(&env, 4);
    let (x, y) = twins(&env, &is[0]);
    let order = |hits: &Value| -> Vec<String> {
        hits["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].as_str().unwrap().to_string())
            .collect()
    };
    let query = json!({"query": "image uploads time out behind the proxy"});
    let b = env
        .serve_local(&["--issue-id", &is[1], "--agent-type", "worker"])
        .await;
    let before = b.ok("search_learnings", query.clone()).await;
    let first = order(&before)[0].clone();
    let other = if first == x { y.clone() } else { x.clone() };
    // `helped` on the one that ranked second lifts it above its twin.
    let r = b
        .ok(
            "learning_feedback",
            json!({"learning_id": other, "outcome": "helped", "note": "chunked upload fixed it"}),
        )
        .await;
    assert_eq!(r["quality_score"], 60);
    assert_eq!(
        r["feedback"],
        json!({"helped": 1, "not_relevant": 0, "wrong": 0})
    );
    let after = b.ok("search_learnings", query.clone()).await;
    assert_eq!(order(&after)[0], other, "{after:#}");
    // The same issue changes its mind: its latest verdict stands.
    let r = b
        .ok(
            "learning_feedback",
            json!({"learning_id": other, "outcome": "wrong"}),
        )
        .await;
    assert_eq!(
        r["feedback"],
        json!({"helped": 0, "not_relevant": 0, "wrong": 1})
    );
    assert_eq!(r["needs_review"], false);
    let lowered = b.ok("search_learnings", query.clone()).await;
    assert_eq!(order(&lowered)[0], first, "wrong lowers it below its twin");
    b.close().await;
    // A second issue says wrong: flagged for review.
    let c = env
        .serve_local(&["--issue-id", &is[2], "--agent-type", "judge"])
        .await;
    let r = c
        .ok(
            "learning_feedback",
            json!({"learning_id": other, "outcome": "wrong"}),
        )
        .await;
    assert_eq!(r["needs_review"], true);
    assert_eq!(r["quality_score"], 33);
    c.close().await;
    // `helped` from an issue whose work is then done counts more than the word alone.
    let d = env
        .serve_local(&["--issue-id", &is[3], "--agent-type", "researcher"])
        .await;
    let r = d
        .ok(
            "learning_feedback",
            json!({"learning_id": first, "outcome": "helped"}),
        )
        .await;
    assert_eq!(r["quality_score"], 60);
    d.close().await;
    for to in ["in_progress", "review", "done"] {
        env.set_status(&is[3], to, None);
    }
    let shown = env.learning_json(&first);
    assert_eq!(shown["quality_score"], 71, "{shown:#}");
    // A person's rating wins over the evidence; verifying clears the flag.
    env.open().rate_learning(&first, 40, "cli", None).unwrap();
    let r = to_json(&env.open().verify_learning(&other, "cli", None).unwrap());
    assert_eq!(r["needs_review"], false);
    assert_eq!(r["quality_score"], 50, "verified keeps at least the prior");
    let a = env
        .serve_local(&["--issue-id", &is[1], "--agent-type", "worker"])
        .await;
    let r = a
        .ok(
            "learning_feedback",
            json!({"learning_id": first, "outcome": "helped"}),
        )
        .await;
    assert_eq!(r["quality_score"], 40, "a rating is not moved by evidence");
    // Unknown outcomes are refused with the field named.
    let e = a
        .err(
            "learning_feedback",
            json!({"learning_id": first, "outcome": "great"}),
        )
        .await;
    assert!(error_fields(&e).contains(&"outcome".to_string()), "{e:#}");
    a.close().await;
}

#[tokio::test]
async fn an_agent_cannot_supersede_or_give_feedback_outside_its_project() {
    let env = Env::new();
    let is = issues(&env, 1);
    env.project("api", None);
    let theirs = env.issue("api", "Their work");
    let foreign = add_id(
        &env,
        &theirs,
        "The api gateway retries idempotent GET requests twice with jittered backoff before failing.",
        &[],
    );
    let c = env
        .serve_local(&["--issue-id", &is[0], "--agent-type", "worker"])
        .await;
    let e = c
        .err(
            "learning_feedback",
            json!({"learning_id": foreign, "outcome": "wrong"}),
        )
        .await;
    assert_eq!(e["error"]["code"], "ERR_NOT_FOUND", "{e:#}");
    let e = c
        .err(
            "add_learning",
            json!({"pattern": "The api gateway retries idempotent GET requests three times with jittered backoff before failing.", "supersedes": [foreign]}),
        )
        .await;
    assert_eq!(e["error"]["code"], "ERR_NOT_FOUND", "{e:#}");
    c.close().await;
    // Nothing was left behind: no new learning, no feedback, no change to theirs.
    let count = |sql: &str| -> i64 {
        env.store()
            .read(|c| c.query_row(sql, [], |r| r.get(0)))
            .unwrap()
    };
    assert_eq!(count("SELECT count(*) FROM learnings"), 1);
    assert_eq!(count("SELECT count(*) FROM learning_feedback"), 0);
    let shown = env.learning_json(&foreign);
    assert_eq!(shown["superseded_by"], Value::Null);
    assert_eq!(shown["history"].as_array().unwrap().len(), 1);
}

#[test]
fn history_lists_every_change_and_ageing_is_recorded_once() {
    let env = Env::new();
    let is = issues(&env, 3);
    let id = add_id(&env, &is[0], REDIS, &[]);
    add_cli(&env, &is[1], REDIS_AGAIN, &[]);
    env.ok(&[
        "learnings",
        "feedback",
        &id,
        "--issue",
        &is[1],
        "helped",
        "--note",
        "it was the cause",
    ]);
    env.ok(&["learnings", "rate", &id, "80", "--note", "checked"]);
    let successor = add_id(&env, &is[2], REDIS_OTHER_VALUE, &["--no-merge"]);
    env.ok(&["learnings", "supersede", &id, "--by", &successor]);
    // Nobody confirmed the successor for 200 days (the clock is the row's).
    env.sql(&format!(
        "UPDATE learnings SET fresh_at = '2020-01-01T00:00:00Z' WHERE id = '{successor}'"
    ))
    .unwrap();
    let events = |id: &str| -> Vec<String> {
        env.json(&["learnings", "history", id])
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["event"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        events(&id),
        ["created", "merged", "feedback", "rated", "superseded"]
    );
    assert_eq!(events(&successor), ["created", "supersedes", "aged"]);
    // Looked at again: the ageing is not recorded twice.
    assert_eq!(events(&successor), ["created", "supersedes", "aged"]);
    let shown = env.json(&["learnings", "show", &successor]);
    assert_eq!(shown["stale"], true);
    assert_eq!(shown["history"][2]["at"], "2020-06-29T00:00:00Z");
    // A verified learning does not age.
    env.ok(&["learnings", "verify", &successor]);
    assert_eq!(env.json(&["learnings", "show", &successor])["stale"], false);
    // The history is append-only in the database too.
    let refused = env.sql("UPDATE learning_history SET actor = 'someone else'");
    assert!(refused.is_err(), "{refused:?}");
    let refused = env.sql("DELETE FROM learning_history");
    assert!(refused.is_err(), "{refused:?}");
}

#[test]
fn the_migration_runs_on_a_database_created_before_it() {
    let env = Env::new();
    // What a cairn of schema 11 wrote: a project, an issue, two learnings, one rated.
    cairn::store::migrate_upto(
        &env.store_location(),
        11,
        "INSERT INTO projects(id, slug, name, prefix, created_at, updated_at)
         VALUES ('proj_1', 'web', 'web', 'WEB', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
         INSERT INTO issues(id, project_id, seq, identifier, title, created_at, updated_at)
         VALUES ('iss_1', 'proj_1', 1, 'WEB-1', 'Old work', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'),
                ('iss_2', 'proj_1', 2, 'WEB-2', 'Later work', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
         UPDATE projects SET next_seq = 3;
         INSERT INTO learnings(id, issue_id, project_id, pattern, pattern_norm, created_by, created_at, updated_at, quality_score)
         VALUES ('lrn_old1', 'iss_1', 'proj_1', 'Old lesson one about the build cache keyed on the lock file hash', 'old lesson one', 'cli', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 80),
                ('lrn_old2', 'iss_1', 'proj_1', 'Old lesson two about retrying the flaky upload test once', 'old lesson two', 'cli', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 50);
         INSERT INTO learning_history(learning_id, event, quality_after, verified_after, actor, at)
         VALUES ('lrn_old1', 'created', 50, 0, 'cli', '2026-01-01T00:00:00Z'),
                ('lrn_old2', 'created', 50, 0, 'cli', '2026-01-01T00:00:00Z'),
                ('lrn_old1', 'rated', 80, 0, 'person', '2026-01-02T00:00:00Z');",
    )
    .unwrap();
    // The new binary migrates it: the rating stays a person's, history keeps its rows.
    // (Verdicts come from WEB-2: a learning's own issue's verdict counts for nothing.)
    let shown = env.json(&["learnings", "show", "lrn_old1"]);
    assert_eq!(shown["quality_score"], 80);
    assert_eq!(shown["confirmations"], 0);
    let events: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["event"].as_str().unwrap())
        .collect();
    assert_eq!(events[..2], ["created", "rated"]);
    env.ok(&[
        "learnings",
        "feedback",
        "lrn_old1",
        "--issue",
        "WEB-2",
        "wrong",
    ]);
    assert_eq!(
        env.json(&["learnings", "show", "lrn_old1"])["quality_score"],
        80,
        "rated before the migration"
    );
    env.ok(&[
        "learnings",
        "feedback",
        "lrn_old2",
        "--issue",
        "WEB-2",
        "helped",
    ]);
    assert_eq!(
        env.json(&["learnings", "show", "lrn_old2"])["quality_score"],
        60
    );
    // History ids continue after the migrated ones.
    let ids: Vec<i64> = env
        .store()
        .read(|c| {
            let mut st = c.prepare("SELECT id FROM learning_history ORDER BY id")?;
            let rows = st.query_map([], |r| r.get(0))?;
            rows.collect::<cairn::error::Result<Vec<i64>>>()
        })
        .unwrap();
    // 3 migrated, 2 verdicts, and the ageing of lrn_old1, recorded when first shown
    // (lrn_old2 was fresh again by `helped` before anyone looked).
    assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
    // The rebuilt history is still append-only, and takes the newer events.
    assert!(env.sql("DELETE FROM learning_history").is_err());
    env.ok(&["learnings", "archive", "lrn_old2"]);
    // And `store copy` carries it all.
    let copy = env.path().join("copy.db");
    let from = env.db_args()[1].to_str().unwrap().to_string();
    env.ok(&[
        "store",
        "copy",
        "--from",
        &from,
        "--to",
        copy.to_str().unwrap(),
    ]);
    let copied = cairn::Cairn::open(&copy)
        .unwrap()
        .learning("lrn_old2")
        .unwrap();
    assert_eq!(copied.learning.feedback.helped, 1);
    assert!(copied.learning.archived_at.is_some());
    assert_eq!(copied.history.len(), 3);
}

#[test]
fn an_archived_learning_leaves_every_search_and_takes_no_merge_until_restored() {
    let env = Env::new();
    let is = issues(&env, 3);
    let cairn = env.open();
    let add = |issue: &str, pattern: &str| {
        cairn
            .add_learning(&NewLearning {
                issue: issue.into(),
                pattern: pattern.into(),
                context: None,
                applies_to: vec![],
                learning_type: None,
                created_by: "test".into(),
                agent_type: "worker".into(),
                merge: true,
                supersedes: vec![],
                person: false,
            })
            .unwrap()
    };
    let found = |include_archived: bool| -> Vec<Learning> {
        cairn
            .search_learnings(&LearningSearch {
                query: "redis health check".into(),
                scope: SearchScope::All,
                limit: None,
                min_quality_score: None,
                include_superseded: true,
                include_archived,
                min_trust: None,
            })
            .unwrap()
            .learnings()
            .cloned()
            .collect()
    };
    let id = add(&is[0], REDIS).learning.id;
    let archived = cairn
        .archive_learning(&id, "person:alice", Some("the workflow moved"))
        .unwrap();
    assert!(archived.archived_at.is_some());
    assert!(found(false).is_empty(), "archived: out of every search");
    let back = found(true);
    assert_eq!(back.len(), 1);
    assert_eq!(
        (back[0].id.as_str(), back[0].archived_at.is_some()),
        (id.as_str(), true)
    );
    // The same lesson again, in the same words, is a new learning: the archived one
    // takes no confirmation. A paraphrase after it merges into the new one.
    let same = add(&is[1], REDIS);
    assert!(!same.merged, "{:?}", same.learning);
    assert_ne!(same.learning.id, id);
    let again = add(&is[2], REDIS_AGAIN);
    assert!(again.merged, "{:?}", again.learning);
    assert_eq!(again.learning.id, same.learning.id);
    assert_eq!(cairn.learning(&id).unwrap().learning.confirmations, 0);
    // Archiving twice or restoring what is not archived is a conflict, and changes nothing.
    let twice = cairn
        .archive_learning(&id, "person:alice", None)
        .unwrap_err();
    assert_eq!(twice.kind(), ErrorKind::Conflict, "{twice}");
    let not = cairn
        .restore_learning(&same.learning.id, "cli", None)
        .unwrap_err();
    assert_eq!(not.kind(), ErrorKind::Conflict, "{not}");
    let restored = cairn.restore_learning(&id, "cli", None).unwrap();
    assert!(restored.archived_at.is_none());
    assert!(found(false).iter().any(|l| l.id == id));
    let events: Vec<(String, String)> = cairn
        .learning(&id)
        .unwrap()
        .history
        .into_iter()
        .map(|h| (h.event, h.actor))
        .collect();
    let pairs: Vec<(&str, &str)> = events
        .iter()
        .map(|(e, a)| (e.as_str(), a.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("created", "test"),
            ("archived", "person:alice"),
            ("restored", "cli")
        ]
    );
}

/// The tests the PostgreSQL pass skips (`-- --skip sqlite_only::`, README): each says why
/// it would prove nothing there.
mod sqlite_only {
    use super::*;

    /// `cairn eval learnings --pairs --lifecycle` (real model) meets the lifecycle's goals
    /// on both halves of its sets: the duplicate rule's precision on the labelled pairs,
    /// no near miss merged, no stale answer, no duplicate clutter in the top 10, and
    /// quality from evidence at least as good as quality fixed at 50.
    #[test]
    fn cairn_eval_of_the_lifecycle_meets_its_goals_on_both_halves() {
        sqlite_only(
            "store-free: `cairn eval learnings` replays into its own temporary SQLite store",
        );
        let env = Env::new();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/eval");
        let path = |f: &str| dir.join(f).to_str().unwrap().to_string();
        let r = env.json(&[
            "eval",
            "learnings",
            "--pairs",
            &path("learning-pairs.jsonl"),
            "--lifecycle",
            &path("learnings-lifecycle.jsonl"),
        ]);
        assert_eq!(r["sets"], json!([]), "no search set was given");
        let f = |v: &Value| v.as_f64().unwrap_or_else(|| panic!("{r:#}"));
        for split in ["tune", "holdout"] {
            let rule = &r["pairs"]["splits"][split]["cairn"];
            assert!(f(&rule["precision"]) >= 0.97, "{split}: {rule:#}");
            assert!(f(&rule["recall"]) >= 0.2, "{split}: {rule:#}");
            let clutter = &r["lifecycle"]["clutter"][split];
            assert!(clutter["queries"].as_u64().unwrap() > 20, "{clutter:#}");
            assert_eq!(clutter["cluttered"], 0, "{split}: {clutter:#}");
            let systems = &r["lifecycle"]["splits"][split];
            assert!(
                f(&systems["cairn"]["mrr10"]) >= f(&systems["quality_50"]["mrr10"]),
                "{split}: {systems:#}"
            );
        }
        let l = &r["lifecycle"];
        assert!(f(&l["merges"]["precision"]) >= 0.97, "{l:#}");
        assert_eq!(l["near_misses_merged"], 0, "{l:#}");
        assert_eq!(l["stale_answers"]["default_results"], 0, "{l:#}");
        assert!(
            l["stale_answers"]["queries"].as_u64().unwrap() > 10,
            "{l:#}"
        );
    }
}
