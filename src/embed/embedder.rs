//! What every embedder is: the [`Embed`] trait (texts → unit vectors, and the identity
//! stored with them), the vectors' length and the token counts an embedder reports.

use std::time::Duration;

use super::error::{EmbedError, Result};
use super::threading::Threading;

/// Length of every vector.
pub const DIMENSION: usize = 384;

/// What turns texts into vectors: the local model ([`super::model::ModelEmbedder`]) in every
/// command and server, or a deterministic stand-in in tests
/// ([`super::hash::HashEmbedder`]). Every vector is unit length and
/// [`Embed::dimension`] long; [`Embed::model_id`] is stored with every document,
/// learning embedding and HNSW graph, so vectors of two embedders are never mixed
/// and a graph built by one is never served by another.
pub trait Embed: Send + Sync + std::fmt::Debug {
    /// Stored with every vector and index built by this embedder.
    fn model_id(&self) -> &str;

    /// Length of every vector.
    fn dimension(&self) -> usize;

    /// One unit-length vector per text, in input order.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;

    /// Whether [`Embed::embed_query`] would answer `text` from a cache, without a run of
    /// the model (a caller then has nothing to overlap with the embedding).
    fn has_query(&self, _text: &str) -> bool {
        false
    }

    /// Embeds one query (no prefix: MiniLM is symmetric).
    fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        let mut v = self.embed_batch(&[text])?;
        v.pop().ok_or_else(|| EmbedError::Batch {
            batch_len: 1,
            message: "no vector returned".into(),
        })
    }

    /// [`Embed::embed_batch`] for work that may be abandoned (a document being
    /// indexed): asks `stop` between two model runs, and gives up with
    /// [`EmbedError::Stopped`] once it says so.
    fn embed_batch_until(&self, texts: &[&str], stop: &dyn Fn() -> bool) -> Result<Vec<Vec<f32>>> {
        if stop() {
            return Err(EmbedError::Stopped {
                done: 0,
                of: texts.len(),
            });
        }
        self.embed_batch(texts)
    }

    /// Embeds for work nobody waits on (a learning's vector after its write was
    /// acknowledged): runs once no foreground call ([`Embed::embed_batch`],
    /// [`Embed::embed_query`]) is using or waiting for the model, or once `patience`
    /// has passed, so background work delays a query by at most one of its own runs.
    /// Callers keep `texts` short for that reason.
    fn embed_idle(&self, texts: &[&str], patience: Duration) -> Result<Vec<Vec<f32>>> {
        let _ = patience;
        self.embed_batch(texts)
    }

    /// Makes the embedder ready now (to fail fast); a no-op when it needs nothing.
    fn load(&self) -> Result<()> {
        Ok(())
    }

    /// The thread settings runs use (an embedder without threads: the default).
    fn threading(&self) -> Threading {
        Threading::default()
    }

    /// Changes the thread settings for later runs (ignored without threads).
    fn set_threading(&self, _threading: Threading) {}

    /// Token counts of everything embedded (zero where tokens are not counted).
    fn stats(&self) -> EmbedStats {
        EmbedStats::default()
    }
}

/// Token counts of what an [`ModelEmbedder`] ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmbedStats {
    /// Texts embedded.
    pub texts: u64,
    /// Model runs (batches).
    pub batches: u64,
    /// WordPiece tokens of the texts (special tokens included, after truncation).
    pub tokens: u64,
    /// Padding tokens the model ran on top of `tokens`.
    pub padding: u64,
    /// Queries answered from the query cache, without the model.
    pub(crate) query_cache_hits: u64,
    /// Document batches running now (0 or 1: they take turns).
    pub documents_running: u64,
    /// Query runs that ran while a document batch was running (queries have a session
    /// of their own: they never wait for one).
    pub queries_beside_documents: u64,
}
