//! Following the recorded roots ([`super::roots`]): file-system events (inotify, through
//! the `notify` crate) become batches of `cairn reindex` restricted to the paths they
//! name ([`super::reindex::ReindexOptions::only`]). `cairn daemon` follows every root;
//! `cairn reindex DIR --watch` follows one in the foreground.
//!
//! - **Watches**: one non-recursive watch per directory that `cairn reindex` walks
//!   (hidden and ignored directories get none), re-synchronised before each batch (a
//!   directory created, moved or replaced is watched under its new name and identity).
//! - **Events are hints.** An event adds its path to the root's pending set; nothing of
//!   an event is trusted besides the path. The batch walks those paths beneath the root
//!   exactly as `cairn reindex` does (ignore files, no symlinks, no hard links, no
//!   special files, the size cap) and removes the documents under them whose file is
//!   gone. An event on `.gitignore` or `.ignore` asks for a whole rescan.
//! - **Batches**: a root's batch starts once its events have been quiet for [`DEBOUNCE`],
//!   or [`MAX_DELAY`] after the first of them during a storm; one batch at a time per
//!   root, each root's on a thread of its own, so a storm costs at most one pipeline run
//!   in flight per root, and a root busy with a large file delays neither another root
//!   nor the follower's own thread (housekeeping, the leases' heartbeat). More than
//!   [`MAX_TARGETS`] paths pending become one rescan of the root.
//! - **Stopping**: a stopped follower's batches give up at their next model run
//!   ([`super::reindex::ReindexOptions::stop`]), storing nothing of a file not embedded
//!   whole; the next claim rescans.
//! - **Per-file budget**: a file over [`super::ingest::MAX_FILE_CHUNKS`] is skipped, and
//!   the root's report says so (`watching`, with the reason).
//! - **Never silently stale.** A queue overflow (the kernel dropped events) switches every
//!   root to `rescanning` and rescans it; it returns to `watching` after a rescan no
//!   overflow interrupted. A refused watch (`fs.inotify.max_user_watches`) leaves the
//!   root `rescanning` every [`RESCAN_EVERY`], retrying its watches each time. A root
//!   that is gone or replaced by a symlink is `not followed` (one log line) until it is
//!   a real directory again, then rescanned. Its documents are kept meanwhile.
//! - **One follower per root**: the lease in `vault_roots` ([`super::roots::claim`]).
//!   Claiming a root starts with a rescan (changes made while nobody followed).
//! - **Freshness**: every accepted event takes a sequence number; a batch records the
//!   number it started from. [`Shared::wait_fresh`] waits until the batches have caught
//!   up with the numbers seen when it was called.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher};
use serde::Serialize;

use crate::base::now_iso;
use crate::error::{Error, Result};

use super::handle::Vault;
use super::reindex::{ReindexOptions, ReindexSummary};
use super::roots::{FollowedRoot, FollowerReports, HEARTBEAT, Report, RootKind};

/// Quiet time after a root's last event before its batch starts.
pub(crate) const DEBOUNCE: Duration = Duration::from_millis(300);
/// The longest a change waits during a storm of events.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(1);
/// How often a root whose watches the kernel refused is rescanned.
pub(crate) const RESCAN_EVERY: Duration = Duration::from_secs(30);
/// Pending paths past which a batch becomes a rescan of the whole root.
pub(crate) const MAX_TARGETS: usize = 10_000;
/// How often the follower re-reads the recorded roots, renews its leases, checks roots
/// that are not followed and reports.
const HOUSEKEEPING: Duration = Duration::from_secs(5);
/// Wait after a failed batch before trying again.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// What a follower needs of the process: the vault over its store and state, and a
/// place to register itself (so that the process's `fresh` searches wait on it).
pub(crate) trait FollowHost: Send + Sync + 'static {
    fn vault(&self) -> Vault<'_>;
    fn set_follower(&self, follower: Option<&Arc<Shared>>);
}

/// Which recorded roots a follower follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowScope {
    /// Every recorded root (`cairn daemon`).
    All,
    /// One (`cairn reindex DIR --watch`).
    Root(i64),
}

/// A root's state, as shown by status.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    /// Not yet claimed by this follower.
    Unclaimed,
    Watching,
    Rescanning(String),
    NotFollowed(String),
    /// Another follower holds the lease.
    Elsewhere,
}

struct Root {
    spec: FollowedRoot,
    mode: Mode,
    /// Paths named by events since the last batch began.
    targets: BTreeSet<PathBuf>,
    /// The next batch rescans the whole root.
    full: bool,
    first: Option<Instant>,
    last: Option<Instant>,
    /// No batch before this (a periodic rescan, or a retry after a failure).
    not_before: Option<Instant>,
    /// Sequence number of the last event accepted for this root.
    seen: u64,
    /// Every event up to this number is indexed.
    done: u64,
    running: bool,
    /// An overflow happened since the running batch began.
    overflowed: bool,
    last_sync: Option<String>,
    reported: Option<Report>,
    reported_at: Option<Instant>,
    /// Files skipped, refused by their format or over the per-file budget, relative to
    /// the root, with the reason (status shows them).
    over_budget: BTreeMap<String, String>,
}

impl Root {
    fn new(spec: FollowedRoot) -> Root {
        Root {
            spec,
            mode: Mode::Unclaimed,
            targets: BTreeSet::new(),
            full: false,
            first: None,
            last: None,
            not_before: None,
            seen: 0,
            done: 0,
            running: false,
            overflowed: false,
            last_sync: None,
            reported: None,
            reported_at: None,
            over_budget: BTreeMap::new(),
        }
    }

    fn held(&self) -> bool {
        matches!(
            self.mode,
            Mode::Watching | Mode::Rescanning(_) | Mode::NotFollowed(_)
        )
    }

    fn follows_events(&self) -> bool {
        matches!(self.mode, Mode::Watching | Mode::Rescanning(_))
    }

    fn has_work(&self) -> bool {
        self.full || !self.targets.is_empty()
    }

    /// When its next batch is due, if it has work.
    fn due(&self) -> Option<Instant> {
        if !self.follows_events() || self.running || !self.has_work() {
            return None;
        }
        let at = match (self.first, self.last) {
            (Some(first), Some(last)) => (last + DEBOUNCE).min(first + MAX_DELAY),
            _ => Instant::now(),
        };
        Some(self.not_before.map_or(at, |n| at.max(n)))
    }

    /// Record an event's path (sequence number `seq`).
    fn accept(&mut self, path: PathBuf, rescan: bool, seq: u64) {
        let now = Instant::now();
        if rescan || self.targets.len() >= MAX_TARGETS {
            self.full = true;
            self.targets.clear();
        } else if !self.full {
            self.targets.insert(path);
        }
        self.first.get_or_insert(now);
        self.last = Some(now);
        self.seen = seq;
    }

    fn report(&self) -> Report {
        let (state, reason) = match &self.mode {
            Mode::Rescanning(r) => ("rescanning", Some(r.clone())),
            Mode::NotFollowed(r) => ("not followed", Some(r.clone())),
            _ if !self.over_budget.is_empty() => (
                "watching",
                Some(format!(
                    "not indexed: {}",
                    self.over_budget
                        .values()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("; ")
                )),
            ),
            _ => ("watching", None),
        };
        Report {
            state,
            reason,
            // A pending rescan counts as one (its paths are unknown until it walks).
            pending: if self.full {
                1
            } else {
                self.targets.len() as u64
            } + u64::from(self.running && self.done < self.seen),
            last_sync_at: self.last_sync.clone(),
        }
    }
}

/// The follower's state, shared by the event handler, the worker and waiting searches.
#[derive(Debug)]
pub(crate) struct Shared {
    inner: Mutex<Inner>,
    /// Wakes the worker.
    wake: Condvar,
    /// Signalled after every batch.
    settled: Condvar,
    /// This follower's name in the leases: `host:pid:started`.
    me: String,
    /// Set when the follower stops: its batches give up at their next model run.
    halt: Arc<std::sync::atomic::AtomicBool>,
    /// The store's own files (database, index directory): never events, even inside a
    /// followed root, or each batch's writes would wake the next.
    own: Vec<PathBuf>,
}

#[derive(Default)]
struct Inner {
    roots: HashMap<i64, Root>,
    seq: u64,
    stop: bool,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("roots", &self.roots.len())
            .field("seq", &self.seq)
            .finish()
    }
}

/// The result of waiting for freshness (`fresh: true`, `cairn vault sync`).
#[derive(Debug, Clone, Default, Serialize, PartialEq, schemars::JsonSchema)]
pub struct Freshness {
    /// Every change seen before the wait began is indexed.
    pub complete: bool,
    /// How long the call waited, in milliseconds.
    pub(crate) waited_ms: u64,
    /// What is still pending when incomplete: followed directories or files, or changed paths.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) pending: Vec<String>,
    /// Why the wait gave up, or could not wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(crate) note: Option<String>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Route one notify event to the roots it concerns.
    fn on_event(&self, event: notify::Result<notify::Event>) {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                if matches!(e.kind, notify::ErrorKind::MaxFilesWatch) {
                    self.fall_back(&format!(
                        "the kernel refused more watches (fs.inotify.max_user_watches): {e}"
                    ));
                } else {
                    tracing::warn!(error = %e, "file watching reported an error");
                }
                return;
            }
        };
        if event.need_rescan() {
            tracing::warn!(
                "the kernel dropped file-system events (inotify queue overflow): rescanning every followed root"
            );
            self.fall_back("the kernel dropped events (inotify queue overflow)");
            return;
        }
        let relevant = match event.kind {
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
            EventKind::Access(_) => false,
            _ => true,
        };
        if !relevant {
            return;
        }
        let own = |p: &Path| {
            self.own.iter().any(|o| {
                p.starts_with(o)
                    || (p.parent() == o.parent()
                        && o.file_name().zip(p.file_name()).is_some_and(|(o, p)| {
                            p.as_encoded_bytes().starts_with(o.as_encoded_bytes())
                        }))
            })
        };
        let mut g = self.lock();
        let inner = &mut *g;
        inner.seq += 1;
        let seq = inner.seq;
        let mut woke = false;
        for path in event.paths.iter().filter(|p| !own(p)) {
            for root in inner.roots.values_mut() {
                if !root.follows_events() {
                    continue;
                }
                if let Some(rescan) = concerns(&root.spec, path) {
                    root.accept(path.clone(), rescan, seq);
                    woke = true;
                }
            }
        }
        drop(g);
        if woke {
            self.wake.notify_all();
        }
    }

    /// Record a path (or, with `rescan`, a whole rescan) for root `id` as a new event,
    /// and wake the worker.
    fn push(&self, id: i64, path: PathBuf, rescan: bool) {
        let mut g = self.lock();
        g.seq += 1;
        let seq = g.seq;
        if let Some(root) = g.roots.get_mut(&id) {
            root.accept(path, rescan, seq);
        }
        drop(g);
        self.wake.notify_all();
    }

    /// Every root that follows events rescans; they show `rescanning` until a rescan
    /// completes uninterrupted.
    fn fall_back(&self, reason: &str) {
        let mut g = self.lock();
        g.seq += 1;
        let seq = g.seq;
        for root in g.roots.values_mut() {
            if root.follows_events() {
                root.mode = Mode::Rescanning(reason.to_string());
                root.overflowed = true;
                root.accept(PathBuf::new(), true, seq);
            }
        }
        drop(g);
        self.wake.notify_all();
    }

    /// Wait (at most `timeout`) until every change this follower has seen in the roots
    /// of `collections` (every root when `None`) is indexed. `None` when this follower
    /// follows none of them.
    pub(crate) fn wait_fresh(
        &self,
        collections: Option<&[String]>,
        timeout: Duration,
    ) -> Option<Freshness> {
        let started = Instant::now();
        let deadline = started + timeout;
        let mut g = self.lock();
        let wanted =
            |r: &Root| r.held() && collections.is_none_or(|c| c.contains(&r.spec.collection));
        let marks: Vec<(i64, u64)> = g
            .roots
            .iter()
            .filter(|(_, r)| wanted(r))
            .map(|(id, r)| (*id, r.seen))
            .collect();
        if marks.is_empty() {
            return None;
        }
        loop {
            let mut behind = Vec::new();
            let mut unfollowed = Vec::new();
            for (id, mark) in &marks {
                let Some(r) = g.roots.get(id) else { continue };
                let shown = r.spec.path().to_string_lossy().into_owned();
                match &r.mode {
                    Mode::NotFollowed(reason) => unfollowed.push(format!("{shown} ({reason})")),
                    _ if r.follows_events() && r.done < *mark => behind.push(shown),
                    _ => {}
                }
            }
            let now = Instant::now();
            if behind.is_empty() || now >= deadline {
                let note = if !behind.is_empty() {
                    Some(format!(
                        "gave up after {} ms with changes still being indexed; the results may be stale",
                        timeout.as_millis()
                    ))
                } else if !unfollowed.is_empty() {
                    Some("some roots are not followed now; their documents may be stale".into())
                } else {
                    None
                };
                behind.extend(unfollowed);
                return Some(Freshness {
                    complete: behind.is_empty(),
                    waited_ms: now.duration_since(started).as_millis() as u64,
                    pending: behind,
                    note,
                });
            }
            g = self
                .settled
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// This follower's live view of the roots it holds (for status).
    pub(crate) fn reports(&self) -> FollowerReports {
        FollowerReports {
            follower: self.me.clone(),
            reports: self
                .lock()
                .roots
                .iter()
                .filter(|(_, r)| r.held())
                .map(|(id, r)| (*id, r.report()))
                .collect(),
        }
    }
}

/// Whether an event on `path` concerns `root`: `None` if not, `Some(true)` when it asks
/// for a rescan (an ignore file changed), `Some(false)` for a path to look at.
fn concerns(root: &FollowedRoot, path: &Path) -> Option<bool> {
    let watched = root.watched_dir();
    match root.kind {
        RootKind::File => (path == root.path() || path == watched).then_some(false),
        RootKind::Dir => {
            let rel = path.strip_prefix(&watched).ok()?;
            let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
            let hidden = |p: &&std::ffi::OsStr| p.to_str().is_none_or(|s| s.starts_with('.'));
            match parts.split_last() {
                None => Some(false),
                Some((_, dirs)) if dirs.iter().any(hidden) => None,
                Some((last, _)) if hidden(last) => {
                    matches!(last.to_str(), Some(".gitignore" | ".ignore")).then_some(true)
                }
                Some(_) => Some(false),
            }
        }
    }
}

/// Why a root cannot be followed now, if it cannot: it must be a real directory (and a
/// followed directory under it too) at its canonical path.
fn health(root: &FollowedRoot) -> std::result::Result<(), String> {
    for dir in [root.dir.clone(), root.watched_dir()] {
        match std::fs::symlink_metadata(&dir) {
            Err(_) => return Err(format!("{} is gone", dir.display())),
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!("{} was replaced by a symlink", dir.display()));
            }
            Ok(m) if !m.is_dir() => {
                return Err(format!("{} is no longer a directory", dir.display()));
            }
            Ok(_) => {}
        }
        match std::fs::canonicalize(&dir) {
            Ok(c) if c == dir => {}
            _ => {
                return Err(format!(
                    "a directory on the path of {} was replaced by a symlink",
                    dir.display()
                ));
            }
        }
    }
    Ok(())
}

/// The directories to watch for a root, with their identity (device, inode).
fn wanted_dirs(root: &FollowedRoot) -> Vec<(PathBuf, (u64, u64))> {
    use std::os::unix::fs::MetadataExt;
    let watched = root.watched_dir();
    let identity = |p: &Path| {
        std::fs::symlink_metadata(p)
            .ok()
            .filter(|m| m.is_dir())
            .map(|m| (m.dev(), m.ino()))
    };
    if root.kind == RootKind::File {
        return identity(&watched)
            .map(|i| (watched, i))
            .into_iter()
            .collect();
    }
    let mut out = Vec::new();
    let walker = ignore::WalkBuilder::new(&watched)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| e.file_type().is_some_and(|t| t.is_dir()))
        .build();
    for entry in walker.flatten() {
        if let Some(i) = identity(entry.path()) {
            out.push((entry.into_path(), i));
        }
    }
    out
}

/// The kernel watches, shared by the roots (two roots may watch one directory).
struct Watches {
    watcher: notify::RecommendedWatcher,
    /// Watched directory → its identity when watched, and the roots that want it.
    dirs: HashMap<PathBuf, ((u64, u64), BTreeSet<i64>)>,
}

impl Watches {
    /// Make `root`'s watches `wanted`; an error when the kernel refuses more watches.
    fn sync(
        &mut self,
        root: i64,
        wanted: &[(PathBuf, (u64, u64))],
    ) -> std::result::Result<(), String> {
        let want: HashMap<&Path, (u64, u64)> =
            wanted.iter().map(|(p, i)| (p.as_path(), *i)).collect();
        let mut drop_dirs = Vec::new();
        for (path, (identity, roots)) in self.dirs.iter_mut() {
            match want.get(path.as_path()) {
                Some(i) if i == identity => {
                    roots.insert(root);
                }
                // Another directory under the same name: watched anew, for everyone
                // (the other roots claim it again at their next batch).
                Some(_) => drop_dirs.push(path.clone()),
                None => {
                    if roots.remove(&root) && roots.is_empty() {
                        drop_dirs.push(path.clone());
                    }
                }
            }
        }
        for path in drop_dirs {
            let _ = self.watcher.unwatch(&path);
            self.dirs.remove(&path);
        }
        for (path, identity) in wanted {
            if self.dirs.contains_key(path) {
                continue;
            }
            match self.watcher.watch(path, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    self.dirs
                        .insert(path.clone(), (*identity, BTreeSet::from([root])));
                }
                Err(e) if matches!(e.kind, notify::ErrorKind::MaxFilesWatch) => {
                    return Err(format!(
                        "the kernel refused more watches (fs.inotify.max_user_watches) at {}",
                        path.display()
                    ));
                }
                Err(e) => tracing::debug!(path = %path.display(), error = %e, "not watched"),
            }
        }
        Ok(())
    }

    /// Drop every watch of `root`.
    fn forget(&mut self, root: i64) {
        self.sync(root, &[]).ok();
    }
}

/// A running follower; stopped (the batch in hand finished, leases released) on drop.
pub struct FileFollower {
    shared: Arc<Shared>,
    host: Arc<dyn FollowHost>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for FileFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileFollower")
            .field("me", &self.shared.me)
            .finish()
    }
}

/// A follower's name in the leases: `host:pid:start#n`, `n` counting the followers this
/// process started (two in one process never share a lease).
fn follower_name() -> String {
    static STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!("{host}:{}:{}#{n}", std::process::id(), now_iso())
}

impl FileFollower {
    /// Start following the roots of `scope`, and make this follower the one the
    /// process's searches wait on (`fresh: true`).
    pub(crate) fn start(host: Arc<dyn FollowHost>, scope: FollowScope) -> Result<FileFollower> {
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner::default()),
            wake: Condvar::new(),
            settled: Condvar::new(),
            me: follower_name(),
            halt: Default::default(),
            own: {
                let vault = host.vault();
                vec![vault.store.path().to_path_buf(), vault.store.index_dir()]
            },
        });
        let handler = Arc::downgrade(&shared);
        let watcher = notify::recommended_watcher(move |event| {
            if let Some(shared) = handler.upgrade() {
                shared.on_event(event);
            }
        })
        .map_err(|e| Error::Internal(format!("starting file watching: {e}")))?;
        let watches = Watches {
            watcher,
            dirs: HashMap::new(),
        };
        host.set_follower(Some(&shared));
        let mut worker = Worker {
            roots: Roots {
                host: host.clone(),
                shared: shared.clone(),
                watches: Arc::new(Mutex::new(watches)),
            },
            scope,
            batches: HashMap::new(),
        };
        // The roots are claimed before this returns: a change made from now on is seen.
        if let Err(e) = worker.housekeeping() {
            tracing::warn!(error = %e, "following: housekeeping failed; retrying");
        }
        let thread = std::thread::Builder::new()
            .name("cairn-watch".into())
            .spawn(move || worker.run())
            .map_err(|e| Error::Internal(format!("starting the follower: {e}")))?;
        Ok(FileFollower {
            shared,
            host,
            thread: Some(thread),
        })
    }
}

impl Drop for FileFollower {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared
            .halt
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.host.set_follower(None);
        if let Err(e) = self.host.vault().release_roots(&self.shared.me) {
            tracing::warn!(error = %e, "could not release the followed roots");
        }
    }
}

/// What the worker does next.
enum Job {
    Housekeeping,
    Batch(i64),
}

/// What the worker and the batches share: the process, the follower's state, the kernel
/// watches.
#[derive(Clone)]
struct Roots {
    host: Arc<dyn FollowHost>,
    shared: Arc<Shared>,
    watches: Arc<Mutex<Watches>>,
}

/// The follower's thread: housekeeping (leases, reports) on its own schedule, and each
/// root's batch on a thread of its own, so that a root busy with a large file neither
/// delays another root's batch nor stops the heartbeat of the leases.
struct Worker {
    roots: Roots,
    scope: FollowScope,
    /// The batch running for each root.
    batches: HashMap<i64, JoinHandle<()>>,
}

impl Worker {
    fn run(mut self) {
        let mut next_house = Instant::now() + HOUSEKEEPING;
        loop {
            self.batches.retain(|_, t| !t.is_finished());
            let job = {
                let mut g = self.roots.shared.lock();
                loop {
                    if g.stop {
                        drop(g);
                        for (_, t) in self.batches.drain() {
                            let _ = t.join();
                        }
                        return;
                    }
                    let now = Instant::now();
                    if now >= next_house {
                        break Job::Housekeeping;
                    }
                    let due = g
                        .roots
                        .iter()
                        .filter_map(|(id, r)| r.due().map(|d| (d, *id)))
                        .min();
                    if let Some((at, id)) = due
                        && at <= now
                    {
                        break Job::Batch(id);
                    }
                    let until = due.map_or(next_house, |(at, _)| at.min(next_house));
                    g = self
                        .roots
                        .shared
                        .wake
                        .wait_timeout(g, until - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            };
            match job {
                Job::Housekeeping => {
                    if let Err(e) = self.housekeeping() {
                        tracing::warn!(error = %e, "following: housekeeping failed; retrying");
                    }
                    next_house = Instant::now() + HOUSEKEEPING;
                }
                Job::Batch(id) => {
                    let Some(taken) = self.roots.take_batch(id) else {
                        continue;
                    };
                    let roots = self.roots.clone();
                    let spawned = std::thread::Builder::new()
                        .name("cairn-index".into())
                        .spawn(move || roots.batch(id, taken));
                    match spawned {
                        Ok(t) => {
                            self.batches.insert(id, t);
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "following: could not start a batch; retrying");
                            self.roots.requeue(id, None);
                        }
                    }
                }
            }
        }
    }

    /// Re-read the recorded roots, claim or renew them, look at roots not followed, and
    /// report.
    fn housekeeping(&mut self) -> Result<()> {
        let host = self.roots.host.clone();
        let vault = host.vault();
        let recorded: Vec<FollowedRoot> = vault
            .followed_roots()?
            .into_iter()
            .filter(|r| match self.scope {
                FollowScope::All => true,
                FollowScope::Root(id) => r.id == id,
            })
            .collect();
        let mut gone = Vec::new();
        {
            let mut g = self.roots.shared.lock();
            g.roots.retain(|id, _| {
                let keep = recorded.iter().any(|r| r.id == *id);
                if !keep {
                    gone.push(*id);
                }
                keep
            });
            for r in &recorded {
                g.roots.entry(r.id).or_insert_with(|| Root::new(r.clone()));
            }
        }
        for id in gone {
            self.roots.watches().forget(id);
        }
        // Claim what is free; look again at what is not followed.
        for r in &recorded {
            let mode = self
                .roots
                .shared
                .lock()
                .roots
                .get(&r.id)
                .map(|x| x.mode.clone());
            match mode {
                // A root whose directory is not here (another host's path) is left to
                // a follower where it is.
                Some(Mode::Unclaimed | Mode::Elsewhere) if health(r).is_err() => {}
                Some(Mode::Unclaimed | Mode::Elsewhere) => {
                    if vault.claim_root(r.id, &self.roots.shared.me)? {
                        self.begin(r);
                    } else {
                        self.set_mode(r.id, Mode::Elsewhere);
                    }
                }
                Some(Mode::NotFollowed(_)) if health(r).is_ok() => self.begin(r),
                // Gone without an event on the root itself (a parent renamed or replaced):
                // a batch finds it and stops following it.
                Some(Mode::Watching | Mode::Rescanning(_)) if health(r).is_err() => {
                    self.roots.shared.push(r.id, r.watched_dir(), false);
                }
                _ => {}
            }
        }
        self.roots.report(false)
    }

    /// Start following a root just claimed (or back): watch it and rescan it, or mark
    /// it not followed.
    fn begin(&mut self, spec: &FollowedRoot) {
        let mode = match health(spec) {
            // Watched before anything is read: a change from now on is an event, and
            // the rescan below finds what changed before.
            Ok(()) => match self.roots.watches().sync(spec.id, &wanted_dirs(spec)) {
                Ok(()) => {
                    tracing::info!(root = %spec.path().display(), collection = %spec.collection, "following");
                    Mode::Watching
                }
                Err(reason) => {
                    tracing::warn!(root = %spec.path().display(), %reason, "following by a rescan every {} s", RESCAN_EVERY.as_secs());
                    Mode::Rescanning(reason)
                }
            },
            Err(reason) => {
                tracing::warn!(root = %spec.path().display(), collection = %spec.collection, %reason, "not following this root");
                Mode::NotFollowed(reason)
            }
        };
        let follows = !matches!(mode, Mode::NotFollowed(_));
        if let Some(r) = self.roots.shared.lock().roots.get_mut(&spec.id) {
            r.mode = mode;
            r.reported = None;
        }
        if follows {
            self.roots.shared.push(spec.id, PathBuf::new(), true);
        }
    }

    fn set_mode(&self, id: i64, mode: Mode) {
        if let Some(r) = self.roots.shared.lock().roots.get_mut(&id) {
            r.mode = mode;
        }
    }
}

/// A batch's work, taken from its root ([`Roots::take_batch`]).
struct Taken {
    spec: FollowedRoot,
    only: Option<Vec<PathBuf>>,
    mark: u64,
}

/// Record the files a batch skipped, refused by their format or over the per-file budget, forgetting
/// those of the paths it covered (all of them after a rescan).
fn note_over_budget(r: &mut Root, only: Option<&[PathBuf]>, summary: &ReindexSummary) {
    let dir = r.spec.dir.clone();
    match only {
        None => r.over_budget.clear(),
        Some(paths) => r
            .over_budget
            .retain(|rel, _| !paths.iter().any(|p| dir.join(rel).starts_with(p))),
    }
    for f in summary.skipped.iter().filter(|f| f.refused) {
        r.over_budget.insert(f.path.clone(), f.reason.clone());
    }
}

impl Roots {
    /// Write the reports that changed (all of them, renewing the leases, when a
    /// heartbeat is due or `all`).
    fn report(&self, all: bool) -> Result<()> {
        let host = self.host.clone();
        let vault = host.vault();
        let now = Instant::now();
        let reports: Vec<(i64, Report)> = {
            let g = self.shared.lock();
            g.roots
                .iter()
                .filter(|(_, r)| r.held())
                .filter_map(|(id, r)| {
                    let rep = r.report();
                    let due = all
                        || r.reported.as_ref() != Some(&rep)
                        || r.reported_at
                            .is_none_or(|t| now.duration_since(t) >= HEARTBEAT);
                    due.then_some((*id, rep))
                })
                .collect()
        };
        if !reports.is_empty() {
            let lost = vault.report_roots(&self.shared.me, &reports)?;
            let mut g = self.shared.lock();
            for (id, rep) in reports {
                if let Some(r) = g.roots.get_mut(&id) {
                    r.reported = Some(rep);
                    r.reported_at = Some(now);
                }
            }
            for id in &lost {
                if let Some(r) = g.roots.get_mut(id) {
                    tracing::warn!(root = %r.spec.path().display(), "another follower took this root over");
                    r.mode = Mode::Elsewhere;
                }
            }
            drop(g);
            for id in lost {
                self.watches().forget(id);
            }
        }
        Ok(())
    }

    /// Take root `id`'s pending work for a batch and mark it running: its paths (`None`:
    /// a whole rescan) and the event number it covers. `None` when the root is gone.
    fn take_batch(&self, id: i64) -> Option<Taken> {
        let mut g = self.shared.lock();
        let r = g.roots.get_mut(&id)?;
        let only = if r.full {
            None
        } else {
            Some(
                std::mem::take(&mut r.targets)
                    .into_iter()
                    .collect::<Vec<_>>(),
            )
        };
        r.targets.clear();
        r.full = false;
        r.first = None;
        r.last = None;
        r.not_before = None;
        r.running = true;
        r.overflowed = false;
        Some(Taken {
            spec: r.spec.clone(),
            only,
            mark: r.seen,
        })
    }

    /// Put a batch's work back (`only`: its paths; `None`: a rescan), retried after
    /// [`RETRY_AFTER`].
    fn requeue(&self, id: i64, only: Option<Vec<PathBuf>>) {
        let mut g = self.shared.lock();
        if let Some(r) = g.roots.get_mut(&id) {
            r.running = false;
            match only {
                Some(paths) if !r.full => r.targets.extend(paths),
                _ => r.full = true,
            }
            r.first.get_or_insert_with(Instant::now);
            r.last.get_or_insert_with(Instant::now);
            r.not_before = Some(Instant::now() + RETRY_AFTER);
        }
    }

    fn watches(&self) -> MutexGuard<'_, Watches> {
        self.watches.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run one root's batch (on its own thread), then report, then announce what changed
    /// in the root's state (so that status shows it by the time the log says it).
    fn batch(&self, id: i64, taken: Taken) {
        let notice = self.run_and_record(id, taken);
        if let Err(e) = self.report(false) {
            tracing::warn!(error = %e, "following: reporting failed; retrying");
        }
        if let Some((notice, spec)) = notice {
            notice.log(&spec);
        }
    }

    /// Run one root's batch and record its outcome; what changed in the root's state.
    fn run_and_record(&self, id: i64, taken: Taken) -> Option<(Notice, FollowedRoot)> {
        let Taken { spec, only, mark } = taken;
        let mut notice = None;
        let outcome = self.run_batch(&spec, only.clone());
        let mut g = self.shared.lock();
        if let Some(r) = g.roots.get_mut(&id) {
            r.running = false;
            match outcome {
                Ok(Outcome::Indexed(summary)) => {
                    r.done = r.done.max(mark);
                    r.last_sync = Some(now_iso());
                    note_over_budget(r, only.as_deref(), &summary);
                    if summary.files_changed + summary.files_removed > 0 {
                        tracing::info!(
                            root = %spec.path().display(),
                            collection = %spec.collection,
                            changed = summary.files_changed,
                            removed = summary.files_removed,
                            chunks_embedded = summary.chunks_embedded,
                            seconds = summary.seconds,
                            "followed changes indexed"
                        );
                    }
                    // A whole rescan with every watch in place and no overflow during
                    // it: events are trusted again.
                    if matches!(r.mode, Mode::Rescanning(_)) && only.is_none() && !r.overflowed {
                        notice = Some(Notice::Back);
                        r.mode = Mode::Watching;
                    }
                }
                Ok(Outcome::WatchLimit(reason)) => {
                    r.done = r.done.max(mark);
                    r.last_sync = Some(now_iso());
                    if !matches!(r.mode, Mode::Rescanning(_)) {
                        notice = Some(Notice::Limit(reason.clone()));
                    }
                    r.mode = Mode::Rescanning(reason);
                    r.full = true;
                    r.not_before = Some(Instant::now() + RESCAN_EVERY);
                }
                Ok(Outcome::Gone(reason)) => {
                    if !matches!(r.mode, Mode::NotFollowed(_)) {
                        notice = Some(Notice::Gone(reason.clone()));
                    }
                    r.mode = Mode::NotFollowed(reason);
                    r.done = r.done.max(mark);
                    r.targets.clear();
                    r.full = false;
                }
                Err(e) => {
                    drop(g);
                    if self.halted() {
                        tracing::info!(root = %spec.path().display(), "stopped in the middle of a batch; nothing of its unfinished files was stored, and the next start indexes them");
                    } else {
                        tracing::warn!(root = %spec.path().display(), error = %e, "indexing followed changes failed; retrying in {} s", RETRY_AFTER.as_secs());
                    }
                    self.requeue(id, only);
                    g = self.shared.lock();
                }
            }
        }
        let gone = g
            .roots
            .get(&id)
            .is_some_and(|r| matches!(r.mode, Mode::NotFollowed(_)));
        drop(g);
        if gone {
            self.watches().forget(id);
        }
        self.shared.settled.notify_all();
        notice.map(|n| (n, spec))
    }

    /// Whether this follower or the process is stopping.
    fn halted(&self) -> bool {
        self.shared.halt.load(std::sync::atomic::Ordering::SeqCst)
            || self.host.vault().state.stopping()
    }

    fn run_batch(&self, spec: &FollowedRoot, only: Option<Vec<PathBuf>>) -> Result<Outcome> {
        if let Err(reason) = health(spec) {
            return Ok(Outcome::Gone(reason));
        }
        let wanted = wanted_dirs(spec);
        let limit = self.watches().sync(spec.id, &wanted).err();
        let only = match (spec.kind, only) {
            (RootKind::File, _) => Some(vec![spec.path()]),
            (RootKind::Dir, only) if limit.is_none() => only,
            (RootKind::Dir, _) => None,
        };
        let summary = self.host.vault().reindex(
            &ReindexOptions {
                dir: spec.watched_dir(),
                collection: Some(spec.collection.clone()),
                project: spec.project().map(String::from),
                only,
                follower: true,
                stop: Some(self.shared.halt.clone()),
                files: spec.files.clone(),
                ..Default::default()
            },
            &|_| {},
        );
        match summary {
            Ok(s) => Ok(match limit {
                Some(reason) => Outcome::WatchLimit(reason),
                None => Outcome::Indexed(Box::new(s)),
            }),
            // The root vanished between the check and the walk.
            Err(e @ Error::FailedPrecondition(_)) if health(spec).is_err() => {
                Ok(Outcome::Gone(e.to_string()))
            }
            Err(e) => Err(e),
        }
    }
}

/// A change of a root's state, logged after it is reported.
enum Notice {
    /// Rescanned without an overflow: following events again.
    Back,
    /// The kernel refused a watch.
    Limit(String),
    /// The root is gone or no longer a real directory.
    Gone(String),
}

impl Notice {
    fn log(&self, spec: &FollowedRoot) {
        let root = spec.path();
        match self {
            Notice::Back => {
                tracing::info!(root = %root.display(), "rescanned; following events again")
            }
            Notice::Limit(reason) => tracing::warn!(
                root = %root.display(),
                %reason,
                "falling back to a rescan every {} s",
                RESCAN_EVERY.as_secs()
            ),
            Notice::Gone(reason) => tracing::warn!(
                root = %root.display(),
                collection = %spec.collection,
                %reason,
                "not following this root until it is a real directory again"
            ),
        }
    }
}

enum Outcome {
    Indexed(Box<ReindexSummary>),
    WatchLimit(String),
    Gone(String),
}

/// The longest `fresh: true` waits before searching (measured against the follower in
/// `benches/follow.rs`).
pub const FRESH_WAIT: Duration = Duration::from_secs(3);
/// How often `cairn vault sync` (or a `fresh` search in a process that follows nothing)
/// compares the files with the index while another process indexes them.
const SYNC_POLL: Duration = Duration::from_millis(100);

impl Vault<'_> {
    /// Wait (at most `timeout`) until the changes to the followed roots of `collections`
    /// (every collection when `None`) are indexed. In the process that follows them
    /// (the daemon: `follower`) this waits for the changes its follower has seen;
    /// elsewhere it is [`Vault::sync`].
    pub(crate) fn wait_fresh(
        &self,
        collections: Option<&[String]>,
        timeout: Duration,
        follower: Option<&Shared>,
    ) -> Result<Freshness> {
        if let Some(follower) = follower
            && let Some(f) = follower.wait_fresh(collections, timeout)
        {
            return Ok(f);
        }
        self.sync(collections, timeout)
    }

    /// `cairn vault sync`: wait (at most `timeout`) until the files of the followed roots
    /// of `collections` match the index ([`Vault::pending_changes`]), while a follower
    /// indexes them. Gives up at once on a root nobody follows, and says what is pending.
    pub(crate) fn sync(
        &self,
        collections: Option<&[String]>,
        timeout: Duration,
    ) -> Result<Freshness> {
        let started = Instant::now();
        let roots: Vec<FollowedRoot> = self
            .followed_roots()?
            .into_iter()
            .filter(|r| collections.is_none_or(|c| c.contains(&r.collection)))
            .collect();
        loop {
            let mut pending = Vec::new();
            let mut stuck = Vec::new();
            for root in &roots {
                let shown = root.path().to_string_lossy().into_owned();
                let changes = match self.pending_changes(root) {
                    Ok(changes) => changes,
                    Err(e) => {
                        stuck.push(format!("{shown}: {e}"));
                        continue;
                    }
                };
                if changes.is_empty() {
                    continue;
                }
                if !self.is_followed(root.id)? {
                    stuck.push(format!(
                        "{shown}: {} changes and nobody follows it (start `cairn daemon`, or run `cairn reindex`)",
                        changes.len()
                    ));
                }
                pending.extend(
                    changes
                        .into_iter()
                        .map(|c| format!("{shown}: {} ({})", c.path, c.change)),
                );
            }
            let waited = started.elapsed();
            if pending.is_empty() && stuck.is_empty() {
                return Ok(Freshness {
                    complete: true,
                    waited_ms: waited.as_millis() as u64,
                    ..Default::default()
                });
            }
            if !stuck.is_empty() || waited >= timeout {
                let note = if stuck.is_empty() {
                    format!(
                        "gave up after {} ms with changes still to index",
                        timeout.as_millis()
                    )
                } else {
                    stuck.join("; ")
                };
                return Ok(Freshness {
                    complete: false,
                    waited_ms: waited.as_millis() as u64,
                    pending,
                    note: Some(note),
                });
            }
            std::thread::sleep(SYNC_POLL.min(timeout.saturating_sub(waited)));
        }
    }
}
