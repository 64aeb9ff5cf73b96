//! The tool contract through rmcp's client: listing, validation before handlers, help
//! prompts, unknown tools, scope, size limits on the server in-process; start-up,
//! shutdown, the wire, several processes, the snapshot and the official SDKs and
//! Inspector on the real binary; the scope matrix against the spec's table.

use serde_json::{Value, json};

use crate::common::{Env, error_fields, node};

#[tokio::test]
async fn ping_and_health_answer() {
    let env = Env::new();
    let c = env.serve_local(&[]).await;
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
    let c = env.serve_local(&[]).await;
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
    let c = env.serve_local(&[]).await;
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

#[tokio::test]
async fn scope_filters_at_list_time_and_call_time() {
    let env = Env::new();
    // A scope file wins over --agent-type.
    let scope = env.path().join("scope.json");
    std::fs::write(&scope, r#"["server_ping"]"#).unwrap();
    let c = env
        .serve_local(&[
            "--tool-scope-file",
            scope.to_str().unwrap(),
            "--agent-type",
            "worker",
        ])
        .await;
    assert_eq!(c.tool_names().await, ["server_ping"]);
    c.ok("server_ping", json!({})).await;
    let denied = c
        .err_code("server_health", json!({}), "PERMISSION_DENIED")
        .await;
    assert_eq!(denied["status"], "PERMISSION_DENIED");
    // The unknown-tool list shows only what this caller may use.
    let unknown = c.err("nope", json!({})).await;
    assert!(
        !unknown["help_prompt"]
            .as_str()
            .unwrap()
            .contains("server_health")
    );
    c.close().await;

    // --agent-type alone: the profile matrix.
    let c = env.serve_local(&["--agent-type", "judge"]).await;
    let names = c.tool_names().await;
    assert!(names.contains(&"server_health".to_string()));
    for t in names {
        assert!(
            cairn::mcp::registry::scope_matrix()
                .profile_defaults("judge")
                .unwrap()
                .contains(&t.as_str()),
            "{t} listed for judge"
        );
    }
    c.close().await;
}

#[tokio::test]
async fn oversized_arguments_are_refused_before_any_handler() {
    let env = Env::new();
    let c = env.serve_local(&[]).await;
    let huge = "x".repeat(cairn::mcp::registry::MAX_ARGUMENT_BYTES + 1);
    let body = c.err("server_ping", json!({ "padding": huge })).await;
    assert_eq!(body["status"], "VALIDATION_FAILED");
    assert_eq!(error_fields(&body), ["arguments"]);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most")
    );
    c.ok("server_ping", json!({})).await;
    c.close().await;
}

#[tokio::test]
async fn many_servers_start_at_once_on_one_new_database() {
    let env = Env::new();
    if crate::common::on_postgres() {
        // The harness made the database; nothing has created a table in it yet.
        let name = crate::common::pg::PgCluster::database_of(&env.location);
        let tables = crate::common::pg::PgCluster::shared().ok(
            name,
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
        );
        assert_eq!(tables, "0");
    } else {
        assert!(!env.db.exists());
    }
    let clients = futures_join_all((0..6).map(|_| env.serve(&[]))).await;
    for c in &clients {
        let h = c.ok("server_health", json!({})).await;
        assert_eq!(h["status"], "ok");
    }
    for c in clients {
        c.close().await;
    }
}

async fn futures_join_all<F: std::future::Future>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let handles: Vec<_> = futs.collect();
    let mut out = Vec::new();
    // Start them all before awaiting any: each `serve` spawns its process on first poll,
    // so poll them together.
    let mut pinned: Vec<_> = handles.into_iter().map(Box::pin).collect();
    let mut results: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in pinned.iter_mut().enumerate() {
            if results[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => results[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.extend(results.into_iter().map(|r| r.expect("ready")));
    out
}

#[test]
fn startup_fails_loudly_on_unknown_issue_or_unopenable_db() {
    let env = Env::new();
    let out = env.run(&["serve", "--issue-id", "NOPE-1"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "nothing but MCP on stdout");
    assert!(String::from_utf8_lossy(&out.stderr).contains("NOPE-1"));

    let dir_as_db = env.path().join("a-directory");
    std::fs::create_dir(&dir_as_db).unwrap();
    let out = std::process::Command::new(crate::common::bin())
        .args(["--db", dir_as_db.to_str().unwrap(), "serve"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("error"));

    let out = env.run(&["serve", "--agent-type", "wizard"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("wizard"));
}

fn spawn_raw(env: &Env) -> std::process::Child {
    env.cmd(&["serve"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// How long a process may take to exit before the test calls it a hang.
const HANG: std::time::Duration = std::time::Duration::from_secs(60);

/// Wait for `child` to exit; `None` (and the child killed) if it is still running after
/// [`HANG`]: that bound only catches a hang, how fast the exit is is not asserted.
fn wait_exit(child: &mut std::process::Child) -> Option<std::process::ExitStatus> {
    let pid = child.id().to_string();
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        s.spawn(move || tx.send(child.wait().unwrap()));
        let status = rx.recv_timeout(HANG).ok();
        if status.is_none() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid])
                .status();
        }
        status
    })
}

/// Send a request before `initialize` and read the error it gets: the server is up and
/// serving (its signal handlers are installed by the time it answers).
fn answers_before_initialize(child: &mut std::process::Child) {
    use std::io::{BufRead, BufReader, Write};
    let stdin = child.stdin.as_mut().unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":7,"method":"tools/list"}}"#).unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["id"], 7);
    assert!(reply["error"]["code"].is_i64(), "{reply}");
}

#[test]
fn exits_cleanly_when_stdin_closes_and_on_sigterm() {
    let env = Env::new();
    let mut child = spawn_raw(&env);
    // A request before initialize gets an error, not silence.
    answers_before_initialize(&mut child);
    drop(child.stdin.take());
    let status = wait_exit(&mut child);
    assert!(
        status.is_some_and(|s| s.success()),
        "no clean exit after stdin closed: {status:?}"
    );

    // SIGTERM with stdin still open (the stdin reader blocked in a read).
    let mut child = spawn_raw(&env);
    answers_before_initialize(&mut child);
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = wait_exit(&mut child);
    assert!(
        status.is_some_and(|s| s.success()),
        "no clean exit on SIGTERM: {status:?}"
    );
}

/// Run `tests/mcp_sdk/drive.py` (official MCP Python SDK) against `cairn serve`.
pub(crate) fn python_sdk(
    env: &Env,
    mode: &str,
    flags: &[&str],
    calls: serde_json::Value,
) -> serde_json::Value {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_sdk/drive.py");
    let out = crate::common::piped(
        std::process::Command::new("python3")
            .arg(script)
            .arg(crate::common::bin())
            // The driver runs `cairn --db DB serve FLAGS` (--cache-dir is global).
            .args(&env.db_args()[1..])
            .args(flags)
            .env("MCP_MODE", mode),
        calls.to_string().as_bytes(),
    );
    assert!(
        out.status.success(),
        "python MCP SDK driver failed (is `pip install mcp` done? scripts/setup.sh does it):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("driver prints JSON")
}

#[test]
fn official_python_sdk_discover_and_legacy_lifecycles() {
    let env = Env::new();
    let calls = json!([
        {"tool": "server_ping"},
        {"tool": "server_health", "arguments": {"verbose": true}},
        {"tool": "no_such_tool"},
    ]);
    for (mode, lifecycle) in [("auto", "discover"), ("legacy", "initialize")] {
        let out = python_sdk(&env, mode, &["--agent-type", "worker"], calls.clone());
        assert_eq!(out["lifecycle"], lifecycle);
        let tools: Vec<&str> = out["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert!(tools.contains(&"server_ping"));
        let c = out["calls"].as_array().unwrap();
        assert_eq!(c[0]["is_error"], false);
        assert_eq!(c[0]["structured"]["ok"], true);
        // Errors reach the agent through the SDK: the envelope is the text content, and
        // no structuredContent is there to fail the outputSchema.
        for e in &c[1..] {
            assert_eq!(e["is_error"], true);
            assert_eq!(e["structured"], serde_json::Value::Null, "{e}");
        }
        assert_eq!(c[1]["envelope"]["status"], "VALIDATION_FAILED");
        assert_eq!(c[1]["envelope"]["error"]["code"], "ERR_INVALID_INPUT");
        assert_eq!(error_fields(&c[1]["envelope"]), ["verbose"]);
        assert!(
            c[1]["envelope"]["help_prompt"]
                .as_str()
                .unwrap()
                .contains("server_health")
        );
        assert_eq!(error_fields(&c[2]["envelope"]), ["tool_name"]);
        assert!(
            c[2]["envelope"]["help_prompt"]
                .as_str()
                .unwrap()
                .contains("server_ping")
        );
    }
}

/// The snapshot of `tools/list` in schema dialect `dialect` (`portable` is the default
/// listing).
fn snapshot(dialect: &str) -> std::path::PathBuf {
    let name = match dialect {
        "portable" => "tools_list.json".to_string(),
        d => format!("tools_list.{d}.json"),
    };
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name)
}

const DIALECTS: [&str; 3] = ["portable", "openai-strict", "gemini"];

#[tokio::test]
async fn tools_list_matches_the_checked_in_snapshot() {
    for dialect in DIALECTS {
        let env = Env::new();
        let c = env.serve(&["--schema-dialect", dialect]).await;
        let tools = c.service.list_all_tools().await.unwrap();
        c.close().await;
        let actual = serde_json::to_string_pretty(&tools).unwrap() + "\n";
        let path = snapshot(dialect);
        if std::env::var_os("CAIRN_UPDATE_SNAPSHOTS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &actual).unwrap();
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            expected == actual,
            "tools/list ({dialect}) changed; review and re-run with CAIRN_UPDATE_SNAPSHOTS=1 to accept:\n{}",
            first_difference(&expected, &actual)
        );
    }
}

/// A client of the `openai-strict` listing sends every property, `null` for what it
/// leaves out: each call below is what such a client sends for the tool's required
/// arguments, every other property of its listed schema `null`.
#[tokio::test]
async fn an_openai_strict_client_sends_null_for_what_it_leaves_out() {
    let env = Env::new();
    env.project("shop", None);
    let issue = env.issue("shop", "first");
    let c = env
        .serve(&["--schema-dialect", "openai-strict", "--issue-id", &issue])
        .await;
    let tools = c.service.list_all_tools().await.unwrap();
    let strict_call = |name: &str, given: Value| {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        let mut args = given.as_object().unwrap().clone();
        for p in tool.input_schema["required"].as_array().unwrap() {
            args.entry(p.as_str().unwrap()).or_insert(Value::Null);
        }
        assert_eq!(
            args.len(),
            tool.input_schema["properties"].as_object().unwrap().len()
        );
        Value::Object(args)
    };
    let pattern = "Run the migrations before seeding the test database, never after";
    let added = c
        .ok(
            "add_learning",
            strict_call("add_learning", json!({"pattern": pattern})),
        )
        .await;
    let found = c
        .ok(
            "search_learnings",
            strict_call("search_learnings", json!({"query": "seeding migrations"})),
        )
        .await;
    assert_eq!(found["results"][0]["id"], added["id"], "{found}");
    // A null where the full schema requires a value is still refused, naming the field.
    let refused = c
        .err(
            "search_learnings",
            strict_call("search_learnings", json!({})),
        )
        .await;
    assert_eq!(refused["error"]["code"], "ERR_INVALID_INPUT", "{refused}");
    c.close().await;
}

/// The listed input schemas (the snapshots, kept equal to `tools/list` above) break none
/// of the rules the strict function-calling dialects document, by the checker of
/// `tests/dialect_check.py`: the default listing none of the rules they share, each
/// dialect's listing none of its own; its self-test first proves it catches each rule.
#[test]
fn listed_input_schemas_pass_the_dialect_checker() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let checker = dir.join("tests/dialect_check.py");
    let mut runs = vec![vec!["--self-test".to_string()]];
    for dialect in DIALECTS {
        runs.push(vec![
            snapshot(dialect).display().to_string(),
            "--dialect".into(),
            dialect.into(),
        ]);
    }
    for args in runs {
        let out = std::process::Command::new("python3")
            .arg(&checker)
            .args(&args)
            .output()
            .expect("python3");
        assert!(
            out.status.success(),
            "dialect_check.py {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn first_difference(a: &str, b: &str) -> String {
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}:\n- {x}\n+ {y}", i + 1);
        }
    }
    format!(
        "lengths differ: {} vs {} lines",
        a.lines().count(),
        b.lines().count()
    )
}

/// A raw stdio session with `cairn serve`: one JSON-RPC line out, one line back.
struct Raw {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Raw {
    fn start(env: &Env) -> Raw {
        let mut child = spawn_raw(env);
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut raw = Raw { child, out };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}});
        let reply = raw.send(init.to_string().as_bytes());
        assert_eq!(reply["result"]["protocolVersion"], "2025-11-25", "{reply}");
        raw.write(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        raw
    }

    fn write(&mut self, line: &[u8]) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, line: &[u8]) -> serde_json::Value {
        use std::io::BufRead;
        self.write(line);
        let mut reply = String::new();
        self.out.read_line(&mut reply).unwrap();
        serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply:?}"))
    }
}

#[test]
fn garbage_on_the_wire_is_answered_and_the_server_keeps_serving() {
    let env = Env::new();
    let mut raw = Raw::start(&env);
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":"{}"}}}}"#,
        "a".repeat(cairn::mcp::wire::MAX_LINE_BYTES)
    );
    let garbage: Vec<(&str, Vec<u8>)> =
        vec![
        ("invalid JSON", b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ".to_vec()),
        (
            "invalid UTF-8",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"s\":\"\xc3\x28\"}}"
                .to_vec(),
        ),
        (
            "lone surrogate",
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":"\udc00"}}"#.to_vec(),
        ),
        (
            "1e400",
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":1e400}}"#.to_vec(),
        ),
        ("too deep", deep.into_bytes()),
        ("over-long line", long.into_bytes()),
    ];
    for (i, (case, line)) in garbage.iter().enumerate() {
        let reply = raw.send(line);
        assert_eq!(reply["jsonrpc"], "2.0", "{case}: {reply}");
        assert_eq!(reply["error"]["code"], -32700, "{case}: {reply}");
        assert_eq!(reply["id"], serde_json::Value::Null, "{case}: {reply}");
        // Still serving: a real request right after each case is answered.
        let id = 100 + i as i64;
        let pong = raw.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
                .to_string()
                .as_bytes(),
        );
        assert_eq!(pong["id"], id, "{case}: {pong}");
        assert!(pong.get("result").is_some(), "{case}: {pong}");
    }
    for args in [json!([1, 2]), json!("text"), json!(42), json!(true)] {
        let call = json!({"jsonrpc": "2.0", "id": "c1", "method": "tools/call",
                          "params": {"name": "server_ping", "arguments": args}});
        let reply = raw.send(call.to_string().as_bytes());
        assert_eq!(reply["error"]["code"], -32602, "{args}: {reply}");
        assert_eq!(reply["id"], "c1", "{reply}");
    }
    // A call without a tool name: invalid params, not "method not found".
    let nameless = json!({"jsonrpc": "2.0", "id": "c2", "method": "tools/call",
                          "params": {"arguments": {}}});
    let reply = raw.send(nameless.to_string().as_bytes());
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert_eq!(reply["id"], "c2", "{reply}");
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                      "params": {"name": "server_ping", "arguments": {}}});
    let reply = raw.send(call.to_string().as_bytes());
    assert_eq!(reply["id"], 9);
    assert_eq!(reply["result"]["structuredContent"]["ok"], true, "{reply}");
    drop(raw.child.stdin.take());
    let status = wait_exit(&mut raw.child);
    assert!(status.is_some_and(|s| s.success()));
}

/// The TypeScript SDK's fixture: project `colibri` with a repository, one issue.
fn ts_fixture() -> (Env, String) {
    let env = Env::new();
    let repo = env.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    env.project("colibri", Some(&repo));
    let issue = env.issue("colibri", "TS SDK session");
    (env, issue)
}

#[tokio::test]
async fn official_typescript_sdk_sees_every_result_and_every_error() {
    let (env, issue) = ts_fixture();
    let mut calls = Vec::new();
    let tools = cairn::mcp::registry::all_tools();
    for t in tools {
        calls.push(json!({"tool": t.name, "arguments": t.example}));
        let mut invalid = t.example.clone();
        invalid["not_a_field"] = json!(1);
        calls.push(json!({"tool": t.name, "arguments": invalid}));
    }
    let bin = crate::common::bin();
    // The driver runs `cairn --db DB serve FLAGS` (--cache-dir is global).
    let db = env.db_args();
    let mut args = vec![bin.as_os_str()];
    args.extend(db[1..].iter().map(|a| a.as_os_str()));
    args.extend([std::ffi::OsStr::new("--issue-id"), issue.as_ref()]);
    let out = node(
        "drive.mjs",
        &args,
        serde_json::to_vec(&calls).unwrap().as_slice(),
    );
    assert!(
        out.status.success(),
        "TypeScript SDK driver failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).expect("driver JSON");
    assert_eq!(seen["server"], "cairn");
    assert_eq!(seen["tools"].as_array().unwrap().len(), tools.len());
    // ajv warns once per non-standard keyword or format it meets.
    assert_eq!(seen["warnings"], json!([]), "the SDK printed warnings");
    let results = seen["calls"].as_array().unwrap();
    assert_eq!(results.len(), calls.len());
    // What the same calls give in this process, on a twin of the fixture: each example
    // the server answers with a success must reach the SDK as that success (validated by
    // ajv), and each error with its code.
    let (twin, twin_issue) = ts_fixture();
    assert_eq!(twin_issue, issue);
    let direct = twin.serve_local(&["--issue-id", &twin_issue]).await;
    let mut expected = Vec::new();
    for call in &calls {
        let r = direct
            .call(call["tool"].as_str().unwrap(), call["arguments"].clone())
            .await;
        expected.push(match r.is_error {
            Some(true) => crate::common::envelope_of(&r)["error"]["code"].clone(),
            _ => json!("ok"),
        });
    }
    direct.close().await;
    let mut successes = 0;
    for (i, r) in results.iter().enumerate() {
        let got = match r["is_error"].as_bool() {
            Some(false) => json!("ok"),
            _ => r["envelope"]["error"]["code"].clone(),
        };
        assert_eq!(got, expected[i], "{}: {r}", r["tool"]);
        let tool = r["tool"].as_str().unwrap();
        assert_eq!(
            r["threw"],
            serde_json::Value::Null,
            "{tool}: the SDK threw: {r}"
        );
        if i % 2 == 0 {
            // The spec example: a success (validated by the SDK) or an error it shows.
            if r["is_error"] == false {
                successes += 1;
            } else {
                assert!(r["envelope"]["error"]["code"].is_string(), "{tool}: {r}");
                assert!(r["envelope"]["error"]["message"].is_string(), "{tool}: {r}");
            }
        } else {
            // The invalid call: code, field and help prompt reach the caller.
            assert_eq!(r["is_error"], true, "{tool}: {r}");
            assert_eq!(r["structured"], serde_json::Value::Null, "{tool}: {r}");
            let e = &r["envelope"];
            assert_eq!(e["status"], "VALIDATION_FAILED", "{tool}: {r}");
            assert_eq!(e["error"]["code"], "ERR_INVALID_INPUT", "{tool}: {r}");
            assert_eq!(error_fields(e), ["not_a_field"], "{tool}: {r}");
            let help = e["help_prompt"].as_str().unwrap_or_default();
            assert!(
                help.contains(tool) && help.contains("Valid example"),
                "{tool}: {help}"
            );
        }
    }
    // Every example that succeeds here succeeded through the SDK (checked call by call
    // above): 19 of 41 on this fixture; the others answer an error the fixture explains
    // (an example names an issue, task or session it does not have), the same code both
    // ways.
    let wanted = expected.iter().step_by(2).filter(|e| **e == "ok").count();
    assert_eq!(successes, wanted);
    eprintln!(
        "{successes} of {} examples succeeded through the TypeScript SDK",
        tools.len()
    );
}

#[test]
fn mcp_inspector_cli_lists_calls_and_shows_an_error() {
    let env = Env::new();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_ts");
    let inspector =
        dir.join("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    assert!(
        inspector.is_file(),
        "run scripts/setup.sh (npm ci in tests/mcp_ts)"
    );
    let bin = crate::common::bin();
    let run = |extra: &[&str]| {
        let out = std::process::Command::new("node")
            .arg(&inspector)
            .arg("--cli")
            .arg("-e")
            .arg("CAIRN_LOG=warn")
            .args(extra)
            .arg("--")
            .arg(&bin)
            .args(env.db_args())
            .arg("serve")
            .current_dir(&dir)
            .env("MCP_CATALOG_PATH", env.path().join("catalog.json"))
            .output()
            .expect("node");
        (
            out.status,
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (status, stdout, stderr) = run(&["--method", "tools/list", "--strict"]);
    assert!(
        status.success(),
        "tools/list --strict: {status}\n{stdout}\n{stderr}"
    );
    let listed: serde_json::Value = serde_json::from_str(&stdout).expect("tools/list JSON");
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names.len(),
        cairn::mcp::registry::all_tools().len(),
        "{names:?}"
    );

    let (status, stdout, stderr) = run(&["--method", "tools/call", "--tool-name", "server_ping"]);
    assert!(
        status.success(),
        "server_ping: {status}\n{stdout}\n{stderr}"
    );
    let ping: serde_json::Value = serde_json::from_str(&stdout).expect("call JSON");
    assert_eq!(ping["structuredContent"]["ok"], true, "{ping}");

    let (_, stdout, stderr) = run(&[
        "--method",
        "tools/call",
        "--tool-name",
        "server_health",
        "--tool-arg",
        "verbose=true",
    ]);
    let shown = format!("{stdout}\n{stderr}");
    let failed: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("the Inspector did not show the error ({e}):\n{shown}"));
    assert_eq!(failed["isError"], true, "{shown}");
    let text = failed["content"][0]["text"].as_str().unwrap();
    let envelope: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(envelope["error"]["code"], "ERR_INVALID_INPUT");
    assert!(
        envelope["help_prompt"]
            .as_str()
            .unwrap()
            .contains("server_health")
    );
}

// ------------------------------------------------ Colibri scope, person-only moves, T-N

/// The expected matrix of `tests/fixtures/tool-scope.md`: the spec's table verbatim, then
/// Cairn's decisions (a row naming the tool whose row it takes, or `all`).
fn expected_scope_matrix() -> std::collections::BTreeMap<String, Vec<String>> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tool-scope.md");
    let text = std::fs::read_to_string(&path).expect("tests/fixtures/tool-scope.md");
    let (spec, decisions) = text
        .split_once("## Cairn's decisions")
        .expect("a decisions section");
    let cells =
        |line: &str| -> Vec<String> { line.split('|').map(|c| c.trim().to_string()).collect() };
    let is_row = |line: &&str| {
        line.split('|').next().is_some_and(|c| {
            let c = c.trim();
            !c.is_empty() && c.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_')
        })
    };
    let mut expected = std::collections::BTreeMap::new();
    let mut rows = 0;
    for line in spec.lines().filter(is_row) {
        let c = cells(line);
        assert_eq!(c.len(), 9, "a spec row has a cell per profile: {line}");
        let profiles: Vec<String> = cairn::access::scope::PROFILES
            .iter()
            .zip(&c[1..8])
            .filter(|(_, mark)| match mark.as_str() {
                "✅" | "⚠️" => true,
                "—" => false,
                other => panic!("unknown mark {other:?} in {line}"),
            })
            .map(|(p, _)| p.to_string())
            .collect();
        rows += 1;
        if let Some(before) = expected.insert(c[0].clone(), profiles.clone()) {
            assert_eq!(before, profiles, "the spec's two rows of {} differ", c[0]);
        }
    }
    assert_eq!(rows, 29, "the spec's table has 29 rows (two repeated)");
    for line in decisions.lines().filter(is_row) {
        let c = cells(line);
        let listed: Vec<String> = c[1].split(',').map(|p| p.trim().to_string()).collect();
        let profiles = if c[1] == "all" {
            cairn::access::scope::PROFILES.map(String::from).to_vec()
        } else if listed
            .iter()
            .all(|p| cairn::access::scope::PROFILES.contains(&p.as_str()))
        {
            listed
        } else {
            expected
                .get(&c[1])
                .unwrap_or_else(|| panic!("{} takes the row of {}, not in the spec", c[0], c[1]))
                .clone()
        };
        assert!(
            expected.insert(c[0].clone(), profiles).is_none(),
            "{} has a row in the spec and a decision",
            c[0]
        );
    }
    expected
}

#[test]
fn the_scope_matrix_derived_from_the_registry_is_the_spec_table() {
    let expected = expected_scope_matrix();
    let matrix = cairn::mcp::registry::scope_matrix();
    let derived: std::collections::BTreeMap<String, Vec<String>> = matrix
        .tools()
        .map(|t| {
            let profiles = matrix.profiles_of(t).unwrap();
            (
                t.to_string(),
                profiles.iter().map(|p| p.name().to_string()).collect(),
            )
        })
        .collect();
    // Every registered tool has a row, with the row's profiles.
    for (tool, profiles) in &derived {
        assert_eq!(
            expected.get(tool),
            Some(profiles),
            "{tool}: declared profiles differ from tests/fixtures/tool-scope.md"
        );
    }
    // Every row is a registered tool.
    for tool in expected.keys() {
        assert!(derived.contains_key(tool), "{tool} has a row but no tool");
    }
    assert_eq!(
        derived.len(),
        matrix.tools().count(),
        "a tool registered twice"
    );
}

#[tokio::test]
async fn agents_cannot_make_person_only_moves_or_touch_other_issues_in_either_vocabulary() {
    let env = Env::new();
    env.project("sym", None);
    let mine = env.issue("sym", "Mine");
    let other = env.issue("sym", "Someone else's");
    env.ok(&["issue", "status", &mine, "in_progress"]);
    env.ok(&["issue", "status", &other, "in_progress"]);
    let w = env
        .serve_local(&["--issue-id", &mine, "--agent-type", "worker"])
        .await;
    // Colibri: done and cancelled are a person's call.
    for s in ["done", "cancelled"] {
        let e = w
            .err_code(
                "task_update",
                json!({"task_id": mine, "status": s}),
                "PERMISSION_DENIED",
            )
            .await;
        assert_eq!(e["status"], "PERMISSION_DENIED");
    }
    // Symphony: done/cancelled are not even in update_issue_status's schema.
    for s in ["done", "cancelled", "in_progress"] {
        let e = w.err("update_issue_status", json!({"status": s})).await;
        assert_eq!(error_fields(&e), ["status"], "{s}");
    }
    // Another issue: refused, nothing changed.
    for (tool, args) in [
        ("task_update", json!({"task_id": other, "status": "review"})),
        ("task_update", json!({"task_id": other, "progress": 10})),
        (
            "thought_record",
            json!({"task_id": other, "type": "decision", "content": "sneaky"}),
        ),
    ] {
        let e = w.err_code(tool, args, "PERMISSION_DENIED").await;
        assert!(
            e["error"]["message"].as_str().unwrap().contains(&mine),
            "{e}"
        );
    }
    let o = w.ok("task_get", json!({"task_id": other})).await;
    assert_eq!(
        (o["status"].as_str(), o["progress"].as_u64()),
        (Some("in_progress"), Some(0))
    );
    // The worker's own move: in_progress → review, in both vocabularies' rules.
    let r = w
        .ok(
            "task_update",
            json!({"task_id": mine, "status": "review", "progress": 100}),
        )
        .await;
    assert_eq!(r["previous_status"], "in_progress");
    assert_eq!(
        r["warnings"],
        json!(["Progress set to 100% but status != 'done'"])
    );
    let e = w
        .err_code(
            "task_update",
            json!({"task_id": mine, "status": "backlog"}),
            "ERR_INVALID_TRANSITION",
        )
        .await;
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("only from in_progress")
    );
    w.close().await;
    // A judge finalizes the audit sessions of its own issue only, with or without
    // task_id; the orchestrator's server (no profile) any.
    let orchestrator = env.serve_local(&[]).await;
    let mut sessions = Vec::new();
    for issue in [&mine, &other] {
        orchestrator
            .ok(
                "thought_record",
                json!({"task_id": issue, "type": "decision", "content": "chosen"}),
            )
            .await;
        let s = orchestrator
            .ok(
                "audit_session_start",
                json!({"task_id": issue, "auditor_id": "a"}),
            )
            .await;
        sessions.push(s["session_id"].as_str().unwrap().to_string());
    }
    let judge = env
        .serve_local(&["--issue-id", &mine, "--agent-type", "judge"])
        .await;
    judge
        .err_code(
            "merkle_finalize",
            json!({"session_id": sessions[1]}),
            "PERMISSION_DENIED",
        )
        .await;
    judge
        .err_code(
            "merkle_finalize",
            json!({"session_id": sessions[1], "task_id": other}),
            "PERMISSION_DENIED",
        )
        .await;
    let root = orchestrator
        .ok("merkle_root", json!({"session_id": sessions[1]}))
        .await;
    assert_eq!(root["is_finalized"], false, "{root}");
    let own = judge
        .ok("merkle_finalize", json!({"session_id": sessions[0]}))
        .await;
    assert_eq!(own["leaf_count"], 1, "{own}");
    judge.close().await;
    orchestrator
        .ok("merkle_finalize", json!({"session_id": sessions[1]}))
        .await;
    orchestrator.close().await;
    // An intake agent cannot touch tasks at all; the person can finish from the CLI.
    let i = env
        .serve_local(&["--agent-type", "intake", "--project-id", "sym"])
        .await;
    i.err_code(
        "task_update",
        json!({"task_id": other, "status": "cancelled"}),
        "PERMISSION_DENIED",
    )
    .await;
    i.close().await;
    env.ok(&["issue", "status", &mine, "done"]);
    let shown = env.json(&["issue", "show", &other]);
    assert_eq!(shown["status"], "in_progress");
}

#[tokio::test]
async fn a_parent_with_an_open_sub_task_stays_blocked_in_both_vocabularies() {
    let env = Env::new();
    env.project("sym", None);
    let parent = env.issue("sym", "Parent");
    env.ok(&["issue", "status", &parent, "in_progress"]);
    let planner = env
        .serve_local(&["--issue-id", &parent, "--agent-type", "planner"])
        .await;
    let sub = planner
        .ok("create_subtask", json!({"title": "Child"}))
        .await;
    let child = sub["subtask"]["identifier"].as_str().unwrap().to_string();
    for to in ["todo", "in_progress"] {
        planner
            .err_code(
                "task_update",
                json!({"task_id": parent, "status": to}),
                "ERR_INVALID_TRANSITION",
            )
            .await;
    }
    planner.close().await;
    // Not even the orchestrator's server (no profile) unblocks it while the child is open.
    let orchestrator = env.serve_local(&["--project-id", "sym"]).await;
    let e = orchestrator
        .err_code(
            "task_update",
            json!({"task_id": parent, "status": "todo"}),
            "ERR_INVALID_TRANSITION",
        )
        .await;
    assert!(
        e["error"]["message"].as_str().unwrap().contains(&child),
        "{e}"
    );
    for s in ["in_progress", "review", "done"] {
        orchestrator
            .ok("task_update", json!({"task_id": child, "status": s}))
            .await;
    }
    let p = orchestrator
        .ok("task_get", json!({"task_id": parent}))
        .await;
    assert_eq!(p["status"], "in_progress");
    orchestrator.close().await;
}

#[tokio::test]
async fn t_n_names_a_task_of_the_bound_project_only() {
    let env = Env::new();
    env.project("sym", None);
    env.project("oth", None);
    assert_eq!(env.issue("sym", "Sym one"), "SYM-1");
    assert_eq!(env.issue("oth", "Other one"), "OTH-1");
    let c = env.serve_local(&["--project-id", "oth"]).await;
    let r = c
        .ok(
            "task_update",
            json!({"task_id": "T-0001", "status": "blocked", "blocked_reason": "x"}),
        )
        .await;
    assert_eq!(r["task_id"], "OTH-1");
    assert_eq!(env.json(&["issue", "show", "SYM-1"])["status"], "todo");
    let e = c
        .err_code("task_get", json!({"task_id": "T-2"}), "ERR_TASK_NOT_FOUND")
        .await;
    assert!(
        e["error"]["message"].as_str().unwrap().contains("OTH-2"),
        "{e}"
    );
    c.close().await;
    // No bound project: refused, with the identifier form to use instead.
    let c = env.serve_local(&[]).await;
    let e = c.err("task_get", json!({"task_id": "T-1"})).await;
    assert_eq!(error_fields(&e), ["task_id"]);
    assert!(
        e["error"]["message"].as_str().unwrap().contains("PFX-N"),
        "{e}"
    );
    c.close().await;
    // A project whose prefix is T makes T-1 ambiguous from another project: refused.
    env.ok(&[
        "project", "create", "--slug", "tee", "--name", "tee", "--prefix", "T",
    ]);
    assert_eq!(env.issue("tee", "Tee one"), "T-1");
    let c = env.serve_local(&["--project-id", "oth"]).await;
    let e = c.err("task_get", json!({"task_id": "T-1"})).await;
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.contains("OTH-1") && msg.contains("T-1"), "{msg}");
    c.close().await;
}

// ------------------------------------------------------------ the spec's own examples

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// A project with a path and an issue in progress; no `--worktree-path` anywhere.
fn project_without_worktree() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    let repo = env.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    env.project("sym", Some(&repo));
    assert_eq!(env.issue("sym", "Token budgets"), "SYM-1");
    env.ok(&["issue", "status", "SYM-1", "in_progress"]);
    (env, std::fs::canonicalize(repo).unwrap())
}

#[tokio::test]
async fn spec_examples_of_complete_phase_and_judging_work_without_a_worktree() {
    let (env, repo) = project_without_worktree();
    let art = "docs/tickets/SYM-1/design.md";
    let text = "# Design\n\nToken counting middleware with three budget tiers, applied per \
                request before the model client, with a per-project override.\n";
    std::fs::create_dir_all(repo.join("docs/tickets/SYM-1")).unwrap();
    std::fs::write(repo.join(art), text).unwrap();
    let hash = sha256_hex(text.as_bytes());
    let project_path = repo.to_str().unwrap();
    let w = env
        .serve_local(&["--issue-id", "SYM-1", "--agent-type", "researcher"])
        .await;
    // The spec's example, adapted only in ids, path and hash.
    let claim = w
        .ok(
            "complete_phase",
            json!({
                "completed_phase": "architecture",
                "contract_version": 1,
                "artifact_path": art,
                "artifact_hash": hash,
                "summary": "Design proposes token counting middleware with 3 budget tiers",
                "recommended_next_phase": "grooming",
                "project_path": project_path
            }),
        )
        .await;
    assert_eq!(claim["worktree"]["verified"], false, "{claim}");
    assert_eq!(claim["worktree"]["path"], project_path);
    assert!(
        claim["message"]
            .as_str()
            .unwrap()
            .contains("No worktree was verified"),
        "{claim}"
    );
    w.close().await;
    let j = env
        .serve_local(&["--issue-id", "SYM-1", "--agent-type", "judge"])
        .await;
    j.ok(
        "approve_phase",
        json!({"phase": "architecture", "artifact_hash": hash,
               "reason": "Design is coherent, all required sections present"}),
    )
    .await;
    // A ready claim without artifact_hash (the spec allows it) can be judged.
    let worker = env
        .serve_local(&["--issue-id", "SYM-1", "--agent-type", "worker"])
        .await;
    worker
        .ok(
            "complete_phase",
            json!({"completed_phase": "ready", "summary": "Implemented and tested",
                   "project_path": project_path}),
        )
        .await;
    worker.close().await;
    // It has no artifact hash to check a verdict against, so the verdict names the claim
    // by its record hash; any other 64-hex hash is refused, saying what to send.
    let rejection = |hash: &str| {
        json!({"phase": "ready", "artifact_hash": hash,
               "reason": "Missing tests for the override",
               "fix_instructions": "Add a test for the per-project override"})
    };
    let e = j
        .err_code("reject_phase", rejection(&"ab".repeat(32)), "ERR_CONFLICT")
        .await;
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("record hash"),
        "{e}"
    );
    let issue = j.ok("get_issue", json!({})).await;
    let claim = issue["findings"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|f| f["category"] == "phase_completion")
        .unwrap()
        .clone();
    let reviewed = claim["hash"].as_str().unwrap().to_string();
    let v = j.ok("reject_phase", rejection(&reviewed)).await;
    assert_eq!(v["verdict"], "rejected");
    assert_eq!(v["artifact_hash"], reviewed);
    assert_eq!(v["claim_id"], claim["id"]);
    j.close().await;
}

#[tokio::test]
async fn spec_example_of_create_pr_moves_in_progress_to_review_only() {
    let (env, _repo) = project_without_worktree();
    const DIFF: &str = "diff --git a/server/utils/budget.ts b/server/utils/budget.ts\n\
                        --- a/server/utils/budget.ts\n+++ b/server/utils/budget.ts\n\
                        @@ -1 +1,2 @@\n line\n+added\n";
    let w = env
        .serve_local(&["--issue-id", "SYM-1", "--agent-type", "worker"])
        .await;
    let pr = w
        .ok(
            "create_pr",
            json!({"diff": DIFF, "branch_name": "symphony/SYM-1", "base_branch": "main"}),
        )
        .await;
    assert_eq!(pr["worktree"]["verified"], false, "{pr}");
    assert_eq!(env.json(&["issue", "show", "SYM-1"])["status"], "review");
    // The spec's update_issue_status example, from in_progress.
    env.ok(&["issue", "status", "SYM-1", "todo"]);
    let e = w
        .err_code(
            "create_pr",
            json!({"diff": DIFF, "branch_name": "symphony/SYM-1", "base_branch": "main"}),
            "ERR_INVALID_TRANSITION",
        )
        .await;
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in_progress"),
        "{e}"
    );
    assert_eq!(env.json(&["issue", "show", "SYM-1"])["status"], "todo");
    env.ok(&["issue", "status", "SYM-1", "in_progress"]);
    let r = w
        .ok(
            "update_issue_status",
            json!({ "status": "review", "reason": "Implementation complete, all tests pass" }),
        )
        .await;
    assert_eq!(
        (r["from"].as_str(), r["to"].as_str()),
        (Some("in_progress"), Some("review"))
    );
    w.close().await;
}

#[tokio::test]
async fn numbers_as_the_spec_types_them() {
    let env = Env::new();
    env.project("sym", None);
    let issue = env.issue("sym", "Numbers");
    let c = env.serve_local(&["--issue-id", &issue]).await;
    // The spec's search_learnings example, and a fractional threshold (a number).
    c.ok(
        "search_learnings",
        json!({ "query": "auto-import", "min_quality_score": 40 }),
    )
    .await;
    c.ok(
        "search_learnings",
        json!({ "query": "auto-import", "min_quality_score": 40.5 }),
    )
    .await;
    // An integer written as 2.0 is an integer; 2.5 is refused on its own field.
    let sub = c
        .ok("create_subtask", json!({"title": "Child", "priority": 2.0}))
        .await;
    assert_eq!(sub["subtask"]["priority"], 2, "{sub}");
    let e = c
        .err("create_subtask", json!({"title": "Child", "priority": 2.5}))
        .await;
    assert_eq!(error_fields(&e), ["priority"]);
    let page = c
        .ok("task_list", json!({"project": "sym", "limit": 1.0}))
        .await;
    assert_eq!(page["tasks"].as_array().unwrap().len(), 1, "{page}");
    c.close().await;
}
