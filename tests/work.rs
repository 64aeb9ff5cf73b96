//! The work tools through an MCP client and the server in-process: `verify_workspace`,
//! `update_memory`, `complete_phase`, `approve_phase`, `reject_phase`, `move_issue`,
//! with the path-safety cases of every tool that takes a path or a file name.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::common::{Client, Env, error_fields};

/// A project `p` whose repository is a git worktree of issue P-1, with its marker
/// (also used by `security.rs`).
pub(crate) struct Work {
    pub(crate) env: Env,
    /// The worktree (and project path).
    pub(crate) wt: PathBuf,
    /// The Symphony root for memory.
    pub(crate) sym: PathBuf,
    pub(crate) issue: String,
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
    pub(crate) fn new() -> Work {
        Work::with(&[])
    }

    /// Like [`Work::new`], with extra `cairn issue create` flags for P-1 (`--label`,
    /// `--status`), created as the command does, through the facade.
    pub(crate) fn with(flags: &[&str]) -> Work {
        let env = Env::new();
        let wt = env.path().join("wt");
        let sym = env.path().join("symphony");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::create_dir_all(&sym).unwrap();
        git(&wt, &["init", "-q", "-b", "symphony/P-1"]);
        env.project("p", Some(&wt));
        let mut new = cairn::issues::NewIssue {
            project: "p".into(),
            title: "Token budgets".into(),
            ..Default::default()
        };
        let mut it = flags.iter();
        while let Some(flag) = it.next() {
            let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
            match *flag {
                "--label" => new.labels.push(value.to_string()),
                "--status" => new.status = cairn::issues::Status::parse(value),
                _ => panic!("Work::with: unsupported flag {flag}"),
            }
        }
        let issue = env
            .open()
            .create_issue(&new)
            .expect("create P-1")
            .identifier;
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
    pub(crate) async fn serve(&self, agent: &str) -> Client {
        self.serve_with(agent, &[]).await
    }

    /// [`Work::serve`] with extra `cairn serve` flags.
    pub(crate) async fn serve_with(&self, agent: &str, extra: &[&str]) -> Client {
        let wt = self.wt_str();
        let sym = self.sym.to_string_lossy().into_owned();
        let mut flags = vec![
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
        ];
        flags.extend(extra);
        self.env.serve_local(&flags).await
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
        .serve_local(&["--issue-id", &w.issue, "--agent-type", "worker"])
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
        .serve_local(&["--issue-id", &w.issue, "--worktree-path", &dotted])
        .await;
    let e = c
        .err_code("verify_workspace", json!({}), "ERR_WORKSPACE_INVALID")
        .await;
    assert!(message(&e).contains("without `..`"), "{e}");
    c.close().await;
    // A relative worktree path is refused.
    let c = w
        .env
        .serve_local(&["--issue-id", &w.issue, "--worktree-path", "wt"])
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
        message(&e).contains("is a symlink") && message(&e).contains("cannot be trusted"),
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

    let c = w.env.serve_local(&["--symphony-dir", &sym]).await;
    let e = c
        .err_code("update_memory", args.clone(), "ERR_FAILED_PRECONDITION")
        .await;
    assert!(message(&e).contains("--agent-type"), "{e}");
    c.close().await;

    let c = w.env.serve_local(&["--agent-type", "worker"]).await;
    let e = c
        .err_code("update_memory", args.clone(), "ERR_FAILED_PRECONDITION")
        .await;
    assert!(message(&e).contains("--symphony-dir"), "{e}");
    c.close().await;

    let c = w
        .env
        .serve_local(&["--agent-type", "worker", "--symphony-dir", &sym])
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
    assert!(message(&e).contains("is a symlink"), "{e}");
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

// ---------------------------------------------------------------- phases

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// A research artifact with the sections of the test contract.
fn good_artifact(extra: &str) -> String {
    format!(
        "# Research: token budgets\n\n## Summary\n\nBudgets are counted per request by a \
         middleware that sits in front of the model client. {extra}\n\n## Risks\n\n\
         Counting may drift from the provider's own numbers.\n"
    )
}

impl Work {
    /// Write `text` at `rel` under the worktree; return its SHA-256.
    fn write(&self, rel: &str, text: &str) -> String {
        let path = self.wt.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        sha256(text.as_bytes())
    }

    /// The research contract: version 1, sections summary and risks.
    fn contract(&self) {
        self.write(
            "prompts/phases/research.json",
            r#"{"version": 1, "required_sections": ["summary", "risks"], "note": "ignored"}"#,
        );
    }

    fn claim(&self, rel: &str, hash: &str) -> Value {
        json!({
            "completed_phase": "research",
            "contract_version": 1,
            "artifact_path": rel,
            "artifact_hash": hash,
            "summary": "Budgets per request",
            "open_questions": ["Which tokenizer?"],
            "confidence": "high",
            "recommended_next_phase": "architecture",
            "project_path": self.wt_str(),
        })
    }
}

const ART: &str = "docs/tickets/P-1/research.md";

#[tokio::test]
async fn complete_phase_records_a_claim_and_a_judge_approves_it() {
    let w = Work::new();
    w.contract();
    let hash = w.write(ART, &good_artifact("First draft."));
    let worker = w.serve("worker").await;
    let mut args = w.claim(ART, &hash.to_uppercase());
    args["promote_to"] = json!("docs/research/budgets.md");
    let pc = worker.ok("complete_phase", args).await;
    assert!(pc["id"].as_str().unwrap().starts_with("pc-"), "{pc}");
    assert_eq!(pc["category"], "phase_completion");
    assert_eq!(pc["processed"], false);
    assert_eq!(pc["artifact_hash"], hash, "stored lower-case");
    assert_eq!(pc["artifact_path"], ART);
    assert_eq!(pc["promote_to"], "docs/research/budgets.md");
    assert_eq!(pc["contract_version"], 1);
    assert_eq!(pc["open_questions"], json!(["Which tokenizer?"]));
    assert!(
        pc["checks"]
            .as_array()
            .unwrap()
            .contains(&json!("required sections: summary, risks")),
        "{pc}"
    );

    let judge = w.serve("judge").await;
    let pv = judge
        .ok(
            "approve_phase",
            json!({"phase": "research", "artifact_hash": hash, "reason": "Complete"}),
        )
        .await;
    assert!(pv["id"].as_str().unwrap().starts_with("pv-"));
    assert_eq!(pv["verdict"], "approved");
    assert_eq!(pv["claim_id"], pc["id"]);
    assert_eq!(pv["processed"], false);
    assert!(pv["comment_id"].is_null());
    // One verdict per claim.
    let e = judge
        .err_code(
            "approve_phase",
            json!({"phase": "research", "artifact_hash": hash}),
            "ERR_CONFLICT",
        )
        .await;
    assert!(message(&e).contains("already approved"), "{e}");
    assert_eq!(e["error"]["details"]["existing_id"], pv["id"]);
    worker.close().await;
    judge.close().await;
}

#[tokio::test]
async fn complete_phase_for_ready_needs_no_artifact() {
    let w = Work::new();
    let c = w.serve("worker").await;
    let pc = c
        .ok(
            "complete_phase",
            json!({"completed_phase": "ready", "summary": "Implemented and tested",
                   "project_path": w.wt_str()}),
        )
        .await;
    assert_eq!(pc["completed_phase"], "ready");
    assert!(pc["artifact_path"].is_null() && pc["contract_version"].is_null());
    assert_eq!(pc["confidence"], "medium");
    assert_eq!(
        pc["checks"],
        json!(["content validation skipped for ready"])
    );
    c.close().await;
}

#[tokio::test]
async fn complete_phase_reports_each_content_failure() {
    let w = Work::new();
    w.contract();
    let c = w.serve("researcher").await;
    let fail = |e: &Value| -> Vec<String> {
        e["error"]["details"]["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                format!(
                    "{}: {}",
                    x["field"].as_str().unwrap(),
                    x["message"].as_str().unwrap()
                )
            })
            .collect()
    };

    // Required-unless-ready fields, each named.
    let e = c
        .err_code(
            "complete_phase",
            json!({"completed_phase": "research", "summary": "s", "project_path": w.wt_str()}),
            "ERR_INVALID_INPUT",
        )
        .await;
    assert_eq!(
        error_fields(&e),
        [
            "contract_version",
            "artifact_path",
            "artifact_hash",
            "recommended_next_phase"
        ]
    );

    // Too short, no heading, and missing sections, all at once.
    let hash = w.write(ART, "just a few words");
    let e = c.err("complete_phase", w.claim(ART, &hash)).await;
    assert_eq!(
        fail(&e),
        [
            "artifact_path: Artifact content too short (16 chars, minimum 100)",
            "artifact_path: Artifact does not appear to be Markdown — no headings found",
            "artifact_path: Artifact missing required sections: summary, risks (add each as a `## <name>` heading)",
        ]
    );
    let text = format!("# Research\n\n## Summary\n\n{}\n", "words ".repeat(30));
    let hash = w.write(ART, &text);
    let e = c.err("complete_phase", w.claim(ART, &hash)).await;
    assert_eq!(
        fail(&e),
        [
            "artifact_path: Artifact missing required sections: risks (add each as a `## <name>` heading)"
        ]
    );

    // A hash that is not the file's.
    let hash = w.write(ART, &good_artifact(""));
    let e = c.err("complete_phase", w.claim(ART, &"0".repeat(64))).await;
    assert_eq!(error_fields(&e), ["artifact_hash"]);
    assert!(message(&e).contains(&hash), "{e}");

    // A contract version that is not the contract's.
    let mut args = w.claim(ART, &hash);
    args["contract_version"] = json!(2);
    let e = c.err("complete_phase", args).await;
    assert_eq!(error_fields(&e), ["contract_version"]);
    assert!(message(&e).contains("contract is version 1"), "{e}");

    // A next phase outside the pipeline; a missing artifact file.
    let mut args = w.claim(ART, &hash);
    args["recommended_next_phase"] = json!("deploy");
    let e = c.err("complete_phase", args).await;
    assert_eq!(error_fields(&e), ["recommended_next_phase"]);
    let e = c
        .err("complete_phase", w.claim("docs/tickets/P-1/none.md", &hash))
        .await;
    assert!(message(&e).contains("does not exist"), "{e}");

    // project_path: relative, or another directory.
    let mut args = w.claim(ART, &hash);
    args["project_path"] = json!("wt");
    assert_eq!(
        error_fields(&c.err("complete_phase", args).await),
        ["project_path"]
    );
    let mut args = w.claim(ART, &hash);
    args["project_path"] = json!(w.sym.to_string_lossy());
    let e = c.err("complete_phase", args).await;
    assert!(message(&e).contains("neither your worktree"), "{e}");

    // A contract that does not parse is the project's problem, named by file.
    w.write("prompts/phases/research.json", "{\"version\": \"one\"}");
    let e = c
        .err_code(
            "complete_phase",
            w.claim(ART, &hash),
            "ERR_FAILED_PRECONDITION",
        )
        .await;
    assert!(message(&e).contains("research.json"), "{e}");
    // An explicit contracts_dir that does not exist.
    let mut args = w.claim(ART, &hash);
    args["contracts_dir"] = json!("prompts/none");
    assert_eq!(
        error_fields(&c.err("complete_phase", args).await),
        ["contracts_dir"]
    );
    // No contract file: generic checks only, any contract version.
    std::fs::remove_file(w.wt.join("prompts/phases/research.json")).unwrap();
    let short_sections = format!("# Research\n\n{}\n", "words ".repeat(30));
    let hash = w.write(ART, &short_sections);
    let mut args = w.claim(ART, &hash);
    args["contract_version"] = json!(7);
    c.ok("complete_phase", args).await;
    c.close().await;
}

#[tokio::test]
async fn complete_phase_verifies_the_workspace_first() {
    let w = Work::new();
    let hash = w.write(ART, &good_artifact(""));
    std::fs::write(w.wt.join(".symphony-worktree"), "P-7\n").unwrap();
    let c = w.serve("worker").await;
    let e = c
        .err_code(
            "complete_phase",
            w.claim(ART, &hash),
            "ERR_WORKSPACE_INVALID",
        )
        .await;
    assert!(message(&e).contains("belongs to issue P-7"), "{e}");
    c.close().await;
}

#[tokio::test]
async fn complete_phase_path_safety() {
    let w = Work::new();
    w.contract();
    let hash = w.write(ART, &good_artifact(""));
    let outside = w.env.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("research.md"), good_artifact("")).unwrap();
    symlink(&outside, w.wt.join("docs/tickets/P-9")).unwrap();
    let abs = w.wt.join(ART).to_string_lossy().into_owned();
    let long = format!("docs/tickets/P-1/{}.md", "x".repeat(256));
    let c = w.serve("worker").await;
    for (bad, needle) in [
        ("docs/tickets/../../etc/passwd", ".."),
        ("docs/tickets/P-1/../P-1/research.md", ".."),
        (abs.as_str(), "absolute"),
        ("docs/other/research.md", "inside docs/tickets/"),
        ("docs/tickets", "inside docs/tickets/"),
        ("docs/tickets/P-9/research.md", "P-9 is a symlink"),
        ("docs/tickets/P-1/nul\u{0}.md", "NUL"),
        (long.as_str(), "at most 255"),
    ] {
        let e = c.err("complete_phase", w.claim(bad, &hash)).await;
        assert_eq!(error_fields(&e), ["artifact_path"], "{bad:?}: {e}");
        assert!(message(&e).contains(needle), "{bad:?}: {e}");
    }
    for (bad, needle) in [
        ("../docs/x.md", ".."),
        ("/docs/x.md", "absolute"),
        ("src/x.md", "inside docs/"),
        ("docs/tickets/P-9/x.md", "P-9 is a symlink"),
    ] {
        let mut args = w.claim(ART, &hash);
        args["promote_to"] = json!(bad);
        let e = c.err("complete_phase", args).await;
        assert_eq!(error_fields(&e), ["promote_to"], "{bad:?}: {e}");
        assert!(message(&e).contains(needle), "{bad:?}: {e}");
    }
    // contracts_dir is path-checked too, and a contract file symlinked from outside
    // is refused.
    let mut args = w.claim(ART, &hash);
    args["contracts_dir"] = json!("../prompts");
    assert_eq!(
        error_fields(&c.err("complete_phase", args).await),
        ["contracts_dir"]
    );
    std::fs::remove_file(w.wt.join("prompts/phases/research.json")).unwrap();
    std::fs::write(outside.join("research.json"), r#"{"version": 1}"#).unwrap();
    symlink(
        outside.join("research.json"),
        w.wt.join("prompts/phases/research.json"),
    )
    .unwrap();
    let e = c.err("complete_phase", w.claim(ART, &hash)).await;
    assert_eq!(error_fields(&e), ["contracts_dir"], "{e}");
    c.close().await;
}

#[tokio::test]
async fn phase_verdicts_need_the_latest_claim_and_rejections_comment() {
    let w = Work::new();
    w.contract();
    let judge = w.serve("judge").await;
    let any = "a".repeat(64);
    let e = judge
        .err_code(
            "approve_phase",
            json!({"phase": "research", "artifact_hash": any}),
            "ERR_NOT_FOUND",
        )
        .await;
    assert!(
        message(&e).contains("no research completion claim on P-1"),
        "{e}"
    );

    let worker = w.serve("worker").await;
    let first = w.write(ART, &good_artifact("First."));
    worker.ok("complete_phase", w.claim(ART, &first)).await;
    let second = w.write(ART, &good_artifact("Second."));
    let latest = worker.ok("complete_phase", w.claim(ART, &second)).await;
    // A verdict on the older artifact names the latest claim and its hash.
    let e = judge
        .err_code(
            "reject_phase",
            json!({"phase": "research", "artifact_hash": first, "reason": "r"}),
            "ERR_CONFLICT",
        )
        .await;
    assert!(
        message(&e).contains(&second) && message(&e).contains(latest["id"].as_str().unwrap()),
        "{e}"
    );
    // Another phase has no claim.
    judge
        .err_code(
            "approve_phase",
            json!({"phase": "architecture", "artifact_hash": second}),
            "ERR_NOT_FOUND",
        )
        .await;
    let pv = judge
        .ok(
            "reject_phase",
            json!({"phase": "research", "artifact_hash": second,
                   "reason": "Missing rollback strategy",
                   "fix_instructions": "Add a rollout section"}),
        )
        .await;
    assert_eq!(pv["verdict"], "rejected");
    assert_eq!(pv["fix_instructions"], "Add a rollout section");
    assert!(pv["comment_id"].as_str().unwrap().starts_with("c-"), "{pv}");
    // reject_phase needs a reason; judges only.
    let e = judge
        .err(
            "reject_phase",
            json!({"phase": "research", "artifact_hash": second}),
        )
        .await;
    assert_eq!(error_fields(&e), ["reason"]);
    worker
        .err_code(
            "approve_phase",
            json!({"phase": "research", "artifact_hash": second}),
            "PERMISSION_DENIED",
        )
        .await;
    worker.close().await;
    judge.close().await;
}

// ---------------------------------------------------------------- move_issue

impl Work {
    /// A second project `q` with its own repository directory.
    fn target(&self) -> PathBuf {
        let q = self.env.path().join("q-repo");
        std::fs::create_dir_all(&q).unwrap();
        self.env.project("q", Some(&q));
        q
    }

    /// Set a project's `phases` pipeline, as a person does (`cairn project configure
    /// SLUG --phase P...`), through the facade.
    fn set_pipeline(&self, slug: &str, phases: &[&str]) {
        let update = cairn::issues::settings::SettingsUpdate {
            phases: Some(phases.iter().map(|p| p.to_string()).collect()),
            ..Default::default()
        };
        self.env
            .open()
            .configure_project(slug, &update)
            .expect("configure the project");
    }

    fn show(&self, issue: &str) -> Value {
        self.env.issue_json(issue)
    }
}

#[tokio::test]
async fn move_issue_reprefixes_relabels_and_copies_artifacts() {
    let w = Work::with(&[
        "--label",
        "phase:grooming",
        "--label",
        "api",
        "--status",
        "in_progress",
    ]);
    let q = w.target();
    w.write("docs/tickets/P-1/research.md", &good_artifact(""));
    w.write("docs/tickets/P-1/notes/extra.md", "nested");
    let design = w.write("docs/tickets/P-1/design.md", &good_artifact("Design."));
    let secret = w.env.path().join("secret.md");
    std::fs::write(&secret, "outside").unwrap();
    symlink(&secret, w.wt.join("docs/tickets/P-1/leak.md")).unwrap();
    // The architecture artifact is named by its claim, not by its phase.
    let worker = w.serve("worker").await;
    let mut claim = w.claim("docs/tickets/P-1/design.md", &design);
    claim["completed_phase"] = json!("architecture");
    claim["recommended_next_phase"] = json!("grooming");
    worker.ok("complete_phase", claim).await;
    worker.close().await;

    let c = w.serve("planner").await;
    let m = c
        .ok(
            "move_issue",
            json!({"target_project_id": "q", "reason": "Needs the q API"}),
        )
        .await;
    assert_eq!(m["identifier"], "Q-1");
    assert_eq!(m["moved_from"], "P-1");
    assert_eq!(
        (m["from_project"].as_str(), m["to_project"].as_str()),
        (Some("p"), Some("q"))
    );
    assert_eq!(m["status"], "todo");
    assert_eq!(
        m["labels"],
        json!([
            "api",
            "moved-from:P-1",
            "phase:grooming",
            "skip:architecture",
            "skip:research"
        ])
    );
    assert_eq!(
        m["copied_files"],
        json!([
            "docs/tickets/Q-1/design.md",
            "docs/tickets/Q-1/notes/extra.md",
            "docs/tickets/Q-1/research.md"
        ])
    );
    assert_eq!(m["skipped_entries"], json!(["leak.md"]));
    let dest = q.join("docs/tickets/Q-1");
    assert_eq!(
        std::fs::read_to_string(dest.join("notes/extra.md")).unwrap(),
        "nested"
    );
    assert_eq!(
        std::fs::read_to_string(dest.join("research.md")).unwrap(),
        good_artifact("")
    );
    assert!(std::fs::symlink_metadata(dest.join("leak.md")).is_err());
    // Only the copy is left: no staging directory, and the source keeps its files.
    let entries: Vec<String> = std::fs::read_dir(q.join("docs/tickets"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["Q-1"]);
    assert!(w.wt.join("docs/tickets/P-1/research.md").is_file());

    // The data: same issue, new identifier and project; the old identifier still names
    // it everywhere (the CLI, a token, an agent's unchanged `cairn serve --issue-id`),
    // and every answer carries the new one.
    let shown = w.show("Q-1");
    assert_eq!(shown["id"], m["id"]);
    assert_eq!(shown["project_slug"], "q");
    assert_eq!(shown["status"], "todo");
    assert_eq!(shown["labels"], m["labels"]);
    let by_old = w.show("p-1");
    assert_eq!(
        (&by_old["id"], &by_old["identifier"]),
        (&m["id"], &json!("Q-1"))
    );
    let token = w.env.json(&["session", "new", "--issue", "P-1"]);
    assert_eq!(token["issue"], "Q-1", "{token}");
    let old = w
        .env
        .serve_local(&["--issue-id", "P-1", "--agent-type", "worker"])
        .await;
    let bound = old.ok("get_issue", json!({})).await;
    assert_eq!(
        (&bound["id"], &bound["identifier"]),
        (&m["id"], &json!("Q-1"))
    );
    let named = old.ok("get_issue", json!({"issue_id": "P-1"})).await;
    assert_eq!(named["identifier"], "Q-1");
    old.close().await;
    // The next issue of p does not reuse P-1's number; q's does not reuse Q-1's.
    assert_eq!(w.env.issue("p", "next"), "P-2");
    assert_eq!(w.env.issue("q", "next"), "Q-2");
    c.close().await;
}

#[tokio::test]
async fn move_issue_resets_an_incompatible_phase_to_the_targets_first() {
    let w = Work::with(&["--label", "phase:grooming"]);
    w.target();
    w.set_pipeline("q", &["triage", "build"]);
    let c = w.serve("planner").await;
    let m = c
        .ok(
            "move_issue",
            json!({"target_project_id": "q", "reason": "r"}),
        )
        .await;
    assert_eq!(m["labels"], json!(["moved-from:P-1", "phase:triage"]));
    assert_eq!(m["copied_files"], json!([]));
    // Moving back: phase:triage is not in p's default pipeline either.
    let back = c
        .ok(
            "move_issue",
            json!({"target_project_id": "p", "reason": "back"}),
        )
        .await;
    assert_eq!(back["identifier"], "P-2");
    assert_eq!(
        back["labels"],
        json!(["moved-from:P-1", "moved-from:Q-1", "phase:research"])
    );
    // Both earlier identifiers name it still.
    for old in ["P-1", "Q-1"] {
        assert_eq!(w.show(old)["identifier"], "P-2", "{old}");
    }
    c.close().await;
}

#[tokio::test]
async fn move_issue_constraints() {
    let w = Work::new();
    w.target();
    let c = w.serve("planner").await;
    let args = json!({"target_project_id": "q", "reason": "r"});
    let e = c
        .err_code("move_issue", args.clone(), "ERR_FAILED_PRECONDITION")
        .await;
    assert!(message(&e).contains("no phase:* label"), "{e}");
    c.err_code(
        "move_issue",
        json!({"target_project_id": "nope", "reason": "r"}),
        "ERR_PROJECT_NOT_FOUND",
    )
    .await;
    c.close().await;

    let w = Work::with(&["--label", "cross-project", "--status", "done"]);
    w.target();
    let c = w.serve("planner").await;
    let e = c
        .err_code("move_issue", args.clone(), "ERR_INVALID_TRANSITION")
        .await;
    assert!(message(&e).contains("cannot be moved"), "{e}");
    c.close().await;

    let w = Work::with(&["--label", "multi-repo"]);
    // q without a path, while P-1 has artifacts: refused, nothing changes.
    w.env.project("q", None);
    w.write("docs/tickets/P-1/research.md", "r");
    let c = w.serve("planner").await;
    let e = c
        .err_code("move_issue", args.clone(), "ERR_FAILED_PRECONDITION")
        .await;
    assert!(message(&e).contains("has no path"), "{e}");
    let e = c
        .err_code(
            "move_issue",
            json!({"target_project_id": "p", "reason": "r"}),
            "ERR_INVALID_INPUT",
        )
        .await;
    assert_eq!(error_fields(&e), ["target_project_id"]);
    assert_eq!(
        error_fields(&c.err("move_issue", json!({"target_project_id": "q"})).await),
        ["reason"]
    );
    assert_eq!(w.show("P-1")["labels"], json!(["multi-repo"]));
    c.close().await;
    let worker = w.serve("worker").await;
    worker
        .err_code("move_issue", args, "PERMISSION_DENIED")
        .await;
    worker.close().await;
}

#[tokio::test]
async fn move_issue_path_safety() {
    let w = Work::with(&["--label", "phase:research"]);
    let q = w.target();
    let outside = w.env.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("research.md"), "outside").unwrap();
    let c = w.serve("planner").await;
    let args = json!({"target_project_id": "q", "reason": "r"});

    // The source ticket directory is a symlink leaving the source project.
    std::fs::create_dir_all(w.wt.join("docs/tickets")).unwrap();
    symlink(&outside, w.wt.join("docs/tickets/P-1")).unwrap();
    let e = c
        .err_code("move_issue", args.clone(), "ERR_INVALID_INPUT")
        .await;
    assert!(message(&e).contains("P-1 is a symlink"), "{e}");
    std::fs::remove_file(w.wt.join("docs/tickets/P-1")).unwrap();
    w.write("docs/tickets/P-1/research.md", "inside");

    // The target's docs/tickets is a symlink leaving the target project.
    let elsewhere = w.env.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::create_dir_all(q.join("docs")).unwrap();
    symlink(&elsewhere, q.join("docs/tickets")).unwrap();
    let e = c
        .err_code("move_issue", args.clone(), "ERR_INVALID_INPUT")
        .await;
    assert!(message(&e).contains("docs/tickets is a symlink"), "{e}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    std::fs::remove_file(q.join("docs/tickets")).unwrap();

    // A destination that already exists: the database is rolled back and the staged
    // copy removed.
    std::fs::create_dir_all(q.join("docs/tickets/Q-1")).unwrap();
    let e = c.err_code("move_issue", args.clone(), "ERR_CONFLICT").await;
    assert!(message(&e).contains("already exists"), "{e}");
    assert_eq!(w.show("P-1")["labels"], json!(["phase:research"]));
    let entries: Vec<String> = std::fs::read_dir(q.join("docs/tickets"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["Q-1"]);
    assert_eq!(
        std::fs::read_dir(q.join("docs/tickets/Q-1"))
            .unwrap()
            .count(),
        0
    );

    // Project references are names, never paths.
    for bad in ["../q", "/q", "q\u{0}"] {
        c.err_code(
            "move_issue",
            json!({"target_project_id": bad, "reason": "r"}),
            "ERR_PROJECT_NOT_FOUND",
        )
        .await;
    }
    let e = c
        .err(
            "move_issue",
            json!({"target_project_id": "q".repeat(65), "reason": "r"}),
        )
        .await;
    assert_eq!(error_fields(&e), ["target_project_id"]);

    // Once the way is clear the move succeeds and takes the number it did not use.
    std::fs::remove_dir(q.join("docs/tickets/Q-1")).unwrap();
    let m = c.ok("move_issue", args).await;
    assert_eq!(m["identifier"], "Q-1");
    assert_eq!(
        std::fs::read_to_string(q.join("docs/tickets/Q-1/research.md")).unwrap(),
        "inside"
    );
    c.close().await;
}

// ---------------------------------------------------------------- end to end

const E2E_DIFF: &str = "diff --git a/src/budget.rs b/src/budget.rs
new file mode 100644
--- /dev/null
+++ b/src/budget.rs
@@ -0,0 +1,2 @@
+pub fn budget() -> u32 { 3 }
+// tiers
";

/// One issue from todo through a phase claim, a judge's rejection, a second claim, an
/// approval, a PR and its approval: a worker and a judge, two `cairn serve` processes
/// on one database.
#[tokio::test]
async fn issue_walks_from_todo_through_phases_to_an_approved_pr() {
    let w = Work::new();
    w.contract();
    let worker = w.serve("worker").await;
    let judge = w.serve("judge").await;
    assert_eq!(w.show("P-1")["status"], "todo");

    worker.ok("verify_workspace", json!({})).await;
    // The orchestrator starts the work (agents change status only from in_progress).
    w.env.set_status("P-1", "in_progress", None);

    // First claim; the judge rejects it with fix instructions.
    let first = w.write(ART, &good_artifact("No rollback yet."));
    let claim1 = worker.ok("complete_phase", w.claim(ART, &first)).await;
    let rejected = judge
        .ok(
            "reject_phase",
            json!({"phase": "research", "artifact_hash": first,
                   "reason": "Missing rollback strategy",
                   "fix_instructions": "Describe how budgets are rolled back"}),
        )
        .await;
    assert_eq!(rejected["claim_id"], claim1["id"]);
    // The worker sees the rejection and its instructions on its issue.
    let seen = worker.ok("get_issue", json!({})).await;
    let comments = seen["comments"].as_array().unwrap();
    assert!(
        comments.iter().any(|c| {
            let t = c["content"].as_str().unwrap_or_default();
            t.contains("Missing rollback strategy")
                && t.contains("Describe how budgets are rolled back")
        }),
        "{seen:#}"
    );

    // Second claim; approving the old hash is refused, the new one is approved.
    let second = w.write(ART, &good_artifact("Rollback: budgets revert per request."));
    let claim2 = worker.ok("complete_phase", w.claim(ART, &second)).await;
    judge
        .err_code(
            "approve_phase",
            json!({"phase": "research", "artifact_hash": first}),
            "ERR_CONFLICT",
        )
        .await;
    let approved = judge
        .ok(
            "approve_phase",
            json!({"phase": "research", "artifact_hash": second, "reason": "Complete"}),
        )
        .await;
    assert_eq!(approved["claim_id"], claim2["id"]);

    // The PR: created by the worker (issue to review), approved by the judge.
    let pr = worker
        .ok(
            "create_pr",
            json!({"diff": E2E_DIFF, "branch_name": "symphony/P-1", "base_branch": "main",
                   "gate_results": [{"command": "cargo test", "label": "Tests",
                                     "exit_code": 0, "output": "ok", "required": true}]}),
        )
        .await;
    assert_eq!(w.show("P-1")["status"], "review");
    let reviewed = judge
        .ok(
            "approve_pr",
            json!({"reason": "Matches the approved research"}),
        )
        .await;
    assert_eq!(reviewed["id"], pr["id"]);
    assert_eq!(reviewed["status"], "approved");

    // What the judge reads afterwards: the whole walk, in order, on one intact chain.
    let issue = judge.ok("get_issue", json!({})).await;
    assert_eq!(
        issue["status"], "review",
        "stays in review for a human merge"
    );
    let findings: Vec<(String, String)> = issue["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["category"].as_str().unwrap().to_string(),
                f["verdict"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect();
    let expect = [
        ("phase_completion", "-"),
        ("phase_verdict", "rejected"),
        ("phase_completion", "-"),
        ("phase_verdict", "approved"),
    ]
    .map(|(a, b)| (a.to_string(), b.to_string()));
    assert_eq!(findings, expect, "{issue:#}");
    assert!(
        issue["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["processed"] == false)
    );
    assert_eq!(issue["pull_requests"][0]["status"], "approved");
    let history: Vec<(String, String)> = issue["status_history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["from"].as_str().unwrap().to_string(),
                h["to"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        history,
        [("todo", "in_progress"), ("in_progress", "review")]
            .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let chain = w.env.verify_trail("P-1");
    assert_eq!(chain["intact"], true, "{chain:#}");
    worker.close().await;
    judge.close().await;
}

/// Approving an issue's work, by a phase verdict or by a PR, weighs the `helped`
/// verdicts that issue gave (as reaching done does: `lifecycle.rs`): each learning's
/// quality follows at once (60 → 71), with one `outcome` entry from that issue in its
/// history. The trail and the work reach the learnings only through the approval hook
/// the facade registers.
#[tokio::test]
async fn an_approved_phase_or_pr_weighs_the_issues_helped_verdicts() {
    let w = Work::new();
    w.contract();
    let env = &w.env;
    let author = env.issue("p", "Where the lessons come from");
    let reviewed = env.issue("p", "Work reviewed by a PR");
    let lesson = |topic: &str| -> String {
        env.add_learning(
            &author,
            &format!(
                "When the {topic} changes, run the whole budget suite: the per-request \
                 counters are shared and drift silently otherwise"
            ),
            None,
            &[],
            false,
        )["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (by_phase, by_pr) = (lesson("tokenizer"), lesson("provider client"));
    // The outcome a learning shows once `issue`'s work was approved.
    let weighed = |id: &str, issue: &str| {
        let shown = env.learning_json(id);
        assert_eq!(shown["quality_score"], 71, "{shown:#}");
        let outcomes: Vec<&Value> = shown["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["event"] == "outcome")
            .collect();
        assert_eq!(outcomes.len(), 1, "{shown:#}");
        assert_eq!(outcomes[0]["issue"], issue, "{shown:#}");
    };

    // A phase verdict: P-1's worker found `by_phase` helpful, the judge approves.
    let worker = w.serve("worker").await;
    let r = worker
        .ok(
            "learning_feedback",
            json!({"learning_id": by_phase, "outcome": "helped"}),
        )
        .await;
    assert_eq!(r["quality_score"], 60);
    env.set_status("P-1", "in_progress", None);
    let hash = w.write(ART, &good_artifact("Rollback: budgets revert per request."));
    worker.ok("complete_phase", w.claim(ART, &hash)).await;
    let judge = w.serve("judge").await;
    judge
        .ok(
            "approve_phase",
            json!({"phase": "research", "artifact_hash": hash, "reason": "Complete"}),
        )
        .await;
    weighed(&by_phase, "P-1");
    worker.close().await;
    judge.close().await;

    // A PR: the other issue's worker, in its own worktree, found `by_pr` helpful.
    let wt = env.path().join("wt-reviewed");
    std::fs::create_dir(&wt).unwrap();
    std::fs::write(wt.join(".symphony-worktree"), format!("{reviewed}\n")).unwrap();
    let wt = wt.to_string_lossy().into_owned();
    let worker = env
        .serve_local(&[
            "--issue-id",
            &reviewed,
            "--agent-type",
            "worker",
            "--worktree-path",
            &wt,
        ])
        .await;
    let r = worker
        .ok(
            "learning_feedback",
            json!({"learning_id": by_pr, "outcome": "helped"}),
        )
        .await;
    assert_eq!(r["quality_score"], 60);
    env.set_status(&reviewed, "in_progress", None);
    worker
        .ok(
            "create_pr",
            json!({"diff": E2E_DIFF, "branch_name": format!("symphony/{reviewed}"), "base_branch": "main"}),
        )
        .await;
    worker.close().await;
    let judge = env
        .serve_local(&["--issue-id", &reviewed, "--agent-type", "judge"])
        .await;
    judge.ok("approve_pr", json!({"reason": "Fine"})).await;
    weighed(&by_pr, &reviewed);
    // The phase's learning is not weighed twice.
    weighed(&by_phase, "P-1");
    judge.close().await;
}

/// Two judges on one database answering the same claim at once: one verdict is
/// recorded, the other is told which verdict came first.
#[tokio::test]
async fn concurrent_verdicts_on_one_claim_record_exactly_one() {
    let w = Work::new();
    let hash = w.write(ART, &good_artifact(""));
    let worker = w.serve("worker").await;
    worker.ok("complete_phase", w.claim(ART, &hash)).await;
    let (a, b) = (w.serve("judge").await, w.serve("judge").await);
    let args = json!({"phase": "research", "artifact_hash": hash, "reason": "r"});
    let (ra, rb) = tokio::join!(
        a.call("approve_phase", args.clone()),
        b.call("reject_phase", args.clone())
    );
    let errors: Vec<bool> = [&ra, &rb]
        .iter()
        .map(|r| r.is_error == Some(true))
        .collect();
    assert_eq!(errors.iter().filter(|e| **e).count(), 1, "{ra:?} {rb:?}");
    let failed = if errors[0] { &ra } else { &rb };
    let body = crate::common::body(failed);
    assert_eq!(body["error"]["code"], "ERR_CONFLICT", "{body}");
    let issue = worker.ok("get_issue", json!({})).await;
    let verdicts = issue["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["category"] == "phase_verdict")
        .count();
    assert_eq!(verdicts, 1);
    for c in [worker, a, b] {
        c.close().await;
    }
}

#[test]
fn a_person_moves_an_issue_from_the_cli() {
    let w = Work::with(&["--label", "phase:research"]);
    w.target();
    let out = w.env.ok(&[
        "issue",
        "move",
        "P-1",
        "--to",
        "q",
        "--reason",
        "Belongs to q",
    ]);
    assert_eq!(out.trim(), "Q-1");
    let moved = w.show("Q-1");
    assert_eq!(moved["status"], "todo");
    assert!(
        moved["labels"]
            .as_array()
            .unwrap()
            .contains(&json!("moved-from:P-1"))
    );
    let bad = w
        .env
        .run(&["issue", "move", "Q-1", "--to", "q", "--reason", " "]);
    assert_eq!(
        bad.status.code(),
        Some(2),
        "an empty reason is invalid input"
    );
}
