//! Work budgets (issue 59): what a search does, counted in deterministic units
//! ([`cairn::metrics::cost::Work`]), held under fixed ceilings on fixed corpora. A count is the
//! same on a loaded machine and an idle one, so a change that makes a search read every
//! similar learning's text, or run the model for a query it has seen, fails here
//! wherever it runs. The corpus is 300 learnings of one project that resemble each
//! other (twelve subjects, the same sentence shapes, shared commands): the case where
//! grouping restatements has the most to compare.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::OnceLock;

use cairn::learnings::{LearningSearch, NewLearning, SearchScope};
use cairn::metrics::cost::{Work, measure};
use serde_json::{Value, json};

use crate::common::{Client, Env, body};
use crate::daemon::{Daemon, http, mint};

const SUBJECTS: [&str; 12] = [
    "billing",
    "checkout",
    "search index",
    "session cache",
    "image upload",
    "email queue",
    "auth tokens",
    "feature flags",
    "rate limiter",
    "audit log",
    "export job",
    "webhooks",
];

/// The `i`-th learning of the corpus: similar to its neighbours by subject and shape,
/// with code (commands, paths, numbers) some of them share.
fn learning(i: usize) -> (String, String) {
    let subject = SUBJECTS[i % SUBJECTS.len()];
    let slug = subject.replace(' ', "_");
    let step = i / SUBJECTS.len();
    let pattern = format!(
        "When changing the {subject} code, run `make check-{slug}` and the step {step} \
         migration before release, or {subject} breaks in production"
    );
    let context = format!(
        "Seen on the {subject} service: `src/{slug}/mod.rs` changed without \
         `make check-{slug}`, the release went out and failed at step {step} with a \
         timeout of {} seconds; the fix was to run the checks first.",
        30 + step % 5
    );
    (pattern, context)
}

/// A database with the corpus, every learning embedded, and the library open on it
/// (one query cache for every test: each test's queries are its own).
struct Corpus {
    env: Env,
    cairn: cairn::Cairn,
}

const PROJECT: &str = "shop";

const LEARNINGS: usize = 300;

fn corpus() -> &'static Corpus {
    static CORPUS: OnceLock<Corpus> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let env = Env::new();
        env.project(PROJECT, None);
        let issue = env.issue(PROJECT, "Cost corpus");
        let cairn = env.open();
        let added = cairn
            .add_learnings(&similar_learnings(&issue, LEARNINGS))
            .expect("add the corpus");
        assert_eq!(added.len(), LEARNINGS);
        let report = cairn.reindex_learnings().expect("embed the corpus");
        assert_eq!(report.learnings, LEARNINGS as u64, "{report:?}");
        let c = Corpus { env, cairn };
        // The process's first search groups these learnings cold: it reads the text of
        // a candidate whose grouping needs its code, each at most once, and keeps their
        // code signatures for the searches after it.
        let (_, cold) = search_in(&c.cairn, "a first search after the start of the process");
        eprintln!("cold search: {cold:?}");
        assert!(
            cold.texts_read > 0,
            "the corpus makes grouping read texts: {cold:?}"
        );
        assert!(cold.texts_read <= cold.candidates_grouped, "{cold:?}");
        c
    })
}

/// The first `n` learnings of the corpus, on `issue`, added as they are (no merging).
fn similar_learnings(issue: &str, n: usize) -> Vec<NewLearning> {
    (0..n)
        .map(|i| {
            let (pattern, context) = learning(i);
            NewLearning {
                issue: issue.to_string(),
                pattern,
                context: Some(context),
                applies_to: vec!["src/".into()],
                learning_type: None,
                created_by: "corpus".into(),
                agent_type: "worker".into(),
                merge: false,
                supersedes: Vec::new(),
                person: false,
            }
        })
        .collect()
}

fn search(query: &str) -> (usize, Work) {
    search_in(&corpus().cairn, query)
}

/// A search of `query` in the project, `LIMIT` places, no filter.
fn in_project(query: &str) -> LearningSearch {
    LearningSearch {
        query: query.into(),
        scope: SearchScope::Project(PROJECT.into()),
        limit: Some(LIMIT as usize),
        min_quality_score: None,
        include_superseded: false,
        include_archived: false,
        min_trust: None,
    }
}

fn search_in(cairn: &cairn::Cairn, query: &str) -> (usize, Work) {
    let (results, work) = measure(|| cairn.search_learnings(&in_project(query)));
    let results = results.expect("search");
    let answer = serde_json::to_value(&results).unwrap();
    assert_eq!(
        answer["semantic"], true,
        "the model must be available: {answer}"
    );
    let listed = results.learnings().count();
    (listed, work)
}

/// Never-seen queries over 300 similar learnings, in a process of their own: one model
/// run each; the code signatures grouping needs are read once per learning and kept, so
/// a second round of never-seen queries on the same subjects reads (nearly) no text,
/// where reading each search's candidates again would read as many as the first round;
/// and the rows, vectors and documents each search touches are bounded by the answer's
/// size or the corpus's, never by pairs of similar learnings.
#[test]
fn never_seen_searches_over_similar_learnings_stay_within_their_budget() {
    let c = corpus();
    let cairn = c.env.open();
    let rounds = [
        "why does the {} release break in production",
        "{} checks failing before the migration step",
    ];
    let mut texts = [0; 2];
    for (round, shape) in rounds.iter().enumerate() {
        for (n, subject) in SUBJECTS.iter().enumerate() {
            let query = format!("{}, case {n}", shape.replace("{}", subject));
            let (listed, work) = search_in(&cairn, &query);
            eprintln!("round {round}, never-seen search {n}: {listed} listed, {work:?}");
            assert!(
                listed > 10,
                "the corpus groups restatements: {listed} listed"
            );
            assert_eq!(work.model_runs, 1, "one model run for the query: {work:?}");
            // A thread for the embedding costs more than it overlaps on a small index.
            assert_eq!(work.threads_started, 0, "{work:?}");
            assert!(work.rows_read <= 2 * LIMIT, "{work:?}");
            assert!(work.documents_scored <= LEARNINGS as u64, "{work:?}");
            assert!(work.candidates_grouped <= 2 * CANDIDATES, "{work:?}");
            assert!(work.texts_read <= work.candidates_grouped, "{work:?}");
            // The nearest search's scan, the cosine of each lexical candidate, and each
            // candidate walked against at most `limit` heads.
            let vectors = LEARNINGS as u64 + CANDIDATES + LIMIT * work.candidates_grouped;
            assert!(work.vectors_compared <= vectors, "{work:?}");
            texts[round] += work.texts_read;
        }
    }
    assert!(texts[0] > 0, "the first round groups by code: {texts:?}");
    assert!(
        texts[1] <= TEXTS_SECOND_ROUND,
        "texts read by each round of {} never-seen searches: {texts:?}",
        SUBJECTS.len()
    );
}

/// Texts the second round may read in all (learnings no search of the first round
/// grouped by their code).
const TEXTS_SECOND_ROUND: u64 = 12;

/// The search's limit, and the candidates each half takes (`CANDIDATES_MIN`).
const LIMIT: u64 = 10;
const CANDIDATES: u64 = 100;

/// The same query again: its vector comes from the cache, so no model run, and no thread
/// to run it beside the lexical half; on a view nothing changed since, BM25's candidates
/// and the nearest vectors of the first search are kept, so no document is scored and the
/// corpus's vectors are not scanned again (issue 59: the part of a repeated search that
/// grew with the corpus).
#[test]
fn a_repeated_search_runs_the_model_zero_times() {
    let query = "the rate limiter release failed in production";
    let (_, first) = search(query);
    assert_eq!(first.model_runs, 1, "{first:?}");
    assert_eq!(
        first.threads_started, 0,
        "on {LEARNINGS} learnings the query is embedded on the search's own thread: {first:?}"
    );
    assert!(first.documents_scored > 0, "{first:?}");
    assert!(
        first.vectors_compared >= LEARNINGS as u64,
        "the nearest search scans the corpus: {first:?}"
    );
    let (_, again) = search(query);
    assert_eq!(again.model_runs, 0, "{again:?}");
    assert_eq!(
        again.threads_started, 0,
        "no thread for a vector from the cache: {again:?}"
    );
    assert_eq!(
        again.texts_read, 0,
        "the same candidates' code is kept: {again:?}"
    );
    assert_eq!(
        again.documents_scored, 0,
        "BM25's candidates are kept: {again:?}"
    );
    assert_eq!(
        again.vectors_compared + LEARNINGS as u64,
        first.vectors_compared,
        "the nearest vectors are kept (only the scan of the {LEARNINGS} is not made again): \
         {again:?}"
    );
    assert_eq!(again.rows_read, first.rows_read, "{again:?}");
    assert_eq!(again.candidates_grouped, first.candidates_grouped);
}

/// On an index of 5,000 learnings (`BESIDE_FROM` in `src/learnings/search.rs`), where
/// the lexical half takes longer than a thread's start and join, a never-seen query is embedded
/// on a thread of its own beside the lexical half, and that thread's model runs are
/// counted in the search; a query from the cache starts no thread. (The learnings are
/// added through the deterministic embedder, which is fast; the model embeds the queries,
/// and the few learnings each search's backfill takes.)
#[test]
fn a_never_seen_search_on_a_large_index_embeds_beside_its_lexical_half() {
    const LARGE: usize = 5_000;
    let env = Env::new();
    env.project(PROJECT, None);
    let issue = env.issue(PROJECT, "Large index");
    let hashed = cairn::Cairn::open_at_with_embedder(
        &env.store_location(),
        Box::new(cairn::embed::HashEmbedder::new()),
    )
    .expect("open");
    let added = hashed
        .add_learnings(&similar_learnings(&issue, LARGE))
        .expect("add");
    assert_eq!(added.len(), LARGE);
    let cairn = env.open();
    // The first search opens the index's view; until then its size is not known.
    let (_, opening) = search_in(&cairn, "the first search of the process");
    assert_eq!(opening.threads_started, 0, "{opening:?}");
    let query = "why does the webhooks release break";
    let (listed, never_seen) = search_in(&cairn, query);
    assert!(listed >= LIMIT as usize, "{listed} listed");
    assert_eq!(
        never_seen.threads_started, 1,
        "embedded beside the lexical half: {never_seen:?}"
    );
    assert!(
        never_seen.model_runs >= 1,
        "the thread's runs are counted in the search: {never_seen:?}"
    );
    assert!(never_seen.documents_scored > 0, "{never_seen:?}");
    let (_, again) = search_in(&cairn, query);
    assert_eq!(again.threads_started, 0, "{again:?}");
}

/// The candidates kept for a repeated search belong to the view they were found on: a
/// learning added, or a rating changed, since (by this process or another) gives the next
/// search a new view, which finds its candidates again and ranks the new learning.
#[test]
fn a_write_ends_the_candidates_kept_for_a_repeated_search() {
    let env = Env::new();
    env.project(PROJECT, None);
    let issue = env.issue(PROJECT, "Kept candidates");
    let cairn = env.open();
    cairn
        .add_learnings(&similar_learnings(&issue, 24))
        .expect("add");
    cairn.reindex_learnings().expect("embed");
    let query = "the audit log archive bucket was full";
    let ids = |cairn: &cairn::Cairn| {
        let (results, work) = measure(|| cairn.search_learnings(&in_project(query)));
        let results = results.expect("search");
        let ids: Vec<String> = results.learnings().map(|l| l.id.clone()).collect();
        (ids, serde_json::to_value(&results).unwrap(), work)
    };
    // The score of learning `id` in an answer, a hit or a restatement.
    let score = |answer: &Value, id: &str| {
        let hits = answer["results"].as_array().unwrap();
        hits.iter()
            .chain(
                hits.iter()
                    .flat_map(|h| h["similar"].as_array().into_iter().flatten()),
            )
            .find(|h| h["id"] == id)
            .map(|h| h["score"]["total"].as_f64().unwrap())
            .expect("listed")
    };
    let (before, _, _) = ids(&cairn);
    let (again, _, kept) = ids(&cairn);
    assert_eq!(again, before);
    assert_eq!(kept.documents_scored, 0, "kept: {kept:?}");
    let mut new = similar_learnings(&issue, 1).remove(0);
    new.pattern = "The audit log archive bucket was full, so the export job dropped events".into();
    new.context = None;
    // Written by another process: this one's view learns of it from the database.
    let added = env.open().add_learnings(&[new]).expect("add")[0]
        .learning
        .id
        .clone();
    let (after, answer, found) = ids(&cairn);
    assert_eq!(after[0], added, "the new learning ranks first: {after:?}");
    let top = score(&answer, &added);
    assert!(found.documents_scored > 0, "found again: {found:?}");
    let (_, _, kept) = ids(&cairn);
    assert_eq!(kept.documents_scored, 0, "kept on the new view: {kept:?}");
    env.open()
        .rate_learning(&added, 0, "person", None)
        .expect("rate");
    let (_, answer, found) = ids(&cairn);
    assert!(found.documents_scored > 0, "found again: {found:?}");
    let rated = score(&answer, &added);
    assert!(rated < top, "the rating counts at once: {rated} < {top}");
}

/// Through `cairn serve` with `CAIRN_WORK_DEBUG=1`: the answer carries the call's work
/// in `debug.work`; without it, no such field.
#[tokio::test]
async fn a_search_answer_shows_its_work_when_asked() {
    let c = corpus();
    let issue = c.env.issue(PROJECT, "Tuning");
    let query = json!({"query": "why is the session cache stale after a deploy", "limit": 5});
    let plain = c.env.serve(&["--issue-id", &issue]).await;
    let answer = plain.ok("search_learnings", query.clone()).await;
    assert!(answer.get("debug").is_none(), "{answer}");
    plain.close().await;
    let tuned = c
        .env
        .serve_env(&["--issue-id", &issue], &[("CAIRN_WORK_DEBUG", "1")])
        .await;
    let mut answer = body(&unchecked(&tuned, "search_learnings", &query).await);
    let work: Value = answer
        .as_object_mut()
        .and_then(|a| a.remove("debug"))
        .map(|d| d["work"].clone())
        .unwrap_or_else(|| panic!("no debug.work: {answer}"));
    assert_eq!(work["model_runs"], 1, "{work}");
    assert!(work["documents_scored"].as_u64() > Some(0), "{work}");
    assert!(work["rows_read"].as_u64() > Some(0), "{work}");
    tuned.close().await;
}

/// A query whose words hold more postings than the lexical half's budget narrows to its
/// rarest words: in a process whose budget (`CAIRN_LEARNINGS_POSTINGS_BUDGET`) is 100
/// postings, a query of one subject's word (in 25 of the corpus's learnings, in two
/// fields) and words every learning holds walks only that word's postings, and ranks the
/// learnings holding that word as the exact search ranks them (in this process, where the
/// default budget is above the corpus). Without the narrowing, the union walks every
/// word's postings, over 1,000.
#[tokio::test]
async fn a_query_of_common_words_walks_only_its_rarest_words_postings() {
    const BUDGET: u64 = 100;
    let c = corpus();
    let query = "webhooks migration before release breaks in production";
    let (exact, work) = measure(|| c.cairn.search_learnings(&in_project(query)));
    let exact = serde_json::to_value(exact.expect("search")).unwrap();
    assert!(
        work.postings_read > 10 * BUDGET,
        "every word drives: {work:?}"
    );
    // The learnings an answer lists that hold the query's rare word, in order: each hit,
    // then the restatements grouped under it.
    let rare = |answer: &Value| -> Vec<String> {
        let mut ids = Vec::new();
        for hit in answer["results"].as_array().unwrap() {
            let similar = hit["similar"].as_array().into_iter().flatten();
            for h in std::iter::once(hit).chain(similar) {
                if h["pattern"].as_str().unwrap().contains("webhooks") {
                    ids.push(h["id"].as_str().unwrap().to_string());
                }
            }
        }
        ids
    };
    let issue = c.env.issue(PROJECT, "Narrowed");
    let narrowed = c
        .env
        .serve_env(
            &["--issue-id", &issue],
            &[
                ("CAIRN_WORK_DEBUG", "1"),
                ("CAIRN_LEARNINGS_POSTINGS_BUDGET", "100"),
            ],
        )
        .await;
    let args = json!({"query": query, "limit": LIMIT});
    let answer = body(&unchecked(&narrowed, "search_learnings", &args).await);
    let work = &answer["debug"]["work"];
    let postings = work["postings_read"]
        .as_u64()
        .unwrap_or_else(|| panic!("{answer}"));
    assert!(
        postings > 0 && postings <= BUDGET,
        "the rarest word alone drives: {work}"
    );
    assert!(
        work["documents_scored"].as_u64() <= Some(postings),
        "{work}"
    );
    // The learnings holding the rare word are ranked as the exact search ranks them;
    // what follows them differs (the exact search's other candidates share only common
    // words, and score near zero).
    let listed = rare(&answer);
    assert!(listed.len() > 5, "{answer}");
    assert_eq!(listed, rare(&exact), "narrowed: {answer}\nexact: {exact}");
    assert_eq!(answer["results"][0]["id"], exact["results"][0]["id"]);
    narrowed.close().await;
}

/// Call `tool` with `args` past the client's strict output check: `debug` is outside the
/// declared schema.
async fn unchecked(client: &Client, tool: &str, args: &Value) -> rmcp::model::CallToolResult {
    let call = rmcp::model::CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap());
    client.service.call_tool(call).await.expect("call")
}

/// An answer is serialized once: through `cairn serve`, a search's and a `get_issue`'s
/// calls serialize about the answer's size in bytes (`debug.work.bytes_serialized`), and
/// the client reads the same answer in `structuredContent` and in the text content.
/// Serializing it as a tree, then the tree as the text content, then the tree again as
/// `structuredContent` (as before issue 59) counts twice the answer's size in the call,
/// and once more on the wire.
#[tokio::test]
async fn an_answer_is_serialized_once() {
    let c = corpus();
    let issue = c.env.issue(PROJECT, "Serialized once");
    let server = c
        .env
        .serve_env(&["--issue-id", &issue], &[("CAIRN_WORK_DEBUG", "1")])
        .await;
    let calls = [
        (
            "search_learnings",
            json!({"query": "the export job fails at the migration step", "limit": 10}),
        ),
        ("get_issue", json!({"issue_id": issue})),
    ];
    for (tool, args) in calls {
        let r = unchecked(&server, tool, &args).await;
        assert_ne!(r.is_error, Some(true), "{tool}: {r:?}");
        let structured = body(&r);
        let text = r.content.first().and_then(|c| c.as_text()).expect("text");
        let text: Value = serde_json::from_str(&text.text).expect("the text is JSON");
        assert_eq!(
            text, structured,
            "{tool}: the text and structuredContent differ"
        );
        serialized_once(tool, structured);
    }
    server.close().await;
}

/// Check that the call of `tool` whose `answer` (made with `CAIRN_WORK_DEBUG=1`) is given
/// serialized about the answer's size (`debug.work.bytes_serialized`, the answer without
/// its `debug`), not more; the bytes serialized.
fn serialized_once(tool: &str, mut answer: Value) -> u64 {
    let work = answer
        .as_object_mut()
        .and_then(|a| a.remove("debug"))
        .map(|d| d["work"].clone())
        .unwrap_or_else(|| panic!("{tool}: no debug.work: {answer}"));
    let size = serde_json::to_string(&answer).unwrap().len() as u64;
    let bytes = work["bytes_serialized"].as_u64().expect("bytes_serialized");
    eprintln!("{tool}: {bytes} bytes serialized for an answer of {size}");
    assert!(
        bytes >= size && 10 * bytes <= 11 * size,
        "{tool}: {bytes} bytes serialized for an answer of {size} bytes: serialized more \
         than once"
    );
    bytes
}

/// A JSON-RPC reply to a `tools/call` as it was written: its text content and its
/// `structuredContent` as their bytes.
#[derive(serde::Deserialize)]
struct Written {
    result: WrittenResult,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct WrittenResult {
    content: [WrittenText; 1],
    structured_content: Box<serde_json::value::RawValue>,
}

#[derive(serde::Deserialize)]
struct WrittenText {
    text: String,
}

/// Check the reply `line` to a call of `tool` made with `CAIRN_WORK_DEBUG=1`: its
/// `structuredContent` is its text, byte for byte (written from the text, not serialized
/// again from a tree, whose keys would come sorted), and the call serialized about the
/// answer's size (`debug.work.bytes_serialized`). Returns the bytes serialized.
fn written_once(tool: &str, line: &str) -> u64 {
    let written: Written =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{tool}: {e}: {line}"));
    let [WrittenText { text }] = &written.result.content;
    let answer: Value = serde_json::from_str(text).expect("the text is JSON");
    let bytes = serialized_once(tool, answer);
    assert!(
        written.result.structured_content.get() == text,
        "{tool}: structuredContent was serialized again, not written from the text"
    );
    bytes
}

/// Over the daemon's HTTP too, an answer is serialized once: a POST's JSON body carries
/// the answer's text as its `structuredContent`, and the call counts the answer's size in
/// bytes serialized. So does a `cairn serve` forwarding to the daemon: it relays the
/// daemon's answer as its text, checked, without serializing it again. Before (issue 59),
/// the daemon serialized the answer's tree beside its text (twice the answer's size in the
/// call) and rmcp that tree again into the body; the forwarder rebuilt the answer from
/// the body's tree and serialized it again on stdout.
#[test]
fn an_answer_is_serialized_once_over_the_daemons_http_and_through_a_forwarder() {
    let (env, d, issue, auth) = daemon_with_learnings("Serialized once over HTTP");
    let calls = answered_calls(&issue);
    for (tool, args) in &calls {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": args}});
        let r = http(
            d.addr,
            "POST",
            "/mcp",
            &[("Authorization", &auth)],
            Some(&body.to_string()),
        );
        assert_eq!(r.status, 200, "{tool}: {}", r.body);
        written_once(tool, &r.body);
    }
    // Through a forwarder: its stdout, line by line.
    let mut child = env
        .cmd(&["serve", "--issue-id", &issue])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}),
    );
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let before = d.health()["requests_served"].as_u64().unwrap();
    for (n, (tool, args)) in calls.iter().enumerate() {
        send(
            json!({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}),
        );
        line.clear();
        out.read_line(&mut line).unwrap();
        // `debug.work` comes from the daemon: the forwarder runs without
        // CAIRN_WORK_DEBUG.
        written_once(tool, &line);
    }
    let after = d.health()["requests_served"].as_u64().unwrap();
    assert_eq!(after - before, calls.len() as u64, "not forwarded");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// A daemon (`CAIRN_WORK_DEBUG=1`) over a project of 24 similar learnings, embedded:
/// (its environment, the daemon, the issue, a session token's `Authorization` for it).
fn daemon_with_learnings(title: &str) -> (Env, Daemon, String, String) {
    let env = Env::new();
    env.project(PROJECT, None);
    let issue = env.issue(PROJECT, title);
    let cairn = env.open();
    cairn
        .add_learnings(&similar_learnings(&issue, 24))
        .expect("add");
    cairn.reindex_learnings().expect("embed");
    drop(cairn);
    let d = Daemon::start(&env, &[], &[("CAIRN_WORK_DEBUG", "1")]);
    let (token, _) = mint(&env, &["--issue-id", &issue]);
    (env, d, issue, format!("Bearer {token}"))
}

/// The calls whose answers the HTTP budgets check: a search with restatements grouped
/// under its hits (a large answer) and an issue.
fn answered_calls(issue: &str) -> [(&'static str, Value); 2] {
    [
        (
            "search_learnings",
            json!({"query": "the export job fails at the migration step", "limit": 10}),
        ),
        ("get_issue", json!({"issue_id": issue})),
    ]
}

/// The message of the first event of `stream` (server-sent events) that holds a result.
fn result_event(stream: &str) -> Option<&str> {
    stream
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .find(|data| data.contains(r#""result":"#))
}

/// In an MCP session (protocol 2025-11-25, the official SDKs' sessions) the answer is
/// serialized once too: rmcp writes a session's responses as events of a stream, and the
/// daemon writes the answer's text as `structuredContent` into the event that holds it,
/// with a progress token asked for or not. Before, a session's call serialized the
/// answer's tree beside its text and rmcp that tree again into the event.
#[test]
fn an_answer_is_serialized_once_in_an_mcp_session() {
    let (_env, d, issue, auth) = daemon_with_learnings("Serialized once in a session");
    let (r, sid) = crate::daemon::open_session(&d, &auth);
    let sid = sid.unwrap_or_else(|| panic!("an initialize opens a session: {}", r.head));
    for (n, (tool, args)) in answered_calls(&issue).into_iter().enumerate() {
        let mut params = json!({"name": tool, "arguments": args});
        if n == 0 {
            params["_meta"] = json!({"progressToken": "p"});
        }
        let call = json!({"jsonrpc": "2.0", "id": n + 2, "method": "tools/call", "params": params});
        let r = crate::daemon::in_session(&d, &auth, &sid, &call);
        assert_eq!(r.status, 200, "{tool}: {} {}", r.head, r.body);
        let message = result_event(&r.body)
            .unwrap_or_else(|| panic!("{tool}: no event holds a result: {}", r.body));
        written_once(tool, message);
    }
}
