//! The Knowledge Vault in process: the facade (`cairn::Cairn`) over a temporary store
//! with the deterministic test embedder ([`HashEmbedder`]), so document identity,
//! incremental ingest, removal, resuming an interrupted reindex, catch-up between
//! processes, the index manifest, the
//! defaults, `min_score`, the rank order and the per-document cap are checked without
//! the model and without spawning the binary. What only the model can show (fidelity,
//! retrieval quality, token counts, `cairn eval vault`) and what needs a process (a kill,
//! the MCP envelope) is in `vault.rs`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use cairn::Cairn;
use cairn::access::context::{BindArgs, WorkContext};
use cairn::embed::Embed;
use cairn::embed::HashEmbedder;
use cairn::error::ErrorKind;
use cairn::issues::NewProject;
use cairn::issues::settings::SettingsUpdate;
use cairn::vault::documents::VaultHit;
use cairn::vault::reindex::{ReindexOptions, ReindexSummary};
use cairn::vault::rerank::PROSE;
use cairn::vault::service::{
    DEFAULT_MIN_SCORE, DEFAULT_TOP_K, MAX_KNOWLEDGE_TOP_K, MAX_PER_DOCUMENT_LIMIT,
};

use crate::vault::{CONFIGURE, corpus, guide, write, write_services};

/// A temporary directory with a database path inside it.
struct Tmp {
    dir: tempfile::TempDir,
    db: PathBuf,
}

impl Tmp {
    fn new() -> Tmp {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("cairn.db");
        Tmp { dir, db }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A `Cairn` on this database with the test embedder: one per simulated process.
    fn open(&self) -> Cairn {
        Cairn::open_with_embedder(&self.db, Box::new(HashEmbedder::new())).unwrap()
    }

    fn count(&self, sql: &str) -> i64 {
        rusqlite::Connection::open(&self.db)
            .unwrap()
            .query_row(sql, [], |r| r.get(0))
            .unwrap()
    }
}

fn reindex(cairn: &Cairn, dir: &Path) -> ReindexSummary {
    reindex_with(cairn, dir, |_| {})
}

fn reindex_with(cairn: &Cairn, dir: &Path, f: impl FnOnce(&mut ReindexOptions)) -> ReindexSummary {
    let mut opts = ReindexOptions {
        dir: dir.to_path_buf(),
        ..Default::default()
    };
    f(&mut opts);
    cairn.vault_reindex(&opts, &|_| {}).unwrap()
}

fn paths(hits: &[VaultHit]) -> Vec<String> {
    hits.iter().map(|h| h.path.clone()).collect()
}

fn search(cairn: &Cairn, query: &str, top_k: usize) -> Vec<VaultHit> {
    cairn.vault_search(query, Some(top_k), None, None).unwrap()
}

fn project(cairn: &Cairn, slug: &str, path: &Path) {
    cairn
        .create_project(&NewProject {
            slug: slug.into(),
            name: slug.into(),
            prefix: None,
            path: Some(path.to_string_lossy().into_owned()),
        })
        .unwrap();
}

fn configure_collections(cairn: &Cairn, slug: &str, collections: &[&str]) {
    cairn
        .configure_project(
            slug,
            &SettingsUpdate {
                vault_collections: Some(collections.iter().map(|c| c.to_string()).collect()),
                ..Default::default()
            },
        )
        .unwrap();
}

fn bind(cairn: &Cairn, project: Option<&str>, worktree: Option<&Path>) -> WorkContext {
    cairn
        .bind(&BindArgs {
            project: project.map(String::from),
            worktree_path: worktree.map(Path::to_path_buf),
            ..Default::default()
        })
        .unwrap()
}

fn chunk_ids(t: &Tmp) -> Vec<i64> {
    let c = rusqlite::Connection::open(&t.db).unwrap();
    let mut st = c
        .prepare("SELECT id FROM vault_chunks ORDER BY id")
        .unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn reindex_is_incremental_and_removes_deleted_files() {
    let t = Tmp::new();
    let cairn = t.open();
    let docs = t.path().join("docs");
    write(&docs, "a.md", &guide("Alpha", CONFIGURE));
    write(&docs, "b.md", &guide("Beta", CONFIGURE));
    write(&docs, "sub/c.markdown", &guide("Gamma", CONFIGURE));
    write(&docs, "notes.bin", "not a format the vault reads");
    let first = reindex(&cairn, &docs);
    assert_eq!(
        first.collection, "docs",
        "default collection: the directory name"
    );
    assert_eq!(first.files_seen, 3);
    assert_eq!(first.chunks_embedded, 9);
    assert!(first.root.starts_with("dir:"), "{first:?}");

    let again = reindex(&cairn, &docs);
    assert_eq!(again.files_unchanged, 3, "{again:?}");
    assert_eq!((again.files_changed, again.chunks_embedded), (0, 0));

    let ids_before = chunk_ids(&t);
    write(
        &docs,
        "a.md",
        &guide(
            "Alpha",
            "Set the port with ALPHA_PORT; the log level follows RUST_LOG.",
        ),
    );
    let edited = reindex(&cairn, &docs);
    assert_eq!((edited.files_changed, edited.files_unchanged), (1, 2));
    assert_eq!(edited.chunks_embedded, 1, "only the edited section");
    assert_eq!(edited.chunks_reused, 2);
    assert_eq!(edited.chunks_removed, 1);
    let ids_after: HashSet<i64> = chunk_ids(&t).into_iter().collect();
    assert_eq!(ids_after.len(), 9);
    let kept = ids_before.iter().filter(|i| ids_after.contains(i)).count();
    assert_eq!(kept, 8, "unchanged chunks keep their rows and ids");
    assert!(
        ids_after.iter().max() > ids_before.iter().max(),
        "the new chunk gets a fresh, higher id"
    );
    let hit = search(&cairn, "ALPHA_PORT environment variable", 1);
    assert_eq!(paths(&hit), ["a.md"]);
    assert!(hit[0].text.contains("ALPHA_PORT"));

    std::fs::remove_file(docs.join("b.md")).unwrap();
    let removed = reindex(&cairn, &docs);
    assert_eq!(removed.files_removed, 1, "{removed:?}");
    assert_eq!(removed.chunks_removed, 3);
    assert_eq!(t.count("SELECT count(*) FROM vault_documents"), 2);
    let beta = search(&cairn, "Beta installer", 10);
    assert!(!paths(&beta).contains(&"b.md".to_string()), "{beta:?}");
    assert!(!beta.is_empty(), "the other documents still answer");
}

/// Two `Cairn`s on one database stand for two processes: the searcher's graph and BM25
/// index catch up with what the other committed, by chunk id, before each search.
#[test]
fn a_searcher_sees_what_another_process_indexed() {
    let t = Tmp::new();
    let (searcher, indexer) = (t.open(), t.open());
    let docs = t.path().join("docs");
    write(&docs, "a.md", &guide("Alpha", CONFIGURE));
    reindex(&indexer, &docs);
    let query = "When does the ferry to Zanzibar leave the harbour?";
    assert!(!paths(&search(&searcher, query, 3)).contains(&"ferry.md".to_string()));

    write(
        &docs,
        "ferry.md",
        "# Ferry\n\n## Timetable\n\nThe ferry to Zanzibar leaves the harbour at 07:00 and 15:30 every day.\n",
    );
    assert_eq!(reindex(&indexer, &docs).files_changed, 1);
    let after = search(&searcher, query, 3);
    assert_eq!(paths(&after)[0], "ferry.md", "{after:?}");
    // A lexical-only match (a word only that file has) is caught up too.
    let by_word = cairn_lexical_only(&searcher, "Zanzibar");
    assert_eq!(paths(&by_word), ["ferry.md"]);

    // Deleted through the other process: filtered from the graph at once.
    let wt = bind(&indexer, None, Some(&docs));
    assert!(
        indexer
            .vault_delete(&wt, "ferry.md")
            .unwrap()
            .chunks_removed
            > 0
    );
    assert!(!paths(&search(&searcher, query, 3)).contains(&"ferry.md".to_string()));
    assert!(cairn_lexical_only(&searcher, "Zanzibar").is_empty());
}

fn cairn_lexical_only(cairn: &Cairn, query: &str) -> Vec<VaultHit> {
    use cairn::vault::rerank::{Ranking, Sources};
    let ranking = Ranking {
        sources: Sources::Lexical,
        max_per_document: None,
        ..Ranking::default()
    };
    cairn.vault_rank(query, None, 5, None, &ranking).unwrap()
}

#[test]
fn reindex_and_vault_update_from_a_worktree_address_one_document() {
    let t = Tmp::new();
    let cairn = t.open();
    let proj = t.path().join("proj");
    write(&proj, "docs/a.md", &guide("Alpha", CONFIGURE));
    project(&cairn, "proj", &proj);
    // The project is found from the directory: paths are relative to its root.
    let s = reindex(&cairn, &proj.join("docs"));
    assert!(s.root.starts_with("project:"), "{s:?}");
    assert_eq!(s.prefix, "docs");

    let wt = t.path().join("wt");
    write(
        &wt,
        "docs/a.md",
        &guide(
            "Alpha",
            "In the worktree the port comes from WORKTREE_PORT.",
        ),
    );
    let work = bind(&cairn, Some("proj"), Some(&wt));
    let u = cairn.vault_update(&work, "docs/a.md").unwrap();
    assert_eq!((u.path.as_str(), u.changed), ("docs/a.md", true));
    assert_eq!((u.embedded, u.reused), (1, 2), "{u:?}");
    assert_eq!(
        u.collection, "docs",
        "an existing document keeps its collection"
    );
    let again = cairn.vault_update(&work, "./docs/a.md").unwrap();
    assert_eq!((again.changed, again.embedded, again.chunks), (false, 0, 3));
    assert_eq!(t.count("SELECT count(*) FROM vault_documents"), 1);
    assert_eq!(t.count("SELECT count(*) FROM vault_chunks"), 3);

    let r = search(&cairn, "WORKTREE_PORT", 1);
    assert_eq!(paths(&r), ["docs/a.md"]);
    assert!(r[0].text.contains("WORKTREE_PORT"));
    assert!(r[0].metadata.root.starts_with("project:"));
    // Reindexing the project's own docs brings its version back, same document.
    let back = reindex(&cairn, &proj.join("docs"));
    assert_eq!(back.files_changed, 1);
    assert_eq!(back.chunks_embedded, 1, "only the section that differs");
    assert_eq!(t.count("SELECT count(*) FROM vault_documents"), 1);
}

#[test]
fn a_directory_indexed_before_its_project_existed_keeps_one_key_per_file() {
    // On either store (the rows move in SQL of both dialects).
    let env = crate::common::Env::new();
    let cairn =
        Cairn::open_at_with_embedder(&env.store_location(), Box::new(HashEmbedder::new())).unwrap();
    let rows = |sql: &str| -> Vec<(String, String)> {
        (env.store())
            .read(|c| c.query_map(sql, [], |r| Ok((r.get(0)?, r.get(1)?))))
            .unwrap()
    };
    let chunk_ids = || -> Vec<i64> {
        (env.store())
            .read(|c| c.query_map("SELECT id FROM vault_chunks ORDER BY id", [], |r| r.get(0)))
            .unwrap()
    };
    let samples = env.path().join("samples");
    write(
        &samples,
        "docs/patterns/retry.md",
        &guide("Retry", CONFIGURE),
    );
    write(
        &samples,
        "docs/errors.md",
        &guide("Errors", "Errors carry a code."),
    );
    // Indexed before a project covers it: keyed by the directory.
    let first = reindex(&cairn, &samples.join("docs"));
    assert!(first.root.starts_with("dir:"), "{first:?}");
    let ids = chunk_ids();
    // A project is created over it, and an agent updates one file under the project's
    // key: that file is stored under both keys for now.
    project(&cairn, "larder", &samples);
    let work = bind(&cairn, Some("larder"), None);
    cairn.vault_update(&work, "docs/errors.md").unwrap();
    assert_eq!(rows("SELECT root_key, path FROM vault_documents").len(), 3);
    // Reindexing the directory again: one document per file, under the project, each
    // moved with its vectors (nothing embedded again), the duplicate dropped.
    let again = reindex(&cairn, &samples.join("docs"));
    assert!(again.root.starts_with("project:"), "{again:?}");
    assert_eq!(again.chunks_embedded, 0, "{again:?}");
    let project_key = again.root.clone();
    assert_eq!(
        rows("SELECT root_key, path FROM vault_documents ORDER BY path"),
        [
            (project_key.clone(), "docs/errors.md".to_string()),
            (project_key.clone(), "docs/patterns/retry.md".to_string())
        ]
    );
    let kept = chunk_ids();
    assert!(
        ids.iter().filter(|i| kept.contains(i)).count() >= 3,
        "retry.md's chunks keep their ids: {ids:?} {kept:?}"
    );
    // The directory's followed root is the project's now: a follower indexes under it.
    assert_eq!(
        rows("SELECT root_key, prefix FROM vault_roots WHERE kind = 'dir'"),
        [(project_key.clone(), "docs".to_string())]
    );
    let hits = search(&cairn, "configure the port", 10);
    assert!(!hits.is_empty());
    assert!(
        hits.iter().all(|h| h.metadata.root == project_key),
        "{hits:?}"
    );
}

#[test]
fn vault_update_and_delete_of_one_document() {
    let t = Tmp::new();
    let cairn = t.open();
    let proj = t.path().join("proj");
    write(&proj, "docs/a.md", &guide("Alpha", CONFIGURE));
    project(&cairn, "proj", &proj);
    let work = bind(&cairn, Some("proj"), None);

    let missing = cairn.vault_update(&work, "docs/gone.md").unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound);
    assert!(missing.to_string().contains("vault_delete"), "{missing}");
    let not_md = cairn.vault_update(&work, "docs/a.bin").unwrap_err();
    assert_eq!(not_md.kind(), ErrorKind::InvalidInput);
    for bad in ["../outside.md", "/etc/passwd.md", "docs/../docs/a.md"] {
        for e in [
            cairn.vault_update(&work, bad).unwrap_err(),
            cairn.vault_delete(&work, bad).unwrap_err(),
        ] {
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{bad}: {e}");
        }
    }
    assert_eq!(
        cairn.vault_delete(&work, "docs/a.md").unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(t.count("SELECT count(*) FROM vault_documents"), 0);

    let u = cairn.vault_update(&work, "docs/a.md").unwrap();
    assert_eq!(
        u.collection, "proj",
        "no vault configuration: the project's slug"
    );
    assert_eq!((u.chunks, u.embedded), (3, 3));
    assert_eq!(paths(&search(&cairn, "Alpha installer", 5))[0], "docs/a.md");
    let d = cairn.vault_delete(&work, "docs/a.md").unwrap();
    assert_eq!((d.deleted, d.chunks_removed), (true, 3));
    assert_eq!(t.count("SELECT count(*) FROM vault_chunks"), 0);
    assert!(search(&cairn, "Alpha installer", 5).is_empty());

    // Without a project or a worktree there is no root to resolve paths against.
    let unbound = bind(&cairn, None, None);
    assert_eq!(
        cairn
            .vault_update(&unbound, "docs/a.md")
            .unwrap_err()
            .kind(),
        ErrorKind::FailedPrecondition
    );
}

#[test]
fn search_knowledge_searches_the_projects_collections_with_the_domain_defaults() {
    let t = Tmp::new();
    let cairn = t.open();
    let proj = t.path().join("proj");
    write(&proj, "handbook/a.md", &guide("Alpha", CONFIGURE));
    write(&proj, "other/b.md", &guide("Beta", CONFIGURE));
    project(&cairn, "proj", &proj);
    reindex(&cairn, &proj.join("handbook"));
    reindex(&cairn, &proj.join("other"));
    let work = bind(&cairn, Some("proj"), None);
    let q = "how do I install the binary?";

    let e = cairn
        .search_knowledge(&work, q, None, None, None, false)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::FailedPrecondition);
    assert!(e.to_string().contains("--vault-collection"), "{e}");
    assert!(e.to_string().contains("configure_project"), "{e}");

    configure_collections(&cairn, "proj", &["handbook"]);
    // Defaults: min_score 0.3 and top_k 5, applied in the domain.
    let r = cairn
        .search_knowledge(&work, q, None, None, None, false)
        .unwrap();
    assert_eq!(r.collections, ["handbook"]);
    assert!(!r.results.is_empty(), "{r:?}");
    assert!(r.results.iter().all(|h| h.path == "handbook/a.md"), "{r:?}");
    assert!(r.results.iter().all(|h| h.score >= DEFAULT_MIN_SCORE));
    let explicit = cairn
        .search_knowledge(
            &work,
            q,
            Some(DEFAULT_TOP_K),
            Some(DEFAULT_MIN_SCORE),
            None,
            false,
        )
        .unwrap();
    let ids =
        |hits: &[VaultHit]| -> Vec<u64> { hits.iter().map(|h| h.metadata.chunk_id).collect() };
    assert_eq!(ids(&explicit.results), ids(&r.results));
    assert_eq!(explicit.below_min_score, r.below_min_score);

    let strict = cairn
        .search_knowledge(&work, q, None, Some(0.99), Some(0), false)
        .unwrap();
    assert!(strict.results.is_empty());
    assert_eq!(strict.below_min_score, 3, "{strict:?}");
    let best = strict.best_score.unwrap();
    assert!(best > 0.0 && best < 0.99);
    let note = strict.note.unwrap();
    assert!(note.contains("3 hits fell below min_score 0.99"), "{note}");

    // The bounds the schema advertises are the domain's: the CLI meets the same ones.
    for (top_k, min_score, per_doc, field) in [
        (Some(0), None, None, "top_k"),
        (Some(MAX_KNOWLEDGE_TOP_K + 1), None, None, "top_k"),
        (None, Some(1.5), None, "min_score"),
        (None, Some(-1.01), None, "min_score"),
        (
            None,
            None,
            Some(MAX_PER_DOCUMENT_LIMIT + 1),
            "max_per_document",
        ),
    ] {
        let e = cairn
            .search_knowledge(&work, q, top_k, min_score, per_doc, false)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{field}: {e}");
        assert!(e.to_string().contains(field), "{field}: {e}");
    }
    let e = cairn
        .vault_search(q, None, None, Some(MAX_PER_DOCUMENT_LIMIT + 1))
        .unwrap_err();
    assert!(e.to_string().contains("max_per_document"), "{e}");

    // Collections that hold nothing yet say so.
    configure_collections(&cairn, "proj", &["empty"]);
    let empty = cairn
        .search_knowledge(&work, q, None, None, None, false)
        .unwrap();
    assert_eq!(empty.best_score, None);
    assert!(empty.note.unwrap().contains("hold no documents yet"));

    // Without a bound project it says how to bind one.
    let unbound = bind(&cairn, None, None);
    assert!(
        cairn
            .search_knowledge(&unbound, q, None, None, None, false)
            .is_err()
    );
}

#[test]
fn search_defaults_and_bounds_live_in_the_domain() {
    let t = Tmp::new();
    let cairn = t.open();
    let docs = t.path().join("docs");
    for name in ["alpha", "beta", "gamma", "delta"] {
        write(&docs, &format!("{name}.md"), &guide(name, CONFIGURE));
    }
    reindex(&cairn, &docs);
    let all = cairn
        .vault_search("install the binary", None, None, None)
        .unwrap();
    assert_eq!(all.len(), DEFAULT_TOP_K, "default top_k");
    for (top_k, query) in [(Some(0), "x"), (Some(51), "x"), (None, ""), (None, "  ")] {
        let e = cairn.vault_search(query, top_k, None, None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{top_k:?} {query:?}");
    }
    let long = "q".repeat(2001);
    assert_eq!(
        cairn
            .vault_search(&long, None, None, None)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidInput
    );
    // A collection filter keeps only that collection.
    let other = ["other".to_string()];
    assert!(
        cairn
            .vault_search("install", None, Some(&other), None)
            .unwrap()
            .is_empty()
    );
}

/// A `min_score` strictly between two distinct scores of a ranking (best first), at the
/// first gap after position `from`: `(n, threshold)`, the first `n` scores above it.
fn cut_after(scores: &[f32], from: usize) -> (usize, f32) {
    let next = |i: usize| scores.get(i + 1).copied().unwrap_or(scores[i] - 2e-3);
    let i = (from..scores.len())
        .find(|&i| scores[i] - next(i) > 1e-4)
        .expect("the last score has a gap below it");
    (i + 1, (scores[i] + next(i)) / 2.0)
}

/// `score` is the ranking key (`(1 − a − b)·cosine + a·lexical + b·overlap`): results
/// come in descending `score`, `vault_retrieve` and `search_knowledge` rank alike, and
/// `min_score` keeps exactly the prefix at or above it.
#[test]
fn scores_are_in_rank_order_and_min_score_filters_on_them() {
    let (a, b) = (PROSE.lexical, PROSE.overlap);
    let t = Tmp::new();
    let cairn = t.open();
    let samples = corpus::repo().join("samples/docs");
    project(&cairn, "proj", &samples);
    reindex_with(&cairn, &samples, |o| o.collection = Some("handbook".into()));
    configure_collections(&cairn, "proj", &["handbook"]);
    let work = bind(&cairn, Some("proj"), None);
    let queries: Vec<serde_json::Value> =
        serde_json::from_str(include_str!("fixtures/retrieval_queries.json")).unwrap();
    let ids =
        |hits: &[VaultHit]| -> Vec<u64> { hits.iter().map(|h| h.metadata.chunk_id).collect() };
    for q in &queries {
        let text = q["query"].as_str().unwrap();
        let all = cairn
            .search_knowledge(&work, text, Some(10), Some(-1.0), None, false)
            .unwrap();
        let hits = &all.results;
        assert_eq!(hits.len(), 10);
        assert_eq!(all.below_min_score, 0);
        for h in hits {
            assert!((0.0..=1.0).contains(&h.lexical), "{h:?}");
            assert!((0.0..=1.0).contains(&h.overlap), "{h:?}");
            let fused = (1.0 - a - b) * h.cosine + a * h.lexical + b * h.overlap;
            assert!((h.score - fused).abs() < 1e-4, "{h:?}");
        }
        let scores: Vec<f32> = hits.iter().map(|h| h.score).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
        let r = cairn.vault_search(text, Some(10), None, None).unwrap();
        assert_eq!(ids(&r), ids(hits));

        let (expected, cut) = cut_after(&scores, 3);
        let k = cairn
            .search_knowledge(&work, text, Some(10), Some(cut), None, false)
            .unwrap();
        assert!(k.results.iter().all(|h| h.score >= cut));
        assert_eq!(k.results.len(), expected);
        assert_eq!(k.below_min_score, 10 - expected);
        assert_eq!(ids(&k.results)[..], ids(hits)[..expected]);
        assert_eq!(k.best_score, Some(scores[0]));
    }
}

/// A long document whose every section matches the query would fill the list; the cap
/// (default 2, `max_per_document`) makes room for other documents.
#[test]
fn the_per_document_cap_limits_chunks_of_one_document() {
    let t = Tmp::new();
    let cairn = t.open();
    let docs = t.path().join("docs");
    let long: String = (1..=8)
        .map(|i| {
            format!(
                "## Backoff step {i}\n\nRetry step {i}: wait with exponential backoff and jitter \
                 before retrying the failed request.\n\n"
            )
        })
        .collect();
    write(&docs, "long.md", &format!("# Retries\n\n{long}"));
    for name in ["alpha", "beta", "gamma"] {
        write(
            &docs,
            &format!("{name}.md"),
            &format!(
                "# {name}\n\n## Retry\n\nThe {name} client retries failed requests with \
                 backoff.\n\n## Timeouts\n\nThe {name} client gives up after thirty seconds.\n"
            ),
        );
    }
    reindex(&cairn, &docs);
    let q = "retry the failed request with exponential backoff";
    let per_doc = |hits: &[VaultHit]| {
        let mut m: HashMap<String, usize> = HashMap::new();
        for p in paths(hits) {
            *m.entry(p).or_default() += 1;
        }
        m
    };
    let uncapped = cairn.vault_search(q, Some(6), None, Some(0)).unwrap();
    assert!(per_doc(&uncapped)["long.md"] > 2, "{uncapped:?}");
    let default = cairn.vault_search(q, Some(6), None, None).unwrap();
    let m = per_doc(&default);
    assert_eq!(default.len(), 6, "{default:?}");
    assert_eq!(m["long.md"], 2, "{m:?}");
    assert!(m.values().all(|&n| n <= 2), "{m:?}");
    let one = cairn.vault_search(q, Some(6), None, Some(1)).unwrap();
    let got = paths(&one);
    assert_eq!(got.len(), 4, "four documents, one chunk each: {got:?}");
    assert_eq!(got.iter().collect::<HashSet<_>>().len(), 4);
}

/// In source code the cap counts per item, not per file: every function of one file
/// that matches is a separate answer. A Markdown file with as many matching sections
/// beside it is still capped at two; each hit is scored by its kind's weights.
#[test]
fn the_cap_counts_items_in_code_and_code_has_its_own_weights() {
    use cairn::vault::formats::FileFilter;
    use cairn::vault::rerank::CODE;
    let t = Tmp::new();
    let cairn = t.open();
    let dir = t.path().join("repo");
    let functions: String = (1..=5)
        .map(|i| {
            format!(
                "pub fn retry_backoff_{i}(attempt: u32) -> u64 {{\n    // retry the failed \
                 request with exponential backoff, step {i}\n    u64::from(attempt) * {i}\n}}\n\n"
            )
        })
        .collect();
    write(&dir, "src/retry.rs", &functions);
    let sections: String = (1..=5)
        .map(|i| {
            format!(
                "## Step {i}\n\nRetry the failed request with exponential backoff, step {i}.\n\n"
            )
        })
        .collect();
    write(&dir, "notes.md", &format!("# Retries\n\n{sections}"));
    reindex_with(&cairn, &dir, |o| {
        o.files = FileFilter {
            code: true,
            ..Default::default()
        }
    });
    let q = "retry the failed request with exponential backoff";
    let hits = cairn.vault_search(q, Some(10), None, None).unwrap();
    let of = |path: &str| hits.iter().filter(|h| h.path == path).collect::<Vec<_>>();
    let (code, prose) = (of("src/retry.rs"), of("notes.md"));
    assert_eq!(code.len(), 5, "one per function: {hits:?}");
    let items: HashSet<u32> = code.iter().map(|h| h.metadata.line_start).collect();
    assert_eq!(items.len(), 5, "five functions: {items:?}");
    assert_eq!(prose.len(), 2, "the document is capped: {hits:?}");
    for (h, w) in code
        .iter()
        .map(|h| (h, CODE))
        .chain(prose.iter().map(|h| (h, PROSE)))
    {
        let fused = (1.0 - w.lexical - w.overlap - w.path) * h.cosine
            + w.lexical * h.lexical
            + w.overlap * h.overlap
            + w.path * h.path_overlap;
        assert!((h.score - fused).abs() < 1e-4, "{h:?}");
    }
    // The functions' paths hold the query's words (`retry`, `backoff`), the notes' none.
    assert!(code.iter().all(|h| h.path_overlap > 0.0), "{code:?}");
    assert!(prose.iter().all(|h| h.path_overlap == 0.0), "{prose:?}");
    // One chunk per item: each function once.
    let one = cairn.vault_search(q, Some(10), None, Some(1)).unwrap();
    assert_eq!(one.iter().filter(|h| h.path == "src/retry.rs").count(), 5);
    assert_eq!(one.iter().filter(|h| h.path == "notes.md").count(), 1);
}

/// A graph built by another chunker (or embedder) is refused, with the way out, until
/// `--rebuild`; the rebuild reuses the stored vectors of the same embedder.
#[test]
fn an_index_from_another_chunker_is_refused_until_rebuilt() {
    let t = Tmp::new();
    let cairn = t.open();
    let docs = t.path().join("docs");
    write(&docs, "a.md", &guide("Alpha", CONFIGURE));
    reindex(&cairn, &docs);
    let vault = PathBuf::from(format!("{}.index/vault", t.db.display()));
    let current = std::fs::read_to_string(vault.join("CURRENT")).unwrap();
    let manifest_path = vault.join(current.trim()).join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    assert_eq!(m["model_id"], cairn::embed::HASH_MODEL_ID);
    m["chunker_version"] = serde_json::json!(999);
    std::fs::write(&manifest_path, serde_json::to_vec(&m).unwrap()).unwrap();

    // A fresh process (the first one holds its graph in memory).
    let fresh = t.open();
    let errors = [
        fresh
            .vault_search("installer", None, None, None)
            .unwrap_err(),
        fresh
            .vault_reindex(
                &ReindexOptions {
                    dir: docs.clone(),
                    ..Default::default()
                },
                &|_| {},
            )
            .unwrap_err(),
    ];
    for e in errors {
        assert_eq!(e.kind(), ErrorKind::Index, "{e}");
        let msg = e.to_string();
        assert!(msg.contains("chunker_version"), "{msg}");
        assert!(msg.contains("cairn reindex --rebuild"), "{msg}");
    }
    let rebuilt = reindex_with(&fresh, &docs, |o| o.rebuild = true);
    assert_eq!(rebuilt.index_points, 3, "{rebuilt:?}");
    assert_eq!(
        rebuilt.chunks_embedded, 0,
        "same embedder: vectors are reused"
    );
    assert_eq!(paths(&search(&fresh, "installer", 1)), ["a.md"]);
}

/// Documents embedded by one embedder are re-embedded, not reused, by another: the model
/// id is part of what makes a stored document current.
#[test]
fn documents_of_another_embedder_are_re_embedded() {
    let t = Tmp::new();
    let docs = t.path().join("docs");
    write(&docs, "a.md", &guide("Alpha", CONFIGURE));
    let cairn = t.open();
    reindex(&cairn, &docs);
    let c = rusqlite::Connection::open(&t.db).unwrap();
    c.execute(
        "UPDATE vault_documents SET embed_model = 'another-model'",
        [],
    )
    .unwrap();
    let before = chunk_ids(&t);
    let s = reindex(&cairn, &docs);
    assert_eq!(
        (s.files_changed, s.chunks_embedded, s.chunks_reused),
        (1, 3, 0)
    );
    assert_eq!(s.chunks_removed, 3, "{s:?}");
    // New rows: the graph, caught up by chunk id, gets the new vectors.
    let after = chunk_ids(&t);
    assert!(
        after.iter().all(|id| !before.contains(id)),
        "{before:?} {after:?}"
    );
    let model: String = c
        .query_row("SELECT embed_model FROM vault_documents", [], |r| r.get(0))
        .unwrap();
    assert_eq!(model, cairn::embed::HASH_MODEL_ID);
}

/// The test embedder, failing once it has embedded `budget` texts: a reindex that stops
/// half-way (as after a crash of the model).
#[derive(Debug)]
struct FailingEmbedder {
    inner: HashEmbedder,
    budget: usize,
    used: std::sync::atomic::AtomicUsize,
}

impl Embed for FailingEmbedder {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn embed_batch(&self, texts: &[&str]) -> cairn::embed::Result<Vec<Vec<f32>>> {
        use std::sync::atomic::Ordering;
        if self.used.fetch_add(texts.len(), Ordering::SeqCst) + texts.len() > self.budget {
            return Err(cairn::embed::EmbedError::Batch {
                batch_len: texts.len(),
                message: "the test embedder's budget is spent".into(),
            });
        }
        self.inner.embed_batch(texts)
    }
}

/// A reindex that fails half-way keeps every file it committed (one transaction per
/// file, all its chunks), and the next run skips them and embeds only the rest.
#[test]
fn an_interrupted_reindex_resumes_without_duplicates() {
    let t = Tmp::new();
    let docs = t.path().join("docs");
    write_services(&docs, 20);
    let failing = Cairn::open_with_embedder(
        &t.db,
        Box::new(FailingEmbedder {
            inner: HashEmbedder::new(),
            budget: 24,
            used: Default::default(),
        }),
    )
    .unwrap();
    let e = failing
        .vault_reindex(
            &ReindexOptions {
                dir: docs.clone(),
                embed_group: Some(6),
                ..Default::default()
            },
            &|_| {},
        )
        .unwrap_err();
    assert!(e.to_string().contains("budget is spent"), "{e}");
    let committed = t.count("SELECT count(*) FROM vault_documents");
    assert!(
        (1..20).contains(&committed),
        "stopped half-way: {committed}"
    );
    assert_eq!(
        t.count("SELECT count(*) FROM vault_chunks"),
        committed * 3,
        "each committed file has all its chunks"
    );

    let cairn = t.open();
    let resumed = reindex(&cairn, &docs);
    assert_eq!(resumed.files_unchanged as i64, committed, "{resumed:?}");
    assert_eq!(resumed.files_changed as i64, 20 - committed);
    assert_eq!(resumed.chunks_embedded as i64, (20 - committed) * 3);
    assert_eq!(t.count("SELECT count(*) FROM vault_documents"), 20);
    assert_eq!(t.count("SELECT count(*) FROM vault_chunks"), 60);
    assert_eq!(
        t.count(
            "SELECT count(*) FROM (SELECT document_id, ordinal FROM vault_chunks \
             GROUP BY 1, 2 HAVING count(*) > 1)"
        ),
        0
    );
    let hit = search(&cairn, "Which port does Service 7 listen on?", 1);
    assert_eq!(paths(&hit), ["f07.md"]);
    assert_eq!(reindex(&cairn, &docs).files_changed, 0);
}
