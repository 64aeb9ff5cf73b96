//! Data-driven MCP tests in the test process: `CairnServer` over its line transport on an
//! in-memory pipe ([`Env::serve_local`]), a temp database, and tables of calls with what
//! each must answer. Every tool's valid example (the one its help prompt shows) has a row
//! with its expected outcome; the invalid calls (unknown field, wrong type, over-long
//! string, out-of-scope tool, no bound issue) are generated for every tool from its
//! schema, its declared profiles and its binding, so a new tool is covered the day it is
//! registered. Every call also passes the contract checks of [`crate::common::Client`]
//! (a success validates against the tool's `outputSchema`, an error is an envelope
//! without `structuredContent`).

use serde_json::{Map, Value, json};

use cairn::mcp::registry::{all_tools, scope_matrix};
use cairn::mcp::tool::ToolDef;

use crate::common::{Client, Env, error_fields, undeclared};

/// What a row's call must answer.
enum Expect {
    /// Success; each `(JSON pointer, value)` pair holds in the result.
    Ok(Vec<(&'static str, Value)>),
    /// Failure with this `error.code`; with `Some(field)`, the envelope names that field.
    Err(&'static str, Option<&'static str>),
}

fn ok(fields: &[(&'static str, Value)]) -> Expect {
    Expect::Ok(fields.to_vec())
}

fn err(code: &'static str) -> Expect {
    Expect::Err(code, None)
}

fn invalid(field: &'static str) -> Expect {
    Expect::Err("ERR_INVALID_INPUT", Some(field))
}

/// Make one call and check it against `expect`; `label` says which row failed.
async fn check(c: &Client, label: &str, tool: &str, args: Value, expect: &Expect) {
    match expect {
        Expect::Ok(fields) => {
            let result = c.ok(tool, args).await;
            for (pointer, want) in fields {
                assert_eq!(
                    result.pointer(pointer),
                    Some(want),
                    "{label}: {tool} result at {pointer}: {result:#}"
                );
            }
        }
        Expect::Err(code, field) => {
            let envelope = c.err_code(tool, args, code).await;
            if let Some(field) = field {
                assert!(
                    error_fields(&envelope).iter().any(|f| f == field),
                    "{label}: {tool} does not name {field}: {envelope:#}"
                );
            }
        }
    }
}

/// The world every row runs in: project `colibri` (prefix COLIBRI), its issue
/// COLIBRI-1 bound to the server, a memory root, every tool in scope.
struct World {
    env: Env,
    issue: String,
}

impl World {
    fn new() -> World {
        let env = Env::new();
        env.project("colibri", None);
        let issue = env.issue("colibri", "Bound issue of the table");
        std::fs::create_dir(env.path().join("symphony")).unwrap();
        let names: Vec<&str> = all_tools().iter().map(|t| t.name).collect();
        std::fs::write(
            env.path().join("all-tools.json"),
            serde_json::to_vec(&names).unwrap(),
        )
        .unwrap();
        World { env, issue }
    }

    /// A server bound to the issue, as a worker whose scope file lists every tool.
    async fn bound(&self) -> Client {
        let scope = self.env.path().join("all-tools.json");
        let symphony = self.env.path().join("symphony");
        self.env
            .serve_local(&[
                "--issue-id",
                &self.issue,
                "--agent-type",
                "worker",
                "--tool-scope-file",
                scope.to_str().unwrap(),
                "--symphony-dir",
                symphony.to_str().unwrap(),
                "--project-slug",
                "colibri",
            ])
            .await
    }
}

/// The expected outcome of every tool's valid example in [`World`]. The examples are
/// the spec's, written for another database: where they name a task, session or project
/// that this one does not have, the row expects that error (the example passed
/// validation and reached the domain).
/// Rows run in this order, on one server: the registry's order.
fn example_rows(issue: &str) -> Vec<(&'static str, Expect)> {
    let issue = json!(issue);
    let worker = json!("agent-worker");
    vec![
        ("server_ping", ok(&[("/ok", json!(true))])),
        (
            "server_health",
            ok(&[
                ("/status", json!("ok")),
                ("/mode", json!("FULL")),
                ("/db/open", json!(true)),
                ("/tools/registered", json!(all_tools().len())),
            ]),
        ),
        (
            "get_issue",
            ok(&[
                ("/identifier", issue.clone()),
                ("/project_slug", json!("colibri")),
            ]),
        ),
        (
            "get_issue_status",
            ok(&[("/identifier", issue.clone()), ("/status", json!("todo"))]),
        ),
        // todo → review is the orchestrator's move, not an agent's.
        ("update_issue_status", err("ERR_INVALID_TRANSITION")),
        (
            "add_finding",
            ok(&[
                ("/category", json!("bug")),
                ("/actor", worker.clone()),
                ("/position", json!(1)),
                ("/processed", json!(false)),
            ]),
        ),
        (
            "add_comment",
            ok(&[("/actor", worker.clone()), ("/position", json!(2))]),
        ),
        (
            "create_issue",
            ok(&[
                ("/identifier", json!("COLIBRI-2")),
                ("/priority", json!(2)),
                ("/status", json!("todo")),
                ("/labels", json!(["validation"])),
                ("/created_by", worker.clone()),
            ]),
        ),
        (
            "create_subtask",
            ok(&[
                ("/parent", issue.clone()),
                ("/subtask/identifier", json!("COLIBRI-3")),
                ("/subtask/parent", issue.clone()),
                ("/parent_status", json!("blocked")),
            ]),
        ),
        ("list_issues", ok(&[("/count", json!(0))])),
        // The sub-task blocked the bound issue; a PR needs in_progress or review.
        ("create_pr", err("ERR_INVALID_TRANSITION")),
        ("approve_pr", err("ERR_NOT_FOUND")),
        ("reject_pr", err("ERR_NOT_FOUND")),
        (
            "configure_project",
            ok(&[
                ("/slug", json!("colibri")),
                ("/settings/risk_thresholds/lowLines", json!(50)),
                ("/settings/risk_thresholds/highFiles", json!(15)),
                (
                    "/settings/sensitive_paths",
                    json!(["server/database/*", ".env*"]),
                ),
            ]),
        ),
        (
            "record_coverage",
            ok(&[
                ("/status", json!("covered")),
                ("/project_total", json!(1)),
                ("/replaced", json!(false)),
            ]),
        ),
        (
            "record_test_health",
            ok(&[
                ("/issue", issue.clone()),
                ("/test_count", json!(150)),
                ("/previous_test_count", Value::Null),
            ]),
        ),
        // The example names SYM-1, which this database does not have.
        ("query_run_events", err("ERR_NOT_FOUND")),
        ("verify_workspace", err("ERR_WORKSPACE_INVALID")),
        // The example's project_path, /path/to/worktree, does not exist.
        ("complete_phase", invalid("project_path")),
        ("approve_phase", err("ERR_NOT_FOUND")),
        ("reject_phase", err("ERR_NOT_FOUND")),
        ("move_issue", err("ERR_PROJECT_NOT_FOUND")),
        (
            "update_memory",
            ok(&[
                ("/profile_type", json!("worker")),
                ("/scope", json!("project")),
                ("/filename", json!("codebase-notes.md")),
                ("/replaced", json!(false)),
            ]),
        ),
        (
            "task_create",
            ok(&[
                ("/task_id", json!("COLIBRI-4")),
                ("/sequence", json!(4)),
                ("/status", json!("backlog")),
                ("/created_by", worker.clone()),
            ]),
        ),
        ("task_get", err("ERR_TASK_NOT_FOUND")),
        ("task_update", err("ERR_TASK_NOT_FOUND")),
        // todo or in_progress: COLIBRI-2 and -3 (COLIBRI-1 is blocked, -4 in backlog).
        (
            "task_list",
            ok(&[
                ("/returned_count", json!(2)),
                ("/limit", json!(10)),
                ("/offset", json!(0)),
            ]),
        ),
        (
            "task_next_actions",
            ok(&[("/project", json!("colibri")), ("/count", json!(2))]),
        ),
        ("thought_record", err("ERR_TASK_NOT_FOUND")),
        ("thought_record_list", err("ERR_TASK_NOT_FOUND")),
        ("audit_session_start", err("ERR_TASK_NOT_FOUND")),
        ("audit_verify_chain", err("ERR_SESSION_NOT_FOUND")),
        ("merkle_finalize", err("ERR_SESSION_NOT_FOUND")),
        ("merkle_root", err("ERR_SESSION_NOT_FOUND")),
        // The project has no path and the server no --worktree-path.
        ("skill_list", err("ERR_FAILED_PRECONDITION")),
        (
            "add_learning",
            ok(&[
                ("/issue", issue.clone()),
                ("/learning_type", json!("gotcha")),
                ("/created_by", worker.clone()),
            ]),
        ),
        ("search_learnings", ok(&[("/count", json!(1))])),
        // The example names a learning that does not exist.
        ("learning_feedback", err("ERR_NOT_FOUND")),
        // No vault collections configured for the project.
        ("search_knowledge", err("ERR_FAILED_PRECONDITION")),
        ("vault_retrieve", ok(&[("/results", json!([]))])),
        ("vault_update", err("ERR_FAILED_PRECONDITION")),
        ("vault_delete", err("ERR_FAILED_PRECONDITION")),
    ]
}

#[tokio::test]
async fn every_tools_valid_example_answers_as_the_table_says() {
    let world = World::new();
    let rows = example_rows(&world.issue);
    let tools = all_tools();
    // Every tool has a row, every row is a tool.
    for t in tools {
        assert!(
            rows.iter().any(|(name, _)| *name == t.name),
            "{} has no example row",
            t.name
        );
    }
    for (name, _) in &rows {
        assert!(
            tools.iter().any(|t| t.name == *name),
            "row for no tool {name}"
        );
    }
    let registry_order: Vec<&str> = tools.iter().map(|t| t.name).collect();
    let row_order: Vec<&str> = rows.iter().map(|(name, _)| *name).collect();
    assert_eq!(row_order, registry_order, "rows in the registry's order");
    let c = world.bound().await;
    for (name, expect) in &rows {
        let def = tools.iter().find(|t| t.name == *name).unwrap();
        check(&c, "example", name, def.example.clone(), expect).await;
    }
    c.close().await;
}

/// The example with one more property.
fn with(def: &ToolDef, key: &str, value: Value) -> Value {
    let mut args = def.example.as_object().cloned().unwrap_or_default();
    args.insert(key.to_string(), value);
    Value::Object(args)
}

/// The top-level properties of a tool's input schema, with their schemas.
fn properties(def: &ToolDef) -> Map<String, Value> {
    def.input_schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Whether a property's schema accepts a string (possibly among other types).
fn takes_string(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
        _ => false,
    }
}

/// Whether a property's schema accepts a number.
fn takes_number(schema: &Value) -> bool {
    let is = |t: &Value| t == "integer" || t == "number";
    match schema.get("type") {
        Some(Value::String(_)) => is(&schema["type"]),
        Some(Value::Array(ts)) => ts.iter().any(is),
        _ => false,
    }
}

#[tokio::test]
async fn invalid_calls_are_refused_before_any_handler_for_every_tool() {
    let world = World::new();
    let c = world.bound().await;
    let mut rows: Vec<(String, &'static str, Value, Expect)> = Vec::new();
    for def in all_tools() {
        // An unknown field, next to a valid example.
        rows.push((
            "unknown field".into(),
            def.name,
            with(def, "no_such_field", json!(1)),
            invalid("no_such_field"),
        ));
        for (key, schema) in properties(def) {
            let field: &'static str = Box::leak(key.clone().into_boxed_str());
            // The wrong type: a number where a string goes, a string where a number goes.
            if takes_string(&schema) && !takes_number(&schema) {
                rows.push((
                    "wrong type".into(),
                    def.name,
                    with(def, &key, json!(12345)),
                    invalid(field),
                ));
            } else if takes_number(&schema) && !takes_string(&schema) {
                rows.push((
                    "wrong type".into(),
                    def.name,
                    with(def, &key, json!("12")),
                    invalid(field),
                ));
            }
            // One character over the limit.
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
                rows.push((
                    format!("{} characters", max + 1),
                    def.name,
                    with(def, &key, json!("a".repeat(max as usize + 1))),
                    invalid(field),
                ));
            }
            // One over the largest number.
            if let Some(max) = schema.get("maximum").and_then(Value::as_u64) {
                rows.push((
                    format!("{} over the maximum", max + 1),
                    def.name,
                    with(def, &key, json!(max + 1)),
                    invalid(field),
                ));
            }
        }
    }
    assert!(rows.len() > 150, "only {} generated rows", rows.len());
    for (label, tool, args, expect) in &rows {
        check(&c, label, tool, args.clone(), expect).await;
    }
    c.close().await;
}

#[tokio::test]
async fn tools_outside_a_profile_are_refused_and_tools_inside_are_listed() {
    let world = World::new();
    let matrix = scope_matrix();
    for profile in cairn::access::scope::PROFILES {
        let c = world
            .env
            .serve_local(&["--issue-id", &world.issue, "--agent-type", profile])
            .await;
        let allowed = matrix.profile_defaults(profile).unwrap();
        let listed = c.tool_names().await;
        assert_eq!(listed, allowed, "{profile}: tools/list is its row");
        for def in all_tools().iter().filter(|t| !allowed.contains(&t.name)) {
            let envelope = c
                .err_code(def.name, def.example.clone(), "PERMISSION_DENIED")
                .await;
            assert_eq!(envelope["status"], "PERMISSION_DENIED", "{envelope:#}");
            assert_eq!(envelope["error"]["details"]["tool"], def.name);
        }
        c.close().await;
    }
    // Without a profile or a scope file (the setup wizard) every tool is listed.
    let c = world.env.serve_local(&["--issue-id", &world.issue]).await;
    let every: Vec<&str> = all_tools().iter().map(|t| t.name).collect();
    assert_eq!(c.tool_names().await, every);
    c.close().await;
}

#[tokio::test]
async fn issue_bound_tools_say_how_to_bind_an_issue_when_none_is() {
    let world = World::new();
    let c = world.env.serve_local(&["--project-id", "colibri"]).await;
    let bound: Vec<&ToolDef> = all_tools().iter().filter(|t| t.needs_issue).collect();
    assert!(bound.len() >= 10, "{} issue-bound tools", bound.len());
    for def in bound {
        let envelope = c
            .err_code(def.name, def.example.clone(), "ERR_NO_BOUND_ISSUE")
            .await;
        let message = envelope["error"]["message"].as_str().unwrap();
        assert!(message.contains("--issue-id"), "{}: {message}", def.name);
    }
    c.close().await;
}

/// The output schemas are derived from the result types; the strict check every call
/// passes ([`undeclared`]) catches what the derive cannot see. It refuses a property the
/// schema does not declare, at the top, in a nested object and in an array's items, and a
/// missing required one; a result that matches passes.
#[test]
fn the_strict_output_check_refuses_what_the_schema_does_not_declare() {
    let schema_of = |name: &str| {
        let def = all_tools().iter().find(|t| t.name == name).unwrap();
        Value::Object(def.output_schema.clone())
    };
    let list = schema_of("list_issues");
    let issue = json!({"identifier": "P-1", "title": "t", "status": "todo", "priority": 3,
        "labels": [], "parent": null, "depends_on": [], "updated_at": "2026-01-01T00:00:00Z"});
    let good = json!({"issues": [issue], "count": 1});
    assert_eq!(undeclared(&list, &good), Vec::<String>::new());

    let mut extra_top = good.clone();
    extra_top["total"] = json!(1);
    assert_eq!(
        undeclared(&list, &extra_top),
        ["/total: not declared in the outputSchema"]
    );
    let mut extra_item = good.clone();
    extra_item["issues"][0]["assignee"] = json!("me");
    assert_eq!(
        undeclared(&list, &extra_item),
        ["/issues/0/assignee: not declared in the outputSchema"]
    );
    let mut missing = good.clone();
    missing["issues"][0]
        .as_object_mut()
        .unwrap()
        .remove("title");
    assert_eq!(
        undeclared(&list, &missing),
        ["/issues/0/title: required but absent"]
    );

    let health = schema_of("server_health");
    let mut nested = json!({"status": "ok", "mode": "FULL", "timestamp": "t", "version": "1",
        "uptime_ms": 1, "tools": {"registered": 41}, "middleware": {"stages": []},
        "db": {"open": true, "user_version": 1, "expected_version": 1, "path": "x"},
        "vault": []});
    assert_eq!(undeclared(&health, &nested), Vec::<String>::new());
    nested["db"]["size"] = json!(1);
    assert_eq!(
        undeclared(&health, &nested),
        ["/db/size: not declared in the outputSchema"]
    );
}
