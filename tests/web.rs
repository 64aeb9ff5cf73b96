//! The daemon's web page (`/ui/`) in a real browser: Debian's Chromium driven by
//! Selenium (`tests/web_ui.py`). A person logs in with a one-time login URL, searches
//! learnings and sees the order `search_learnings` gives over MCP; hostile text renders
//! inert; a learning verified and another superseded on the page are seen so through
//! MCP; an issue's trail shows verified, then, once the test forges a record in the
//! database, where it breaks; nobody else gets in (no cookie, an agent's token, the
//! login URL a second time, a cross-site post); a person's token opens no MCP session. Each page's screenshot is saved and
//! checked not to be blank.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::Env;
use crate::daemon::{Daemon, mint, shop};

const LESSONS: [&str; 6] = [
    "Run the database migrations before seeding the test fixtures, never after the seed step",
    "Seeding fixtures twice duplicates rows: truncate the tables first or seed inside a transaction",
    "Migrations that rename columns break the seed script until its INSERT statements are updated",
    "The payment webhook retries for 24 hours: make the handler idempotent by the event id",
    "Cache invalidation on deploy: bump the asset hash, the CDN keeps old files for a day",
    "Test fixtures load in alphabetical order, so a fixture that others reference needs a 00_ prefix",
];

const HOSTILE: [&str; 2] = [
    "<img src=x onerror=alert(1)> breaks the rendering of the release notes page in the admin view",
    "See the release notes page at javascript:window.__pwned=1 for the admin view rendering fix",
];

fn ids(result: &Value) -> Vec<String> {
    result["structuredContent"]["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{result}"))
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect()
}

/// `tests/web_ui.py` running `plan` in Chromium.
fn browse(plan: &Value) -> Child {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web_ui.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(plan.to_string().as_bytes())
        .unwrap();
    child
}

/// What the browser saw: the script's JSON.
fn seen(child: Child) -> Value {
    let out = child.wait_with_output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "web_ui.py printed no JSON ({e}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn a_person_logs_in_searches_like_the_tool_and_hostile_text_stays_inert() {
    let env = Env::new();
    shop(&env);
    let mut added = Vec::new();
    for pattern in LESSONS.iter().chain(&HOSTILE) {
        let a = env.json(&[
            "learnings",
            "add",
            "--issue",
            "SHOP-1",
            "--pattern",
            pattern,
        ]);
        added.push(
            a["id"]
                .as_str()
                .unwrap_or_else(|| panic!("{a}"))
                .to_string(),
        );
    }
    let handbook = env.path().join("handbook");
    std::fs::create_dir_all(&handbook).unwrap();
    std::fs::write(
        handbook.join("deploy.md"),
        "# Deploy guide\n\n## Rolling back\n\nRoll back by redeploying the previous release \
         tag; never revert the database schema.\n\n## Seeding\n\nSeed the fixtures once, \
         inside a transaction.\n",
    )
    .unwrap();
    env.json(&["reindex", handbook.to_str().unwrap()]);
    let (agent, agent_id) = mint(&env, &["--issue", "SHOP-2", "--agent-type", "worker"]);
    // Another agent's token for the checks after the page revoked the first.
    let (checker, _) = mint(&env, &["--issue", "SHOP-2", "--agent-type", "worker"]);
    let d = Daemon::start(&env, &[], &[]);
    let human = env.json(&["session", "new", "--human", "--name", "alice"]);
    let login_url = human["login_url"].as_str().unwrap().to_string();
    assert!(
        login_url.starts_with(&d.url().replace("/mcp", "/ui/login?code=cairn_")),
        "{login_url}"
    );
    let query = "seed the test fixtures after migrations";
    let expected = ids(&d.call(&agent, "search_learnings", json!({"query": query})));
    assert!(expected.len() >= 3, "{expected:?}");

    let shots = std::env::var_os("CAIRN_UI_SHOTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env.path().join("shots"));
    let mut plan = json!({
        "base": d.url().trim_end_matches("/mcp"),
        "login_url": login_url,
        "agent_token": agent,
        "query": query,
        "project": "shop",
        "hostile_query": "release notes admin view rendering",
        "shots": shots,
        "verify": added[0],
        "flag": added[1],
        "old": added[3],
        "new": added[4],
        "archive": added[5],
        "archive_query": "fixtures load in alphabetical order",
    });
    // SHOP-2's trail: a finding and two comments, one of them hostile.
    for (tool, args) in [
        (
            "add_finding",
            json!({"category": "bug", "summary": "the seed step runs twice"}),
        ),
        (
            "add_comment",
            json!({"content": "Seed once, inside a transaction."}),
        ),
        (
            "add_comment",
            json!({"content": "<script>window.__pwned=2</script> fixed?"}),
        ),
    ] {
        assert_eq!(d.call(&agent, tool, args)["isError"], false);
    }
    let ready = env.path().join("ready");
    let tampered = env.path().join("tampered");
    plan["issue"] = json!("SHOP-2");
    plan["vault_query"] = json!("how do I roll back a release");
    plan["agent_id"] = json!(agent_id);
    plan["ready"] = json!(ready);
    plan["tampered"] = json!(tampered);
    let mut child = browse(&plan);
    // Once the browser has seen the trail verified, forge its second record.
    let deadline = Instant::now() + Duration::from_secs(180);
    while !ready.exists() && Instant::now() < deadline && child.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(50));
    }
    if ready.exists() {
        env.tamper(
            &[("trail_records", "trail_records_no_update")],
            "UPDATE trail_records SET body = '{\"content\":\"forged\"}' WHERE position = 2 \
             AND issue_id = (SELECT id FROM issues WHERE identifier = 'SHOP-2');",
        );
        std::fs::write(&tampered, "tampered").unwrap();
    }
    let seen = seen(child);

    assert!(seen.get("error").is_none(), "{seen:#}");
    // Nobody logged in, an agent's token, the login URL a second time: refused.
    assert_eq!(seen["anonymous"]["title"], "Log in · Cairn", "{seen:#}");
    assert!(
        seen["anonymous"]["text"]
            .as_str()
            .unwrap()
            .contains("not logged in")
    );
    assert_eq!(seen["anonymous"]["hits"], json!([]));
    assert_eq!(seen["agent_login"]["title"], "Log in · Cairn", "{seen:#}");
    assert_eq!(seen["agent_login"]["cookie"], false);
    assert_eq!(seen["second_login"]["title"], "Log in · Cairn", "{seen:#}");
    assert_eq!(seen["second_login"]["cookie"], false);
    // The login: an HttpOnly, SameSite=Strict cookie, then the learnings page.
    let login = &seen["login"];
    assert_eq!(login["http_only"], true, "{seen:#}");
    assert_eq!(login["same_site"], "Strict", "{seen:#}");
    // Its path is the login's own place, `/ui/<32 hex>`, where the pages are.
    let place = login["path"].as_str().unwrap();
    let key = place
        .strip_prefix("/ui/")
        .unwrap_or_else(|| panic!("cookie path {place}: {seen:#}"));
    assert!(
        key.len() == 32 && key.bytes().all(|b| b.is_ascii_hexdigit()),
        "{place}"
    );
    let base = d.url().trim_end_matches("/mcp");
    assert_eq!(
        login["url"].as_str().unwrap(),
        format!("{base}{place}/learnings"),
        "{seen:#}"
    );
    assert_eq!(
        (&seen["place"]["url"], &seen["place"]["title"]),
        (&login["url"], &json!("Learnings · Cairn")),
        "{seen:#}"
    );
    // A page of another loopback port that the logged-in person opens (an agent's dev
    // server): its server gets no cookie of the person's, what it could replay opens
    // nothing, and the cookies it tossed log nobody out (every curation page below
    // works).
    let other = &seen["other_port"];
    assert_eq!(other["title"], "done", "the page's script ran: {seen:#}");
    assert!(
        other["received"].as_array().unwrap().len() >= 5,
        "its fetches reached its server: {seen:#}"
    );
    let real = other["real"].as_str().unwrap();
    assert_eq!(real.len(), 64, "{seen:#}");
    assert!(
        !other["values"].as_array().unwrap().contains(&json!(real)),
        "the person's cookie went to another port: {seen:#}"
    );
    for (replay, status) in other["replays"].as_object().unwrap() {
        assert_eq!(status, 401, "{replay}: {seen:#}");
    }
    // The pictures: learnings over time (8 added today) and the quality distribution,
    // SVG with shapes and labels, no script.
    let pictures = &seen["pictures"];
    let over_time = &pictures["picture over-time"];
    let quality = &pictures["picture quality"];
    for p in [over_time, quality] {
        assert_eq!(p["svgs"], 1, "{seen:#}");
        assert!(p["shapes"].as_u64().unwrap() > 3, "{seen:#}");
    }
    assert!(
        over_time["text"]
            .as_array()
            .unwrap()
            .contains(&json!("Learnings per day")),
        "{seen:#}"
    );
    // One day of activity: a point for each of added, confirmed and superseded.
    assert!(over_time["points"].as_u64().unwrap() >= 3, "{seen:#}");
    assert!(
        quality["text"]
            .as_array()
            .unwrap()
            .contains(&json!("Quality scores")),
        "{seen:#}"
    );
    // The same order as the tool.
    assert_eq!(seen["search"]["hits"], json!(expected), "{seen:#}");
    // Hostile text is shown as text: no element, no script, no alert, no live link.
    let hostile = &seen["hostile"];
    let patterns: Vec<&str> = hostile["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    for h in HOSTILE {
        assert!(patterns.contains(&h), "{h} not shown as text: {seen:#}");
    }
    assert_eq!(hostile["images"], 0, "{seen:#}");
    // The only links are to the learnings' own pages, never one from stored text.
    for href in hostile["links_in_hits"].as_array().unwrap() {
        let href = href.as_str().unwrap();
        let id = href
            .strip_prefix(&format!("{base}{place}/learnings/"))
            .unwrap_or_else(|| panic!("a link out of the page: {href}"));
        assert!(added.iter().any(|a| a == id), "{href}");
    }
    assert_eq!(hostile["scripts"], 0, "{seen:#}");
    assert_eq!(hostile["alert"], false, "{seen:#}");
    assert!(hostile["pwned"].is_null(), "{seen:#}");
    // Every screenshot shows something.
    for (name, s) in seen["shots"].as_object().unwrap() {
        assert!(
            s["range"].as_u64().unwrap() > 100 && s["colours"].as_u64().unwrap() > 8,
            "screenshot {name} looks blank: {s}"
        );
        assert!(Path::new(s["path"].as_str().unwrap()).exists());
    }

    // Verified and superseded on the page, seen through MCP, attributed to the person.
    assert!(
        seen["verified"]["url"]
            .as_str()
            .unwrap()
            .ends_with(&added[0])
    );
    assert_eq!(seen["verified"]["verified"], "yes", "{seen:#}");
    assert!(
        seen["verified"]["events"]
            .as_array()
            .unwrap()
            .contains(&json!("verified"))
    );
    assert_eq!(seen["superseded"]["by"], added[4].as_str(), "{seen:#}");
    let hits = d.call(&checker, "search_learnings", json!({"query": query}));
    let first = hits["structuredContent"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == added[0].as_str())
        .unwrap_or_else(|| panic!("{hits}"));
    assert_eq!(first["verified"], true, "{first}");
    assert_eq!(seen["flagged"]["flag"], "wrong, needs review", "{seen:#}");
    assert!(
        seen["flagged"]["events"]
            .as_array()
            .unwrap()
            .contains(&json!("flagged"))
    );
    let found = d.call(
        &checker,
        "search_learnings",
        json!({"query": "seeding fixtures twice duplicates rows"}),
    );
    let flagged = found["structuredContent"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == added[1].as_str())
        .unwrap_or_else(|| panic!("{found}"));
    assert_eq!(flagged["needs_review"], true, "{flagged}");
    let webhook = "payment webhook retries idempotent handler";
    let shown = ids(&d.call(&checker, "search_learnings", json!({"query": webhook})));
    assert!(!shown.contains(&added[3]), "superseded left out: {shown:?}");
    let all = d.call(
        &checker,
        "search_learnings",
        json!({"query": webhook, "include_superseded": true}),
    );
    let old = all["structuredContent"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == added[3].as_str())
        .unwrap_or_else(|| panic!("{all}"));
    assert_eq!(old["superseded_by"], added[4].as_str(), "{old}");
    // Archived on the page: out of every agent's search, even with superseded ones;
    // the page's filter brings it back marked; restored from the CLI, agents find it.
    let archived = &seen["archived"];
    assert!(archived["at"].is_string(), "{seen:#}");
    assert!(
        archived["events"]
            .as_array()
            .unwrap()
            .contains(&json!("archived")),
        "{seen:#}"
    );
    assert_eq!(
        (&archived["restore"], &archived["archive"]),
        (&json!(1), &json!(0))
    );
    assert!(
        !archived["hits"]
            .as_array()
            .unwrap()
            .contains(&json!(added[5])),
        "{seen:#}"
    );
    assert!(
        archived["hits_with_archived"]
            .as_array()
            .unwrap()
            .contains(&json!(added[5])),
        "{seen:#}"
    );
    assert_eq!(archived["marked"].as_array().unwrap().len(), 1, "{seen:#}");
    let fixtures =
        json!({"query": "fixtures load in alphabetical order", "include_superseded": true});
    let shown = ids(&d.call(&checker, "search_learnings", fixtures.clone()));
    assert!(!shown.contains(&added[5]), "archived left out: {shown:?}");
    let back = env.json(&["learnings", "restore", &added[5], "--note", "still true"]);
    assert!(back.get("archived_at").is_none(), "{back}");
    let shown = ids(&d.call(&checker, "search_learnings", fixtures));
    assert!(shown.contains(&added[5]), "restored: {shown:?}");
    let events: Vec<String> = env
        .json(&["learnings", "history", &added[5]])
        .as_array()
        .unwrap_or_else(|| panic!("no history"))
        .iter()
        .map(|h| {
            format!(
                "{} {}",
                h["event"].as_str().unwrap(),
                h["actor"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        events[1..],
        [
            "archived person:alice".to_string(),
            "restored cli".to_string()
        ],
        "{events:?}"
    );
    let history = env.json(&["learnings", "show", &added[0]]);
    assert!(
        history.to_string().contains("person:alice"),
        "the person is recorded: {history}"
    );
    // The issues, one trail verified, then broken where it was forged.
    assert!(
        seen["issues"]
            .as_array()
            .unwrap()
            .contains(&json!("SHOP-2")),
        "{seen:#}"
    );
    let issue = &seen["issue"];
    assert!(
        issue["verified"]
            .as_str()
            .unwrap_or_default()
            .contains("3 records"),
        "{seen:#}"
    );
    assert!(issue["broken"].is_null(), "{seen:#}");
    assert!(
        issue["comments"]
            .as_array()
            .unwrap()
            .contains(&json!("<script>window.__pwned=2</script> fixed?")),
        "{seen:#}"
    );
    assert_eq!(issue["scripts"], 0, "{seen:#}");
    assert!(issue["pwned"].is_null(), "{seen:#}");
    let t = &seen["tampered"];
    assert!(t["verified"].is_null(), "{seen:#}");
    assert!(
        t["broken"]
            .as_str()
            .unwrap_or_default()
            .contains("does not verify"),
        "{seen:#}"
    );
    assert_eq!(
        t["breaks"][0][0], "2",
        "the break is at the forged record: {seen:#}"
    );
    assert_eq!(t["breaks"][0][2], "content", "{seen:#}");

    // The vault: the collection, a search with heading paths, the document's chunks.
    let vault = &seen["vault"];
    assert_eq!(vault["collections"], json!(["handbook"]), "{seen:#}");
    assert_eq!(vault["hits"][0], "deploy.md", "{seen:#}");
    assert_eq!(
        vault["headings"][0], "Deploy guide > Rolling back",
        "{seen:#}"
    );
    assert_eq!(seen["document"]["title"], "Document · Cairn", "{seen:#}");
    assert!(
        seen["document"]["chunks"].as_u64().unwrap() >= 2,
        "{seen:#}"
    );
    // The service: this daemon's calls per tool, the learnings, the tokens; the agent's
    // token revoked on the page is refused on /mcp.
    let service = &seen["service"];
    assert!(
        service["tools"]["search_learnings"]
            .as_str()
            .unwrap_or_default()
            .parse::<u64>()
            .unwrap_or(0)
            >= 1,
        "{seen:#}"
    );
    assert_eq!(
        service["learnings"],
        (LESSONS.len() + HOSTILE.len()).to_string(),
        "{seen:#}"
    );
    assert_eq!(service["tokens"][&agent_id], "active", "{seen:#}");
    assert!(
        service["latency_pictures"]
            .as_array()
            .unwrap()
            .contains(&json!("search_learnings")),
        "a latency histogram per tool: {seen:#}"
    );
    assert_eq!(seen["revoked"]["state"], "revoked", "{seen:#}");
    assert_eq!(seen["revoked"]["by"], "person:alice", "{seen:#}");
    let (status, body) = d.rpc(&agent, "tools/list", json!({}));
    assert_eq!(
        (status, &body["error"]["code"]),
        (401, &json!("TOKEN_REVOKED")),
        "{body}"
    );

    // An error page's way back leads to a page.
    assert_eq!(
        seen["problem_page"]["title"], "Not done · Cairn",
        "{seen:#}"
    );
    assert_eq!(
        seen["problem_page"]["back"]["title"], "Learnings · Cairn",
        "{seen:#}"
    );
    // Cross-site requests change nothing; the form token is no function of the cookie
    // (one computed from it is refused), and the browser's cookie among tossed ones of
    // the same name is the one used.
    assert_eq!(seen["form_token"]["derived_from_cookie"], false, "{seen:#}");
    let cross = &seen["cross_site"];
    for k in [
        "foreign_origin",
        "no_origin",
        "wrong_token",
        "no_token",
        "computed_token",
    ] {
        assert_eq!(cross[k], 403, "{k}: {seen:#}");
    }
    assert_eq!(seen["quality_after_cross_site"], "50", "{seen:#}");
    assert_eq!(seen["several_cookies"], 200, "{seen:#}");

    // A person's token opens no MCP session.
    let (status, body) = d.rpc(human["token"].as_str().unwrap(), "tools/list", json!({}));
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "TOKEN_HUMAN", "{body}");
}

/// A command's stdout; panics with its stderr when it fails.
fn output(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A TLS-terminating nginx in front of the daemon, configured as docs/deployment.md
/// shows, with a self-signed certificate for `cairn.localhost` (Chromium resolves
/// `*.localhost` to loopback). Stopped when dropped.
struct Proxy {
    child: Child,
    /// `https://cairn.localhost:PORT`.
    origin: String,
    /// The base64 SHA-256 of the certificate's public key, for the browser to trust.
    spki: String,
}

impl Proxy {
    /// Its certificate and port, before the daemon it forwards to is known.
    fn prepare(dir: &Path) -> (u16, String) {
        std::fs::create_dir_all(dir).unwrap();
        output(Command::new("openssl").current_dir(dir).args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=cairn.localhost",
            "-addext",
            "subjectAltName=DNS:cairn.localhost",
            "-keyout",
            "key.pem",
            "-out",
            "cert.pem",
        ]));
        let spki = output(Command::new("sh").current_dir(dir).args([
            "-c",
            "openssl x509 -in cert.pem -pubkey -noout | openssl pkey -pubin -outform der \
             | openssl dgst -sha256 -binary | base64",
        ]));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        (port, spki.trim().to_string())
    }

    fn start(dir: &Path, port: u16, spki: String, daemon: std::net::SocketAddr) -> Proxy {
        let d = dir.display();
        let conf = format!(
            "daemon off; master_process off; pid {d}/nginx.pid; error_log {d}/error.log;
events {{}}
http {{
    access_log off;
    client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port} ssl;
        server_name cairn.localhost;
        ssl_certificate     {d}/cert.pem;
        ssl_certificate_key {d}/key.pem;
        location /mcp {{
            proxy_pass http://{daemon};
            proxy_set_header Host {daemon};
            proxy_buffering off;
        }}
        location /ui/ {{
            proxy_pass http://{daemon};
            proxy_set_header Host {daemon};
        }}
    }}
}}
"
        );
        std::fs::write(dir.join("nginx.conf"), conf).unwrap();
        let nginx = ["/usr/sbin/nginx", "nginx"]
            .into_iter()
            .find(|n| Command::new(n).arg("-v").output().is_ok())
            .expect("nginx not found: scripts/setup.sh --browser installs it");
        let mut child = Command::new(nginx)
            .args(["-p", &d.to_string(), "-c", &format!("{d}/nginx.conf")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nginx");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "nginx exited ({status}): {}",
                    std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "nginx did not listen on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Proxy {
            child,
            origin: format!("https://cairn.localhost:{port}"),
            spki,
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_person_curates_through_a_tls_proxy_in_front_of_the_daemon() {
    let env = Env::new();
    shop(&env);
    let added = env.json(&[
        "learnings",
        "add",
        "--issue",
        "SHOP-1",
        "--pattern",
        LESSONS[0],
    ]);
    let id = added["id"].as_str().unwrap_or_else(|| panic!("{added}"));
    let dir = env.path().join("proxy");
    let (port, spki) = Proxy::prepare(&dir);
    let origin = format!("https://cairn.localhost:{port}");
    let d = Daemon::start(&env, &["--public-origin", &origin], &[]);
    let proxy = Proxy::start(&dir, port, spki, d.addr);
    assert_eq!(proxy.origin, origin);
    // The login URL is the proxy's address.
    let human = env.json(&["session", "new", "--human", "--name", "carol"]);
    let login_url = human["login_url"].as_str().unwrap();
    assert!(
        login_url.starts_with(&format!("{origin}/ui/login?code=cairn_")),
        "{login_url}"
    );
    let plan = json!({
        "mode": "proxy",
        "login_url": login_url,
        "trust_spki": proxy.spki,
        "verify": id,
    });
    let seen = seen(browse(&plan));
    assert!(seen.get("error").is_none(), "{seen:#}");
    assert!(
        seen["login"]["url"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{origin}/ui/")),
        "{seen:#}"
    );
    // Behind https the cookie is Secure.
    assert_eq!(seen["login"]["secure"], true, "{seen:#}");
    // The curation POST, with the browser's `Origin: https://cairn.localhost:PORT`, is
    // accepted and recorded as the person's.
    assert_eq!(seen["verified"]["title"], "Learning · Cairn", "{seen:#}");
    assert_eq!(seen["verified"]["verified"], "yes", "{seen:#}");
    let history = env.json(&["learnings", "show", id]);
    assert_eq!(history["verified"], true, "{history}");
    assert!(
        history.to_string().contains("person:carol"),
        "the person is recorded: {history}"
    );
}
