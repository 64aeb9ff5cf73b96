//! Real Markdown chunks for the vault's embedding fidelity test (`tests/vault.rs`) and
//! benchmarks (`benches/vault.rs`), which include this file.
//!
//! The corpus, in a deterministic order: the bundled `samples/docs` tree, then the
//! Markdown files (`*.md`, any depth) of every crate in `Cargo.lock` as unpacked by
//! cargo under `$CARGO_HOME/registry/src/*/<name>-<version>/`, crates sorted by name and
//! version, files by path. Each file goes through Cairn's chunker; a chunk's
//! [`embedding_text`](cairn::vault::chunk::Chunk::embedding_text) is what is embedded.
//! Repeated texts (licence boilerplate, copied READMEs) are kept once.

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

fn markdown_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        let hidden = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if hidden || p.is_symlink() {
            continue;
        }
        if p.is_dir() {
            markdown_under(&p, out);
        } else if p.extension().is_some_and(|e| e == "md") {
            out.push(p);
        }
    }
}

/// The Markdown files of the corpus, in order.
pub fn markdown_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    markdown_under(&repo().join("samples/docs"), &mut files);
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
            markdown_under(&dir, &mut files);
        }
    }
    files
}

/// The first `limit` distinct chunk texts of the corpus (fewer if it runs out).
pub fn real_chunks(limit: usize) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for f in markdown_files() {
        let Ok(bytes) = std::fs::read(&f) else {
            continue;
        };
        for c in chunk_markdown(&bytes).chunks {
            let text = c.embedding_text();
            if seen.insert(text.clone()) {
                out.push(text);
                if out.len() == limit {
                    return out;
                }
            }
        }
    }
    out
}

/// Run `tests/reference_embed.py` (independent ONNX Runtime in Python) on `texts` with
/// extra arguments before the input file; returns its stdout.
pub fn run_reference(texts: &[String], args: &[String]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("texts.jsonl");
    let lines: Vec<String> = texts
        .iter()
        .map(|t| serde_json::to_string(t).unwrap())
        .collect();
    std::fs::write(&input, lines.join("\n")).unwrap();
    let out = std::process::Command::new("python3")
        .arg(repo().join("tests/reference_embed.py"))
        .args(args)
        .arg(&input)
        .output()
        .expect("python3 runs (scripts/setup.sh installs onnxruntime, tokenizers, numpy)");
    assert!(
        out.status.success(),
        "reference_embed.py failed (run scripts/setup.sh): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
