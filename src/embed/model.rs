//! The local embedding model: owns finding the model files and the ONNX
//! Runtime library, initialising ONNX Runtime once per process, loading the
//! model lazily, and turning texts into L2-normalised 384-dimensional vectors.
//!
//! The model is all-MiniLM-L6-v2 as an int8 ONNX file, run by fastembed's
//! user-defined model path (mean pooling, max length 256, no extra
//! quantization: the weights are already int8, computation is fp32). Nothing
//! is ever downloaded: the files come from `bash models/fetch.sh`.
//!
//! # Finding the files
//!
//! [`locate`] resolves, independently for the model directory and the runtime
//! library: the explicit [`EmbedderConfig`] field, then the environment
//! (`CAIRN_MODEL_DIR`, `CAIRN_ORT_LIB`), then the first complete `models/`
//! directory (one holding `manifest.json` and the files it names) found
//! walking up from the executable's directory, then walking up from the
//! current directory, then `CARGO_MANIFEST_DIR/models` of the source tree Cairn
//! was compiled from. Missing files give [`EmbedError::ModelMissing`] listing
//! every path examined.
//!
//! # Batches
//!
//! [`ModelEmbedder::embed_batch`] counts each text's WordPiece tokens with the
//! model's own tokenizer (truncated to [`MAX_LENGTH`], special tokens
//! included), sorts the texts by that count (longest first) and cuts the
//! sorted list into batches of [`DEFAULT_BATCH_SIZE`]; fastembed pads each
//! batch to its longest member. Sorting by *tokens* rather than bytes keeps
//! the padded share of the model's input to a few percent (bytes predict
//! WordPiece counts poorly: a byte sort padded 24–30%). Counting costs a
//! second tokenisation, well under 1% of a chunk's model time.
//! [`ModelEmbedder::stats`] counts real and padded tokens.
//!
//! # Threads
//!
//! Parallelism lives inside ONNX Runtime: one session per [`ModelEmbedder`], its
//! intra-op thread pool sized by [`Threading::threads`] (default: all cores).
//! Inter-op parallelism stays at 1 (the graph is a sequential transformer).
//! Runs are serialised by a mutex (the session needs `&mut`), so calling
//! [`ModelEmbedder::embed_batch`] from many threads buys nothing: give it large
//! slices from one thread instead. Queries are batched for their callers:
//! [`Embed::embed_query`] calls that wait for the model at the same time are
//! embedded in one run by whichever gets the model first.
//!
//! Whether idle ORT workers *spin* ([`Threading::spin`]) depends on the work:
//! a server embedding one query now and then next to busy agents does not
//! spin (the default), so the cores stay free between queries; `cairn
//! reindex` spins when the load average says the cores are free
//! ([`Spin::Auto`]), worth about a fifth of throughput there.
//! [`ModelEmbedder::set_threading`] changes the setting of a live embedder (the
//! session is rebuilt on the next run, ~0.3 s). `CAIRN_EMBED_THREADS` and
//! `CAIRN_EMBED_SPIN` override both. Figures: `docs/vault.md`.
//!
//! # Cost
//!
//! The model is compute-bound: about 0.03–0.1 CPU-second per chunk of the
//! chunker's size (≤ 200 approximate tokens), depending on its token count.
//! A short query takes about 2.5 ms on the idle 2-core machine (4.7 ms before the
//! model ran its MatMuls in int8, `models/derive.py`), a 256-token chunk about 17 ms
//! (21 ms before); a repeated query comes from the query-vector cache in microseconds.
//!
//! # Fidelity
//!
//! On 1,000 real Markdown chunks, these vectors match an independent Python
//! `onnxruntime` + `tokenizers` computation (`tests/reference_embed.py`) with
//! mean cosine 1.0000000 (minimum 0.9999999). A text's vector depends slightly on the
//! batch it runs in (the model's int8 activations): [`BATCH_AGREEMENT`].

use std::cmp::Reverse;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use fastembed::{
    InitOptionsUserDefined, Pooling, QuantizationMode, TextEmbedding, TokenizerFiles,
    UserDefinedEmbeddingModel,
};
use lru::LruCache;
use serde::Deserialize;

use super::embedder::{DIMENSION, Embed, EmbedStats};
use super::error::{EmbedError, Result};
use super::threading::{Spin, Threading};
use super::vector::l2_normalize;
use crate::embed::foreground::Foreground;

/// Identifier of the model; stored with every index so vectors of different
/// models are never mixed. It names the network and its int8 weights, which the
/// arithmetic does not change: vectors of the file that ran them in float32 (before
/// `models/derive.py`) agree with today's to a cosine of 0.996 or more, as a text's
/// vector agrees with itself across batches ([`BATCH_AGREEMENT`]), so they stay
/// comparable and are not embedded again.
pub const MODEL_ID: &str = "all-MiniLM-L6-v2-onnx-int8";
/// The cosine by which a text's vector at least agrees with itself embedded in another
/// batch (other batch-mates, other padding, another thread count). The model quantizes
/// its activations to int8 per block, and a batch changes the floats ahead of a
/// quantization in their last bits, which can flip a rounding: measured 0.99984 at
/// worst (float32 arithmetic agreed to about 1e-7). The graded sets rank as they did
/// with float32 arithmetic but for one query of samples/docs' sixteen, now answered at
/// rank 2 (docs/deployment.md, "The model's arithmetic").
#[cfg(test)]
pub(crate) const BATCH_AGREEMENT: f32 = 0.999;

/// Maximum input length in WordPiece tokens; longer texts are truncated.
pub(crate) const MAX_LENGTH: usize = 256;
/// Texts per model run. 32 keeps padding waste low once inputs are sorted by
/// length, and bounds memory (32 × 256 × 384 floats of hidden state).
pub(crate) const DEFAULT_BATCH_SIZE: usize = 32;
/// Texts per model run of a document being indexed ([`Embed::embed_batch_until`]): the
/// unit of a turn on the document session and of stopping, so it bounds how long another
/// indexer waits for its turn and how long a SIGTERM waits for the run in hand. Measured
/// on the shared 2-core machine under load (about 150 ms a text), 8 embedded as fast as
/// 32 (135-151 against 157-165 ms a text), and pads less.
pub(crate) const DOCUMENT_BATCH: usize = 8;
/// Query vectors an embedder keeps ([`ModelEmbedder::embed_query`]): 1.5 KB each.
pub(crate) const QUERY_CACHE: usize = 1024;
/// The files of the model directory.
pub(crate) const MODEL_FILES: [&str; 5] = [
    "model.onnx",
    "tokenizer.json",
    "config.json",
    "special_tokens_map.json",
    "tokenizer_config.json",
];

/// Environment variable naming the model directory.
pub(crate) const ENV_MODEL_DIR: &str = "CAIRN_MODEL_DIR";
/// Environment variable naming the ONNX Runtime shared library.
pub(crate) const ENV_ORT_LIB: &str = "CAIRN_ORT_LIB";

/// How to find and run the model. `Default` finds everything by itself, uses
/// all cores and does not spin (unlike [`ModelEmbedder::default`], it ignores the
/// environment's thread settings).
#[derive(Debug, Clone, Default)]
pub struct EmbedderConfig {
    /// Directory holding [`MODEL_FILES`]; overrides `CAIRN_MODEL_DIR` and discovery.
    pub model_dir: Option<PathBuf>,
    /// Path of `libonnxruntime.so`; overrides `CAIRN_ORT_LIB` and discovery.
    pub ort_lib: Option<PathBuf>,
    /// ONNX Runtime intra-op threads and spinning.
    pub threading: Threading,
    /// Texts per model run; `None` or 0 uses [`DEFAULT_BATCH_SIZE`].
    pub batch_size: Option<usize>,
}

/// Where the model and the runtime were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModelLocation {
    /// Directory holding [`MODEL_FILES`].
    pub(crate) model_dir: PathBuf,
    /// The ONNX Runtime shared library.
    pub(crate) ort_lib: PathBuf,
}

/// The fields of `models/manifest.json` that locating needs.
#[derive(Debug, Deserialize)]
struct ModelsManifest {
    model_id: String,
    dimension: usize,
    model_dir: String,
    runtime_lib: String,
}

/// Finds the model directory and the runtime library (see the module docs
/// for the order). Checks that the files exist; does not load them.
pub(crate) fn locate(config: &EmbedderConfig) -> Result<ModelLocation> {
    let env_path = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let explicit_dir = config.model_dir.clone().or_else(|| env_path(ENV_MODEL_DIR));
    let explicit_lib = config.ort_lib.clone().or_else(|| env_path(ENV_ORT_LIB));

    if let Some(dir) = &explicit_dir {
        check_model_dir(dir)?;
    }
    if let Some(lib) = &explicit_lib
        && !lib.is_file()
    {
        return Err(EmbedError::ModelMissing {
            what: format!("ONNX Runtime library {}", lib.display()),
            searched: vec![lib.clone()],
        });
    }
    if let (Some(model_dir), Some(ort_lib)) = (&explicit_dir, &explicit_lib) {
        return Ok(ModelLocation {
            model_dir: model_dir.clone(),
            ort_lib: ort_lib.clone(),
        });
    }

    let mut searched = Vec::new();
    for root in candidate_roots() {
        let manifest_path = root.join("manifest.json");
        if searched.contains(&manifest_path) {
            continue;
        }
        searched.push(manifest_path.clone());
        if !manifest_path.is_file() {
            continue;
        }
        let manifest = read_models_manifest(&manifest_path)?;
        let model_dir = explicit_dir
            .clone()
            .unwrap_or_else(|| root.join(&manifest.model_dir));
        let ort_lib = explicit_lib
            .clone()
            .unwrap_or_else(|| root.join(&manifest.runtime_lib));
        let mut complete = true;
        for file in MODEL_FILES
            .iter()
            .map(|f| model_dir.join(f))
            .chain([ort_lib.clone()])
        {
            if !file.is_file() {
                searched.push(file);
                complete = false;
            }
        }
        if complete {
            return Ok(ModelLocation { model_dir, ort_lib });
        }
    }
    Err(EmbedError::ModelMissing {
        what: "no complete models/ directory (manifest.json, model files, libonnxruntime.so)"
            .to_string(),
        searched,
    })
}

/// `models/` candidates: up from the executable, up from the current
/// directory, then the compile-time source tree.
fn candidate_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        let exe = exe.canonicalize().unwrap_or(exe);
        if let Some(dir) = exe.parent() {
            roots.extend(dir.ancestors().map(|a| a.join("models")));
        }
    }
    if let Ok(cwd) = std::env::current_dir() {
        roots.extend(cwd.ancestors().map(|a| a.join("models")));
    }
    roots.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("models"));
    roots
}

fn read_models_manifest(path: &Path) -> Result<ModelsManifest> {
    let bytes = std::fs::read(path).map_err(|e| EmbedError::io("read", path, e))?;
    let manifest: ModelsManifest =
        serde_json::from_slice(&bytes).map_err(|source| EmbedError::Json {
            path: path.to_path_buf(),
            source,
        })?;
    if manifest.model_id != MODEL_ID || manifest.dimension != DIMENSION {
        return Err(EmbedError::ModelManifest {
            path: path.to_path_buf(),
            message: format!(
                "describes model {} ({} dimensions); this Cairn runs {MODEL_ID} ({DIMENSION})",
                manifest.model_id, manifest.dimension
            ),
        });
    }
    Ok(manifest)
}

fn check_model_dir(dir: &Path) -> Result<()> {
    let missing: Vec<PathBuf> = MODEL_FILES
        .iter()
        .map(|f| dir.join(f))
        .filter(|p| !p.is_file())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(EmbedError::ModelMissing {
            what: format!("model files in {}", dir.display()),
            searched: missing,
        })
    }
}

/// The process-wide ONNX Runtime environment: ONNX Runtime allows one per
/// process, and the shared library can be loaded only once.
static ORT_ENV: Mutex<Option<(PathBuf, ort::environment::Environment)>> = Mutex::new(None);

/// Loads the runtime library and builds the environment on first call; later
/// calls return the same environment (a different `lib` is then ignored with
/// a warning, as the first library stays loaded).
fn ort_environment(lib: &Path) -> Result<ort::environment::Environment> {
    let mut slot = ORT_ENV.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((loaded, env)) = slot.as_ref() {
        if loaded != lib {
            tracing::warn!(
                loaded = %loaded.display(),
                requested = %lib.display(),
                "ONNX Runtime is already loaded in this process; keeping the first library"
            );
        }
        return Ok(env.clone());
    }
    let runtime_err = |message: String| EmbedError::RuntimeInit {
        path: lib.to_path_buf(),
        message,
    };
    let env = ort::init_from(lib)
        .map_err(|e| runtime_err(e.to_string()))?
        .with_name("cairn")
        // ONNX Runtime's own switch for its telemetry events. Its usage uploads (1.31 on
        // Linux) stop only with `ORT_DISABLE_TELEMETRY` in the environment when it
        // starts, which the binary's `main` sets (docs/security.md).
        .with_telemetry(false)
        .build()
        .map_err(|e| runtime_err(e.to_string()))?;
    tracing::debug!(lib = %lib.display(), "ONNX Runtime initialised");
    *slot = Some((lib.to_path_buf(), env.clone()));
    Ok(env)
}

/// A handle on the embedding model. Cheap to create; the model is located
/// and loaded on the first embedding (or [`ModelEmbedder::load`]). Safe to share
/// between threads; model runs are serialised, foreground runs ahead of background
/// ones ([`Embed::embed_idle`]), and recent query vectors are kept
/// ([`QUERY_CACHE`]).
pub struct ModelEmbedder {
    config: Mutex<EmbedderConfig>,
    /// The session documents run on (chunks, learnings), one batch per turn.
    documents: Mutex<Option<Loaded>>,
    /// The session queries run on: never behind a document.
    query_session: Mutex<Option<Loaded>>,
    /// Document batches take [`ModelEmbedder::documents`] in the order they asked.
    turns: Turns,
    /// Document batches running now (0 or 1).
    documents_running: AtomicU64,
    /// Query runs that ran while a document batch was running.
    queries_beside_documents: AtomicU64,
    /// Foreground calls using or waiting for the model.
    foreground: Foreground,
    /// Recent query vectors by query text (the model is deterministic).
    queries: Mutex<LruCache<String, Vec<f32>>>,
    /// Queries waiting for the model: whoever gets it next embeds them all in one run.
    waiting: Mutex<Vec<Arc<Waiting>>>,
    texts: AtomicU64,
    batches: AtomicU64,
    tokens: AtomicU64,
    padding: AtomicU64,
    query_cache_hits: AtomicU64,
}

/// A query waiting for the model, and its vector once a run embedded it.
struct Waiting {
    text: String,
    vector: Mutex<Option<std::result::Result<Vec<f32>, String>>>,
}

/// A loaded model and the thread settings its session was built with.
struct Loaded {
    model: TextEmbedding,
    threading: Threading,
}

impl std::fmt::Debug for ModelEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelEmbedder")
            .field("config", &self.config())
            .field("loaded", &self.is_loaded())
            .finish()
    }
}

impl Default for ModelEmbedder {
    /// Finds everything by itself; threads from the environment
    /// ([`Threading::from_env`], no spinning unless `CAIRN_EMBED_SPIN` says so).
    fn default() -> Self {
        ModelEmbedder::new(EmbedderConfig {
            threading: Threading::from_env(Spin::Off),
            ..Default::default()
        })
    }
}

impl ModelEmbedder {
    /// A handle that will use `config`; does no I/O.
    pub fn new(config: EmbedderConfig) -> Self {
        ModelEmbedder {
            config: Mutex::new(config),
            documents: Mutex::new(None),
            query_session: Mutex::new(None),
            turns: Turns::default(),
            documents_running: AtomicU64::new(0),
            queries_beside_documents: AtomicU64::new(0),
            foreground: Foreground::default(),
            queries: Mutex::new(LruCache::new(
                NonZeroUsize::new(QUERY_CACHE).expect("QUERY_CACHE is not zero"),
            )),
            waiting: Mutex::new(Vec::new()),
            texts: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            tokens: AtomicU64::new(0),
            padding: AtomicU64::new(0),
            query_cache_hits: AtomicU64::new(0),
        }
    }

    fn query_cache(&self) -> MutexGuard<'_, LruCache<String, Vec<f32>>> {
        self.queries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn waiting_queries(&self) -> MutexGuard<'_, Vec<Arc<Waiting>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn config(&self) -> EmbedderConfig {
        self.config
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether a session of the model is loaded already.
    pub(crate) fn is_loaded(&self) -> bool {
        lock(&self.documents).is_some() || lock(&self.query_session).is_some()
    }

    /// `session` locked, its model loaded first if needed (or its session rebuilt when
    /// the thread settings changed). A failed load is not cached: a later call tries
    /// again (e.g. after `models/fetch.sh` ran).
    fn loaded<'a>(
        &self,
        session: &'a Mutex<Option<Loaded>>,
    ) -> Result<MutexGuard<'a, Option<Loaded>>> {
        let mut guard = lock(session);
        let config = self.config();
        if guard
            .as_ref()
            .is_some_and(|m| m.threading != config.threading)
        {
            *guard = None;
        }
        if guard.is_none() {
            *guard = Some(Loaded {
                model: load_model(&config)?,
                threading: config.threading,
            });
        }
        Ok(guard)
    }

    fn batch_size(&self) -> usize {
        match self.config().batch_size {
            Some(n) if n > 0 => n,
            _ => DEFAULT_BATCH_SIZE,
        }
    }
}

/// A session's lock (a panic in a run leaves the session usable: nothing of it is
/// half-written).
fn lock(session: &Mutex<Option<Loaded>>) -> MutexGuard<'_, Option<Loaded>> {
    session.lock().unwrap_or_else(PoisonError::into_inner)
}

/// First come, first served for the document session: each batch takes a ticket and
/// runs when its number comes up, so that two indexers (a follower's roots, a
/// `vault_update`) alternate batch by batch instead of one barging ahead.
#[derive(Debug, Default)]
struct Turns {
    /// The next ticket, and the ticket whose turn it is.
    state: Mutex<(u64, u64)>,
    next: Condvar,
}

/// A batch's turn on the document session, until dropped.
struct Turn<'a>(&'a Turns);

impl Turns {
    fn take(&self) -> Turn<'_> {
        let mut g = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let ticket = g.0;
        g.0 += 1;
        while g.1 != ticket {
            g = self.next.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
        Turn(self)
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1 += 1;
        self.0.next.notify_all();
    }
}

/// Counts a document batch as running while it lives.
struct Running<'a>(&'a AtomicU64);

impl<'a> Running<'a> {
    fn start(count: &'a AtomicU64) -> Running<'a> {
        count.fetch_add(1, Ordering::SeqCst);
        Running(count)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Embed for ModelEmbedder {
    /// The model identifier ([`MODEL_ID`]).
    fn model_id(&self) -> &str {
        MODEL_ID
    }

    /// The vector length ([`DIMENSION`]).
    fn dimension(&self) -> usize {
        DIMENSION
    }

    /// The thread settings runs use (from now on).
    fn threading(&self) -> Threading {
        self.config().threading
    }

    /// Changes the thread settings. A loaded session built with other settings
    /// is dropped and rebuilt on the next run (about 0.3 s).
    fn set_threading(&self, threading: Threading) {
        self.config
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .threading = threading;
    }

    /// Token counts of everything embedded through this handle.
    fn stats(&self) -> EmbedStats {
        EmbedStats {
            texts: self.texts.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            tokens: self.tokens.load(Ordering::Relaxed),
            padding: self.padding.load(Ordering::Relaxed),
            query_cache_hits: self.query_cache_hits.load(Ordering::Relaxed),
            documents_running: self.documents_running.load(Ordering::SeqCst),
            queries_beside_documents: self.queries_beside_documents.load(Ordering::SeqCst),
        }
    }

    /// Loads both sessions now (to fail fast at start-up); no-op when loaded.
    fn load(&self) -> Result<()> {
        self.loaded(&self.query_session).map(drop)?;
        self.loaded(&self.documents).map(drop)
    }

    /// Embeds `texts`, returning one unit-length [`DIMENSION`]-vector per
    /// text in input order. Texts are truncated to [`MAX_LENGTH`] tokens and
    /// batched by token count (see the module docs).
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let _claim = self.foreground.begin();
        self.run(texts)
    }

    /// [`Embed::embed_batch`] in runs of [`DOCUMENT_BATCH`] texts (unless the
    /// configuration names a batch size) that gives up between two runs once `stop` says
    /// so.
    fn embed_batch_until(&self, texts: &[&str], stop: &dyn Fn() -> bool) -> Result<Vec<Vec<f32>>> {
        let _claim = self.foreground.begin();
        let size = self.config().batch_size.filter(|&n| n > 0);
        self.run_sized(texts, size.unwrap_or(DOCUMENT_BATCH), stop)
    }

    /// The query's vector: from the cache of recent queries, or embedded (and kept) on
    /// the query session, which no document uses. Queries that wait for that session at
    /// the same time are embedded together: the first to get it runs every waiting
    /// query in one batch, and the others find their vector done when their turn comes
    /// (eight sessions asking at once wait for one run, not for eight).
    fn has_query(&self, text: &str) -> bool {
        self.query_cache().contains(text)
    }

    fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        if let Some(v) = self.query_cache().get(text) {
            self.query_cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(v.clone());
        }
        let _claim = self.foreground.begin();
        let mine = Arc::new(Waiting {
            text: text.to_string(),
            vector: Mutex::new(None),
        });
        self.waiting_queries().push(mine.clone());
        let guard = self.loaded(&self.query_session);
        // A run by another waiter may have embedded this query already.
        let done = mine
            .vector
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let done = match (done, guard) {
            (Some(done), _) => done,
            (None, Err(e)) => {
                self.waiting_queries().retain(|w| !Arc::ptr_eq(w, &mine));
                return Err(e);
            }
            (None, Ok(mut guard)) => {
                let batch = std::mem::take(&mut *self.waiting_queries());
                let texts: Vec<&str> = batch.iter().map(|w| w.text.as_str()).collect();
                let beside = self.documents_running.load(Ordering::SeqCst) > 0;
                let vectors = self.run_on(&mut guard, &texts);
                if beside || self.documents_running.load(Ordering::SeqCst) > 0 {
                    self.queries_beside_documents.fetch_add(1, Ordering::SeqCst);
                }
                let mut cache = self.query_cache();
                for (i, w) in batch.iter().enumerate() {
                    let v = match &vectors {
                        Ok(vs) => Ok(vs[i].clone()),
                        Err(e) => Err(e.to_string()),
                    };
                    if let Ok(v) = &v {
                        cache.put(w.text.clone(), v.clone());
                    }
                    *w.vector.lock().unwrap_or_else(PoisonError::into_inner) = Some(v);
                }
                drop(cache);
                drop(guard);
                let mine = mine
                    .vector
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                mine.unwrap_or_else(|| Err("the batch did not hold this query".to_string()))
            }
        };
        done.map_err(|message| EmbedError::Batch {
            batch_len: 1,
            message,
        })
    }

    /// Waits (up to `patience`) until no foreground call uses or waits for the model
    /// (and none ended in the last [`crate::embed::foreground::QUIET_GAP`]), then runs `texts`
    /// (see [`Embed::embed_idle`]).
    fn embed_idle(&self, texts: &[&str], patience: Duration) -> Result<Vec<Vec<f32>>> {
        self.foreground.wait_quiet(Instant::now() + patience);
        self.run(texts)
    }
}

impl ModelEmbedder {
    /// `texts` on the document session (see [`Embed::embed_batch`]), in batches of the
    /// configured size ([`DEFAULT_BATCH_SIZE`]).
    fn run(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.run_sized(texts, self.batch_size(), &|| false)
    }

    /// `texts` on the document session: sorted by token count once, then each batch of
    /// `size` texts in its own turn ([`Turns`]), `stop` asked before each.
    fn run_sized(
        &self,
        texts: &[&str],
        size: usize,
        stop: &dyn Fn() -> bool,
    ) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let (tokens, order) = {
            let _turn = self.turns.take();
            let guard = self.loaded(&self.documents)?;
            token_order(model_of(&guard), texts)?
        };
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for idxs in order.chunks(size) {
            if stop() {
                return Err(EmbedError::Stopped {
                    done: out.iter().filter(|v| !v.is_empty()).count(),
                    of: texts.len(),
                });
            }
            let _turn = self.turns.take();
            let mut guard = self.loaded(&self.documents)?;
            let _running = Running::start(&self.documents_running);
            self.run_batch(model_of_mut(&mut guard), texts, idxs, &tokens, &mut out)?;
        }
        Ok(out)
    }

    /// `texts` on a session already locked, every batch at once (a query run).
    fn run_on(&self, guard: &mut Option<Loaded>, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let model = model_of_mut(guard);
        let (tokens, order) = token_order(model, texts)?;
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for idxs in order.chunks(self.batch_size()) {
            self.run_batch(model, texts, idxs, &tokens, &mut out)?;
        }
        Ok(out)
    }

    /// One model run over the texts `idxs` of `texts`, their vectors put in `out`.
    fn run_batch(
        &self,
        model: &mut TextEmbedding,
        texts: &[&str],
        idxs: &[usize],
        tokens: &[usize],
        out: &mut [Vec<f32>],
    ) -> Result<()> {
        let batch: Vec<&str> = idxs.iter().map(|&i| texts[i]).collect();
        let embed_err = |message: String| EmbedError::Batch {
            batch_len: batch.len(),
            message,
        };
        let vectors = model
            .embed(&batch, Some(batch.len()))
            .map_err(|e| embed_err(e.to_string()))?;
        if vectors.len() != batch.len() {
            return Err(embed_err(format!(
                "model returned {} vectors",
                vectors.len()
            )));
        }
        let real: usize = idxs.iter().map(|&i| tokens[i]).sum();
        let longest = idxs.iter().map(|&i| tokens[i]).max().unwrap_or(0);
        self.batches.fetch_add(1, Ordering::Relaxed);
        crate::metrics::cost::count(crate::metrics::cost::Unit::ModelRuns, 1);
        self.texts.fetch_add(batch.len() as u64, Ordering::Relaxed);
        self.tokens.fetch_add(real as u64, Ordering::Relaxed);
        self.padding
            .fetch_add((longest * batch.len() - real) as u64, Ordering::Relaxed);
        for (&i, mut v) in idxs.iter().zip(vectors) {
            if v.len() != DIMENSION {
                return Err(embed_err(format!(
                    "model returned a {}-dimensional vector",
                    v.len()
                )));
            }
            l2_normalize(&mut v);
            out[i] = v;
        }
        Ok(())
    }
}

fn model_of<'a>(guard: &'a MutexGuard<'_, Option<Loaded>>) -> &'a TextEmbedding {
    &guard
        .as_ref()
        .expect("loaded() returns a guard holding the model")
        .model
}

fn model_of_mut(guard: &mut Option<Loaded>) -> &mut TextEmbedding {
    &mut guard
        .as_mut()
        .expect("loaded() returns a guard holding the model")
        .model
}

/// Each text's token count, and the texts' indexes longest first.
fn token_order(model: &TextEmbedding, texts: &[&str]) -> Result<(Vec<usize>, Vec<usize>)> {
    let tokens = token_counts(model, texts)?;
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| Reverse(tokens[i]));
    Ok((tokens, order))
}

/// Each text's WordPiece token count as the model sees it (truncated to
/// [`MAX_LENGTH`], special tokens included). fastembed's tokenizer pads to the
/// longest of a batch, so a single text comes back unpadded.
fn token_counts(model: &TextEmbedding, texts: &[&str]) -> Result<Vec<usize>> {
    texts
        .iter()
        .map(|t| {
            model
                .tokenizer
                .encode(*t, true)
                .map(|e| e.len())
                .map_err(|e| EmbedError::Batch {
                    batch_len: texts.len(),
                    message: format!("tokenizer: {e}"),
                })
        })
        .collect()
}

fn load_model(config: &EmbedderConfig) -> Result<TextEmbedding> {
    let started = std::time::Instant::now();
    let location = locate(config)?;
    let env = ort_environment(&location.ort_lib)?;
    let dir = &location.model_dir;
    let read = |name: &str| {
        let p = dir.join(name);
        std::fs::read(&p).map_err(|e| EmbedError::io("read", p, e))
    };
    let model = UserDefinedEmbeddingModel::new(
        read("model.onnx")?,
        TokenizerFiles {
            tokenizer_file: read("tokenizer.json")?,
            config_file: read("config.json")?,
            special_tokens_map_file: read("special_tokens_map.json")?,
            tokenizer_config_file: read("tokenizer_config.json")?,
        },
    )
    .with_pooling(Pooling::Mean)
    .with_quantization(QuantizationMode::None);
    let threads = config.threading.thread_count();
    let spin = if config.threading.spin { "1" } else { "0" };
    let options = InitOptionsUserDefined::new()
        .with_environment(env)
        .with_max_length(MAX_LENGTH)
        .with_intra_threads(threads)
        .with_session_config("session.intra_op.allow_spinning", spin)
        .with_session_config("session.inter_op.allow_spinning", spin);
    let embedding = TextEmbedding::try_new_from_user_defined(model, options).map_err(|e| {
        EmbedError::ModelLoad {
            dir: dir.clone(),
            message: e.to_string(),
        }
    })?;
    tracing::info!(
        model = MODEL_ID,
        dir = %dir.display(),
        threads,
        spin = config.threading.spin,
        ms = started.elapsed().as_millis() as u64,
        "embedding model loaded"
    );
    Ok(embedding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::vector::dot;
    use std::sync::OnceLock;

    /// One model per test binary: loading costs ~0.3 s and ONNX Runtime
    /// allows one environment per process anyway.
    fn embedder() -> &'static ModelEmbedder {
        static E: OnceLock<ModelEmbedder> = OnceLock::new();
        E.get_or_init(ModelEmbedder::default)
    }

    #[test]
    fn a_repeated_query_comes_from_the_cache_with_the_same_vector() {
        let e = ModelEmbedder::default();
        let q = "how do we roll back a failed migration";
        let first = e.embed_query(q).unwrap();
        let ran = e.stats();
        let again = e.embed_query(q).unwrap();
        assert_eq!(first, again);
        let after = e.stats();
        assert_eq!(after.texts, ran.texts, "the model ran for a cached query");
        assert_eq!(after.query_cache_hits, ran.query_cache_hits + 1);
        // Another text is embedded, and equals what a batch gives for it.
        let other = e.embed_query("rollback of a broken schema change").unwrap();
        assert_eq!(e.stats().texts, ran.texts + 1);
        let batch = e
            .embed_batch(&["rollback of a broken schema change"])
            .unwrap();
        assert_eq!(other, batch[0]);
    }

    /// The index of the vector of `among` closest to `v` (by cosine).
    fn nearest(v: &[f32], among: &[Vec<f32>]) -> usize {
        (0..among.len())
            .max_by(|&a, &b| dot(v, &among[a]).total_cmp(&dot(v, &among[b])))
            .expect("vectors to compare with")
    }

    /// Queries that wait for the model together are embedded in one run, each getting
    /// its own vector: the one a run of it alone gives (to [`BATCH_AGREEMENT`]), and
    /// closer to that than to any other query's.
    #[test]
    fn queries_waiting_together_share_one_model_run() {
        let e = ModelEmbedder::default();
        e.load().unwrap();
        let queries: Vec<String> = (0..8)
            .map(|i| format!("how do we roll back migration number {i} of the billing schema"))
            .collect();
        let alone: Vec<Vec<f32>> = queries
            .iter()
            .map(|q| e.embed_batch(&[q.as_str()]).unwrap().remove(0))
            .collect();
        let before = e.stats();
        let model = lock(&e.query_session);
        let vectors = std::thread::scope(|s| {
            let handles: Vec<_> = queries
                .iter()
                .map(|q| s.spawn(|| e.embed_query(q).unwrap()))
                .collect();
            // Every query is waiting before the model is free.
            while e.waiting_queries().len() < queries.len() {
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(model);
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        });
        let after = e.stats();
        assert_eq!(after.batches, before.batches + 1, "{after:?}");
        assert_eq!(after.texts, before.texts + 8);
        for (i, (q, v)) in queries.iter().zip(&vectors).enumerate() {
            let cos = dot(v, &alone[i]);
            assert!(cos >= BATCH_AGREEMENT, "{q}: cosine {cos} to its run alone");
            assert_eq!(nearest(v, &alone), i, "{q} got another query's vector");
        }
        // And each is cached now.
        assert_eq!(e.embed_query(&queries[3]).unwrap(), vectors[3]);
        assert_eq!(e.stats().texts, after.texts);
    }

    /// Background work waits while a foreground call holds its claim on the model, and
    /// runs once the claim is gone.
    #[test]
    fn background_embedding_waits_for_the_foreground() {
        let e = ModelEmbedder::default();
        e.load().unwrap();
        let claim = e.foreground.begin();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let v = e
                    .embed_idle(&["a learning nobody waits for"], Duration::from_secs(3600))
                    .unwrap();
                done_tx.send(v.len()).unwrap();
            });
            // The background call is blocked in its wait while the claim is held; had it
            // not waited, it would have run and answered instead.
            while e.foreground.waiting() == 0 {
                assert!(done_rx.try_recv().is_err(), "ran while the claim was held");
                std::thread::yield_now();
            }
            assert_eq!(e.stats().texts, 0);
            assert!(done_rx.try_recv().is_err());
            drop(claim);
            assert_eq!(done_rx.recv().unwrap(), 1);
        });
        assert_eq!(e.stats().texts, 1);
        // With no patience left it runs at once, claim or not.
        let _claim = e.foreground.begin();
        let v = e.embed_idle(&["another one"], Duration::ZERO).unwrap();
        assert_eq!(v.len(), 1);
    }

    /// A query is embedded while a document batch holds the document session (its turn
    /// and its model): it never waits behind a document, and it is counted as run
    /// beside one. The document, asked meanwhile, waits its turn and runs after.
    #[test]
    fn a_query_never_waits_behind_a_document_batch() {
        let e = ModelEmbedder::default();
        e.load().unwrap();
        let before = e.stats();
        let turn = e.turns.take();
        let docs = lock(&e.documents);
        let running = Running::start(&e.documents_running);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let v = e.embed_batch(&["a chunk of a large document"]).unwrap();
                done_tx.send(v.len()).unwrap();
            });
            let v = e
                .embed_query("a query nobody asked before, during the batch")
                .unwrap();
            assert_eq!(v.len(), DIMENSION);
            let during = e.stats();
            assert_eq!(during.documents_running, 1);
            assert_eq!(
                during.queries_beside_documents,
                before.queries_beside_documents + 1
            );
            assert!(done_rx.try_recv().is_err(), "the document did not wait");
            drop(running);
            drop(docs);
            drop(turn);
            assert_eq!(done_rx.recv().unwrap(), 1);
        });
        assert_eq!(e.stats().documents_running, 0);
    }

    /// A document run asked to stop gives up between two batches, saying how far it got.
    #[test]
    fn a_document_run_stops_between_batches() {
        let e = embedder();
        let owned: Vec<String> = (0..70).map(|i| format!("chunk number {i}")).collect();
        let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
        let ran = std::sync::atomic::AtomicUsize::new(0);
        let err = e
            .embed_batch_until(&texts, &|| ran.fetch_add(1, Ordering::SeqCst) >= 1)
            .unwrap_err();
        assert!(
            matches!(
                err,
                EmbedError::Stopped {
                    done: DOCUMENT_BATCH,
                    of: 70
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn embedder_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<ModelEmbedder>();
    }

    #[test]
    fn new_handle_does_no_io() {
        let e = ModelEmbedder::new(EmbedderConfig {
            model_dir: Some("/nonexistent/model".into()),
            ..Default::default()
        });
        assert!(!e.is_loaded());
        assert_eq!(e.model_id(), MODEL_ID);
        assert_eq!(e.dimension(), 384);
        assert_eq!(
            e.embed_batch(&[]).expect("empty input needs no model"),
            Vec::<Vec<f32>>::new()
        );
    }

    #[test]
    fn missing_model_names_fetch_script_and_paths() {
        let e = ModelEmbedder::new(EmbedderConfig {
            model_dir: Some("/nonexistent/cairn-model".into()),
            ..Default::default()
        });
        let err = e.embed_query("hello").expect_err("no model there");
        assert!(matches!(err, EmbedError::ModelMissing { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("bash models/fetch.sh"), "{msg}");
        assert!(msg.contains("/nonexistent/cairn-model/model.onnx"), "{msg}");
        assert!(!e.is_loaded());
    }

    #[test]
    fn locate_finds_the_fetched_models() {
        let loc = locate(&EmbedderConfig::default()).expect("run `bash models/fetch.sh` first");
        assert!(loc.model_dir.join("model.onnx").is_file());
        assert!(loc.ort_lib.is_file());
    }

    #[test]
    fn vectors_are_unit_384_and_semantic() {
        let e = embedder();
        let texts = [
            "How do I install the package from source?",
            "Building and installing the library from its source code",
            "The weather in Paris is sunny and warm today.",
        ];
        let v = e.embed_batch(&texts).expect("embed");
        assert_eq!(v.len(), 3);
        for x in &v {
            assert_eq!(x.len(), 384);
            let norm = dot(x, x).sqrt();
            assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
        }
        let related = dot(&v[0], &v[1]);
        let unrelated = dot(&v[0], &v[2]);
        assert!(related > 0.5, "related cosine {related}");
        assert!(unrelated < 0.2, "unrelated cosine {unrelated}");
        assert!(related > unrelated + 0.3);
        assert!(e.is_loaded());
    }

    #[test]
    fn batch_order_is_preserved_across_lengths_and_batches() {
        let e = embedder();
        // 70 texts of very different lengths (crosses two batch boundaries).
        let owned: Vec<String> = (0..70)
            .map(|i| {
                let words = [
                    "vector",
                    "index",
                    "markdown",
                    "chunk",
                    "embedding",
                    "query",
                    "rust",
                ];
                let n = (i * 37) % 90 + 1;
                let body: Vec<&str> = (0..n).map(|k| words[(i + k) % words.len()]).collect();
                format!("text {i}: {}", body.join(" "))
            })
            .collect();
        let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
        let batch = e.embed_batch(&texts).expect("embed");
        for (i, t) in texts.iter().enumerate().step_by(7) {
            let single = e.embed_query(t).expect("embed one");
            let cos = dot(&single, &batch[i]);
            assert!(
                cos >= BATCH_AGREEMENT,
                "text {i}: cosine {cos} between batch and single"
            );
            // The order really is the input order: no other text of the batch is closer.
            assert_eq!(nearest(&single, &batch), i, "text {i}");
        }
    }

    #[test]
    fn second_embedder_shares_the_runtime_and_agrees() {
        // ONNX Runtime allows one environment per process: a second handle
        // (other thread count, other batch size) must reuse it.
        let single = ModelEmbedder::new(EmbedderConfig {
            threading: Threading {
                threads: Some(1),
                spin: true,
            },
            batch_size: Some(2),
            ..Default::default()
        });
        let texts = [
            "alpha beta",
            "a somewhat longer sentence about vectors",
            "x",
        ];
        let a = single.embed_batch(&texts).expect("embed with 1 thread");
        let b = embedder().embed_batch(&texts).expect("embed");
        for (x, y) in a.iter().zip(&b) {
            assert!(dot(x, y) >= BATCH_AGREEMENT, "{}", dot(x, y));
        }
    }

    #[test]
    fn long_text_is_truncated_not_rejected() {
        let long = "word ".repeat(5000);
        let v = embedder().embed_query(&long).expect("embed");
        assert_eq!(v.len(), 384);
        assert!((dot(&v, &v) - 1.0).abs() < 1e-4);
    }
}
