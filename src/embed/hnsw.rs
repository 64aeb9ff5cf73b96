//! The vector index: owns approximate nearest-neighbour search over unit vectors keyed
//! by id (an `hnsw_rs` graph), its crash-safe persistence, and the [`IndexManifest`]
//! that says which model and chunker produced it. Shared by the vault (its chunks, saved
//! under the index directory) and the learnings (the in-memory graph of a large
//! project, `learnings/graph.rs`); it names neither.
//!
//! The index is *derived data*: the vectors and their provenance live in the
//! database; an index can always be rebuilt from them (`cairn reindex --rebuild`).
//!
//! # Similarity
//!
//! Vectors are L2-normalised (on insert and on query, defensively), so cosine
//! similarity is a dot product. The graph uses [`DistUnitCosine`]
//! (`max(0, 1 − a·b)`); scores returned are `1 − distance`, the cosine. (The
//! stock `DistDot` asserts `1 − a·b ≥ 0`, which float rounding breaks for
//! identical unit vectors; `DistCosine` recomputes norms in f64.)
//!
//! # Parameters
//!
//! [`MAX_NB_CONNECTION`] = 24 neighbours per node and layer,
//! [`EF_CONSTRUCTION`] = 200, search `ef` defaults to [`DEFAULT_EF_SEARCH`] =
//! 100. Measured recall@10 against exact search: 0.986–0.989 on 2,000 random
//! 384-dimensional unit vectors, 0.998 on 900 real chunk embeddings (100
//! held-out chunks as queries). Random high-dimensional vectors are the worst
//! case for HNSW: 2,000 take ~1.3 s to insert on 2 idle cores and the cost
//! grows faster than linearly (8,000 took ~60 s on a heavily shared machine),
//! while 900 real embeddings insert in 0.4 s. Embedding (≈0.1 CPU-s per
//! chunk) dominates indexing time either way. Saving 2,000 points takes
//! ~40 ms; loading ~100 ms, 20,000 points ~0.85 s (linear in points: the
//! loader re-links the graph from the dump, far cheaper than re-inserting).
//!
//! # Ids and deletions
//!
//! Points are keyed by `u64` ids (the vault's chunk ids, the learnings' `seq`). hnsw_rs cannot delete:
//! callers pass a filter to [`VectorIndex::search`] that rejects deleted or
//! superseded ids, and the search over-fetches (growing geometrically, ending
//! in an exact scan) until it has `k` accepted hits or has seen every point.
//! Rebuild when the share of dead points grows large.
//!
//! # Persistence
//!
//! ```text
//! <dir>/CURRENT               "gen-000000000007\n": the live generation
//! <dir>/gen-000000000007/
//!     index.hnsw.graph        hnsw_rs dump (graph)
//!     index.hnsw.data         hnsw_rs dump (vectors and ids)
//!     manifest.json           IndexManifest + file sizes
//! ```
//!
//! [`VectorIndex::save`] dumps into a *fresh* generation directory, fsyncs its
//! files and the directory, then switches `CURRENT` atomically (write
//! `CURRENT.tmp`, fsync, rename, fsync the parent), and only then deletes
//! older generations. A crash at any point leaves `CURRENT` naming a complete
//! generation (or no `CURRENT` at all before the first save). A single writer
//! is assumed: callers serialise saves.
//!
//! [`VectorIndex::load`] reads `CURRENT`, checks the generation's files exist
//! with the recorded sizes *before* handing them to hnsw_rs (whose loader
//! prints to stdout and panics on some bad input — stdout is the MCP channel),
//! and catches any panic from it as [`IndexError::IndexCorrupt`].
//!
//! hnsw_rs ties a loaded graph's lifetime to its `HnswIo` loader (to allow
//! mmap). Cairn does not mmap, so the loaded graph owns its vectors; the
//! loader (a few hundred bytes: a path and options) is leaked to obtain a
//! `'static` graph soundly, once per load.

use std::fs::{self, File};
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use hnsw_rs::prelude::{AnnT, Distance, Hnsw, HnswIo};
use serde::{Deserialize, Serialize};

use super::error::IndexError;
use super::{dot, l2_normalize};

/// Result alias of the vector index.
pub type Result<T, E = IndexError> = std::result::Result<T, E>;

/// Neighbours kept per node and layer (hnsw_rs `max_nb_connection`).
pub(crate) const MAX_NB_CONNECTION: usize = 24;
/// Candidate list size while building (hnsw_rs `ef_construction`).
pub(crate) const EF_CONSTRUCTION: usize = 200;
/// Default candidate list size while searching.
pub(crate) const DEFAULT_EF_SEARCH: usize = 100;
/// hnsw_rs only dumps graphs created with its maximum of 16 layers.
const MAX_LAYER: usize = 16;
/// Below this many points an insert batch goes serially.
const PARALLEL_INSERT_MIN: usize = 64;

const BASENAME: &str = "index";
const CURRENT: &str = "CURRENT";
const CURRENT_TMP: &str = "CURRENT.tmp";
const GEN_PREFIX: &str = "gen-";
const MANIFEST_FILE: &str = "manifest.json";

// Chunk ids (u64) are stored as hnsw_rs `DataId` (usize).
const _: () = assert!(usize::BITS >= 64, "chunk ids need a 64-bit usize");

/// Cosine distance for unit vectors: `max(0, 1 − a·b)`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct DistUnitCosine;

impl Distance<f32> for DistUnitCosine {
    fn eval(&self, va: &[f32], vb: &[f32]) -> f32 {
        (1.0 - dot(va, vb)).max(0.0)
    }
}

fn normalized(v: &[f32]) -> Vec<f32> {
    let mut out = v.to_vec();
    l2_normalize(&mut out);
    out
}

/// What an index was built with; stored in each generation's
/// `manifest.json`. Indexes whose `model_id`, `dimension` or
/// `chunker_version` differ from the running Cairn's must be rebuilt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexManifest {
    /// The embedding model ([`crate::embed::MODEL_ID`]).
    pub(crate) model_id: String,
    /// Vector length.
    pub(crate) dimension: usize,
    /// `CHUNKER_VERSION` (the vault's chunker) of the chunks indexed.
    pub(crate) chunker_version: u32,
    /// Highest chunk id included: chunks above it still need inserting.
    pub watermark: u64,
    /// Generation number, set by [`VectorIndex::save`].
    pub(crate) generation: u64,
    /// Points in the graph (including ids since deleted), set by [`VectorIndex::save`].
    pub points: usize,
}

impl IndexManifest {
    /// A manifest for a new index (generation and points are filled by `save`).
    pub fn new(
        model_id: impl Into<String>,
        dimension: usize,
        chunker_version: u32,
        watermark: u64,
    ) -> Self {
        IndexManifest {
            model_id: model_id.into(),
            dimension,
            chunker_version,
            watermark,
            generation: 0,
            points: 0,
        }
    }

    /// Checks that an index with this manifest can serve a Cairn expecting
    /// `expected`: same model, dimension and chunker version. The error says
    /// how to rebuild.
    pub(crate) fn check(&self, expected: &IndexManifest) -> Result<()> {
        let mismatch = |field, expected: String, found: String| IndexError::ManifestMismatch {
            field,
            expected,
            found,
        };
        if self.model_id != expected.model_id {
            return Err(mismatch(
                "model_id",
                expected.model_id.clone(),
                self.model_id.clone(),
            ));
        }
        if self.dimension != expected.dimension {
            return Err(mismatch(
                "dimension",
                expected.dimension.to_string(),
                self.dimension.to_string(),
            ));
        }
        if self.chunker_version != expected.chunker_version {
            return Err(mismatch(
                "chunker_version",
                expected.chunker_version.to_string(),
                self.chunker_version.to_string(),
            ));
        }
        Ok(())
    }
}

/// The content of a generation's `manifest.json`.
#[derive(Debug, Serialize, Deserialize)]
struct GenerationFile {
    #[serde(flatten)]
    manifest: IndexManifest,
    /// hnsw_rs dump basename; `None` for an empty index (nothing dumped).
    basename: Option<String>,
    /// Dump files and their sizes in bytes.
    files: Vec<(String, u64)>,
}

/// An HNSW graph of unit vectors keyed by chunk id.
pub struct VectorIndex {
    dim: usize,
    hnsw: Hnsw<'static, f32, DistUnitCosine>,
}

impl std::fmt::Debug for VectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorIndex")
            .field("dim", &self.dim)
            .field("len", &self.len())
            .finish()
    }
}

impl VectorIndex {
    /// An empty index for `dim`-dimensional vectors, sized for about
    /// `capacity` points (a hint; it grows beyond).
    pub fn new(dim: usize, capacity: usize) -> Self {
        VectorIndex {
            dim,
            hnsw: Hnsw::new(
                MAX_NB_CONNECTION,
                capacity.max(1),
                MAX_LAYER,
                EF_CONSTRUCTION,
                DistUnitCosine,
            ),
        }
    }

    /// Vector length.
    #[cfg(test)]
    pub(crate) fn dimension(&self) -> usize {
        self.dim
    }

    /// Points in the graph (deleted ids included until a rebuild).
    pub(crate) fn len(&self) -> usize {
        self.hnsw.get_nb_point()
    }

    /// Whether the graph has no points.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn check_dim(&self, id: u64, v: &[f32]) -> Result<()> {
        if v.len() == self.dim {
            Ok(())
        } else {
            Err(IndexError::DimensionMismatch {
                id,
                expected: self.dim,
                found: v.len(),
            })
        }
    }

    /// Inserts `(chunk id, vector)` pairs, in parallel (global rayon pool)
    /// for large batches. Vectors are normalised. Nothing is inserted if any
    /// vector has the wrong dimension. Ids should be fresh: inserting an id
    /// twice stores two points (search reports each id once).
    pub fn insert_batch(&self, items: &[(u64, &[f32])]) -> Result<()> {
        for (id, v) in items {
            self.check_dim(*id, v)?;
        }
        let owned: Vec<(Vec<f32>, usize)> = items
            .iter()
            .map(|(id, v)| (normalized(v), *id as usize))
            .collect();
        let refs: Vec<(&[f32], usize)> = owned.iter().map(|(v, id)| (v.as_slice(), *id)).collect();
        if refs.len() >= PARALLEL_INSERT_MIN {
            self.hnsw.parallel_insert_slice(&refs);
        } else {
            for r in refs {
                self.hnsw.insert_slice(r);
            }
        }
        Ok(())
    }

    /// The `k` most similar accepted points to `query`, best first, as
    /// `(chunk id, cosine similarity)`. `ef` is the search breadth
    /// ([`DEFAULT_EF_SEARCH`] is a good start; it is raised to at least the
    /// number fetched). `accept` rejects ids (deleted chunks, other scopes);
    /// rejected ids are never returned, and the search fetches more until it
    /// has `k` accepted hits or has examined every point.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        ef: usize,
        accept: impl Fn(u64) -> bool,
    ) -> Result<Vec<(u64, f32)>> {
        self.check_dim(0, query)?;
        let n = self.len();
        if k == 0 || n == 0 {
            return Ok(Vec::new());
        }
        let q = normalized(query);
        let mut fetch = k;
        loop {
            let wanted = fetch.min(n);
            let found = self.hnsw.search(&q, wanted, ef.max(wanted));
            let mut out: Vec<(u64, f32)> = Vec::with_capacity(k);
            for nb in found {
                let id = nb.d_id as u64;
                if accept(id) && !out.iter().any(|(seen, _)| *seen == id) {
                    out.push((id, 1.0 - nb.distance));
                    if out.len() == k {
                        return Ok(out);
                    }
                }
            }
            if fetch >= n {
                // Graph search could not produce k accepted hits: be exact.
                return Ok(self.exact_search(&q, k, accept));
            }
            fetch = fetch.saturating_mul(4);
        }
    }

    /// Exact search over every stored point (linear scan), same contract as
    /// [`VectorIndex::search`].
    pub(crate) fn exact_search(
        &self,
        query: &[f32],
        k: usize,
        accept: impl Fn(u64) -> bool,
    ) -> Vec<(u64, f32)> {
        let q = normalized(query);
        let mut scored: Vec<(u64, f32)> = Vec::new();
        for point in self.hnsw.get_point_indexation() {
            let id = point.get_origin_id() as u64;
            if accept(id) {
                scored.push((id, dot(&q, point.get_v())));
            }
        }
        top_k(scored, k)
    }

    /// Writes the index as a new generation under `dir` (created if needed)
    /// and makes it current, crash-safely (see the module docs). Returns the
    /// manifest as stored, with `generation`, `points` and `dimension` set.
    pub fn save(&self, dir: &Path, manifest: &IndexManifest) -> Result<IndexManifest> {
        fs::create_dir_all(dir).map_err(|e| IndexError::io("create", dir, e))?;
        let generation = existing_generations(dir)?
            .into_iter()
            .map(|(g, _)| g)
            .chain(current_generation(dir)?.map(|(g, _)| g))
            .max()
            .unwrap_or(0)
            + 1;
        let gen_name = generation_name(generation);
        let gen_dir = dir.join(&gen_name);
        if gen_dir.exists() {
            fs::remove_dir_all(&gen_dir).map_err(|e| IndexError::io("remove", &gen_dir, e))?;
        }
        fs::create_dir(&gen_dir).map_err(|e| IndexError::io("create", &gen_dir, e))?;

        let mut stored = manifest.clone();
        stored.generation = generation;
        stored.points = self.len();
        stored.dimension = self.dim;

        let mut files = Vec::new();
        let basename = if self.is_empty() {
            None
        } else {
            let dumped = catch_unwind(AssertUnwindSafe(|| self.hnsw.file_dump(&gen_dir, BASENAME)));
            let basename = match dumped {
                Ok(Ok(name)) => name,
                Ok(Err(e)) => {
                    return Err(IndexError::IndexWrite {
                        path: gen_dir,
                        message: e.to_string(),
                    });
                }
                Err(_) => {
                    return Err(IndexError::IndexWrite {
                        path: gen_dir,
                        message: "hnsw_rs panicked while dumping".to_string(),
                    });
                }
            };
            for suffix in [".hnsw.graph", ".hnsw.data"] {
                let name = format!("{basename}{suffix}");
                let path = gen_dir.join(&name);
                let file = File::open(&path).map_err(|e| IndexError::io("open", &path, e))?;
                file.sync_all()
                    .map_err(|e| IndexError::io("fsync", &path, e))?;
                let size = file
                    .metadata()
                    .map_err(|e| IndexError::io("stat", &path, e))?
                    .len();
                files.push((name, size));
            }
            Some(basename)
        };

        let gen_file = GenerationFile {
            manifest: stored.clone(),
            basename,
            files,
        };
        let json = serde_json::to_vec_pretty(&gen_file).map_err(|source| IndexError::Json {
            path: gen_dir.join(MANIFEST_FILE),
            source,
        })?;
        write_synced(&gen_dir.join(MANIFEST_FILE), &json)?;
        sync_dir(&gen_dir)?;

        // The switch: CURRENT names the new generation, atomically.
        let tmp = dir.join(CURRENT_TMP);
        write_synced(&tmp, format!("{gen_name}\n").as_bytes())?;
        let current = dir.join(CURRENT);
        fs::rename(&tmp, &current).map_err(|e| IndexError::io("rename", &current, e))?;
        sync_dir(dir)?;

        // Old generations (and leftovers of crashed saves) go last.
        if let Err(e) = Self::collect_leftovers(dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "could not remove old index generations");
        }
        Ok(stored)
    }

    /// Remove every generation directory that `CURRENT` does not name (older ones, and
    /// partial ones of failed or killed saves) and a stale `CURRENT.tmp`. Call only
    /// while no save can run (holding the directory lock). Returns how many entries
    /// were removed.
    pub(crate) fn collect_leftovers(dir: &Path) -> Result<usize> {
        if !dir.exists() {
            return Ok(0);
        }
        // An unreadable CURRENT is left for `cairn reindex --rebuild` to judge.
        let Ok(current) = current_generation(dir) else {
            return Ok(0);
        };
        let current = current.map(|(g, _)| g);
        let mut removed = 0;
        for (g, path) in existing_generations(dir)? {
            if Some(g) != current {
                fs::remove_dir_all(&path).map_err(|e| IndexError::io("remove", &path, e))?;
                removed += 1;
            }
        }
        let tmp = dir.join(CURRENT_TMP);
        if tmp.exists() {
            fs::remove_file(&tmp).map_err(|e| IndexError::io("remove", &tmp, e))?;
            removed += 1;
        }
        Ok(removed)
    }

    /// The manifest of the current generation under `dir`, without loading
    /// the graph; `None` when no index was ever saved there.
    pub(crate) fn read_manifest(dir: &Path) -> Result<Option<IndexManifest>> {
        Ok(read_current(dir)?.map(|(_, file)| file.manifest))
    }

    /// Loads the current generation under `dir`; `None` when no index was
    /// ever saved there. Damaged files give [`IndexError::IndexCorrupt`]
    /// (never a panic). Callers should [`IndexManifest::check`] the manifest.
    pub fn load(dir: &Path) -> Result<Option<(VectorIndex, IndexManifest)>> {
        let Some((gen_dir, file)) = read_current(dir)? else {
            return Ok(None);
        };
        let corrupt = |message: String| IndexError::IndexCorrupt {
            path: gen_dir.clone(),
            message,
        };
        let manifest = file.manifest;
        let Some(basename) = file.basename else {
            if manifest.points != 0 {
                return Err(corrupt(format!(
                    "manifest lists {} points but no dump files",
                    manifest.points
                )));
            }
            return Ok(Some((VectorIndex::new(manifest.dimension, 0), manifest)));
        };
        if file.files.len() != 2 {
            return Err(corrupt("manifest does not list the two dump files".into()));
        }
        for (name, size) in &file.files {
            let path = gen_dir.join(name);
            match fs::metadata(&path) {
                Ok(m) if m.len() == *size => {}
                Ok(m) => {
                    return Err(corrupt(format!(
                        "{name} has {} bytes, manifest says {size}",
                        m.len()
                    )));
                }
                Err(e) => return Err(corrupt(format!("{name}: {e}"))),
            }
        }
        // See the module docs: the loader is leaked so the graph is 'static.
        // `load_hnsw_with_dist` checks the dumped distance's full type name.
        let loader: &'static HnswIo = Box::leak(Box::new(HnswIo::new(&gen_dir, &basename)));
        let loaded = catch_unwind(AssertUnwindSafe(move || {
            loader.load_hnsw_with_dist::<f32, DistUnitCosine>(DistUnitCosine)
        }));
        let hnsw = match loaded {
            Ok(Ok(h)) => h,
            Ok(Err(e)) => return Err(corrupt(format!("hnsw_rs could not load it: {e}"))),
            Err(_) => return Err(corrupt("hnsw_rs panicked while loading it".into())),
        };
        if hnsw.get_nb_point() != manifest.points {
            return Err(corrupt(format!(
                "{} points loaded, manifest says {}",
                hnsw.get_nb_point(),
                manifest.points
            )));
        }
        let dim = hnsw.get_point_indexation().get_data_dimension();
        if dim != manifest.dimension {
            return Err(corrupt(format!(
                "vectors have dimension {dim}, manifest says {}",
                manifest.dimension
            )));
        }
        Ok(Some((VectorIndex { dim, hnsw }, manifest)))
    }
}

/// Exact `k` nearest of `vectors` to `query` by cosine similarity, best
/// first: the baseline for recall measurements and benchmarks.
pub fn brute_force_search(vectors: &[(u64, &[f32])], query: &[f32], k: usize) -> Vec<(u64, f32)> {
    let q = normalized(query);
    let scored = vectors
        .iter()
        .map(|(id, v)| {
            let norm = dot(v, v).sqrt();
            let s = if norm > 0.0 { dot(&q, v) / norm } else { 0.0 };
            (*id, s)
        })
        .collect();
    top_k(scored, k)
}

fn top_k(mut scored: Vec<(u64, f32)>, k: usize) -> Vec<(u64, f32)> {
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.dedup_by_key(|(id, _)| *id);
    scored.truncate(k);
    scored
}

fn generation_name(generation: u64) -> String {
    format!("{GEN_PREFIX}{generation:012}")
}

/// Generation directories present under `dir`, whatever `CURRENT` says.
fn existing_generations(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(IndexError::io("list", dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| IndexError::io("list", dir, e))?;
        let name = entry.file_name();
        if let Some(g) = name
            .to_str()
            .and_then(|n| n.strip_prefix(GEN_PREFIX))
            .and_then(|n| n.parse::<u64>().ok())
        {
            out.push((g, entry.path()));
        }
    }
    Ok(out)
}

/// The generation `CURRENT` names, if any.
fn current_generation(dir: &Path) -> Result<Option<(u64, PathBuf)>> {
    let path = dir.join(CURRENT);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(IndexError::io("read", &path, e)),
    };
    let name = text.trim();
    let generation = name
        .strip_prefix(GEN_PREFIX)
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| IndexError::IndexCorrupt {
            path: path.clone(),
            message: format!("CURRENT holds {name:?}, not a generation name"),
        })?;
    Ok(Some((generation, dir.join(name))))
}

/// The current generation's directory and manifest file.
fn read_current(dir: &Path) -> Result<Option<(PathBuf, GenerationFile)>> {
    let Some((_, gen_dir)) = current_generation(dir)? else {
        return Ok(None);
    };
    let path = gen_dir.join(MANIFEST_FILE);
    let bytes = fs::read(&path).map_err(|e| IndexError::IndexCorrupt {
        path: path.clone(),
        message: format!("current generation has no readable manifest: {e}"),
    })?;
    let file: GenerationFile =
        serde_json::from_slice(&bytes).map_err(|e| IndexError::IndexCorrupt {
            path: path.clone(),
            message: format!("manifest is not valid: {e}"),
        })?;
    Ok(Some((gen_dir, file)))
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = File::create(path).map_err(|e| IndexError::io("create", path, e))?;
    f.write_all(bytes)
        .map_err(|e| IndexError::io("write", path, e))?;
    f.sync_all().map_err(|e| IndexError::io("fsync", path, e))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| IndexError::io("fsync", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::rng::SplitMix64;
    use std::time::Instant;

    const DIM: usize = 384;

    fn dataset(n: usize, seed: u64) -> Vec<(u64, Vec<f32>)> {
        let mut rng = SplitMix64::new(seed);
        // Ids far from 0..n to show they are ours, not positions.
        (0..n as u64)
            .map(|i| (1_000 + i * 3, rng.unit_vector(DIM)))
            .collect()
    }

    fn build(data: &[(u64, Vec<f32>)]) -> VectorIndex {
        let index = VectorIndex::new(DIM, data.len());
        let items: Vec<(u64, &[f32])> = data.iter().map(|(id, v)| (*id, v.as_slice())).collect();
        index.insert_batch(&items).expect("insert");
        index
    }

    fn manifest() -> IndexManifest {
        IndexManifest::new("test-model", DIM, 1, 7_000)
    }

    #[test]
    fn index_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<VectorIndex>();
    }

    #[test]
    #[allow(clippy::print_stderr)] // reports the measured figures
    fn recall_at_10_vs_brute_force() {
        let data = dataset(2_000, 42);
        let started = Instant::now();
        let index = build(&data);
        let build_ms = started.elapsed().as_millis();
        assert_eq!(index.len(), 2_000);
        let items: Vec<(u64, &[f32])> = data.iter().map(|(id, v)| (*id, v.as_slice())).collect();
        let mut rng = SplitMix64::new(7);
        let (mut hits, mut total) = (0usize, 0usize);
        for _ in 0..200 {
            let q = rng.unit_vector(DIM);
            let exact = brute_force_search(&items, &q, 10);
            let approx = index
                .search(&q, 10, DEFAULT_EF_SEARCH, |_| true)
                .expect("search");
            assert_eq!(approx.len(), 10);
            assert!(
                approx.windows(2).all(|w| w[0].1 >= w[1].1),
                "sorted best first"
            );
            hits += approx
                .iter()
                .filter(|(id, _)| exact.iter().any(|(e, _)| e == id))
                .count();
            total += 10;
        }
        let recall = hits as f64 / total as f64;
        eprintln!("recall@10 = {recall:.4} over 200 queries; build of 2,000 took {build_ms} ms");
        assert!(recall >= 0.95, "recall@10 {recall}");
    }

    #[test]
    fn scores_are_cosine_similarities() {
        let data = dataset(50, 1);
        let index = build(&data);
        let (id, v) = &data[17];
        let hits = index
            .search(v, 3, DEFAULT_EF_SEARCH, |_| true)
            .expect("search");
        assert_eq!(hits[0].0, *id);
        assert!(
            (hits[0].1 - 1.0).abs() < 1e-5,
            "self-similarity {}",
            hits[0].1
        );
        let other = data
            .iter()
            .find(|(i, _)| *i == hits[1].0)
            .expect("known id");
        assert!((hits[1].1 - dot(v, &other.1)).abs() < 1e-5);
        // Unnormalised input is normalised.
        let scaled: Vec<f32> = v.iter().map(|x| x * 7.5).collect();
        assert_eq!(
            index.search(&scaled, 1, 50, |_| true).expect("search")[0].0,
            *id
        );
    }

    #[test]
    fn filtered_ids_are_never_returned_and_k_is_still_met() {
        let data = dataset(2_000, 3);
        let index = build(&data);
        let items: Vec<(u64, &[f32])> = data.iter().map(|(id, v)| (*id, v.as_slice())).collect();
        let mut rng = SplitMix64::new(99);
        for keep_every in [2u64, 20, 400] {
            let accept = |id: u64| (id / 3).is_multiple_of(keep_every);
            for _ in 0..20 {
                let q = rng.unit_vector(DIM);
                let hits = index
                    .search(&q, 10, DEFAULT_EF_SEARCH, accept)
                    .expect("search");
                assert!(
                    hits.iter().all(|(id, _)| accept(*id)),
                    "a filtered id came back"
                );
                let accepted = data.iter().filter(|(id, _)| accept(*id)).count();
                assert_eq!(hits.len(), accepted.min(10));
                let allowed: Vec<(u64, &[f32])> = items
                    .iter()
                    .filter(|(id, _)| accept(*id))
                    .cloned()
                    .collect();
                let exact = brute_force_search(&allowed, &q, 10);
                let overlap = hits
                    .iter()
                    .filter(|(id, _)| exact.iter().any(|(e, _)| e == id))
                    .count();
                assert!(
                    overlap >= exact.len().min(8),
                    "keep 1/{keep_every}: {overlap}/{} of exact filtered top-10",
                    exact.len()
                );
            }
        }
        // Everything filtered: empty, not an endless loop.
        assert!(
            index
                .search(&rng.unit_vector(DIM), 10, 50, |_| false)
                .expect("search")
                .is_empty()
        );
    }

    #[test]
    fn wrong_dimension_is_an_error() {
        let index = VectorIndex::new(DIM, 10);
        let short = vec![0.1f32; DIM - 1];
        let err = index
            .insert_batch(&[(5, short.as_slice())])
            .expect_err("bad dim");
        assert!(
            matches!(
                err,
                IndexError::DimensionMismatch {
                    id: 5,
                    found: 383,
                    ..
                }
            ),
            "{err}"
        );
        assert!(index.is_empty());
        assert!(index.search(&short, 3, 10, |_| true).is_err());
    }

    #[test]
    #[allow(clippy::print_stderr)] // reports the measured figures
    fn save_then_load_gives_the_same_results() {
        let data = dataset(2_000, 11);
        let index = build(&data);
        let dir = tempfile::tempdir().expect("tempdir");
        let started = Instant::now();
        let stored = index.save(dir.path(), &manifest()).expect("save");
        let save_ms = started.elapsed().as_millis();
        assert_eq!(stored.generation, 1);
        assert_eq!(stored.points, 2_000);
        assert_eq!(stored.watermark, 7_000);

        let started = Instant::now();
        let (loaded, m) = VectorIndex::load(dir.path())
            .expect("load")
            .expect("an index");
        let load_ms = started.elapsed().as_millis();
        eprintln!("2,000 x {DIM}: save {save_ms} ms, load {load_ms} ms");
        assert_eq!(m, stored);
        assert_eq!(
            VectorIndex::read_manifest(dir.path()).expect("read"),
            Some(stored.clone())
        );
        assert_eq!(loaded.len(), 2_000);
        assert_eq!(loaded.dimension(), DIM);
        let mut rng = SplitMix64::new(5);
        for _ in 0..50 {
            let q = rng.unit_vector(DIM);
            let a = index
                .search(&q, 10, DEFAULT_EF_SEARCH, |_| true)
                .expect("search");
            let b = loaded
                .search(&q, 10, DEFAULT_EF_SEARCH, |_| true)
                .expect("search");
            assert_eq!(a, b);
        }
        // A loaded index takes further inserts and saves as the next generation.
        let more = dataset(10, 12345);
        let items: Vec<(u64, &[f32])> = more
            .iter()
            .map(|(_, v)| (99_999u64, v.as_slice()))
            .take(1)
            .collect();
        loaded.insert_batch(&items).expect("insert");
        assert_eq!(
            loaded.search(&more[0].1, 1, 50, |_| true).expect("search")[0].0,
            99_999
        );
        let second = loaded.save(dir.path(), &manifest()).expect("save again");
        assert_eq!(second.generation, 2);
        assert_eq!(second.points, 2_001);
        assert!(
            !dir.path().join(generation_name(1)).exists(),
            "old generation removed"
        );
    }

    #[test]
    fn crash_before_pointer_switch_keeps_previous_generation() {
        let data = dataset(300, 21);
        let index = build(&data);
        let dir = tempfile::tempdir().expect("tempdir");
        index.save(dir.path(), &manifest()).expect("save");
        let q = SplitMix64::new(8).unit_vector(DIM);
        let before = index
            .search(&q, 5, DEFAULT_EF_SEARCH, |_| true)
            .expect("search");

        // Simulate a crash mid-save of generation 2: a partial dump, no
        // manifest, CURRENT never switched (and a stale CURRENT.tmp).
        let partial = dir.path().join(generation_name(2));
        fs::create_dir(&partial).expect("mkdir");
        fs::write(partial.join("index.hnsw.graph"), b"partial garbage").expect("write");
        fs::write(partial.join("index.hnsw.data"), [0u8; 10]).expect("write");
        fs::write(dir.path().join(CURRENT_TMP), b"gen-000000000002\n").expect("write");

        let (loaded, m) = VectorIndex::load(dir.path()).expect("load").expect("index");
        assert_eq!(m.generation, 1);
        assert_eq!(
            loaded
                .search(&q, 5, DEFAULT_EF_SEARCH, |_| true)
                .expect("search"),
            before
        );

        // The next save skips past the debris and cleans it up.
        let stored = loaded.save(dir.path(), &manifest()).expect("save");
        assert_eq!(stored.generation, 3);
        assert!(!partial.exists());
        assert!(!dir.path().join(CURRENT_TMP).exists());
        let (_, m) = VectorIndex::load(dir.path()).expect("load").expect("index");
        assert_eq!(m.generation, 3);
    }

    #[test]
    fn damaged_current_generation_is_reported_not_panicking() {
        let index = build(&dataset(200, 4));
        let dir = tempfile::tempdir().expect("tempdir");
        let stored = index.save(dir.path(), &manifest()).expect("save");
        let gen_dir = dir.path().join(generation_name(stored.generation));

        // Same size, scrambled content: hnsw_rs itself trips over it.
        let graph = gen_dir.join("index.hnsw.graph");
        let len = fs::metadata(&graph).expect("stat").len() as usize;
        fs::write(&graph, vec![0xAB; len]).expect("write");
        let err = VectorIndex::load(dir.path()).expect_err("corrupt");
        assert!(matches!(err, IndexError::IndexCorrupt { .. }), "{err}");
        assert!(err.to_string().contains("cairn reindex --rebuild"));

        // Truncated: caught by the size check before hnsw_rs sees it.
        fs::write(&graph, b"short").expect("write");
        let err = VectorIndex::load(dir.path()).expect_err("corrupt");
        assert!(err.to_string().contains("bytes, manifest says"), "{err}");

        fs::write(dir.path().join(CURRENT), b"nonsense").expect("write");
        assert!(matches!(
            VectorIndex::load(dir.path()),
            Err(IndexError::IndexCorrupt { .. })
        ));
    }

    #[test]
    fn missing_and_empty_indexes() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(
            VectorIndex::load(&dir.path().join("never-saved"))
                .expect("load")
                .is_none()
        );
        assert!(
            VectorIndex::read_manifest(dir.path())
                .expect("read")
                .is_none()
        );

        let empty = VectorIndex::new(DIM, 0);
        assert!(
            empty
                .search(&vec![1.0; DIM], 5, 10, |_| true)
                .expect("search")
                .is_empty()
        );
        let stored = empty.save(dir.path(), &manifest()).expect("save empty");
        assert_eq!(stored.points, 0);
        let (loaded, m) = VectorIndex::load(dir.path()).expect("load").expect("index");
        assert_eq!(
            (loaded.len(), loaded.dimension(), m.generation),
            (0, DIM, 1)
        );
    }

    #[test]
    fn manifest_check_explains_how_to_rebuild() {
        let built = manifest();
        assert!(built.check(&manifest()).is_ok());
        let mut other_model = manifest();
        other_model.model_id = "another-model".into();
        let err = built.check(&other_model).expect_err("mismatch");
        let msg = err.to_string();
        assert!(matches!(
            err,
            IndexError::ManifestMismatch {
                field: "model_id",
                ..
            }
        ));
        assert!(
            msg.contains("cairn reindex --rebuild") && msg.contains("another-model"),
            "{msg}"
        );
        let mut newer_chunker = manifest();
        newer_chunker.chunker_version = 2;
        assert!(matches!(
            built.check(&newer_chunker),
            Err(IndexError::ManifestMismatch {
                field: "chunker_version",
                ..
            })
        ));
        let mut other_dim = manifest();
        other_dim.dimension = 768;
        assert!(matches!(
            built.check(&other_dim),
            Err(IndexError::ManifestMismatch {
                field: "dimension",
                ..
            })
        ));
        // Watermark and generation are not compatibility fields.
        let mut later = manifest();
        later.watermark = 1;
        later.generation = 9;
        assert!(built.check(&later).is_ok());
    }

    #[test]
    fn dot_matches_naive() {
        let a: Vec<f32> = (0..DIM + 3).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..DIM + 3).map(|i| (i as f32 * 0.11).cos()).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-3);
        // Identical unit vectors: rounding may put a·b above 1; distance clamps to 0.
        let u = normalized(&a);
        let d = DistUnitCosine.eval(&u, &u);
        assert!((0.0..1e-6).contains(&d), "{d}");
    }
}
