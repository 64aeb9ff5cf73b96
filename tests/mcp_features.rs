//! The rest of MCP (issue 36) through the official Python and TypeScript SDKs, over stdio
//! (`cairn serve`) and HTTP (`cairn daemon`): resources listed, templated and read, scope
//! refusing what the session's tools could not read, prompts and completion, log
//! notifications of the session's own calls, progress on a long call, a cancelled call
//! leaving nothing half done, and a subscription notified when a document changes (on
//! the daemon, a followed file edited on disk).

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::common::{Env, bin, node, piped};
use crate::daemon::{Daemon, mint};

/// A document of about `sections` sections: enough chunks that embedding them takes a
/// while with the real model.
fn big(sections: usize, topic: &str) -> String {
    let mut s = format!("# The {topic} handbook\n\n");
    for i in 0..sections {
        s += &format!(
            "## {topic} step {i}\n\nStep {i} of the {topic} procedure checks the queue depth, \
             drains the workers of shard {i} and records the offsets before the restart, so \
             that no message of shard {i} is processed twice after the failover.\n\n"
        );
    }
    s
}

struct Setup {
    issue: String,
    learning: String,
    doc_file: std::path::PathBuf,
}

/// Project `proj` (collection `proj`) with `docs/` indexed and followed, issue and a
/// learning of its own; project `other` whose collection the session cannot read.
fn setup(env: &Env) -> Setup {
    let proj = env.path().join("proj");
    let write = |rel: &str, text: &str| {
        let p = proj.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "docs/guide.md",
        "# Deploy guide\n\nRoll back by redeploying the previous release tag.\n",
    );
    // Outside the indexed (and followed) docs/: embedded by the test's own calls.
    write("big/big.md", &big(60, "failover"));
    write("big/big2.md", &big(120, "restore"));
    env.project("proj", Some(&proj));
    env.ok(&["project", "configure", "proj", "--vault-collection", "proj"]);
    let docs = proj.join("docs").to_string_lossy().into_owned();
    env.json(&[
        "reindex",
        &docs,
        "--project",
        "proj",
        "--collection",
        "proj",
    ]);
    let other = env.path().join("other");
    std::fs::create_dir_all(other.join("docs")).unwrap();
    std::fs::write(
        other.join("docs/secret.md"),
        "# Secret\n\nThe other team's runbook.\n",
    )
    .unwrap();
    env.project("other", Some(&other));
    let d = other.join("docs").to_string_lossy().into_owned();
    env.json(&["reindex", &d, "--project", "other", "--collection", "other"]);
    // The session's scope: the project's collections through search_knowledge, not the
    // whole vault through vault_retrieve.
    std::fs::write(
        env.path().join("scope.json"),
        json!([
            "get_issue",
            "search_knowledge",
            "search_learnings",
            "add_learning",
            "learning_feedback",
            "vault_update",
            "server_ping"
        ])
        .to_string(),
    )
    .unwrap();
    let issue = env.issue("proj", "Make the deploy roll back cleanly");
    let added = env.json(&[
        "learnings",
        "add",
        "--issue",
        &issue,
        "--pattern",
        "Deploy rollbacks must redeploy the previous release tag, never revert the database schema",
    ]);
    let learning = added["id"]
        .as_str()
        .or(added["learning"]["id"].as_str())
        .unwrap_or_else(|| panic!("{added}"))
        .to_string();
    Setup {
        issue,
        learning,
        doc_file: proj.join("docs/guide.md"),
    }
}

fn plan(s: &Setup, follows: bool) -> Value {
    json!({
        "doc_uri": "cairn://vault/proj/docs/guide.md",
        "doc_file": s.doc_file,
        "doc_path": if follows { Value::Null } else { json!("docs/guide.md") },
        "big_path": "big/big.md",
        "big2_path": "big/big2.md",
        "big2_uri": "cairn://vault/proj/big/big2.md",
        "learning_uri": format!("cairn://learnings/{}", s.learning),
        "issue_uri": format!("cairn://issues/{}", s.issue),
        "outside_uri": "cairn://vault/other/docs/secret.md",
        "issue_prefix": s.issue.split('-').next().unwrap(),
    })
}

/// Run the plan through the official Python SDK (`tests/mcp_sdk/features.py`) or, with
/// `typescript`, the official TypeScript SDK (`tests/mcp_ts/features.mjs`).
fn drive(plan: &Value, typescript: bool) -> Value {
    let out = if typescript {
        node("features.mjs", &[], plan.to_string().as_bytes())
    } else {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_sdk/features.py");
        piped(
            Command::new("python3").arg(script),
            plan.to_string().as_bytes(),
        )
    };
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "features.py printed no JSON ({e}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(seen.get("error").is_none(), "{seen:#}");
    seen
}

fn text(v: &Value) -> &str {
    v["ok"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{v:#}"))
}

fn check(seen: &Value, s: &Setup, lifecycle: &str) {
    assert_eq!(seen["lifecycle"], lifecycle, "{seen:#}");
    let resources: Vec<&str> = seen["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    let issue_uri = format!("cairn://issues/{}", s.issue);
    assert_eq!(
        resources,
        [issue_uri.as_str(), "cairn://vault/proj/docs/guide.md",],
        "the bound issue, then the project's documents only: {seen:#}"
    );
    assert_eq!(
        seen["templates"],
        json!([
            "cairn://vault/{collection}/{+path}",
            "cairn://learnings/{id}",
            "cairn://issues/{identifier}"
        ])
    );
    let read = &seen["read"];
    assert_eq!(read["doc_uri"]["ok"][0]["mime"], "text/markdown");
    assert!(text(&read["doc_uri"]).starts_with("# Deploy guide\n"));
    assert_eq!(read["learning_uri"]["ok"][0]["mime"], "application/json");
    let learning: Value = serde_json::from_str(text(&read["learning_uri"])).unwrap();
    assert_eq!(learning["id"], s.learning.as_str());
    let issue: Value = serde_json::from_str(text(&read["issue_uri"])).unwrap();
    assert_eq!(issue["identifier"], s.issue.as_str());
    assert!(issue["findings"].is_array() && issue["comments"].is_array());
    let refused = read["outside_uri"]["error"].as_str().unwrap_or_default();
    assert!(
        refused.contains("no such resource within this session's scope"),
        "another project's document is out of reach: {seen:#}"
    );

    assert_eq!(seen["prompts"], json!(["start_work", "record_learning"]));
    let start = seen["start_work"]["ok"][0].as_str().unwrap();
    assert!(start.contains(&s.issue) && start.contains("Make the deploy roll back cleanly"));
    assert!(
        start.contains(&s.learning),
        "the project's matching learning: {start}"
    );
    assert!(
        start.contains("cairn://vault/proj/docs/guide.md"),
        "a vault passage: {start}"
    );
    let record = seen["record_learning"]["ok"][0].as_str().unwrap();
    assert!(record.contains("Run migrations before seeding") && record.contains("add_learning"));
    assert!(
        seen["record_learning_missing"]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("lesson is required"),
        "{seen:#}"
    );
    assert_eq!(seen["complete_issue"], json!([s.issue]));
    assert_eq!(seen["complete_path"], json!(["docs/guide.md"]));

    let logs = seen["logs"].as_array().unwrap();
    assert!(
        logs.iter()
            .any(|l| l["tool"] == "server_ping" && l["outcome"] == "ok"),
        "a log notification of the session's own call: {seen:#}"
    );

    assert_eq!(seen["big_update"]["is_error"], false, "{seen:#}");
    let progress = seen["progress"].as_array().unwrap();
    assert!(
        !progress.is_empty(),
        "progress while vault_update embeds: {seen:#}"
    );
    assert!(
        progress[0]["message"]
            .as_str()
            .unwrap()
            .contains("vault_update")
    );

    assert_eq!(seen["cancelled"], true, "{seen:#}");
    let after = &seen["after_cancel"]["structured"];
    assert_eq!(seen["after_cancel"]["is_error"], false, "{seen:#}");
    let chunks = after["chunks"].as_u64().unwrap();
    assert!(chunks > 100, "{after}");
    // The driver waited until the cancelled call's document was readable (it committed)
    // or the wait's bound passed (it left nothing).
    if seen["cancelled_committed"] == true {
        assert!(
            after["changed"] == false && after["embedded"] == 0 && after["reused"] == chunks,
            "the cancelled update committed whole: {after}"
        );
    } else {
        assert!(
            after["changed"] == true && after["reused"] == 0 && after["embedded"] == chunks,
            "the cancelled update left nothing: {after}"
        );
    }

    let updated = seen["updated"].as_array().unwrap();
    assert!(
        updated
            .iter()
            .any(|u| u == "cairn://vault/proj/docs/guide.md"),
        "the subscribed document's change was notified: {seen:#}"
    );
    assert!(
        !updated
            .iter()
            .any(|u| u == "cairn://vault/other/docs/secret.md")
    );
    if lifecycle == "discover" {
        assert_eq!(
            seen["honored"],
            json!(["cairn://vault/proj/docs/guide.md"]),
            "a document out of reach is not subscribed"
        );
    } else {
        assert!(
            seen["subscribe_outside"]["error"]
                .as_str()
                .unwrap_or_default()
                .contains("not a vault document this session can read"),
            "{seen:#}"
        );
    }
}

/// The failpoint that holds a `subscriptions/listen` after its acknowledgment.
const LISTEN_LATE: &str = "listen-late-start";

#[test]
fn resources_prompts_logging_progress_and_subscriptions_over_stdio() {
    // The Python SDK on 2026-07-28 and on initialize; the TypeScript SDK (initialize).
    for mode in ["auto", "legacy", "typescript"] {
        let env = Env::new();
        let s = setup(&env);
        let mut p = plan(&s, false);
        let scope = env.path().join("scope.json").to_string_lossy().into_owned();
        let mut cmd: Vec<Value> = vec![json!(bin())];
        cmd.extend(env.db_args().iter().map(|a| json!(a.to_string_lossy())));
        cmd.extend(
            [
                "serve",
                "--no-daemon",
                "--issue-id",
                &s.issue,
                "--tool-scope-file",
                &scope,
            ]
            .map(|a| json!(a)),
        );
        p["stdio"] = Value::Array(cmd);
        p["mode"] = json!(mode);
        // `subscriptions/listen` runs 1.5 s after its acknowledgment, by when the client
        // has changed the document: notified only if its starting point was taken first.
        p["server_env"] = json!({"CAIRN_FAILPOINT": LISTEN_LATE});
        let seen = drive(&p, mode == "typescript");
        let lifecycle = if mode == "auto" {
            "discover"
        } else {
            "initialize"
        };
        check(&seen, &s, lifecycle);
    }
}

/// Over the daemon's HTTP: the Python SDK on 2026-07-28 (subscriptions are
/// `subscriptions/listen`, a request that stays open) and on the 2025-11-25 handshake,
/// and the TypeScript SDK (2025-11-25): the handshake opens a session whose `GET` stream
/// carries `notifications/resources/updated`. The document is edited on disk only, for
/// the daemon's follower to index. A `subscriptions/listen` runs 1.5 s after its
/// acknowledgment, by when the follower has indexed the edit: notified only if its
/// starting point was read before the acknowledgment.
#[test]
fn resources_prompts_logging_progress_and_subscriptions_over_the_daemon() {
    for mode in ["auto", "legacy", "typescript"] {
        let env = Env::new();
        let s = setup(&env);
        let daemon = Daemon::start(&env, &[], &[("CAIRN_FAILPOINT", LISTEN_LATE)]);
        let scope = env.path().join("scope.json").to_string_lossy().into_owned();
        let (token, _) = mint(&env, &["--issue", &s.issue, "--tool-scope-file", &scope]);
        let mut p = plan(&s, true);
        p["url"] = json!(daemon.url());
        p["token"] = json!(token);
        p["mode"] = json!(mode);
        let seen = drive(&p, mode == "typescript");
        let lifecycle = if mode == "auto" {
            "discover"
        } else {
            "initialize"
        };
        check(&seen, &s, lifecycle);
    }
}
