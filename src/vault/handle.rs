//! [`Vault`], the handle the vault's operations are methods of: the store and the
//! process's [`VaultState`] (embedder, HNSW graph, BM25 index). The facade
//! (`crate::api`) builds one per call; the operations live in [`super::service`]
//! (search, update, delete), [`super::reindex`], [`super::ingest`] and
//! [`super::identity`].

use crate::store::Store;

use super::live::VaultState;

/// What the vault operations work over.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Vault<'a> {
    pub(crate) store: &'a Store,
    pub(crate) state: &'a VaultState,
}
