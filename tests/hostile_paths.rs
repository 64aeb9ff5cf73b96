//! A hostile agent with a shell in its worktree (issue 15, paths): while a tool runs,
//! a thread swaps a path component (the leaf, and a directory above it) with a prepared
//! symlink to an outside file or directory, in a tight loop of
//! `renameat2(RENAME_EXCHANGE)`. Every path-taking tool is called at least
//! [`CALLS`] times through one long-lived `cairn serve` session (`move_issue` too:
//! [`MOVE_CALLS`]), except `cairn reindex` ([`REINDEX_RUNS`] full runs, each loads the
//! model). Each test
//! asserts that nothing outside the root was read (no reply or error carries the
//! outside secret), written (the outside tree is byte-for-byte unchanged), stored (no
//! file under the test directory but the outside tree holds the secret: the database,
//! its WAL, the indexes, copies) or echoed.
//! Also: FIFOs, a character device and hard links as targets, and `--out` special files.

use std::os::unix::fs::{FileTypeExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rustix::fs::{CWD, RenameFlags};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::{Env, sqlite_only, tree};

/// Why the race tests run in the SQLite pass only (docs/postgres.md): their check that
/// nothing outside was stored reads every file under the test directory, which holds
/// the SQLite database and its WAL; a PostgreSQL server's files are elsewhere, so that
/// pass would repeat the race with the check covering only the indexes.
const SQLITE_ONLY: &str = "the race's 'nothing stored' check reads the database's files, which only SQLite keeps in the test directory";

/// Tool calls per race test.
const CALLS: usize = 2000;
/// `move_issue` calls in its race test: as many as the others (the issue asks for at
/// least 2,000), although each move commits a transaction and fsyncs its copies
/// (~50 ms on a loaded 2-core machine, so this test takes one to two minutes).
const MOVE_CALLS: usize = CALLS;
/// Full `cairn reindex` runs in its race test (each loads the embedding model).
const REINDEX_RUNS: usize = 12;
/// What every outside file contains; it must never show up anywhere else.
const SECRET: &str = "OUTSIDE-SECRET-5eb1c0d";

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A Markdown document long enough for every tool's content checks.
fn doc(extra: &str) -> String {
    format!(
        "# Research: token budgets\n\n## Summary\n\nBudgets are counted per request by a \
         middleware in front of the model client. {extra}\n\n## Risks\n\nCounting may drift \
         from the provider's own numbers.\n"
    )
}

/// Pairs of paths exchanged in a loop by a background thread until stopped.
type Pairs = Arc<Mutex<Vec<(PathBuf, PathBuf)>>>;

struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    pause: Arc<AtomicBool>,
    pairs: Pairs,
    handle: Option<JoinHandle<()>>,
}

impl Swapper {
    /// Start exchanging each `(real, link)` pair, over and over.
    fn start(pairs: Vec<(PathBuf, PathBuf)>) -> Swapper {
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let pause = Arc::new(AtomicBool::new(false));
        let pairs: Pairs = Arc::new(Mutex::new(pairs));
        let handle = {
            let (stop, swaps, pairs, pause) =
                (stop.clone(), swaps.clone(), pairs.clone(), pause.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if pause.load(Ordering::Relaxed) {
                        std::thread::yield_now();
                        continue;
                    }
                    let pairs = pairs.lock().unwrap();
                    for (a, b) in pairs.iter() {
                        // Swap in, then back: the real entry is replaced by the symlink
                        // for a moment, as a hostile `mv -T --exchange` loop would.
                        for _ in 0..2 {
                            if rustix::fs::renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE)
                                .is_ok()
                            {
                                swaps.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                }
            })
        };
        Swapper {
            stop,
            swaps,
            pause,
            pairs,
            handle: Some(handle),
        }
    }

    /// Replace the pairs, the swapper paused meanwhile; `prepare` runs while no swap
    /// is in flight.
    fn retarget(&self, prepare: impl FnOnce() -> Vec<(PathBuf, PathBuf)>) {
        self.pause.store(true, Ordering::Relaxed);
        let mut pairs = self.pairs.lock().unwrap();
        *pairs = prepare();
        drop(pairs);
        self.pause.store(false, Ordering::Relaxed);
    }

    /// Stop the thread; every pair is back in place (swaps come in twos). Returns the
    /// number of exchanges done.
    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap();
        let n = self.swaps.load(Ordering::Relaxed);
        assert!(n > 0, "the swapper never swapped anything");
        n
    }
}

/// A real entry and its prepared symlink to `target`, ready for exchange.
fn pair(real: &Path, target: &Path) -> (PathBuf, PathBuf) {
    let link = real.with_file_name(format!(
        ".{}.swap",
        real.file_name().unwrap().to_string_lossy()
    ));
    symlink(target, &link).unwrap();
    (real.to_path_buf(), link)
}

/// No file under `dir` outside `outside` contains the secret.
fn assert_not_stored(dir: &Path, outside: &Path) {
    for (p, bytes) in tree(dir) {
        if p.starts_with(outside) {
            continue;
        }
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "{} holds the outside secret",
            p.display()
        );
    }
}

/// The text of a reply, success or error, must not carry the secret.
fn assert_not_echoed(reply: &rmcp::model::CallToolResult) {
    let text = serde_json::to_string(reply).unwrap();
    assert!(!text.contains(SECRET), "a reply echoed the secret: {text}");
}

/// An outside tree with the secret in `files` (relative paths).
fn outside(env: &Env, files: &[&str]) -> (PathBuf, Vec<(PathBuf, Vec<u8>)>) {
    let dir = env.path().join("outside");
    for f in files {
        write(&dir.join(f), &doc(SECRET));
    }
    let before = tree(&dir);
    (dir, before)
}

/// A project `p` whose path is the git worktree `wt`, one issue bound to it, and its
/// marker file (the shared fixture of tests/work.rs).
fn setup(issue_flags: &[&str]) -> crate::work::Work {
    crate::work::Work::with(issue_flags)
}

/// The standard layout of a ticket directory for the move race: a file, a
/// subdirectory with a file, and the prepared symlinks for both.
fn ticket_layout(dir: &Path, out: &Path) -> Vec<(PathBuf, PathBuf)> {
    write(&dir.join("research.md"), &doc("Inside."));
    write(&dir.join("sub/notes.md"), &doc("Inside notes."));
    vec![
        pair(&dir.join("research.md"), &out.join("research.md")),
        pair(&dir.join("sub"), &out.join("sub")),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn fifos_devices_and_hard_links_are_refused_without_reading() {
    let s = setup(&["--label", "phase:research"]);
    let (out, _) = outside(&s.env, &["secret.md"]);
    let docs = s.wt.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    rustix::fs::mkfifoat(
        CWD,
        docs.join("pipe.md"),
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .unwrap();
    // /dev/zero's node (we run as root; without CAP_MKNOD this part is skipped).
    let zero = rustix::fs::mknodat(
        CWD,
        docs.join("zero.md"),
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o644),
        rustix::fs::makedev(1, 5),
    )
    .is_ok();
    std::fs::hard_link(out.join("secret.md"), docs.join("hard.md")).unwrap();
    let c = s.serve("worker").await;
    let mut cases = vec![("docs/pipe.md", "FIFO"), ("docs/hard.md", "hard links")];
    if zero {
        cases.push(("docs/zero.md", "character device"));
    }
    for (path, needle) in cases {
        let e = c.err("vault_update", json!({"path": path})).await;
        assert_eq!(e["error"]["code"], "ERR_INVALID_INPUT", "{e:#}");
        let text = e.to_string();
        assert!(text.contains(needle), "{path}: {text}");
        assert!(!text.contains(SECRET));
    }
    // The same checks guard complete_phase's artifact and skill_list's SKILL.md.
    let tdir = s.wt.join("docs/tickets").join(&s.issue);
    std::fs::create_dir_all(&tdir).unwrap();
    std::fs::hard_link(out.join("secret.md"), tdir.join("research.md")).unwrap();
    let e = c
        .err(
            "complete_phase",
            json!({
                "completed_phase": "research", "contract_version": 1,
                "artifact_path": format!("docs/tickets/{}/research.md", s.issue),
                "artifact_hash": sha256(doc(SECRET).as_bytes()),
                "summary": "s", "open_questions": [], "confidence": "high",
                "recommended_next_phase": "architecture",
                "project_path": s.wt.to_string_lossy(),
            }),
        )
        .await;
    assert!(e.to_string().contains("hard links"), "{e:#}");
    let skills = s.wt.join(".agents/skills/fifo");
    std::fs::create_dir_all(&skills).unwrap();
    rustix::fs::mkfifoat(
        CWD,
        skills.join("SKILL.md"),
        rustix::fs::Mode::from_raw_mode(0o644),
    )
    .unwrap();
    let r = c.ok("skill_list", json!({})).await;
    assert!(
        r["errors"][0]["reason"].as_str().unwrap().contains("FIFO"),
        "{r:#}"
    );
    c.close().await;

    // move_issue skips (and lists) the hard link instead of copying the outside file.
    let q = s.env.path().join("q");
    std::fs::create_dir_all(&q).unwrap();
    s.env.project("q", Some(&q));
    write(&tdir.join("plan.md"), &doc("Inside plan."));
    let c = s.serve("planner").await;
    let m = c
        .ok(
            "move_issue",
            json!({"target_project_id": "q", "reason": "r"}),
        )
        .await;
    assert_eq!(m["skipped_entries"], json!(["research.md"]), "{m:#}");
    assert_eq!(m["copied_files"].as_array().unwrap().len(), 1);
    c.close().await;
    assert_not_stored(&q, &out);

    // cairn reindex reports the special files and the hard link, and goes on.
    std::fs::remove_file(tdir.join("research.md")).ok();
    write(&docs.join("ok.md"), &doc("Fine."));
    let d = docs.to_string_lossy().into_owned();
    let v = s.env.json(&["reindex", &d]);
    let skipped: Vec<&str> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(skipped.contains(&"docs/hard.md"), "{v:#}");
    assert!(skipped.contains(&"docs/pipe.md"), "{v:#}");
    assert_eq!(v["files_skipped"].as_u64().unwrap() as usize, skipped.len());
    assert!(v["files_changed"].as_u64().unwrap() >= 1, "{v:#}");
    // Stored nowhere (the hard link itself aside).
    std::fs::remove_file(docs.join("hard.md")).unwrap();
    assert_not_stored(s.env.path(), &out);
}

#[test]
fn scope_out_never_replaces_a_special_file() {
    let env = Env::new();
    env.ok(&[
        "scope",
        "compute",
        "--profile",
        "worker",
        "--out",
        "/dev/null",
    ]);
    let m = std::fs::symlink_metadata("/dev/null").unwrap();
    assert!(m.file_type().is_char_device(), "/dev/null was replaced");
    assert!(!Path::new("/dev/null.json.tmp").exists());
    // A FIFO with a reader gets the JSON and stays a FIFO.
    let fifo = env.path().join("tools.fifo");
    rustix::fs::mkfifoat(CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o644)).unwrap();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let f = fifo.to_string_lossy().into_owned();
    env.ok(&["scope", "compute", "--profile", "worker", "--out", &f]);
    let got: Value = serde_json::from_slice(&reader.join().unwrap()).unwrap();
    assert!(
        got.as_array()
            .unwrap()
            .iter()
            .any(|t| t == "verify_workspace")
    );
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    // A directory is refused, not replaced.
    let dir = env.path().join("d");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_string_lossy().into_owned();
    let o = env.run(&["scope", "compute", "--profile", "worker", "--out", &d]);
    assert!(!o.status.success());
    assert!(dir.is_dir());
}

/// The tests the PostgreSQL pass skips (`-- --skip sqlite_only::`, README): each says why
/// it would prove nothing there.
mod sqlite_only {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn vault_update_and_delete_race_symlink_swaps() {
        sqlite_only(SQLITE_ONLY);
        let s = setup(&[]);
        let (out, before) = outside(&s.env, &["a.md", "docs/a.md"]);
        write(&s.wt.join("docs/a.md"), &doc("Inside."));
        let c = s.serve("worker").await;
        let first = c.ok("vault_update", json!({"path": "docs/a.md"})).await;
        assert_eq!(first["changed"], true);
        let swapper = Swapper::start(vec![
            pair(&s.wt.join("docs/a.md"), &out.join("a.md")),
            pair(&s.wt.join("docs"), &out.join("docs")),
        ]);
        let (mut ok, mut refused) = (0, 0);
        for i in 0..CALLS {
            let r = c.call("vault_update", json!({"path": "docs/a.md"})).await;
            assert_not_echoed(&r);
            if r.is_error == Some(true) {
                refused += 1;
            } else {
                ok += 1;
                // The inside file is unchanged: reading the outside one would change it.
                assert_eq!(r.structured_content.as_ref().unwrap()["changed"], false);
            }
            if i % 4 == 0 {
                let r = c.call("vault_delete", json!({"path": "docs/b.md"})).await;
                assert_not_echoed(&r);
                assert_eq!(r.is_error, Some(true));
            }
        }
        let swaps = swapper.stop();
        eprintln!("vault_update: {ok} served, {refused} refused, {swaps} exchanges");
        assert!(ok > 0, "the tool never succeeded during the race");
        let r = c
            .ok(
                "vault_retrieve",
                json!({"query": "token budgets", "top_k": 5}),
            )
            .await;
        assert!(!r.to_string().contains(SECRET));
        c.close().await;
        assert_eq!(tree(&out), before, "the outside tree changed");
        assert_not_stored(s.env.path(), &out);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn update_memory_races_symlink_swaps() {
        sqlite_only(SQLITE_ONLY);
        let s = setup(&[]);
        let mem = s.sym.join("data/memory/_global/planner");
        write(&mem.join("m.md"), "old");
        let (out, before) = outside(&s.env, &["m.md", "dir/m.md"]);
        let c = s.serve("planner").await;
        let swapper = Swapper::start(vec![
            pair(&mem.join("m.md"), &out.join("m.md")),
            pair(&mem, &out.join("dir")),
            pair(&s.sym.join("data/memory/_global"), &out.join("dir")),
        ]);
        let mut ok = 0;
        for i in 0..CALLS {
            let r = c
                .call(
                    "update_memory",
                    json!({"scope": "global", "filename": "m.md", "content": format!("note {i}")}),
                )
                .await;
            assert_not_echoed(&r);
            if r.is_error != Some(true) {
                ok += 1;
            }
        }
        let swaps = swapper.stop();
        eprintln!("update_memory: {ok} written, {swaps} exchanges");
        assert!(ok > 0);
        c.close().await;
        // Nothing written outside: same files, same bytes, no temp files.
        assert_eq!(tree(&out), before, "the outside tree changed");
        assert_eq!(
            std::fs::read_dir(out.join("dir")).unwrap().count(),
            1,
            "a file was created outside"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn complete_phase_races_symlink_swaps() {
        sqlite_only(SQLITE_ONLY);
        let s = setup(&[]);
        let art = s.wt.join("docs/tickets").join(&s.issue).join("research.md");
        let inside = doc("Inside.");
        write(&art, &inside);
        let (out, before) = outside(&s.env, &["research.md", "ticket/research.md"]);
        let outside_hash = sha256(doc(SECRET).as_bytes());
        let c = s.serve("worker").await;
        let rel = format!("docs/tickets/{}/research.md", s.issue);
        let claim = |hash: &str| {
            json!({
                "completed_phase": "research",
                "contract_version": 1,
                "artifact_path": rel,
                "artifact_hash": hash,
                "summary": "Budgets",
                "open_questions": [],
                "confidence": "high",
                "recommended_next_phase": "architecture",
                "project_path": s.wt.to_string_lossy(),
            })
        };
        let swapper = Swapper::start(vec![
            pair(&art, &out.join("research.md")),
            pair(art.parent().unwrap(), &out.join("ticket")),
        ]);
        let mut accepted = 0;
        for i in 0..CALLS {
            // Half the claims name the outside file's hash: accepting one would mean the
            // tool read the outside file.
            let hash = if i % 2 == 0 {
                sha256(inside.as_bytes())
            } else {
                outside_hash.clone()
            };
            let r = c.call("complete_phase", claim(&hash)).await;
            assert_not_echoed(&r);
            let text = serde_json::to_string(&r).unwrap();
            if i % 2 == 1 {
                assert_eq!(r.is_error, Some(true), "an outside artifact was accepted");
            } else {
                assert!(!text.contains(&outside_hash), "the outside hash was echoed");
                if r.is_error != Some(true) {
                    accepted += 1;
                }
            }
        }
        let swaps = swapper.stop();
        eprintln!("complete_phase: {accepted} inside claims accepted, {swaps} exchanges");
        assert!(accepted > 0);
        c.close().await;
        assert_eq!(tree(&out), before);
        assert_not_stored(s.env.path(), &out);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn skill_list_races_symlink_swaps() {
        sqlite_only(SQLITE_ONLY);
        let s = setup(&[]);
        let skill = s.wt.join(".agents/skills/s1");
        write(&skill.join("SKILL.md"), "---\ndescription: inside\n---\n");
        let dir = s.env.path().join("outside");
        write(
            &dir.join("SKILL.md"),
            &format!("---\ndescription: {SECRET}\n---\n"),
        );
        write(
            &dir.join("skill/SKILL.md"),
            &format!("---\ndescription: {SECRET}\n---\n"),
        );
        let c = s.serve("worker").await;
        let swapper = Swapper::start(vec![
            pair(&skill.join("SKILL.md"), &dir.join("SKILL.md")),
            pair(&skill, &dir.join("skill")),
        ]);
        let mut listed = 0;
        for _ in 0..CALLS {
            let r = c.call("skill_list", json!({})).await;
            assert_not_echoed(&r);
            assert_ne!(r.is_error, Some(true));
            let body = r.structured_content.unwrap();
            listed += body["skills"].as_array().unwrap().len();
        }
        let swaps = swapper.stop();
        eprintln!("skill_list: inside skill listed {listed} times, {swaps} exchanges");
        assert!(listed > 0);
        c.close().await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn verify_workspace_races_symlink_swaps() {
        sqlite_only(SQLITE_ONLY);
        let s = setup(&[]);
        let dir = s.env.path().join("outside");
        write(&dir.join("marker"), &format!("{SECRET}\n"));
        let c = s.serve("worker").await;
        let swapper = Swapper::start(vec![pair(
            &s.wt.join(".symphony-worktree"),
            &dir.join("marker"),
        )]);
        let mut valid = 0;
        for _ in 0..CALLS {
            let r = c.call("verify_workspace", json!({})).await;
            assert_not_echoed(&r);
            if r.is_error != Some(true) {
                valid += 1;
            }
        }
        let swaps = swapper.stop();
        eprintln!("verify_workspace: {valid} valid, {swaps} exchanges");
        assert!(valid > 0);
        c.close().await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn move_issue_races_symlink_swaps() {
        sqlite_only(SQLITE_ONLY);
        let s = setup(&["--label", "phase:research"]);
        let q = s.env.path().join("q");
        std::fs::create_dir_all(&q).unwrap();
        s.env.project("q", Some(&q));
        let (out, before) = outside(&s.env, &["research.md", "sub/notes.md"]);
        let c = s.serve("planner").await;
        let mut ticket = s.wt.join("docs/tickets").join(&s.issue);
        let swapper = Swapper::start(ticket_layout(&ticket, &out));
        let mut copied = 0;
        let mut skipped = 0;
        let mut refused = 0;
        let mut in_p = true;
        for _ in 0..MOVE_CALLS {
            let (target, root) = if in_p { ("q", &q) } else { ("p", &s.wt) };
            let r = c
                .call(
                    "move_issue",
                    json!({"target_project_id": target, "reason": "race"}),
                )
                .await;
            assert_not_echoed(&r);
            let body = crate::common::body(&r);
            if r.is_error == Some(true) {
                // A file swapped between listing and copying: refused, nothing moved.
                assert_eq!(body["error"]["code"], "ERR_CONFLICT", "{body:#}");
                refused += 1;
                continue;
            }
            in_p = !in_p;
            copied += body["copied_files"].as_array().unwrap().len();
            skipped += body["skipped_entries"].as_array().unwrap().len();
            let id = body["identifier"].as_str().unwrap();
            // The copy holds only inside bytes; then the new ticket directory gets the
            // standard layout again, and the swapper moves on to it.
            let new_ticket = root.join("docs/tickets").join(id);
            swapper.retarget(|| {
                assert_not_stored(&new_ticket, &out);
                // (A listing that raced a rename may have found nothing to copy.)
                let _ = std::fs::remove_dir_all(&new_ticket);
                std::fs::remove_dir_all(&ticket).unwrap();
                ticket_layout(&new_ticket, &out)
            });
            ticket = new_ticket;
        }
        let swaps = swapper.stop();
        eprintln!(
            "move_issue: {copied} files copied, {skipped} entries skipped, {refused} moves \
             refused, {swaps} exchanges"
        );
        assert!(copied > 0);
        c.close().await;
        assert_eq!(tree(&out), before);
        assert_not_stored(s.env.path(), &out);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn reindex_races_symlink_swaps() {
        sqlite_only(SQLITE_ONLY);
        let s = setup(&[]);
        let (out, before) = outside(&s.env, &["a.md", "docs/a.md", "docs/sub/b.md"]);
        write(&s.wt.join("docs/a.md"), &doc("Inside a."));
        write(&s.wt.join("docs/sub/b.md"), &doc("Inside b."));
        let swapper = Swapper::start(vec![
            pair(&s.wt.join("docs/a.md"), &out.join("a.md")),
            pair(&s.wt.join("docs/sub"), &out.join("docs/sub")),
        ]);
        let docs = s.wt.join("docs").to_string_lossy().into_owned();
        let mut skipped = 0;
        for _ in 0..REINDEX_RUNS {
            let o = s.env.run(&["reindex", &docs, "--json"]);
            let text = String::from_utf8_lossy(&o.stdout).into_owned()
                + &String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "{text}");
            assert!(!text.contains(SECRET), "{text}");
            let v: Value = serde_json::from_slice(&o.stdout).unwrap();
            skipped += v["files_skipped"].as_u64().unwrap();
        }
        let swaps = swapper.stop();
        eprintln!("reindex: {REINDEX_RUNS} runs, {skipped} files skipped, {swaps} exchanges");
        assert_eq!(tree(&out), before);
        assert_not_stored(s.env.path(), &out);
    }
}
