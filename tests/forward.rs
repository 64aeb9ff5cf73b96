//! stdio forwarding (issue 11): a `cairn serve` whose database has a running `cairn
//! daemon` forwards its tool calls to it under a token bound to its own flags, falls
//! back to serving alone when the daemon is killed, and stays correct beside standalone
//! servers on one database.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use crate::common::pg::PgCluster;
use crate::common::{Client, Env, body, reading};
use crate::daemon::Daemon;

/// A generous bound that only catches a hang.
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

fn setup(env: &Env) -> String {
    env.project("web", None);
    env.issue("web", "Forwarded work")
}

fn served(d: &Daemon) -> (u64, u64) {
    let h = d.health();
    (
        h["sessions_served"].as_u64().unwrap(),
        h["requests_served"].as_u64().unwrap(),
    )
}

fn pattern(what: &str, n: usize) -> String {
    format!(
        "Forwarding {what} note {n}: service ports must come from the environment, never from code"
    )
}

async fn add(c: &Client, what: &str, n: usize) -> String {
    // Each write its own row: the patterns say the same under other names.
    c.ok(
        "add_learning",
        json!({"pattern": pattern(what, n), "merge": false}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The ids of a search's results, sorted.
fn sorted_ids(results: &Value) -> Vec<String> {
    let mut ids: Vec<String> = reading(results)
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// The learnings a search finds.
async fn found(c: &Client) -> Vec<String> {
    let q = json!({"query": "forwarding service ports", "limit": 100});
    sorted_ids(&c.ok("search_learnings", q).await)
}

/// The same through `cairn learnings search` (a new process).
fn found_by_cli(env: &Env) -> Vec<String> {
    sorted_ids(&env.json(&[
        "learnings",
        "search",
        "forwarding service ports",
        "--limit",
        "100",
    ]))
}

fn tokens(env: &Env) -> Vec<Value> {
    env.json(&["session", "list"]).as_array().unwrap().clone()
}

#[tokio::test]
async fn serve_forwards_to_the_daemon_of_its_database() {
    let env = Env::new();
    let issue = setup(&env);
    let standalone_tools = {
        let c = env
            .serve(&[
                "--issue-id",
                &issue,
                "--agent-type",
                "worker",
                "--no-daemon",
            ])
            .await;
        let t = c.tool_names().await;
        c.close().await;
        t
    };
    let outside = {
        let c = env.serve(&["--issue-id", &issue, "--no-daemon"]).await;
        let all = c.tool_names().await;
        c.close().await;
        all.into_iter()
            .find(|t| !standalone_tools.contains(t))
            .expect("a tool outside the worker profile")
    };
    let d = Daemon::start(&env, &[], &[]);
    let (sessions, requests) = served(&d);
    let c = env
        .serve(&["--issue-id", &issue, "--agent-type", "worker"])
        .await;
    // The same tools as alone (the worker profile), answered here.
    assert_eq!(c.tool_names().await, standalone_tools);
    let id = add(&c, "daemon", 0).await;
    assert_eq!(found(&c).await, std::slice::from_ref(&id));
    // The daemon served them: one more session, at least the two calls.
    let (s2, r2) = served(&d);
    assert_eq!(s2, sessions + 1);
    assert!(r2 >= requests + 2, "{requests} -> {r2}");
    // Under a token bound to the server's flags.
    let active: Vec<Value> = tokens(&env)
        .into_iter()
        .filter(|t| t["state"] == "active")
        .collect();
    assert_eq!(active.len(), 1, "{active:?}");
    assert_eq!(active[0]["issue"], issue.as_str());
    assert_eq!(active[0]["agent_type"], "worker");
    // The binding holds: a tool outside the worker profile is refused.
    c.err_code(&outside, json!({}), "PERMISSION_DENIED").await;
    c.close().await;
}

#[test]
fn a_forwarding_server_writes_only_mcp_to_stdout_and_revokes_its_token_on_exit() {
    let env = Env::new();
    let issue = setup(&env);
    let d = Daemon::start(&env, &[], &[]);
    let mut child = env
        .cmd(&["serve", "--issue-id", &issue])
        .env("CAIRN_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "add_learning", "arguments": {"pattern": pattern("raw", 0)}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "search_learnings", "arguments": {"query": "forwarding service ports"}}}),
    ];
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut replies = Vec::new();
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
        stdin.flush().unwrap();
        if l.get("id").is_some() {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"));
            assert_eq!(v["jsonrpc"], "2.0", "{v}");
            replies.push(v);
        }
    }
    assert_eq!(replies[1]["result"]["isError"], false, "{}", replies[1]);
    assert_eq!(
        replies[2]["result"]["structuredContent"]["count"], 1,
        "{}",
        replies[2]
    );
    assert_eq!(served(&d).0, 1, "the calls did not go through the daemon");
    assert_eq!(tokens(&env)[0]["state"], "active");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert_eq!(rest, "", "stdout after the session: {rest:?}");
    let t = tokens(&env);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0]["state"], "revoked", "{t:?}");
}

#[tokio::test]
async fn serve_falls_back_to_serving_alone_when_the_daemon_is_killed() {
    let env = Env::new();
    let issue = setup(&env);
    let mut d = Daemon::start(&env, &[], &[]);
    let c = env.serve(&["--issue-id", &issue]).await;
    let first = add(&c, "before", 0).await;
    assert_eq!(served(&d).0, 1);
    d.child.kill().unwrap(); // SIGKILL
    d.child.wait().unwrap();
    // Reads, then writes: answered locally, nothing lost, the agent sees no error.
    assert_eq!(found(&c).await, std::slice::from_ref(&first));
    let second = add(&c, "after", 1).await;
    let mut want = vec![first, second];
    want.sort();
    assert_eq!(found(&c).await, want);
    c.ok("list_issues", json!({})).await;
    c.close().await;
    assert_eq!(found_by_cli(&env), want);
}

#[tokio::test]
async fn standalone_and_forwarding_servers_stay_correct_together_on_one_database() {
    let env = Env::new();
    let issue = setup(&env);
    let other = env.issue("web", "Standalone work");
    let d = Daemon::start(&env, &[], &[]);
    let forwarded = env.serve(&["--issue-id", &issue]).await;
    let alone = env.serve(&["--issue-id", &other, "--no-daemon"]).await;
    let mut ids = Vec::new();
    for n in 0..6 {
        ids.push(add(&forwarded, "forwarded", n).await);
        let (_, before) = served(&d);
        ids.push(add(&alone, "alone", n).await);
        // The standalone server never reaches the daemon (the health call itself is
        // not counted as an MCP request).
        assert_eq!(served(&d).1, before);
    }
    ids.sort();
    for c in [&forwarded, &alone] {
        assert_eq!(found(c).await, ids);
    }
    // Each learning carries its own server's binding.
    let issues: Vec<String> = reading(
        &forwarded
            .ok(
                "search_learnings",
                json!({"query": "forwarding service ports", "limit": 100}),
            )
            .await,
    )
    .iter()
    .map(|h| {
        format!(
            "{}:{}",
            h["pattern"].as_str().unwrap().split(' ').nth(1).unwrap(),
            h["issue"].as_str().unwrap()
        )
    })
    .collect();
    for i in &issues {
        let want = if i.starts_with("forwarded") {
            &issue
        } else {
            &other
        };
        assert!(i.ends_with(want.as_str()), "{i}");
    }
    forwarded.close().await;
    alone.close().await;
    assert_eq!(found_by_cli(&env), ids);
}

#[tokio::test]
async fn killing_the_daemon_during_writes_loses_no_acknowledged_write() {
    let env = Env::new();
    let issue = setup(&env);
    let mut d = Daemon::start(&env, &[], &[]);
    let pid = d.child.id();
    let c = env.serve(&["--issue-id", &issue]).await;
    let mut killer = None;
    let mut acked = Vec::new();
    let mut unknown = 0;
    for n in 0..60 {
        if n == 20 {
            assert!(
                served(&d).1 >= 20,
                "the first writes did not go through the daemon"
            );
            // kill -9 from another thread while the next writes are in flight.
            killer = Some(std::thread::spawn(move || {
                std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status()
                    .unwrap()
            }));
        }
        let r = c
            .call("add_learning", json!({"pattern": pattern("write", n)}))
            .await;
        let b = body(&r);
        if r.is_error == Some(true) {
            // Only a write the daemon took to its grave may be in doubt.
            assert_eq!(b["error"]["code"], "ERR_FAILED_PRECONDITION", "{b}");
            unknown += 1;
        } else {
            acked.push(b["id"].as_str().unwrap().to_string());
        }
    }
    assert!(killer.unwrap().join().unwrap().success());
    assert!(
        d.child.try_wait().unwrap().is_some(),
        "the daemon survived kill -9"
    );
    assert!(unknown <= 1, "{unknown} writes in doubt");
    assert!(acked.len() >= 59);
    // Every acknowledged write is in SQLite and found, by this server and a new process.
    let seen = found(&c).await;
    for id in &acked {
        assert!(seen.contains(id), "{id} lost");
    }
    c.close().await;
    let by_cli = found_by_cli(&env);
    for id in &acked {
        assert!(by_cli.contains(id), "{id} lost");
    }
    drop(d);
}

/// The public ids of the tokens in `state`.
fn token_ids(env: &Env, state: &str) -> Vec<String> {
    tokens(env)
        .iter()
        .filter(|t| t["state"] == state)
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_forwarder_replaces_a_token_the_database_lost_and_comes_back_when_the_daemon_does() {
    let env = Env::new();
    let issue = setup(&env);
    let mut d = Daemon::start(&env, &[], &[]);
    let c = env.serve(&["--issue-id", &issue]).await;
    let mut acked = vec![add(&c, "first", 0).await];
    assert_eq!(served(&d).0, 1);
    // Its token gone from the database (as after a restore): the daemon refuses the next
    // call before running it, and the forwarder mints another and stays.
    let active = token_ids(&env, "active");
    assert_eq!(active.len(), 1);
    env.sql(&format!(
        "DELETE FROM session_tokens WHERE id = '{}'",
        active[0]
    ))
    .unwrap();
    let (_, before) = served(&d);
    acked.push(add(&c, "second", 1).await);
    let (sessions, after) = served(&d);
    assert_eq!(sessions, 2, "the second call did not go through the daemon");
    assert!(after > before);
    assert_eq!(token_ids(&env, "active").len(), 1);
    // The daemon killed: the session serves alone.
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    acked.push(add(&c, "alone", 2).await);
    // A daemon again: within a few seconds, calls go to it.
    let back = Daemon::start(&env, &[], &[]);
    let deadline = std::time::Instant::now() + DEADLINE;
    let mut n = 3;
    while served(&back).1 == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the forwarder never came back"
        );
        acked.push(add(&c, "waiting", n).await);
        n += 1;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    acked.sort();
    assert_eq!(found(&c).await, acked);
    c.close().await;
    assert_eq!(found_by_cli(&env), acked);
    assert!(token_ids(&env, "active").is_empty(), "{:?}", tokens(&env));
}

/// Issue 62: revoking a forwarder's token (`cairn session revoke`, or the web page's
/// button) used to be undone by the forwarder, which minted another and went on. A
/// revocation ends the session: every later request is refused, saying so, whether the
/// daemon is there or not, and nothing more is written.
#[tokio::test]
async fn a_revoked_forwarder_token_ends_the_session_with_or_without_the_daemon() {
    let env = Env::new();
    let issue = setup(&env);
    let mut d = Daemon::start(&env, &[], &[]);
    let c = env.serve(&["--issue-id", &issue]).await;
    let first = add(&c, "first", 0).await;
    assert_eq!(served(&d).0, 1);
    let active = token_ids(&env, "active");
    assert_eq!(active.len(), 1);
    env.ok(&["session", "revoke", &active[0]]);
    let refused = |b: &Value| {
        assert_eq!(b["error"]["code"], "PERMISSION_DENIED", "{b}");
        let m = b["error"]["message"].as_str().unwrap();
        assert!(
            m.contains(&format!("token {} was revoked by cli", active[0])),
            "{m}"
        );
        assert!(m.contains("ends the session"), "{m}");
    };
    let json_pattern = json!({"pattern": pattern("revoked", 1), "merge": false});
    refused(&c.err("add_learning", json_pattern.clone()).await);
    refused(&c.err("server_ping", json!({})).await);
    let listed = c.service.list_resources(None).await;
    let e = listed.expect_err("resources of an ended session");
    assert!(e.to_string().contains("was revoked by cli"), "{e}");
    assert!(token_ids(&env, "active").is_empty(), "{:?}", tokens(&env));
    // Without the daemon, the session does not serve alone either.
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    refused(&c.err("add_learning", json_pattern).await);
    c.close().await;
    assert_eq!(found_by_cli(&env), [first]);
    assert!(token_ids(&env, "active").is_empty(), "{:?}", tokens(&env));
}

/// `add_learning` through each client once; the ids acknowledged, and the envelopes of
/// the calls refused (none of which may say its outcome is unknown: a call the daemon
/// refused before running it is never in doubt).
async fn round(clients: &[Client], n: &mut usize) -> (Vec<String>, Vec<Value>) {
    let (mut acked, mut refused) = (Vec::new(), Vec::new());
    for c in clients {
        let r = c
            .call("add_learning", json!({"pattern": pattern("restart", *n)}))
            .await;
        *n += 1;
        let b = body(&r);
        if r.is_error == Some(true) {
            let message = b["error"]["message"].as_str().unwrap_or_default();
            assert!(!message.contains("is unknown"), "{b}");
            refused.push(b);
        } else {
            acked.push(b["id"].as_str().unwrap().to_string());
        }
    }
    (acked, refused)
}

#[tokio::test]
async fn a_postgresql_restart_under_the_daemon_sends_no_forwarder_away_and_loses_no_acknowledged_write()
 {
    // PostgreSQL whatever CAIRN_TEST_STORE says, on a cluster of this test's own.
    let cluster = PgCluster::start();
    let env = Env::host(&cluster.create_database("restart"));
    let one = setup(&env);
    let two = env.issue("web", "More forwarded work");
    let d = Daemon::start(&env, &[], &[]);
    let clients = [
        env.serve(&["--issue-id", &one]).await,
        env.serve(&["--issue-id", &two]).await,
    ];
    let mut n = 0;
    let mut acked = Vec::new();
    for _ in 0..3 {
        let (ok, refused) = round(&clients, &mut n).await;
        assert!(refused.is_empty(), "{refused:?}");
        acked.extend(ok);
    }
    assert_eq!(served(&d).0, 2);
    // The database goes down: every call is refused, none in doubt.
    cluster.stop();
    for _ in 0..3 {
        let (ok, refused) = round(&clients, &mut n).await;
        assert!(ok.is_empty(), "acknowledged with the database down: {ok:?}");
        assert_eq!(refused.len(), 2);
    }
    // Back up: once the daemon reconnects, calls are acknowledged again, through the
    // daemon, under the tokens the forwarders started with.
    cluster.start_again();
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        let (ok, refused) = round(&clients, &mut n).await;
        acked.extend(ok);
        if refused.is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{refused:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (sessions, before) = served(&d);
    for _ in 0..3 {
        let (ok, refused) = round(&clients, &mut n).await;
        assert!(refused.is_empty(), "{refused:?}");
        acked.extend(ok);
    }
    assert_eq!(
        served(&d),
        (2, before + 6),
        "a forwarder left or minted anew"
    );
    assert_eq!(sessions, 2);
    // Every acknowledged write is in the database.
    let cairn = env.open();
    for id in &acked {
        assert!(cairn.learning(id).is_ok(), "{id} lost");
    }
    for c in clients {
        c.close().await;
    }
}
