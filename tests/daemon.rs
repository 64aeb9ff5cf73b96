//! `cairn daemon` over real HTTP: session tokens (binding and scope at list and call time,
//! missing/unknown/revoked/expired), Host and Origin checks, `/health`, the discovery
//! file, one daemon per database, SIGTERM with a call in flight, and the official Python
//! and TypeScript SDKs' Streamable HTTP clients.
//!
//! Readiness is the daemon's "listening" line on stderr (then the discovery file); nothing
//! here sleeps.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Env, node, on_postgres, piped, sqlite_only};

/// A generous bound that only catches a hang.
const HANG: Duration = Duration::from_secs(60);

/// A running `cairn daemon` and its stderr, line by line.
pub(crate) struct Daemon {
    pub(crate) child: Child,
    pub(crate) addr: SocketAddr,
    url: String,
    /// The daemon's Unix socket (in its private directory).
    socket: std::path::PathBuf,
    lines: Receiver<String>,
}

impl Daemon {
    pub(crate) fn start(env: &Env, extra: &[&str], envs: &[(&str, &str)]) -> Daemon {
        let mut args = vec!["daemon", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut cmd = env.cmd(&args);
        cmd.env("CAIRN_LOG", "info")
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn cairn daemon");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[daemon] {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut d = Daemon {
            child,
            addr: "127.0.0.1:1".parse().unwrap(),
            url: String::new(),
            socket: Default::default(),
            lines,
        };
        d.wait_for("listening");
        let disc: Value = serde_json::from_str(
            &std::fs::read_to_string(discovery(&env.db)).expect("discovery file"),
        )
        .expect("discovery JSON");
        d.url = disc["url"].as_str().expect("url").to_string();
        d.socket = disc["socket"].as_str().expect("socket").into();
        assert_eq!(disc["pid"], d.child.id(), "{disc}");
        assert_eq!(disc["version"], env!("CARGO_PKG_VERSION"));
        assert!(disc["started_at"].is_string());
        d.addr = d
            .url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .parse()
            .expect("url is http://ip:port/mcp");
        d
    }

    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Wait for a stderr line containing `needle`; return it.
    pub(crate) fn wait_for(&self, needle: &str) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(HANG)
                .unwrap_or_else(|_| panic!("no daemon line with {needle:?}"));
            if line.contains(needle) {
                return line;
            }
        }
    }

    /// The stderr lines that arrived since the last read, without waiting.
    pub(crate) fn new_lines(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    /// A JSON-RPC request to `/mcp` with `token`; the HTTP status and the JSON body.
    pub(crate) fn rpc(&self, token: &str, method: &str, params: Value) -> (u16, Value) {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let auth = format!("Bearer {token}");
        let r = http(
            self.addr,
            "POST",
            "/mcp",
            &[("Authorization", &auth)],
            Some(&body.to_string()),
        );
        (r.status, r.json())
    }

    fn tools(&self, token: &str) -> Vec<String> {
        let (status, body) = self.rpc(token, "tools/list", json!({}));
        assert_eq!(status, 200, "{body}");
        body["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools: {body}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// `GET /health` with its details, asked over the daemon's socket (where only its own
    /// user connects: over TCP, details need a token).
    pub(crate) fn health(&self) -> Value {
        let mut s = std::os::unix::net::UnixStream::connect(&self.socket)
            .expect("connect to the daemon's socket");
        s.set_read_timeout(Some(HANG)).unwrap();
        s.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").expect("HTTP reply");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(body)
        } else {
            body.to_string()
        };
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }

    /// `tools/call`; the result object (`isError`, `structuredContent`, `content`).
    pub(crate) fn call(&self, token: &str, tool: &str, args: Value) -> Value {
        let (status, body) = self.rpc(
            token,
            "tools/call",
            json!({"name": tool, "arguments": args}),
        );
        assert_eq!(status, 200, "{body}");
        body["result"].clone()
    }

    pub(crate) fn term(&self) {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    pub(crate) fn wait(mut self) -> std::process::ExitStatus {
        self.child.wait().expect("wait")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn discovery(db: &Path) -> std::path::PathBuf {
    let mut s = db.as_os_str().to_os_string();
    s.push(".daemon.json");
    s.into()
}

/// The error envelope in a failed call's text content.
fn envelope(result: &Value) -> Value {
    assert_eq!(result["isError"], true, "{result}");
    serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap()
}

pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) head: String,
    pub(crate) body: String,
}

impl Reply {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {} {}\n{}",
                self.status, self.head, self.body
            )
        })
    }
}

/// One HTTP/1.1 request with `Connection: close`. `Host` is the daemon's address unless
/// `headers` names one; a POST gets the content types MCP asks for unless `headers`
/// names a `Content-Type` (a form).
pub(crate) fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    http_within(addr, method, path, headers, body, HANG)
}

/// [`http`] waiting at most `timeout` for the reply (a call meant to run long).
pub(crate) fn http_within(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    timeout: Duration,
) -> Reply {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(timeout)).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            req.push_str("Content-Type: application/json\r\n");
        }
        req.push_str("Accept: application/json, text/event-stream\r\n");
        req.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    req.push_str("\r\n");
    req.push_str(body.unwrap_or(""));
    s.write_all(req.as_bytes()).expect("write");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read");
    let raw = String::from_utf8(raw).expect("utf-8 reply");
    let (head, body) = raw.split_once("\r\n\r\n").expect("HTTP reply");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Reply {
        status,
        head: head.to_string(),
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = s.split_once("\r\n").expect("chunk size");
        let n = usize::from_str_radix(size.trim(), 16).expect("hex size");
        if n == 0 {
            return out;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
}

/// A project SHOP with issues SHOP-1 and SHOP-2.
pub(crate) fn shop(env: &Env) {
    env.project("shop", None);
    assert_eq!(env.issue("shop", "first"), "SHOP-1");
    assert_eq!(env.issue("shop", "second"), "SHOP-2");
}

/// Mint a token with `cairn session new ... --json`; (token, id).
pub(crate) fn mint(env: &Env, flags: &[&str]) -> (String, String) {
    let mut args = vec!["session", "new"];
    args.extend_from_slice(flags);
    let v = env.json(&args);
    (
        v["token"].as_str().unwrap().to_string(),
        v["id"].as_str().unwrap().to_string(),
    )
}

#[test]
fn session_new_prints_the_token_once_and_list_never_shows_it() {
    let env = Env::new();
    shop(&env);
    let out = env.ok(&[
        "session",
        "new",
        "--issue",
        "SHOP-1",
        "--agent-type",
        "worker",
    ]);
    let token = out.trim();
    assert!(token.starts_with("cairn_") && token.len() == 70, "{out}");
    let (_, id) = mint(
        &env,
        &[
            "--issue-id",
            "SHOP-2",
            "--agent-type",
            "judge",
            "--ttl",
            "90",
        ],
    );
    let list = env.json(&["session", "list"]);
    let text = list.to_string();
    assert!(!text.contains(&token[6..]), "a token leaked into the list");
    let entry = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap();
    assert_eq!(entry["issue"], "SHOP-2");
    assert_eq!(entry["state"], "active");
    assert_eq!(entry["scope"]["label"], "agent type judge");
    let plain = env.ok(&["session", "list"]);
    assert!(plain.contains(&id) && plain.contains("SHOP-2"), "{plain}");

    // The binding is checked like `cairn serve`'s flags: nothing is minted for a bad one.
    let bad = env.run(&["session", "new", "--issue", "SHOP-99"]);
    assert!(!bad.status.success());
    let bad = env.run(&["session", "new", "--agent-type", "wizard"]);
    assert_eq!(bad.status.code(), Some(2));
    let bad = env.run(&["session", "new", "--ttl", "soon"]);
    assert_eq!(bad.status.code(), Some(2));
    let bad = env.run(&["session", "new", "--tool-scope-file", "missing.json"]);
    assert!(!bad.status.success());
    assert_eq!(env.json(&["session", "list"]).as_array().unwrap().len(), 2);

    let revoked = env.json(&["session", "revoke", &id]);
    assert_eq!(revoked["state"], "revoked");
    let missing = env.run(&["session", "revoke", "tok_000000000000"]);
    assert!(!missing.status.success());
}

#[test]
fn a_token_binds_scope_at_list_and_call_time_and_the_issue_whatever_the_arguments() {
    let env = Env::new();
    shop(&env);
    let (judge, _) = mint(&env, &["--issue", "SHOP-1", "--agent-type", "judge"]);
    let (worker, _) = mint(&env, &["--issue", "SHOP-1", "--agent-type", "worker"]);
    let scope_file = env.path().join("scope.json");
    std::fs::write(&scope_file, r#"["server_ping", "get_issue"]"#).unwrap();
    let (narrow, _) = mint(
        &env,
        &[
            "--issue",
            "SHOP-2",
            "--agent-type",
            "worker",
            "--tool-scope-file",
            scope_file.to_str().unwrap(),
        ],
    );
    let d = Daemon::start(&env, &[], &[]);

    let judge_tools = d.tools(&judge);
    let worker_tools = d.tools(&worker);
    assert!(
        judge_tools.contains(&"approve_pr".to_string()),
        "{judge_tools:?}"
    );
    assert!(
        !judge_tools.contains(&"create_issue".to_string()),
        "{judge_tools:?}"
    );
    assert!(worker_tools.contains(&"create_issue".to_string()));
    assert!(!worker_tools.contains(&"approve_pr".to_string()));
    let mut narrow_tools = d.tools(&narrow);
    narrow_tools.sort();
    assert_eq!(narrow_tools, ["get_issue", "server_ping"]);

    // Call time: a judge cannot call a worker tool, nor the narrow token a listed-out one.
    let denied = d.call(&judge, "create_issue", json!({"title": "x"}));
    assert_eq!(
        envelope(&denied)["error"]["code"],
        "PERMISSION_DENIED",
        "{denied}"
    );
    let denied = d.call(
        &narrow,
        "add_finding",
        json!({"category": "bug", "summary": "x"}),
    );
    assert_eq!(
        envelope(&denied)["error"]["code"],
        "PERMISSION_DENIED",
        "{denied}"
    );

    // The worker's findings go to SHOP-1: an argument naming another issue is refused,
    // and a request header or `_meta` cannot change the binding either.
    let refused = d.call(
        &worker,
        "add_finding",
        json!({"category": "bug", "summary": "elsewhere", "issue_id": "SHOP-2"}),
    );
    assert_eq!(
        envelope(&refused)["status"],
        "VALIDATION_FAILED",
        "{refused}"
    );
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "add_finding",
        "arguments": {"category": "bug", "summary": "bound here"},
        "_meta": {"issue_id": "SHOP-2"}}});
    let auth = format!("Bearer {worker}");
    // A session id the daemon never issued names no session: 404, nothing runs.
    let r = http(
        d.addr,
        "POST",
        "/mcp",
        &[("Authorization", &auth), ("Mcp-Session-Id", "SHOP-2")],
        Some(&body.to_string()),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    let r = http(
        d.addr,
        "POST",
        "/mcp",
        &[("Authorization", &auth)],
        Some(&body.to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let result = &r.json()["result"];
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(
        result["structuredContent"]["summary"], "bound here",
        "{result}"
    );

    let one = env.json(&["findings", "SHOP-1"]);
    let two = env.json(&["findings", "SHOP-2"]);
    let summaries: Vec<&str> = one
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["summary"].as_str())
        .collect();
    assert_eq!(summaries, ["bound here"], "{one}");
    assert_eq!(two.as_array().unwrap().len(), 0, "{two}");
    // The record is attributed to the token's agent.
    assert_eq!(one[0]["actor"], "agent-worker", "{one}");
}

#[test]
fn missing_unknown_revoked_and_expired_tokens_get_401_with_what_to_do() {
    let env = Env::new();
    shop(&env);
    let (live, live_id) = mint(&env, &["--issue", "SHOP-1", "--agent-type", "worker"]);
    let (old, old_id) = mint(&env, &["--agent-type", "judge", "--ttl", "1h"]);
    let d = Daemon::start(&env, &[], &[]);

    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).to_string();
    let cases: [(&[(&str, &str)], &str); 4] = [
        (&[], "TOKEN_MISSING"),
        (&[("Authorization", "Basic dXNlcjpwdw==")], "TOKEN_MISSING"),
        (&[("Authorization", "Bearer cairn_nope")], "TOKEN_UNKNOWN"),
        (
            &[(
                "Authorization",
                "Bearer cairn_0000000000000000000000000000000000000000000000000000000000000000",
            )],
            "TOKEN_UNKNOWN",
        ),
    ];
    for (headers, code) in cases {
        let r = http(d.addr, "POST", "/mcp", headers, Some(&ping));
        assert_eq!(r.status, 401, "{headers:?}: {}", r.body);
        let body = r.json();
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(
            body["error"]["help"]
                .as_str()
                .unwrap()
                .contains("cairn session new")
        );
        assert!(
            r.head
                .to_ascii_lowercase()
                .contains("www-authenticate: bearer")
        );
    }

    // Revocation takes effect on the next request of the same daemon.
    assert!(!d.tools(&live).is_empty());
    env.ok(&["session", "revoke", &live_id]);
    let (status, body) = d.rpc(&live, "tools/list", json!({}));
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "TOKEN_REVOKED");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&live_id)
    );

    // Expiry: set the stored expiry into the past (what the clock would do in an hour).
    assert!(!d.tools(&old).is_empty());
    env.store()
        .write(|c| {
            c.execute(
                "UPDATE session_tokens SET expires_at = '2001-01-01T00:00:00Z' WHERE id = ?1",
                [&old_id],
            )
        })
        .unwrap();
    let (status, body) = d.rpc(&old, "tools/list", json!({}));
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "TOKEN_EXPIRED");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2001-01-01")
    );
    let listed = env.json(&["session", "list"]);
    let states: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    assert!(
        states.contains(&"expired") && states.contains(&"revoked"),
        "{listed}"
    );
}

#[test]
fn wrong_host_or_origin_gets_403_and_health_answers() {
    let env = Env::new();
    shop(&env);
    let (token, _) = mint(&env, &["--issue", "SHOP-1", "--agent-type", "worker"]);
    let d = Daemon::start(&env, &[], &[]);
    let auth = format!("Bearer {token}");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).to_string();
    let port = d.addr.port();
    let other_port = format!("localhost:{}", if port == 1 { 2 } else { port - 1 });
    let own_localhost = format!("localhost:{port}");

    for (headers, code) in [
        (vec![("Host", "evil.example")], "HOST_NOT_ALLOWED"),
        (vec![("Host", "evil.example:80")], "HOST_NOT_ALLOWED"),
        (vec![("Host", other_port.as_str())], "HOST_NOT_ALLOWED"),
        (
            vec![("Origin", "http://evil.example")],
            "ORIGIN_NOT_ALLOWED",
        ),
        (vec![("Origin", "null")], "ORIGIN_NOT_ALLOWED"),
    ] {
        let mut h = headers.clone();
        h.push(("Authorization", &auth));
        let r = http(d.addr, "POST", "/mcp", &h, Some(&list));
        assert_eq!(r.status, 403, "{headers:?}: {}", r.body);
        assert_eq!(r.json()["error"]["code"], code);
        // /health is behind the same checks.
        let r = http(d.addr, "GET", "/health", &headers, None);
        assert_eq!(r.status, 403, "{headers:?}");
    }
    // Loopback names and origins pass.
    for headers in [
        vec![("Host", own_localhost.as_str())],
        vec![("Origin", "http://localhost:5173")],
    ] {
        let mut h = headers.clone();
        h.push(("Authorization", &auth));
        let r = http(d.addr, "POST", "/mcp", &h, Some(&list));
        assert_eq!(r.status, 200, "{headers:?}: {}", r.body);
    }

    // Without a token, over TCP: liveness only, no path of the database or of a root.
    let r = http(d.addr, "GET", "/health", &[], None);
    assert_eq!(r.status, 200, "{}", r.body);
    let open = r.json();
    let keys: Vec<&str> = open
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["details", "status", "version", "warm"], "{open}");
    assert!(!r.body.contains(env.path().to_str().unwrap()), "{}", r.body);
    // A token that does not open a session gets its refusal, not the details.
    let r = http(
        d.addr,
        "GET",
        "/health",
        &[("Authorization", "Bearer cairn_nope")],
        None,
    );
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "TOKEN_UNKNOWN", "{}", r.body);
    // With a session token over TCP, and over the daemon's socket: the details.
    let r = http(d.addr, "GET", "/health", &[("Authorization", &auth)], None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["db"], d.health()["db"], "{}", r.body);
    let h = d.health();
    assert_eq!(h["status"], "ok");
    assert_eq!(h["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(h["url"], d.url);
    assert_eq!(h["sessions_served"], 1, "{h}");
    // One shared lane fewer than the cores, at least one (`cairn::mcp::lanes`).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(h["shared_lanes"], cores.saturating_sub(1).max(1), "{h}");
    assert_eq!(h["lane_nice"], 10, "{h}");
    assert!(h["requests_served"].as_u64().unwrap() >= 2, "{h}");
    assert!(h["uptime_seconds"].is_u64());
    // The daemon loads the model and the vault's indexes in the background at start and
    // says so: poll the condition (bounded only to catch a hang).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let h = d.health();
        if h["warm"] == true {
            break;
        }
        assert_eq!(h["warm"], false, "{h}");
        assert!(std::time::Instant::now() < deadline, "never warm: {h}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if on_postgres() {
        // A URL, shown without its password (the test cluster's has none).
        assert_eq!(h["db"], env.location.as_str(), "{h}");
    } else {
        assert_eq!(
            std::fs::canonicalize(h["db"].as_str().unwrap()).unwrap(),
            std::fs::canonicalize(&env.db).unwrap()
        );
    }
}

/// A server of `cairn` bound to SHOP-1, as the daemon builds one for a token, with one
/// shared lane whose patience is beyond any wait here (a waiting call waits for the lane,
/// not the clock).
fn one_lane_server(
    cairn: cairn::Cairn,
) -> (
    cairn::mcp::server::CairnServer,
    std::sync::Arc<cairn::mcp::lanes::Lanes>,
) {
    let work = cairn
        .bind(&cairn::access::context::BindArgs {
            issue: Some("SHOP-1".into()),
            ..Default::default()
        })
        .expect("bind");
    let lanes = std::sync::Arc::new(
        cairn::mcp::lanes::Lanes::new(
            std::num::NonZeroUsize::MIN,
            10 * HANG,
            cairn::mcp::lanes::LANE_NICE,
        )
        .expect("the lane's thread"),
    );
    let server = cairn::mcp::server::CairnServer::new(
        std::sync::Arc::new(cairn),
        work,
        cairn::mcp::server::Scope::All,
        lanes.clone(),
    );
    (server, lanes)
}

/// The daemon's lanes (`cairn::mcp::lanes`), in process with the real tools: while the one
/// shared lane is taken (as by a long `vault_retrieve`), a `list_issues` waits for it, and a
/// `search_learnings` runs at once beside both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_of_learnings_never_waits_for_the_lanes_other_tools_wait_for() {
    use cairn::mcp::lanes::Lane;

    let env = Env::new();
    shop(&env);
    let (server, lanes) = one_lane_server(env.open());
    let args = |v: Value| v.as_object().cloned();
    let added = server
        .call(
            "add_learning",
            args(json!({"pattern": "Lanes: the checkout service retries a declined card once, after a fresh token"})),
        )
        .await;
    assert_ne!(added.is_error, Some(true), "{added:?}");

    let held = lanes.admit(Lane::Shared).await;
    let listing = tokio::spawn({
        let server = server.clone();
        async move { server.call("list_issues", None).await }
    });
    let deadline = std::time::Instant::now() + HANG;
    while lanes.waiting() == 0 {
        assert!(
            !listing.is_finished(),
            "list_issues ran while the only shared lane was taken"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "list_issues never queued for a lane"
        );
        tokio::task::yield_now().await;
    }
    let found = tokio::time::timeout(
        HANG,
        server.call(
            "search_learnings",
            args(json!({"query": "declined card retries"})),
        ),
    )
    .await
    .expect("search_learnings waited for the shared lane");
    let found = found.structured_content.expect("a result");
    assert!(
        found.to_string().contains("declined card once"),
        "the search found the learning: {found}"
    );
    assert!(
        !listing.is_finished(),
        "list_issues ran while the lane was taken"
    );
    assert_eq!(lanes.waiting(), 1);
    drop(held);
    let listed = tokio::time::timeout(HANG, listing)
        .await
        .expect("list_issues got the lane once it was given back")
        .unwrap();
    assert_ne!(listed.is_error, Some(true), "{listed:?}");
    assert!(
        listed
            .structured_content
            .unwrap()
            .to_string()
            .contains("SHOP-1")
    );
    assert_eq!(lanes.waiting(), 0);
}

/// The deterministic test embedder, recording every query it is asked to embed.
#[derive(Debug)]
struct Recording {
    inner: cairn::embed::HashEmbedder,
    queries: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl cairn::embed::Embed for Recording {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn embed_batch(&self, texts: &[&str]) -> cairn::embed::Result<Vec<Vec<f32>>> {
        self.inner.embed_batch(texts)
    }

    fn embed_query(&self, text: &str) -> cairn::embed::Result<Vec<f32>> {
        self.queries.lock().unwrap().push(text.to_string());
        self.inner.embed_query(text)
    }
}

/// Calls waiting for a lane have had their queries embedded already
/// (`ToolDef::prepare`): one lane must not make the vault's searches take turns at the
/// model, where queries that wait together share one run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vault_queries_are_embedded_before_their_calls_wait_for_a_lane() {
    use cairn::mcp::lanes::Lane;
    use std::sync::{Arc, Mutex};

    let env = Env::new();
    shop(&env);
    let queries = Arc::new(Mutex::new(Vec::new()));
    let cairn = cairn::Cairn::open_at_with_embedder(
        &env.store_location(),
        Box::new(Recording {
            inner: cairn::embed::HashEmbedder::new(),
            queries: queries.clone(),
        }),
    )
    .expect("open");
    let (server, lanes) = one_lane_server(cairn);

    let held = lanes.admit(Lane::Shared).await;
    let asked = ["retry budgets", "cache warming", "schema drift"];
    let calls: Vec<_> = asked
        .iter()
        .map(|q| {
            let server = server.clone();
            let args = json!({"query": q}).as_object().cloned();
            tokio::spawn(async move { server.call("vault_retrieve", args).await })
        })
        .collect();
    let deadline = std::time::Instant::now() + HANG;
    while lanes.waiting() < asked.len() {
        assert!(
            std::time::Instant::now() < deadline,
            "the calls never queued for the lane"
        );
        tokio::task::yield_now().await;
    }
    let mut embedded = queries.lock().unwrap().clone();
    embedded.sort();
    let mut expected: Vec<String> = asked.iter().map(|q| q.to_string()).collect();
    expected.sort();
    assert_eq!(
        embedded, expected,
        "each waiting call's query, embedded before its turn"
    );
    assert!(calls.iter().all(|c| !c.is_finished()));
    drop(held);
    for c in calls {
        let r = tokio::time::timeout(HANG, c)
            .await
            .expect("a call got its lane")
            .unwrap();
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    // The handlers asked again and found their vectors waiting (the embedder's cache in
    // the real model; this stand-in recomputes them).
    assert_eq!(queries.lock().unwrap().len(), 2 * asked.len());
}

#[test]
fn one_daemon_per_database_loopback_only_and_a_clean_exit_removes_the_discovery_file() {
    let env = Env::new();
    let d = Daemon::start(&env, &["--shared-lanes", "3", "--lane-nice", "4"], &[]);
    // The lanes asked for (the default is checked with /health elsewhere).
    let h = d.health();
    assert_eq!(h["shared_lanes"], 3, "{h}");
    assert_eq!(h["lane_nice"], 4, "{h}");
    assert_eq!(h["calls_waiting_for_a_lane"], 0, "{h}");
    assert_eq!(h["calls_run_past_the_lanes"], 0, "{h}");
    // Each lane is a thread of the daemon, 4 steps nicer than the daemon itself.
    let nice = |task: &str| -> i64 {
        let stat = std::fs::read_to_string(format!("{task}/stat")).unwrap();
        // Field 19 of stat, counted after the parenthesised name.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.split(' ').nth(16).unwrap().parse().unwrap()
    };
    let proc = format!("/proc/{}", d.child.id());
    let mut lanes: Vec<(String, i64)> = std::fs::read_dir(format!("{proc}/task"))
        .unwrap()
        .filter_map(|t| {
            let task = t.unwrap().path().display().to_string();
            let name = std::fs::read_to_string(format!("{task}/comm")).ok()?;
            let name = name.trim().to_string();
            name.starts_with("cairn-lane").then(|| (name, nice(&task)))
        })
        .collect();
    lanes.sort();
    let expected = (nice(&proc) + 4).min(19);
    assert_eq!(
        lanes,
        (0..3)
            .map(|n| (format!("cairn-lane-{n}"), expected))
            .collect::<Vec<_>>()
    );
    // Not a niceness the system has.
    let bad = Env::new().run(&["daemon", "--lane-nice", "20"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--lane-nice"));
    // A second daemon on the same database refuses, naming the first one.
    let second = env.run(&["daemon", "--listen", "127.0.0.1:0"]);
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("already serves") && err.contains(&d.url),
        "{err}"
    );
    assert!(second.stdout.is_empty());

    // Not loopback without --allow-remote.
    let other = Env::new();
    let remote = other.run(&["daemon", "--listen", "0.0.0.0:0"]);
    assert_eq!(remote.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&remote.stderr).contains("--allow-remote"));
    assert!(!discovery(&other.db).exists());

    d.term();
    d.wait_for("stopped");
    let status = d.wait();
    assert!(status.success(), "{status:?}");
    assert!(!discovery(&env.db).exists());
}

#[test]
fn sigterm_finishes_the_call_in_flight_then_exits_zero() {
    let env = Env::new();
    shop(&env);
    let (token, _) = mint(&env, &["--issue", "SHOP-1", "--agent-type", "worker"]);
    let mut d = Daemon::start(&env, &[], &[("CAIRN_FAILPOINT", "daemon-hold-call")]);
    let addr = d.addr;
    let call = std::thread::spawn(move || {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "add_finding", "arguments": {"category": "bug", "summary": "in flight"}}});
        http(
            addr,
            "POST",
            "/mcp",
            &[("Authorization", &format!("Bearer {token}"))],
            Some(&body.to_string()),
        )
    });
    d.wait_for("holding the call");
    d.term();
    d.wait_for("stopping");
    let reply = call.join().unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
    let result = &reply.json()["result"];
    assert_ne!(result["isError"], true, "{result}");
    d.wait_for("stopped");
    let mut stdout = String::new();
    d.child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert_eq!(stdout, "", "stdout of cairn daemon carries nothing");
    let status = d.wait();
    assert!(status.success(), "{status:?}");
    assert!(!discovery(&env.db).exists());
    let findings = env.json(&["findings", "SHOP-1"]);
    assert_eq!(findings[0]["summary"], "in flight", "{findings}");
}

/// Run `tests/mcp_sdk/http_drive.py` (the official Python SDK's Streamable HTTP client).
fn python(url: &str, token: &str, mode: &str, calls: Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_sdk/http_drive.py");
    driver_output(piped(
        std::process::Command::new("python3")
            .arg(script)
            .args([url, token])
            .env("MCP_MODE", mode),
        calls.to_string().as_bytes(),
    ))
}

/// Run `tests/mcp_ts/http_drive.mjs` (the TypeScript SDK's StreamableHTTPClientTransport).
fn typescript(url: &str, token: &str, calls: Value) -> Value {
    driver_output(node(
        "http_drive.mjs",
        &[url.as_ref(), token.as_ref()],
        calls.to_string().as_bytes(),
    ))
}

fn driver_output(out: std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "driver failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "driver output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn the_official_sdks_reach_the_daemon_with_a_token_and_see_its_scope() {
    let env = Env::new();
    shop(&env);
    let (worker, _) = mint(&env, &["--issue", "SHOP-1", "--agent-type", "worker"]);
    let (judge, _) = mint(&env, &["--issue", "SHOP-2", "--agent-type", "judge"]);
    let d = Daemon::start(&env, &[], &[]);
    let calls = json!([
        {"tool": "add_finding", "arguments": {"category": "bug", "summary": "from an sdk"}},
        {"tool": "create_issue", "arguments": {"title": "t"}},
    ]);

    // Python: the 2026-07-28 per-request lifecycle (server/discover) and the 2025-11-25
    // initialize handshake.
    for mode in ["auto", "legacy"] {
        let out = python(&d.url, &worker, mode, calls.clone());
        assert_eq!(
            out["lifecycle"],
            if mode == "auto" {
                "discover"
            } else {
                "initialize"
            },
            "{out}"
        );
        let tools = out["tools"].as_array().unwrap();
        assert!(tools.contains(&json!("create_issue")) && !tools.contains(&json!("approve_pr")));
        assert_eq!(out["calls"][0]["is_error"], false, "{out}");
        assert_eq!(out["calls"][1]["is_error"], false, "{out}");
        let out = python(&d.url, &judge, mode, calls.clone());
        let tools = out["tools"].as_array().unwrap();
        assert!(!tools.contains(&json!("create_issue")) && tools.contains(&json!("approve_pr")));
        assert_eq!(
            out["calls"][1]["envelope"]["error"]["code"], "PERMISSION_DENIED",
            "{out}"
        );
        // Without a valid token the SDK fails to connect (the body of the 401 is
        // asserted with a raw client in missing_unknown_revoked_and_expired_tokens...).
        let refused = python(&d.url, "cairn_wrong", mode, json!([]));
        assert!(
            refused["error"].is_string() && refused.get("tools").is_none(),
            "{refused}"
        );
    }

    // TypeScript.
    let out = typescript(&d.url, &worker, calls.clone());
    assert_eq!(out["server"], "cairn", "{out}");
    let tools = out["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("create_issue")) && !tools.contains(&json!("approve_pr")));
    assert_eq!(out["calls"][0]["threw"], Value::Null, "{out}");
    assert_eq!(out["calls"][0]["is_error"], false, "{out}");
    let out = typescript(&d.url, &judge, calls);
    assert_eq!(
        out["calls"][1]["envelope"]["error"]["code"], "PERMISSION_DENIED",
        "{out}"
    );
    let refused = typescript(&d.url, "cairn_wrong", json!([]));
    assert!(
        refused["error"].as_str().unwrap().contains("TOKEN_UNKNOWN"),
        "{refused}"
    );

    // Every SDK finding of the worker landed on SHOP-1 (2 Python lifecycles + TypeScript),
    // the judge's on SHOP-2.
    let one = env.json(&["findings", "SHOP-1"]);
    assert_eq!(one.as_array().unwrap().len(), 3, "{one}");
    let two = env.json(&["findings", "SHOP-2"]);
    assert_eq!(two.as_array().unwrap().len(), 3, "{two}");
    assert!(
        two.as_array()
            .unwrap()
            .iter()
            .all(|f| f["actor"] == "agent-judge")
    );
}

#[test]
fn kill_9_loses_no_acknowledged_write_and_a_stale_discovery_file_does_not_block_a_restart() {
    let env = Env::new();
    shop(&env);
    let (token, _) = mint(&env, &["--issue", "SHOP-1", "--agent-type", "worker"]);
    let mut d = Daemon::start(&env, &[], &[]);
    let first_pid = d.child.id();
    let finding = |n: usize| json!({"category": "bug", "summary": format!("write {n}")});
    for n in 0..20 {
        let r = d.call(&token, "add_finding", finding(n));
        assert_ne!(r["isError"], true, "{r}");
    }
    // One more write in flight (not acknowledged), then SIGKILL.
    let addr = d.addr;
    let auth = format!("Bearer {token}");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "add_finding", "arguments": finding(20)}})
    .to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    d.child.kill().unwrap();
    d.child.wait().unwrap();

    let found = env.json(&["findings", "SHOP-1"]);
    let summaries: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["summary"].as_str())
        .collect();
    for n in 0..20 {
        assert!(
            summaries.contains(&format!("write {n}").as_str()),
            "{summaries:?}"
        );
    }
    assert!(summaries.len() <= 21);
    assert_eq!(
        env.run(&["findings", "SHOP-1", "--verify"]).status.code(),
        Some(0)
    );

    // The killed daemon left its discovery file; its lock died with it.
    let stale: Value =
        serde_json::from_str(&std::fs::read_to_string(discovery(&env.db)).unwrap()).unwrap();
    assert_eq!(stale["pid"], first_pid);
    let again = Daemon::start(&env, &[], &[]);
    assert_ne!(again.child.id(), first_pid);
    let pong = again.call(&token, "server_ping", json!({}));
    assert_eq!(pong["isError"], false, "{pong}");
    drop(d);
}

/// One raw HTTP/1.1 request to `/mcp` over a Unix socket: the status and the JSON body.
pub(crate) fn unix_http(socket: &Path, token: &str, body: &Value) -> (u16, Value) {
    let mut s =
        std::os::unix::net::UnixStream::connect(socket).expect("connect to the daemon's socket");
    s.set_read_timeout(Some(HANG)).unwrap();
    let body = body.to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Authorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    // One write: the daemon may refuse on the headers alone and close before reading the
    // body, and a later write would then fail with a broken pipe before the refusal is read.
    match s.write_all(request.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r.unwrap(),
    }
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, rest) = raw.split_once("\r\n\r\n").expect("HTTP reply");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let json = rest.find('{').map(|i| &rest[i..=rest.rfind('}').unwrap()]);
    (
        status,
        serde_json::from_str(json.unwrap_or("null")).unwrap(),
    )
}

/// A `tools/call` of `server_ping`.
pub(crate) fn ping() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": "server_ping", "arguments": {}}})
}

/// Poll `/health` until `sessions_live` is `n` (the sweep runs every few seconds).
fn wait_for_live_sessions(d: &Daemon, n: u64) {
    let deadline = std::time::Instant::now() + HANG;
    loop {
        let h = d.health();
        if h["sessions_live"] == n {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{h}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn repeated_headers_invalid_json_and_batches_get_400_and_a_revoked_sessions_state_is_dropped() {
    let env = Env::new();
    shop(&env);
    let (token, id) = mint(&env, &["--issue", "SHOP-1"]);
    let d = Daemon::start(&env, &[], &[]);
    let auth = format!("Bearer {token}");
    let own = d.addr.to_string();
    // Two Host headers, the foreign one first; two Authorization headers.
    for headers in [
        vec![("Host", "evil.example"), ("Host", own.as_str())],
        vec![
            ("Authorization", auth.as_str()),
            ("Authorization", "Bearer x"),
        ],
    ] {
        let r = http(d.addr, "POST", "/mcp", &headers, Some(&ping().to_string()));
        assert_eq!(r.status, 400, "{}", r.body);
        assert_eq!(r.json()["error"]["code"], "HEADER_REPEATED");
    }
    // Invalid JSON and a batch: 400 with the JSON-RPC error the stdio transport sends.
    for (body, code) in [
        (
            "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\"".to_string(),
            -32700,
        ),
        (json!([ping(), ping()]).to_string(), -32600),
    ] {
        let r = http(
            d.addr,
            "POST",
            "/mcp",
            &[("Authorization", &auth)],
            Some(&body),
        );
        assert_eq!(r.status, 400, "{}", r.body);
        let b = r.json();
        assert_eq!(b["jsonrpc"], "2.0", "{b}");
        assert_eq!(b["error"]["code"], code, "{b}");
        assert!(b["id"].is_null(), "{b}");
    }
    // A call without a tool name: invalid params with its id, as over stdio.
    let nameless = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {}});
    let r = http(
        d.addr,
        "POST",
        "/mcp",
        &[("Authorization", &auth)],
        Some(&nameless.to_string()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (r.json()["error"]["code"].clone(), r.json()["id"].clone()),
        (json!(-32602), json!(5))
    );
    // Without a token, the body is not even read.
    let r = http(d.addr, "POST", "/mcp", &[], Some("{not json"));
    assert_eq!(r.status, 401);
    // A good call makes the token's server; revoking the token drops it, without the
    // token ever coming back.
    assert_eq!(d.call(&token, "server_ping", json!({}))["isError"], false);
    wait_for_live_sessions(&d, 1);
    // Every call is one line of the log at info: tool, session (the token's id), outcome, ms.
    let line = d.wait_for("tool call");
    for part in [
        "tool=\"server_ping\"",
        &format!("session={id}"),
        "outcome=\"ok\"",
        "ms=",
    ] {
        assert!(line.contains(part), "{part} not in {line}");
    }
    // Revoked by the token itself (its id works as well: other tests).
    let revoked = env.json(&["session", "revoke", &token]);
    assert_eq!(
        (revoked["id"].as_str(), revoked["state"].as_str()),
        (Some(id.as_str()), Some("revoked"))
    );
    wait_for_live_sessions(&d, 0);
}

/// The JSON-RPC answer in a reply's body: JSON, or the `data:` line of an event stream
/// that carries one.
fn answer(r: &Reply) -> Value {
    if !r.head.to_ascii_lowercase().contains("text/event-stream") {
        return r.json();
    }
    r.body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("no answer in the stream: {} {}", r.head, r.body))
}

#[test]
fn an_mcp_session_belongs_to_the_token_that_opened_it_and_ends_on_delete() {
    let env = Env::new();
    shop(&env);
    let (a, _) = mint(&env, &["--issue", "SHOP-1", "--agent-type", "worker"]);
    let (b, _) = mint(&env, &["--issue", "SHOP-2", "--agent-type", "worker"]);
    let d = Daemon::start(&env, &[], &[]);
    let (auth_a, auth_b) = (format!("Bearer {a}"), format!("Bearer {b}"));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let r = http(
        d.addr,
        "POST",
        "/mcp",
        &[("Authorization", &auth_a)],
        Some(&init.to_string()),
    );
    assert_eq!(r.status, 200, "{} {}", r.head, r.body);
    let caps = answer(&r)["result"]["capabilities"]["resources"].clone();
    assert_eq!(caps["subscribe"], true, "{caps}");
    let sid = r
        .head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("an initialize opens a session: {}", r.head));
    let in_session = |auth: &str, body: &Value| {
        http(
            d.addr,
            "POST",
            "/mcp",
            &[
                ("Authorization", auth),
                ("Mcp-Session-Id", &sid),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            Some(&body.to_string()),
        )
    };
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(in_session(&auth_a, &initialized).status, 202);
    let issue = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "get_issue", "arguments": {}}});
    // The token that opened the session: its issue.
    let r = in_session(&auth_a, &issue);
    let got = answer(&r);
    assert_eq!(
        got["result"]["structuredContent"]["identifier"], "SHOP-1",
        "{got}"
    );
    // Another valid token with this session's id: refused, nothing of SHOP-2 served
    // through A's session, nothing of A's session through B's token.
    let r = in_session(&auth_b, &issue);
    let got = answer(&r);
    assert!(
        got["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("opened with another token"),
        "{got}"
    );
    // The same token without a session id is served statelessly, as before.
    assert_eq!(
        d.call(&b, "get_issue", json!({}))["structuredContent"]["identifier"],
        "SHOP-2"
    );
    // DELETE ends the session; its id is then unknown (404).
    let r = http(
        d.addr,
        "DELETE",
        "/mcp",
        &[("Authorization", &auth_a), ("Mcp-Session-Id", &sid)],
        None,
    );
    assert!(r.status < 300, "{} {}", r.status, r.body);
    assert_eq!(in_session(&auth_a, &issue).status, 404);

    // The URL may ask for a schema dialect's listing.
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}});
    let listed = |query: &str| {
        let r = http(
            d.addr,
            "POST",
            &format!("/mcp{query}"),
            &[("Authorization", &auth_a)],
            Some(&list.to_string()),
        );
        answer(&r)
    };
    let schemas = |v: &Value| -> Vec<Value> {
        v["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{v}"))
            .iter()
            .map(|t| t["inputSchema"].clone())
            .collect()
    };
    assert!(
        schemas(&listed(""))
            .iter()
            .all(|s| s["additionalProperties"] == false)
    );
    assert!(
        schemas(&listed("?schema_dialect=gemini"))
            .iter()
            .all(|s| s.get("additionalProperties").is_none())
    );
    let bad = listed("?schema_dialect=yaml");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("use portable, openai-strict or gemini"),
        "{bad}"
    );
}

/// `initialize` (protocol 2025-11-25) with `auth`: the reply and the session id it opened.
pub(crate) fn open_session(d: &Daemon, auth: &str) -> (Reply, Option<String>) {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let r = http(
        d.addr,
        "POST",
        "/mcp",
        &[("Authorization", auth)],
        Some(&init.to_string()),
    );
    let sid = r.head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("mcp-session-id")
            .then(|| v.trim().to_string())
    });
    if let Some(sid) = &sid {
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let r = in_session(d, auth, sid, &initialized);
        assert_eq!(r.status, 202, "{} {}", r.head, r.body);
    }
    (r, sid)
}

/// A POST of `body` on session `sid` with `auth`.
pub(crate) fn in_session(d: &Daemon, auth: &str, sid: &str, body: &Value) -> Reply {
    http(
        d.addr,
        "POST",
        "/mcp",
        &[
            ("Authorization", auth),
            ("Mcp-Session-Id", sid),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        Some(&body.to_string()),
    )
}

/// The status line and headers of a request whose body may never end (a session's
/// notification stream): read up to the blank line only.
fn head_only(addr: SocketAddr, method: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(HANG)).unwrap();
    let mut req = format!("{method} /mcp HTTP/1.1\r\nHost: {addr}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("write");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            s.read(&mut byte).expect("read the head"),
            1,
            "closed mid-head"
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).expect("utf-8 head");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    (status, head)
}

#[test]
fn another_tokens_stream_and_delete_of_a_session_are_refused_and_the_owner_keeps_it() {
    let env = Env::new();
    shop(&env);
    let (a, _) = mint(&env, &["--issue", "SHOP-1", "--agent-type", "worker"]);
    let (b, _) = mint(&env, &["--issue", "SHOP-2", "--agent-type", "worker"]);
    let d = Daemon::start(&env, &[], &[]);
    let (auth_a, auth_b) = (format!("Bearer {a}"), format!("Bearer {b}"));
    let (r, sid) = open_session(&d, &auth_a);
    let sid = sid.unwrap_or_else(|| panic!("an initialize opens a session: {}", r.head));
    let stream = |auth: &str| {
        head_only(
            d.addr,
            "GET",
            &[
                ("Authorization", auth),
                ("Mcp-Session-Id", &sid),
                ("Accept", "text/event-stream"),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
        )
    };
    // B's token on A's session: no notification stream, no end of it.
    let (status, head) = stream(&auth_b);
    assert_eq!(status, 403, "another token's GET of the stream: {head}");
    let r = http(
        d.addr,
        "DELETE",
        "/mcp",
        &[("Authorization", &auth_b), ("Mcp-Session-Id", &sid)],
        None,
    );
    assert_eq!(r.status, 403, "another token's DELETE: {}", r.body);
    assert_eq!(
        r.json()["error"]["code"],
        "SESSION_OF_ANOTHER_TOKEN",
        "{}",
        r.body
    );
    // A's session is intact: its calls, its stream, its end.
    let issue = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "get_issue", "arguments": {}}});
    let got = answer(&in_session(&d, &auth_a, &sid, &issue));
    assert_eq!(
        got["result"]["structuredContent"]["identifier"], "SHOP-1",
        "{got}"
    );
    let (status, head) = stream(&auth_a);
    assert_eq!(status, 200, "the owner's stream: {head}");
    assert!(
        head.to_ascii_lowercase().contains("text/event-stream"),
        "{head}"
    );
    let r = http(
        d.addr,
        "DELETE",
        "/mcp",
        &[("Authorization", &auth_a), ("Mcp-Session-Id", &sid)],
        None,
    );
    assert!(r.status < 300, "{} {}", r.status, r.body);
    assert_eq!(in_session(&d, &auth_a, &sid, &issue).status, 404);
}

#[test]
fn one_token_opening_sessions_until_refused_leaves_room_for_another() {
    let env = Env::new();
    shop(&env);
    let (a, _) = mint(&env, &["--issue", "SHOP-1", "--agent-type", "worker"]);
    let (b, _) = mint(&env, &["--issue", "SHOP-2", "--agent-type", "worker"]);
    let d = Daemon::start(&env, &[], &[]);
    let (auth_a, auth_b) = (format!("Bearer {a}"), format!("Bearer {b}"));
    // The documented default (docs/deployment.md): 32 sessions per token.
    let mut opened = Vec::new();
    let refused = loop {
        let (r, sid) = open_session(&d, &auth_a);
        match sid {
            Some(sid) => opened.push(sid),
            None => break r,
        }
        assert!(
            opened.len() <= 64,
            "one token opened {} sessions",
            opened.len()
        );
    };
    assert_eq!(opened.len(), 32, "{} {}", refused.status, refused.body);
    assert_eq!(refused.status, 429, "{}", refused.body);
    let e = refused.json();
    assert_eq!(e["error"]["code"], "TOO_MANY_SESSIONS_FOR_TOKEN", "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the most one token may have (32)"),
        "{e}"
    );
    // Another token still initializes, and is served in its session.
    let (r, sid) = open_session(&d, &auth_b);
    let sid = sid.unwrap_or_else(|| panic!("B refused: {} {}", r.status, r.body));
    let issue = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "get_issue", "arguments": {}}});
    let got = answer(&in_session(&d, &auth_b, &sid, &issue));
    assert_eq!(
        got["result"]["structuredContent"]["identifier"], "SHOP-2",
        "{got}"
    );
    // A session A ends gives A its share back.
    let r = http(
        d.addr,
        "DELETE",
        "/mcp",
        &[("Authorization", &auth_a), ("Mcp-Session-Id", &opened[0])],
        None,
    );
    assert!(r.status < 300, "{} {}", r.status, r.body);
    let (r, sid) = open_session(&d, &auth_a);
    assert!(sid.is_some(), "{} {}", r.status, r.body);
}

#[test]
fn subscriptions_of_one_session_are_refused_past_the_limit() {
    let env = Env::new();
    shop(&env);
    let (a, _) = mint(&env, &["--issue", "SHOP-1"]);
    let d = Daemon::start(&env, &[], &[]);
    let auth = format!("Bearer {a}");
    let (r, sid) = open_session(&d, &auth);
    let sid = sid.unwrap_or_else(|| panic!("{} {}", r.status, r.body));
    let subscribe = |i: usize, method: &str| {
        let body = json!({"jsonrpc": "2.0", "id": i + 10, "method": method,
            "params": {"uri": format!("cairn://vault/docs/d{i}.md")}});
        answer(&in_session(&d, &auth, &sid, &body))
    };
    // The documented limit (docs/deployment.md): 256 documents per session.
    let mut accepted = 0;
    let refusal = loop {
        let got = subscribe(accepted, "resources/subscribe");
        if got.get("error").is_some() {
            break got;
        }
        accepted += 1;
        assert!(accepted <= 1000, "{accepted} subscriptions accepted");
    };
    assert_eq!(accepted, 256, "{refusal}");
    assert_eq!(refusal["error"]["code"], -32602, "{refusal}");
    let msg = refusal["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("the 256 documents one session may watch"),
        "{msg}"
    );
    // Subscribing again to a watched document is no new subscription; one freed is.
    assert!(subscribe(0, "resources/subscribe").get("error").is_none());
    assert!(subscribe(0, "resources/unsubscribe").get("error").is_none());
    assert!(subscribe(256, "resources/subscribe").get("error").is_none());
}

/// `GET /metrics` parsed by the official Prometheus client's parser
/// (`tests/metrics_parse.py`): `{family: {type, help, samples: [[name, labels, value]]}}`.
fn scrape(d: &Daemon) -> Value {
    let r = http(d.addr, "GET", "/metrics", &[], None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.head
            .to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{}",
        r.head
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/metrics_parse.py");
    let out = piped(
        std::process::Command::new("python3").arg(script),
        r.body.as_bytes(),
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        r.body
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The value of the sample `name` with `labels` (a subset of its labels), 0 if absent.
fn sample(metrics: &Value, family: &str, name: &str, labels: Value) -> f64 {
    metrics[family]["samples"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s[0] == name)
        .find(|s| {
            labels
                .as_object()
                .unwrap()
                .iter()
                .all(|(k, v)| &s[1][k] == v)
        })
        .map_or(0.0, |s| s[2].as_f64().unwrap())
}

#[test]
fn metrics_parse_as_prometheus_text_and_move_with_calls() {
    let env = Env::new();
    shop(&env);
    let (token, _) = mint(&env, &["--issue", "SHOP-1", "--agent-type", "worker"]);
    let d = Daemon::start(&env, &[], &[]);
    let before = scrape(&d);
    for family in [
        "cairn_sessions_live",
        "cairn_learnings",
        "cairn_learnings_pending_embeddings",
        "cairn_requests",
        "cairn_calls_waiting_for_a_lane",
    ] {
        assert!(before.get(family).is_some(), "{family} missing: {before}");
    }
    let ok = |m: &Value| {
        sample(
            m,
            "cairn_tool_calls",
            "cairn_tool_calls_total",
            json!({"tool": "server_ping", "outcome": "ok"}),
        )
    };
    let latency_count = |m: &Value| {
        sample(
            m,
            "cairn_tool_call_duration_seconds",
            "cairn_tool_call_duration_seconds_count",
            json!({"tool": "server_ping"}),
        )
    };
    assert_eq!(ok(&before), 0.0);
    for _ in 0..3 {
        assert_eq!(d.call(&token, "server_ping", json!({}))["isError"], false);
    }
    let missing = d.call(&token, "get_issue", json!({"issue_id": "NOPE-9"}));
    assert_eq!(missing["isError"], true);
    let made_up = d.call(&token, "no_such_tool_<b>", json!({}));
    assert_eq!(made_up["isError"], true);
    let after = scrape(&d);
    assert_eq!(ok(&after), 3.0);
    assert_eq!(latency_count(&after), 3.0);
    assert_eq!(
        sample(
            &after,
            "cairn_tool_call_errors",
            "cairn_tool_call_errors_total",
            json!({"tool": "get_issue", "code": "ERR_NOT_FOUND"}),
        ),
        1.0
    );
    assert_eq!(
        sample(
            &after,
            "cairn_tool_calls",
            "cairn_tool_calls_total",
            json!({"tool": "(unknown)", "outcome": "error"}),
        ),
        1.0,
        "a made-up tool name is counted under one label"
    );
    assert!(
        !serde_json::to_string(&after)
            .unwrap()
            .contains("no_such_tool")
    );
    assert_eq!(
        sample(&after, "cairn_requests", "cairn_requests_total", json!({})),
        5.0
    );
    assert_eq!(
        sample(
            &after,
            "cairn_sessions_live",
            "cairn_sessions_live",
            json!({})
        ),
        1.0
    );
    // The model's counters: a query never seen runs the model; the same query again
    // comes from the query cache, without it.
    let model = |m: &Value, family: &str| sample(m, family, &format!("{family}_total"), json!({}));
    let query = json!({"query": "why do the checkout tests time out on monday mornings"});
    assert_eq!(
        d.call(&token, "search_learnings", query.clone())["isError"],
        false
    );
    let once = scrape(&d);
    assert!(model(&once, "cairn_model_texts") >= model(&after, "cairn_model_texts") + 1.0);
    assert!(model(&once, "cairn_model_runs") >= model(&after, "cairn_model_runs") + 1.0);
    assert_eq!(d.call(&token, "search_learnings", query)["isError"], false);
    let twice = scrape(&d);
    assert_eq!(
        model(&twice, "cairn_query_cache_hits"),
        model(&once, "cairn_query_cache_hits") + 1.0
    );
    // The work each search did, by unit (src/metrics/cost.rs): the first ran the model, the
    // second did not; both serialized an answer.
    let work = |m: &Value, unit: &str| {
        sample(
            m,
            "cairn_tool_work",
            "cairn_tool_work_total",
            json!({"tool": "search_learnings", "unit": unit}),
        )
    };
    assert!(work(&once, "model_runs") >= 1.0, "{once}");
    assert_eq!(work(&twice, "model_runs"), work(&once, "model_runs"));
    assert!(work(&twice, "bytes_serialized") > work(&once, "bytes_serialized"));
    assert!(work(&once, "bytes_serialized") > 0.0);
}

/// Resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn cairn_serve_logs_one_line_per_tool_call_at_its_default_level() {
    let env = Env::new();
    let mut child = env
        .cmd(&["serve", "--no-daemon"])
        .env_remove("CAIRN_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "server_ping", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "get_issue", "arguments": {"issue_id": "NOPE-1"}}}),
    ];
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
        if l.get("id").is_some() {
            let mut reply = String::new();
            out.read_line(&mut reply).unwrap();
        }
    }
    drop(stdin);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(child.wait().unwrap().success());
    let calls: Vec<&str> = err.lines().filter(|l| l.contains("tool call")).collect();
    assert_eq!(calls.len(), 2, "{err}");
    let session = format!("session=stdio-{}", child.id());
    assert!(
        calls[0].contains("tool=\"server_ping\"") && calls[0].contains("outcome=\"ok\""),
        "{err}"
    );
    assert!(
        calls[1].contains("tool=\"get_issue\"") && calls[1].contains("outcome=\"ERR_NOT_FOUND\""),
        "{err}"
    );
    assert!(
        calls
            .iter()
            .all(|c| c.contains(&session) && c.contains("ms=")),
        "{err}"
    );
}

/// Scrape until `family`'s one sample reads `want` (the daemon's background work), or
/// fail after [`HANG`].
fn await_gauge(d: &Daemon, family: &str, want: f64) {
    let deadline = std::time::Instant::now() + HANG;
    loop {
        let m = scrape(d);
        if sample(&m, family, family, json!({})) == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{family} never reached {want}: {}",
            m[family]
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_large_projects_learnings_are_searched_through_a_graph_with_the_exact_answer() {
    let env = Env::new();
    shop(&env);
    let (token, _) = mint(&env, &["--issue", "SHOP-1", "--agent-type", "worker"]);
    // A project of 30 learnings is past a threshold of 24: the daemon builds it a graph.
    let d = Daemon::start(&env, &[], &[("CAIRN_LEARNINGS_GRAPH_MIN", "24")]);
    let topics = [
        "the checkout service",
        "the billing cron job",
        "the search indexer",
        "the mobile push gateway",
        "the nightly data export",
        "the image resizer",
    ];
    let lessons = [
        "times out when the connection pool is smaller than the worker count",
        "must be restarted after the TLS certificate is rotated",
        "reads its feature flags once at start, so toggles need a deploy",
        "drops messages when the queue's visibility timeout is under its run time",
        "needs the UTC timezone; local time shifts its schedule twice a year",
    ];
    let mut n = 0.0;
    for t in topics {
        for l in lessons {
            let pattern = format!("{t} {l}");
            let r = d.call(
                &token,
                "add_learning",
                json!({"pattern": pattern, "merge": false}),
            );
            assert_eq!(r["isError"], false, "{r}");
            n += 1.0;
        }
    }
    await_gauge(&d, "cairn_learnings_pending_embeddings", 0.0);
    // No word of the query is in a learning: every hit comes from the nearest vectors.
    let words = "broker forgets tasks prior completion";
    let query = json!({"query": words, "limit": 10});
    let before = d.call(&token, "search_learnings", query.clone());
    assert_eq!(before["isError"], false, "{before}");
    // The search's refresh handed the project's vectors to the builder.
    await_gauge(&d, "cairn_learnings_graph_points", n);
    let through_graph = d.call(&token, "search_learnings", query)["structuredContent"].clone();
    // A one-shot process (no graph: the default threshold) scans exactly.
    let exact = env.json(&[
        "learnings",
        "search",
        words,
        "--limit",
        "10",
        "--project",
        "shop",
    ]);
    // Scores are f32 (the daemon's JSON prints them widened to f64, the CLI's as f32).
    let listed = |v: &Value| -> Vec<(String, Vec<(String, f32)>)> {
        crate::common::reading(v)
            .iter()
            .map(|h| {
                let score = h["score"].as_object().unwrap().iter();
                let score = score.map(|(k, x)| (k.clone(), x.as_f64().unwrap() as f32));
                (h["id"].as_str().unwrap().to_string(), score.collect())
            })
            .collect()
    };
    assert!(listed(&through_graph).len() >= 3, "{through_graph}");
    assert_eq!(listed(&through_graph), listed(&exact));
    assert_eq!(
        listed(&through_graph),
        listed(&before["structuredContent"]),
        "the same answer before the graph and through it"
    );
}

/// The tests the PostgreSQL pass skips (`-- --skip sqlite_only::`, README): each says why
/// it would prove nothing there.
mod sqlite_only {
    use super::*;

    #[test]
    fn ten_thousand_short_forwarder_sessions_leave_the_daemons_memory_where_it_was() {
        sqlite_only("the daemon's memory per session does not depend on the store");
        let env = Env::new();
        shop(&env);
        let d = Daemon::start(&env, &[], &[]);
        let socket = Path::new(&format!("{}.daemon.d", env.db.display())).join("mcp.sock");
        let cairn = env.open();
        // Each session is what a forwarder's is: a token bound to its process (this one),
        // one call over the daemon's socket, the token revoked at the end.
        let me = cairn::daemon::peer::Process::me().unwrap().binding();
        let bind = cairn::access::context::BindArgs {
            issue: Some("SHOP-1".into()),
            agent_type: Some("worker".into()),
            ..Default::default()
        };
        let session = || {
            let minted = cairn
                .mint_session_token(&bind, None, Duration::from_secs(3600), Some(&me))
                .unwrap();
            let (status, answer) = unix_http(&socket, &minted.token, &ping());
            assert_eq!(status, 200, "{answer}");
            assert_eq!(answer["result"]["isError"], false, "{answer}");
            cairn.revoke_session_token(&minted.info.id, "cli").unwrap();
        };
        // Warm up (allocator arenas, the database's page caches as the tokens table grows),
        // then measure around 10,000 more.
        for _ in 0..3_000 {
            session();
        }
        wait_for_live_sessions(&d, 0);
        let before = rss_kib(d.child.id());
        for _ in 0..10_000 {
            session();
        }
        wait_for_live_sessions(&d, 0);
        let after = rss_kib(d.child.id());
        eprintln!("daemon RSS: {before} KiB before, {after} KiB after 10,000 sessions");
        assert!(
            after <= before + 5 * 1024,
            "{before} KiB -> {after} KiB after 10,000 sessions"
        );
    }
}
