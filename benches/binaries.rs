//! The Cairn binaries a benchmark compares (`benches/load.rs`, `benches/learnings.rs`,
//! which include this file): this build's, then the baselines that
//! `CAIRN_BENCH_BASELINE` names, so that one run shows the current build beside a
//! previous one, alternating on the same machine.
//!
//! `CAIRN_BENCH_BASELINE` is a comma-separated list; each item is
//! - a path to a `cairn` binary, labelled by the commit checked out where it lies (or by
//!   its path outside a git checkout), or `label=path`;
//! - or a commit (anything `git rev-parse` resolves in this checkout): the bench checks it
//!   out in a worktree under `target/baselines/<commit>/src`, links this checkout's
//!   `models/` files into it and builds it there in release, once (`cargo build --release
//!   --bin cairn`, its own target directory beside the worktree; later runs reuse it).
//!
//! Every binary gets the model files of this checkout (`CAIRN_MODEL_DIR`, `CAIRN_ORT_LIB`,
//! unless already set), so all of them run the same model, and each works on its own
//! database that it seeded itself: an older binary knows only its own schema.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

pub type Client = RunningService<RoleClient, ()>;

/// One binary under test.
#[derive(Debug, Clone)]
pub struct Binary {
    /// How the tables name it: `current`, or the baseline's commit or label.
    pub label: String,
    pub path: PathBuf,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// This build's binary, then the baselines of `CAIRN_BENCH_BASELINE` (see the module
/// docs).
pub fn binaries() -> Vec<Binary> {
    let mut out = vec![Binary {
        label: "current".into(),
        path: PathBuf::from(env!("CARGO_BIN_EXE_cairn")),
    }];
    let list = std::env::var("CAIRN_BENCH_BASELINE").unwrap_or_default();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (label, what) = match item.split_once('=') {
            Some((l, w)) => (Some(l.to_string()), w),
            None => (None, item),
        };
        let b = if Path::new(what).is_file() {
            let path = std::fs::canonicalize(what).unwrap();
            Binary {
                label: label.unwrap_or_else(|| commit_of(&path)),
                path,
            }
        } else {
            let commit = resolve(what).unwrap_or_else(|| {
                panic!("CAIRN_BENCH_BASELINE: {what:?} is neither a file nor a commit")
            });
            Binary {
                label: label.unwrap_or_else(|| commit[..7].to_string()),
                path: build(&commit),
            }
        };
        out.push(b);
    }
    out
}

/// The short commit checked out where `binary` lies, or its path.
fn commit_of(binary: &Path) -> String {
    Command::new("git")
        .arg("-C")
        .arg(binary.parent().unwrap())
        .args(["rev-parse", "--short=7", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| binary.display().to_string())
}

fn resolve(rev: &str) -> Option<String> {
    let o = Command::new("git")
        .arg("-C")
        .arg(repo())
        .args([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ])
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"))
}

/// `commit` built in release in its own worktree (see the module docs); its binary.
fn build(commit: &str) -> PathBuf {
    let home = target_dir().join("baselines").join(commit);
    let src = home.join("src");
    let binary = home.join("target/release/cairn");
    if binary.is_file() {
        return binary;
    }
    if !src.join("Cargo.toml").is_file() {
        run(Command::new("git")
            .arg("-C")
            .arg(repo())
            .args(["worktree", "add", "--detach"])
            .arg(&src)
            .arg(commit));
    }
    for dir in ["all-minilm-l6-v2-int8", "onnxruntime"] {
        let link = src.join("models").join(dir);
        if !link.exists() {
            std::os::unix::fs::symlink(
                std::fs::canonicalize(repo().join("models").join(dir)).unwrap(),
                &link,
            )
            .unwrap();
        }
    }
    eprintln!(
        "[baseline] building {commit} in release under {}",
        home.display()
    );
    run(Command::new("cargo")
        .current_dir(&src)
        .env("CARGO_TARGET_DIR", home.join("target"))
        .args(["build", "--release", "--bin", "cairn"]));
    binary
}

fn run(c: &mut Command) {
    let status = c.status().unwrap();
    assert!(status.success(), "{c:?} failed");
}

impl Binary {
    /// A command running this binary with the model files of this checkout.
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.path);
        model_env(&mut c);
        c
    }

    /// Run the CLI on `db`; its stdout, or a panic with its stderr.
    pub fn cli(&self, db: &Path, args: &[&str]) -> String {
        let out = self
            .command()
            .arg("--db")
            .arg(db)
            .args(args)
            .env("CAIRN_LOG", "warn")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} {args:?}: {}",
            self.label,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Start `cairn serve` bound to `issue` with extra arguments and environment; the
    /// client and the server's pid.
    pub async fn stdio(
        &self,
        db: &Path,
        issue: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> (Client, u32) {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (transport, _) =
            TokioChildProcess::builder(tokio::process::Command::new(&self.path).configure(|c| {
                c.arg("--db")
                    .arg(db)
                    .arg("serve")
                    .args(["--issue-id", issue])
                    .args(&extra);
                c.env("CAIRN_LOG", "warn");
                for (k, v) in model_files() {
                    c.env(k, v);
                }
                for (k, v) in &env {
                    c.env(k, v);
                }
            }))
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = transport.id().unwrap();
        (().serve(transport).await.unwrap(), pid)
    }
}

/// `CAIRN_MODEL_DIR` and `CAIRN_ORT_LIB` of this checkout's `models/`, where not set.
fn model_files() -> Vec<(&'static str, PathBuf)> {
    let models = repo().join("models");
    [
        ("CAIRN_MODEL_DIR", models.join("all-minilm-l6-v2-int8")),
        (
            "CAIRN_ORT_LIB",
            models.join("onnxruntime/libonnxruntime.so"),
        ),
    ]
    .into_iter()
    .filter(|(k, _)| std::env::var_os(k).is_none())
    .collect()
}

fn model_env(c: &mut Command) {
    for (k, v) in model_files() {
        c.env(k, v);
    }
}

/// Call a tool; whether it succeeded.
pub async fn call(c: &Client, tool: &str, args: Value) -> bool {
    let Value::Object(map) = args else {
        unreachable!()
    };
    let p = CallToolRequestParams::new(tool.to_string()).with_arguments(map);
    match c.call_tool(p).await {
        Ok(r) => r.is_error != Some(true),
        Err(_) => false,
    }
}

/// Whether the server's `tool` takes the argument `name` (older binaries reject what
/// they do not know: `add_learning`'s `merge` came with issue 35).
pub async fn takes(c: &Client, tool: &str, name: &str) -> bool {
    let tools = c.list_all_tools().await.unwrap();
    tools.iter().find(|t| t.name == tool).is_some_and(|t| {
        t.input_schema
            .get("properties")
            .and_then(|p| p.get(name))
            .is_some()
    })
}

/// Add learnings through a connected server's `add_learning`, `in_flight` calls at a
/// time, with `merge: false` where the server knows it (no duplicate check: a corpus
/// keeps every learning it is given). Panics on a failed call.
pub async fn add_learnings(c: &Client, learnings: Vec<Value>, in_flight: usize) {
    let merge = takes(c, "add_learning", "merge").await;
    let peer = c.peer().clone();
    let mut pending = tokio::task::JoinSet::new();
    for mut args in learnings {
        if merge {
            args["merge"] = Value::Bool(false);
        }
        while pending.len() >= in_flight {
            pending.join_next().await.unwrap().unwrap();
        }
        let peer = peer.clone();
        pending.spawn(async move {
            let Value::Object(map) = args else {
                unreachable!()
            };
            let p = CallToolRequestParams::new("add_learning").with_arguments(map.clone());
            let r = peer.call_tool(p).await.unwrap();
            assert!(r.is_error != Some(true), "add_learning {map:?}: {r:?}");
        });
    }
    while let Some(r) = pending.join_next().await {
        r.unwrap();
    }
}

/// The machine's load average over the last minute (`/proc/loadavg`; NaN elsewhere).
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}
