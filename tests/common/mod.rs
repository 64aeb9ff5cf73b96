//! The test DSL: a temp directory per test with its own database, the real `cairn`
//! binary, and a real MCP client (rmcp) talking to `cairn serve` over stdio.
//!
//! Every call made through [`Client::call`] is checked against the contract that the
//! official clients enforce: a successful `structuredContent` must validate against the
//! tool's `outputSchema` (JSON Schema 2020-12, fetched once per client with
//! `tools/list`), and an error must carry no `structuredContent` and the envelope
//! (`status`, `error.code`, `error.message`) as JSON text. A schema lie fails the test
//! that made the call, wherever it is. The check is strict ([`undeclared`]): every
//! property a result carries must be declared in the `outputSchema`. The output schemas
//! are derived from the result types, but what the derive cannot see (a
//! `#[schemars(with = ...)]`, a hand-written `Serialize`, a free-form `Value`) can still
//! say something other than the result.

#![allow(dead_code)]

pub mod pg;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

/// The twelve Colibri tools, as the spec names them (written here, not read from the
/// registry, so the tests check the registry against it).
pub const COLIBRI_TOOLS: [&str; 12] = [
    "task_create",
    "task_get",
    "task_update",
    "task_list",
    "task_next_actions",
    "thought_record",
    "thought_record_list",
    "audit_session_start",
    "audit_verify_chain",
    "merkle_finalize",
    "merkle_root",
    "skill_list",
];

/// Every regular file under `dir` (symlinks not followed) with its content.
pub fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if m.is_dir() {
                stack.push(p);
            } else if m.is_file() {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

/// Path of the binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cairn"))
}

/// The store the suite runs against: SQLite files (the default), or, with
/// `CAIRN_TEST_STORE=postgres`, a fresh database per test on the process's throwaway
/// PostgreSQL cluster ([`pg::PgCluster`]). One switch, the same tests.
pub fn on_postgres() -> bool {
    match std::env::var("CAIRN_TEST_STORE").as_deref() {
        Ok("postgres") => true,
        Ok("sqlite") | Err(_) => false,
        Ok(other) => panic!("CAIRN_TEST_STORE={other}: expected sqlite or postgres"),
    }
}

/// The first line of a test that is inherently about SQLite files, or touches no shared
/// store at all (the model, the evaluation sets: the PostgreSQL pass would only repeat
/// it), with the reason (listed in docs/postgres.md, "Tests on both stores"). Such tests
/// live in a module named `sqlite_only`, which the PostgreSQL pass skips (`cargo test
/// --test tests -- --skip sqlite_only::`, README), so its summary counts them as
/// "filtered out". Run on the PostgreSQL pass anyway, the test fails here and says why,
/// rather than passing without having run.
pub fn sqlite_only(why: &str) {
    assert!(
        !on_postgres(),
        "a SQLite-only test, which the PostgreSQL pass skips (`-- --skip sqlite_only::`): {why}"
    );
}

/// A temp dir and a fresh database: a SQLite file in the temp dir, or a PostgreSQL
/// database whose host-local files (indexes, daemon files) are in the temp dir.
pub struct Env {
    pub dir: tempfile::TempDir,
    /// The anchor of the database's local files: the SQLite file, or
    /// `<temp>/cache/postgres` (indexes in `<db>.index/`, daemon files `<db>.daemon.*`).
    pub db: PathBuf,
    /// What `--db` names: the SQLite path or the PostgreSQL URL.
    pub location: String,
}

impl Env {
    pub fn new() -> Env {
        if on_postgres() {
            return Env::host(&pg::PgCluster::shared().create_database("cairn"));
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("cairn.db");
        let location = db.to_string_lossy().into_owned();
        Env { dir, db, location }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The directory of this host's derived indexes: `<db>.index/` beside the anchor
    /// (the SQLite file, or `<temp>/cache/postgres`).
    pub fn index_dir(&self) -> PathBuf {
        PathBuf::from(format!("{}.index", self.db.display()))
    }

    /// `--db <location>` (and `--cache-dir` on PostgreSQL): the arguments that name this
    /// database on a `cairn` command line.
    pub fn db_args(&self) -> Vec<std::ffi::OsString> {
        let mut a = vec!["--db".into(), self.location.clone().into()];
        if self.is_postgres() {
            a.push("--cache-dir".into());
            a.push(self.db.parent().expect("cache dir").into());
        }
        a
    }

    /// The database as the library names it.
    pub fn store_location(&self) -> cairn::store::Location {
        cairn::store::Location::parse(
            &self.location,
            self.db.parent().filter(|_| self.is_postgres()),
        )
    }

    /// Whether the database is a PostgreSQL one (whatever `CAIRN_TEST_STORE` says: the
    /// two-host tests use PostgreSQL always).
    pub fn is_postgres(&self) -> bool {
        self.location.starts_with("postgres://")
    }

    /// Another host on the same PostgreSQL database `url`: its own temp dir, whose
    /// `cache/` holds that host's indexes and daemon files.
    pub fn host(url: &str) -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("cache").join("postgres");
        Env {
            dir,
            db,
            location: url.to_string(),
        }
    }

    /// Open the database in this process.
    pub fn open(&self) -> cairn::Cairn {
        cairn::Cairn::open_at(&self.store_location()).expect("open the database")
    }

    /// The database through the library's store: for tests that act as someone with
    /// direct database access, on either store.
    pub fn store(&self) -> cairn::store::Store {
        cairn::store::Store::open_at(&self.store_location()).expect("open the store")
    }

    /// Run `sql` (several statements) in one write transaction on the database.
    pub fn sql(&self, sql: &str) -> Result<(), String> {
        self.store()
            .write(|c| c.execute_batch(sql))
            .map_err(|e| e.to_string())
    }

    /// As an attacker with database access: take `triggers` (`(table, trigger)`) out of
    /// the way (SQLite drops them, PostgreSQL disables them), then run `sql`.
    pub fn tamper(&self, triggers: &[(&str, &str)], sql: &str) {
        self.store()
            .write(|c| {
                for (table, trigger) in triggers {
                    c.execute_batch(&match c.dialect() {
                        cairn::store::db::Dialect::Sqlite => format!("DROP TRIGGER {trigger}"),
                        cairn::store::db::Dialect::Postgres => {
                            format!("ALTER TABLE {table} DISABLE TRIGGER {trigger}")
                        }
                    })?;
                }
                c.execute_batch(sql)
            })
            .expect("tamper with the database");
    }

    /// A `cairn` command with `--db` set, run in the temp dir.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(self.db_args()).args(args).current_dir(self.path());
        c.env_remove("CAIRN_DB");
        c.env_remove("CAIRN_CACHE_DIR");
        c
    }

    /// Run `cairn` and return its output, whatever the exit status.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run cairn")
    }

    /// Run `cairn`, assert success, return stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "cairn {args:?} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Run `cairn ... --json` and parse stdout.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.push("--json");
        serde_json::from_str(&self.ok(&a)).expect("json stdout")
    }

    /// Create a project (slug and prefix from `slug`), optionally with a repo path:
    /// what `cairn project create --slug S --name S [--path P]` does, through the facade
    /// in this process (a set-up step; `cli_basics.rs` tests the command itself).
    pub fn project(&self, slug: &str, path: Option<&Path>) {
        let cairn = self.open();
        cairn
            .create_project(&cairn::issues::NewProject {
                slug: slug.to_string(),
                name: slug.to_string(),
                prefix: None,
                path: path.map(|p| {
                    std::path::absolute(self.path().join(p))
                        .expect("absolute path")
                        .to_string_lossy()
                        .into_owned()
                }),
            })
            .expect("create the project");
    }

    /// Create an issue and return its identifier: what `cairn issue create --project P
    /// --title T` does, through the facade in this process.
    pub fn issue(&self, project: &str, title: &str) -> String {
        self.create_issue(cairn::issues::NewIssue {
            project: project.to_string(),
            title: title.to_string(),
            ..Default::default()
        })
    }

    /// Create an issue with a priority and dependencies and return its identifier: what
    /// `cairn issue create --project P --title T --priority N [--depends-on D]...` does,
    /// through the facade in this process.
    pub fn issue_ranked(
        &self,
        project: &str,
        title: &str,
        priority: u8,
        depends_on: &[&str],
    ) -> String {
        self.create_issue(cairn::issues::NewIssue {
            project: project.to_string(),
            title: title.to_string(),
            priority: Some(priority),
            depends_on: depends_on.iter().map(|d| d.to_string()).collect(),
            ..Default::default()
        })
    }

    /// Create `issue` through the facade and return its identifier.
    fn create_issue(&self, issue: cairn::issues::NewIssue) -> String {
        self.open()
            .create_issue(&issue)
            .expect("create the issue")
            .identifier
    }

    /// An issue with its trail, as `cairn issue trail ISSUE` prints it, read through
    /// the facade.
    pub fn issue_trail(&self, issue: &str) -> Value {
        to_json(&self.open().issue_details(issue).expect("read the trail"))
    }

    /// A person's status change: what `cairn issue status ISSUE TO [--reason R]` does,
    /// through the facade in this process (a set-up step; the command's own output and
    /// exit codes are tested where they are the subject).
    pub fn set_status(&self, issue: &str, to: &str, reason: Option<&str>) {
        let to = cairn::issues::Status::parse(to).unwrap_or_else(|| panic!("status {to}"));
        self.open()
            .update_issue_status(issue, to, reason, "cli", false)
            .unwrap_or_else(|e| panic!("{issue} -> {to}: {e}"));
    }

    /// An issue as `cairn issue show ISSUE --json` prints it, read through the facade.
    pub fn issue_json(&self, issue: &str) -> Value {
        to_json(&self.open().issue(issue).expect("read the issue"))
    }

    /// An issue's trail verification, as `cairn findings ISSUE --verify --json` prints
    /// it, through the facade.
    pub fn verify_trail(&self, issue: &str) -> Value {
        to_json(&self.open().verify_trail(issue).expect("verify the trail"))
    }

    /// Record a learning as `cairn learnings add --issue ISSUE --pattern PATTERN
    /// [--context C] [--applies-to A]... [--no-merge] --json` does, through the facade in
    /// this process (a one-shot writer, like the command); what the command prints.
    pub fn add_learning(
        &self,
        issue: &str,
        pattern: &str,
        context: Option<&str>,
        applies_to: &[&str],
        merge: bool,
    ) -> Value {
        let added = self
            .open()
            .add_learning(&cairn::learnings::NewLearning {
                issue: issue.to_string(),
                pattern: pattern.to_string(),
                context: context.map(String::from),
                applies_to: applies_to.iter().map(|a| a.to_string()).collect(),
                learning_type: None,
                created_by: "cli".to_string(),
                agent_type: "cli".to_string(),
                merge,
                supersedes: Vec::new(),
                person: true,
            })
            .expect("record the learning");
        to_json(&added)
    }

    /// A learning as `cairn learnings show ID --json` prints it, through the facade.
    pub fn learning_json(&self, id: &str) -> Value {
        to_json(&self.open().learning(id).expect("read the learning"))
    }

    /// Start `cairn serve` with extra flags and connect an rmcp client to it.
    pub async fn serve(&self, flags: &[&str]) -> Client {
        self.serve_env(flags, &[]).await
    }

    /// [`Env::serve`] with extra environment variables for the server process.
    pub async fn serve_env(&self, flags: &[&str], envs: &[(&str, &str)]) -> Client {
        self.spawn_serve(flags, envs, Stdio::inherit()).await
    }

    /// [`Env::serve`] with the server's log (`CAIRN_LOG=info`) in a file of the temp dir,
    /// whose path is returned beside the client: what the server said on stderr.
    pub async fn serve_logged(&self, flags: &[&str]) -> (Client, PathBuf) {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = self.path().join(format!("serve-{n}.log"));
        let file = std::fs::File::create(&log).expect("create the server's log");
        let client = self
            .spawn_serve(flags, &[("CAIRN_LOG", "info")], Stdio::from(file))
            .await;
        (client, log)
    }

    async fn spawn_serve(&self, flags: &[&str], envs: &[(&str, &str)], stderr: Stdio) -> Client {
        let db = self.db_args();
        let envs: Vec<(String, String)> = envs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let dir = self.path().to_path_buf();
        let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        let transport =
            TokioChildProcess::builder(tokio::process::Command::new(bin()).configure(|c| {
                c.args(&db).arg("serve").args(&flags).current_dir(&dir);
                c.env("CAIRN_LOG", "warn");
                c.envs(envs.iter().map(|(k, v)| (k, v)));
            }))
            .stderr(stderr)
            .spawn()
            .expect("spawn cairn serve")
            .0;
        let service = ().serve(transport).await.expect("MCP handshake");
        Client {
            service,
            validators: tokio::sync::OnceCell::new(),
        }
    }
}

/// The flags of `cairn serve` that [`Env::serve_local`] understands.
const LOCAL_FLAGS: [&str; 7] = [
    "--issue-id",
    "--project-id",
    "--worktree-path",
    "--agent-type",
    "--tool-scope-file",
    "--project-slug",
    "--symphony-dir",
];

impl Env {
    /// `cairn serve <flags>` in this process: the database opened here, bound and scoped
    /// as `cairn serve` does it, served by `CairnServer` over its line transport on an
    /// in-memory pipe, with an rmcp client on the other end. `--worktree-path` is passed
    /// as given (the server refuses a relative one, as `cairn serve` does); a relative
    /// `--symphony-dir` or `--tool-scope-file` is taken relative to the temp dir, the
    /// working directory of [`Env::serve`]'s process. Panics where `cairn serve` would
    /// refuse to start.
    pub async fn serve_local(&self, flags: &[&str]) -> Client {
        let mut values: HashMap<&str, String> = HashMap::new();
        let mut it = flags.iter();
        while let Some(flag) = it.next() {
            assert!(
                LOCAL_FLAGS.contains(flag),
                "serve_local: unknown flag {flag}"
            );
            let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
            values.insert(flag, value.to_string());
        }
        let path = |flag: &str| values.get(flag).map(|v| self.path().join(v));
        let cairn = self.open();
        let work = cairn
            .bind(&cairn::access::context::BindArgs {
                issue: values.get("--issue-id").cloned(),
                project: values.get("--project-id").cloned(),
                worktree_path: values.get("--worktree-path").map(PathBuf::from),
                agent_type: values.get("--agent-type").cloned(),
                project_slug: values.get("--project-slug").cloned(),
                symphony_dir: path("--symphony-dir"),
            })
            .expect("binding the server");
        let scope = cairn::mcp::server::Scope::resolve(
            path("--tool-scope-file").as_deref(),
            values.get("--agent-type").map(String::as_str),
        )
        .expect("reading the tool scope");
        let server = cairn::mcp::server::CairnServer::new(
            Arc::new(cairn),
            work,
            scope,
            Arc::new(cairn::mcp::lanes::Lanes::unlimited()),
        );
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let (read, write) = tokio::io::split(server_io);
        tokio::spawn(async move {
            let transport = cairn::mcp::wire::LineTransport::new(read, write);
            if let Ok(running) = server.serve(transport).await {
                let _ = running.waiting().await;
            }
        });
        let service = ().serve(tokio::io::split(client_io)).await.expect("MCP handshake");
        Client {
            service,
            validators: tokio::sync::OnceCell::new(),
        }
    }
}

/// An rmcp client connected to one `cairn serve`.
pub struct Client {
    pub service: RunningService<RoleClient, ()>,
    /// Output-schema validators and the schemas by tool name, from this server's
    /// `tools/list`.
    validators: tokio::sync::OnceCell<HashMap<String, Arc<OutputCheck>>>,
}

/// What a call returned: the structured result of a success, the envelope of an error.
pub fn body(r: &CallToolResult) -> Value {
    if r.is_error == Some(true) {
        envelope_of(r)
    } else {
        r.structured_content.clone().unwrap_or(Value::Null)
    }
}

/// The error envelope of a failed call, from its text content.
pub fn envelope_of(r: &CallToolResult) -> Value {
    let text = r
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// A tool's `outputSchema`, and the JSON Schema validator built from it.
pub struct OutputCheck {
    pub schema: Value,
    pub validator: jsonschema::Validator,
}

/// The strict half of the output check: where `value` carries a property that `schema`
/// does not declare at that level (through `items`, `anyOf`/`oneOf` and
/// `additionalProperties`), or lacks a `required` one. JSON Schema itself lets an
/// undeclared property through; a result with one means the output schema has drifted
/// from what the code serializes. Returns one line per problem, with its path.
pub fn undeclared(schema: &Value, value: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    undeclared_at(schema, value, "", &mut problems);
    problems
}

/// Whether `value` is of a type `schema` names (or `schema` names none) and, for a
/// `const`, equal to it: the branches of an `anyOf` that can describe the value.
fn fits(schema: &Value, value: &Value) -> bool {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let names = |t: &Value| t == kind || (t == "number" && kind == "integer");
    let typed = match schema.get("type") {
        Some(Value::Array(ts)) => ts.iter().any(names),
        Some(t) => names(t),
        None => true,
    };
    typed && schema.get("const").is_none_or(|c| c == value)
}

fn undeclared_at(schema: &Value, value: &Value, path: &str, problems: &mut Vec<String>) {
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            let mut best: Option<Vec<String>> = None;
            for b in branches.iter().filter(|b| fits(b, value)) {
                let mut p = Vec::new();
                undeclared_at(b, value, path, &mut p);
                if best.as_ref().is_none_or(|x| p.len() < x.len()) {
                    best = Some(p);
                }
            }
            problems.extend(best.unwrap_or_default());
        }
    }
    match value {
        Value::Object(obj) => {
            if let Some(Value::Array(required)) = schema.get("required") {
                for r in required.iter().filter_map(Value::as_str) {
                    if !obj.contains_key(r) {
                        problems.push(format!("{path}/{r}: required but absent"));
                    }
                }
            }
            let props = schema.get("properties").and_then(Value::as_object);
            let describes_objects = props.is_some()
                || schema.get("type").is_some_and(|t| {
                    t == "object"
                        || t.as_array()
                            .is_some_and(|ts| ts.iter().any(|t| t == "object"))
                });
            if !describes_objects {
                return;
            }
            for (k, v) in obj {
                let at = format!("{path}/{k}");
                match (
                    props.and_then(|p| p.get(k)),
                    schema.get("additionalProperties"),
                ) {
                    (Some(s), _) => undeclared_at(s, v, &at, problems),
                    (None, Some(Value::Bool(true))) => {}
                    (None, Some(s @ Value::Object(_))) => undeclared_at(s, v, &at, problems),
                    (None, _) => problems.push(format!("{at}: not declared in the outputSchema")),
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    undeclared_at(s, item, &format!("{path}/{i}"), problems);
                }
            }
        }
        _ => {}
    }
}

/// Assert what every official client needs of a result (see the module comment).
pub fn check_result(name: &str, r: &CallToolResult, check: Option<&OutputCheck>) {
    if r.is_error == Some(true) {
        assert!(
            r.structured_content.is_none(),
            "{name}: an error result must not carry structuredContent (clients validate it \
             against the outputSchema): {r:?}"
        );
        let env = envelope_of(r);
        assert!(
            env["status"].is_string()
                && env["error"]["code"].is_string()
                && env["error"]["message"].is_string(),
            "{name}: error text is not an envelope: {r:?}"
        );
        return;
    }
    let Some(value) = &r.structured_content else {
        panic!("{name}: a success without structuredContent: {r:?}");
    };
    if let Some(check) = check {
        let problems: Vec<String> = check
            .validator
            .iter_errors(value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            problems.is_empty(),
            "{name}: result does not match its outputSchema: {problems:#?}\nresult: {value:#}"
        );
        let problems = undeclared(&check.schema, value);
        assert!(
            problems.is_empty(),
            "{name}: result does not match its outputSchema (see the result type's derive and \
             its #[schemars] attributes): {problems:#?}\nresult: {value:#}"
        );
    }
}

impl Client {
    async fn validators(&self) -> &HashMap<String, Arc<OutputCheck>> {
        self.validators
            .get_or_init(|| async {
                let tools = self.service.list_all_tools().await.expect("tools/list");
                tools
                    .into_iter()
                    .filter_map(|t| {
                        let schema = Value::Object((*t.output_schema?).clone());
                        let validator = jsonschema::draft202012::new(&schema).unwrap_or_else(|e| {
                            panic!("{}: outputSchema is not valid JSON Schema: {e}", t.name)
                        });
                        let check = OutputCheck { schema, validator };
                        Some((t.name.to_string(), Arc::new(check)))
                    })
                    .collect()
            })
            .await
    }

    /// Call a tool; the result is checked with [`check_result`].
    pub async fn call(&self, name: &str, args: Value) -> CallToolResult {
        let mut p = CallToolRequestParams::new(name.to_string());
        if let Value::Object(map) = args {
            p = p.with_arguments(map);
        }
        let r = self
            .service
            .call_tool(p)
            .await
            .expect("tools/call transport");
        let validator = self.validators().await.get(name).cloned();
        check_result(name, &r, validator.as_deref());
        r
    }

    /// Call a tool, assert it succeeded, return its structured content.
    pub async fn ok(&self, name: &str, args: Value) -> Value {
        let r = self.call(name, args.clone()).await;
        let body = body(&r);
        assert_ne!(r.is_error, Some(true), "{name}({args}) failed: {body:#}");
        body
    }

    /// Call a tool, assert it failed, return the error envelope.
    pub async fn err(&self, name: &str, args: Value) -> Value {
        let r = self.call(name, args.clone()).await;
        let body = body(&r);
        assert_eq!(
            r.is_error,
            Some(true),
            "{name}({args}) unexpectedly succeeded: {body:#}"
        );
        body
    }

    /// Call a tool, assert it failed with `code`, return the envelope.
    pub async fn err_code(&self, name: &str, args: Value, code: &str) -> Value {
        let body = self.err(name, args).await;
        assert_eq!(body["error"]["code"], code, "{body:#}");
        body
    }

    pub async fn tool_names(&self) -> Vec<String> {
        self.service
            .list_all_tools()
            .await
            .expect("tools/list")
            .into_iter()
            .map(|t| t.name.to_string())
            .collect()
    }

    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// A value as the CLI's `--json` prints it (the same serialisation), for reading what
/// the facade returns as the tests read the CLI's output.
pub fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("serialise")
}

/// The learnings a `search_learnings` result (or `cairn learnings search --json`) gives,
/// in reading order: each hit, then those listed under it as saying much the same.
pub fn reading(result: &Value) -> Vec<Value> {
    result["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results: {result}"))
        .iter()
        .flat_map(|h| {
            std::iter::once(h.clone()).chain(h["similar"].as_array().into_iter().flatten().cloned())
        })
        .collect()
}

/// The field names of a VALIDATION_FAILED envelope.
pub fn error_fields(envelope: &Value) -> Vec<String> {
    envelope["error"]["details"]["errors"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e["field"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Run `cmd` with `stdin` written to it and stdout and stderr captured (the SDK drivers).
pub fn piped(cmd: &mut Command, stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a test driver (python3 with the MCP SDK, node 20: scripts/setup.sh)");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

/// Run a node script of `tests/mcp_ts` (installed by scripts/setup.sh with `npm ci`).
pub fn node(script: &str, args: &[&std::ffi::OsStr], stdin: &[u8]) -> Output {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_ts");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "tests/mcp_ts/node_modules is missing: run scripts/setup.sh (npm ci)"
    );
    piped(
        Command::new("node")
            .arg(dir.join(script))
            .args(args)
            .current_dir(&dir),
        stdin,
    )
}
