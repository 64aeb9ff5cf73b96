//! `cairn connect` / `cairn disconnect` (issue 57): for each client, the configuration
//! written in its own format and read back by the client's own command where it installs
//! from npm and reads its configuration offline (`claude mcp`, `codex mcp list`, `gemini
//! mcp list`, run with HOME in a temp dir and no network), else checked against the
//! client's published format (Cursor, VS Code: the test's name says so). Connect twice =
//! once; disconnect restores the files byte for byte; hostile files are refused and left
//! alone; a token never lands in a project file. The guide is what the official SDKs see
//! as the `initialize` instructions.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::common::{Env, bin, node, tree};
use crate::daemon::Daemon;

/// Files and their bytes (`common::tree`).
type Files = Vec<(PathBuf, Vec<u8>)>;

/// A database with the project `web`, a temp HOME and a project directory.
struct Setup {
    env: Env,
    home: tempfile::TempDir,
    proj: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let env = Env::new();
        env.project("web", None);
        let home = tempfile::tempdir().unwrap();
        let proj = env.path().join("proj");
        std::fs::create_dir(&proj).unwrap();
        Setup { env, home, proj }
    }

    fn home(&self) -> &Path {
        self.home.path()
    }

    /// `cairn ARGS` in the project's directory, with this HOME.
    fn cairn(&self, args: &[&str]) -> Command {
        let mut c = self.env.cmd(args);
        c.current_dir(&self.proj)
            .env("HOME", self.home())
            .env_remove("XDG_STATE_HOME")
            .env_remove("CODEX_HOME");
        c
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.cairn(args).output().unwrap();
        assert!(
            out.status.success(),
            "cairn {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Run `cairn ARGS`, expect exit status 1 or 2; its stderr.
    fn refused(&self, args: &[&str]) -> String {
        let out = self.cairn(args).output().unwrap();
        assert!(!out.status.success(), "cairn {args:?} succeeded");
        String::from_utf8(out.stderr).unwrap()
    }

    /// An agent CLI of tests/agents (npm), with this HOME, in the project, offline,
    /// killed after a minute (a CLI that waits for the network fails the test): its
    /// stdout, then a `--- stderr ---` line and its stderr.
    fn agent(&self, cli: &str, args: &[&str]) -> String {
        self.agent_in(cli, args, offline_by_namespace())
    }

    /// [`Setup::agent`], in a network namespace of its own when `namespace`, else behind
    /// the refusing proxy only.
    fn agent_in(&self, cli: &str, args: &[&str], namespace: bool) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/agents/node_modules/.bin")
            .join(cli);
        assert!(
            path.exists(),
            "{} is missing: run scripts/setup.sh (npm ci in tests/agents)",
            path.display()
        );
        let mut c = Command::new("timeout");
        c.arg("60");
        if namespace {
            c.args(["unshare", "--map-root-user", "--net"]);
        }
        let out = c
            .arg(&path)
            .args(args)
            .current_dir(&self.proj)
            .env("HOME", self.home())
            .env_remove("CODEX_HOME")
            .env_remove("XDG_CONFIG_HOME")
            // Where no network namespace can be made, a proxy that refuses stands in.
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .env("HTTP_PROXY", "http://127.0.0.1:9")
            .env("NO_PROXY", "")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(124), "{cli} {args:?} hung offline");
        assert!(
            out.status.success(),
            "{cli} {args:?}: {}\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
            // Gemini CLI prints its list on stderr.
            + "\n--- stderr ---\n"
            + &String::from_utf8_lossy(&out.stderr)
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.proj.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.proj.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// The project's and home's files, byte for byte.
    fn snapshot(&self) -> (Files, Files) {
        (tree(&self.proj), tree(self.home()))
    }

    /// The `serve` command line connect writes, as the clients show it.
    fn serve_args(&self) -> Vec<String> {
        let mut a = vec!["serve".to_string()];
        a.extend(
            self.env
                .db_args()
                .iter()
                .map(|s| s.to_string_lossy().into_owned()),
        );
        a.extend(["--project-id".into(), "web".into()]);
        a
    }
}

/// Whether this machine lets a test run a command in a network namespace of its own.
fn offline_by_namespace() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let ok = Command::new("unshare")
            .args(["--map-root-user", "--net", "true"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!("no network namespace here: the agent CLIs run behind a refusing proxy");
        }
        ok
    })
}

fn bin_str() -> String {
    bin().to_string_lossy().into_owned()
}

/// Connect, connect again (nothing changes), disconnect: every file as it was, byte for
/// byte. Then connect once more and check with `read_back` (the client's own command,
/// which writes files of its own in HOME), and disconnect: nothing of Cairn's is left in
/// the project, and the ledger is empty.
fn round_trip(s: &Setup, args: &[&str], read_back: impl Fn(&Setup)) {
    let before = s.snapshot();
    let mut connect = vec!["connect"];
    connect.extend_from_slice(args);
    s.ok(&connect);
    let once = s.snapshot();
    let again = s.ok(&connect);
    assert!(again.contains("already connected"), "{again}");
    assert_eq!(s.snapshot(), once, "a second connect changed a file");
    let mut disconnect = vec!["disconnect", args[0]];
    disconnect.extend(args.iter().skip_while(|a| **a != "--scope").take(2));
    s.ok(&disconnect);
    let after = s.snapshot();
    assert_eq!(after.0, before.0, "disconnect left the project changed");
    let home: Vec<_> = after
        .1
        .into_iter()
        .filter(|(p, _)| !p.starts_with(s.home().join(".local/state/cairn")))
        .collect();
    assert_eq!(home, before.1, "disconnect left the home changed");
    assert!(
        s.ok(&disconnect).contains("nothing"),
        "a second disconnect did something"
    );

    s.ok(&connect);
    read_back(s);
    s.ok(&disconnect);
    assert_eq!(
        tree(&s.proj),
        before.0,
        "the project kept something of Cairn's"
    );
    let ledger = s.home().join(".local/state/cairn/connect");
    assert!(
        tree(&ledger).is_empty(),
        "the ledger still holds {:?}",
        tree(&ledger)
    );
}

#[test]
fn claude_code_project_scope_read_back_by_claude_mcp_get() {
    let s = Setup::new();
    s.write(
        ".mcp.json",
        "{\"mcpServers\":{\"other\":{\"command\":\"true\"}}}",
    );
    s.write("CLAUDE.md", "# House rules\n\nRun the tests.\n");
    // The team's own settings and hooks stay, before Cairn's.
    s.write(
        ".claude/settings.json",
        "{\"permissions\": {\"allow\": [\"Bash(cargo test:*)\"]},\n \"hooks\": {\"SessionStart\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"echo hi\"}]}]}}\n",
    );
    round_trip(&s, &["claude-code", "--project", "web", "--hooks"], |s| {
        let got = s.agent("claude", &["mcp", "get", "cairn"]);
        assert!(got.contains("Scope: Project config"), "{got}");
        assert!(got.contains(&format!("Command: {}", bin_str())), "{got}");
        assert!(
            got.contains(&format!("Args: {}", s.serve_args().join(" "))),
            "{got}"
        );
        // The other server is still there.
        let other = s.agent("claude", &["mcp", "get", "other"]);
        assert!(other.contains("Command: true"), "{other}");
        let md = s.read("CLAUDE.md");
        assert!(
            md.starts_with("# House rules\n\nRun the tests.\n\n<!-- BEGIN cairn:guide"),
            "{md}"
        );
        assert!(md.contains(cairn::agents::GUIDE.trim()));
        let skill = s.read(".claude/skills/cairn/SKILL.md");
        assert!(
            skill.starts_with("---\nname: cairn\ndescription: "),
            "{skill}"
        );
        let settings: Value = serde_json::from_str(&s.read(".claude/settings.json")).unwrap();
        assert_eq!(settings["permissions"]["allow"][0], "Bash(cargo test:*)");
        assert_eq!(
            settings["hooks"]["SessionStart"][0]["hooks"][0]["command"],
            "echo hi"
        );
        for event in ["SessionStart", "UserPromptSubmit", "PreCompact", "Stop"] {
            let items = settings["hooks"][event].as_array().unwrap();
            let hook = &items[items.len() - 1]["hooks"][0];
            assert_eq!(hook["type"], "command", "{settings}");
            let cmd = hook["command"].as_str().unwrap();
            assert!(
                cmd.contains(" hook ") && cmd.contains("--project-id web"),
                "{cmd}"
            );
        }
    });
}

#[test]
fn claude_code_user_scope_connects_for_claude_mcp_list() {
    let s = Setup::new();
    // A user file Claude Code wrote before, with keys of its own.
    std::fs::write(
        s.home().join(".claude.json"),
        "{\n  \"numStartups\": 3,\n  \"projects\": {}\n}\n",
    )
    .unwrap();
    round_trip(
        &s,
        &["claude-code", "--project", "web", "--scope", "user"],
        |s| {
            // `claude mcp list` starts each user server and checks it answers MCP.
            // The server it starts must reach the PostgreSQL cluster on loopback, which a
            // network namespace of its own hides: there, the refusing proxy only.
            let namespace = offline_by_namespace() && !crate::common::on_postgres();
            let got = s.agent_in("claude", &["mcp", "list"], namespace);
            let line = got
                .lines()
                .find(|l| l.starts_with("cairn:"))
                .unwrap_or_else(|| panic!("{got}"));
            assert!(
                line.contains(&bin_str()) && line.contains("Connected"),
                "{got}"
            );
            let user: Value = serde_json::from_str(
                &std::fs::read_to_string(s.home().join(".claude.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(user["numStartups"], 3);
            assert_eq!(user["mcpServers"]["cairn"]["args"], json!(s.serve_args()));
        },
    );
}

#[test]
fn codex_read_back_by_codex_mcp_list() {
    let s = Setup::new();
    let codex = s.home().join(".codex");
    std::fs::create_dir(&codex).unwrap();
    let original = "# my settings\nmodel = \"o4\"  # keep this comment\n\n[mcp_servers.other]\ncommand = \"true\"\n";
    std::fs::write(codex.join("config.toml"), original).unwrap();
    round_trip(&s, &["codex", "--project", "web"], |s| {
        let listed = s.agent("codex", &["mcp", "list", "--json"]);
        let stdout = listed.split("\n--- stderr ---\n").next().unwrap();
        let got: Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {listed}"));
        let cairn = got
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "cairn")
            .unwrap_or_else(|| panic!("{got}"));
        assert_eq!(cairn["transport"]["type"], "stdio");
        assert_eq!(cairn["transport"]["command"], bin_str());
        assert_eq!(cairn["transport"]["args"], json!(s.serve_args()));
        assert!(got.as_array().unwrap().iter().any(|e| e["name"] == "other"));
        let toml = std::fs::read_to_string(s.home().join(".codex/config.toml")).unwrap();
        assert!(
            toml.starts_with(original),
            "the comments and order moved:\n{toml}"
        );
        assert!(s.read("AGENTS.md").contains("<!-- BEGIN cairn:guide"));
    });
}

#[test]
fn gemini_cli_read_back_by_gemini_mcp_list() {
    let s = Setup::new();
    s.write(".gemini/settings.json", "{\n  \"theme\": \"GitHub\"\n}\n");
    round_trip(&s, &["gemini-cli", "--project", "web", "--hooks"], |s| {
        let got = s.agent("gemini", &["mcp", "list"]);
        let expected = format!("cairn: {} {} (stdio)", bin_str(), s.serve_args().join(" "));
        assert!(got.contains(&expected), "{expected:?} not in:\n{got}");
        let settings: Value = serde_json::from_str(&s.read(".gemini/settings.json")).unwrap();
        assert_eq!(settings["theme"], "GitHub");
        // The hooks, in the form Gemini CLI 0.61's hook registry reads (its bundle:
        // `hooks.<Event>` arrays of `{hooks: [{type: "command", command, timeout}]}`,
        // timeout in milliseconds; Claude Code's Stop is its AfterAgent).
        for event in ["SessionStart", "BeforeAgent", "PreCompress", "AfterAgent"] {
            let hook = &settings["hooks"][event][0]["hooks"][0];
            assert_eq!(hook["type"], "command", "{settings}");
            assert_eq!(hook["timeout"], 10_000);
            assert!(
                hook["command"]
                    .as_str()
                    .unwrap()
                    .contains("--client gemini-cli")
            );
        }
        assert!(s.read("GEMINI.md").contains(cairn::agents::GUIDE.trim()));
    });
}

#[test]
fn cursor_checked_against_cursors_published_format() {
    // Cursor is a desktop application: no command of it reads its configuration offline.
    // Its documented format (docs.cursor.com, "Model Context Protocol"): `mcpServers`
    // with `command`/`args` (or `url`/`headers`), and rules as `.mdc` with front matter.
    let s = Setup::new();
    round_trip(&s, &["cursor", "--project", "web"], |s| {
        let mcp: Value = serde_json::from_str(&s.read(".cursor/mcp.json")).unwrap();
        assert_eq!(
            mcp,
            json!({"mcpServers": {"cairn": {"command": bin_str(), "args": s.serve_args()}}})
        );
        let rule = s.read(".cursor/rules/cairn.mdc");
        assert!(
            rule.starts_with("---\ndescription: ") && rule.contains("\nalwaysApply: true\n---\n"),
            "{rule}"
        );
    });
}

#[test]
fn vscode_checked_against_vscodes_published_format() {
    // VS Code reads `.vscode/mcp.json` (code.visualstudio.com, "MCP servers"): `servers`
    // with `type` "stdio" and `command`/`args`; no command reads it outside the editor.
    let s = Setup::new();
    s.write(".github/copilot-instructions.md", "Prefer small PRs.\n");
    round_trip(&s, &["vscode", "--project", "web"], |s| {
        let mcp: Value = serde_json::from_str(&s.read(".vscode/mcp.json")).unwrap();
        assert_eq!(
            mcp,
            json!({"servers": {"cairn": {"type": "stdio", "command": bin_str(), "args": s.serve_args()}}})
        );
        assert!(
            s.read(".github/copilot-instructions.md")
                .starts_with("Prefer small PRs.\n\n<!-- BEGIN cairn:guide")
        );
    });
}

#[test]
fn generic_prints_the_mcp_servers_json_and_writes_nothing() {
    let s = Setup::new();
    let out: Value =
        serde_json::from_str(&s.ok(&["connect", "generic", "--project", "web"])).unwrap();
    assert_eq!(out["mcpServers"]["cairn"]["command"], bin_str());
    assert_eq!(out["mcpServers"]["cairn"]["args"], json!(s.serve_args()));
    assert!(tree(&s.proj).is_empty());
}

#[test]
fn dry_run_shows_the_diff_and_writes_nothing() {
    let s = Setup::new();
    s.write("AGENTS.md", "# Agents\n");
    let before = s.snapshot();
    let diff = s.ok(&["connect", "codex", "--project", "web", "--dry-run"]);
    assert!(
        diff.contains("+++ ") && diff.contains("+[mcp_servers.cairn]"),
        "{diff}"
    );
    assert!(
        diff.contains(" # Agents\n+\n+<!-- BEGIN cairn:guide"),
        "{diff}"
    );
    assert_eq!(s.snapshot(), before);
    let planned: Value = serde_json::from_str(&s.ok(&[
        "connect",
        "codex",
        "--project",
        "web",
        "--dry-run",
        "--json",
    ]))
    .unwrap();
    assert_eq!(planned["action"], "connect");
    assert_eq!(planned["dry_run"], true);
    let files = planned["files"].as_array().unwrap();
    assert_eq!(files.len(), 2, "{planned}");
    assert!(
        files
            .iter()
            .all(|f| f["changed"] == true && f["diff"].is_string())
    );
    assert_eq!(s.snapshot(), before);
    s.ok(&["connect", "codex", "--project", "web"]);
    let undo = s.ok(&["disconnect", "codex", "--dry-run"]);
    assert!(undo.contains("-[mcp_servers.cairn]"), "{undo}");
    assert!(
        std::fs::read_to_string(s.proj.join("AGENTS.md"))
            .unwrap()
            .contains("cairn:guide")
    );
}

#[test]
fn disconnect_after_someone_else_edited_the_file_takes_out_only_its_own_entry() {
    let s = Setup::new();
    s.write(".cursor/mcp.json", "{\"mcpServers\": {}}\n");
    s.ok(&["connect", "cursor", "--project", "web"]);
    let mut mcp: Value = serde_json::from_str(&s.read(".cursor/mcp.json")).unwrap();
    mcp["mcpServers"]["mine"] = json!({"command": "mine"});
    s.write(".cursor/mcp.json", &mcp.to_string());
    s.ok(&["disconnect", "cursor"]);
    let left: Value = serde_json::from_str(&s.read(".cursor/mcp.json")).unwrap();
    assert_eq!(left, json!({"mcpServers": {"mine": {"command": "mine"}}}));
    assert!(!s.proj.join(".cursor/rules/cairn.mdc").exists());
    // A file deleted after connect stays deleted at disconnect, and the ledger forgets it.
    s.ok(&["connect", "cursor", "--project", "web"]);
    std::fs::remove_file(s.proj.join(".cursor/mcp.json")).unwrap();
    s.ok(&["disconnect", "cursor"]);
    assert!(!s.proj.join(".cursor/mcp.json").exists());
    assert!(tree(&s.home().join(".local/state/cairn/connect")).is_empty());
}

#[test]
fn hostile_configuration_files_are_refused_and_left_alone() {
    let s = Setup::new();
    let outside = s.env.path().join("outside.json");
    std::fs::write(&outside, "{}").unwrap();
    std::os::unix::fs::symlink(&outside, s.proj.join(".mcp.json")).unwrap();
    let err = s.refused(&["connect", "claude-code", "--project", "web", "--no-guide"]);
    assert!(err.contains("is a symlink"), "{err}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "{}");
    std::fs::remove_file(s.proj.join(".mcp.json")).unwrap();

    // A directory on the way that links elsewhere.
    let elsewhere = s.env.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, s.proj.join(".cursor")).unwrap();
    let err = s.refused(&["connect", "cursor", "--project", "web"]);
    assert!(err.contains(".cursor is a symlink"), "{err}");
    assert!(tree(&elsewhere).is_empty());

    let cases: [(&str, &str, &str); 4] = [
        (
            ".gemini/settings.json",
            "{\"mcpServers\": {\"a\": 1,}}",
            "not strict JSON",
        ),
        (".gemini/settings.json", "// comment\n{}", "not strict JSON"),
        (
            ".gemini/settings.json",
            "{\"a\": 1, \"a\": 2}",
            "duplicate key",
        ),
        (".gemini/settings.json", "[1, 2]", "not an object"),
    ];
    for (file, text, why) in cases {
        s.write(file, text);
        let err = s.refused(&["connect", "gemini-cli", "--project", "web"]);
        assert!(err.contains(why), "{text:?}: {err}");
        assert_eq!(s.read(file), text, "{text:?} was rewritten");
    }
    // Invalid TOML in the user's Codex file.
    let codex = s.home().join(".codex/config.toml");
    std::fs::create_dir_all(codex.parent().unwrap()).unwrap();
    std::fs::write(&codex, "[mcp_servers\ncommand = ").unwrap();
    let err = s.refused(&["connect", "codex", "--project", "web"]);
    assert!(err.contains("not valid TOML"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&codex).unwrap(),
        "[mcp_servers\ncommand = "
    );
    // A huge file (sparse: its size is what counts).
    let huge = std::fs::File::create(s.proj.join(".mcp.json")).unwrap();
    huge.set_len(cairn::agents::files::MAX_FILE_BYTES + 1)
        .unwrap();
    let err = s.refused(&["connect", "claude-code", "--project", "web"]);
    assert!(err.contains("more than the"), "{err}");
    std::fs::remove_file(s.proj.join(".mcp.json")).unwrap();
    // A server of the same name that connect did not write is not replaced.
    s.write(
        ".mcp.json",
        "{\"mcpServers\": {\"cairn\": {\"command\": \"someone-else\"}}}",
    );
    let err = s.refused(&["connect", "claude-code", "--project", "web"]);
    assert!(err.contains("mcpServers.cairn is already there"), "{err}");
    assert!(s.read(".mcp.json").contains("someone-else"));
    s.ok(&[
        "connect",
        "claude-code",
        "--project",
        "web",
        "--name",
        "cairn-web",
        "--no-guide",
    ]);
    assert!(s.read(".mcp.json").contains("\"cairn-web\""));
    // Bad names and bad bindings are refused before any file is read.
    for (args, why) in [
        (
            vec!["connect", "claude-code", "--name", "../x"],
            "--name must be",
        ),
        (
            vec!["connect", "claude-code", "--project", "nope"],
            "project not found",
        ),
        (vec!["connect", "emacs"], "not a client Cairn connects"),
        (
            vec!["connect", "codex", "--hooks"],
            "takes `cairn hook` in its own",
        ),
    ] {
        let err = s.refused(&args);
        assert!(err.contains(why), "{args:?}: {err}");
    }
}

#[test]
fn http_connect_keeps_the_token_out_of_the_project_and_the_token_works() {
    let s = Setup::new();
    let d = Daemon::start(&s.env, &[], &[]);
    let out = s
        .cairn(&["connect", "claude-code", "--project", "web", "--http"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The token is in the user's file, Claude Code's private "local" scope, mode 0600.
    let user_file = s.home().join(".claude.json");
    let user: Value = serde_json::from_str(&std::fs::read_to_string(&user_file).unwrap()).unwrap();
    let dir = std::path::absolute(&s.proj).unwrap();
    let entry = &user["projects"][dir.to_str().unwrap()]["mcpServers"]["cairn"];
    assert_eq!(entry["type"], "http");
    assert_eq!(entry["url"], d.url());
    let auth = entry["headers"]["Authorization"].as_str().unwrap();
    let token = auth.strip_prefix("Bearer ").unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&user_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    for (path, bytes) in tree(&s.proj) {
        assert!(
            !String::from_utf8_lossy(&bytes).contains(token),
            "the token is in {}",
            path.display()
        );
    }
    // The daemon serves that token, bound to the project.
    let found = d.call(token, "search_learnings", json!({"query": "anything"}));
    assert_eq!(found["isError"], json!(false), "{found}");
    // Connecting again reuses the active token: nothing changes.
    let user_bytes = std::fs::read(&user_file).unwrap();
    let again = s.ok(&["connect", "claude-code", "--project", "web", "--http"]);
    assert!(again.contains("already connected"), "{again}");
    assert_eq!(std::fs::read(&user_file).unwrap(), user_bytes);
    // Claude Code reads the entry for this project.
    let got = s.agent("claude", &["mcp", "get", "cairn"]);
    assert!(got.contains("Type: http") && got.contains(d.url()), "{got}");
    s.ok(&["disconnect", "claude-code"]);
    // Codex and Gemini CLI read their HTTP entries (the token in the user's files only).
    s.ok(&[
        "connect",
        "codex",
        "--project",
        "web",
        "--http",
        "--no-guide",
    ]);
    s.ok(&[
        "connect",
        "gemini-cli",
        "--project",
        "web",
        "--http",
        "--no-guide",
    ]);
    let listed = s.agent("codex", &["mcp", "list", "--json"]);
    let stdout = listed.split("\n--- stderr ---\n").next().unwrap();
    let codex: Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {listed}"));
    let entry = &codex[0];
    assert_eq!(entry["name"], "cairn", "{codex}");
    assert_eq!(entry["transport"]["url"], d.url(), "{codex}");
    let gemini = s.agent("gemini", &["mcp", "list"]);
    assert!(
        gemini.contains(&format!("cairn: {} (http)", d.url())),
        "{gemini}"
    );
    for file in [".codex/config.toml", ".gemini/settings.json"] {
        let p = s.home().join(file);
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600,
            "{file}"
        );
        assert!(
            std::fs::read_to_string(&p)
                .unwrap()
                .contains("Bearer cairn_"),
            "{file}"
        );
    }
    for (path, bytes) in tree(&s.proj) {
        assert!(
            !String::from_utf8_lossy(&bytes).contains("cairn_"),
            "a token is in {}",
            path.display()
        );
    }
    assert!(
        !s.home().join(".claude.json").exists()
            || !std::fs::read_to_string(&user_file).unwrap().contains(token)
    );
}

#[test]
fn the_guide_is_the_initialize_instructions_the_official_sdks_see() {
    let env = Env::new();
    for mode in ["auto", "legacy"] {
        let seen = crate::mcp_contract::python_sdk(&env, mode, &[], json!([]));
        assert_eq!(
            seen["instructions"],
            cairn::agents::GUIDE,
            "python SDK, {mode}"
        );
    }
    let db = env.db_args();
    let mut args = vec![bin().into_os_string()];
    args.extend(db[1..].iter().cloned());
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let out = node("drive.mjs", &args, b"[]");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["instructions"], cairn::agents::GUIDE, "TypeScript SDK");
}

#[test]
fn the_guide_names_only_tools_that_exist() {
    let names: Vec<&str> = cairn::mcp::registry::all_tools()
        .iter()
        .map(|t| t.name)
        .collect();
    let guide = cairn::agents::GUIDE;
    let mut named = 0;
    for word in guide.split('`').skip(1).step_by(2) {
        // Words in backquotes that look like tool names (the field and value names the
        // guide also quotes are listed).
        if word.contains('_')
            && !word.contains(' ')
            && !["applies_to", "help_prompt", "not_relevant"].contains(&word)
        {
            assert!(names.contains(&word), "the guide names {word}, not a tool");
            named += 1;
        }
    }
    assert!(named >= 4, "the guide names {named} tools");
}
