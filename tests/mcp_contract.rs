//! The tool contract, through the real binary and rmcp's client: listing, validation
//! before handlers, help prompts, unknown tools, scope, size limits, start-up.

use serde_json::json;

use crate::common::{Env, error_fields};

#[tokio::test]
async fn ping_and_health_answer() {
    let env = Env::new();
    let c = env.serve(&[]).await;
    let ping = c.ok("server_ping", json!({})).await;
    assert_eq!(ping["ok"], true);
    let health = c.ok("server_health", json!({})).await;
    assert_eq!(health["status"], "ok");
    assert_eq!(health["db"]["open"], true);
    assert_eq!(
        health["db"]["user_version"],
        health["db"]["expected_version"]
    );
    assert_eq!(
        health["tools"]["registered"].as_u64().unwrap() as usize,
        c.tool_names().await.len()
    );
    c.close().await;
}

#[tokio::test]
async fn validation_failure_has_fields_and_help_prompt() {
    let env = Env::new();
    let c = env.serve(&[]).await;
    let body = c.err("server_ping", json!({"bogus": 1})).await;
    assert_eq!(body["status"], "VALIDATION_FAILED");
    assert_eq!(body["error"]["code"], "ERR_INVALID_INPUT");
    assert_eq!(error_fields(&body), ["bogus"]);
    let help = body["help_prompt"].as_str().unwrap();
    assert!(
        help.contains("server_ping") && help.contains("Valid example"),
        "{help}"
    );
    // The server keeps serving after a bad call.
    c.ok("server_ping", json!({})).await;
    c.close().await;
}

#[tokio::test]
async fn unknown_tool_lists_available_tools() {
    let env = Env::new();
    let c = env.serve(&[]).await;
    let body = c.err("no_such_tool", json!({})).await;
    assert_eq!(error_fields(&body), ["tool_name"]);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Unknown tool: no_such_tool")
    );
    let help = body["help_prompt"].as_str().unwrap();
    for name in c.tool_names().await {
        assert!(help.contains(&name), "{name} missing from {help}");
    }
    c.close().await;
}
