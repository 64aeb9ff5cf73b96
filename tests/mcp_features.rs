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

/// The JSON-RPC error of a failed request from the rmcp client: (code, message).
fn rpc_error<T: std::fmt::Debug>(r: Result<T, rmcp::ServiceError>) -> (i32, String) {
    match r {
        Err(rmcp::ServiceError::McpError(e)) => (e.code.0, e.message.into_owned()),
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

/// Issue 62, through `cairn serve` and the rmcp client: a resource read that fails says
/// why with the code that fits (`-32002` for what is not there, with the reason when a
/// listed document is no longer a file in the worktree; `-32602` for what Cairn refuses to
/// read), never `-32603`; the `record_learning` prompt never echoes hidden characters; and
/// `completion/complete` refuses a prompt, template or argument the server does not have.
#[tokio::test]
async fn resource_refusals_say_why_prompts_echo_nothing_hidden_and_completion_refuses_the_unknown()
{
    use rmcp::model::{
        ArgumentInfo, CompleteRequestParams, GetPromptRequestParams, ReadResourceRequestParams,
        Reference,
    };
    let env = Env::new();
    let proj = env.path().join("proj");
    std::fs::create_dir_all(proj.join("docs")).unwrap();
    for (name, text) in [
        (
            "guide",
            "# Guide\n\nRoll back by redeploying the previous tag.\n",
        ),
        ("gone", "# Gone\n\nA page that is deleted after indexing.\n"),
        (
            "link",
            "# Link\n\nA page replaced by a symlink after indexing.\n",
        ),
    ] {
        std::fs::write(proj.join(format!("docs/{name}.md")), text).unwrap();
    }
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
    let issue = env.issue("proj", "Roll back cleanly");
    // After indexing: one file deleted, one a symlink to a file outside the root.
    std::fs::remove_file(proj.join("docs/gone.md")).unwrap();
    let secret = env.path().join("secret.md");
    std::fs::write(&secret, "# Secret\n\nNot the vault's.\n").unwrap();
    std::fs::remove_file(proj.join("docs/link.md")).unwrap();
    std::os::unix::fs::symlink(&secret, proj.join("docs/link.md")).unwrap();

    let c = env.serve(&["--issue-id", &issue]).await;
    let read = |uri: &str| {
        c.service
            .read_resource(ReadResourceRequestParams::new(uri.to_string()))
    };
    let ok = read("cairn://vault/proj/docs/guide.md").await.unwrap();
    assert!(format!("{ok:?}").contains("previous tag"), "{ok:?}");
    let (code, message) = rpc_error(read("cairn://vault/proj/docs/gone.md").await);
    assert_eq!(code, -32002, "{message}");
    assert!(message.contains("is no longer a file in"), "{message}");
    let (code, message) = rpc_error(read("cairn://vault/proj/docs/link.md").await);
    assert_eq!(code, -32602, "{message}");
    assert!(!message.contains("Not the vault's"), "{message}");
    for unknown in ["cairn://vault/proj/docs/none.md", "file:///etc/passwd"] {
        let (code, message) = rpc_error(read(unknown).await);
        assert_eq!(code, -32002, "{unknown}: {message}");
        assert!(message.contains("no such resource") || message.contains("not a Cairn resource"));
    }

    // The prompt quotes the lesson: a lesson that hides text is refused as add_learning
    // would refuse it; invisible formatting is removed.
    let prompt = |lesson: &str| {
        let mut args = serde_json::Map::new();
        args.insert("lesson".into(), json!(lesson));
        c.service
            .get_prompt(GetPromptRequestParams::new("record_learning").with_arguments(args))
    };
    let (code, message) = rpc_error(prompt("Deploys \u{202E}kcab llor\u{1b}[2J").await);
    assert_eq!(code, -32602, "{message}");
    assert!(
        message.contains("lesson") && message.contains("U+202E"),
        "{message}"
    );
    let (code, message) = rpc_error(prompt("Deploys \u{1b}[2Jroll back").await);
    assert_eq!(code, -32602, "{message}");
    assert!(message.contains("U+001B"), "{message}");
    let got = prompt("Deploys roll\u{200B} back to the previous tag")
        .await
        .unwrap();
    let text = serde_json::to_string(&got).unwrap();
    assert!(
        text.contains("Deploys roll back to the previous tag"),
        "{text}"
    );
    assert!(
        !text.contains('\u{200B}') && !text.contains("\\u200b"),
        "{text}"
    );

    // Completion: what exists completes; what does not is refused, naming what there is.
    let complete = |r: Reference, name: &str, value: &str| {
        c.service.complete(CompleteRequestParams::new(
            r,
            ArgumentInfo::new(name, value),
        ))
    };
    let issues = complete(Reference::for_prompt("start_work"), "issue", "")
        .await
        .unwrap();
    assert!(issues.completion.values.contains(&issue), "{issues:?}");
    let lesson = complete(Reference::for_prompt("record_learning"), "lesson", "x")
        .await
        .unwrap();
    assert!(lesson.completion.values.is_empty(), "{lesson:?}");
    for (r, name, says) in [
        (
            Reference::for_prompt("nope"),
            "issue",
            "no prompt named \"nope\"",
        ),
        (
            Reference::for_prompt("start_work"),
            "nope",
            "prompt start_work has no argument \"nope\"; its arguments: issue",
        ),
        (
            Reference::for_resource("cairn://nope/{x}"),
            "x",
            "no resource template",
        ),
        (
            Reference::for_resource("cairn://vault/{collection}/{+path}"),
            "nope",
            "its arguments: collection, path",
        ),
    ] {
        let (code, message) = rpc_error(complete(r, name, "").await);
        assert_eq!(code, -32602, "{message}");
        assert!(message.contains(says), "{message}");
    }
    c.close().await;
}

/// Issue 62: a `vault_update` cancelled by the client (`notifications/cancelled` from the
/// official Python SDK, sent once the call reports progress, so it is running) runs on and
/// commits whole; the same call retried at once used to embed the whole document again
/// beside it. The retry waits for the cancelled call and finds the work done.
#[test]
fn a_retry_of_a_cancelled_vault_update_waits_for_it_and_does_not_redo_the_work() {
    let env = Env::new();
    let s = setup(&env);
    let mut cmd: Vec<Value> = vec![json!(bin())];
    cmd.extend(env.db_args().iter().map(|a| json!(a.to_string_lossy())));
    cmd.extend(["serve", "--no-daemon", "--issue-id", &s.issue].map(|a| json!(a)));
    let plan = json!({"stdio": cmd, "path": "big/big2.md"});
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_sdk/cancel_retry.py");
    let out = piped(
        Command::new("python3").arg(script),
        plan.to_string().as_bytes(),
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "cancel_retry.py printed no JSON ({e}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(seen["cancelled"], true, "{seen:#}");
    assert_eq!(seen["retry"]["is_error"], false, "{seen:#}");
    let retry = &seen["retry"]["structured"];
    let chunks = retry["chunks"].as_u64().unwrap();
    assert!(chunks > 100, "{retry}");
    assert_eq!(retry["changed"], false, "the retry redid the work: {retry}");
    assert_eq!(retry["embedded"], 0, "the retry redid the work: {retry}");
    assert_eq!(retry["reused"], chunks, "{retry}");
}

/// Issue 62: a `subscriptions/listen` (protocol 2026-07-28, the official Python SDK) that
/// names more documents than a session may watch is acknowledged for the first 256 only
/// (the acknowledgment says which); the 20,000 of the probe were all watched.
#[test]
fn a_listen_for_more_documents_than_the_limit_watches_the_first_256() {
    let env = Env::new();
    let s = setup(&env);
    let mut cmd: Vec<Value> = vec![json!(bin())];
    cmd.extend(env.db_args().iter().map(|a| json!(a.to_string_lossy())));
    cmd.extend(["serve", "--no-daemon", "--issue-id", &s.issue].map(|a| json!(a)));
    let uris: Vec<String> = (0..257)
        .map(|i| format!("cairn://vault/proj/docs/d{i}.md"))
        .collect();
    let plan = json!({"stdio": cmd, "uris": uris});
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_sdk/listen_limit.py");
    let out = piped(
        Command::new("python3").arg(script),
        plan.to_string().as_bytes(),
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "listen_limit.py printed no JSON ({e}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let honored = seen["honored"]
        .as_array()
        .unwrap_or_else(|| panic!("{seen:#}"));
    assert_eq!(honored.len(), 256, "{seen:#}");
    assert_eq!(*honored, json!(uris[..256]).as_array().unwrap().clone());
}
