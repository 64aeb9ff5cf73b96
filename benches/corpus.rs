//! Real text for the vault's embedding fidelity test (`tests/vault.rs`) and benchmarks
//! (`benches/vault.rs`), which include this file.
//!
//! Two corpora, each in a deterministic order, each chunk text kept once (a chunk's
//! [`embedding_text`](cairn::vault::chunk::Chunk::embedding_text) is what is embedded):
//! - [`repo_texts`], the test's: only what the repository holds. Its Markdown files
//!   (samples/docs without drafts/, docs/, the READMEs) through Cairn's chunker; the
//!   patterns and contexts of the graded learnings in `tests/eval/learnings.jsonl`
//!   (Cairn embeds learnings with the same model); the documentation comments of `src/`
//!   (rustdoc is Markdown) through the chunker. About 2,400 texts in all.
//! - [`real_chunks`], the benchmarks' (10,000 chunks, more than the repository has): the
//!   bundled `samples/docs` tree, then the Markdown files (`*.md`, any depth) of every
//!   crate in `Cargo.lock` as unpacked by cargo under
//!   `$CARGO_HOME/registry/src/*/<name>-<version>/`, crates sorted by name and version,
//!   files by path. Repeated texts (licence boilerplate, copied READMEs) are kept once.

#![allow(dead_code)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use cairn::vault::chunk::chunk_markdown;

/// The source tree.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("CARGO_HOME or HOME is set")
}

/// `(name, version)` of the registry packages in Cargo.lock, sorted.
fn locked_packages() -> Vec<(String, String)> {
    let lock = std::fs::read_to_string(repo().join("Cargo.lock")).expect("Cargo.lock");
    let mut out = Vec::new();
    for block in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            block.lines().find_map(|l| {
                l.strip_prefix(key)
                    .and_then(|r| r.trim().strip_prefix('='))
                    .map(|v| v.trim().trim_matches('"').to_string())
            })
        };
        let source = field("source").unwrap_or_default();
        if let (Some(name), Some(version)) = (field("name"), field("version"))
            && source.starts_with("registry+")
        {
            out.push((name, version));
        }
    }
    out.sort();
    out
}

/// The Markdown files of the benchmarks' corpus, in order.
pub fn markdown_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    files_under(&repo().join("samples/docs"), ".md", &[], &mut files);
    files.retain(|f| !f.components().any(|c| c.as_os_str() == "drafts"));
    let registries: Vec<PathBuf> = std::fs::read_dir(cargo_home().join("registry/src"))
        .map(|rd| {
            let mut v: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
            v.sort();
            v
        })
        .unwrap_or_default();
    for (name, version) in locked_packages() {
        if let Some(dir) = registries
            .iter()
            .map(|r| r.join(format!("{name}-{version}")))
            .find(|d| d.is_dir())
        {
            files_under(&dir, ".md", &[], &mut files);
        }
    }
    files
}

/// The first `limit` distinct chunk texts of the benchmarks' corpus (fewer if it runs
/// out).
pub fn real_chunks(limit: usize) -> Vec<String> {
    let documents = markdown_files()
        .into_iter()
        .filter_map(|f| std::fs::read(&f).ok());
    let mut out = Distinct::default();
    for bytes in documents {
        out.chunks_of(&bytes);
        if out.texts.len() >= limit {
            break;
        }
    }
    out.texts.truncate(limit);
    out.texts
}

/// Distinct texts in the order first seen.
#[derive(Default)]
struct Distinct {
    seen: HashSet<String>,
    texts: Vec<String>,
}

impl Distinct {
    fn push(&mut self, text: String) {
        if !text.trim().is_empty() && self.seen.insert(text.clone()) {
            self.texts.push(text);
        }
    }

    /// Every chunk of a Markdown document.
    fn chunks_of(&mut self, markdown: &[u8]) {
        for c in chunk_markdown(markdown).chunks {
            self.push(c.embedding_text());
        }
    }
}

/// The documentation comments of `file` (`//!` and `///` lines, prefix removed), one
/// document per run of consecutive comment lines.
fn doc_comments(file: &Path) -> Vec<String> {
    let source = std::fs::read_to_string(file).expect("source file");
    let mut docs = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in source.lines() {
        let t = line.trim_start();
        if let Some(text) = t.strip_prefix("//!").or_else(|| t.strip_prefix("///")) {
            current.push(text.strip_prefix(' ').unwrap_or(text));
        } else if !current.is_empty() {
            docs.push(current.join("\n"));
            current.clear();
        }
    }
    if !current.is_empty() {
        docs.push(current.join("\n"));
    }
    docs
}

/// Files under `dir` (any depth, hidden entries and symlinks skipped) whose name ends
/// with `suffix`, sorted by path; `skip` names directories not to enter.
fn files_under(dir: &Path, suffix: &str, skip: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or(".");
        if name.starts_with('.') || p.is_symlink() {
            continue;
        }
        if p.is_dir() {
            if !skip.contains(&name) {
                files_under(&p, suffix, skip, out);
            }
        } else if name.ends_with(suffix) {
            out.push(p);
        }
    }
}

/// The test's corpus: the first `limit` distinct texts of the repository's own Markdown,
/// the graded learnings and `src/`'s documentation comments, in that order.
pub fn repo_texts(limit: usize) -> Vec<String> {
    let root = repo();
    let mut out = Distinct::default();
    let mut markdown = Vec::new();
    // Build output, installed packages, the model files, and unfinished samples.
    let skip = ["target", "node_modules", "models", "index", "drafts"];
    files_under(&root, ".md", &skip, &mut markdown);
    for f in markdown {
        out.chunks_of(&std::fs::read(&f).expect("markdown file"));
    }
    let learnings = std::fs::read_to_string(root.join("tests/eval/learnings.jsonl"))
        .expect("tests/eval/learnings.jsonl");
    for line in learnings.lines().filter(|l| !l.trim().is_empty()) {
        let record: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        for field in ["pattern", "context"] {
            if let Some(text) = record[field].as_str() {
                out.push(text.to_string());
            }
        }
    }
    let mut sources = Vec::new();
    files_under(&root.join("src"), ".rs", &[], &mut sources);
    for f in sources {
        for doc in doc_comments(&f) {
            out.chunks_of(doc.as_bytes());
        }
    }
    out.texts.truncate(limit);
    out.texts
}
