//! `cairn reindex DIR` and `cairn search QUERY`: the Knowledge Vault from the command line.

use std::path::PathBuf;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::Cairn;
use crate::vault::embed::Spin;
use crate::vault::reindex::{ReindexOptions, ReindexProgress};

use super::{Outcome, print_json, print_text};

#[derive(Debug, Args)]
pub struct ReindexArgs {
    /// Directory of Markdown files (`.md`, `.markdown`); `.gitignore` files are respected.
    pub dir: PathBuf,
    /// Collection name; default: the directory's name.
    #[arg(long)]
    pub collection: Option<String>,
    /// Project (slug or id) whose root paths are relative to; default: the project whose
    /// path contains DIR, else DIR itself.
    #[arg(long)]
    pub project: Option<String>,
    /// Re-chunk every file and rebuild the vector index (after a model or chunker change).
    #[arg(long)]
    pub rebuild: bool,
    /// Chunks embedded per model call before their files are committed (default 512).
    #[arg(long, env = "CAIRN_EMBED_GROUP")]
    pub embed_group: Option<usize>,
    /// ONNX Runtime threads for the model (default: every core).
    #[arg(long, env = "CAIRN_EMBED_THREADS")]
    pub threads: Option<usize>,
    /// Whether ONNX Runtime's idle threads spin: on (fastest when the cores are free),
    /// off (kinder to a busy machine), auto (on when the load average leaves the cores
    /// free).
    #[arg(long, env = "CAIRN_EMBED_SPIN", default_value = "auto")]
    pub spin: Spin,
    /// Print the result as JSON, for scripts.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Natural-language query.
    pub query: String,
    /// Results to show (1-50) [default: 5].
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Search only this collection; repeat for more.
    #[arg(long = "collection")]
    pub collections: Vec<String>,
    /// At most this many chunks of one document (default 2; 0 = no cap).
    #[arg(long)]
    pub max_per_document: Option<usize>,
    /// Print the result as JSON, for scripts.
    #[arg(long)]
    pub json: bool,
}

pub(super) fn reindex(cairn: &Cairn, a: ReindexArgs) -> anyhow::Result<Outcome> {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} files")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let on_progress = |p: ReindexProgress| match p {
        ReindexProgress::Found(n) => bar.set_length(n as u64),
        ReindexProgress::Done(n) => bar.inc(n as u64),
    };
    let summary = cairn.vault_reindex(
        &ReindexOptions {
            dir: a.dir,
            collection: a.collection,
            project: a.project,
            rebuild: a.rebuild,
            embed_group: a.embed_group,
            threads: a.threads,
            spin: Some(a.spin),
        },
        &on_progress,
    );
    bar.finish_and_clear();
    let s = summary?;
    if a.json {
        print_json(&s)?;
    } else {
        print_text(&format!(
            "reindexed {} ({}) into collection {:?} in {:.1}s\n\
             files: {} seen, {} changed, {} unchanged, {} removed\n\
             chunks: {} embedded, {} reused, {} removed; {} points in the index\n\
             model input: {} tokens, {:.1}% padding\n\
             hidden characters removed: {}",
            if s.prefix.is_empty() { "." } else { &s.prefix },
            s.root,
            s.collection,
            s.seconds,
            s.files_seen,
            s.files_changed,
            s.files_unchanged,
            s.files_removed,
            s.chunks_embedded,
            s.chunks_reused,
            s.chunks_removed,
            s.index_points,
            s.tokens_embedded,
            100.0 * s.padding_tokens as f64 / s.tokens_embedded.max(1) as f64,
            s.removed_characters
        ))?;
        if s.files_skipped > 0 {
            let mut text = format!("skipped {} files:", s.files_skipped);
            for f in &s.skipped {
                text.push_str(&format!("\n  {}: {}", f.path, f.reason));
            }
            print_text(&text)?;
        }
    }
    Ok(Outcome::Done)
}

pub(super) fn search(cairn: &Cairn, a: SearchArgs) -> anyhow::Result<Outcome> {
    let collections = (!a.collections.is_empty()).then_some(a.collections.as_slice());
    let hits = cairn.vault_search(&a.query, a.top_k, collections, a.max_per_document)?;
    if a.json {
        print_json(&serde_json::json!({ "results": hits }))?;
        return Ok(Outcome::Done);
    }
    if hits.is_empty() {
        print_text("no results (is the vault empty? index documents with `cairn reindex DIR`)")?;
    }
    let mut out = String::new();
    for (i, h) in hits.iter().enumerate() {
        let m = &h.metadata;
        out.push_str(&format!(
            "{}. {:.3}  {}:{}-{}  [{}]  {}\n",
            i + 1,
            h.score,
            h.path,
            m.line_start,
            m.line_end,
            m.collection,
            m.heading_path
        ));
        let snippet: String = h.text.chars().take(240).collect();
        for line in snippet.lines().take(4) {
            out.push_str(&format!("     {line}\n"));
        }
    }
    if !out.is_empty() {
        print_text(&out)?;
    }
    Ok(Outcome::Done)
}
