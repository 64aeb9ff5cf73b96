//! The Colibri vocabulary through a real MCP client and the server in-process: tasks and
//! their transition table, hash-chained thoughts and tamper detection, audit sessions
//! and Merkle roots (checked against an independent tree), skills from a fixture tree,
//! and the document's examples with their documented shapes.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::{COLIBRI_TOOLS, Client, Env, error_fields};

fn fixture_skills() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/skills")
}

/// A project `colibri` and a server bound to it.
async fn setup(extra: &[&str]) -> (Env, Client) {
    let env = Env::new();
    env.project("colibri", None);
    let mut flags = vec!["--project-id", "colibri"];
    flags.extend_from_slice(extra);
    let c = env.serve_local(&flags).await;
    (env, c)
}

async fn new_task(c: &Client, title: &str) -> String {
    let r = c
        .ok("task_create", json!({"title": title, "project": "colibri"}))
        .await;
    r["task_id"].as_str().unwrap().to_string()
}

async fn new_sub_task(c: &Client, title: &str, parent: &str) -> String {
    let r = c
        .ok(
            "task_create",
            json!({"title": title, "project": "colibri", "parent_id": parent}),
        )
        .await;
    r["task_id"].as_str().unwrap().to_string()
}

/// Assert that `v` has every field with the JSON type named (`string`, `integer`,
/// `number`, `boolean`, `array`, `object`, `null`, or alternatives `string|null`).
fn assert_shape(v: &Value, fields: &[(&str, &str)]) {
    for (name, ty) in fields {
        let field = v
            .get(*name)
            .unwrap_or_else(|| panic!("{name} missing in {v:#}"));
        let ok = ty.split('|').any(|t| match t {
            "string" => field.is_string(),
            "integer" => field.is_i64() || field.is_u64(),
            "number" => field.is_number(),
            "boolean" => field.is_boolean(),
            "array" => field.is_array(),
            "object" => field.is_object(),
            "null" => field.is_null(),
            other => panic!("unknown type {other}"),
        });
        assert!(ok, "{name} should be {ty} in {v:#}");
    }
}

fn is_iso(s: &Value) -> bool {
    let s = s.as_str().unwrap_or_default();
    s.len() == 20 && s.ends_with('Z') && s.as_bytes()[10] == b'T'
}

// ---------------------------------------------------------------- transitions

/// The document's transition table, written out independently of the code.
const TABLE: &[(&str, &[&str])] = &[
    ("backlog", &["todo", "cancelled"]),
    ("todo", &["in_progress", "blocked", "cancelled"]),
    ("in_progress", &["review", "blocked", "cancelled"]),
    ("blocked", &["todo", "in_progress", "cancelled"]),
    ("review", &["done", "backlog", "blocked", "cancelled"]),
    ("done", &[]),
    ("cancelled", &[]),
];

/// Allowed steps from backlog to each status.
fn path_to(status: &str) -> &'static [&'static str] {
    match status {
        "backlog" => &[],
        "todo" => &["todo"],
        "in_progress" => &["todo", "in_progress"],
        "blocked" => &["todo", "blocked"],
        "review" => &["todo", "in_progress", "review"],
        "done" => &["todo", "in_progress", "review", "done"],
        "cancelled" => &["cancelled"],
        other => panic!("no status {other}"),
    }
}

fn status_args(task: &str, status: &str) -> Value {
    let mut a = json!({"task_id": task, "status": status});
    if status == "blocked" {
        a["blocked_reason"] = json!("waiting on the schema review");
    }
    a
}

#[tokio::test]
async fn every_transition_pair_follows_the_table() {
    let (_env, c) = setup(&[]).await;
    let (mut allowed, mut refused) = (0, 0);
    for (from, _) in TABLE {
        for (to, _) in TABLE {
            let task = new_task(&c, &format!("{from} -> {to}")).await;
            for step in path_to(from) {
                c.ok("task_update", status_args(&task, step)).await;
            }
            let ok = TABLE
                .iter()
                .find(|(f, _)| f == from)
                .unwrap()
                .1
                .contains(to);
            let r = c.call("task_update", status_args(&task, to)).await;
            let body = crate::common::body(&r);
            if ok {
                allowed += 1;
                assert_ne!(r.is_error, Some(true), "{from} -> {to} refused: {body:#}");
                assert_eq!(body["status"], *to);
                assert_eq!(body["previous_status"], *from);
            } else {
                refused += 1;
                assert_eq!(r.is_error, Some(true), "{from} -> {to} allowed: {body:#}");
                assert_eq!(body["error"]["code"], "ERR_INVALID_TRANSITION", "{body:#}");
                let got = c.ok("task_get", json!({"task_id": task})).await;
                assert_eq!(
                    got["status"], *from,
                    "a refused transition changed the task"
                );
            }
        }
    }
    assert_eq!((allowed, refused), (15, 34));
    c.close().await;
}

#[tokio::test]
async fn blocked_needs_a_reason_and_leaving_it_clears_the_reason() {
    let (_env, c) = setup(&[]).await;
    let task = new_task(&c, "blockable").await;
    c.ok("task_update", json!({"task_id": task, "status": "todo"}))
        .await;
    let e = c
        .err_code(
            "task_update",
            json!({"task_id": task, "status": "blocked"}),
            "ERR_INVALID_INPUT",
        )
        .await;
    assert_eq!(error_fields(&e), ["blocked_reason"]);
    c.ok("task_update", status_args(&task, "blocked")).await;
    let got = c.ok("task_get", json!({"task_id": task})).await;
    assert_eq!(got["blocked_reason"], "waiting on the schema review");
    c.ok("task_update", json!({"task_id": task, "status": "todo"}))
        .await;
    let got = c.ok("task_get", json!({"task_id": task})).await;
    assert!(got.get("blocked_reason").is_none(), "{got:#}");
    c.close().await;
}

// ---------------------------------------------------------------- tasks

#[tokio::test]
async fn task_create_validates_and_reports_documented_errors() {
    let (_env, c) = setup(&[]).await;
    c.err_code(
        "task_create",
        json!({"title": "x", "project": "nope"}),
        "ERR_PROJECT_NOT_FOUND",
    )
    .await;
    let e = c
        .err_code(
            "task_create",
            json!({"title": "x".repeat(257), "project": "colibri", "estimate_hours": 1001,
                   "labels": vec!["l"; 21]}),
            "ERR_INVALID_INPUT",
        )
        .await;
    let mut fields = error_fields(&e);
    fields.sort();
    assert_eq!(fields, ["estimate_hours", "labels", "title"]);
    c.err_code(
        "task_create",
        json!({"title": "   ", "project": "colibri"}),
        "ERR_INVALID_INPUT",
    )
    .await;
    c.err_code(
        "task_create",
        json!({"title": "child", "project": "colibri", "parent_id": "COLIBRI-999"}),
        "ERR_TASK_NOT_FOUND",
    )
    .await;
    for missing in ["COLIBRI-999", "T-0999", "Θ-1", "'; DROP TABLE issues; --"] {
        c.err_code(
            "task_get",
            json!({"task_id": missing}),
            "ERR_TASK_NOT_FOUND",
        )
        .await;
    }
    let created = c
        .ok(
            "task_create",
            json!({"title": "first", "project": "colibri"}),
        )
        .await;
    assert_eq!(created["task_id"], "COLIBRI-1");
    assert_eq!(created["sequence"], 1);
    assert_eq!(created["status"], "backlog");
    // The T-N alias names the same record; the one identity comes back.
    let got = c.ok("task_get", json!({"task_id": "T-0001"})).await;
    assert_eq!(got["task_id"], "COLIBRI-1");
    assert_eq!(got["priority"], "normal");
    assert_eq!(got["assignee"], "unassigned");
    c.err_code(
        "task_update",
        json!({"task_id": "COLIBRI-1"}),
        "ERR_INVALID_INPUT",
    )
    .await;
    c.close().await;
}

#[tokio::test]
async fn task_update_warns_about_progress_and_status() {
    let (_env, c) = setup(&[]).await;
    let task = new_task(&c, "warn me").await;
    let r = c
        .ok("task_update", json!({"task_id": task, "progress": 100}))
        .await;
    assert_eq!(
        r["warnings"],
        json!(["Progress set to 100% but status != 'done'"])
    );
    assert_eq!(r["previous_status"], "backlog");
    let r = c
        .ok(
            "task_update",
            json!({"task_id": task, "progress": 40, "priority": "critical",
                   "labels": ["a", "b"], "description": "new body", "assignee": "agent-x"}),
        )
        .await;
    assert!(r.get("warnings").is_none(), "{r:#}");
    let got = c.ok("task_get", json!({"task_id": task})).await;
    assert_eq!(got["priority"], "critical");
    assert_eq!(got["labels"], json!(["a", "b"]));
    assert_eq!(got["description"], "new body");
    assert_eq!(got["assignee"], "agent-x");
    assert_eq!(got["progress"], 40);
    let e = c
        .err_code(
            "task_update",
            json!({"task_id": task, "labels": ["ok", "  "], "assignee": "\t"}),
            "ERR_INVALID_INPUT",
        )
        .await;
    assert_eq!(error_fields(&e), ["assignee", "labels[1]"]);
    c.close().await;
}

#[tokio::test]
async fn task_list_filters_sorts_pages_and_searches() {
    let (_env, c) = setup(&[]).await;
    let specs = [
        (
            "Package setup",
            "critical",
            "agent-alice",
            "phase-0",
            "cargo workspace",
        ),
        (
            "Wire up handler",
            "high",
            "agent-bob",
            "mcp",
            "the task_create tool",
        ),
        (
            "Write tests",
            "normal",
            "agent-bob",
            "mcp",
            "résumé of the naïve cases",
        ),
        ("Docs", "low", "unassigned", "docs", "README"),
    ];
    for (title, priority, assignee, label, description) in specs {
        c.ok(
            "task_create",
            json!({"title": title, "project": "colibri", "priority": priority,
                   "assignee": assignee, "labels": [label], "description": description}),
        )
        .await;
    }
    let titles = |v: &Value| -> Vec<String> {
        v["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["title"].as_str().unwrap().to_string())
            .collect()
    };
    let r = c
        .ok(
            "task_list",
            json!({"sort_by": "priority", "sort_order": "desc"}),
        )
        .await;
    assert_eq!(
        titles(&r),
        ["Package setup", "Wire up handler", "Write tests", "Docs"]
    );
    let r = c
        .ok(
            "task_list",
            json!({"sort_by": "priority", "sort_order": "asc"}),
        )
        .await;
    assert_eq!(titles(&r)[0], "Docs");
    let r = c
        .ok(
            "task_list",
            json!({"project": "colibri", "sort_by": "created", "sort_order": "asc",
                   "limit": 2, "offset": 1}),
        )
        .await;
    assert_eq!(titles(&r), ["Wire up handler", "Write tests"]);
    assert_eq!(
        (
            &r["total_count"],
            &r["returned_count"],
            &r["offset"],
            &r["limit"]
        ),
        (&json!(4), &json!(2), &json!(1), &json!(2))
    );
    let r = c
        .ok(
            "task_list",
            json!({"assignee": "agent-bob", "label": "mcp"}),
        )
        .await;
    assert_eq!(r["total_count"], 2);
    let r = c
        .ok(
            "task_list",
            json!({"priority": ["low", "critical"], "sort_by": "created"}),
        )
        .await;
    assert_eq!(titles(&r), ["Docs", "Package setup"]);
    let r = c.ok("task_list", json!({"status": ["todo"]})).await;
    assert_eq!(r["total_count"], 0);
    // Full-text search: title and description, prefixes, diacritics folded.
    let r = c.ok("task_list", json!({"search": "handl"})).await;
    assert_eq!(titles(&r), ["Wire up handler"]);
    let r = c.ok("task_list", json!({"search": "resume naive"})).await;
    assert_eq!(titles(&r), ["Write tests"]);
    // Hostile query text never errors.
    for q in [
        "\"unbalanced",
        "AND OR NOT",
        "title:x NEAR(a b)",
        "*",
        "^ - + ( ) { } : '",
        "\u{0}\u{1}",
        "🐦 \u{2028}",
    ] {
        let r = c.ok("task_list", json!({"search": q})).await;
        assert!(r["total_count"].is_u64(), "{q}: {r:#}");
    }
    let r = c
        .ok(
            "task_list",
            json!({"created_after": "2000-01-01", "created_before": "2999-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(r["total_count"], 4);
    let r = c
        .ok(
            "task_list",
            json!({"created_after": "2999-01-01T00:00:00+02:00"}),
        )
        .await;
    assert_eq!(r["total_count"], 0);
    let e = c
        .err_code(
            "task_list",
            json!({"created_after": "last week"}),
            "ERR_INVALID_INPUT",
        )
        .await;
    assert_eq!(error_fields(&e), ["created_after"]);
    c.err_code("task_list", json!({"limit": 501}), "ERR_INVALID_INPUT")
        .await;
    c.err_code(
        "task_list",
        json!({"status": ["open"]}),
        "ERR_INVALID_INPUT",
    )
    .await;
    c.err_code(
        "task_list",
        json!({"project": "nope"}),
        "ERR_PROJECT_NOT_FOUND",
    )
    .await;
    c.close().await;
}

#[tokio::test]
async fn task_next_actions_orders_ready_work_and_lists_blocked() {
    let env = Env::new();
    env.project("colibri", None);
    let dep = env.issue("colibri", "dependency");
    let waits = env.issue_ranked("colibri", "waits", 2, &[&dep]);
    let ready = env.issue_ranked("colibri", "ready", 2, &[]);
    let urgent = env.issue_ranked("colibri", "urgent", 1, &[]);
    let c = env.serve_local(&["--project-id", "colibri"]).await;
    c.ok("task_update", status_args(&dep, "blocked")).await;
    let r = c.ok("task_next_actions", json!({})).await;
    assert_eq!(r["project"], "colibri");
    let ids: Vec<&str> = r["next_actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [urgent.as_str(), ready.as_str(), waits.as_str()]);
    assert_eq!(r["next_actions"][2]["dependencies_unmet"], 1);
    assert_eq!(r["next_actions"][0]["dependencies_unmet"], 0);
    assert_eq!(r["count"], 3);
    assert!(r.get("blocked").is_none());
    let r = c
        .ok(
            "task_next_actions",
            json!({"project": "colibri", "include_blocked": true, "limit": 1}),
        )
        .await;
    assert_eq!(r["count"], 1);
    assert_eq!(
        r["blocked"],
        json!([{"task_id": dep, "title": "dependency", "blocked_reason": "waiting on the schema review"}])
    );
    c.err_code(
        "task_next_actions",
        json!({"project": "nope"}),
        "ERR_PROJECT_NOT_FOUND",
    )
    .await;
    c.close().await;
    // Unbound server, no project named: the error says how to fix the call.
    let c = env.serve_local(&[]).await;
    let e = c
        .err_code("task_next_actions", json!({}), "ERR_INVALID_INPUT")
        .await;
    assert_eq!(error_fields(&e), ["project"]);
    c.close().await;
}

// ---------------------------------------------------------------- thoughts

/// The document's hash, computed independently: serde_json of a struct whose fields
/// are in the document's order (compact output equals JSON.stringify).
#[derive(Serialize)]
struct Hashed<'a> {
    task_id: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    content: &'a str,
    previous_hash: Option<&'a str>,
    recorded_at: &'a str,
    recorded_by: &'a str,
}

fn doc_hash(t: &Value, task_id: &str, content: &str) -> String {
    let h = Hashed {
        task_id,
        kind: t["type"].as_str().unwrap(),
        content,
        previous_hash: t["previous_hash"].as_str(),
        recorded_at: t["recorded_at"].as_str().unwrap(),
        recorded_by: t["recorded_by"].as_str().unwrap(),
    };
    hex::encode(Sha256::digest(serde_json::to_string(&h).unwrap()))
}

async fn think(c: &Client, task: &str, content: &str) -> Value {
    c.ok(
        "thought_record",
        json!({"task_id": task, "type": "decision", "content": content}),
    )
    .await
}

/// A thought's content as stored: the text policy removes the C0 control character.
fn stored(content: &str) -> String {
    content.replace('\u{1}', "")
}

#[tokio::test]
async fn a_known_chain_links_and_verifies() {
    let (env, orchestrator) = setup(&[]).await;
    let task = new_task(&orchestrator, "chain").await;
    let other = new_task(&orchestrator, "other chain").await;
    // A worker records thoughts on its bound issue only.
    let worker = |issue: String| {
        let env = &env;
        async move {
            env.serve_local(&[
                "--project-id",
                "colibri",
                "--agent-type",
                "worker",
                "--issue-id",
                &issue,
            ])
            .await
        }
    };
    let c = worker(task.clone()).await;
    let contents = [
        "first \"quoted\"",
        "second\nline \u{2028} 🐦",
        "third \\ \u{1}",
    ];
    let mut previous: Option<String> = None;
    for (i, content) in contents.iter().enumerate() {
        let t = think(&c, &task, content).await;
        assert_eq!(t["chain_position"], i as u64 + 1);
        assert_eq!(t["previous_hash"].as_str().map(String::from), previous);
        assert_eq!(t["recorded_by"], "agent-worker");
        // The control character is removed by the text policy before hashing
        // (docs/security.md): the hash covers the content as stored.
        assert_eq!(t["hash"], doc_hash(&t, &task, &stored(content)), "{t:#}");
        previous = t["hash"].as_str().map(String::from);
    }
    let c2 = worker(other.clone()).await;
    let t = think(&c2, &other, "independent").await;
    assert_eq!(t["chain_position"], 1);
    assert!(t["previous_hash"].is_null());
    c2.close().await;

    let l = c
        .ok(
            "thought_record_list",
            json!({"task_id": task, "verify_chain": true}),
        )
        .await;
    assert_eq!(l["thought_count"], 3);
    assert_eq!(l["chain_valid"], true);
    assert_eq!(l["invalid_links"], json!([]));
    let listed: Vec<&str> = l["thoughts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["content"].as_str().unwrap())
        .collect();
    assert_eq!(listed, contents.map(stored));
    let l = c
        .ok(
            "thought_record_list",
            json!({"task_id": task, "limit": 1, "type": "decision"}),
        )
        .await;
    assert_eq!(
        (
            l["thought_count"].as_u64(),
            l["thoughts"].as_array().unwrap().len()
        ),
        (Some(3), 1)
    );
    assert!(l.get("chain_valid").is_none());
    let l = c.ok("thought_record_list", json!({"type": "risk"})).await;
    assert_eq!(l["thought_count"], 0);
    let l = c
        .ok(
            "thought_record_list",
            json!({"limit": 2, "verify_chain": true}),
        )
        .await;
    assert_eq!(l["thought_count"], 4);
    assert_eq!(l["thoughts"].as_array().unwrap().len(), 2);
    assert_eq!(l["chain_valid"], true);
    let v = c.ok("audit_verify_chain", json!({"task_id": task})).await;
    assert_eq!(
        (
            &v["chain_valid"],
            &v["total_records"],
            &v["integrity_score"]
        ),
        (&json!(true), &json!(3), &json!(100))
    );
    let got = c
        .ok(
            "task_get",
            json!({"task_id": task, "include_thought_trail": true}),
        )
        .await;
    assert_eq!(got["thought_trail"].as_array().unwrap().len(), 3);
    c.err_code(
        "thought_record",
        json!({"task_id": task, "type": "musing", "content": "x"}),
        "ERR_INVALID_INPUT",
    )
    .await;
    c.err_code(
        "thought_record",
        json!({"task_id": task, "type": "risk", "content": ""}),
        "ERR_INVALID_INPUT",
    )
    .await;
    c.err_code(
        "thought_record",
        json!({"task_id": task, "type": "risk", "content": "x", "commit_sha": "not-hex"}),
        "ERR_INVALID_INPUT",
    )
    .await;
    c.err_code(
        "thought_record",
        json!({"task_id": task, "type": "risk", "content": "x",
               "metadata": {"blob": "y".repeat(20_000)}}),
        "ERR_INVALID_INPUT",
    )
    .await;
    c.err_code(
        "thought_record",
        json!({"task_id": "COLIBRI-404", "type": "risk", "content": "x"}),
        "ERR_TASK_NOT_FOUND",
    )
    .await;
    c.close().await;
}

#[tokio::test]
async fn an_edited_record_is_reported_at_its_position_with_both_hashes() {
    let (env, c) = setup(&[]).await;
    let task = new_task(&c, "tamper target").await;
    let mut recorded = Vec::new();
    for n in 1..=4 {
        recorded.push(think(&c, &task, &format!("decision {n}")).await);
    }
    // Someone with database access rewrites record 3's content.
    env.tamper(
        &[("thought_records", "thought_records_no_update")],
        "UPDATE thought_records SET content = 'forged decision' WHERE chain_position = 3;",
    );
    let forged_hash = doc_hash(&recorded[2], &task, "forged decision");
    let v = c.ok("audit_verify_chain", json!({"task_id": task})).await;
    assert_eq!(v["chain_valid"], false);
    assert_eq!(v["total_records"], 4);
    assert_eq!(v["integrity_score"], 75);
    let links = v["broken_links"].as_array().unwrap();
    assert_eq!(links.len(), 1, "{v:#}");
    assert_eq!(links[0]["position"], 3);
    assert_eq!(links[0]["expected_hash"], forged_hash.as_str());
    assert_eq!(links[0]["actual_hash"], recorded[2]["hash"]);
    assert_eq!(links[0]["reason"], "content_hash_mismatch");
    assert_eq!(links[0]["record_id"], recorded[2]["thought_id"]);

    let l = c
        .ok(
            "thought_record_list",
            json!({"task_id": task, "verify_chain": true}),
        )
        .await;
    assert_eq!(l["chain_valid"], false);
    assert_eq!(l["invalid_links"], json!([3]));

    // The CLI tells a person the same, and exits non-zero.
    let out = env.run(&["audit", "verify", &task]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("CHAIN BROKEN") && text.contains(&forged_hash),
        "{text}"
    );
    let out = env.run(&["audit", "verify", &task, "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["broken_links"][0]["position"], 3);
    assert_eq!(j["records"].as_array().unwrap().len(), 4);

    // Removing the last record is caught by the chain's head.
    env.tamper(
        &[("thought_records", "thought_records_no_delete")],
        "DELETE FROM thought_records WHERE chain_position = 4;",
    );
    let v = c.ok("audit_verify_chain", json!({"task_id": task})).await;
    let reasons: Vec<(u64, &str)> = v["broken_links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["position"].as_u64().unwrap(),
                b["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        reasons,
        [(3, "content_hash_mismatch"), (4, "head_mismatch")]
    );
    assert_eq!(v["integrity_score"], 50);

    // A clean chain verifies from the CLI with exit 0.
    let clean = env.issue("colibri", "clean");
    let out = env.run(&["audit", "verify", &clean]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("chain valid")
    );
    c.close().await;
}

// ---------------------------------------------------------------- audit and Merkle

/// An independent Merkle tree: leaves are the record hashes' bytes, parents
/// SHA-256(left || right), an odd last node moves up unchanged.
fn reference_root(hashes: &[String]) -> (String, u64) {
    let mut level: Vec<Vec<u8>> = hashes.iter().map(|h| hex::decode(h).unwrap()).collect();
    let mut depth = 1;
    while level.len() > 1 {
        let mut next = Vec::new();
        let mut i = 0;
        while i < level.len() {
            if i + 1 < level.len() {
                let mut h = Sha256::new();
                h.update(&level[i]);
                h.update(&level[i + 1]);
                next.push(h.finalize().to_vec());
            } else {
                next.push(level[i].clone());
            }
            i += 2;
        }
        level = next;
        depth += 1;
    }
    (hex::encode(&level[0]), depth)
}

#[tokio::test]
async fn merkle_roots_match_an_independent_tree() {
    let (_env, c) = setup(&[]).await;
    for n in [1usize, 2, 3, 8] {
        let task = new_task(&c, &format!("{n} leaves")).await;
        let mut hashes = Vec::new();
        for i in 0..n {
            let t = think(&c, &task, &format!("record {i}")).await;
            hashes.push(t["hash"].as_str().unwrap().to_string());
        }
        let s = c
            .ok(
                "audit_session_start",
                json!({"task_id": task, "auditor_id": "auditor"}),
            )
            .await;
        let sid = s["session_id"].as_str().unwrap();
        assert_eq!(s["scope"], "shallow");
        let open = c.ok("merkle_root", json!({"session_id": sid})).await;
        assert_eq!(open["is_finalized"], false);
        let f = c.ok("merkle_finalize", json!({"session_id": sid})).await;
        let (root, depth) = reference_root(&hashes);
        assert_eq!(f["merkle_root"], root.as_str(), "{n} leaves");
        assert_eq!(f["tree_depth"], depth, "{n} leaves");
        assert_eq!(f["leaf_count"], n);
        assert_eq!(f["frozen"], true);
        assert_eq!(open["merkle_root"], root.as_str());
        // Frozen: later records do not move the root, a second call is refused.
        think(&c, &task, "after finalization").await;
        let r = c.ok("merkle_root", json!({"session_id": sid})).await;
        assert_eq!(
            (&r["merkle_root"], &r["is_finalized"], &r["as_of"]),
            (&json!(root), &json!(true), &f["finalized_at"])
        );
        c.err_code(
            "merkle_finalize",
            json!({"session_id": sid}),
            "ERR_ALREADY_FINALIZED",
        )
        .await;
        let l = c
            .ok("thought_record_list", json!({"session_id": sid}))
            .await;
        assert_eq!(l["thought_count"], n, "frozen records only");
        let v = c.ok("audit_verify_chain", json!({"session_id": sid})).await;
        assert_eq!(v["chain_valid"], true);
        assert_eq!(v["merkle_root_matches"], true);
    }
    assert_eq!(reference_root(&["ab".repeat(32)]).1, 1);
    c.close().await;
}

/// Verifying one task alone checks the finalized sessions covering it against its own
/// records: a deep session's leaves of its other tasks are not "missing" from that
/// task's chains.
#[tokio::test]
async fn verifying_one_task_of_a_finalized_deep_session_passes() {
    let (_env, c) = setup(&[]).await;
    let parent = new_task(&c, "parent").await;
    let child = new_sub_task(&c, "child", &parent).await;
    for t in [&parent, &child] {
        think(&c, t, "a").await;
        think(&c, t, "b").await;
    }
    let deep = c
        .ok(
            "audit_session_start",
            json!({"task_id": parent, "auditor_id": "auditor", "scope": "deep", "reason": "r"}),
        )
        .await;
    let sid = deep["session_id"].as_str().unwrap();
    let f = c.ok("merkle_finalize", json!({"session_id": sid})).await;
    assert_eq!(f["leaf_count"], 4);
    for t in [&parent, &child] {
        let v = c.ok("audit_verify_chain", json!({"task_id": t})).await;
        assert_eq!(v["total_records"], 2, "{t}");
        assert_eq!(v["broken_links"], json!([]), "{t}");
        assert_eq!(v["chain_valid"], true, "{t}");
        assert_eq!(v["merkle_root_matches"], true, "{t}");
    }
    let v = c.ok("audit_verify_chain", json!({"session_id": sid})).await;
    assert_eq!(
        (
            &v["total_records"],
            &v["chain_valid"],
            &v["merkle_root_matches"]
        ),
        (&json!(4), &json!(true), &json!(true))
    );
    c.close().await;
}

#[tokio::test]
async fn deep_sessions_cover_sub_tasks_and_errors_are_documented() {
    let (_env, c) = setup(&[]).await;
    let parent = new_task(&c, "parent").await;
    let child = new_sub_task(&c, "child", &parent).await;
    let grandchild = new_sub_task(&c, "grandchild", &child).await;
    let unrelated = new_task(&c, "unrelated").await;
    for t in [&parent, &child, &grandchild, &unrelated] {
        think(&c, t, "a").await;
        think(&c, t, "b").await;
    }
    let deep = c
        .ok(
            "audit_session_start",
            json!({"task_id": parent, "auditor_id": "auditor", "scope": "deep", "reason": "r"}),
        )
        .await;
    let sid = deep["session_id"].as_str().unwrap();
    let v = c
        .ok(
            "audit_verify_chain",
            json!({"session_id": sid, "full_trace": true}),
        )
        .await;
    assert_eq!(v["total_records"], 6);
    let order: Vec<(&str, u64)> = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["task_id"].as_str().unwrap(),
                r["position"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            (parent.as_str(), 1),
            (parent.as_str(), 2),
            (child.as_str(), 3),
            (child.as_str(), 4),
            (grandchild.as_str(), 5),
            (grandchild.as_str(), 6)
        ]
    );
    let l = c
        .ok("thought_record_list", json!({"session_id": sid}))
        .await;
    assert_eq!(l["thought_count"], 6);
    c.err_code(
        "audit_verify_chain",
        json!({"session_id": sid, "task_id": unrelated}),
        "ERR_INVALID_INPUT",
    )
    .await;
    let one = c
        .ok(
            "merkle_finalize",
            json!({"session_id": sid, "task_id": child}),
        )
        .await;
    assert_eq!(one["leaf_count"], 2);

    let e = c
        .err_code("audit_verify_chain", json!({}), "ERR_INVALID_INPUT")
        .await;
    assert!(error_fields(&e).contains(&"session_id".to_string()));
    for bad in ["A-9999", "A-x", "session", "A-00000000000000000000001"] {
        c.err_code(
            "merkle_root",
            json!({"session_id": bad}),
            "ERR_SESSION_NOT_FOUND",
        )
        .await;
        c.err_code(
            "audit_verify_chain",
            json!({"session_id": bad}),
            "ERR_SESSION_NOT_FOUND",
        )
        .await;
    }
    c.err_code(
        "audit_session_start",
        json!({"task_id": "COLIBRI-404", "auditor_id": "a"}),
        "ERR_TASK_NOT_FOUND",
    )
    .await;
    c.err_code(
        "audit_session_start",
        json!({"task_id": parent, "auditor_id": "a", "scope": "wide"}),
        "ERR_INVALID_INPUT",
    )
    .await;
    // An empty session cannot be frozen; its open root is SHA-256 of nothing.
    let empty = new_task(&c, "empty").await;
    let s = c
        .ok(
            "audit_session_start",
            json!({"task_id": empty, "auditor_id": "a"}),
        )
        .await;
    let sid = s["session_id"].as_str().unwrap();
    let r = c.ok("merkle_root", json!({"session_id": sid})).await;
    assert_eq!(r["merkle_root"], hex::encode(Sha256::digest(b"")));
    assert_eq!(r["as_of"], s["started_at"]);
    c.err_code(
        "merkle_finalize",
        json!({"session_id": sid}),
        "ERR_INVALID_INPUT",
    )
    .await;
    c.close().await;
}

// ---------------------------------------------------------------- skills

#[tokio::test]
async fn skill_list_reads_the_fixture_tree() {
    let fixture = fixture_skills();
    let (_env, c) = setup(&["--worktree-path", fixture.to_str().unwrap()]).await;
    let r = c.ok("skill_list", json!({})).await;
    let names: Vec<&str> = r["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["colibri-tier1-chains", "colibri-writeback", "minimal-skill"]
    );
    assert_eq!(r["total_count"], 3);
    assert_eq!(
        r["skills"][1],
        json!({"name": "colibri-writeback", "version": "2.1.0",
               "description": "Writes verified results back to the task board.",
               "capabilities": ["writeback-audit", "board-sync"],
               "path": ".agents/skills/colibri-writeback/SKILL.md"})
    );
    assert_eq!(r["skills"][2]["version"], "");
    assert_eq!(
        r["skills"][2]["description"],
        "A skill with only a description, it's enough."
    );
    let errors: Vec<(&str, &str)> = r["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["path"].as_str().unwrap(), e["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert_eq!(errors[0].0, ".agents/skills/broken-capabilities/SKILL.md");
    assert!(errors[0].1.contains("list"));
    assert!(errors[1].1.contains("no front matter"));
    assert!(errors[2].1.contains("not closed"));

    let r = c
        .ok("skill_list", json!({"capability": "WRITEBACK-AUDIT"}))
        .await;
    assert_eq!(r["total_count"], 2);
    let r = c.ok("skill_list", json!({"search": "TASK BOARD"})).await;
    assert_eq!(r["skills"][0]["name"], "colibri-writeback");
    let r = c
        .ok("skill_list", json!({"search": "nothing like this"}))
        .await;
    assert_eq!(r["total_count"], 0);
    c.err_code("skill_list", json!({"search": ""}), "ERR_INVALID_INPUT")
        .await;
    c.close().await;
}

#[cfg(unix)]
#[tokio::test]
async fn skill_list_refuses_symlinks() {
    let env = Env::new();
    let root = env.path().join("repo");
    let skills = root.join(".agents/skills");
    std::fs::create_dir_all(skills.join("inside")).unwrap();
    std::fs::write(
        skills.join("inside/SKILL.md"),
        "---\ndescription: inside\n---\n",
    )
    .unwrap();
    let outside = env.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("SKILL.md"), "---\ndescription: secret\n---\n").unwrap();
    std::os::unix::fs::symlink(&outside, skills.join("escape")).unwrap();
    std::os::unix::fs::symlink(skills.join("inside"), skills.join("alias")).unwrap();
    std::fs::create_dir_all(skills.join("linkfile")).unwrap();
    std::os::unix::fs::symlink(outside.join("SKILL.md"), skills.join("linkfile/SKILL.md")).unwrap();
    env.project("repo", Some(&root));
    // No --worktree-path: the bound project's path is the root.
    let c = env.serve_local(&["--project-id", "repo"]).await;
    let r = c.ok("skill_list", json!({})).await;
    let names: Vec<&str> = r["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    // Symlinks are never followed, even one that stays inside the root.
    assert_eq!(names, ["inside"]);
    let bad: Vec<&str> = r["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        bad,
        [
            ".agents/skills/alias/SKILL.md",
            ".agents/skills/escape/SKILL.md",
            ".agents/skills/linkfile/SKILL.md"
        ]
    );
    assert!(
        r["errors"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["reason"].as_str().unwrap().contains("is a symlink")),
        "{r:#}"
    );
    assert!(!r.to_string().contains("secret"));
    c.close().await;
    // Neither a worktree nor a project path: a structured error says what to pass.
    let c = env.serve_local(&[]).await;
    let e = c.err("skill_list", json!({})).await;
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--worktree-path"),
        "{e:#}"
    );
    c.close().await;
}

// ---------------------------------------------------------------- the document's examples

#[tokio::test]
async fn the_documents_examples_give_documented_shapes() {
    let fixture = fixture_skills();
    let (_env, c) = setup(&["--worktree-path", fixture.to_str().unwrap()]).await;
    // T-0042 names the 42nd task of the database.
    for n in 1..=41 {
        new_task(&c, &format!("filler {n}")).await;
    }
    let created = c
        .ok(
            "task_create",
            json!({
                "title": "Wire up task_create MCP handler",
                "description": "Implement P0.3.2 per task-breakdown.md\n\n- Accept TaskCreateInput\n- Validate with Zod\n- Store in tasks table\n- Return TaskCreateOutput",
                "project": "colibri",
                "priority": "high",
                "labels": ["phase-0", "mcp", "backend"],
                "estimate_hours": 4
            }),
        )
        .await;
    assert_shape(
        &created,
        &[
            ("task_id", "string"),
            ("status", "string"),
            ("created_at", "string"),
            ("created_by", "string"),
            ("sequence", "integer"),
        ],
    );
    assert_eq!(created["status"], "backlog");
    assert_eq!(created["sequence"], 42);
    assert!(is_iso(&created["created_at"]));
    let id = created["task_id"].as_str().unwrap().to_string();
    assert_eq!(id, "COLIBRI-42");

    c.ok(
        "task_update",
        json!({"task_id": "T-0042", "status": "todo"}),
    )
    .await;
    let updated = c
        .ok(
            "task_update",
            json!({"task_id": "T-0042", "status": "in_progress", "progress": 45, "assignee": "agent-bob"}),
        )
        .await;
    assert_shape(
        &updated,
        &[
            ("task_id", "string"),
            ("status", "string"),
            ("progress", "integer"),
            ("updated_at", "string"),
            ("updated_by", "string"),
            ("previous_status", "string"),
        ],
    );
    assert_eq!(
        (
            &updated["task_id"],
            &updated["status"],
            &updated["progress"],
            &updated["previous_status"]
        ),
        (
            &json!(id),
            &json!("in_progress"),
            &json!(45),
            &json!("todo")
        )
    );

    for title in ["sub one", "sub two"] {
        c.ok(
            "task_create",
            json!({"title": title, "project": "colibri", "parent_id": "T-0042"}),
        )
        .await;
    }
    let got = c
        .ok(
            "task_get",
            json!({"task_id": "T-0042", "include_dependents": true}),
        )
        .await;
    assert_shape(
        &got,
        &[
            ("task_id", "string"),
            ("title", "string"),
            ("description", "string"),
            ("project", "string"),
            ("status", "string"),
            ("priority", "string"),
            ("progress", "integer"),
            ("assignee", "string"),
            ("labels", "array"),
            ("estimate_hours", "number"),
            ("created_at", "string"),
            ("updated_at", "string"),
            ("created_by", "string"),
            ("updated_by", "string"),
            ("dependents", "array"),
        ],
    );
    assert_eq!(got["dependents"], json!(["COLIBRI-43", "COLIBRI-44"]));
    assert_eq!(
        (&got["priority"], &got["assignee"], &got["project"]),
        (&json!("high"), &json!("agent-bob"), &json!("colibri"))
    );

    let listed = c
        .ok(
            "task_list",
            json!({"project": "colibri", "status": ["todo", "in_progress"], "sort_by": "priority",
                   "sort_order": "desc", "limit": 10}),
        )
        .await;
    assert_shape(
        &listed,
        &[
            ("tasks", "array"),
            ("total_count", "integer"),
            ("returned_count", "integer"),
            ("offset", "integer"),
            ("limit", "integer"),
        ],
    );
    assert_eq!(
        (&listed["total_count"], &listed["limit"]),
        (&json!(1), &json!(10))
    );
    assert_shape(
        &listed["tasks"][0],
        &[
            ("task_id", "string"),
            ("title", "string"),
            ("project", "string"),
            ("status", "string"),
            ("priority", "string"),
            ("progress", "integer"),
            ("assignee", "string"),
            ("created_at", "string"),
            ("updated_at", "string"),
        ],
    );

    c.ok(
        "task_update",
        json!({"task_id": "COLIBRI-43", "status": "todo"}),
    )
    .await;
    let next = c
        .ok(
            "task_next_actions",
            json!({"project": "colibri", "limit": 5}),
        )
        .await;
    assert_shape(
        &next,
        &[
            ("next_actions", "array"),
            ("count", "integer"),
            ("project", "string"),
        ],
    );
    assert_shape(
        &next["next_actions"][0],
        &[
            ("task_id", "string"),
            ("title", "string"),
            ("priority", "string"),
            ("assignee", "string"),
            ("parent_id", "string"),
            ("dependencies_unmet", "integer"),
        ],
    );

    let thought = c
        .ok(
            "thought_record",
            json!({
                "task_id": "T-0042",
                "type": "reflection",
                "content": "Completed task_create MCP handler implementation. All tests passing. Zod validation working correctly for edge cases.",
                "branch": "feature/task-create",
                "commit_sha": "a3f7d9b2c",
                "tests_run": ["task_create.test.ts"],
                "blockers": []
            }),
        )
        .await;
    assert_shape(
        &thought,
        &[
            ("thought_id", "string"),
            ("task_id", "string"),
            ("type", "string"),
            ("hash", "string"),
            ("previous_hash", "null"),
            ("recorded_at", "string"),
            ("recorded_by", "string"),
            ("chain_position", "integer"),
        ],
    );
    assert!(thought["thought_id"].as_str().unwrap().starts_with("Θ-"));
    assert_eq!(thought["hash"].as_str().unwrap().len(), 64);
    let second = think(&c, &id, "Decided to use Zod for input validation").await;
    assert_shape(&second, &[("previous_hash", "string")]);

    let chain = c
        .ok(
            "thought_record_list",
            json!({"task_id": "T-0042", "verify_chain": true}),
        )
        .await;
    assert_shape(
        &chain,
        &[
            ("task_id", "string"),
            ("thought_count", "integer"),
            ("thoughts", "array"),
            ("chain_valid", "boolean"),
        ],
    );
    assert_shape(
        &chain["thoughts"][0],
        &[
            ("thought_id", "string"),
            ("type", "string"),
            ("content", "string"),
            ("hash", "string"),
            ("previous_hash", "null"),
            ("recorded_at", "string"),
            ("recorded_by", "string"),
            ("chain_position", "integer"),
        ],
    );

    c.ok(
        "audit_session_start",
        json!({"task_id": "T-0042", "auditor_id": "agent-auditor"}),
    )
    .await;
    let session = c
        .ok(
            "audit_session_start",
            json!({"task_id": "T-0042", "auditor_id": "agent-auditor",
                   "reason": "Proof review before finalization", "scope": "deep"}),
        )
        .await;
    assert_eq!(
        session,
        json!({"session_id": "A-0002", "task_id": id, "auditor_id": "agent-auditor",
               "started_at": session["started_at"], "scope": "deep"})
    );
    assert!(is_iso(&session["started_at"]));

    let verified = c
        .ok("audit_verify_chain", json!({"session_id": "A-0002"}))
        .await;
    assert_shape(
        &verified,
        &[
            ("session_id", "string"),
            ("chain_valid", "boolean"),
            ("total_records", "integer"),
            ("integrity_score", "integer"),
            ("broken_links", "array"),
            ("verified_at", "string"),
        ],
    );
    assert_eq!(
        (
            &verified["chain_valid"],
            &verified["total_records"],
            &verified["integrity_score"]
        ),
        (&json!(true), &json!(2), &json!(100))
    );

    let finalized = c
        .ok("merkle_finalize", json!({"session_id": "A-0002"}))
        .await;
    assert_shape(
        &finalized,
        &[
            ("session_id", "string"),
            ("merkle_root", "string"),
            ("tree_depth", "integer"),
            ("leaf_count", "integer"),
            ("finalized_at", "string"),
            ("frozen", "boolean"),
        ],
    );
    let root = c.ok("merkle_root", json!({"session_id": "A-0002"})).await;
    assert_shape(
        &root,
        &[
            ("session_id", "string"),
            ("merkle_root", "string"),
            ("is_finalized", "boolean"),
            ("as_of", "string"),
        ],
    );
    assert_eq!(root["merkle_root"], finalized["merkle_root"]);

    let skills = c.ok("skill_list", json!({"search": "tier1"})).await;
    assert_eq!(skills["total_count"], 1);
    assert_eq!(
        skills["skills"],
        json!([{
            "name": "colibri-tier1-chains",
            "version": "1.0.0",
            "description": "Canonical Tier 1 (Sigma) round and writeback chains.",
            "capabilities": ["round-plan", "writeback-audit"],
            "path": ".agents/skills/colibri-tier1-chains/SKILL.md"
        }])
    );
    // Every failure uses the document's envelope.
    let e = c
        .err_code(
            "task_get",
            json!({"task_id": "T-9999"}),
            "ERR_TASK_NOT_FOUND",
        )
        .await;
    assert_shape(
        &e["error"],
        &[
            ("code", "string"),
            ("message", "string"),
            ("details", "object"),
        ],
    );
    c.close().await;
}

#[tokio::test]
async fn verification_covers_the_issues_work_trail() {
    let env = Env::new();
    env.project("colibri", None);
    let issue = env.issue("colibri", "thoughts and trail");
    let c = env.serve_local(&["--issue-id", &issue]).await;
    think(&c, &issue, "thought one").await;
    c.ok(
        "add_finding",
        json!({"category": "bug", "summary": "off by one", "details": "in the pager"}),
    )
    .await;
    c.ok("add_comment", json!({"content": "looks fine otherwise"}))
        .await;
    let v = c
        .ok(
            "audit_verify_chain",
            json!({"task_id": issue, "full_trace": true}),
        )
        .await;
    assert_eq!(
        (&v["chain_valid"], &v["total_records"]),
        (&json!(true), &json!(3))
    );
    let chains: Vec<&str> = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["chain"].as_str().unwrap())
        .collect();
    assert_eq!(chains, ["thought", "trail", "trail"]);

    // Forge the comment (the trail's second record): sequence position 1 + 2.
    env.tamper(
        &[("trail_records", "trail_records_no_update")],
        "UPDATE trail_records SET body = '{\"content\":\"forged\"}' WHERE position = 2;",
    );
    let v = c.ok("audit_verify_chain", json!({"task_id": issue})).await;
    assert_eq!(v["chain_valid"], false);
    let b = &v["broken_links"][0];
    assert_eq!(
        (
            &b["position"],
            &b["chain"],
            &b["chain_position"],
            &b["reason"]
        ),
        (
            &json!(3),
            &json!("trail"),
            &json!(2),
            &json!("content_hash_mismatch")
        )
    );
    assert_ne!(b["expected_hash"], b["actual_hash"]);
    let out = env.run(&["audit", "verify", &issue]);
    assert_eq!(out.status.code(), Some(3));

    let s = c
        .ok(
            "audit_session_start",
            json!({"task_id": issue, "auditor_id": "auditor"}),
        )
        .await;
    let f = c
        .ok("merkle_finalize", json!({"session_id": s["session_id"]}))
        .await;
    assert_eq!(f["leaf_count"], 3);
    c.close().await;
}

#[tokio::test]
async fn every_colibri_tool_answers_a_bad_call_with_a_short_help_prompt() {
    let (_env, c) = setup(&[]).await;
    let listed = c.tool_names().await;
    for tool in COLIBRI_TOOLS {
        assert!(listed.iter().any(|t| t == tool), "{tool} not listed");
        let e = c
            .err_code(tool, json!({"bogus": 1}), "ERR_INVALID_INPUT")
            .await;
        assert!(error_fields(&e).contains(&"bogus".to_string()), "{e:#}");
        let help = e["help_prompt"].as_str().unwrap();
        // A conservative 3 characters per token keeps this under 500 tokens.
        assert!(
            help.contains(tool) && help.len() < 1500,
            "{tool}: {} chars\n{help}",
            help.len()
        );
    }
    c.close().await;
}

#[tokio::test]
async fn finishing_a_sub_task_through_task_update_releases_its_parent() {
    let env = Env::new();
    env.project("colibri", None);
    let parent = env.issue("colibri", "Parent");
    let c = env.serve_local(&["--issue-id", &parent]).await;
    env.set_status(&parent, "in_progress", None);
    let sub = c.ok("create_subtask", json!({"title": "Child"})).await;
    let child = sub["subtask"]["identifier"].as_str().unwrap().to_string();
    assert_eq!(c.ok("get_issue", json!({})).await["status"], "blocked");
    for status in ["in_progress", "review", "done"] {
        c.ok("task_update", status_args(&child, status)).await;
    }
    let p = c.ok("get_issue", json!({})).await;
    assert_eq!(
        p["status"], "in_progress",
        "the parent returns to where it was"
    );
    // The Colibri status change is in the child's status history like any other.
    let trail = env.issue_trail(&child);
    let history = trail["status_history"].as_array().unwrap();
    let tos: Vec<&str> = history.iter().map(|h| h["to"].as_str().unwrap()).collect();
    assert_eq!(tos, ["in_progress", "review", "done"], "{trail:#}");
    c.close().await;
}

/// The binding rules are the domain's: a caller of the facade other than the MCP server
/// (here the library itself, as a CLI or another adapter would call it) gets the same
/// answers for `T-N` and an agent's bound issue.
#[test]
fn the_binding_rules_hold_for_every_caller_of_the_facade() {
    use cairn::access::context::BindArgs;
    use cairn::colibri::tasks::TaskUpdate;
    use cairn::error::ErrorKind;

    let env = Env::new();
    env.project("web", None);
    let mine = env.issue("web", "Mine");
    let other = env.issue("web", "Another");
    let cairn = env.open();
    let agent = cairn
        .bind(&BindArgs {
            issue: Some(mine.clone()),
            agent_type: Some("worker".into()),
            ..Default::default()
        })
        .unwrap();
    let update = |work, task: &str| {
        cairn.task_update(
            work,
            &TaskUpdate {
                task: task.into(),
                progress: Some(10),
                ..Default::default()
            },
        )
    };
    let denied = update(&agent, &other).unwrap_err();
    assert_eq!(denied.kind(), ErrorKind::PermissionDenied, "{denied}");
    let n = other.rsplit('-').next().unwrap();
    let by_number = update(&agent, &format!("T-{n}")).unwrap_err();
    assert_eq!(by_number.kind(), ErrorKind::PermissionDenied, "{by_number}");
    assert!(by_number.to_string().contains(&other), "{by_number}");
    let n = mine.rsplit('-').next().unwrap();
    assert_eq!(update(&agent, &format!("T-{n}")).unwrap().task_id, mine);
    // A session bound to nothing acts on any task, but has no project for `T-N`.
    let unbound = cairn::access::context::WorkContext::default();
    assert_eq!(update(&unbound, &other).unwrap().task_id, other);
    let no_project = update(&unbound, "T-1").unwrap_err();
    assert_eq!(no_project.kind(), ErrorKind::InvalidInput, "{no_project}");
}
