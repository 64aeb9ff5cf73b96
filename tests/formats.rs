//! The vault's formats through the real binary: fixtures of every format
//! (`tests/fixtures/formats/`; the PDFs written by `make_pdfs.py`) reindexed with the
//! real model, their chunks read back from the database with heading paths and spans;
//! the same document in Markdown, reStructuredText, AsciiDoc, HTML and PDF giving the
//! same heading paths; source code opt-in and chunked by item; documents served as
//! resources; hostile files refused or bounded with their reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::Env;

/// One chunk as stored: heading path (joined by ` > `), first and last line, text.
type Row = (String, i64, i64, String);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats")
}

/// A copy of `fixtures/<name>` in the env's temp dir.
fn copy_fixture(env: &Env, name: &str) -> PathBuf {
    let to = env.path().join(name);
    copy_dir(&fixtures().join(name), &to);
    to
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// Every document's chunks, by path relative to its root.
fn chunks(env: &Env) -> BTreeMap<String, Vec<Row>> {
    let rows: Vec<(String, String, i64, i64, String)> = env
        .store()
        .read(|c| {
            c.query_map(
                "SELECT d.path, c.heading_path, c.line_start, c.line_end, c.text
                 FROM vault_documents d JOIN vault_chunks c ON c.document_id = d.id
                 ORDER BY d.path, c.ordinal",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
        })
        .unwrap();
    let mut out: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for (path, heading, first, last, text) in rows {
        let heading: Vec<String> = serde_json::from_str(&heading).unwrap();
        out.entry(path)
            .or_default()
            .push((heading.join(" > "), first, last, text));
    }
    out
}

fn headings(rows: &[Row]) -> Vec<&str> {
    rows.iter().map(|r| r.0.as_str()).collect()
}

/// The documents' titles, by path.
fn titles(env: &Env) -> BTreeMap<String, Option<String>> {
    env.store()
        .read(|c| {
            c.query_map(
                "SELECT path, title FROM vault_documents ORDER BY path",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
        .unwrap()
        .into_iter()
        .collect()
}

/// The file's lines `first..=last`, joined.
fn lines_of(file: &Path, first: i64, last: i64) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    lines[first as usize - 1..last as usize].join("\n")
}

fn skipped(summary: &Value) -> BTreeMap<String, String> {
    summary["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["path"].as_str().unwrap().to_string(),
                s["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn reindex(env: &Env, dir: &Path, extra: &[&str]) -> Value {
    let d = dir.to_string_lossy().into_owned();
    let mut args = vec!["reindex", d.as_str()];
    args.extend_from_slice(extra);
    env.json(&args)
}

fn search_paths(env: &Env, query: &str) -> Vec<(String, String)> {
    env.json(&["search", query, "--top-k", "3"])["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["path"].as_str().unwrap().to_string(),
                h["metadata"]["heading_path"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn the_same_document_in_four_formats_gives_the_same_heading_paths() {
    let env = Env::new();
    let dir = copy_fixture(&env, "same");
    let s = reindex(&env, &dir, &[]);
    assert_eq!(s["files_seen"], 5, "{s:#}");
    let all = chunks(&env);
    let expected = [
        "Guide",
        "Guide > Install",
        "Guide > Install > From source",
        "Guide > Usage",
    ];
    for ext in ["md", "rst", "adoc", "html", "pdf"] {
        let rows = &all[&format!("guide.{ext}")];
        assert_eq!(headings(rows), expected, "guide.{ext}: {rows:#?}");
        assert_eq!(
            titles(&env)[&format!("guide.{ext}")].as_deref(),
            Some("Guide")
        );
        if ext == "pdf" {
            continue;
        }
        // Each chunk's span holds its words in the source file.
        for (heading, first, last, text) in rows {
            let source = lines_of(&dir.join(format!("guide.{ext}")), *first, *last);
            let first_word = text.split_whitespace().next().unwrap();
            assert!(
                source.contains(first_word),
                "guide.{ext} {heading}: {first_word:?} not in lines {first}..={last}: {source:?}"
            );
        }
    }
    // PDF: the text layer, spans are pages ("From source" starts page 2).
    let pdf = &all["guide.pdf"];
    assert_eq!(
        pdf.iter().map(|r| (r.1, r.2)).collect::<Vec<_>>(),
        [(1, 1), (1, 1), (2, 2), (2, 2)]
    );
    for (md, pdf) in all["guide.md"].iter().zip(pdf) {
        assert_eq!(md.3, pdf.3, "the same text");
    }
    // Text formats are cut verbatim from their lines.
    let md = &all["guide.md"];
    assert_eq!((md[1].1, md[1].2), (7, 7));
    let rst = &all["guide.rst"];
    assert_eq!(
        (rst[2].1, rst[2].2),
        (15, 19),
        "the directive stays with its paragraph"
    );
    assert!(rst[2].3.contains("cargo build --release"));
    assert!(
        !rst.iter().any(|r| r.3.contains("usage-target")),
        "a target is no text"
    );
    let adoc = &all["guide.adoc"];
    assert!(adoc[2].3.contains("== not a heading inside a listing"));
    assert!(
        !adoc.iter().any(|r| r.3.contains("Docs Team")),
        "attributes are metadata"
    );
    // HTML: the main content only, whitespace collapsed, spans in the source.
    let html = &all["guide.html"];
    assert_eq!(
        html[0].3,
        "The retry budget limits how many requests a client may repeat."
    );
    assert_eq!((html[0].1, html[0].2), (12, 13));
    assert!(
        html[2].3.contains("cargo build --release\ncargo test"),
        "{html:#?}"
    );
    for absent in [
        "Sidebar link",
        "Navigation heading",
        "Footer",
        "color: red",
        "headingsInScript",
    ] {
        assert!(
            !html
                .iter()
                .any(|r| r.3.contains(absent) || r.0.contains(absent)),
            "{absent:?} was indexed: {html:#?}"
        );
    }
    // And search finds each format's section.
    let hits = search_paths(
        &env,
        "clone the repository and build with the release profile",
    );
    assert!(
        hits.iter()
            .all(|(_, h)| h == "Guide > Install > From source"),
        "{hits:?}"
    );
}

#[test]
fn text_notebooks_and_mdx_give_their_expected_chunks() {
    let env = Env::new();
    let dir = copy_fixture(&env, "docs");
    let s = reindex(&env, &dir, &[]);
    assert_eq!(s["files_seen"], 3, "{s:#}");
    let all = chunks(&env);
    // Plain text: paragraphs, no headings, exact lines.
    let txt = &all["notes.txt"];
    assert_eq!(
        txt.len(),
        1,
        "three short paragraphs fit one chunk: {txt:#?}"
    );
    assert_eq!((txt[0].0.as_str(), txt[0].1, txt[0].2), ("", 1, 6));
    // Notebook: Markdown cells' headings head the cells after them; spans are cells;
    // outputs and raw cells are not indexed.
    let nb = &all["runbook.ipynb"];
    assert_eq!(headings(nb), ["Runbook", "Runbook > Verify"], "{nb:#?}");
    assert_eq!((nb[0].1, nb[0].2), (1, 2));
    assert!(nb[0].3.contains("Steps to drain a node.") && nb[0].3.contains("```python"));
    assert!(nb[0].3.contains("cluster.drain(\"node-7\")"));
    assert_eq!((nb[1].1, nb[1].2), (3, 5));
    let nb_text: String = nb.iter().map(|r| r.3.as_str()).collect();
    assert!(!nb_text.contains("output text") && !nb_text.contains("raw cell"));
    assert_eq!(titles(&env)["runbook.ipynb"].as_deref(), Some("Runbook"));
    // MDX is read as Markdown.
    let mdx = &all["page.mdx"];
    assert_eq!(headings(mdx), ["", "Page"]);
    let hits = search_paths(&env, "how do I drain a node of the cluster");
    assert_eq!(hits[0].0, "runbook.ipynb", "{hits:?}");
}

#[test]
fn code_is_opt_in_chunked_by_item_and_remembered_for_the_root() {
    let env = Env::new();
    let dir = copy_fixture(&env, "code");
    // Without --code: the README only.
    let s = reindex(&env, &dir, &[]);
    assert_eq!(s["files_seen"], 1, "{s:#}");
    assert_eq!(chunks(&env).keys().collect::<Vec<_>>(), ["README.md"]);

    let s = reindex(&env, &dir, &["--code"]);
    let all = chunks(&env);
    let mut paths: Vec<&String> = all.keys().collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            "README.md",
            "src/Scheduler.java",
            "src/limiter.py",
            "src/net/budget.go",
            "src/net/retry.rs",
            "web/app.js",
            "web/client.ts",
        ],
        "vendored and minified files are skipped by default"
    );
    assert!(
        skipped(&s)["src/generated.rs"].contains("generated"),
        "{s:#}"
    );
    let rs = &all["src/net/retry.rs"];
    assert_eq!(
        rs.iter()
            .map(|r| (r.0.as_str(), r.1, r.2))
            .collect::<Vec<_>>(),
        [
            ("net::retry", 1, 3),
            ("net::retry > RetryBudget", 5, 9),
            ("net::retry > RetryBudget > issue_approved", 12, 19),
            ("net::retry > RetryBudget > backoff", 21, 24),
        ]
    );
    assert!(
        rs[2]
            .3
            .starts_with("    /// Whether the issue was approved"),
        "doc comment attached"
    );
    let py = &all["src/limiter.py"];
    assert_eq!(
        headings(py),
        [
            "limiter",
            "limiter > TokenBucket",
            "limiter > TokenBucket > __init__",
            "limiter > TokenBucket > refill_interval",
            "limiter > sleep_until_ready",
        ]
    );
    assert!(
        py[3].3.starts_with("    @staticmethod"),
        "decorator attached: {py:#?}"
    );
    let ts = &all["web/client.ts"];
    assert_eq!(
        headings(ts),
        [
            "client",
            "client > ClientOptions",
            "client > ReviewClient",
            "client > ReviewClient > constructor",
            "client > ReviewClient > isChangeApproved",
            "client > parseReviewId",
        ],
        "{ts:#?}"
    );
    let go = &all["src/net/budget.go"];
    assert_eq!(
        headings(go),
        ["budget", "budget > Budget", "budget > Budget > Allow"]
    );
    let java = &all["src/Scheduler.java"];
    assert_eq!(
        headings(java),
        [
            "Scheduler",
            "Scheduler > Scheduler",
            "Scheduler > Scheduler > Scheduler",
            "Scheduler > Scheduler > scheduleCleanup",
        ],
        "{java:#?}"
    );
    // Identifiers meet their words: camel case, snake case and prose.
    for query in ["issue approved", "issue_approved", "issueApproved"] {
        let hits = search_paths(&env, query);
        assert!(
            hits.iter().any(|(p, h)| p == "src/net/retry.rs"
                && h == "net::retry > RetryBudget > issue_approved"),
            "{query}: {hits:?}"
        );
    }
    let hits = search_paths(&env, "change approved");
    assert!(
        hits.iter()
            .any(|(_, h)| h == "client > ReviewClient > isChangeApproved"),
        "{hits:?}"
    );
    // The root remembers --code: its pending changes are none (a filter forgotten would
    // show the code documents as removed).
    let out = env.run(&["vault", "sync", "--timeout", "1s", "--json"]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Globs narrow it; a reindex without --code drops the code again.
    let s = reindex(
        &env,
        &dir,
        &["--code", "--include", "src/**", "--exclude", "**/*.java"],
    );
    assert_eq!(s["files_removed"], 4, "{s:#}");
    assert_eq!(
        chunks(&env).keys().collect::<Vec<_>>(),
        ["src/limiter.py", "src/net/budget.go", "src/net/retry.rs"]
    );
    let bad = env.run(&[
        "reindex",
        dir.to_str().unwrap(),
        "--include",
        "src/[",
        "--json",
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not a glob"));
}

#[test]
fn pdf_pages_and_outline_give_the_expected_chunks() {
    let env = Env::new();
    let dir = copy_fixture(&env, "pdf");
    let s = reindex(&env, &dir, &[]);
    assert_eq!(s["files_seen"], 2, "{s:#}");
    let all = chunks(&env);
    // Outline entries head the lines that read as their titles (not text themselves);
    // an entry whose title is on no line heads its page; text decoded through the
    // embedded font's ToUnicode map; a paragraph gap and a page end a block.
    let spec: Vec<(&str, i64, i64, &str)> = all["spec.pdf"]
        .iter()
        .map(|r| (r.0.as_str(), r.1, r.2, r.3.as_str()))
        .collect();
    assert_eq!(
        spec,
        [
            (
                "1 Overview",
                1,
                1,
                "The limiter admits a request when its bucket holds a token.\n\
                 Buckets refill at a fixed rate per client.\n\n\
                 Größe and café are counted in characters, not bytes."
            ),
            (
                "1 Overview > 1.1 Buckets",
                2,
                2,
                "Each bucket holds at most the burst size in tokens."
            ),
            (
                "1 Overview > 1.2 Refill",
                2,
                2,
                "A refill adds tokens once per interval, never above the burst."
            ),
            (
                "Appendix: configuration keys",
                3,
                3,
                "burst: the largest number of tokens a bucket holds.\n\
                 interval: the time between two refills."
            ),
        ]
    );
    // Without an outline: no headings, the page span of the text.
    let plain = &all["plain.pdf"];
    assert_eq!(plain.len(), 1, "{plain:#?}");
    assert_eq!((plain[0].0.as_str(), plain[0].1, plain[0].2), ("", 1, 2));
    assert!(
        plain[0]
            .3
            .ends_with("The disks were replaced.\n\nNext meeting on Thursday.")
    );
    let t = titles(&env);
    assert_eq!(t["spec.pdf"].as_deref(), Some("Rate Limiter Specification"));
    assert_eq!(t["plain.pdf"], None);
    let hits = search_paths(&env, "a refill adds tokens once per interval");
    assert_eq!(
        hits[0],
        (
            "spec.pdf".to_string(),
            "1 Overview > 1.2 Refill".to_string()
        ),
        "{hits:?}"
    );
}

/// `resources/read` of `uri`: the media type and the text.
async fn read_resource(c: &crate::common::Client, uri: &str) -> (String, String) {
    let r = c
        .service
        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
        .await
        .unwrap_or_else(|e| panic!("{uri}: {e}"));
    let v = serde_json::to_value(&r).unwrap();
    let part = &v["contents"][0];
    (
        part["mimeType"].as_str().unwrap().to_string(),
        part["text"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn resources_serve_html_notebooks_and_pdf_as_markdown_and_text_formats_as_files() {
    let env = Env::new();
    for name in ["same", "docs"] {
        let dir = copy_fixture(&env, name);
        reindex(&env, &dir, &[]);
    }
    let c = env.serve_local(&[]).await;
    // A PDF: its outline as headings, its text, page marks; nothing of the file.
    let (mime, pdf) = read_resource(&c, "cairn://vault/same/guide.pdf").await;
    assert_eq!(mime, "text/markdown");
    assert_eq!(
        pdf,
        "<!-- page 1 -->\n\n# Guide\n\n\
         The retry budget limits how many requests a client may repeat.\n\n\
         ## Install\n\n\
         Download the archive and unpack it into the tools directory.\n\n\
         <!-- page 2 -->\n\n### From source\n\n\
         Clone the repository and build it with the release profile.\n\n\
         ## Usage\n\n\
         Start the service with the budget file as its only argument.\n"
    );
    // HTML: the main content's text under its headings, no markup, no navigation.
    let (mime, html) = read_resource(&c, "cairn://vault/same/guide.html").await;
    assert_eq!(mime, "text/markdown");
    assert!(
        html.starts_with(
            "# Guide\n\nThe retry budget limits how many requests a client may repeat.\n\n\
             ## Install\n"
        ),
        "{html}"
    );
    assert!(html.contains("### From source\n"), "{html}");
    for absent in ["<", "Sidebar link", "color: red"] {
        assert!(!html.contains(absent), "{absent:?} served: {html}");
    }
    // A notebook: its cells as Markdown, code fenced, no JSON and no outputs.
    let (mime, nb) = read_resource(&c, "cairn://vault/docs/runbook.ipynb").await;
    assert_eq!(mime, "text/markdown");
    assert!(nb.starts_with("# Runbook\n"), "{nb}");
    assert!(nb.contains("```python\n"), "{nb}");
    for absent in ["cell_type", "output text", "raw cell"] {
        assert!(!nb.contains(absent), "{absent:?} served: {nb}");
    }
    // Text formats are served as their files.
    let fixtures = fixtures();
    for (uri, file, media) in [
        (
            "cairn://vault/same/guide.md",
            "same/guide.md",
            "text/markdown",
        ),
        (
            "cairn://vault/same/guide.rst",
            "same/guide.rst",
            "text/x-rst",
        ),
        (
            "cairn://vault/docs/notes.txt",
            "docs/notes.txt",
            "text/plain",
        ),
    ] {
        let (mime, text) = read_resource(&c, uri).await;
        assert_eq!(mime, media, "{uri}");
        assert_eq!(
            text,
            std::fs::read_to_string(fixtures.join(file)).unwrap(),
            "{uri}"
        );
    }
    c.close().await;
}

#[test]
fn hostile_files_are_refused_or_bounded_with_their_reason() {
    let env = Env::new();
    let dir = env.path().join("hostile");
    std::fs::create_dir_all(&dir).unwrap();
    // A notebook of 10,000 cells.
    let cells: Vec<Value> = (0..10_000)
        .map(|i| serde_json::json!({"cell_type": "markdown", "source": format!("cell {i}")}))
        .collect();
    std::fs::write(
        dir.join("huge.ipynb"),
        serde_json::to_vec(&serde_json::json!({ "cells": cells })).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.join("broken.ipynb"), "{\"cells\": [").unwrap();
    // A minified 5 MB line of JavaScript.
    let mut min = String::from("var a=0;");
    while min.len() < 5 * 1024 * 1024 {
        min.push_str("a=a+1;function f(x){return x*2};");
    }
    std::fs::write(dir.join("bundle.js"), &min).unwrap();
    // Malformed HTML: unclosed elements nested 50,000 deep, a stray end tag, an
    // unterminated comment after the text.
    let mut html = String::from("<html><body><main><h1>Deep</h1>");
    html.push_str(&"<div><span>".repeat(50_000));
    html.push_str("deep text survives</p></table>");
    html.push_str("<!-- never closed");
    std::fs::write(dir.join("deep.html"), &html).unwrap();
    // A 100 kB line of text is cut within the budget, every piece with its line number.
    std::fs::write(dir.join("long.txt"), "word ".repeat(20_000)).unwrap();
    hostile_pdfs(&dir);

    let started = Instant::now();
    let s = reindex(&env, &dir, &["--code"]);
    assert!(
        started.elapsed() < Duration::from_secs(300),
        "took {:?}",
        started.elapsed()
    );
    let why = skipped(&s);
    assert!(
        why["huge.ipynb"].contains("10000 cells, more than the 5000"),
        "{s:#}"
    );
    assert!(why["broken.ipynb"].contains("invalid JSON"), "{s:#}");
    assert!(why["bundle.js"].contains("minified"), "{s:#}");
    let all = chunks(&env);
    let deep = &all["deep.html"];
    assert_eq!(deep.len(), 1, "{deep:#?}");
    assert_eq!(deep[0].0, "Deep");
    assert!(deep[0].3.contains("deep text survives"));
    let long = &all["long.txt"];
    assert!(long.len() > 100, "{} chunks", long.len());
    assert!(long.iter().all(|r| r.1 == 1 && r.2 == 1));
    // PDFs: refused past their budget with the reason, a cyclic or deep outline read
    // once, garbage refused.
    for (file, reason) in [
        (
            "bomb.pdf",
            "streams decompress to more than the 67108864 bytes",
        ),
        (
            "objstm.pdf",
            "a stream of the PDF decompresses to more than 16777216 bytes",
        ),
        ("pages.pdf", "more than the 5000 pages"),
        ("encrypted.pdf", "the PDF is encrypted"),
        ("garbage.pdf", "not a readable PDF"),
    ] {
        assert!(
            why.get(file).is_some_and(|w| w.contains(reason)),
            "{file}: {s:#}"
        );
    }
    let cyclic = &all["cyclic.pdf"];
    assert_eq!(cyclic.len(), 1, "{cyclic:#?}");
    assert_eq!(
        (cyclic[0].0.as_str(), cyclic[0].3.as_str()),
        ("C > D1 > D2 > D3 > D4 > D9998", "Cycles end here.")
    );
    // Brackets nested past the content parser's depth end the page's text, not the run.
    assert_eq!(all["nested.pdf"][0].3, "Before the brackets.");
}

/// A PDF of `pages` pages built with lopdf, each showing `text` (or drawing `content`
/// when given), its catalog extended by `catalog`.
fn pdf(
    pages: usize,
    content: Option<Vec<u8>>,
    build: impl FnOnce(&mut lopdf::Document, lopdf::ObjectId, &mut lopdf::Dictionary),
) -> Vec<u8> {
    use lopdf::{Document, Object, Stream, dictionary};
    let mut doc = Document::with_version("1.7");
    let pages_id = doc.new_object_id();
    let font = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
        "Encoding" => "WinAnsiEncoding",
    });
    let content =
        content.unwrap_or_else(|| b"BT /F1 12 Tf 72 720 Td (Cycles end here.) Tj ET".to_vec());
    let mut stream = Stream::new(dictionary! {}, content);
    stream.compress().unwrap();
    let content = doc.add_object(stream);
    let kids: Vec<Object> = (0..pages)
        .map(|_| {
            doc.add_object(dictionary! {
                "Type" => "Page", "Parent" => pages_id, "Contents" => content,
                "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
                "Resources" => dictionary! { "Font" => dictionary! { "F1" => font } },
            })
            .into()
        })
        .collect();
    let first_page = kids[0].as_reference().unwrap();
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => kids, "Count" => pages as i64,
        }),
    );
    let mut catalog = dictionary! { "Type" => "Catalog", "Pages" => pages_id };
    build(&mut doc, first_page, &mut catalog);
    let catalog = doc.add_object(catalog);
    doc.trailer.set("Root", catalog);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

/// A PDF of `objects` (numbered from 1, the first the catalog) with a classic
/// cross-reference table.
fn raw_pdf(objects: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"%PDF-1.7\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for o in offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<</Size {}/Root 1 0 R>>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

fn hostile_pdfs(dir: &Path) {
    use lopdf::{Object, Stream, dictionary};
    let write = |name: &str, bytes: Vec<u8>| std::fs::write(dir.join(name), bytes).unwrap();
    // Page contents of 5 x 15 MiB: each under the per-stream limit, over the total.
    write("bomb.pdf", pdf(5, Some(vec![b' '; 15 << 20]), |_, _, _| {}));
    // An object stream that inflates past the per-stream limit while loading (written
    // by hand: lopdf's writer leaves object streams out).
    let mut data = b"4 0 ".to_vec();
    data.resize(20 << 20, b' ');
    let mut s = Stream::new(dictionary! {}, data);
    s.compress().unwrap();
    write(
        "objstm.pdf",
        raw_pdf(&[
            b"<</Type/Catalog/Pages 2 0 R>>".to_vec(),
            b"<</Type/Pages/Kids[]/Count 0>>".to_vec(),
            [
                format!(
                    "<</Type/ObjStm/N 1/First 4/Filter/FlateDecode/Length {}>>\nstream\n",
                    s.content.len()
                )
                .into_bytes(),
                s.content,
                b"\nendstream".to_vec(),
            ]
            .concat(),
        ]),
    );
    write("pages.pdf", pdf(10_000, None, |_, _, _| {}));
    write(
        "encrypted.pdf",
        pdf(1, None, |doc, _, _| {
            let e = doc.add_object(dictionary! { "Filter" => "Standard", "V" => 1, "R" => 2 });
            doc.trailer.set("Encrypt", e);
        }),
    );
    write(
        "garbage.pdf",
        b"%PDF-1.7\n\x00\xff garbage without objects".to_vec(),
    );
    // An outline whose entries point back at themselves and a chain 20,000 deep; the
    // page tree lists itself among its kids.
    write(
        "cyclic.pdf",
        pdf(1, None, |doc, page, catalog| {
            let dest = || Object::Array(vec![page.into(), "Fit".into()]);
            let (outlines, b, c) = (
                doc.new_object_id(),
                doc.new_object_id(),
                doc.new_object_id(),
            );
            let mut below = None;
            for depth in (1..=20_000).rev() {
                let mut d = dictionary! { "Title" => Object::string_literal(format!("D{depth}")), "Dest" => dest() };
                if let Some(next) = below {
                    d.set("First", next);
                }
                below = Some(doc.add_object(d));
            }
            doc.objects.insert(b, Object::Dictionary(dictionary! {
                "Title" => Object::string_literal("B"), "Dest" => dest(), "Next" => c, "First" => b,
            }));
            doc.objects.insert(
                c,
                Object::Dictionary(dictionary! {
                    "Title" => Object::string_literal("C"), "Dest" => dest(), "Next" => b,
                    "First" => below.unwrap(),
                }),
            );
            doc.objects
                .insert(outlines, Object::Dictionary(dictionary! { "First" => b }));
            catalog.set("Outlines", outlines);
            let pages = catalog.get(b"Pages").unwrap().as_reference().unwrap();
            if let Ok(Object::Dictionary(p)) = doc.get_object_mut(pages) {
                let kids = p.get_mut(b"Kids").unwrap().as_array_mut().unwrap();
                kids.insert(0, pages.into());
            }
        }),
    );
    let mut nested = b"BT /F1 12 Tf 72 720 Td (Before the brackets.) Tj ET ".to_vec();
    nested.extend(std::iter::repeat_n(b'[', 100_000));
    nested.extend_from_slice(b" BT (After) Tj ET");
    write("nested.pdf", pdf(1, Some(nested), |_, _, _| {}));
}

#[test]
fn vault_update_reads_code_only_where_a_collection_indexes_code() {
    use cairn::Cairn;
    use cairn::access::context::BindArgs;
    use cairn::embed::HashEmbedder;
    use cairn::error::ErrorKind;
    use cairn::issues::NewProject;
    use cairn::vault::formats::FileFilter;
    use cairn::vault::reindex::ReindexOptions;

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cairn.db");
    let proj = dir.path().join("proj");
    let write = |rel: &str, text: &str| {
        let p = proj.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "src/lib.rs",
        "/// Whether it was approved.\npub fn issue_approved() -> bool {\n    true\n}\n",
    );
    write(
        "docs/guide.html",
        "<h1>Guide</h1>\n<p>Text of the guide.</p>\n",
    );
    let cairn = Cairn::open_with_embedder(&db, Box::new(HashEmbedder::new())).unwrap();
    cairn
        .create_project(&NewProject {
            slug: "proj".into(),
            name: "proj".into(),
            prefix: None,
            path: Some(proj.to_string_lossy().into_owned()),
        })
        .unwrap();
    let work = cairn
        .bind(&BindArgs {
            project: Some("proj".into()),
            ..Default::default()
        })
        .unwrap();
    // A documentation format needs no opting in.
    let r = cairn.vault_update(&work, "docs/guide.html").unwrap();
    assert_eq!((r.changed, r.chunks), (true, 1));
    // Code does: no collection following this root indexes code yet.
    let e = cairn.vault_update(&work, "src/lib.rs").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("--code"), "{e}");
    let e = cairn.vault_update(&work, "src/data.bin").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(
        e.to_string().contains("not a format the vault reads"),
        "{e}"
    );
    // Once the project's directory is reindexed with --code, its code is read.
    cairn
        .vault_reindex(
            &ReindexOptions {
                dir: proj.clone(),
                files: FileFilter {
                    code: true,
                    ..Default::default()
                },
                ..Default::default()
            },
            &|_| {},
        )
        .unwrap();
    write(
        "src/lib.rs",
        "/// Whether it was approved, twice.\npub fn issue_approved() -> bool {\n    true\n}\n",
    );
    let r = cairn.vault_update(&work, "src/lib.rs").unwrap();
    assert_eq!((r.changed, r.chunks), (true, 1));
}
