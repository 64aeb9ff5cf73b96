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
//! was compiled from. Missing files give [`VaultError::ModelMissing`] listing
//! every path examined.
//!
//! # Threads
//!
//! Parallelism lives inside ONNX Runtime: one session per [`Embedder`], its
//! intra-op thread pool sized by [`EmbedderConfig::intra_threads`] (default:
//! all cores, right for batch reindexing; an interactive server that embeds
//! one query at a time can set it lower). Inter-op parallelism stays at 1 (the
//! graph is a sequential transformer). Runs are serialised by a mutex (the
//! session needs `&mut`), so calling [`Embedder::embed_batch`] from many rayon
//! tasks buys nothing and would oversubscribe the cores: give it large slices
//! from one thread instead. Idle ORT workers do not spin
//! (`session.intra_op.allow_spinning = 0`), so the cores are free for rayon
//! work (chunking, HNSW inserts) between batches. Tokenisation inside
//! fastembed may use the global rayon pool.
//!
//! # Cost
//!
//! The model is compute-bound: about 0.1 CPU-second per chunk of the
//! chunker's size (≤ 200 approximate tokens), i.e. roughly 15–20 chunks/s on
//! two idle cores; a 10,000-chunk vault takes on the order of 10 minutes to
//! embed from scratch. A short query takes tens of milliseconds (32 ms
//! measured on a heavily shared 2-core machine).
//!
//! # Fidelity
//!
//! On 1,000 real Markdown chunks, these vectors match an independent Python
//! `onnxruntime` + `tokenizers` computation (`tests/reference_embed.py`) with
//! mean cosine 1.0000000 (minimum 0.9999996).

use std::cmp::Reverse;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use fastembed::{
    InitOptionsUserDefined, Pooling, QuantizationMode, TextEmbedding, TokenizerFiles,
    UserDefinedEmbeddingModel,
};
use serde::Deserialize;

use super::error::{Result, VaultError};

/// Identifier of the model; stored with every index so vectors of different
/// models are never mixed.
pub const MODEL_ID: &str = "all-MiniLM-L6-v2-onnx-int8";
/// Length of every vector.
pub const DIMENSION: usize = 384;
/// Maximum input length in WordPiece tokens; longer texts are truncated.
pub const MAX_LENGTH: usize = 256;
/// Texts per model run. 32 keeps padding waste low once inputs are sorted by
/// length, and bounds memory (32 × 256 × 384 floats of hidden state).
pub const DEFAULT_BATCH_SIZE: usize = 32;
/// The files of the model directory.
pub const MODEL_FILES: [&str; 5] = [
    "model.onnx",
    "tokenizer.json",
    "config.json",
    "special_tokens_map.json",
    "tokenizer_config.json",
];

/// Environment variable naming the model directory.
pub const ENV_MODEL_DIR: &str = "CAIRN_MODEL_DIR";
/// Environment variable naming the ONNX Runtime shared library.
pub const ENV_ORT_LIB: &str = "CAIRN_ORT_LIB";

/// How to find and run the model. `Default` finds everything by itself and
/// uses all cores.
#[derive(Debug, Clone, Default)]
pub struct EmbedderConfig {
    /// Directory holding [`MODEL_FILES`]; overrides `CAIRN_MODEL_DIR` and discovery.
    pub model_dir: Option<PathBuf>,
    /// Path of `libonnxruntime.so`; overrides `CAIRN_ORT_LIB` and discovery.
    pub ort_lib: Option<PathBuf>,
    /// ONNX Runtime intra-op threads; `None` uses every available core.
    pub intra_threads: Option<usize>,
    /// Texts per model run; `None` or 0 uses [`DEFAULT_BATCH_SIZE`].
    pub batch_size: Option<usize>,
}

/// Where the model and the runtime were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelLocation {
    /// Directory holding [`MODEL_FILES`].
    pub model_dir: PathBuf,
    /// The ONNX Runtime shared library.
    pub ort_lib: PathBuf,
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
pub fn locate(config: &EmbedderConfig) -> Result<ModelLocation> {
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
        return Err(VaultError::ModelMissing {
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
    Err(VaultError::ModelMissing {
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
    let bytes = std::fs::read(path).map_err(|e| VaultError::io("read", path, e))?;
    let manifest: ModelsManifest =
        serde_json::from_slice(&bytes).map_err(|source| VaultError::Json {
            path: path.to_path_buf(),
            source,
        })?;
    if manifest.model_id != MODEL_ID || manifest.dimension != DIMENSION {
        return Err(VaultError::ModelManifest {
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
        Err(VaultError::ModelMissing {
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
    let runtime_err = |message: String| VaultError::RuntimeInit {
        path: lib.to_path_buf(),
        message,
    };
    let env = ort::init_from(lib)
        .map_err(|e| runtime_err(e.to_string()))?
        .with_name("cairn")
        .build()
        .map_err(|e| runtime_err(e.to_string()))?;
    tracing::debug!(lib = %lib.display(), "ONNX Runtime initialised");
    *slot = Some((lib.to_path_buf(), env.clone()));
    Ok(env)
}

/// A handle on the embedding model. Cheap to create; the model is located
/// and loaded on the first embedding (or [`Embedder::load`]). Safe to share
/// between threads; model runs are serialised.
pub struct Embedder {
    config: EmbedderConfig,
    model: Mutex<Option<TextEmbedding>>,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("config", &self.config)
            .field("loaded", &self.is_loaded())
            .finish()
    }
}

impl Default for Embedder {
    fn default() -> Self {
        Embedder::new(EmbedderConfig::default())
    }
}

impl Embedder {
    /// A handle that will use `config`; does no I/O.
    pub fn new(config: EmbedderConfig) -> Self {
        Embedder {
            config,
            model: Mutex::new(None),
        }
    }

    /// The model identifier ([`MODEL_ID`]).
    pub fn model_id(&self) -> &'static str {
        MODEL_ID
    }

    /// The vector length ([`DIMENSION`]).
    pub fn dimension(&self) -> usize {
        DIMENSION
    }

    /// Whether the model is loaded already.
    pub fn is_loaded(&self) -> bool {
        self.lock().is_some()
    }

    /// Loads the model now (to fail fast at start-up); no-op when loaded.
    pub fn load(&self) -> Result<()> {
        self.loaded().map(drop)
    }

    /// Embeds `texts`, returning one unit-length [`DIMENSION`]-vector per
    /// text in input order. Texts are sorted by length internally so each
    /// batch pads little, and truncated to [`MAX_LENGTH`] tokens.
    pub fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let batch_size = match self.config.batch_size {
            Some(n) if n > 0 => n,
            _ => DEFAULT_BATCH_SIZE,
        };
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| Reverse(texts[i].len()));

        let mut guard = self.loaded()?;
        let model = guard
            .as_mut()
            .expect("loaded() returns a guard holding the model");
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for idxs in order.chunks(batch_size) {
            let batch: Vec<&str> = idxs.iter().map(|&i| texts[i]).collect();
            let vectors =
                model
                    .embed(&batch, Some(batch.len()))
                    .map_err(|e| VaultError::Embed {
                        batch_len: batch.len(),
                        message: e.to_string(),
                    })?;
            if vectors.len() != batch.len() {
                return Err(VaultError::Embed {
                    batch_len: batch.len(),
                    message: format!("model returned {} vectors", vectors.len()),
                });
            }
            for (&i, mut v) in idxs.iter().zip(vectors) {
                if v.len() != DIMENSION {
                    return Err(VaultError::Embed {
                        batch_len: batch.len(),
                        message: format!("model returned a {}-dimensional vector", v.len()),
                    });
                }
                l2_normalize(&mut v);
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// Embeds one query (no prefix: MiniLM is symmetric).
    pub fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        let mut v = self.embed_batch(&[text])?;
        Ok(v.pop().expect("one vector per text"))
    }

    fn lock(&self) -> MutexGuard<'_, Option<TextEmbedding>> {
        self.model.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The locked model, loading it first if needed. A failed load is not
    /// cached: a later call tries again (e.g. after `models/fetch.sh` ran).
    fn loaded(&self) -> Result<MutexGuard<'_, Option<TextEmbedding>>> {
        let mut guard = self.lock();
        if guard.is_none() {
            *guard = Some(self.load_model()?);
        }
        Ok(guard)
    }

    fn load_model(&self) -> Result<TextEmbedding> {
        let started = std::time::Instant::now();
        let location = locate(&self.config)?;
        let env = ort_environment(&location.ort_lib)?;
        let dir = &location.model_dir;
        let read = |name: &str| {
            let p = dir.join(name);
            std::fs::read(&p).map_err(|e| VaultError::io("read", p, e))
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
        let threads = self
            .config
            .intra_threads
            .filter(|&n| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let options = InitOptionsUserDefined::new()
            .with_environment(env)
            .with_max_length(MAX_LENGTH)
            .with_intra_threads(threads)
            .with_session_config("session.intra_op.allow_spinning", "0")
            .with_session_config("session.inter_op.allow_spinning", "0");
        let embedding = TextEmbedding::try_new_from_user_defined(model, options).map_err(|e| {
            VaultError::ModelLoad {
                dir: dir.clone(),
                message: e.to_string(),
            }
        })?;
        tracing::info!(
            model = MODEL_ID,
            dir = %dir.display(),
            threads,
            ms = started.elapsed().as_millis() as u64,
            "embedding model loaded"
        );
        Ok(embedding)
    }
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Dot product; the cosine similarity of unit vectors.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::OnceLock;

    /// One model per test binary: loading costs ~0.3 s and ONNX Runtime
    /// allows one environment per process anyway.
    fn embedder() -> &'static Embedder {
        static E: OnceLock<Embedder> = OnceLock::new();
        E.get_or_init(Embedder::default)
    }

    #[test]
    fn embedder_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Embedder>();
    }

    #[test]
    fn new_handle_does_no_io() {
        let e = Embedder::new(EmbedderConfig {
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
        let e = Embedder::new(EmbedderConfig {
            model_dir: Some("/nonexistent/cairn-model".into()),
            ..Default::default()
        });
        let err = e.embed_query("hello").expect_err("no model there");
        assert!(matches!(err, VaultError::ModelMissing { .. }), "{err:?}");
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
                cos > 0.9999,
                "text {i}: cosine {cos} between batch and single"
            );
        }
        // Neighbouring texts differ: the order really is the input order.
        assert!(dot(&batch[0], &batch[1]) < 0.999);
    }

    #[test]
    fn second_embedder_shares_the_runtime_and_agrees() {
        // ONNX Runtime allows one environment per process: a second handle
        // (other thread count, other batch size) must reuse it.
        let single = Embedder::new(EmbedderConfig {
            intra_threads: Some(1),
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
            assert!(dot(x, y) > 0.9999, "{}", dot(x, y));
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
