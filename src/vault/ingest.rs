//! Turning files into stored documents: read and hash, chunk, reuse the embeddings of
//! unchanged chunks, embed the rest in large batches, and commit each file in its own
//! transaction. Shared by `cairn reindex` and `vault_update`.
//!
//! A file is *unchanged* when its stored document has the same content hash, chunker
//! version, embedder ([`crate::embed::Embed::model_id`]) and collection: it is not even chunked. A changed file is
//! chunked; each chunk whose heading path and text hash match a stored chunk of the
//! same document reuses that chunk's vector (and keeps its row and id), the others are
//! embedded.
//!
//! A file with more chunks than [`MAX_FILE_CHUNKS`] is refused ([`check_budget`]), and
//! embedding gives up between two model runs when the process or the run stops
//! ([`Vault::embed_missing`]): a file is committed whole or not at all.

use crate::base::sha256_hex;
use crate::error::{Error, Result};
use crate::paths::DirHandle;

use super::chunk::{CHUNKER_VERSION, Chunk, ChunkedDoc};
use super::formats::chunk_file;
use crate::store::Store;

use super::documents::{DocWrite, StoredDoc, WriteStats, chunk_embeddings, chunk_key, find_doc};
use super::handle::Vault;

/// Largest file the vault reads, in bytes.
pub(crate) const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Most chunks one file may have: the per-file budget of every indexing path
/// (`vault_update`, a follower's batch, `cairn reindex`). The model's time grows with the
/// chunks (0.03-0.1 CPU-second each), so the budget bounds what one file (an agent's, in
/// a root it may write) costs: about 3.6 MiB of prose, 4-14 CPU-minutes. A file over it
/// is refused by `vault_update` and skipped, with the reason, by the others
/// (docs/vault.md, "A per-file budget").
pub(crate) const MAX_FILE_CHUNKS: usize = 8_192;

/// One file read from disk.
#[derive(Debug)]
pub(crate) struct FileRead {
    pub(crate) bytes: Vec<u8>,
    pub(crate) hash: String,
    pub(crate) modified_at: Option<String>,
}

/// Open the document `rel` beneath the root handle and read it (a regular file with one
/// link, at most [`MAX_FILE_BYTES`], see [`crate::paths::DirHandle::open_file`]) and hash
/// it. `None` when it does not exist.
pub(crate) fn read_file(root: &DirHandle, rel: &str) -> Result<Option<FileRead>> {
    let Some(file) = root.open_file(rel, "path", MAX_FILE_BYTES)? else {
        return Ok(None);
    };
    let modified_at = file.metadata().modified().ok().and_then(|t| {
        let t: time::OffsetDateTime = t.into();
        t.replace_nanosecond(0)
            .ok()?
            .format(&time::format_description::well_known::Rfc3339)
            .ok()
    });
    let bytes = file.read_capped()?;
    Ok(Some(FileRead {
        hash: sha256_hex(&bytes),
        bytes,
        modified_at,
    }))
}

/// Whether a stored document is current for this file content and collection, as
/// embedded by the embedder `model`.
pub(crate) fn is_current(doc: &StoredDoc, hash: &str, collection: &str, model: &str) -> bool {
    doc.content_hash == hash
        && doc.chunker_version == CHUNKER_VERSION
        && doc.embed_model == model
        && doc.collection == collection
}

/// A changed file, chunked, with the vectors it can reuse.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) root_key: String,
    pub(crate) path: String,
    pub(crate) collection: String,
    pub(crate) file: FileRead,
    pub(crate) doc: ChunkedDoc,
    /// One slot per chunk: reused vectors are filled, the others wait for the model.
    pub(crate) vectors: Vec<Option<Vec<f32>>>,
}

impl Pending {
    /// Chunk the file by its format ([`super::formats`]; a file its format refuses is an
    /// [`Error::InvalidInput`] naming why) and look up reusable vectors (a read of the
    /// stored chunks; only vectors of the embedder `model` are reused).
    pub(crate) fn prepare(
        store: &Store,
        model: &str,
        root_key: &str,
        path: &str,
        collection: &str,
        file: FileRead,
        existing: Option<&StoredDoc>,
    ) -> Result<Pending> {
        let doc = chunk_file(path, &file.bytes)?;
        check_budget(path, &doc)?;
        let reusable = match existing {
            Some(d) if d.embed_model == model => store.read(|c| chunk_embeddings(c, d.id))?,
            _ => Default::default(),
        };
        let vectors = doc
            .chunks
            .iter()
            .map(|ch| reusable.get(&chunk_key(ch)).cloned())
            .collect();
        Ok(Pending {
            root_key: root_key.to_string(),
            path: path.to_string(),
            collection: collection.to_string(),
            file,
            doc,
            vectors,
        })
    }

    /// Chunks still needing a vector.
    pub(crate) fn missing(&self) -> usize {
        self.vectors.iter().filter(|v| v.is_none()).count()
    }
}

/// Refuse a file with more than [`MAX_FILE_CHUNKS`] chunks ([`Error::InvalidInput`] on
/// `path`, saying how many it has and what to do).
pub(crate) fn check_budget(path: &str, doc: &ChunkedDoc) -> Result<()> {
    let n = doc.chunks.len();
    if n > MAX_FILE_CHUNKS {
        return Err(Error::invalid(
            "path",
            format!(
                "{path} has {n} chunks, over the per-file budget of {MAX_FILE_CHUNKS}; \
                 split it into smaller files (nothing of it is indexed)"
            ),
        ));
    }
    Ok(())
}

/// Whether the file `bytes` is refused by its format or has more chunks than
/// [`MAX_FILE_CHUNKS`] (it chunks them).
pub(crate) fn refused(path: &str, bytes: &[u8]) -> bool {
    chunk_file(path, bytes)
        .and_then(|doc| check_budget(path, &doc))
        .is_err()
}

/// What committing one file did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Committed {
    /// Chunks the model embedded.
    pub(crate) embedded: usize,
    /// Chunks whose stored vector was reused.
    pub(crate) reused: usize,
    /// Stored chunks deleted.
    pub(crate) removed: usize,
    /// Chunks the document has now.
    pub(crate) chunks: usize,
    /// Hidden characters removed from the file's text.
    pub(crate) sanitized: crate::text::Removed,
}

impl Vault<'_> {
    /// The identifier of this process's embedder, stored with every document.
    pub(crate) fn model_id(&self) -> &str {
        self.state.embedder.model_id()
    }

    /// Embed every missing vector of `batch` with one call to the model (which sorts by
    /// token count and runs in batches across cores), then commit each file in its own
    /// transaction.
    pub(crate) fn embed_and_commit(&self, batch: Vec<Pending>) -> Result<Vec<Committed>> {
        let fresh = self.embed_missing(&batch, None)?;
        self.commit_files(batch, fresh)
    }

    /// The vectors of every chunk of `batch` that has none yet, in order, from one call
    /// to the model. It gives up between two model runs when the process stops indexing
    /// ([`super::VaultState::stop_indexing`]) or `stop` is set: nothing is committed
    /// before every vector is there, so a file is stored whole or not at all.
    pub(crate) fn embed_missing(
        &self,
        batch: &[Pending],
        stop: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<Vec<Vec<f32>>> {
        let texts: Vec<String> = batch
            .iter()
            .flat_map(|p| {
                p.doc
                    .chunks
                    .iter()
                    .zip(&p.vectors)
                    .filter(|(_, v)| v.is_none())
                    .map(|(c, _)| c.embedding_text())
            })
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let stopping = || {
            self.state.stopping()
                || stop.is_some_and(|s| s.load(std::sync::atomic::Ordering::SeqCst))
        };
        self.state
            .embedder
            .embed_batch_until(&refs, &stopping)
            .map_err(Error::from)
    }

    /// Commit each file of `batch` in its own transaction, its missing vectors taken in
    /// order from `fresh` (what [`Vault::embed_missing`] returned for `batch`).
    pub(crate) fn commit_files(
        &self,
        batch: Vec<Pending>,
        fresh: Vec<Vec<f32>>,
    ) -> Result<Vec<Committed>> {
        let model = self.model_id();
        let mut fresh = fresh.into_iter();
        let mut out = Vec::with_capacity(batch.len());
        for p in batch {
            let embedded = p.missing();
            let sanitized = p.doc.removed;
            let chunks: Vec<(Chunk, Vec<f32>)> = p
                .doc
                .chunks
                .iter()
                .cloned()
                .zip(p.vectors)
                .map(|(c, v)| match v.or_else(|| fresh.next()) {
                    Some(v) => Ok((c, v)),
                    None => Err(Error::Internal("the model returned too few vectors".into())),
                })
                .collect::<Result<_>>()?;
            let front_matter = p
                .doc
                .front_matter
                .as_ref()
                .and_then(|fm| serde_json::to_string(fm).ok());
            let write = DocWrite {
                root_key: &p.root_key,
                path: &p.path,
                collection: &p.collection,
                content_hash: &p.file.hash,
                title: p.doc.title.as_deref(),
                modified_at: p.file.modified_at.as_deref(),
                front_matter,
                chunker_version: CHUNKER_VERSION,
                embed_model: model,
                chunks: &chunks,
            };
            let stats: WriteStats = self
                .store
                .write(|tx| super::documents::write_document(tx, &write))?;
            out.push(Committed {
                embedded,
                reused: chunks.len() - embedded,
                removed: stats.deleted,
                chunks: chunks.len(),
                sanitized,
            });
        }
        Ok(out)
    }

    /// The stored document for `(root_key, path)`.
    pub(crate) fn stored_doc(&self, root_key: &str, path: &str) -> Result<Option<StoredDoc>> {
        self.store.read(|c| find_doc(c, root_key, path))
    }
}
