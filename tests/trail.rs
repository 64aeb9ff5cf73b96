//! The work trail: issue, finding, comment, sub-task, PR, settings, coverage,
//! test-health and run-event tools over MCP, served in-process (success, each
//! documented failure, and the effect `get_issue` shows), the append-only hash chain
//! (source scan, triggers, tampering detected, concurrent appends from two `cairn
//! serve` processes), and through the real binary the CLI (`issue status|comment`, `project configure`, `pr`, `findings`,
//! `run ingest`).

use serde_json::{Value, json};

use crate::common::{Env, error_fields, to_json};

/// A project `web` with issues WEB-1 (the bound one) and WEB-2.
fn setup() -> Env {
    let env = Env::new();
    env.project("web", None);
    assert_eq!(env.issue("web", "Bound issue"), "WEB-1");
    assert_eq!(env.issue("web", "Other issue"), "WEB-2");
    env
}

fn status_of(env: &Env, issue: &str) -> String {
    env.issue_json(issue)["status"]
        .as_str()
        .unwrap()
        .to_string()
}

// The scope matrix (the rows of these tools at list and call time) is checked for every
// tool in `mcp_contract.rs` (the registry against the spec's table) and `mcp_table.rs`
// (each profile's tools/list and PERMISSION_DENIED outside it).

#[tokio::test]
async fn get_issue_defaults_to_the_bound_issue_and_reads_others() {
    let env = setup();
    let c = env
        .serve_local(&["--issue-id", "WEB-1", "--agent-type", "worker"])
        .await;
    let me = c.ok("get_issue", json!({})).await;
    assert_eq!(me["identifier"], "WEB-1");
    assert_eq!(me["title"], "Bound issue");
    for key in [
        "findings",
        "comments",
        "status_history",
        "pull_requests",
        "runs",
    ] {
        assert!(me[key].as_array().unwrap().is_empty(), "{key}");
    }
    let other = c.ok("get_issue", json!({"issue_id": "web-2"})).await;
    assert_eq!(other["identifier"], "WEB-2");
    c.err_code("get_issue", json!({"issue_id": "WEB-99"}), "ERR_NOT_FOUND")
        .await;
    let bad = c.err("get_issue", json!({"issue_id": ""})).await;
    assert_eq!(error_fields(&bad), ["issue_id"]);
    let st = c.ok("get_issue_status", json!({})).await;
    assert_eq!(st["identifier"], "WEB-1");
    assert_eq!(st["status"], "todo");
    assert!(st["recentFindings"].as_array().unwrap().is_empty());
    assert!(st["recentRuns"].as_array().unwrap().is_empty());
    assert!(st["updatedAt"].is_string());
    c.err_code(
        "get_issue_status",
        json!({"issue_id": "NOPE-1"}),
        "ERR_NOT_FOUND",
    )
    .await;
    c.close().await;

    // No bound issue: reads need issue_id, mutations refuse.
    let c = env.serve_local(&["--project-id", "web"]).await;
    c.err_code("get_issue", json!({}), "ERR_NO_BOUND_ISSUE")
        .await;
    c.ok("get_issue", json!({"issue_id": "WEB-1"})).await;
    c.err_code(
        "add_comment",
        json!({"content": "hello"}),
        "ERR_NO_BOUND_ISSUE",
    )
    .await;
    c.close().await;
}

#[tokio::test]
async fn update_issue_status_follows_the_transitions_and_keeps_history() {
    let env = setup();
    let c = env
        .serve_local(&["--issue-id", "WEB-1", "--agent-type", "worker"])
        .await;
    // The spec gives agents review, todo and blocked, from in_progress only: starting
    // work is the orchestrator's move, and so is anything from todo, review or blocked.
    let start = c
        .err("update_issue_status", json!({"status": "in_progress"}))
        .await;
    assert_eq!(error_fields(&start), ["status"]);
    for s in ["review", "todo", "blocked"] {
        let body = c
            .err_code(
                "update_issue_status",
                json!({"status": s, "reason": "x"}),
                "ERR_INVALID_TRANSITION",
            )
            .await;
        let msg = body["error"]["message"].as_str().unwrap();
        assert!(msg.contains("only from in_progress"), "{msg}");
    }
    env.set_status("WEB-1", "in_progress", Some("dispatched"));
    let r = c
        .ok(
            "update_issue_status",
            json!({"status": "review", "reason": "all tests pass"}),
        )
        .await;
    assert_eq!(
        (r["issue"].as_str(), r["from"].as_str(), r["to"].as_str()),
        (Some("WEB-1"), Some("in_progress"), Some("review"))
    );
    // From review the agent can do nothing; rework is the orchestrator's call.
    c.err_code(
        "update_issue_status",
        json!({"status": "todo"}),
        "ERR_INVALID_TRANSITION",
    )
    .await;
    // done is a person's call, not in the tool's schema.
    let bad = c
        .err("update_issue_status", json!({"status": "done"}))
        .await;
    assert_eq!(error_fields(&bad), ["status"]);
    let long = c
        .err(
            "update_issue_status",
            json!({"status": "todo", "reason": "x".repeat(2001)}),
        )
        .await;
    assert_eq!(error_fields(&long), ["reason"]);
    // in_progress → todo (give up), and in_progress → blocked.
    env.set_status("WEB-1", "in_progress", None);
    c.ok(
        "update_issue_status",
        json!({"status": "todo", "reason": "to todo"}),
    )
    .await;
    env.set_status("WEB-1", "in_progress", None);
    c.ok(
        "update_issue_status",
        json!({"status": "blocked", "reason": "to blocked"}),
    )
    .await;
    let issue = c.ok("get_issue", json!({})).await;
    assert_eq!(issue["status"], "blocked");
    assert_eq!(issue["blocked_reason"], "to blocked");
    let hist: Vec<(String, String, String)> = issue["status_history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["to"].as_str().unwrap().to_string(),
                h["reason"].as_str().unwrap_or("").to_string(),
                h["actor"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(hist.len(), 6, "{hist:?}");
    assert_eq!(
        (hist[1].0.as_str(), hist[1].1.as_str(), hist[1].2.as_str()),
        ("review", "all tests pass", "agent-worker")
    );
    assert_ne!(hist[0].2, "agent-worker", "{hist:?}");
    c.close().await;
    // A person finishes it from the CLI; cancelled is terminal.
    env.ok(&["issue", "status", "WEB-1", "todo"]);
    env.ok(&["issue", "status", "WEB-1", "cancelled", "--reason", "dup"]);
    let out = env.run(&["issue", "status", "WEB-1", "todo"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("terminal"));
}

#[tokio::test]
async fn findings_and_comments_append_to_the_chain() {
    let env = setup();
    let c = env
        .serve_local(&["--issue-id", "WEB-1", "--agent-type", "worker"])
        .await;
    let f = c
        .ok(
            "add_finding",
            json!({"category": "bug", "summary": "Race in cleanup", "details": "two agents", "files": ["src/a.rs"]}),
        )
        .await;
    assert!(f["id"].as_str().unwrap().starts_with("f-"), "{f}");
    assert_eq!(f["category"], "bug");
    assert_eq!(f["processed"], false);
    assert_eq!(f["position"], 1);
    assert_eq!(f["files"], json!(["src/a.rs"]));
    let cm = c
        .ok("add_comment", json!({"content": "root cause found"}))
        .await;
    assert!(cm["id"].as_str().unwrap().starts_with("c-"));
    assert_eq!(cm["position"], 2);
    // Validation: category, empty summary, too many files, unknown field.
    let bad = c
        .err(
            "add_finding",
            json!({"category": "phase_completion", "summary": "x"}),
        )
        .await;
    assert_eq!(error_fields(&bad), ["category"]);
    let bad = c
        .err("add_finding", json!({"category": "gap", "summary": ""}))
        .await;
    assert_eq!(error_fields(&bad), ["summary"]);
    let files: Vec<String> = (0..101).map(|i| format!("f{i}")).collect();
    let bad = c
        .err(
            "add_finding",
            json!({"category": "gap", "summary": "s", "files": files}),
        )
        .await;
    assert_eq!(error_fields(&bad), ["files"]);
    let bad = c
        .err("add_comment", json!({"content": "x", "id": "forged"}))
        .await;
    assert_eq!(error_fields(&bad), ["id"]);
    let bad = c.err("add_comment", json!({"content": "   "})).await;
    assert_eq!(error_fields(&bad), ["content"]);
    for i in 0..5 {
        c.ok(
            "add_finding",
            json!({"category": "test_result", "summary": format!("run {i}")}),
        )
        .await;
    }
    let issue = c.ok("get_issue", json!({})).await;
    assert_eq!(issue["findings"].as_array().unwrap().len(), 6);
    assert_eq!(issue["comments"][0]["content"], "root cause found");
    let st = c.ok("get_issue_status", json!({})).await;
    let recent: Vec<&str> = st["recentFindings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["summary"].as_str().unwrap())
        .collect();
    assert_eq!(recent, ["run 4", "run 3", "run 2", "run 1", "run 0"]);
    c.close().await;
    let v = env.verify_trail("WEB-1");
    assert_eq!(v["intact"], true);
    assert_eq!(v["total_records"], 7);
    let listed = to_json(&env.open().findings("WEB-1").unwrap());
    assert_eq!(listed.as_array().unwrap().len(), 6);
    // A comment from the CLI joins the same chain.
    env.ok(&["issue", "comment", "WEB-1", "from a person"]);
    assert_eq!(env.verify_trail("WEB-1")["total_records"], 8);
}

#[tokio::test]
async fn processed_is_derived_and_never_touches_the_record() {
    let env = setup();
    let c = env
        .serve_local(&["--issue-id", "WEB-1", "--agent-type", "worker"])
        .await;
    let f = c
        .ok(
            "add_finding",
            json!({"category": "gap", "summary": "no tests"}),
        )
        .await;
    let id = f["id"].as_str().unwrap();
    let before = env.verify_trail("WEB-1")["head_hash"].clone();
    env.ok(&["findings", "WEB-1", "--mark-processed", id]);
    let after = c.ok("get_issue", json!({})).await;
    assert_eq!(after["findings"][0]["processed"], true);
    assert!(after["findings"][0]["processed_at"].is_string());
    assert_eq!(after["findings"][0]["hash"], f["hash"]);
    let v = env.verify_trail("WEB-1");
    assert_eq!(
        (v["intact"].clone(), v["head_hash"].clone()),
        (json!(true), before)
    );
    assert!(
        env.json(&["findings", "WEB-1", "--unprocessed"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    let out = env.run(&["findings", "WEB-1", "--mark-processed", "f-nope"]);
    assert_eq!(out.status.code(), Some(1));
    c.close().await;
}

#[test]
fn no_sql_in_src_updates_or_deletes_a_trail_record() {
    let re = regex::Regex::new(
        r"(?is)(\bUPDATE\s+(OR\s+\w+\s+)?trail_records\b|\bDELETE\s+FROM\s+trail_records\b|\bREPLACE\s+INTO\s+trail_records\b|\bOR\s+REPLACE\s+INTO\s+trail_records\b)",
    )
    .unwrap();
    let mut scanned = 0;
    let mut stack = vec![std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                scanned += 1;
                assert!(
                    !re.is_match(&text),
                    "{} updates or deletes trail records: {:?}",
                    path.display(),
                    re.find(&text).map(|m| m.as_str())
                );
            }
        }
    }
    assert!(scanned > 10, "scanned only {scanned} files");
}

#[tokio::test]
async fn triggers_refuse_edits_and_tampering_is_detected() {
    let env = setup();
    let c = env
        .serve_local(&["--issue-id", "WEB-1", "--agent-type", "worker"])
        .await;
    for s in ["one", "two", "three"] {
        c.ok("add_finding", json!({"category": "bug", "summary": s}))
            .await;
    }
    c.close().await;
    let db = env.store();
    let replace = match db.read(|c| Ok(c.dialect())).unwrap() {
        cairn::store::db::Dialect::Sqlite => {
            "INSERT OR REPLACE INTO trail_records SELECT * FROM trail_records WHERE position = 1"
        }
        cairn::store::db::Dialect::Postgres => {
            "INSERT INTO trail_records SELECT * FROM trail_records WHERE position = 1
             ON CONFLICT (id) DO UPDATE SET body = excluded.body"
        }
    };
    for sql in [
        "UPDATE trail_records SET body = '{}' WHERE position = 2",
        "DELETE FROM trail_records WHERE position = 3",
        replace,
        "INSERT INTO trail_records SELECT 'f-x', issue_id, 4, kind, category, body, actor,
             created_at, 'not the last hash', hash FROM trail_records WHERE position = 3",
    ] {
        let err = db.write(|c| c.execute(sql, [])).unwrap_err().to_string();
        assert!(err.contains("append-only"), "{sql}: {err}");
    }
    assert_eq!(env.verify_trail("WEB-1")["intact"], true);

    // The documented hash: sha256 of the sorted-key compact JSON of the record's fields.
    let stored: String = db
        .read(|c| {
            c.query_row(
                "SELECT hash FROM trail_records WHERE position = 2",
                [],
                |r| r.get(0),
            )
        })
        .unwrap();
    assert_eq!(documented_hash(&db, 2), stored);

    // Behind the server's back: drop the trigger and edit a body.
    env.tamper(
        &[("trail_records", "trail_records_no_update")],
        r#"UPDATE trail_records SET body = '{"files":[],"summary":"forged"}' WHERE position = 2;"#,
    );
    let out = env.run(&["findings", "WEB-1", "--verify", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a broken chain exits 3, like `cairn audit verify`"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["intact"], false);
    let broken = v["broken"].as_array().unwrap();
    assert_eq!(broken.len(), 1, "{v:#}");
    assert_eq!(broken[0]["position"], 2);
    assert_eq!(broken[0]["problem"], "content");
    assert_eq!(broken[0]["actual_hash"], stored.as_str());
    // Re-hashing the forged record to hide the edit breaks the next link instead.
    let forged = documented_hash(&db, 2);
    db.write(|c| {
        c.execute(
            "UPDATE trail_records SET hash = ?1 WHERE position = 2",
            [&forged],
        )
    })
    .unwrap();
    let v = env.verify_trail("WEB-1");
    let problems: Vec<(u64, &str)> = v["broken"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["position"].as_u64().unwrap(),
                b["problem"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(problems, [(3, "link")]);
    // Removing the last record is caught by the recorded head.
    env.tamper(
        &[("trail_records", "trail_records_no_delete")],
        "DELETE FROM trail_records WHERE position = 3;",
    );
    let v = env.verify_trail("WEB-1");
    assert!(
        v["broken"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["problem"] == "head"),
        "{v:#}"
    );
}

/// Recompute a record's hash from its row exactly as documented in `trail::chain`.
fn documented_hash(db: &cairn::store::Store, position: i64) -> String {
    use sha2::{Digest, Sha256};
    let v: Value = db
        .read(|c| {
            c.query_row(
                "SELECT * FROM trail_records WHERE position = ?1",
                [position],
                |r| {
                    let body: String = r.get("body")?;
                    Ok(json!({
                        "actor": r.get::<_, String>("actor")?,
                        "body": serde_json::from_str::<Value>(&body).unwrap(),
                        "category": r.get::<_, Option<String>>("category")?,
                        "created_at": r.get::<_, String>("created_at")?,
                        "id": r.get::<_, String>("id")?,
                        "issue_id": r.get::<_, String>("issue_id")?,
                        "kind": r.get::<_, String>("kind")?,
                        "position": r.get::<_, i64>("position")?,
                        "prev_hash": r.get::<_, String>("prev_hash")?,
                    }))
                },
            )
        })
        .unwrap();
    // serde_json's map keeps keys sorted, and to_string is compact: the canonical form.
    hex::encode(Sha256::digest(serde_json::to_string(&v).unwrap()))
}

#[tokio::test]
async fn concurrent_appends_from_two_servers_keep_one_chain() {
    let env = setup();
    let a = env
        .serve(&["--issue-id", "WEB-1", "--agent-type", "worker"])
        .await;
    let b = env
        .serve(&["--issue-id", "WEB-1", "--agent-type", "judge"])
        .await;
    let calls_a = (0..20).map(|i| {
        a.ok(
            "add_finding",
            json!({"category": "test_result", "summary": format!("a{i}")}),
        )
    });
    let calls_b = (0..20).map(|i| b.ok("add_comment", json!({"content": format!("b{i}")})));
    let (ra, rb) = tokio::join!(
        futures_join_all(calls_a.collect()),
        futures_join_all(calls_b.collect())
    );
    assert_eq!(ra.len() + rb.len(), 40);
    let v = env.verify_trail("WEB-1");
    assert_eq!(v["intact"], true, "{v:#}");
    assert_eq!(v["total_records"], 40);
    let mut positions: Vec<u64> = ra
        .iter()
        .chain(rb.iter())
        .map(|r| r["position"].as_u64().unwrap())
        .collect();
    positions.sort();
    assert_eq!(positions, (1..=40).collect::<Vec<u64>>());
    a.close().await;
    b.close().await;
}

/// Await every future, concurrently, in order (no extra dependency).
async fn futures_join_all<F: std::future::Future<Output = Value>>(futs: Vec<F>) -> Vec<Value> {
    let mut set = Vec::new();
    for f in futs {
        set.push(Box::pin(f));
    }
    let mut out = vec![Value::Null; set.len()];
    let mut pending: Vec<usize> = (0..set.len()).collect();
    std::future::poll_fn(|cx| {
        pending.retain(|&i| match set[i].as_mut().poll(cx) {
            std::task::Poll::Ready(v) => {
                out[i] = v;
                false
            }
            std::task::Poll::Pending => true,
        });
        if pending.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    out
}

#[tokio::test]
async fn create_issue_stores_and_shows_depends_on() {
    let env = setup();
    let c = env
        .serve_local(&["--issue-id", "WEB-1", "--agent-type", "intake"])
        .await;
    let i = c
        .ok(
            "create_issue",
            json!({"title": "Validate input", "description": "max 500", "priority": 2, "labels": ["validation"], "depends_on": ["WEB-1", "web-2"]}),
        )
        .await;
    assert_eq!(i["identifier"], "WEB-3");
    assert_eq!(i["depends_on"], json!(["WEB-1", "WEB-2"]));
    assert_eq!(i["created_by"], "agent-intake");
    let bad = c
        .err(
            "create_issue",
            json!({"title": "x", "depends_on": ["WEB-77"]}),
        )
        .await;
    assert_eq!(error_fields(&bad), ["depends_on[0]"]);
    let bad = c
        .err("create_issue", json!({"title": "x", "priority": 5}))
        .await;
    assert_eq!(error_fields(&bad), ["priority"]);
    let bad = c
        .err("create_issue", json!({"title": "t".repeat(501)}))
        .await;
    assert_eq!(error_fields(&bad), ["title"]);
    let listed = c.ok("list_issues", json!({"labels": "validation"})).await;
    assert_eq!(listed["count"], 1);
    assert_eq!(listed["issues"][0]["depends_on"], json!(["WEB-1", "WEB-2"]));
    c.close().await;
    let shown = env.issue_json("WEB-3");
    assert_eq!(shown["priority"], 2);
    assert_eq!(shown["depends_on"], json!(["WEB-1", "WEB-2"]));
}

#[tokio::test]
async fn create_subtask_blocks_the_parent_until_its_subtasks_end() {
    let env = setup();
    let c = env
        .serve_local(&["--issue-id", "WEB-1", "--agent-type", "planner"])
        .await;
    env.set_status("WEB-1", "in_progress", None);
    let s1 = c
        .ok(
            "create_subtask",
            json!({"title": "Unit tests", "priority": 2}),
        )
        .await;
    assert_eq!(s1["subtask"]["identifier"], "WEB-3");
    assert_eq!(s1["subtask"]["parent"], "WEB-1");
    assert_eq!(s1["parent_status"], "blocked");
    let s2 = c.ok("create_subtask", json!({"title": "Docs"})).await;
    assert_eq!(s2["subtask"]["identifier"], "WEB-4");
    let parent = c.ok("get_issue", json!({})).await;
    assert_eq!(parent["status"], "blocked");
    assert_eq!(parent["subtasks"], json!(["WEB-3", "WEB-4"]));
    assert_eq!(parent["depends_on"], json!(["WEB-3", "WEB-4"]));
    assert_eq!(parent["blocked_reason"], "waiting for sub-task WEB-4");
    // Cannot be unblocked while a sub-task is open: not by the planner (agents change
    // status only from in_progress), not by a person.
    c.err_code(
        "update_issue_status",
        json!({"status": "todo"}),
        "ERR_INVALID_TRANSITION",
    )
    .await;
    let out = env.open().update_issue_status(
        "WEB-1",
        cairn::issues::Status::InProgress,
        None,
        "cli",
        false,
    );
    let err = out
        .expect_err("a person cannot unblock it either")
        .to_string();
    assert!(err.contains("WEB-3, WEB-4"), "{err}");
    let bad = c.err("create_subtask", json!({"title": ""})).await;
    assert_eq!(error_fields(&bad), ["title"]);
    // Finishing one sub-task keeps the parent blocked; the last one releases it.
    for s in ["in_progress", "review", "done"] {
        env.set_status("WEB-3", s, None);
    }
    assert_eq!(status_of(&env, "WEB-1"), "blocked");
    env.set_status("WEB-4", "cancelled", Some("not needed"));
    let parent = c.ok("get_issue", json!({})).await;
    assert_eq!(
        parent["status"], "in_progress",
        "back to its previous status"
    );
    assert!(parent["blocked_reason"].is_null());
    let last = parent["status_history"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["reason"], "all sub-tasks are done");
    c.close().await;
    // A done parent cannot get sub-tasks.
    env.set_status("WEB-2", "cancelled", None);
    let c = env
        .serve_local(&["--issue-id", "WEB-2", "--agent-type", "worker"])
        .await;
    c.err_code(
        "create_subtask",
        json!({"title": "late"}),
        "ERR_INVALID_TRANSITION",
    )
    .await;
    c.close().await;
}

#[tokio::test]
async fn list_issues_filters_by_status_and_label_with_limits() {
    let env = setup();
    for n in 0..4 {
        env.open()
            .create_issue(&cairn::issues::NewIssue {
                project: "web".into(),
                title: format!("b{n}"),
                status: Some(cairn::issues::Status::Backlog),
                labels: vec!["later".into()],
                ..Default::default()
            })
            .unwrap();
    }
    env.project("other", None);
    env.issue("other", "elsewhere");
    let c = env
        .serve_local(&["--issue-id", "WEB-1", "--agent-type", "scanner"])
        .await;
    let all = c.ok("list_issues", json!({})).await;
    assert_eq!(all["count"], 6, "only the bound project's issues");
    let backlog = c
        .ok("list_issues", json!({"status": "backlog", "limit": 3}))
        .await;
    assert_eq!(backlog["count"], 3);
    assert!(
        backlog["issues"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["status"] == "backlog")
    );
    let labelled = c.ok("list_issues", json!({"labels": "later"})).await;
    assert_eq!(labelled["count"], 4);
    let none = c.ok("list_issues", json!({"labels": "nothing"})).await;
    assert_eq!(none["count"], 0);
    let bad = c.err("list_issues", json!({"limit": 101})).await;
    assert_eq!(error_fields(&bad), ["limit"]);
    let bad = c.err("list_issues", json!({"status": "open"})).await;
    assert_eq!(error_fields(&bad), ["status"]);
    c.close().await;
}

const DIFF: &str = "diff --git a/server/database/schema.sql b/server/database/schema.sql
--- a/server/database/schema.sql
+++ b/server/database/schema.sql
@@ -1,2 +1,3 @@
 CREATE TABLE a (
+  b INT NOT NULL,
   c INT);
diff --git a/src/new.rs b/src/new.rs
new file mode 100644
--- /dev/null
+++ b/src/new.rs
@@ -0,0 +1,2 @@
+fn main() {}
+// done
";

#[tokio::test]
async fn create_pr_records_stats_and_risk_and_reviews_move_the_issue() {
    let env = setup();
    env.open()
        .configure_project(
            "web",
            &cairn::issues::settings::SettingsUpdate {
                sensitive_paths: Some(vec!["server/database/*".into(), ".env*".into()]),
                risk_thresholds: Some(
                    serde_json::from_value(
                        json!({"lowLines": 1, "highLines": 5, "lowFiles": 1, "highFiles": 3}),
                    )
                    .unwrap(),
                ),
                ..Default::default()
            },
        )
        .unwrap();
    // create_pr verifies the workspace first: a worktree of another issue records nothing.
    let wrong = env.path().join("wrong");
    std::fs::create_dir(&wrong).unwrap();
    std::fs::write(wrong.join(".symphony-worktree"), "WEB-2\n").unwrap();
    let lost = env
        .serve_local(&[
            "--issue-id",
            "WEB-1",
            "--agent-type",
            "worker",
            "--worktree-path",
            wrong.to_str().unwrap(),
        ])
        .await;
    env.set_status("WEB-1", "in_progress", None);
    lost.err_code(
        "create_pr",
        json!({"diff": DIFF, "branch_name": "symphony/WEB-1", "base_branch": "main"}),
        "ERR_WORKSPACE_INVALID",
    )
    .await;
    let none = lost.ok("get_issue", json!({})).await;
    assert!(none["pull_requests"].as_array().unwrap().is_empty());
    lost.close().await;
    env.set_status("WEB-1", "todo", None);
    let wt = env.path().join("wt");
    std::fs::create_dir(&wt).unwrap();
    std::fs::write(wt.join(".symphony-worktree"), "WEB-1\n").unwrap();
    let wt = wt.to_string_lossy().into_owned();
    let worker = [
        "--issue-id",
        "WEB-1",
        "--agent-type",
        "worker",
        "--worktree-path",
        wt.as_str(),
    ];
    let w = env.serve_local(&worker).await;
    env.set_status("WEB-1", "in_progress", None);
    let bad = w
        .err(
            "create_pr",
            json!({"diff": "just words", "branch_name": "b", "base_branch": "main"}),
        )
        .await;
    assert_eq!(error_fields(&bad), ["diff"]);
    let bad = w
        .err(
            "create_pr",
            json!({"diff": DIFF, "branch_name": "a b", "base_branch": "main", "gate_results": [{"command": "t", "label": "T", "exit_code": 0}]}),
        )
        .await;
    assert_eq!(error_fields(&bad), ["gate_results[0].output"]);
    let bad = w
        .err(
            "create_pr",
            json!({"diff": DIFF, "branch_name": "a b", "base_branch": "../main"}),
        )
        .await;
    assert_eq!(error_fields(&bad), ["branch_name", "base_branch"]);
    let gates = json!([
        {"command": "cargo test", "label": "Tests", "exit_code": 1, "output": "1 failed", "required": true},
        {"command": "cargo fmt", "label": "Fmt", "exit_code": 1, "output": "diff", "required": false}
    ]);
    let pr = w
        .ok(
            "create_pr",
            json!({"diff": DIFF, "branch_name": "symphony/WEB-1", "base_branch": "main", "gate_results": gates}),
        )
        .await;
    assert_eq!(pr["status"], "open");
    assert_eq!(
        (pr["additions"].as_u64(), pr["deletions"].as_u64()),
        (Some(3), Some(0))
    );
    assert_eq!(pr["files"][1]["status"], "added");
    assert!(
        pr.get("diff").is_none(),
        "the tool answer leaves the diff out"
    );
    // 3 lines: (3-1)/(5-1)*40 = 20; 2 files: (2-1)/(3-1)*30 = 15; sensitive 30; 1 required gate failed 20.
    assert_eq!(pr["risk"]["score"], 85, "{:#}", pr["risk"]);
    assert_eq!(pr["risk"]["level"], "high");
    assert_eq!(pr["risk"]["factors"].as_array().unwrap().len(), 4);
    assert_eq!(status_of(&env, "WEB-1"), "review");
    w.close().await;

    let j = env
        .serve_local(&["--issue-id", "WEB-1", "--agent-type", "judge"])
        .await;
    let rejected = j
        .ok(
            "reject_pr",
            json!({"reason": "Tests fail", "fix_instructions": "Make the NOT NULL column nullable"}),
        )
        .await;
    assert_eq!(rejected["status"], "rejected");
    assert_eq!(
        rejected["fix_instructions"],
        "Make the NOT NULL column nullable"
    );
    let issue = j.ok("get_issue", json!({})).await;
    assert_eq!(issue["status"], "todo");
    let comment = issue["comments"][0]["content"].as_str().unwrap();
    assert!(
        comment.contains("Tests fail") && comment.contains("Fix instructions: Make the NOT NULL"),
        "{comment}"
    );
    j.err_code("approve_pr", json!({}), "ERR_NOT_FOUND").await;
    j.err_code("reject_pr", json!({}), "ERR_NOT_FOUND").await;
    let bad = j
        .err("approve_pr", json!({"reason": "r".repeat(2001)}))
        .await;
    assert_eq!(error_fields(&bad), ["reason"]);

    let w = env.serve_local(&worker).await;
    env.set_status("WEB-1", "in_progress", None);
    let second = w
        .ok(
            "create_pr",
            json!({"diff": DIFF, "branch_name": "symphony/WEB-1", "base_branch": "main"}),
        )
        .await;
    w.close().await;
    let approved = j.ok("approve_pr", json!({"reason": "fixed"})).await;
    assert_eq!(approved["id"], second["id"]);
    assert_eq!(approved["status"], "approved");
    assert_eq!(approved["reviewed_by"], "agent-judge");
    let issue = j.ok("get_issue", json!({})).await;
    assert_eq!(
        issue["status"], "review",
        "stays in review for a human merge"
    );
    let prs: Vec<&str> = issue["pull_requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["status"].as_str().unwrap())
        .collect();
    assert_eq!(prs, ["rejected", "approved"]);
    j.close().await;

    let listed = env.json(&["pr", "list", "--project", "web"]);
    assert_eq!(listed.as_array().unwrap().len(), 2);
    assert!(listed[0].get("diff").is_none());
    let shown = env.json(&["pr", "show", second["id"].as_str().unwrap()]);
    assert_eq!(shown["diff"], DIFF);
    assert!(env.run(&["pr", "show", "pr_nope"]).status.code() == Some(1));
}

#[tokio::test]
async fn configure_project_merges_sections_and_validates() {
    let env = setup();
    let c = env.serve_local(&["--issue-id", "WEB-1"]).await;
    let p = c
        .ok(
            "configure_project",
            json!({
                "gates": [{"command": "cargo test", "label": "Tests", "required": true}],
                "sensitive_paths": [".env*"],
                "risk_thresholds": {"lowLines": 10, "highLines": 100, "lowFiles": 2, "highFiles": 8},
                "worker_instructions": "Run clippy.",
                "vault": {"collections": ["docs", "adr"]}
            }),
        )
        .await;
    assert_eq!(p["settings"]["gates"][0]["label"], "Tests");
    assert_eq!(p["settings"]["risk_thresholds"]["highFiles"], 8);
    assert_eq!(
        p["settings"]["vault"]["collections"],
        json!(["docs", "adr"])
    );
    // A second call replaces only what it names.
    let p = c
        .ok(
            "configure_project",
            json!({"judge_instructions": "Be strict."}),
        )
        .await;
    assert_eq!(p["settings"]["worker_instructions"], "Run clippy.");
    assert_eq!(p["settings"]["judge_instructions"], "Be strict.");
    let bad = c
        .err(
            "configure_project",
            json!({"risk_thresholds": {"lowLines": 100, "highLines": 10, "lowFiles": 1, "highFiles": 2}}),
        )
        .await;
    assert_eq!(error_fields(&bad), ["risk_thresholds"]);
    let bad = c
        .err("configure_project", json!({"risk_thresholds": {"low": 1}}))
        .await;
    assert!(!error_fields(&bad).is_empty());
    let bad = c
        .err(
            "configure_project",
            json!({"gates": [{"command": "x", "label": "y"}]}),
        )
        .await;
    assert_eq!(error_fields(&bad), ["gates[0].required"]);
    let bad = c
        .err(
            "configure_project",
            json!({"vault": {"collections": ["../etc"]}}),
        )
        .await;
    assert_eq!(error_fields(&bad), ["vault_collections[0]"]);
    c.close().await;
    let shown = to_json(&env.open().project("web").unwrap());
    assert_eq!(shown["settings"]["judge_instructions"], "Be strict.");
    let out = env.json(&["project", "configure", "web", "--vault-collection", "notes"]);
    assert_eq!(out["settings"]["vault"]["collections"], json!(["notes"]));
    assert_eq!(out["settings"]["gates"][0]["label"], "Tests");
    let bad = env.run(&["project", "configure", "web", "--gates-json", "{"]);
    assert_eq!(bad.status.code(), Some(2));
    let bad = env.run(&["project", "configure", "nope", "--vault-collection", "x"]);
    assert_eq!(bad.status.code(), Some(1));
}

#[tokio::test]
async fn record_coverage_upserts_and_refuses_unsafe_paths() {
    let env = setup();
    let c = env
        .serve_local(&["--issue-id", "WEB-1", "--agent-type", "scanner"])
        .await;
    let r = c
        .ok(
            "record_coverage",
            json!({"file_path": "src/dispatcher.rs", "concept": "error_handling", "status": "covered"}),
        )
        .await;
    assert_eq!(
        (r["replaced"].as_bool(), r["project_total"].as_u64()),
        (Some(false), Some(1))
    );
    let r = c
        .ok(
            "record_coverage",
            json!({"file_path": "src/dispatcher.rs", "concept": "error_handling", "status": "has_issues", "ticket_id": "web-2", "notes": "unhandled rejection"}),
        )
        .await;
    assert_eq!(
        (r["replaced"].as_bool(), r["project_total"].as_u64()),
        (Some(true), Some(1))
    );
    assert_eq!(r["ticket"], "WEB-2");
    // The spec's scanner example: has_issues without a ticket, a concept with a space.
    let r = c
        .ok(
            "record_coverage",
            json!({"file_path": "src/types.ts", "concept": "type safety", "status": "has_issues",
                   "notes": "any used in 12 places"}),
        )
        .await;
    assert_eq!(r["concept"], "type safety");
    assert!(r["ticket"].is_null(), "{r}");
    let bad = c
        .err("record_coverage", json!({"file_path": "a.rs", "concept": "x", "status": "has_issues", "ticket_id": "WEB-99"}))
        .await;
    assert_eq!(error_fields(&bad), ["ticket_id"]);
    let long = "a/".repeat(600);
    for path in [
        "../secret",
        "src/../../x",
        "/etc/passwd",
        "a\0b",
        "a\\..\\b",
        long.as_str(),
    ] {
        let bad = c
            .err(
                "record_coverage",
                json!({"file_path": path, "concept": "x", "status": "covered"}),
            )
            .await;
        assert_eq!(error_fields(&bad), ["file_path"], "{path:?}");
    }
    for concept in ["   ", "tab\there", "esc\u{1b}[31m"] {
        let bad = c
            .err(
                "record_coverage",
                json!({"file_path": "a.rs", "concept": concept, "status": "covered"}),
            )
            .await;
        assert_eq!(error_fields(&bad), ["concept"], "{concept:?}");
    }
    let bad = c
        .err(
            "record_coverage",
            json!({"file_path": "a.rs", "concept": "x", "status": "maybe"}),
        )
        .await;
    assert_eq!(error_fields(&bad), ["status"]);
    c.close().await;
}

#[tokio::test]
async fn record_test_health_reports_the_trend() {
    let env = setup();
    let c = env
        .serve_local(&["--issue-id", "WEB-1", "--agent-type", "worker"])
        .await;
    let first = c.ok("record_test_health", json!({"test_count": 150})).await;
    assert!(first["previous_test_count"].is_null());
    let second = c
        .ok(
            "record_test_health",
            json!({"test_count": 154, "tests_added": 5, "tests_removed": 1, "test_files_changed": 3, "execution_time_ms": 30000}),
        )
        .await;
    assert_eq!(
        (
            second["previous_test_count"].as_u64(),
            second["delta"].as_i64()
        ),
        (Some(150), Some(4))
    );
    assert_eq!(second["issue"], "WEB-1");
    let bad = c.err("record_test_health", json!({"test_count": -1})).await;
    assert_eq!(error_fields(&bad), ["test_count"]);
    let bad = c.err("record_test_health", json!({})).await;
    assert_eq!(error_fields(&bad), ["test_count"]);
    c.close().await;
}

fn write_log(env: &Env, name: &str, result: &str) -> String {
    let lines = [
        r#"{"type":"system","subtype":"init","session_id":"sess-1","model":"claude-x","tools":["Bash"]}"#,
        r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"thinking","thinking":"plan"},{"type":"text","text":"I'll run the tests"},{"type":"tool_use","id":"tu1","name":"Bash","input":{"command":"cargo test"}}]},"session_id":"sess-1"}"#,
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"tu1","content":"ok"}]},"session_id":"sess-1"}"#,
        "{not json",
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"}}"#,
        r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"tu2","name":"Read","input":{}}]}}"#,
        result,
    ];
    let path = env.path().join(name);
    std::fs::write(&path, lines.join("\n")).unwrap();
    path.to_string_lossy().into_owned()
}

#[tokio::test]
async fn runs_are_ingested_once_and_their_events_queried() {
    let env = setup();
    let ok_log = write_log(
        &env,
        "ok.jsonl",
        r#"{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.25,"duration_ms":1200,"num_turns":3,"result":"done"}"#,
    );
    let r = env.json(&["run", "ingest", "--issue", "WEB-1", &ok_log]);
    assert_eq!(
        r["run"]["id"], "sess-1",
        "the log's session_id names the run"
    );
    assert_eq!(r["run"]["status"], "success");
    assert_eq!(r["run"]["event_count"], 8);
    assert_eq!(r["run"]["malformed_lines"], 1);
    assert_eq!(r["malformed_line_numbers"], json!([4]));
    // The same run again is refused; --replace replaces without duplicating.
    let again = env.run(&["run", "ingest", "--issue", "WEB-1", &ok_log]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--replace"));
    let r = env.json(&["run", "ingest", "--issue", "WEB-1", "--replace", &ok_log]);
    assert_eq!(r["replaced"], true);
    let err_log = write_log(
        &env,
        "err.jsonl",
        r#"{"type":"result","subtype":"error_max_turns","is_error":true,"total_cost_usd":1.5,"result":"hit the turn limit"}"#,
    );
    env.json(&[
        "run", "ingest", "--issue", "WEB-1", "--run-id", "run-2", &err_log,
    ]);
    let bad = env.run(&[
        "run", "ingest", "--issue", "WEB-1", "--run-id", "../x", &err_log,
    ]);
    assert_eq!(bad.status.code(), Some(2));
    let missing = env.run(&["run", "ingest", "--issue", "WEB-9", &err_log]);
    assert_eq!(missing.status.code(), Some(1));

    let c = env
        .serve_local(&["--issue-id", "WEB-1", "--agent-type", "judge"])
        .await;
    let st = c.ok("get_issue_status", json!({})).await;
    let runs = st["recentRuns"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["id"], "run-2");
    assert_eq!(
        (runs[0]["status"].as_str(), runs[0]["error"].as_str()),
        (Some("error_max_turns"), Some("hit the turn limit"))
    );
    assert_eq!(runs[0]["cost_usd"], 1.5);
    assert_eq!(
        (runs[1]["status"].as_str(), runs[1]["cost_usd"].as_f64()),
        (Some("success"), Some(0.25))
    );
    assert!(runs[1]["error"].is_null());

    let all = c.ok("query_run_events", json!({"issue_id": "WEB-1"})).await;
    assert_eq!(all["total"], 16, "two runs of 8 events, none duplicated");
    let uses = c
        .ok(
            "query_run_events",
            json!({"issue_id": "WEB-1", "event_subtype": "tool_use"}),
        )
        .await;
    assert_eq!(uses["total"], 4);
    assert_eq!(uses["events"][0]["payload"]["name"], "Bash");
    let results = c
        .ok(
            "query_run_events",
            json!({"run_id": "run-2", "event_type": "result"}),
        )
        .await;
    assert_eq!(results["total"], 1);
    assert_eq!(
        results["events"][0]["payload"]["subtype"],
        "error_max_turns"
    );
    let page = c
        .ok(
            "query_run_events",
            json!({"run_id": "sess-1", "limit": 4, "offset": 7}),
        )
        .await;
    assert_eq!(
        (
            page["events"].as_array().unwrap().len(),
            page["has_more"].as_bool()
        ),
        (1, Some(false))
    );
    assert_eq!(page["events"][0]["seq"], 8);
    let page = c
        .ok("query_run_events", json!({"run_id": "sess-1", "limit": 4}))
        .await;
    assert_eq!(page["has_more"], true);
    let none = c.err("query_run_events", json!({})).await;
    assert_eq!(error_fields(&none), ["issue_id"]);
    assert!(
        none["error"]["message"]
            .as_str()
            .unwrap()
            .contains("either run_id or issue_id")
    );
    let bad = c
        .err("query_run_events", json!({"run_id": "x", "limit": 501}))
        .await;
    assert_eq!(error_fields(&bad), ["limit"]);
    let bad = c
        .err(
            "query_run_events",
            json!({"run_id": "x", "event_type": "tool"}),
        )
        .await;
    assert_eq!(error_fields(&bad), ["event_type"]);
    c.err_code(
        "query_run_events",
        json!({"run_id": "nope"}),
        "ERR_NOT_FOUND",
    )
    .await;
    let mixed = c
        .err(
            "query_run_events",
            json!({"run_id": "run-2", "issue_id": "WEB-2"}),
        )
        .await;
    assert_eq!(error_fields(&mixed), ["run_id"]);
    let issue = c.ok("get_issue", json!({})).await;
    assert_eq!(issue["runs"].as_array().unwrap().len(), 2);
    c.close().await;
}

#[tokio::test]
async fn configure_project_sets_the_phase_pipeline_and_checks_it() {
    let env = Env::new();
    env.project("web", None);
    let c = env.serve_local(&["--project-id", "web"]).await;
    let p = c
        .ok(
            "configure_project",
            json!({"phases": ["research", "ready"]}),
        )
        .await;
    assert_eq!(p["settings"]["phases"], json!(["research", "ready"]));
    let bad = c
        .err(
            "configure_project",
            json!({"phases": ["research", "research", "no spaces"]}),
        )
        .await;
    let fields = error_fields(&bad);
    assert!(fields.contains(&"phases".to_string()), "{bad:#}");
    assert!(fields.contains(&"phases[2]".to_string()), "{bad:#}");
    let empty = c.err("configure_project", json!({"phases": []})).await;
    assert_eq!(error_fields(&empty), ["phases"]);
    // A failed call changed nothing.
    let shown = to_json(&env.open().project("web").unwrap());
    assert_eq!(shown["settings"]["phases"], json!(["research", "ready"]));
    c.close().await;
}

/// Run `check` (is the chain intact, and how many records does it hold) on WEB-1 again
/// and again while another thread appends comments to its trail, from the first append
/// on, until at least 60 checks ran and 60 appends landed; every check must find the
/// chain intact. Checks of the records and their recorded head that read two moments of
/// the database report a break whenever an append lands between their reads. The checks
/// run at their own pace, and the writer appends again once a check has counted its last
/// append, so the checks see the trail at every length however the machine shares its
/// cores between the two threads.
fn check_while_the_trail_grows(check: impl Fn(&cairn::Cairn) -> (bool, u64, String)) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    const CHECKS: usize = 60;
    const APPENDS: u64 = 60;
    /// Stops the writer when dropped: at the end of the checks, or when one of them
    /// fails (the scope joins the writer before the failure unwinds out of it). Dropping
    /// its sender also wakes a writer waiting for the next check.
    struct Stop<'a>(&'a AtomicBool, std::sync::mpsc::Sender<()>);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let env = setup();
    let writer = env.open();
    let reader = env.open();
    let stop = AtomicBool::new(false);
    let landed = AtomicU64::new(0);
    let (stop, landed) = (&stop, &landed);
    // A check that saw the last append lets the writer append once more: paced by the
    // checks, so that the chain stays short enough to check quickly, while each append
    // lands during a check.
    let (checked, pace) = std::sync::mpsc::channel::<()>();
    let (totals, appended) = std::thread::scope(|s| {
        let appends = s.spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Acquire) {
                writer
                    .add_comment("WEB-1", &format!("note {n}"), "agent")
                    .unwrap();
                n += 1;
                landed.store(n, Ordering::Release);
                if pace.recv().is_err() {
                    break;
                }
            }
            n
        });
        let stopping = Stop(stop, checked);
        while check(&reader).1 == 0 {
            std::thread::yield_now();
        }
        let mut totals = Vec::new();
        // The writer appends again only once a check has seen its last append, so a
        // loaded machine cannot run the appends ahead of the checks: every append is
        // followed by a check that counts it (a count per append, not per time slice).
        let mut seen = 0;
        // (A writer that failed ends the waiting for its appends; joining it shows why.)
        while totals.len() < CHECKS
            || (landed.load(Ordering::Acquire) < APPENDS && !appends.is_finished())
        {
            let (intact, total, detail) = check(&reader);
            assert!(
                intact,
                "check {} (of {total} records) saw a break while the trail grew: {detail}",
                totals.len()
            );
            totals.push(total);
            if total > seen {
                seen = total;
                let _ = stopping.1.send(());
            }
            assert!(
                totals.len() < 100_000,
                "100,000 checks and no more than {seen} records: an append is not counted"
            );
        }
        drop(stopping);
        (totals, appends.join().unwrap())
    });
    assert!(totals.is_sorted(), "the trail shrank: {totals:?}");
    let mut distinct = totals.clone();
    distinct.dedup();
    // The checks ran while the trail grew.
    assert!(distinct.len() >= 10, "{totals:?}");
    let (intact, total, detail) = check(&env.open());
    assert!(
        intact && total == appended,
        "{total} of {appended}: {detail}"
    );
}

/// Verifying a trail while an agent appends to it sees one moment of the database.
#[test]
fn verifying_a_trail_while_it_grows_never_reports_a_false_break() {
    check_while_the_trail_grows(|c| {
        let v = c.verify_trail("WEB-1").unwrap();
        (v.intact, v.total_records, format!("{:?}", v.broken))
    });
}

/// So does the audit's chain check of a task (its thoughts and its trail).
#[test]
fn auditing_a_task_while_its_trail_grows_never_reports_a_false_break() {
    check_while_the_trail_grows(|c| {
        let v = c
            .audit_verify(
                &cairn::access::context::WorkContext::default(),
                &cairn::colibri::audit::VerifyTarget {
                    session: None,
                    task: Some("WEB-1".into()),
                    full_trace: false,
                },
            )
            .unwrap();
        (
            v.chain_valid,
            u64::try_from(v.total_records).unwrap(),
            format!("{:?}", v.broken_links),
        )
    });
}
