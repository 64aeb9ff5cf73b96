//! The process's live view of the vault index: the HNSW graph loaded from
//! `<index_dir>/vault/`, kept caught up with SQLite, compacted and saved.
//!
//! # Catch-up
//!
//! The graph on disk records a watermark, the highest chunk id it holds. Chunk ids are
//! `AUTOINCREMENT` and SQLite serialises writers, so when `max(id)` is visible every
//! lower id is committed too: at the start of each search one `SELECT max(id)` tells
//! whether other processes added chunks, and only those (`id > watermark`) are read
//! and inserted. Deleted or superseded chunks stay in the graph (hnsw_rs cannot delete)
//! and are filtered out at search time: a hit whose chunk row is gone is skipped.
//!
//! # Compaction
//!
//! When dead points exceed [`COMPACT_DEAD_SHARE`] (20%) of the graph, checked after
//! each write through this process (reindex, `vault_update`, `vault_delete`) and at
//! each save, the graph is rebuilt from SQLite's live chunks and saved: searching a
//! graph with many dead points costs over-fetching, and the disk copy grows.
//!
//! # Saving and several processes
//!
//! A new generation is saved after a reindex, after a compaction, and once
//! [`SAVE_AFTER_INSERTS`] chunks were caught up since the last save (so a new process
//! starts from a recent graph). The core's save is crash-safe (new generation, fsync,
//! atomic `CURRENT` switch) but assumes one writer and deletes older generations, which
//! another process may be reading. So `<dir>/LOCK` is taken with an advisory lock
//! (`fs4`, `flock`): shared while loading, exclusive while saving. Under the exclusive
//! lock a process does not overwrite a generation that is at least as fresh as its
//! own (a higher watermark, or the same with no more points), unless rebuilding.
//! Advisory locks vanish with their process, so a killed process never blocks others.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use fs4::fs_std::FileExt;

use crate::error::{Error, Result};
use crate::store::Store;

use super::chunk::CHUNKER_VERSION;
use super::documents::{chunk_count, max_chunk_id, vectors_between};
use crate::embed::hnsw::{IndexManifest, VectorIndex};
use crate::embed::{Embed, IndexError, ModelEmbedder};

/// Rebuild the graph when more than this share of its points are dead.
pub(crate) const COMPACT_DEAD_SHARE: f64 = 0.2;
/// Save a new generation after this many caught-up inserts.
pub(crate) const SAVE_AFTER_INSERTS: usize = 256;
/// Search breadth (`ef`) of the HNSW graph; see `benches/vault.rs` for the sweep.
pub const SEARCH_EF: usize = 100;
/// Rows read per batch when building or catching up.
const READ_BATCH: u64 = 20_000;
const LOCK_FILE: &str = "LOCK";

/// The vault state of one process: the (lazy) embedding model and the (lazy) graph.
#[derive(Debug)]
pub(crate) struct VaultState {
    /// Shared with the learnings' background indexer (their vectors).
    pub(crate) embedder: Arc<dyn Embed>,
    live: Mutex<Option<LoadedGraph>>,
    /// The BM25 index of chunks (the lexical half of the ranking).
    pub(crate) lexical: super::lexical::LexicalState,
    /// Set once the process stops: indexing gives up between two model runs.
    stopping: std::sync::atomic::AtomicBool,
}

#[derive(Debug)]
struct LoadedGraph {
    index: VectorIndex,
    manifest: IndexManifest,
    /// Points inserted since the last save or load.
    unsaved: usize,
}

/// What the running Cairn expects of an index: built by this embedder and chunker.
fn expected_manifest(embedder: &dyn Embed, watermark: u64) -> IndexManifest {
    IndexManifest::new(
        embedder.model_id(),
        embedder.dimension(),
        CHUNKER_VERSION,
        watermark,
    )
}

/// The vault index directory under a database's index directory.
pub(crate) fn vault_dir(index_dir: &Path) -> PathBuf {
    index_dir.join("vault")
}

struct DirLock(File);

impl DirLock {
    fn open(dir: &Path) -> Result<DirLock> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        Ok(DirLock(file))
    }
    fn shared(dir: &Path) -> Result<DirLock> {
        let l = DirLock::open(dir)?;
        FileExt::lock_shared(&l.0).map_err(|e| Error::io(dir.join(LOCK_FILE), e))?;
        Ok(l)
    }
    fn exclusive(dir: &Path) -> Result<DirLock> {
        let l = DirLock::open(dir)?;
        FileExt::lock_exclusive(&l.0).map_err(|e| Error::io(dir.join(LOCK_FILE), e))?;
        Ok(l)
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = FileExt::unlock(&self.0);
    }
}

impl Default for VaultState {
    /// The state every command and server runs: the local model ([`ModelEmbedder`]).
    fn default() -> Self {
        VaultState::with_embedder(Box::new(ModelEmbedder::default()))
    }
}

impl VaultState {
    /// A state with an explicit embedder (tests, benchmarks).
    pub(crate) fn with_embedder(embedder: Box<dyn Embed>) -> VaultState {
        VaultState {
            embedder: Arc::from(embedder),
            live: Mutex::new(None),
            lexical: Default::default(),
            stopping: Default::default(),
        }
    }

    /// The process is stopping (SIGTERM): every file being embedded gives up at its next
    /// model run, storing nothing of itself; a restart indexes it again.
    pub(crate) fn stop_indexing(&self) {
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether [`VaultState::stop_indexing`] was called.
    pub(crate) fn stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn lock(&self) -> MutexGuard<'_, Option<LoadedGraph>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Refuse early when the index on disk was built for another model or chunker.
    pub(crate) fn check_disk_manifest(&self, dir: &Path) -> Result<()> {
        // An unusable directory holds no manifest to disagree with.
        let Ok(_l) = DirLock::shared(dir) else {
            return Ok(());
        };
        if let Some(m) = VectorIndex::read_manifest(dir).map_err(vault_err)? {
            m.check(&expected_manifest(&*self.embedder, 0))
                .map_err(vault_err)?;
        }
        Ok(())
    }

    /// The graph, loaded (or built from SQLite) and caught up with SQLite; saved when
    /// enough was caught up.
    fn ready(&self, store: &Store, dir: &Path) -> Result<MutexGuard<'_, Option<LoadedGraph>>> {
        let mut guard = self.lock();
        if guard.is_none() {
            *guard = Some(load_or_build(&*self.embedder, store, dir)?);
        }
        let live = guard.as_mut().expect("set above");
        catch_up(live, store)?;
        if live.unsaved >= SAVE_AFTER_INSERTS {
            maintain(&*self.embedder, live, store, dir, false)?;
        }
        Ok(guard)
    }

    /// The `k` best live chunks for `query` (a unit vector) as `(chunk id, score)`,
    /// accepting only chunks that `accept` allows given their collection.
    pub(crate) fn search(
        &self,
        store: &Store,
        dir: &Path,
        query: &[f32],
        k: usize,
        accept: impl Fn(&str) -> bool,
    ) -> Result<Vec<(u64, f32)>> {
        let guard = self.ready(store, dir)?;
        let live = guard.as_ref().expect("ready() loads the index");
        // One read transaction for the lookups of every candidate, not one each.
        store.snapshot(|c| {
            let failure = std::cell::RefCell::new(None);
            let hits = live
                .index
                .search(
                    query,
                    k,
                    SEARCH_EF,
                    |id| match super::documents::chunk_collection(c, id) {
                        Ok(Some(collection)) => accept(&collection),
                        Ok(None) => false,
                        Err(e) => {
                            failure.borrow_mut().get_or_insert(e);
                            false
                        }
                    },
                )
                .map_err(vault_err)?;
            match failure.into_inner() {
                Some(e) => Err(e),
                None => Ok(hits),
            }
        })
    }

    /// After writes through this process: catch up, compact when needed, and save when
    /// `save` (a reindex) or enough was inserted; catch up the BM25 index too.
    pub(crate) fn after_write(&self, store: &Store, dir: &Path, save: bool) -> Result<usize> {
        let mut guard = self.ready(store, dir)?;
        let live = guard.as_mut().expect("ready() loads the index");
        maintain(&*self.embedder, live, store, dir, save)?;
        self.lexical.after_write(store, &lexical_dir_of(dir));
        Ok(live.index.len())
    }

    /// Bring the graph (loading or building it first if needed) and the BM25 index up
    /// to date with the database now, as the next search would: a daemon woken by a
    /// write on another host does it in the background, so that search finds nothing
    /// left to catch up.
    pub(crate) fn catch_up(&self, store: &Store, dir: &Path) -> Result<()> {
        drop(self.ready(store, dir)?);
        self.lexical.after_write(store, &lexical_dir_of(dir));
        Ok(())
    }

    /// Build a fresh graph from SQLite, ignoring (and replacing) what is on disk.
    pub(crate) fn rebuild(&self, store: &Store, dir: &Path) -> Result<usize> {
        let mut guard = self.lock();
        let mut live = build(&*self.embedder, store)?;
        save(&mut live, dir, true)?;
        let n = live.index.len();
        *guard = Some(live);
        self.lexical.rebuild(store, &lexical_dir_of(dir))?;
        Ok(n)
    }
}

/// The BM25 index directory beside the vault directory `dir`.
fn lexical_dir_of(dir: &Path) -> PathBuf {
    super::lexical::lexical_dir(dir.parent().unwrap_or(dir))
}

fn vault_err(e: IndexError) -> Error {
    e.into()
}

fn load_or_build(embedder: &dyn Embed, store: &Store, dir: &Path) -> Result<LoadedGraph> {
    let loaded = match DirLock::shared(dir) {
        Ok(_l) => {
            // No save runs while this shared lock is held, so whatever generation
            // `CURRENT` does not name is a leftover of a failed or killed save.
            match VectorIndex::collect_leftovers(dir) {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(removed = n, "removed leftovers of interrupted index saves")
                }
                Err(e) => tracing::warn!(error = %e, "could not remove leftovers of index saves"),
            }
            VectorIndex::load(dir).map_err(vault_err)?
        }
        // A directory that cannot be created or locked (full, read-only): the graph is
        // built from SQLite and served from memory.
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "vault index directory unusable; building the graph in memory");
            None
        }
    };
    if let Some((index, manifest)) = loaded {
        manifest
            .check(&expected_manifest(embedder, 0))
            .map_err(vault_err)?;
        tracing::debug!(
            points = index.len(),
            watermark = manifest.watermark,
            "vault index loaded"
        );
        return Ok(LoadedGraph {
            index,
            manifest,
            unsaved: 0,
        });
    }
    let mut live = build(embedder, store)?;
    save_or_warn(&mut live, dir, false);
    Ok(live)
}

/// A graph of every chunk in SQLite.
fn build(embedder: &dyn Embed, store: &Store) -> Result<LoadedGraph> {
    let (count, top) = store.read(|c| Ok((chunk_count(c)?, max_chunk_id(c)?)))?;
    let mut live = LoadedGraph {
        index: VectorIndex::new(embedder.dimension(), count),
        manifest: expected_manifest(embedder, 0),
        unsaved: 0,
    };
    insert_upto(&mut live, store, top)?;
    tracing::info!(points = live.index.len(), "vault index built from SQLite");
    Ok(live)
}

fn catch_up(live: &mut LoadedGraph, store: &Store) -> Result<()> {
    let top = store.read(max_chunk_id)?;
    if top > live.manifest.watermark {
        insert_upto(live, store, top)?;
    }
    Ok(())
}

/// Insert the chunks with `watermark < id <= top` and raise the watermark to `top`.
fn insert_upto(live: &mut LoadedGraph, store: &Store, top: u64) -> Result<()> {
    let mut from = live.manifest.watermark;
    while from < top {
        let upto = top.min(from.saturating_add(READ_BATCH));
        let rows = store.read(|c| vectors_between(c, from, upto))?;
        let items: Vec<(u64, &[f32])> = rows.iter().map(|(id, v)| (*id, v.as_slice())).collect();
        live.index.insert_batch(&items).map_err(vault_err)?;
        live.unsaved += items.len();
        from = upto;
    }
    live.manifest.watermark = top;
    Ok(())
}

/// Compact when dead points exceed the threshold; save when asked or when enough
/// inserts are unsaved.
fn maintain(
    embedder: &dyn Embed,
    live: &mut LoadedGraph,
    store: &Store,
    dir: &Path,
    save_now: bool,
) -> Result<()> {
    let points = live.index.len();
    let alive = store.read(chunk_count)?;
    let dead = points.saturating_sub(alive);
    if points > 0 && dead as f64 > COMPACT_DEAD_SHARE * points as f64 {
        tracing::info!(points, dead, "compacting the vault index");
        let mut fresh = build(embedder, store)?;
        save_or_warn(&mut fresh, dir, true);
        *live = fresh;
        return Ok(());
    }
    if save_now || live.unsaved >= SAVE_AFTER_INSERTS {
        save_or_warn(live, dir, false);
    }
    Ok(())
}

/// [`save`] where a failure must not fail the caller: the writes are committed to
/// SQLite and a search answers from the graph in memory. The failure (a full or
/// read-only index directory) is logged; the graph stays unsaved, so a later write or
/// search saves it once it can.
fn save_or_warn(live: &mut LoadedGraph, dir: &Path, force: bool) {
    if let Err(e) = save(live, dir, force) {
        tracing::warn!(
            dir = %dir.display(),
            error = %e,
            "could not save the vault index; serving it from memory until a save succeeds"
        );
    }
}

/// Save a new generation under the exclusive lock, unless (without `force`) the disk
/// already holds one at least as fresh.
fn save(live: &mut LoadedGraph, dir: &Path, force: bool) -> Result<()> {
    let _l = DirLock::exclusive(dir)?;
    if !force
        && let Ok(Some(disk)) = VectorIndex::read_manifest(dir)
        && disk.check(&live.manifest).is_ok()
        && (disk.watermark > live.manifest.watermark
            || (disk.watermark == live.manifest.watermark && disk.points <= live.index.len()))
    {
        live.unsaved = 0;
        return Ok(());
    }
    live.manifest = live.index.save(dir, &live.manifest).map_err(vault_err)?;
    live.unsaved = 0;
    tracing::debug!(
        generation = live.manifest.generation,
        points = live.manifest.points,
        "vault index saved"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::DIMENSION;
    use crate::embed::HashEmbedder;
    use crate::vault::chunk::chunk_markdown;
    use crate::vault::documents::{delete_document, write_test_document};

    /// A deterministic unit vector per seed.
    fn unit(seed: u64) -> Vec<f32> {
        crate::base::rng::SplitMix64::new(seed).unit_vector(DIMENSION)
    }

    /// Write `path` with `n` one-line sections; chunk `i` gets vector `unit(seed + i)`.
    /// Returns the chunk ids in order.
    fn add_doc(store: &Store, path: &str, n: usize, seed: u64) -> Vec<u64> {
        let md: String = (0..n)
            .map(|i| format!("## S{i}\n\n{path} part {i}\n\n"))
            .collect();
        let doc = chunk_markdown(md.as_bytes());
        assert_eq!(doc.chunks.len(), n);
        let chunks: Vec<_> = doc
            .chunks
            .into_iter()
            .enumerate()
            .map(|(i, c)| (c, unit(seed + i as u64)))
            .collect();
        write_test_document(store, path, &chunks);
        store
            .read(|c| {
                let mut st = c.prepare(
                    "SELECT c.id FROM vault_chunks c JOIN vault_documents d ON d.id = c.document_id
                     WHERE d.path = ?1 ORDER BY c.ordinal",
                )?;
                let ids = st
                    .query_map([path], |r| r.get::<_, i64>(0))?
                    .map(|r| r.map(|i| i as u64))
                    .collect::<crate::error::Result<_>>()?;
                Ok(ids)
            })
            .unwrap()
    }

    fn top(state: &VaultState, store: &Store, dir: &Path, q: &[f32]) -> (u64, f32) {
        state.search(store, dir, q, 1, |_| true).unwrap()[0]
    }

    #[test]
    fn a_process_catches_up_with_chunks_another_process_added() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("c.db");
        let dir = vault_dir(&crate::store::index_dir_for(&db));
        let (store_a, state_a) = (Store::open(&db).unwrap(), VaultState::default());
        let a = add_doc(&store_a, "a.md", 5, 100);
        let (id, score) = top(&state_a, &store_a, &dir, &unit(102));
        assert_eq!(id, a[2]);
        assert!(score > 0.999);

        // Another process writes and saves a generation.
        let (store_b, state_b) = (Store::open(&db).unwrap(), VaultState::default());
        let b = add_doc(&store_b, "b.md", 5, 200);
        assert_eq!(state_b.after_write(&store_b, &dir, true).unwrap(), 10);

        // The first process finds b's chunks: caught up by watermark, no reload.
        assert_eq!(top(&state_a, &store_a, &dir, &unit(203)).0, b[3]);
        {
            let live = state_a.lock();
            let live = live.as_ref().unwrap();
            assert_eq!(live.manifest.watermark, b[4]);
            assert_eq!(live.index.len(), 10);
        }

        // A new process loads the saved generation rather than rebuilding.
        let disk = VectorIndex::read_manifest(&dir).unwrap().unwrap();
        assert_eq!((disk.watermark, disk.points), (b[4], 10));
        let state_c = VaultState::default();
        assert_eq!(top(&state_c, &store_a, &dir, &unit(100)).0, a[0]);
    }

    #[test]
    fn deleted_chunks_are_filtered_and_compaction_rebuilds_past_a_fifth_dead() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("c.db");
        let dir = vault_dir(&crate::store::index_dir_for(&db));
        let (store, state) = (Store::open(&db).unwrap(), VaultState::default());
        let docs: Vec<Vec<u64>> = (0..10)
            .map(|i| add_doc(&store, &format!("d{i}.md"), 5, 1000 * (i + 1)))
            .collect();
        assert_eq!(state.after_write(&store, &dir, true).unwrap(), 50);

        let delete = |path: &str| {
            store
                .write(|tx| delete_document(tx, "dir:/t", path))
                .unwrap()
                .unwrap()
        };
        assert_eq!(delete("d0.md") + delete("d1.md"), 10);
        // 10 dead of 50 is exactly 20%: not past the threshold, the graph stays.
        assert_eq!(state.after_write(&store, &dir, false).unwrap(), 50);
        let (id, _) = top(&state, &store, &dir, &unit(1000));
        assert!(
            !docs[0].contains(&id) && !docs[1].contains(&id),
            "deleted chunk returned"
        );

        delete("d2.md");
        // 15 dead of 50: compacted to the 35 live chunks, and saved.
        assert_eq!(state.after_write(&store, &dir, false).unwrap(), 35);
        assert_eq!(
            VectorIndex::read_manifest(&dir).unwrap().unwrap().points,
            35
        );
        assert_eq!(top(&state, &store, &dir, &unit(4002)).0, docs[3][2]);
    }

    #[test]
    fn concurrent_saves_from_several_processes_leave_a_loadable_current_generation() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("c.db");
        let dir = vault_dir(&crate::store::index_dir_for(&db));
        Store::open(&db).unwrap();
        let handles: Vec<_> = (0..3u64)
            .map(|t| {
                let (db, dir) = (db.clone(), dir.clone());
                std::thread::spawn(move || {
                    let (store, state) = (Store::open(&db).unwrap(), VaultState::default());
                    for i in 0..4 {
                        add_doc(&store, &format!("t{t}-{i}.md"), 3, 10_000 * t + 10 * i);
                        state.after_write(&store, &dir, true).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let (index, manifest) = VectorIndex::load(&dir).unwrap().unwrap();
        assert!(index.len() <= 36);
        let store = Store::open(&db).unwrap();
        let state = VaultState::default();
        assert!(top(&state, &store, &dir, &unit(20_031)).1 > 0.999);
        assert_eq!(state.after_write(&store, &dir, false).unwrap(), 36);
        assert!(manifest.watermark <= 36);
    }

    #[test]
    fn a_graph_built_by_one_embedder_is_never_served_by_another() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("c.db");
        let dir = vault_dir(&crate::store::index_dir_for(&db));
        let store = Store::open(&db).unwrap();
        add_doc(&store, "a.md", 3, 7);
        let hashed = VaultState::with_embedder(Box::new(HashEmbedder::new()));
        assert_eq!(hashed.after_write(&store, &dir, true).unwrap(), 3);
        let disk = VectorIndex::read_manifest(&dir).unwrap().unwrap();
        assert_eq!(disk.model_id, crate::embed::HASH_MODEL_ID);

        // The model's process refuses the graph (and says how to rebuild) ...
        let model = VaultState::default();
        let err = model
            .search(&store, &dir, &unit(7), 1, |_| true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("model_id"), "{err}");
        assert!(err.contains("cairn reindex --rebuild"), "{err}");
        assert!(model.check_disk_manifest(&dir).is_err());
        // ... until a rebuild replaces it with a graph of its own.
        assert_eq!(model.rebuild(&store, &dir).unwrap(), 3);
        let disk = VectorIndex::read_manifest(&dir).unwrap().unwrap();
        assert_eq!(disk.model_id, crate::embed::MODEL_ID);
        assert!(hashed.check_disk_manifest(&dir).is_err());
    }
}
