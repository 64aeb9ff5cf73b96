//! The work tools through the real binary and an MCP client: `verify_workspace`,
//! `update_memory`, `complete_phase`, `approve_phase`, `reject_phase`, `move_issue`,
//! with the path-safety cases of every tool that takes a path or a file name.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::common::{Client, Env, error_fields};

/// A project `p` whose repository is a git worktree of issue P-1, with its marker.
struct Work {
    env: Env,
    /// The worktree (and project path).
    wt: PathBuf,
    /// The Symphony root for memory.
    sym: PathBuf,
    issue: String,
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Work {
    fn new() -> Work {
        let env = Env::new();
        let wt = env.path().join("wt");
        let sym = env.path().join("symphony");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::create_dir_all(&sym).unwrap();
        git(&wt, &["init", "-q", "-b", "symphony/P-1"]);
        env.project("p", Some(&wt));
        let issue = env.issue("p", "Token budgets");
        std::fs::write(wt.join(".symphony-worktree"), format!("{issue}\n")).unwrap();
        Work {
            env,
            wt,
            sym,
            issue,
        }
    }

    fn wt_str(&self) -> String {
        self.wt.to_string_lossy().into_owned()
    }

    /// `cairn serve` bound to the issue and worktree, as `agent`.
    async fn serve(&self, agent: &str) -> Client {
        let wt = self.wt_str();
        let sym = self.sym.to_string_lossy().into_owned();
        self.env
            .serve(&[
                "--issue-id",
                &self.issue,
                "--worktree-path",
                &wt,
                "--agent-type",
                agent,
                "--symphony-dir",
                &sym,
                "--project-slug",
                "p",
            ])
            .await
    }
}

fn message(envelope: &Value) -> String {
    envelope["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

// ---------------------------------------------------------------- verify_workspace

#[tokio::test]
async fn verify_workspace_reports_path_issue_and_branch() {
    let w = Work::new();
    let c = w.serve("worker").await;
    let v = c.ok("verify_workspace", json!({})).await;
    assert_eq!(v["valid"], true);
    assert_eq!(v["issue"], w.issue);
    assert_eq!(v["branch"], "symphony/P-1");
    let canon = std::fs::canonicalize(&w.wt).unwrap();
    assert_eq!(v["path"], canon.to_string_lossy().as_ref());
    assert_eq!(
        v["message"],
        "Workspace verified. You are in the correct worktree."
    );
    c.close().await;
}

#[tokio::test]
async fn verify_workspace_without_git_reports_a_null_branch() {
    let w = Work::new();
    std::fs::remove_dir_all(w.wt.join(".git")).unwrap();
    let c = w.serve("worker").await;
    let v = c.ok("verify_workspace", json!({})).await;
    assert_eq!(v["valid"], true);
    assert!(v["branch"].is_null(), "{v}");
    assert!(v["message"].as_str().unwrap().contains("branch unknown"));
    c.close().await;
}

#[tokio::test]
async fn verify_workspace_missing_marker_gives_recovery() {
    let w = Work::new();
    std::fs::remove_file(w.wt.join(".symphony-worktree")).unwrap();
    let c = w.serve("worker").await;
    let e = c
        .err_code("verify_workspace", json!({}), "ERR_WORKSPACE_INVALID")
        .await;
    let m = message(&e);
    assert!(m.starts_with("Worktree marker file not found at "), "{m}");
    assert!(
        m.contains(&format!("Recovery: run `cd {}`", w.wt_str())),
        "{m}"
    );
    c.close().await;
}

#[tokio::test]
async fn verify_workspace_marker_of_another_issue_is_refused() {
    let w = Work::new();
    std::fs::write(w.wt.join(".symphony-worktree"), "P-99\n").unwrap();
    let c = w.serve("worker").await;
    let e = c
        .err_code("verify_workspace", json!({}), "ERR_WORKSPACE_INVALID")
        .await;
    let m = message(&e);
    assert!(
        m.contains("belongs to issue P-99") && m.contains("works on P-1"),
        "{m}"
    );
    assert!(m.contains("Recovery:"), "{m}");
    c.close().await;
}

#[tokio::test]
async fn verify_workspace_without_worktree_flag_names_the_flag() {
    let w = Work::new();
    let c = w
        .env
        .serve(&["--issue-id", &w.issue, "--agent-type", "worker"])
        .await;
    let e = c
        .err_code("verify_workspace", json!({}), "ERR_WORKSPACE_INVALID")
        .await;
    assert!(message(&e).contains("without --worktree-path"), "{e}");
    c.close().await;
}

#[tokio::test]
async fn verify_workspace_path_safety() {
    let w = Work::new();
    // A worktree path with `..` is refused even though it leads to the worktree.
    let dotted = format!("{}/../wt", w.wt_str());
    let c = w
        .env
        .serve(&["--issue-id", &w.issue, "--worktree-path", &dotted])
        .await;
    let e = c
        .err_code("verify_workspace", json!({}), "ERR_WORKSPACE_INVALID")
        .await;
    assert!(message(&e).contains("without `..`"), "{e}");
    c.close().await;
    // A relative worktree path is refused.
    let c = w
        .env
        .serve(&["--issue-id", &w.issue, "--worktree-path", "wt"])
        .await;
    let e = c
        .err_code("verify_workspace", json!({}), "ERR_WORKSPACE_INVALID")
        .await;
    assert!(message(&e).contains("absolute path"), "{e}");
    c.close().await;

    let c = w.serve("worker").await;
    // A marker that is a symlink to a file outside the worktree is not trusted, even
    // when that file names the right issue.
    let outside = w.env.path().join("forged-marker");
    std::fs::write(&outside, format!("{}\n", w.issue)).unwrap();
    let marker = w.wt.join(".symphony-worktree");
    std::fs::remove_file(&marker).unwrap();
    symlink(&outside, &marker).unwrap();
    let e = c
        .err_code("verify_workspace", json!({}), "ERR_WORKSPACE_INVALID")
        .await;
    assert!(
        message(&e).contains("leads outside") && message(&e).contains("cannot be trusted"),
        "{e}"
    );
    // NUL bytes and an over-long first line are not an issue identifier.
    std::fs::remove_file(&marker).unwrap();
    std::fs::write(&marker, "P-\u{0}1\n").unwrap();
    let e = c
        .err_code("verify_workspace", json!({}), "ERR_WORKSPACE_INVALID")
        .await;
    assert!(message(&e).contains("does not name an issue"), "{e}");
    std::fs::write(&marker, "P".repeat(300)).unwrap();
    let e = c
        .err_code("verify_workspace", json!({}), "ERR_WORKSPACE_INVALID")
        .await;
    assert!(message(&e).contains("does not name an issue"), "{e}");
    c.close().await;
}

#[tokio::test]
async fn verify_workspace_is_outside_the_judge_scope() {
    let w = Work::new();
    let c = w.serve("judge").await;
    assert!(!c.tool_names().await.contains(&"verify_workspace".into()));
    c.err_code("verify_workspace", json!({}), "PERMISSION_DENIED")
        .await;
    c.close().await;
}

// ---------------------------------------------------------------- update_memory

#[tokio::test]
async fn update_memory_writes_and_replaces_project_and_global_files() {
    let w = Work::new();
    let c = w.serve("worker").await;
    let r = c
        .ok(
            "update_memory",
            json!({"scope": "project", "filename": "codebase-notes.md", "content": "# Notes\n- one"}),
        )
        .await;
    let path = w.sym.join("data/memory/p/worker/codebase-notes.md");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# Notes\n- one");
    assert_eq!(r["replaced"], false);
    assert_eq!(r["profile_type"], "worker");
    assert_eq!(
        r["path"],
        std::fs::canonicalize(&path)
            .unwrap()
            .to_string_lossy()
            .as_ref()
    );
    let r = c
        .ok(
            "update_memory",
            json!({"scope": "project", "filename": "codebase-notes.md", "content": "# Notes\n- two"}),
        )
        .await;
    assert_eq!(r["replaced"], true);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# Notes\n- two");
    c.ok(
        "update_memory",
        json!({"scope": "global", "filename": "habits_1.md", "content": "g"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(w.sym.join("data/memory/_global/worker/habits_1.md")).unwrap(),
        "g"
    );
    // No temp file is left beside the memory files.
    let names: Vec<String> = std::fs::read_dir(w.sym.join("data/memory/p/worker"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["codebase-notes.md"]);
    // The 10,000-character limit counts characters, not bytes.
    c.ok(
        "update_memory",
        json!({"scope": "global", "filename": "big.md", "content": "é".repeat(10_000)}),
    )
    .await;
    c.close().await;
}

#[tokio::test]
async fn update_memory_missing_flags_each_name_the_flag() {
    let w = Work::new();
    let sym = w.sym.to_string_lossy().into_owned();
    let args = json!({"scope": "project", "filename": "a.md", "content": "x"});
    let global = json!({"scope": "global", "filename": "a.md", "content": "x"});

    let c = w.env.serve(&["--symphony-dir", &sym]).await;
    let e = c
        .err_code("update_memory", args.clone(), "ERR_FAILED_PRECONDITION")
        .await;
    assert!(message(&e).contains("--agent-type"), "{e}");
    c.close().await;

    let c = w.env.serve(&["--agent-type", "worker"]).await;
    let e = c
        .err_code("update_memory", args.clone(), "ERR_FAILED_PRECONDITION")
        .await;
    assert!(message(&e).contains("--symphony-dir"), "{e}");
    c.close().await;

    let c = w
        .env
        .serve(&["--agent-type", "worker", "--symphony-dir", &sym])
        .await;
    let e = c
        .err_code("update_memory", args.clone(), "ERR_FAILED_PRECONDITION")
        .await;
    assert!(message(&e).contains("--project-slug"), "{e}");
    // Global scope needs no project slug.
    c.ok("update_memory", global).await;
    c.close().await;
}

#[tokio::test]
async fn update_memory_path_safety() {
    let w = Work::new();
    let c = w.serve("planner").await;
    let long = format!("{}.md", "n".repeat(253));
    for bad in [
        "../escape.md",
        "/tmp/abs.md",
        "sub/dir.md",
        "nul\u{0}.md",
        "notes.txt",
        ".md",
        long.as_str(),
    ] {
        let e = c
            .err_code(
                "update_memory",
                json!({"scope": "global", "filename": bad, "content": "x"}),
                "ERR_INVALID_INPUT",
            )
            .await;
        let fields = error_fields(&e);
        assert!(
            !fields.is_empty() && fields.iter().all(|f| f == "filename"),
            "{bad:?}: {e}"
        );
    }
    let e = c
        .err_code(
            "update_memory",
            json!({"scope": "global", "filename": "a.md", "content": "x".repeat(10_001)}),
            "ERR_INVALID_INPUT",
        )
        .await;
    assert_eq!(error_fields(&e), ["content"]);

    // A memory directory that is a symlink leaving the Symphony root is refused.
    let outside = w.env.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(w.sym.join("data/memory")).unwrap();
    symlink(&outside, w.sym.join("data/memory/p")).unwrap();
    let e = c
        .err_code(
            "update_memory",
            json!({"scope": "project", "filename": "a.md", "content": "x"}),
            "ERR_FAILED_PRECONDITION",
        )
        .await;
    assert!(message(&e).contains("leads outside"), "{e}");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);

    // A memory file that is a symlink to a file outside is refused and left alone.
    std::fs::create_dir_all(w.sym.join("data/memory/_global/planner")).unwrap();
    let victim = outside.join("victim.md");
    std::fs::write(&victim, "keep").unwrap();
    symlink(&victim, w.sym.join("data/memory/_global/planner/v.md")).unwrap();
    c.err_code(
        "update_memory",
        json!({"scope": "global", "filename": "v.md", "content": "overwrite"}),
        "ERR_FAILED_PRECONDITION",
    )
    .await;
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    c.close().await;
}
