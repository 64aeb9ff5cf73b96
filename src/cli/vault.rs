//! `cairn reindex DIR` and `cairn search QUERY`: the Knowledge Vault from the command line.

use std::path::PathBuf;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::Cairn;
use crate::embed::Spin;
use crate::error::Error;
use crate::vault::follow_files::FollowScope;
use crate::vault::reindex::{ReindexOptions, ReindexProgress, ReindexSummary};
use crate::vault::roots::covers;
use std::sync::Arc;

use super::{Outcome, print_json, print_text};

#[derive(Debug, Args)]
pub(crate) struct ReindexArgs {
    /// Directory of documents (Markdown, MDX, HTML, reStructuredText, AsciiDoc, plain text,
    /// notebooks, PDF; source code with --code); `.gitignore` files are respected.
    pub(crate) dir: PathBuf,
    /// Index source code too (Rust, Python, JavaScript, TypeScript, Go, Java), chunked by
    /// item; vendored, build, generated and minified files are skipped. Remembered for
    /// the directory: its follower indexes the same files.
    #[arg(long)]
    pub(crate) code: bool,
    /// Only files whose path under DIR matches this glob (`**` crosses directories);
    /// repeat for more.
    #[arg(long = "include", value_name = "GLOB")]
    pub(crate) include: Vec<String>,
    /// Never files whose path under DIR matches this glob; repeat for more.
    #[arg(long = "exclude", value_name = "GLOB")]
    pub(crate) exclude: Vec<String>,
    /// Collection name; default: the directory's name.
    #[arg(long)]
    pub(crate) collection: Option<String>,
    /// Project (slug or id) whose root paths are relative to; default: the project whose
    /// path contains DIR, else DIR itself.
    #[arg(long)]
    pub(crate) project: Option<String>,
    /// Re-chunk every file and rebuild the vector index (after a model or chunker change).
    #[arg(long)]
    pub(crate) rebuild: bool,
    /// Chunks embedded per model call before their files are committed (default 512).
    #[arg(long, env = "CAIRN_EMBED_GROUP")]
    pub(crate) embed_group: Option<usize>,
    /// ONNX Runtime threads for the model (default: every core).
    #[arg(long, env = "CAIRN_EMBED_THREADS")]
    pub(crate) threads: Option<usize>,
    /// Whether ONNX Runtime's idle threads spin: on (fastest when the cores are free),
    /// off (kinder to a busy machine), auto (on when the load average leaves the cores
    /// free).
    #[arg(long, env = "CAIRN_EMBED_SPIN", default_value = "auto")]
    pub(crate) spin: Spin,
    /// Then keep following DIR in the foreground: changes are indexed as they happen,
    /// until SIGINT or SIGTERM (the batch in hand is finished first). Progress on stderr.
    #[arg(long)]
    pub(crate) watch: bool,
    /// Print the result as JSON, for scripts.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `cairn vault ...`: the freshness of the Knowledge Vault.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum VaultCmd {
    /// Per collection: documents, chunks, and each followed root with who follows it,
    /// its state (watching, rescanning, not followed), changes pending and last sync.
    Status {
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Wait until every change to the followed roots is indexed (exit 0), or say what is
    /// still pending (exit 1) after the timeout, or at once when nobody follows a root
    /// with changes.
    Sync {
        /// Only the roots of this collection; repeat for more (default: every collection).
        #[arg(long = "collection")]
        collections: Vec<String>,
        /// The longest to wait: `30s`, `500ms`, `2m`.
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        timeout: std::time::Duration,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn run(cairn: &Cairn, cmd: VaultCmd) -> anyhow::Result<Outcome> {
    match cmd {
        VaultCmd::Status { json } => {
            let status = cairn.vault_status()?;
            if json {
                print_json(&serde_json::json!({ "collections": status }))?;
                return Ok(Outcome::Done);
            }
            if status.is_empty() {
                print_text("the vault is empty; index documents with `cairn reindex DIR`")?;
            }
            let mut out = String::new();
            for c in &status {
                out.push_str(&format!(
                    "{}: {} documents, {} chunks\n",
                    c.collection, c.documents, c.chunks
                ));
                if c.roots.is_empty() {
                    out.push_str(
                        "  no followed root (run `cairn reindex DIR` once to follow it)\n",
                    );
                }
                for r in &c.roots {
                    out.push_str(&format!(
                        "  {} ({} documents, {} chunks): {}{}; {} pending; last sync {}\n",
                        r.root,
                        r.documents,
                        r.chunks,
                        r.following,
                        r.reason
                            .as_ref()
                            .map(|x| format!(" ({x})"))
                            .unwrap_or_default(),
                        r.pending,
                        r.last_sync_at.as_deref().unwrap_or("never"),
                    ));
                }
            }
            print_text(out.trim_end())?;
            Ok(Outcome::Done)
        }
        VaultCmd::Sync {
            collections,
            timeout,
            json,
        } => {
            let filter = (!collections.is_empty()).then_some(collections.as_slice());
            let f = cairn.vault_sync(filter, timeout)?;
            if json {
                print_json(&f)?;
            } else if f.complete {
                print_text(&format!("in sync (waited {} ms)", f.waited_ms))?;
            } else {
                let mut text = format!(
                    "not in sync after {} ms: {}",
                    f.waited_ms,
                    f.note.as_deref().unwrap_or("changes pending")
                );
                for p in &f.pending {
                    text.push_str(&format!("\n  {p}"));
                }
                print_text(&text)?;
            }
            if f.complete {
                Ok(Outcome::Done)
            } else {
                Err(Error::FailedPrecondition(format!(
                    "not in sync: {}",
                    f.note.as_deref().unwrap_or("changes pending")
                ))
                .into())
            }
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct SearchArgs {
    /// Natural-language query.
    pub(crate) query: String,
    /// Results to show (1-50) [default: 5].
    #[arg(long)]
    pub(crate) top_k: Option<usize>,
    /// Search only this collection; repeat for more.
    #[arg(long = "collection")]
    pub(crate) collections: Vec<String>,
    /// At most this many chunks of one document, or of one item (function, type) in source code (default 2; 0 = no cap).
    #[arg(long)]
    pub(crate) max_per_document: Option<usize>,
    /// Print the result as JSON, for scripts.
    #[arg(long)]
    pub(crate) json: bool,
}

pub(super) fn reindex(cairn: Arc<Cairn>, a: ReindexArgs) -> anyhow::Result<Outcome> {
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
            files: crate::vault::formats::FileFilter {
                code: a.code,
                include: a.include,
                exclude: a.exclude,
            },
            ..Default::default()
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
    if a.watch {
        watch(&cairn, &s)?;
    }
    Ok(Outcome::Done)
}

/// `cairn reindex DIR --watch`: follow the root just indexed until SIGINT or SIGTERM.
fn watch(cairn: &Arc<Cairn>, s: &ReindexSummary) -> anyhow::Result<()> {
    let root = cairn
        .vault_followed_roots()?
        .into_iter()
        .find(|r| {
            r.root_key == s.root && r.collection == s.collection && covers(&r.prefix, &s.prefix)
        })
        .ok_or_else(|| anyhow::anyhow!("the directory was not recorded as a followed root"))?;
    let follower = cairn.follow_vault(FollowScope::Root(root.id))?;
    tracing::info!(
        root = %root.path().display(),
        collection = %root.collection,
        "following in the foreground; stop with Ctrl-C"
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let signal = rt.block_on(crate::mcp::server::shutdown_signal());
    tracing::info!("{signal}: finishing the batch in hand");
    drop(follower);
    Ok(())
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
