//! `cairn store copy`: a knowledge base built through the facade (projects, issues with
//! labels, dependencies and a sub-task, findings and comments, status history, thought
//! records, audit sessions with a finalized Merkle root, learnings with their history
//! and embeddings, vault documents, a PR, a run, metrics, a session token) goes SQLite →
//! PostgreSQL (the binary) → SQLite (the facade); the last SQLite file equals the first
//! row by row, and the PostgreSQL copy answers as the original does. These tests need
//! PostgreSQL whatever `CAIRN_TEST_STORE` says: they use the process's throwaway cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use cairn::Cairn;
use cairn::access::context::{BindArgs, WorkContext};
use cairn::colibri::audit::{AuditScope, VerifyTarget};
use cairn::colibri::thoughts::{NewThought, ThoughtType};
use cairn::compose::store_copy::{CopyReport, TABLES, is_derived_table};
use cairn::embed::HashEmbedder;
use cairn::error::ErrorKind;
use cairn::issues::{NewIssue, NewProject, Status};
use cairn::learnings::{LearningSearch, NewFeedback, NewLearning, Outcome, SearchScope};
use cairn::store::{Location, Store};
use cairn::trail::chain::FindingCategory;
use cairn::trail::findings::NewFinding;
use cairn::trail::metrics::{NewCoverage, NewTestHealth};
use cairn::vault::reindex::ReindexOptions;
use cairn::work::prs::NewPullRequest;
use serde_json::Value;

use crate::common::bin;
use crate::common::pg::PgCluster;

fn open(location: &Location) -> Cairn {
    Cairn::open_at_with_embedder(location, Box::new(HashEmbedder::new())).unwrap()
}

fn pg(dir: &Path, name: &str) -> Location {
    Location::Postgres {
        url: PgCluster::shared().create_database(name),
        cache: dir.join(format!("cache-{name}")),
    }
}

/// A knowledge base with a row in every table, through the facade.
fn build(dir: &Path, db: &Path) -> Cairn {
    let cairn = open(&Location::File(db.to_path_buf()));
    cairn
        .create_project(&NewProject {
            slug: "shop".into(),
            name: "Shop".into(),
            prefix: None,
            path: None,
        })
        .unwrap();
    let issue = |title: &str, f: &dyn Fn(&mut NewIssue)| {
        let mut new = NewIssue {
            project: "shop".into(),
            title: title.into(),
            ..Default::default()
        };
        f(&mut new);
        cairn.create_issue(&new).unwrap().identifier
    };
    let one = issue("Checkout fails on empty carts", &|i| {
        i.labels = vec!["backend".into(), "bug".into()];
        i.description = Some("Stack trace in the payment step".into());
        i.estimate_hours = Some(2.5);
    });
    let two = issue("Retry payments", &|i| i.depends_on = vec!["SHOP-1".into()]);
    let sub = cairn
        .create_subtask(
            &one,
            NewIssue {
                project: "shop".into(),
                title: "Reproduce with an empty cart".into(),
                ..Default::default()
            },
            "agent",
        )
        .unwrap()
        .identifier;
    cairn
        .update_issue_status(&two, Status::InProgress, Some("starting"), "person", false)
        .unwrap();

    let finding = |issue: &str, summary: &str| {
        cairn
            .add_finding(
                issue,
                &NewFinding {
                    category: FindingCategory::Bug,
                    summary: summary.into(),
                    details: Some("details".into()),
                    files: vec!["src/cart.rs".into()],
                },
                "agent",
            )
            .unwrap()
    };
    let f1 = finding(&one, "empty cart panics");
    finding(&two, "no retry on timeout");
    finding(&one, "total is NaN for zero items");
    cairn
        .add_comment(&one, "confirmed on staging", "person")
        .unwrap();
    cairn
        .mark_finding_processed(&f1.id, "orchestrator")
        .unwrap();

    // The orchestrator's session: bound to nothing, acting on any task.
    let orchestrator = WorkContext {
        actor: "agent".into(),
        ..WorkContext::default()
    };
    for (task, kind, content) in [
        (
            &one,
            ThoughtType::Discovery,
            "the cart total divides by the item count",
        ),
        (&one, ThoughtType::Decision, "guard the division"),
        (&sub, ThoughtType::Reflection, "reproduced"),
        (&two, ThoughtType::Risk, "retries may double-charge"),
    ] {
        cairn
            .thought_record(
                &orchestrator,
                &NewThought {
                    task: task.clone(),
                    kind,
                    content: content.into(),
                    branch: Some("fix/cart".into()),
                    commit_sha: None,
                    tests_run: vec!["cart::empty".into()],
                    blockers: vec![],
                    metadata: None,
                },
            )
            .unwrap();
    }
    let session = cairn
        .audit_session_start(
            &orchestrator,
            &one,
            "auditor",
            Some("release"),
            AuditScope::Deep,
        )
        .unwrap()
        .session_id;
    cairn
        .merkle_finalize(&orchestrator, &session, None)
        .unwrap();
    cairn
        .audit_session_start(&orchestrator, &two, "auditor", None, AuditScope::Shallow)
        .unwrap();

    for pattern in [
        "Cart totals: guard every division by the item count, an empty cart has none",
        "Payments: retry payment calls only with an idempotency key, or a retry double-charges",
        "CI: run cargo test with --locked so that the lock file is what gets tested",
    ] {
        cairn
            .add_learning(&NewLearning {
                issue: one.clone(),
                pattern: pattern.into(),
                context: None,
                applies_to: vec!["src/".into()],
                learning_type: None,
                created_by: "agent".into(),
                agent_type: "test".into(),
                merge: false,
                supersedes: Vec::new(),
                person: false,
            })
            .unwrap();
    }
    let learnings = search_ids(&cairn, "payment retry");
    // Issue two records the same lesson (merged: a confirmation), says it helped, and
    // a newer lesson supersedes another.
    let merged = cairn
        .add_learning(&NewLearning {
            issue: two.clone(),
            pattern: "Payments: retry payment calls only with an idempotency key, or a retry double-charges".into(),
            context: None,
            applies_to: vec!["src/".into()],
            learning_type: None,
            created_by: "agent".into(),
            agent_type: "worker".into(),
            merge: true,
            supersedes: Vec::new(),
            person: false,
        })
        .unwrap();
    assert!(merged.merged);
    cairn
        .learning_feedback(&NewFeedback {
            learning_id: merged.learning.id.clone(),
            issue: two.clone(),
            outcome: Outcome::Helped,
            note: Some("it was the double charge".into()),
            agent_type: "worker".into(),
            actor: "agent".into(),
        })
        .unwrap();
    cairn
        .add_learning(&NewLearning {
            issue: two.clone(),
            pattern: "CI: run cargo test with --locked and --frozen so that the lock file is what gets tested offline".into(),
            context: None,
            applies_to: vec!["src/".into()],
            learning_type: None,
            created_by: "agent".into(),
            agent_type: "worker".into(),
            merge: false,
            supersedes: search_ids(&cairn, "cargo locked lock file").into_iter().take(1).collect(),
            person: false,
        })
        .unwrap();
    cairn
        .verify_learning(&learnings[0], "person", Some("checked"))
        .unwrap();
    cairn
        .rate_learning(&learnings[0], 90, "person", None)
        .unwrap();

    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("payments.md"),
        "# Payments\n\nRetries use an idempotency key.\n\n## Timeouts\n\nAfter 30 s.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("cart.md"),
        "# Cart\n\nTotals are sums of lines.\n",
    )
    .unwrap();
    cairn
        .vault_reindex(
            &ReindexOptions {
                dir: docs,
                ..Default::default()
            },
            &|_| {},
        )
        .unwrap();

    let work = cairn
        .bind(&BindArgs {
            issue: Some(two.clone()),
            ..Default::default()
        })
        .unwrap();
    cairn
        .create_work_pr(
            &work,
            &NewPullRequest {
                diff: "diff --git a/src/pay.rs b/src/pay.rs\n--- a/src/pay.rs\n+++ b/src/pay.rs\n@@ -1,1 +1,2 @@\n fn pay() {}\n+fn retry() {}\n".into(),
                branch_name: "fix/retry".into(),
                base_branch: "main".into(),
                gate_results: vec![],
            },
        )
        .unwrap();
    let log = dir.join("run.jsonl");
    std::fs::write(
        &log,
        [
            r#"{"type":"system","subtype":"init","session_id":"sess-1","model":"claude-x","tools":["Bash"]}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"running"}]},"session_id":"sess-1"}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.25,"duration_ms":1200,"num_turns":3,"result":"done"}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    cairn.ingest_run(&one, None, &log, false).unwrap();
    cairn
        .record_test_health(
            &one,
            &NewTestHealth {
                test_count: 120,
                test_files_changed: Some(2),
                tests_added: Some(3),
                tests_removed: None,
                execution_time_ms: Some(950),
            },
            "agent",
        )
        .unwrap();
    cairn
        .record_coverage(
            &one,
            &NewCoverage {
                file_path: "src/cart.rs".into(),
                concept: "totals".into(),
                status: "covered".into(),
                ticket_id: None,
                notes: None,
            },
            "agent",
        )
        .unwrap();
    cairn
        .set_profile_scope(
            &cairn::mcp::registry::scope_matrix(),
            &cairn::access::scope::ProfileScope {
                profile_type: "judge".into(),
                allowed_tools: None,
                disallowed_tools: Some(vec!["add_finding".into()]),
            },
        )
        .unwrap();
    // An issue moved in from another project: its old identifier is an alias.
    cairn
        .create_project(&NewProject {
            slug: "ops".into(),
            name: "Ops".into(),
            prefix: None,
            path: None,
        })
        .unwrap();
    let runbook = cairn
        .create_issue(&NewIssue {
            project: "ops".into(),
            title: "Move the runbook".into(),
            labels: vec!["cross-project".into()],
            ..Default::default()
        })
        .unwrap()
        .identifier;
    cairn
        .move_issue(&runbook, "shop", "it is the shop's", "person")
        .unwrap();
    cairn
        .mint_session_token(
            &BindArgs {
                issue: Some(one.clone()),
                ..Default::default()
            },
            None,
            Duration::from_secs(3600),
            // A forwarder's own token: the process binding is copied too.
            Some("1000:4242:987654"),
        )
        .unwrap();
    // An imported rules file (memory_sources, memory_items) and a candidate lesson from
    // a run log (learning_candidates).
    let rules = dir.join("AGENTS.md");
    std::fs::write(
        &rules,
        "- Card payments are retried by the queue worker; never retry them inline in the request.\n",
    )
    .unwrap();
    cairn
        .import_memory(&cairn::memory::import::ImportRequest {
            project: "shop".into(),
            paths: vec![rules],
            dry_run: false,
        })
        .unwrap();
    let fixed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agents/runs/rust-explained-before-fix.jsonl");
    // The run's id is the log's session_id.
    cairn.ingest_run(&two, None, &fixed, false).unwrap();
    assert_eq!(
        cairn.propose_candidates("run-rust-borrow").unwrap().len(),
        1
    );
    cairn
}

fn search_ids(cairn: &Cairn, query: &str) -> Vec<String> {
    cairn
        .search_learnings(&LearningSearch {
            query: query.into(),
            scope: SearchScope::All,
            limit: None,
            min_quality_score: None,
            include_superseded: false,
            include_archived: false,
            min_trust: None,
        })
        .unwrap()
        .learnings()
        .map(|l| l.id.clone())
        .collect()
}

/// Every row of every table of a SQLite file (with the implicit rowid where the copy
/// keeps it), sorted, and the AUTOINCREMENT counters.
fn sqlite_rows(db: &Path) -> BTreeMap<String, Vec<String>> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut out = BTreeMap::new();
    for t in TABLES {
        let select = if t.rowid {
            format!("SELECT rowid, * FROM {}", t.name)
        } else {
            format!("SELECT * FROM {}", t.name)
        };
        let mut stmt = c.prepare(&select).unwrap();
        let width = stmt.column_count();
        let mut rows: Vec<String> = stmt
            .query_map([], |r| {
                (0..width)
                    .map(|i| r.get::<_, rusqlite::types::Value>(i))
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map(|v| format!("{v:?}"))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        rows.sort();
        out.insert(t.name.to_string(), rows);
    }
    let mut stmt = c
        .prepare("SELECT name, seq FROM sqlite_sequence ORDER BY name")
        .unwrap();
    let seqs = stmt
        .query_map([], |r| {
            Ok(format!(
                "{}={}",
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?
            ))
        })
        .unwrap()
        .collect::<rusqlite::Result<Vec<_>>>()
        .unwrap();
    out.insert("sqlite_sequence".into(), seqs);
    out
}

fn copy_with_binary(dir: &Path, from: &str, to: &str) -> std::process::Output {
    Command::new(bin())
        .args(["store", "copy", "--from", from, "--to", to, "--json"])
        .env_remove("CAIRN_DB")
        .env_remove("CAIRN_CACHE_DIR")
        .env("XDG_CACHE_HOME", dir.join("xdg"))
        .current_dir(dir)
        .output()
        .unwrap()
}

fn url_of(l: &Location) -> &str {
    match l {
        Location::Postgres { url, .. } => url,
        Location::File(_) => panic!("not PostgreSQL"),
    }
}

#[test]
fn sqlite_to_postgres_to_sqlite_keeps_every_row_id_and_chain() {
    let tmp = tempfile::tempdir().unwrap();
    let first = tmp.path().join("first.db");
    let original = build(tmp.path(), &first);
    let learnings = search_ids(&original, "payment retry idempotency");
    assert!(!learnings.is_empty());
    let before = sqlite_rows(&first);
    for t in TABLES {
        assert!(
            !before[t.name].is_empty(),
            "the knowledge base has no row in {}: the test would not cover it",
            t.name
        );
    }

    // SQLite → PostgreSQL with the binary.
    let pg = pg(tmp.path(), "copy_to");
    let out = copy_with_binary(tmp.path(), first.to_str().unwrap(), url_of(&pg));
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tables = report["tables"].as_array().unwrap();
    assert_eq!(tables.len(), TABLES.len());
    for t in tables {
        let name = t["table"].as_str().unwrap();
        assert_eq!(
            t["source_rows"].as_u64().unwrap(),
            before[name].len() as u64,
            "{name}"
        );
        assert_eq!(t["destination_rows"], t["source_rows"], "{name}");
    }
    // Three issues with records, and the moved one (its move's comment).
    assert_eq!(report["chains"]["issues"], 4);
    assert_eq!(report["chains"]["audit_sessions"], 2);
    assert_eq!(report["chains"]["broken"], serde_json::json!([]));

    // The PostgreSQL copy answers as the original does.
    let copy = open(&pg);
    assert_eq!(search_ids(&copy, "payment retry idempotency"), learnings);
    let person = WorkContext::default();
    for task in ["SHOP-1", "SHOP-2", "SHOP-3"] {
        let target = VerifyTarget {
            task: Some(task.into()),
            ..Default::default()
        };
        let (a, b) = (
            original.audit_verify(&person, &target).unwrap(),
            copy.audit_verify(&person, &target).unwrap(),
        );
        // The copy answers as the original does (a task verified alone under a deep
        // session reports its sub-task's frozen leaves on both: see the report).
        assert_eq!(a.chain_valid, b.chain_valid, "{task}");
        assert_eq!(a.broken_links.len(), b.broken_links.len(), "{task}");
        assert_eq!(a.total_records, b.total_records);
        assert!(copy.verify_trail(task).unwrap().intact);
    }
    for session in ["A-0001", "A-0002"] {
        let v = copy
            .audit_verify(
                &person,
                &VerifyTarget {
                    session: Some(session.into()),
                    ..Default::default()
                },
            )
            .unwrap();
        assert!(v.chain_valid, "{session}: {:?}", v.broken_links);
    }
    assert_eq!(
        original.merkle_root("A-0001").unwrap().merkle_root,
        copy.merkle_root("A-0001").unwrap().merkle_root
    );
    let hits = |c: &Cairn| -> Vec<String> {
        c.vault_search("idempotency key retries", Some(5), None, None)
            .unwrap()
            .into_iter()
            .map(|h| format!("{}:{}", h.path, h.metadata.line_start))
            .collect()
    };
    assert_eq!(hits(&copy), hits(&original));
    assert_eq!(
        copy.issue("SHOP-3").unwrap().parent,
        original.issue("SHOP-3").unwrap().parent
    );

    // SQLite → PostgreSQL → SQLite with the facade: equal row by row.
    let last = tmp.path().join("last.db");
    let report: CopyReport =
        Cairn::copy_store(&pg, &Location::File(last.clone()), &|_| {}).unwrap();
    assert!(report.chains.broken.is_empty());
    assert_eq!(sqlite_rows(&last), before);

    // The copies go on where the original left off: identities and chains continue.
    for c in [&copy, &open(&Location::File(last.clone()))] {
        let next = c
            .create_issue(&NewIssue {
                project: "shop".into(),
                title: "Next".into(),
                ..Default::default()
            })
            .unwrap();
        // SHOP-4 is the issue moved in from ops, SHOP-5 the imported AGENTS.md's.
        assert_eq!(next.identifier, "SHOP-6");
        let orchestrator = WorkContext {
            actor: "agent".into(),
            ..WorkContext::default()
        };
        let t = c
            .thought_record(
                &orchestrator,
                &NewThought {
                    task: "SHOP-2".into(),
                    kind: ThoughtType::Reflection,
                    content: "after the copy".into(),
                    branch: None,
                    commit_sha: None,
                    tests_run: vec![],
                    blockers: vec![],
                    metadata: None,
                },
            )
            .unwrap();
        assert_eq!(t.thought_id, "Θ-0005");
        assert!(
            c.audit_verify(
                &WorkContext::default(),
                &VerifyTarget {
                    task: Some("SHOP-2".into()),
                    ..Default::default()
                },
            )
            .unwrap()
            .chain_valid
        );
    }
}

#[test]
fn postgres_to_postgres_and_sqlite_to_sqlite_copies_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let first = tmp.path().join("first.db");
    drop(build(tmp.path(), &first));
    let second = tmp.path().join("second.db");
    Cairn::copy_store(
        &Location::File(first.clone()),
        &Location::File(second.clone()),
        &|_| {},
    )
    .unwrap();
    assert_eq!(sqlite_rows(&second), sqlite_rows(&first));

    let (a, b) = (pg(tmp.path(), "pg_a"), pg(tmp.path(), "pg_b"));
    Cairn::copy_store(&Location::File(first.clone()), &a, &|_| {}).unwrap();
    let report = Cairn::copy_store(&a, &b, &|_| {}).unwrap();
    assert!(
        report.chains.broken.is_empty(),
        "{:?}",
        report.chains.broken
    );
    let rows: usize = TABLES
        .iter()
        .map(|t| sqlite_rows(&first)[t.name].len())
        .sum();
    assert_eq!(report.rows, rows as u64);
    let third = tmp.path().join("third.db");
    Cairn::copy_store(&b, &Location::File(third.clone()), &|_| {}).unwrap();
    assert_eq!(sqlite_rows(&third), sqlite_rows(&first));
}

#[test]
fn a_destination_with_rows_is_refused_and_left_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let first = tmp.path().join("first.db");
    drop(build(tmp.path(), &first));

    let busy = tmp.path().join("busy.db");
    let other = open(&Location::File(busy.clone()));
    other
        .create_project(&NewProject {
            slug: "other".into(),
            name: "Other".into(),
            prefix: None,
            path: None,
        })
        .unwrap();
    let before = sqlite_rows(&busy);
    let err = Cairn::copy_store(
        &Location::File(first.clone()),
        &Location::File(busy.clone()),
        &|_| {},
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FailedPrecondition);
    assert!(err.to_string().contains("not empty"), "{err}");
    assert_eq!(sqlite_rows(&busy), before);

    // On PostgreSQL, through the binary: exit 1, the reason on stderr, nothing written.
    let pg = pg(tmp.path(), "busy");
    Cairn::copy_store(&Location::File(first.clone()), &pg, &|_| {}).unwrap();
    let out = copy_with_binary(tmp.path(), first.to_str().unwrap(), url_of(&pg));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not empty"));
    assert!(out.stdout.is_empty());
    let issues: i64 = Store::open_at(&pg)
        .unwrap()
        .read(|c| c.query_row("SELECT count(*) FROM issues", [], |r| r.get(0)))
        .unwrap();
    assert_eq!(issues, 5);

    // The source itself, and a source that does not exist, are refused as input.
    let out = copy_with_binary(tmp.path(), first.to_str().unwrap(), first.to_str().unwrap());
    assert_eq!(out.status.code(), Some(2));
    let missing = tmp.path().join("missing.db");
    let out = copy_with_binary(
        tmp.path(),
        missing.to_str().unwrap(),
        busy.to_str().unwrap(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(!missing.exists());
}

/// The names of a fresh database's tables, its identity columns and the tables with a
/// `rowid` column (PostgreSQL) or AUTOINCREMENT (SQLite).
fn schema(store: &Store) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    store
        .read(|c| {
            Ok(match c.dialect() {
                cairn::store::db::Dialect::Sqlite => (
                    c.query_map("SELECT name FROM sqlite_master WHERE type = 'table'", [], |r| r.get(0))?
                        .into_iter()
                        .collect(),
                    BTreeSet::new(),
                    c.query_map(
                        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%AUTOINCREMENT%'",
                        [],
                        |r| r.get(0),
                    )?
                    .into_iter()
                    .collect(),
                ),
                cairn::store::db::Dialect::Postgres => (
                    c.query_map(
                        "SELECT CAST(table_name AS text) FROM information_schema.tables
                         WHERE table_schema = current_schema()",
                        [],
                        |r| r.get(0),
                    )?
                    .into_iter()
                    .collect(),
                    c.query_map(
                        "SELECT CAST(table_name AS text) || '.' || CAST(column_name AS text)
                         FROM information_schema.columns
                         WHERE table_schema = current_schema() AND is_identity = 'YES'",
                        [],
                        |r| r.get(0),
                    )?
                    .into_iter()
                    .collect(),
                    c.query_map(
                        "SELECT CAST(table_name AS text) FROM information_schema.columns
                         WHERE table_schema = current_schema() AND column_name = 'rowid'",
                        [],
                        |r| r.get(0),
                    )?
                    .into_iter()
                    .collect(),
                ),
            })
        })
        .unwrap()
}

#[test]
fn the_copy_knows_every_table_the_migrations_create() {
    let tmp = tempfile::tempdir().unwrap();
    let listed: BTreeSet<String> = TABLES.iter().map(|t| t.name.to_string()).collect();
    let data = |names: BTreeSet<String>| -> BTreeSet<String> {
        names.into_iter().filter(|n| !is_derived_table(n)).collect()
    };

    let sqlite = Store::open(&tmp.path().join("fresh.db")).unwrap();
    let (tables, _, autoincrement) = schema(&sqlite);
    assert_eq!(
        data(tables),
        listed,
        "SQLite migrations vs store_copy::TABLES"
    );
    let sequenced: BTreeSet<String> = TABLES
        .iter()
        .filter(|t| t.identity.is_some() && !t.rowid)
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(autoincrement, sequenced);

    let postgres = Store::open_at(&pg(tmp.path(), "fresh")).unwrap();
    let (tables, identities, rowids) = schema(&postgres);
    assert_eq!(
        data(tables),
        listed,
        "PostgreSQL migrations vs store_copy::TABLES"
    );
    let declared: BTreeSet<String> = TABLES
        .iter()
        .filter_map(|t| t.identity.map(|c| format!("{}.{c}", t.name)))
        .collect();
    assert_eq!(identities, declared);
    let with_rowid: BTreeSet<String> = TABLES
        .iter()
        .filter(|t| t.rowid)
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(rowids, with_rowid);
}
