//! `cairn reindex DIR`: bring the vault in line with a directory of documents.
//!
//! - **Walk**: the files under DIR that the collection reads ([`super::formats`]:
//!   documentation formats, source code with `--code`, include and exclude globs), respecting `.gitignore` files (in DIR,
//!   its subdirectories and its parents, also outside a git repository), `.ignore` files
//!   and `.git/info/exclude`; hidden files and directories are skipped, files are visited
//!   in path order. Each file is then opened beneath a handle on the root
//!   ([`crate::paths::DirHandle::open_file`]), never by the walker's path: a symlink
//!   (anywhere along the path), a file with more than one hard link, a FIFO, device or
//!   socket, and a file over [`super::ingest::MAX_FILE_BYTES`] are skipped and reported
//!   in the summary (`files_skipped`, `skipped` with the reason), not fatal.
//! - **Identity**: see [`super::identity`]; paths are relative to the project root or DIR.
//!   Under a project, what a `dir:` root inside the project's path holds (indexed before
//!   the project covered it) moves to the project first ([`Vault::adopt_dir_roots`]), so
//!   a file has one key whichever came first.
//! - **Collection**: `--collection`, default the name of DIR (`samples/docs` → `docs`).
//!   A file reindexed under another collection moves to it.
//! - **Incremental**: an unchanged file is skipped after hashing; a changed file reuses
//!   the vectors of its unchanged chunks ([`super::ingest`]).
//! - **Pipeline**: three threads keep the cores on the model. A *reader* walks ahead:
//!   opens, reads and hashes each file, skips unchanged ones, chunks the changed ones
//!   and looks up their reusable vectors. The calling thread gathers changed files until
//!   [`EMBED_GROUP`] chunks need the model and embeds them in one call (sorted by token
//!   count, batched, ONNX Runtime on every core). A *writer* commits each embedded group
//!   **one transaction per file** while the next group is embedded: a Ctrl-C or a kill
//!   loses at most the two groups in flight, and the next run skips what was committed.
//! - **Threads**: [`ReindexOptions::threads`] and [`ReindexOptions::spin`] set ONNX
//!   Runtime's threads for the run (the embedder's own settings are restored after it);
//!   by default all cores, spinning only when the load average says the cores are free
//!   ([`Spin::Auto`]).
//! - **Removal**: documents of the same root and collection under DIR whose file is gone
//!   (or now ignored) are deleted.
//! - **Index**: the HNSW graph is caught up, compacted if needed and saved; `--rebuild`
//!   re-chunks every file and builds a fresh graph, replacing one built for another
//!   model or chunker.
//! - **Following**: the directory is recorded as a followed root ([`super::roots`]); a
//!   follower's batch ([`ReindexOptions::only`]) is the same run restricted to the paths
//!   its events named: the walk visits only those paths and their ancestors (so every
//!   ignore file on the way applies), and removes only documents under them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Instant;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::issues::settings::limits::COLLECTION_MAX;
use crate::paths::{DirHandle, canonical_root};

use super::documents::{delete_document, doc_paths};
use super::formats::{Admit, FileFilter};
use super::handle::Vault;
use super::identity::{DocRoot, relative_path};
use super::ingest::{Committed, Pending, is_current, read_file, refused};
use super::live::vault_dir;
use super::roots::{FollowedRoot, RootKind, covers};
use crate::embed::{Spin, Threading};

/// Chunks gathered before one call to the model.
pub(crate) const EMBED_GROUP: usize = 512;
/// Files gathered before a commit round, even if few chunks need the model.
const FILE_GROUP: usize = 256;
/// Files the reader may prepare ahead of the model.
const READ_AHEAD: usize = 64;

/// What to reindex.
#[derive(Debug, Clone, Default)]
pub struct ReindexOptions {
    /// The directory to walk.
    pub dir: PathBuf,
    /// Collection name; default: the directory's name.
    pub collection: Option<String>,
    /// Project (slug or id) whose root the paths are relative to; default: the project
    /// whose path contains `dir`, if any.
    pub project: Option<String>,
    /// Re-chunk every file and rebuild the graph from scratch.
    pub rebuild: bool,
    /// Chunks gathered per model call; default [`EMBED_GROUP`]. Smaller groups commit
    /// sooner (less work lost to an interruption), larger ones batch better.
    pub embed_group: Option<usize>,
    /// ONNX Runtime intra-op threads for this run; default: every core.
    pub threads: Option<usize>,
    /// Whether ONNX Runtime's idle workers spin during this run; default [`Spin::Auto`].
    pub spin: Option<Spin>,
    /// A follower's batch ([`super::follow_files`]): only these paths under `dir` (files or
    /// directories, absolute; present or gone); `None` with [`Self::follower`]: the
    /// whole directory.
    pub only: Option<Vec<PathBuf>>,
    /// Run for a follower: the embedder's thread settings stay as they are (the
    /// process's searches share them), the graph is saved only once enough changed, and
    /// the root is not recorded again.
    pub follower: bool,
    /// Set by a follower that stops: the run gives up at its next model run (besides the
    /// process stopping, [`super::VaultState::stop_indexing`]), committing no file it has
    /// not embedded whole.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Which files are indexed ([`super::formats`]): documentation formats, code with
    /// `--code`, include and exclude globs. Recorded with the root for its follower.
    pub files: FileFilter,
}

/// What the reader hands the model thread, file by file in walk order.
enum Read {
    /// A file not indexed: outside the root (logged), or refused (with the reason).
    Skipped(Option<SkippedFile>),
    /// A file whose stored document is current.
    Unchanged(String),
    /// A changed file, chunked, with the vectors it can reuse.
    Changed(String, Box<Pending>),
}

/// An embedded group on its way to the writer: the files and their missing vectors.
type Batch = (Vec<Pending>, Vec<Vec<f32>>);

/// Progress of a reindex, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub enum ReindexProgress {
    /// The walk found this many files to read.
    Found(usize),
    /// This many more files were handled.
    Done(usize),
}

/// The summary of a reindex.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct ReindexSummary {
    /// What paths are relative to: `project:<id>` or `dir:<absolute path>`.
    pub root: String,
    /// The directory walked, relative to the root (empty for the root itself).
    pub prefix: String,
    pub collection: String,
    pub files_seen: usize,
    pub files_changed: usize,
    pub files_unchanged: usize,
    pub files_removed: usize,
    pub chunks_embedded: usize,
    pub chunks_reused: usize,
    pub chunks_removed: usize,
    /// Hidden characters removed from changed files' text before chunking (see
    /// docs/security.md, "Stored text").
    pub(crate) removed_characters: u64,
    /// The same, per class.
    pub(crate) removed_characters_by_class: crate::text::Removed,
    /// WordPiece tokens of the embedded chunks (special tokens included).
    pub tokens_embedded: u64,
    /// Padding tokens the model ran on top of `tokens_embedded` (batches are formed by
    /// token count to keep this small).
    pub padding_tokens: u64,
    /// Points in the HNSW graph afterwards (deleted chunks included until compaction).
    pub index_points: usize,
    pub seconds: f64,
    /// Markdown entries not indexed (symlinks, hard links, special or over-size files).
    pub(crate) files_skipped: usize,
    /// Each skipped entry, relative to the root, with the reason.
    pub(crate) skipped: Vec<SkippedFile>,
}

/// A Markdown entry `cairn reindex` did not index, and why.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct SkippedFile {
    pub(crate) path: String,
    pub(crate) reason: String,
    /// Refused by its format or for having more chunks than the per-file budget
    /// ([`super::ingest::MAX_FILE_CHUNKS`]): `vault status` names it.
    #[serde(skip)]
    pub(crate) refused: bool,
}

/// Validate a collection name: 1-64 characters, no NUL, no surrounding whitespace.
pub(crate) fn check_collection(name: &str) -> Result<()> {
    let n = name.chars().count();
    if n == 0 || n > COLLECTION_MAX || name.contains('\0') || name.trim() != name {
        return Err(Error::invalid(
            "collection",
            format!(
                "{name:?} must be 1-{COLLECTION_MAX} characters without NUL or surrounding spaces"
            ),
        ));
    }
    Ok(())
}

impl Vault<'_> {
    /// Reindex a directory (see the module docs): place it under its root, walk it,
    /// index what changed ([`Self::ingest`]), remove what is gone ([`Self::remove_gone`]),
    /// record it for its follower and bring the graph up to date.
    pub(crate) fn reindex(
        &self,
        opts: &ReindexOptions,
        progress: &dyn Fn(ReindexProgress),
    ) -> Result<ReindexSummary> {
        let started = Instant::now();
        let dir = canonical_root(&opts.dir)?;
        let collection = match &opts.collection {
            Some(c) => c.clone(),
            None => dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("vault")
                .to_string(),
        };
        check_collection(&collection)?;
        let index_dir = vault_dir(&self.store.index_dir());
        if !opts.rebuild {
            self.state.check_disk_manifest(&index_dir)?;
        }
        let root = self.reindex_root(&dir, opts.project.as_deref())?;
        let prefix = relative_path(&root.dir, &dir)?;
        if root.project.is_some() {
            self.adopt_dir_roots(&root.key, &root.dir)?;
        }
        let only = (opts.only.as_ref()).map(|paths| Targets::new(&root.dir, paths));
        let (files, walk_skipped) = walk(&dir, &opts.files.compile()?, only.as_ref())?;
        progress(ReindexProgress::Found(files.len()));
        let mut s = ReindexSummary {
            root: root.key.clone(),
            prefix: prefix.clone(),
            collection: collection.clone(),
            files_seen: files.len(),
            ..Default::default()
        };
        s.skipped.extend(walk_skipped.iter().filter_map(|file| {
            Some(SkippedFile {
                path: relative_path(&root.dir, file).ok()?,
                reason: "a symlink or special file; only regular files are indexed".into(),
                refused: false,
            })
        }));
        let seen = self.ingest(&root, &collection, &files, opts, &mut s, progress)?;
        let gone = Gone {
            root_key: &root.key,
            collection: &collection,
            prefix: &prefix,
            only: only.as_ref(),
        };
        self.remove_gone(&gone, &seen, &mut s)?;
        if !opts.follower {
            let kind = RootKind::Dir;
            self.record_root(
                &root.key,
                &prefix,
                kind,
                &collection,
                &root.dir,
                &opts.files,
            )?;
        }
        s.index_points = if opts.rebuild {
            self.state.rebuild(self.store, &index_dir)?
        } else {
            self.state
                .after_write(self.store, &index_dir, !opts.follower)?
        };
        s.files_skipped = s.skipped.len();
        s.seconds = started.elapsed().as_secs_f64();
        Ok(s)
    }

    /// Index `files` under `root` in `collection` through the pipeline (a reader thread,
    /// the model on this one, a writer thread), with the run's ONNX Runtime threads (a
    /// follower keeps the process's); counts into `s`. Returns the paths seen.
    fn ingest(
        &self,
        root: &DocRoot,
        collection: &str,
        files: &[PathBuf],
        opts: &ReindexOptions,
        s: &mut ReindexSummary,
        progress: &dyn Fn(ReindexProgress),
    ) -> Result<HashSet<String>> {
        let handle = DirHandle::open_root(&root.dir)?;
        let embedder = &self.state.embedder;
        let before = embedder.threading();
        if !opts.follower {
            let threading = Threading::resolve(opts.threads, opts.spin.unwrap_or_default());
            embedder.set_threading(threading);
            tracing::info!(
                threads = threading.thread_count(),
                spin = threading.spin,
                "reindex: ONNX Runtime threads"
            );
        }
        let stats_before = embedder.stats();
        let mut seen = HashSet::new();
        let piped = std::thread::scope(|scope| -> Result<()> {
            let (read_tx, read_rx) = sync_channel::<Result<Read>>(READ_AHEAD);
            let (write_tx, write_rx) = sync_channel::<Batch>(1);
            let job = ReadJob {
                handle: &handle,
                root_dir: &root.dir,
                root_key: &root.key,
                collection,
                rebuild: opts.rebuild,
            };
            scope.spawn(move || self.read_ahead(&job, files, read_tx));
            let writer = scope.spawn(move || self.write_behind(write_rx));
            let embedded = self.embed_loop(read_rx, write_tx, opts, &mut seen, s, progress);
            let written = writer
                .join()
                .unwrap_or_else(|_| Err(Error::Internal("the reindex writer panicked".into())));
            let committed = match (embedded, written) {
                (Err(e), _) => return Err(e),
                (Ok(()), w) => w?,
            };
            for c in committed {
                s.files_changed += 1;
                s.chunks_embedded += c.embedded;
                s.chunks_reused += c.reused;
                s.chunks_removed += c.removed;
                s.removed_characters_by_class.add(&c.sanitized);
            }
            Ok(())
        });
        if !opts.follower {
            embedder.set_threading(before);
        }
        piped?;
        s.removed_characters = s.removed_characters_by_class.total();
        let stats = embedder.stats();
        s.tokens_embedded = stats.tokens - stats_before.tokens;
        s.padding_tokens = stats.padding - stats_before.padding;
        Ok(seen)
    }

    /// Delete the documents of the run's root and collection under its directory (and
    /// its targets, for a follower's batch) that were not `seen`: their file is gone or
    /// now ignored.
    fn remove_gone(
        &self,
        run: &Gone<'_>,
        seen: &HashSet<String>,
        s: &mut ReindexSummary,
    ) -> Result<()> {
        let gone: Vec<String> = self
            .store
            .read(|c| doc_paths(c, run.root_key, run.collection))?
            .into_iter()
            .filter(|p| {
                covers(run.prefix, p) && run.only.is_none_or(|t| t.covers(p)) && !seen.contains(p)
            })
            .collect();
        if gone.is_empty() {
            return Ok(());
        }
        self.store.write(|tx| {
            for p in &gone {
                s.chunks_removed += delete_document(tx, run.root_key, p)?.unwrap_or(0);
            }
            Ok(())
        })?;
        s.files_removed = gone.len();
        Ok(())
    }

    /// The reader: open, read, hash, skip or chunk each file, in walk order. Stops at
    /// the first error (sent on) or when the model thread hangs up.
    fn read_ahead(&self, job: &ReadJob<'_>, files: &[PathBuf], tx: SyncSender<Result<Read>>) {
        for file in files {
            let item = self.read_one(job, file);
            let failed = item.is_err();
            if tx.send(item).is_err() || failed {
                return;
            }
        }
    }

    fn read_one(&self, job: &ReadJob<'_>, file: &Path) -> Result<Read> {
        let rel = match relative_path(job.root_dir, file) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "skipped");
                return Ok(Read::Skipped(None));
            }
        };
        let read = match read_file(job.handle, &rel) {
            Ok(Some(read)) => read,
            Ok(None) => {
                return Ok(Read::Skipped(Some(SkippedFile {
                    path: rel,
                    reason: "removed while the directory was walked".into(),
                    refused: false,
                })));
            }
            Err(e @ Error::InvalidInput(_)) => {
                let reason = crate::paths::refusal_text(&e);
                tracing::warn!(file = %rel, %reason, "skipped");
                return Ok(Read::Skipped(Some(SkippedFile {
                    path: rel,
                    reason,
                    refused: false,
                })));
            }
            Err(e) => return Err(e),
        };
        let existing = self.stored_doc(job.root_key, &rel)?;
        if !job.rebuild
            && let Some(doc) = &existing
            && is_current(doc, &read.hash, job.collection, self.model_id())
        {
            return Ok(Read::Unchanged(rel));
        }
        match Pending::prepare(
            self.store,
            self.model_id(),
            job.root_key,
            &rel,
            job.collection,
            read,
            existing.as_ref(),
        ) {
            Ok(p) => Ok(Read::Changed(rel, Box::new(p))),
            // Refused by its format or over the per-file budget: skipped (and its stale
            // document removed).
            Err(e @ Error::InvalidInput(_)) => {
                let reason = crate::paths::refusal_text(&e);
                tracing::warn!(file = %rel, %reason, "skipped");
                Ok(Read::Skipped(Some(SkippedFile {
                    path: rel,
                    reason,
                    refused: true,
                })))
            }
            Err(e) => Err(e),
        }
    }

    /// The model thread: gather changed files into groups of `group` chunks, embed each
    /// group, hand it to the writer. Dropping `write_tx` (on return) ends the writer.
    fn embed_loop(
        &self,
        rx: Receiver<Result<Read>>,
        write_tx: SyncSender<Batch>,
        opts: &ReindexOptions,
        seen: &mut HashSet<String>,
        s: &mut ReindexSummary,
        progress: &dyn Fn(ReindexProgress),
    ) -> Result<()> {
        let group = opts.embed_group.filter(|&n| n > 0).unwrap_or(EMBED_GROUP);
        let stop = opts.stop.as_deref();
        let mut pending: Vec<Pending> = Vec::new();
        let mut missing = 0;
        // Embeds and hands over a group; `false` when the writer has stopped (it failed,
        // and its error is reported by the join).
        let flush = |pending: &mut Vec<Pending>| -> Result<bool> {
            if pending.is_empty() {
                return Ok(true);
            }
            let batch = std::mem::take(pending);
            let n = batch.len();
            let fresh = self.embed_missing(&batch, stop)?;
            if write_tx.send((batch, fresh)).is_err() {
                return Ok(false);
            }
            progress(ReindexProgress::Done(n));
            Ok(true)
        };
        for item in rx {
            match item? {
                Read::Skipped(skipped) => {
                    s.skipped.extend(skipped);
                    progress(ReindexProgress::Done(1));
                }
                Read::Unchanged(rel) => {
                    seen.insert(rel);
                    s.files_unchanged += 1;
                    progress(ReindexProgress::Done(1));
                }
                Read::Changed(rel, p) => {
                    seen.insert(rel);
                    missing += p.missing();
                    pending.push(*p);
                    if missing >= group || pending.len() >= FILE_GROUP {
                        if !flush(&mut pending)? {
                            return Ok(());
                        }
                        missing = 0;
                    }
                }
            }
        }
        flush(&mut pending).map(drop)
    }

    /// The writer: commit each embedded group, one transaction per file, in order.
    fn write_behind(&self, rx: Receiver<Batch>) -> Result<Vec<Committed>> {
        let mut out = Vec::new();
        for (batch, fresh) in rx {
            out.extend(self.commit_files(batch, fresh)?);
        }
        Ok(out)
    }
}

/// A difference between a followed root's files and the index: what a follower has
/// still to index.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct PendingChange {
    /// The file, relative to its root.
    pub(crate) path: String,
    /// `new`, `changed` or `removed`.
    pub(crate) change: &'static str,
}

impl Vault<'_> {
    /// How the files of `root` differ from the index now: every file read and hashed
    /// beneath the root as `cairn reindex` reads it, compared with its stored document.
    /// An error when the root is no longer a real directory.
    pub(crate) fn pending_changes(&self, root: &FollowedRoot) -> Result<Vec<PendingChange>> {
        if canonical_root(&root.dir)? != root.dir {
            return Err(Error::FailedPrecondition(format!(
                "{} is no longer a real directory (moved, or replaced by a symlink)",
                root.dir.display()
            )));
        }
        let handle = DirHandle::open_root(&root.dir)?;
        let only = match root.kind {
            RootKind::Dir => None,
            RootKind::File => Some(Targets::new(&root.dir, &[root.path()])),
        };
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let watched = root.watched_dir();
        if watched.is_dir() {
            let admit = root.files.compile()?;
            for file in walk(&watched, &admit, only.as_ref())?.0 {
                let Ok(rel) = relative_path(&root.dir, &file) else {
                    continue;
                };
                let read = match read_file(&handle, &rel) {
                    Ok(Some(read)) => read,
                    Ok(None) | Err(Error::InvalidInput(_)) => continue,
                    Err(e) => return Err(e),
                };
                let change = match self.stored_doc(&root.root_key, &rel)? {
                    Some(doc)
                        if is_current(&doc, &read.hash, &root.collection, self.model_id()) =>
                    {
                        None
                    }
                    Some(_) => Some("changed"),
                    None => Some("new"),
                };
                // A file its format or the per-file budget refuses is skipped, not pending.
                let change = change.filter(|_| !refused(&rel, &read.bytes));
                if let Some(change) = change {
                    out.push(PendingChange {
                        path: rel.clone(),
                        change,
                    });
                }
                seen.insert(rel);
            }
        }
        for path in self
            .store
            .read(|c| doc_paths(c, &root.root_key, &root.collection))?
        {
            if covers(&root.prefix, &path) && !seen.contains(&path) {
                out.push(PendingChange {
                    path,
                    change: "removed",
                });
            }
        }
        Ok(out)
    }
}

/// Where a run removes the documents whose file is gone ([`Vault::remove_gone`]).
struct Gone<'a> {
    root_key: &'a str,
    collection: &'a str,
    /// The directory walked, relative to the root.
    prefix: &'a str,
    /// A follower's batch: only under these.
    only: Option<&'a Targets>,
}

/// What the reader needs to open, place and judge a file.
struct ReadJob<'a> {
    handle: &'a DirHandle,
    root_dir: &'a Path,
    root_key: &'a str,
    collection: &'a str,
    rebuild: bool,
}

/// The paths a follower's batch covers: absolute (for the walk) and relative to the
/// root (for removals).
#[derive(Clone)]
struct Targets {
    absolute: Vec<PathBuf>,
    relative: Vec<String>,
}

impl Targets {
    fn new(root_dir: &Path, paths: &[PathBuf]) -> Targets {
        let mut relative = Vec::new();
        let mut absolute = Vec::new();
        for p in paths {
            match relative_path(root_dir, p) {
                Ok(r) => {
                    relative.push(r);
                    absolute.push(p.clone());
                }
                Err(e) => tracing::warn!(path = %p.display(), error = %e, "not followed"),
            }
        }
        Targets { absolute, relative }
    }

    /// Whether the walk should enter or yield `path`: a target, under one, or an
    /// ancestor of one.
    fn visits(&self, path: &Path) -> bool {
        self.absolute
            .iter()
            .any(|t| t.starts_with(path) || path.starts_with(t))
    }

    /// Whether the relative path `path` is a target or under one.
    fn covers(&self, path: &str) -> bool {
        self.relative.iter().any(|t| covers(t, path))
    }
}

/// The files under `dir` (canonical) that `admit` admits (by their path relative to
/// `dir`), in path order, ignore files respected (only those `only` visits, when given);
/// and the admitted entries that are not regular files (symlinks, FIFOs, ...).
fn walk(dir: &Path, admit: &Admit, only: Option<&Targets>) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    let mut builder = ignore::WalkBuilder::new(dir);
    builder
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b));
    if let Some(only) = only.cloned() {
        builder.filter_entry(move |e| only.visits(e.path()));
    }
    let walker = builder.build();
    for entry in walker {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "skipped while walking");
                continue;
            }
        };
        if entry.depth() == 0 {
            continue;
        }
        let rel = entry.path().strip_prefix(dir).unwrap_or(entry.path());
        if !admit.admits(&rel.to_string_lossy().replace('\\', "/")) {
            continue;
        }
        match entry.file_type() {
            Some(t) if t.is_file() => files.push(entry.into_path()),
            Some(t) if t.is_dir() => {}
            _ => skipped.push(entry.into_path()),
        }
    }
    Ok((files, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_names_are_checked() {
        assert!(check_collection("handbook").is_ok());
        assert!(check_collection("").is_err());
        assert!(check_collection(" x").is_err());
        assert!(check_collection(&"x".repeat(65)).is_err());
    }

    #[test]
    fn the_walk_respects_nested_gitignore_outside_a_repository() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("docs/drafts")).unwrap();
        std::fs::create_dir_all(root.join("docs/guide")).unwrap();
        std::fs::write(root.join("docs/.gitignore"), "drafts/\n").unwrap();
        std::fs::write(root.join("docs/drafts/x.md"), "# x").unwrap();
        std::fs::write(root.join("docs/guide/b.markdown"), "# b").unwrap();
        std::fs::write(root.join("docs/a.md"), "# a").unwrap();
        std::fs::write(root.join("docs/notes.bin"), "n").unwrap();
        std::fs::write(root.join("docs/lib.rs"), "fn f() {}").unwrap();
        std::fs::write(root.join("docs/.hidden.md"), "# h").unwrap();
        let canon = canonical_root(root).unwrap();
        let got: Vec<String> = walk(&canon.join("docs"), &Admit::default(), None)
            .unwrap()
            .0
            .iter()
            .map(|p| relative_path(&canon, p).unwrap())
            .collect();
        assert_eq!(got, ["docs/a.md", "docs/guide/b.markdown"]);
    }
}
