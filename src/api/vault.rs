//! The Knowledge Vault: search (whole vault, some collections, the bound project's),
//! update and delete one document, reindex a directory; over the `vault::Vault` handle
//! (the store and the process's vault state: embedder, HNSW graph, BM25 index).

use crate::access::context::WorkContext;
use crate::embed::EmbedStats;
use crate::error::Result;
use crate::vault::Vault;
use crate::vault::browse::{DocumentPage, DocumentText, StoredChunk};
use crate::vault::documents::VaultHit;
use crate::vault::follow_files::{FileFollower, FollowHost, FollowScope, Freshness, Shared};
use crate::vault::reindex::{ReindexOptions, ReindexProgress, ReindexSummary};
use crate::vault::rerank::Ranking;
use crate::vault::roots::{CollectionStatus, FollowedRoot};
use crate::vault::service::{DeleteResult, Fresh, KnowledgeResults, UpdateResult};
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

use super::Cairn;

/// A follower works over this Cairn's vault.
impl FollowHost for Cairn {
    fn vault(&self) -> Vault<'_> {
        Cairn::vault(self)
    }

    fn set_follower(&self, follower: Option<&Arc<Shared>>) {
        *self.follower.lock().unwrap_or_else(PoisonError::into_inner) =
            follower.map(Arc::downgrade);
    }
}

impl Cairn {
    /// The vault follower running in this process, if any.
    fn follower(&self) -> Option<Arc<Shared>> {
        self.follower
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(Weak::upgrade)
    }

    /// Follow the recorded roots of `scope` until the follower is dropped.
    pub fn follow_vault(self: &Arc<Self>, scope: FollowScope) -> Result<FileFollower> {
        FileFollower::start(self.clone(), scope)
    }
}

impl Cairn {
    /// The vault operations over this store and this process's vault state.
    fn vault(&self) -> Vault<'_> {
        Vault {
            store: &self.store,
            state: &self.vault,
        }
    }

    /// The best chunks for `query` (`top_k` default 5) in the collections named (every
    /// collection when `None`), at most `max_per_document` (default 2; 0: no cap) each.
    pub fn vault_search(
        &self,
        query: &str,
        top_k: Option<usize>,
        collections: Option<&[String]>,
        max_per_document: Option<usize>,
    ) -> Result<Vec<VaultHit>> {
        self.vault()
            .search(query, top_k, collections, max_per_document)
    }

    /// Catch the vault's graph and BM25 index up with the database now (a daemon woken
    /// by another host's write).
    pub(crate) fn vault_catch_up(&self) -> Result<()> {
        self.vault().catch_up()
    }

    /// What this process's embedding model did (runs, texts, tokens, query-cache hits),
    /// for the vault and the learnings alike: `/metrics` reads it.
    pub(crate) fn model_stats(&self) -> EmbedStats {
        self.vault.embedder.stats()
    }

    /// The query's embedding by this process's embedder (`cairn eval vault` embeds once
    /// and ranks under several orderings).
    pub(crate) fn vault_prepare_query(&self, query: &str) -> Result<()> {
        self.vault().prepare_query(query)
    }

    pub(crate) fn vault_query_vector(&self, query: &str) -> Result<Vec<f32>> {
        self.vault().query_vector(query)
    }

    /// Rank with a query vector already computed, under an explicit ranking.
    pub fn vault_rank(
        &self,
        query: &str,
        vector: Option<&[f32]>,
        top_k: usize,
        collections: Option<&[String]>,
        ranking: &Ranking,
    ) -> Result<Vec<VaultHit>> {
        self.vault()
            .rank(query, vector, top_k, collections, ranking)
    }

    /// `search_knowledge`: the bound project's collections (`top_k` default 5,
    /// `min_score` default 0.3).
    pub fn search_knowledge(
        &self,
        work: &WorkContext,
        query: &str,
        top_k: Option<usize>,
        min_score: Option<f32>,
        max_per_document: Option<usize>,
        fresh: bool,
    ) -> Result<KnowledgeResults> {
        let follower = self.follower();
        let fresh = fresh.then_some(Fresh(follower.as_deref()));
        self.vault()
            .search_knowledge(work, query, top_k, min_score, max_per_document, fresh)
    }

    /// Every collection with its documents and followed roots (`cairn vault status`).
    pub(crate) fn vault_status(&self) -> Result<Vec<CollectionStatus>> {
        let live = self.follower().map(|f| f.reports());
        self.vault().status(live.as_ref())
    }

    /// Wait (at most `timeout`) for the changes to the followed roots of `collections`
    /// to be indexed: through this process's follower, or by comparing files and index.
    pub fn vault_wait_fresh(
        &self,
        collections: Option<&[String]>,
        timeout: Duration,
    ) -> Result<Freshness> {
        let follower = self.follower();
        self.vault()
            .wait_fresh(collections, timeout, follower.as_deref())
    }

    /// `cairn vault sync`: wait until the files of the followed roots match the index.
    pub fn vault_sync(
        &self,
        collections: Option<&[String]>,
        timeout: Duration,
    ) -> Result<Freshness> {
        self.vault().sync(collections, timeout)
    }

    /// The recorded roots (`cairn reindex --watch` follows the one it just indexed).
    pub fn vault_followed_roots(&self) -> Result<Vec<FollowedRoot>> {
        self.vault().followed_roots()
    }

    /// A page of the indexed documents of `collections` (all when `None`) after `after`
    /// (`(collection, path)`), in that order (MCP `resources/list`).
    pub(crate) fn vault_documents(
        &self,
        collections: Option<&[String]>,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<DocumentPage> {
        self.vault().documents(collections, after, limit)
    }

    /// The Markdown of one indexed document of `collections`, read now (MCP
    /// `resources/read`).
    pub(crate) fn vault_document(
        &self,
        work: &WorkContext,
        collections: Option<&[String]>,
        collection: &str,
        path: &str,
    ) -> Result<DocumentText> {
        self.vault()
            .document_text(work, collections, collection, path)
    }

    /// The stored chunks of one indexed document, in order (the web page).
    pub(crate) fn vault_document_chunks(
        &self,
        collection: &str,
        path: &str,
    ) -> Result<Vec<StoredChunk>> {
        self.vault().document_chunks(collection, path)
    }

    /// A mark of the list of `collections` (all when `None`) that moves when a document
    /// comes or goes.
    pub(crate) fn vault_list_mark(&self, collections: Option<&[String]>) -> Result<(i64, i64)> {
        self.vault().list_mark(collections)
    }

    /// The indexed content hash of each of `documents` that is indexed.
    pub(crate) fn vault_document_hashes(
        &self,
        documents: &[(String, String)],
    ) -> Result<std::collections::HashMap<(String, String), String>> {
        self.vault().document_hashes(documents)
    }

    /// `vault_update`: re-read, re-chunk and re-embed one file of the bound root.
    pub fn vault_update(&self, work: &WorkContext, path: &str) -> Result<UpdateResult> {
        self.vault().update(work, path)
    }

    /// `vault_delete`: remove one document of the bound root.
    pub fn vault_delete(&self, work: &WorkContext, path: &str) -> Result<DeleteResult> {
        self.vault().delete(work, path)
    }

    /// `cairn reindex DIR`.
    pub fn vault_reindex(
        &self,
        opts: &ReindexOptions,
        progress: &dyn Fn(ReindexProgress),
    ) -> Result<ReindexSummary> {
        self.vault().reindex(opts, progress)
    }
}
