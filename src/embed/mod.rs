//! The embedder: texts into unit vectors, and the vector index that searches them, shared
//! by the vault (chunks) and the learnings (their semantic half). It knows nothing of
//! either: no store, no tool.
//!
//! | module | owns |
//! | --- | --- |
//! | [`embedder`] | the [`Embed`] trait (texts → unit vectors, the identity stored with them), [`DIMENSION`], [`EmbedStats`] |
//! | [`model`] | [`ModelEmbedder`], the local embedding model (all-MiniLM-L6-v2, int8 ONNX) run through ONNX Runtime: locating the files, one-time runtime initialisation, lazy loading, batched L2-normalised embeddings, the query cache |
//! | [`threading`] | ONNX Runtime's thread settings ([`Threading`], [`Spin`]) from flags or the environment |
//! | [`foreground`] | [`foreground::Foreground`], the calls a server has in flight: background embedding waits for a quiet moment between them |
//! | [`hash`] | [`HashEmbedder`], a deterministic [`Embed`] for tests and benchmarks (hashed words and word pairs); never selected by a command or tool |
//! | [`vector`] | the dot product, L2 normalisation and the stored form of a vector |
//! | [`hnsw`] | the vector index over `hnsw_rs` (cosine similarity on unit vectors), filtered search, crash-safe generational persistence and the [`hnsw::IndexManifest`] that ties an index to its model and chunker |
//! | [`error`] | [`EmbedError`], the error type of the embedders; [`IndexError`], the vector index's |

pub mod embedder;
pub mod error;
pub(crate) mod foreground;
pub mod hash;
pub mod hnsw;
pub mod model;
pub mod threading;
pub mod vector;

pub use embedder::{DIMENSION, Embed, EmbedStats};
pub use error::{EmbedError, IndexError, Result};
pub use hash::{HASH_MODEL_ID, HashEmbedder};
pub use model::{EmbedderConfig, MODEL_ID, ModelEmbedder};
pub use threading::{Spin, Threading};
pub use vector::{dot, l2_normalize};
