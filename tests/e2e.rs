//! One issue walked from todo to an approved PR by a worker and a judge, two `cairn serve`
//! processes on one database: a phase claim, a judge rejection, a second claim, an
//! approval, a PR and its approval; then the trail's chain is re-computed.

use serde_json::json;

use crate::common::Env;

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

const ART: &str = "docs/tickets/SHOP-1/research.md";

fn artifact(extra: &str) -> String {
    format!(
        "# Research: checkout retries\n\n## Summary\n\nThe payment call is retried by the \
         client without an idempotency key, so a timeout can charge twice. {extra}\n\n\
         ## Risks\n\nProviders differ in how long they keep idempotency keys.\n"
    )
}

#[tokio::test]
async fn an_issue_goes_from_todo_through_phases_and_a_pr_to_approval() {
    let env = Env::new();
    let wt = env.path().join("wt");
    std::fs::create_dir_all(wt.join("prompts/phases")).unwrap();
    env.project("shop", Some(&wt));
    assert_eq!(env.issue("shop", "Checkout charges twice"), "SHOP-1");
    std::fs::write(wt.join(".symphony-worktree"), "SHOP-1\n").unwrap();
    std::fs::write(
        wt.join("prompts/phases/research.json"),
        r#"{"version": 1, "required_sections": ["summary", "risks"]}"#,
    )
    .unwrap();
    let wts = wt.to_string_lossy().into_owned();
    let flags = |agent: &'static str| {
        vec![
            "--issue-id".to_string(),
            "SHOP-1".into(),
            "--worktree-path".into(),
            wts.clone(),
            "--agent-type".into(),
            agent.into(),
        ]
    };
    let wf = flags("worker");
    let jf = flags("judge");
    let worker = env
        .serve(&wf.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
    let judge = env
        .serve(&jf.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
    let write = |text: &str| {
        let path = wt.join(ART);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        sha256(text.as_bytes())
    };
    let claim = |hash: &str| {
        json!({
            "completed_phase": "research", "contract_version": 1, "artifact_path": ART,
            "artifact_hash": hash, "summary": "Retries need idempotency keys",
            "recommended_next_phase": "architecture", "project_path": wts,
        })
    };

    worker.ok("verify_workspace", json!({})).await;
    // The orchestrator starts the work (agents change status only from in_progress).
    env.ok(&[
        "issue",
        "status",
        "SHOP-1",
        "in_progress",
        "--reason",
        "starting",
    ]);
    let h1 = write(&artifact("First draft."));
    let pc1 = worker.ok("complete_phase", claim(&h1)).await;
    judge
        .ok(
            "reject_phase",
            json!({"phase": "research", "artifact_hash": h1, "reason": "No provider survey",
                   "fix_instructions": "Compare two providers' key retention"}),
        )
        .await;
    let h2 = write(&artifact("Stripe keeps keys 24h; Adyen 7 days."));
    let pc2 = worker.ok("complete_phase", claim(&h2)).await;
    assert_ne!(pc1["id"], pc2["id"]);
    let pv = judge
        .ok(
            "approve_phase",
            json!({"phase": "research", "artifact_hash": h2, "reason": "Complete"}),
        )
        .await;
    assert_eq!(pv["verdict"], "approved");

    let diff = "diff --git a/src/pay.rs b/src/pay.rs\n--- a/src/pay.rs\n+++ b/src/pay.rs\n\
                @@ -1 +1,2 @@\n fn pay() {}\n+// idempotency key\n";
    let pr = worker
        .ok(
            "create_pr",
            json!({"diff": diff, "branch_name": "symphony/SHOP-1", "base_branch": "main",
                   "gate_results": [{"command": "cargo test", "label": "Tests", "exit_code": 0,
                                     "output": "ok", "required": true}]}),
        )
        .await;
    assert_eq!(pr["risk"]["level"], "low");
    let approved = judge.ok("approve_pr", json!({"reason": "Good"})).await;
    assert_eq!(approved["status"], "approved");

    let issue = worker.ok("get_issue", json!({})).await;
    assert_eq!(issue["status"], "review");
    let cats: Vec<&str> = issue["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["category"].as_str().unwrap())
        .collect();
    assert_eq!(
        cats,
        [
            "phase_completion",
            "phase_verdict",
            "phase_completion",
            "phase_verdict"
        ]
    );
    assert_eq!(issue["findings"][1]["verdict"], "rejected");
    let comments: Vec<&str> = issue["comments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["content"].as_str().unwrap())
        .collect();
    assert_eq!(comments.len(), 2, "{comments:?}");
    assert!(comments[0].contains("No provider survey"));
    assert!(comments[1].contains("approved"));
    let latest = worker.ok("get_issue_status", json!({})).await;
    assert_eq!(latest["recentFindings"][0]["category"], "phase_verdict");
    worker.close().await;
    judge.close().await;

    let v = env.json(&["findings", "SHOP-1", "--verify"]);
    assert_eq!(v["intact"], true, "{v:#}");
    assert_eq!(v["total_records"], 6);
}
