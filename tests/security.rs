//! Issue 15, part B, through an MCP client and the server in-process: the one text policy on every tool that
//! stores agent text, tamper evidence of frozen Merkle roots, malformed rows, and
//! storage faults (a full disk on a real tmpfs).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::common::{Client, Env, tree};

/// NUL, an ANSI colour sequence, a bidi override, a bidi isolate, a tag character and a
/// zero-width space, between visible letters.
const HOSTILE: &str = "A\u{0}B\u{1b}[31mC\u{202e}D\u{2066}E\u{e0041}F\u{200b}G";
const HIDDEN: [char; 6] = [
    '\u{0}',
    '\u{1b}',
    '\u{202e}',
    '\u{2066}',
    '\u{e0041}',
    '\u{200b}',
];

/// What the policy reports for [`HOSTILE`].
fn hostile_removed() -> Value {
    json!({"control": 1, "ansi_escape": 5, "bidi": 2, "tag": 1, "zero_width": 1})
}

/// Every hidden character of [`HIDDEN`] found in any string of `v`.
fn hidden_in(v: &Value) -> Vec<char> {
    match v {
        Value::String(s) => s.chars().filter(|c| HIDDEN.contains(c)).collect(),
        Value::Array(a) => a.iter().flat_map(hidden_in).collect(),
        Value::Object(m) => m.values().flat_map(hidden_in).collect(),
        _ => Vec::new(),
    }
}

type Bound = crate::work::Work;

/// Project `p` rooted at a git worktree with a `docs/` directory, issue P-1 bound to it.
fn bound() -> Bound {
    let b = Bound::new();
    std::fs::create_dir_all(b.wt.join("docs")).unwrap();
    b
}

const DIFF: &str =
    "diff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-old\n+new\n";

#[tokio::test(flavor = "multi_thread")]
async fn every_tool_that_stores_agent_text_cleans_it_and_says_what_it_removed() {
    let b = bound();
    let c = b.serve("worker").await;
    // A worker changes only its bound issue (docs/colibri.md), so task_update targets it;
    // create_pr needs the issue in progress, which the orchestrator (the CLI) sets.
    let task = b.issue.clone();
    b.env.set_status(&b.issue, "in_progress", None);
    // (tool, arguments carrying HOSTILE in one text field)
    let table: Vec<(&str, Value)> = vec![
        ("create_issue", json!({"title": format!("Title {HOSTILE}")})),
        (
            "add_finding",
            json!({"category": "bug", "summary": HOSTILE}),
        ),
        ("add_comment", json!({"content": HOSTILE})),
        (
            "thought_record",
            json!({"task_id": b.issue, "type": "decision", "content": HOSTILE}),
        ),
        ("task_create", json!({"title": HOSTILE, "project": "p"})),
        (
            "task_update",
            json!({"task_id": task, "description": HOSTILE}),
        ),
        (
            "update_memory",
            json!({"scope": "project", "filename": "notes.md", "content": HOSTILE}),
        ),
        (
            "create_pr",
            json!({"diff": DIFF, "branch_name": "symphony/P-1", "base_branch": "main",
                   "gate_results": [{"command": "cargo test", "label": "Tests",
                                     "exit_code": 0, "output": HOSTILE}]}),
        ),
        // Last: a sub-task blocks the bound issue.
        ("create_subtask", json!({"title": format!("Sub {HOSTILE}")})),
    ];
    for (tool, args) in &table {
        let r = c.ok(tool, args.clone()).await;
        assert_eq!(r["removed_characters"], hostile_removed(), "{tool}: {r:#}");
        assert!(hidden_in(&r).is_empty(), "{tool} echoed hidden text: {r:#}");
    }
    // A clean call reports nothing.
    let clean = c.ok("add_comment", json!({"content": "plain"})).await;
    assert!(clean.get("removed_characters").is_none(), "{clean:#}");

    // What later agents read back holds none of it.
    for (tool, args) in [
        ("get_issue", json!({})),
        ("get_issue_status", json!({})),
        ("list_issues", json!({"limit": 100})),
        ("thought_record_list", json!({"task_id": b.issue})),
        ("task_get", json!({"task_id": task})),
    ] {
        let r = c.ok(tool, args).await;
        assert!(hidden_in(&r).is_empty(), "{tool}: {r:#}");
        assert!(
            serde_json::to_string(&r).unwrap().contains("ABCDEFG"),
            "{tool} lost the visible text: {r:#}"
        );
    }
    let memory = b.sym.join("data/memory/p/worker/notes.md");
    assert_eq!(std::fs::read_to_string(memory).unwrap(), "ABCDEFG");

    // Text that is nothing but hidden characters is refused, not stored empty.
    let e = c
        .err_code(
            "add_comment",
            json!({"content": "\u{200b}\u{202e}"}),
            "ERR_INVALID_INPUT",
        )
        .await;
    assert!(e.to_string().contains("only of hidden"), "{e:#}");
    // Names are refused rather than changed.
    c.err_code(
        "create_issue",
        json!({"title": "ok", "labels": ["bug\u{200b}"]}),
        "ERR_INVALID_INPUT",
    )
    .await;
    // Learnings keep their stricter form: hostile classes refused (tested in
    // learnings.rs), invisible ones removed and reported.
    let l = c
        .ok(
            "add_learning",
            json!({"pattern": "Prefer the repository's typed query builder over raw SQL\u{200b} strings in\u{ad} handlers"}),
        )
        .await;
    assert_eq!(
        l["removed_characters"],
        json!({"zero_width": 1, "invisible_format": 1})
    );
    c.close().await;

    // The trail still verifies: text was cleaned before it was hashed.
    let v = b.env.verify_trail(&b.issue);
    assert_eq!(v["intact"], true, "{v:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn vault_documents_are_cleaned_at_chunk_time_by_update_and_reindex() {
    let b = bound();
    std::fs::write(
        b.wt.join("docs/a.md"),
        format!("# Ferry\n\n## Timetable\n\nThe ferry leaves at seven {HOSTILE}.\n"),
    )
    .unwrap();
    let c = b.serve("worker").await;
    let u = c.ok("vault_update", json!({"path": "docs/a.md"})).await;
    assert_eq!(u["removed_characters"], hostile_removed(), "{u:#}");
    let r = c
        .ok(
            "vault_retrieve",
            json!({"query": "ferry timetable", "top_k": 3}),
        )
        .await;
    assert!(hidden_in(&r).is_empty(), "{r:#}");
    assert!(r.to_string().contains("ABCDEFG"), "{r:#}");
    c.close().await;

    std::fs::write(
        b.wt.join("docs/b.md"),
        format!("# Bus\n\nThe bus {HOSTILE} leaves at nine.\n"),
    )
    .unwrap();
    let docs = b.wt.join("docs");
    // Both files are (re)chunked: a.md was stored under the worktree's root key.
    let s = b.env.json(&["reindex", docs.to_str().unwrap()]);
    assert_eq!(s["files_changed"], 2, "{s:#}");
    assert_eq!(s["removed_characters"], 20, "{s:#}");
    assert_eq!(
        s["removed_characters_by_class"],
        json!({"control": 2, "ansi_escape": 10, "bidi": 4, "tag": 2, "zero_width": 2})
    );
    let text = b.env.ok(&["reindex", docs.to_str().unwrap()]);
    assert!(text.contains("hidden characters removed: 0"), "{text}");
}

// ------------------------------------------------------------------ tamper evidence

/// A bound server with one thought, one finding and one comment on P-1, and a
/// finalized session over them. Returns the session id.
async fn finalized(b: &Bound, c: &Client) -> String {
    c.ok(
        "thought_record",
        json!({"task_id": b.issue, "type": "decision", "content": "use WAL"}),
    )
    .await;
    c.ok(
        "add_finding",
        json!({"category": "bug", "summary": "off by one"}),
    )
    .await;
    c.ok("add_comment", json!({"content": "fixed"})).await;
    // Audit sessions and Merkle roots are the judge's tools (src/access/scope.rs).
    let judge = b.serve("judge").await;
    let s = judge
        .ok(
            "audit_session_start",
            json!({"task_id": b.issue, "auditor_id": "auditor"}),
        )
        .await["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    judge.ok("merkle_finalize", json!({"session_id": s})).await;
    judge.close().await;
    s
}

/// Assert that all three verifications report the session's root as broken.
async fn assert_root_broken(b: &Bound, c: &Client, session: &str) {
    let v = c
        .ok("audit_verify_chain", json!({"session_id": session}))
        .await;
    assert_eq!(v["merkle_root_matches"], false, "{v:#}");
    assert_eq!(v["chain_valid"], false);
    assert!(
        v["broken_links"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["reason"] == "merkle_root_mismatch" && l["record_id"] == session),
        "{v:#}"
    );
    let out = b.env.run(&["audit", "verify", &b.issue, "--json"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["merkle_root_matches"], false, "{j:#}");
    let out = b.env.run(&["findings", &b.issue, "--verify"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("merkle_root"),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_consistently_rewritten_trail_and_an_edited_root_are_both_detected() {
    let b = bound();
    let c = b.serve("worker").await;
    let session = finalized(&b, &c).await;
    let v = c
        .ok("audit_verify_chain", json!({"session_id": session}))
        .await;
    assert_eq!(v["merkle_root_matches"], true, "{v:#}");
    assert_eq!(
        b.env.run(&["audit", "verify", &b.issue]).status.code(),
        Some(0)
    );

    // The audit tables refuse UPDATE and DELETE, and a replacing insert.
    let store = b.env.store();
    let replace = match store.read(|c| Ok(c.dialect())).unwrap() {
        cairn::store::db::Dialect::Sqlite => {
            "INSERT OR REPLACE INTO audit_merkle_leaves (session_id, position, chain, record_id, hash)
             SELECT session_id, position, chain, record_id, hash FROM audit_merkle_leaves LIMIT 1"
        }
        cairn::store::db::Dialect::Postgres => {
            "INSERT INTO audit_merkle_leaves (session_id, position, chain, record_id, hash)
             SELECT session_id, position, chain, record_id, hash FROM audit_merkle_leaves LIMIT 1
             ON CONFLICT (session_id, position) DO UPDATE SET hash = excluded.hash"
        }
    };
    for sql in [
        "UPDATE audit_merkle_leaves SET hash = 'x'",
        "DELETE FROM audit_merkle_leaves",
        "DELETE FROM audit_sessions",
        "UPDATE audit_sessions SET merkle_root = 'x'",
        replace,
    ] {
        let e = store
            .write(|c| c.execute_batch(sql))
            .unwrap_err()
            .to_string();
        assert!(e.contains("refused"), "{sql}: {e}");
    }

    // An attacker with the database rewrites the comment, recomputes its hash, the head
    // and the frozen leaf, so that every chain and every leaf is consistent.
    let recs = store
        .read(|db| {
            db.query_row(
                "SELECT id, issue_id, position, kind, category, body, actor, created_at, prev_hash FROM trail_records WHERE kind = 'comment'",
                [],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, Option<String>>(4)?,
                        r.get::<_, String>(6)?,
                        r.get::<_, String>(7)?,
                        r.get::<_, String>(8)?,
                    ))
                },
            )
        })
        .unwrap();
    drop(store);
    let (id, issue_id, position, kind, category, actor, created_at, prev_hash) = recs;
    let body = json!({"content": "forged"});
    let hashed = json!({"actor": actor, "body": body, "category": category,
        "created_at": created_at, "id": id, "issue_id": issue_id, "kind": kind,
        "position": position, "prev_hash": prev_hash});
    let forged = sha256_hex(&canonical(&hashed));
    // Every value spliced here is hex, an id or this fixed JSON: no quote to escape.
    b.env.tamper(
        &[
            ("trail_records", "trail_records_no_update"),
            ("audit_merkle_leaves", "audit_merkle_leaves_no_update"),
        ],
        &format!(
            "UPDATE trail_records SET body = '{}', hash = '{forged}' WHERE id = '{id}';
             UPDATE trail_heads SET hash = '{forged}' WHERE issue_id = '{issue_id}';
             UPDATE audit_merkle_leaves SET hash = '{forged}' WHERE record_id = '{id}';",
            canonical(&body)
        ),
    );
    // Every chain verifies on its own...
    let out = b.env.run(&["findings", &b.issue, "--verify", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let trail: Value = serde_json::from_slice(&out.stdout).unwrap();
    let chain_only: Vec<&Value> = trail["broken"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["problem"] != "merkle_root")
        .collect();
    assert!(chain_only.is_empty(), "{trail:#}");
    // ...but the stored root is not the root of the leaves or of the records.
    assert_root_broken(&b, &c, &session).await;

    // Second attack on a fresh session: records untouched, the stored root edited.
    let b2 = bound();
    let c2 = b2.serve("worker").await;
    let s2 = finalized(&b2, &c2).await;
    b2.env.tamper(
        &[("audit_sessions", "audit_sessions_frozen")],
        "UPDATE audit_sessions SET merkle_root = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';",
    );
    assert_root_broken(&b2, &c2, &s2).await;
    c.close().await;
    c2.close().await;
}

fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", serde_json::to_string(k).unwrap(), canonical(&m[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

fn sha256_hex(s: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(s.as_bytes()))
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_rows_are_reported_at_their_position_not_crashed_on() {
    // (the append-only trigger in the way, what the attacker writes on SQLite, and on
    // PostgreSQL). SQLite's columns take a value of any type; PostgreSQL's hold only
    // their type, so there the attacker (who owns the tables) first relaxes the column:
    // the same row then reads as NULL, out of range or of another type where the
    // verifier expects an integer or a hash.
    let cases = [
        (
            ("trail_records", "trail_records_no_update"),
            "UPDATE trail_records SET position = 'two' WHERE position = 2",
            "ALTER TABLE trail_records ALTER COLUMN position DROP NOT NULL;
             UPDATE trail_records SET position = NULL WHERE position = 2",
        ),
        (
            ("trail_records", "trail_records_no_update"),
            "UPDATE trail_records SET hash = X'00ff' WHERE position = 2",
            "UPDATE trail_records SET hash = chr(255) || chr(1) WHERE position = 2",
        ),
        (
            ("trail_records", "trail_records_no_update"),
            "UPDATE trail_records SET position = -5 WHERE position = 2",
            "ALTER TABLE trail_records DROP CONSTRAINT trail_records_position_check;
             UPDATE trail_records SET position = -5 WHERE position = 2",
        ),
        (
            ("thought_records", "thought_records_no_update"),
            "UPDATE thought_records SET chain_position = 'two' WHERE chain_position = 1",
            "ALTER TABLE thought_records ALTER COLUMN chain_position DROP NOT NULL;
             UPDATE thought_records SET chain_position = NULL WHERE chain_position = 1",
        ),
        (
            ("audit_merkle_leaves", "audit_merkle_leaves_no_update"),
            "UPDATE audit_merkle_leaves SET position = 'two', hash = 'zz' WHERE position = 2",
            "ALTER TABLE audit_merkle_leaves DROP CONSTRAINT audit_merkle_leaves_pkey;
             ALTER TABLE audit_merkle_leaves ALTER COLUMN position DROP NOT NULL;
             UPDATE audit_merkle_leaves SET position = NULL, hash = 'zz' WHERE position = 2",
        ),
        (
            ("trail_heads", ""),
            "UPDATE trail_heads SET position = 1e300",
            "ALTER TABLE trail_heads ALTER COLUMN position TYPE double precision;
             UPDATE trail_heads SET position = 1e300",
        ),
    ];
    for ((table, trigger), on_sqlite, on_postgres) in cases {
        let b = bound();
        let c = b.serve("worker").await;
        let session = finalized(&b, &c).await;
        c.ok("add_comment", json!({"content": "third record"}))
            .await;
        let triggers: &[(&str, &str)] = if trigger.is_empty() {
            &[]
        } else {
            &[(table, trigger)]
        };
        let attack = if crate::common::on_postgres() {
            on_postgres.to_string()
        } else {
            format!("PRAGMA ignore_check_constraints = ON; {on_sqlite};")
        };
        b.env.tamper(triggers, &attack);
        let attack = attack.as_str();
        let mut commands = vec![vec!["audit", "verify", b.issue.as_str(), "--json"]];
        // `findings --verify` checks the work trail and the frozen roots, not thoughts.
        if !attack.contains("thought_records") {
            commands.push(vec!["findings", b.issue.as_str(), "--verify", "--json"]);
        }
        for args in commands {
            let out = b.env.run(&args);
            assert_eq!(
                out.status.code(),
                Some(3),
                "{attack}: {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let j: Value = serde_json::from_slice(&out.stdout).unwrap();
            let links = j
                .get("broken_links")
                .or_else(|| j.get("broken"))
                .and_then(Value::as_array)
                .unwrap();
            assert!(!links.is_empty(), "{attack}: {j:#}");
        }
        let v = c
            .ok("audit_verify_chain", json!({"session_id": session}))
            .await;
        assert_eq!(v["chain_valid"], false, "{attack}: {v:#}");
        c.close().await;
    }
}

// -------------------------------------------------------------------- storage faults

/// A tmpfs mounted at a path for the life of the guard (unmounted on drop). The
/// suite runs as root in CI; a failed mount fails the test with the reason.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mounting a tmpfs failed (the full-disk tests need root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fill the filesystem of `dir` with one file; returns it (remove it to free space).
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![0u8; 64 * 1024];
    while f.write_all(&block).is_ok() {}
    let _ = f.sync_all();
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_index_directory_full_still_commits_and_answers_reads() {
    let b = bound();
    let index = PathBuf::from(format!("{}.index", b.env.db.display()));
    let _fs = Tmpfs::mount(&index, "2m");
    let filler = fill(&index);
    std::fs::write(
        b.wt.join("docs/a.md"),
        "# Ferry\n\n## Timetable\n\nThe ferry to Zanzibar leaves the harbour at seven.\n",
    )
    .unwrap();
    let c = b.serve("worker").await;
    let u = c.ok("vault_update", json!({"path": "docs/a.md"})).await;
    assert_eq!(u["changed"], true, "{u:#}");
    let r = c
        .ok(
            "vault_retrieve",
            json!({"query": "ferry to Zanzibar", "top_k": 1}),
        )
        .await;
    assert_eq!(r["results"][0]["path"], "docs/a.md", "{r:#}");
    let pattern = "Prefer the repository's typed query builder over raw SQL strings in handlers";
    let l = c.ok("add_learning", json!({"pattern": pattern})).await;
    let s = c
        .ok("search_learnings", json!({"query": "typed query builder"}))
        .await;
    assert_eq!(s["results"][0]["id"], l["id"], "{s:#}");
    // Space freed: the next search brings the index up to date on disk.
    std::fs::remove_file(filler).unwrap();
    let s = c
        .ok("search_learnings", json!({"query": "typed query builder"}))
        .await;
    assert_eq!(s["results"][0]["id"], l["id"], "{s:#}");
    c.close().await;
}

#[test]
fn tantivy_temp_files_left_by_a_killed_writer_are_collected() {
    let b = bound();
    let pattern = "Prefer the repository's typed query builder over raw SQL strings in handlers";
    b.env.ok(&[
        "learnings",
        "add",
        "--issue",
        &b.issue,
        "--pattern",
        pattern,
    ]);
    let dir = PathBuf::from(format!("{}.index/learnings", b.env.db.display()));
    assert!(dir.join("meta.json").exists(), "the index exists");
    let leftover = dir.join(".tmpAbC123");
    std::fs::write(&leftover, b"half a meta.json").unwrap();
    b.env.ok(&["learnings", "reindex"]);
    assert!(!leftover.exists(), "the writer's next open collects it");
    let found = b.env.ok(&["learnings", "search", "typed query builder"]);
    assert!(found.contains("typed query builder"), "{found}");
}

/// The tests the PostgreSQL pass skips (`-- --skip sqlite_only::`, README): each says why
/// it would prove nothing there.
mod sqlite_only {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn a_full_disk_answers_a_stable_code_loses_nothing_and_recovers() {
        crate::common::sqlite_only(
            "a full disk under the database file (a tmpfs holding the SQLite file); a \
             PostgreSQL server's disk is the server's",
        );
        let mut env = Env::new();
        let mnt = env.path().join("full");
        let _fs = Tmpfs::mount(&mnt, "8m");
        env.db = mnt.join("cairn.db");
        env.location = env.db.to_string_lossy().into_owned();
        env.project("p", None);
        let issue = env.issue("p", "full disk");
        let c = env.serve_local(&["--issue-id", &issue]).await;
        for n in 0..5 {
            c.ok("add_comment", json!({"content": format!("before {n}")}))
                .await;
        }
        let filler = fill(&mnt);
        // Writes fail with the stable code, saying what is full and not to retry.
        let big = "x".repeat(15_000);
        let mut body = Value::Null;
        for _ in 0..50 {
            let r = c.call("add_comment", json!({"content": big})).await;
            if r.is_error == Some(true) {
                body = crate::common::body(&r);
                break;
            }
        }
        assert_eq!(body["error"]["code"], "ERR_STORAGE_FULL", "{body:#}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("cairn.db")
                && message.contains("will not succeed until space is freed"),
            "{message}"
        );
        // Reads still answer, and nothing written before is lost.
        let got = c.ok("get_issue", json!({})).await;
        let comments: Vec<&str> = got["comments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["content"].as_str().unwrap())
            .collect();
        assert!(
            comments.starts_with(&["before 0", "before 1", "before 2", "before 3", "before 4"]),
            "{comments:?}"
        );
        // Space freed: writes work again, and the chain verifies.
        std::fs::remove_file(filler).unwrap();
        c.ok("add_comment", json!({"content": "after"})).await;
        c.close().await;
        let out = env.run(&["findings", &issue, "--verify"]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }

    /// ONNX Runtime 1.31 keeps a device id and a queue of usage events under
    /// `$XDG_CACHE_HOME/Microsoft/DeveloperTools/.onnxruntime/` and uploads them to
    /// Microsoft (its resolver asks for mobile.events.data.microsoft.com), unless
    /// `ORT_DISABLE_TELEMETRY` is set when it starts, or it sees a CI service's variables.
    /// The binary sets it itself: a command that loads the model, run with none of those
    /// variables and a cache directory of its own, leaves that directory empty.
    #[test]
    fn the_embedding_runtime_records_and_sends_nothing() {
        crate::common::sqlite_only("the model's runtime, not the store");
        let env = Env::new();
        let home = tempfile::tempdir().unwrap();
        let out = Command::new(crate::common::bin())
            .args(["--db", &env.location, "search", "rolling back a migration"])
            .env_remove("ORT_DISABLE_TELEMETRY")
            .env_remove("GITHUB_ACTIONS")
            .env_remove("TF_BUILD")
            .env("HOME", home.path())
            .env("XDG_CACHE_HOME", home.path().join("cache"))
            .env("CAIRN_LOG", "info")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(
            stderr.contains("embedding model loaded"),
            "the command ran the model: {stderr}"
        );
        let left: Vec<PathBuf> = tree(home.path()).into_iter().map(|(p, _)| p).collect();
        assert!(
            left.is_empty(),
            "files written outside the database: {left:?}"
        );
    }

    /// The mode bits of `path` (permissions only).
    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .permissions()
            .mode()
            & 0o777
    }

    /// Issue 62: a database Cairn creates, its WAL and shared-memory files, the directory it
    /// creates for it and its index directory are the owner's alone (the probe read every
    /// project's issues and learnings from a 0644 file as another user).
    #[test]
    fn a_new_database_its_wal_and_its_indexes_are_owner_only() {
        crate::common::sqlite_only("the modes of a SQLite file and its WAL");
        let env = Env::new();
        let db = env.path().join("fresh/cairn.db");
        let db_arg = db.to_string_lossy().into_owned();
        let out = Command::new(crate::common::bin())
            .args([
                "--db", &db_arg, "project", "create", "--slug", "shop", "--name", "Shop",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Open while the files of an open database exist (SQLite removes the WAL when the
        // last connection closes).
        let store = cairn::store::Store::open(&db).unwrap();
        let wal = PathBuf::from(format!("{db_arg}-wal"));
        let shm = PathBuf::from(format!("{db_arg}-shm"));
        let index = PathBuf::from(format!("{db_arg}.index"));
        for (path, want) in [
            (db.clone(), 0o600),
            (wal, 0o600),
            (shm, 0o600),
            (db.parent().unwrap().to_path_buf(), 0o700),
            (index, 0o700),
        ] {
            assert_eq!(mode(&path), want, "{} is {:o}", path.display(), mode(&path));
        }
        drop(store);
    }
}
