//! The vault's operations, on the [`Vault`] handle (the store and the process's
//! [`VaultState`](super::VaultState)): search (whole vault or some collections), update one file, delete
//! one document. `cairn reindex` is in [`super::reindex`]. The embedding model loads on
//! the first call that needs it. The facade (`crate::api`) delegates here.
//!
//! Decisions:
//! - Defaults live here, for the CLI and the tools alike: `top_k` [`DEFAULT_TOP_K`] (5),
//!   `min_score` [`DEFAULT_MIN_SCORE`] (0.3), the per-document cap
//!   [`super::rerank::MAX_PER_DOCUMENT`] (2).
//! - `search_knowledge` searches the collections named by the bound project's
//!   `vault.collections` setting; a project without one gets an error saying how to set
//!   it. Hits under `min_score` are dropped and counted; `min_score` applies to
//!   `score`, the ranking key, so the results kept are a prefix of the ranking.
//! - `vault_update` in a project records the file as a followed root
//!   ([`super::roots`]): a daemon keeps it current from then on.
//! - `vault_update` of a file not yet in the vault stores it in the existing
//!   document's collection, else the project's first configured collection, else a
//!   collection named after the project's slug (or the root directory without project).
//! - Both `vault_update` and `vault_delete` check the path's shape with
//!   [`crate::paths::relative_components`] (no `..`, no absolute paths, no NUL) and key
//!   the document by its components joined with `/` ([`super::identity`]).
//!   `vault_update` opens the file beneath a handle on the root
//!   ([`crate::paths::DirHandle::open_file`]: no symlink anywhere along the path, a
//!   regular file with one link, at most [`super::ingest::MAX_FILE_BYTES`], read through
//!   that bound); `vault_delete` reads no file but refuses a path whose existing part
//!   has a symlink, the same way.

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use crate::access::context::WorkContext;
use crate::error::{Error, Result};
use crate::paths::{DirHandle, relative_components, shown};

use super::documents::{VaultHit, chunk_collection, chunk_vector, delete_document, load_hit};
use super::formats::{EXTENSIONS, FileFilter, Format};
use super::handle::Vault;
use super::identity::DocRoot;
use super::ingest::{Pending, is_current, read_file};
use super::lexical::lexical_dir;
use super::live::vault_dir;
use super::rerank::{self, Candidate, Ranking};
use super::roots::{RootKind, covers};

/// Largest `top_k` of a vault search.
pub(crate) const MAX_TOP_K: usize = 50;
/// `top_k` of a search that names none.
pub const DEFAULT_TOP_K: usize = 5;
/// `min_score` of a `search_knowledge` that names none.
pub const DEFAULT_MIN_SCORE: f32 = 0.3;
/// Longest query, in characters.
pub(crate) const MAX_QUERY_CHARS: usize = 2000;
/// Largest `top_k` of `search_knowledge` (an agent's project search returns a page).
pub const MAX_KNOWLEDGE_TOP_K: usize = 20;
/// Largest `max_per_document` a search accepts (0 means no cap).
pub const MAX_PER_DOCUMENT_LIMIT: usize = 50;

/// The result of `search_knowledge`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct KnowledgeResults {
    /// Hits at or above `min_score`, best `score` first.
    pub results: Vec<VaultHit>,
    /// The collections searched (the project's `vault.collections`).
    pub collections: Vec<String>,
    /// Hits among the best `top_k` that scored below `min_score` and were dropped.
    pub below_min_score: usize,
    /// The best score seen, kept or not; absent when the collections are empty.
    pub best_score: Option<f32>,
    /// Why there are no results, when there are none.
    pub note: Option<String>,
    /// With `fresh: true`: whether the wait for pending changes completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "super::follow_files::Freshness")]
    pub(crate) freshness: Option<super::follow_files::Freshness>,
}

/// `fresh: true` on a search: wait for pending changes first, through this process's
/// follower when it has one ([`Vault::wait_fresh`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fresh<'a>(pub Option<&'a super::follow_files::Shared>);

/// The result of `vault_update`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct UpdateResult {
    /// The document's path relative to the project root.
    pub path: String,
    pub collection: String,
    /// False when the file's content was already indexed (nothing was done).
    pub changed: bool,
    /// Chunks the document has now.
    pub chunks: usize,
    /// Chunks embedded by the model.
    pub embedded: usize,
    /// Chunks whose stored embedding was reused.
    pub reused: usize,
    /// Old chunks removed.
    pub(crate) removed: usize,
    /// Hidden characters removed from the file's text before chunking, per class;
    /// absent when none were (see docs/security.md, "Stored text").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) removed_characters: Option<crate::text::Removed>,
}

/// The result of `vault_delete`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DeleteResult {
    /// The document's path relative to the project root.
    pub(crate) path: String,
    /// Always true (a missing entry is an error).
    pub deleted: bool,
    /// Chunks (and their vectors) removed.
    pub chunks_removed: usize,
}

fn check_query(query: &str, top_k: usize) -> Result<()> {
    if query.trim().is_empty() || query.chars().count() > MAX_QUERY_CHARS {
        return Err(Error::invalid(
            "query",
            format!("must be 1-{MAX_QUERY_CHARS} characters of text"),
        ));
    }
    if top_k == 0 || top_k > MAX_TOP_K {
        return Err(Error::invalid("top_k", format!("must be 1-{MAX_TOP_K}")));
    }
    Ok(())
}

fn check_per_document(max_per_document: Option<usize>) -> Result<()> {
    match max_per_document {
        Some(n) if n > MAX_PER_DOCUMENT_LIMIT => Err(Error::invalid(
            "max_per_document",
            format!("must be 0-{MAX_PER_DOCUMENT_LIMIT} (0: no cap)"),
        )),
        _ => Ok(()),
    }
}

impl Vault<'_> {
    /// The `top_k` (default [`DEFAULT_TOP_K`]) chunks most relevant to `query` over the
    /// collections named (every collection when `None`), ranked as [`Ranking::default`]
    /// says ([`super::rerank`]).
    pub(crate) fn search(
        &self,
        query: &str,
        top_k: Option<usize>,
        collections: Option<&[String]>,
        max_per_document: Option<usize>,
    ) -> Result<Vec<VaultHit>> {
        check_per_document(max_per_document)?;
        let ranking = Ranking {
            max_per_document: max_per_document.or(Ranking::default().max_per_document),
            ..Ranking::default()
        };
        self.search_with(query, top_k.unwrap_or(DEFAULT_TOP_K), collections, &ranking)
    }

    /// [`Vault::search`] with an explicit ranking (`cairn eval vault` compares them). A
    /// `max_per_document` of 0 means no cap.
    pub(crate) fn search_with(
        &self,
        query: &str,
        top_k: usize,
        collections: Option<&[String]>,
        ranking: &Ranking,
    ) -> Result<Vec<VaultHit>> {
        check_query(query, top_k)?;
        let vector = match ranking.sources.dense() {
            true => Some(self.query_vector(query)?),
            false => None,
        };
        self.rank(query, vector.as_deref(), top_k, collections, ranking)
    }

    /// Catch this process's graph and BM25 index up with the database now (see
    /// [`super::live::VaultState::catch_up`]).
    pub(crate) fn catch_up(&self) -> Result<()> {
        self.state
            .catch_up(self.store, &vault_dir(&self.store.index_dir()))
    }

    /// Embed `query` ahead of its search: the vector waits in the embedder's query cache. A
    /// daemon runs this before a call waits for its lane (`crate::mcp::lanes`), so that
    /// queries arriving together still share one model run.
    pub(crate) fn prepare_query(&self, query: &str) -> Result<()> {
        check_query(query, 1)?;
        self.query_vector(query).map(drop)
    }

    /// The query's embedding by this process's embedder.
    pub(crate) fn query_vector(&self, query: &str) -> Result<Vec<f32>> {
        Ok(self.state.embedder.embed_query(query)?)
    }

    /// Rank with a query embedding computed by the caller (`None` only for
    /// [`Sources::Lexical`](super::rerank::Sources::Lexical)).
    pub(crate) fn rank(
        &self,
        query: &str,
        vector: Option<&[f32]>,
        top_k: usize,
        collections: Option<&[String]>,
        ranking: &Ranking,
    ) -> Result<Vec<VaultHit>> {
        let ranking = Ranking {
            max_per_document: ranking.max_per_document.filter(|&n| n > 0),
            ..*ranking
        };
        let accept = |c: &str| collections.is_none_or(|cs| cs.iter().any(|x| x == c));
        let n = rerank::candidates(top_k);
        let index_dir = self.store.index_dir();
        let dense = match (ranking.sources.dense(), vector) {
            (true, Some(q)) => {
                self.state
                    .search(self.store, &vault_dir(&index_dir), q, n, accept)?
            }
            (true, None) => {
                return Err(Error::Internal(
                    "a dense ranking needs the query vector".into(),
                ));
            }
            (false, _) => Vec::new(),
        };
        let lexical = match ranking.sources.lexical() {
            true => self.lexical_candidates(query, n, &accept)?,
            false => Vec::new(),
        };
        let (mut hits, mut candidates) = self.load_candidates(&dense, &lexical, vector, &accept)?;
        if ranking.overlap() {
            let texts: Vec<String> = hits
                .iter()
                .map(|h| format!("{}\n{}", h.metadata.heading_path, h.text))
                .collect();
            for (c, o) in candidates.iter_mut().zip(rerank::overlaps(query, &texts)) {
                c.overlap = o;
            }
        }
        // Prose has no item path: a search among documents only computes nothing.
        if ranking.path() && candidates.iter().any(|c| c.code) {
            let paths: Vec<String> = hits
                .iter()
                .zip(&candidates)
                .map(|(h, c)| match c.code {
                    true => super::lexical::path_words(&h.metadata.heading_path),
                    false => String::new(),
                })
                .collect();
            for (c, o) in candidates.iter_mut().zip(rerank::overlaps(query, &paths)) {
                c.path = o;
            }
        }
        let identifier = rerank::names_a_held_identifier(
            query,
            hits.iter()
                .flat_map(|h| [h.text.as_str(), h.metadata.heading_path.as_str()]),
        );
        let ranked = rerank::rank(&candidates, &ranking, identifier, top_k);
        let mut slots: Vec<Option<VaultHit>> = hits.drain(..).map(Some).collect();
        Ok(ranked
            .into_iter()
            .filter_map(|r| {
                let mut h = slots[r.index].take()?;
                h.score = r.score;
                h.cosine = candidates[r.index].cosine;
                h.lexical = r.lexical;
                h.overlap = candidates[r.index].overlap;
                h.path_overlap = candidates[r.index].path;
                Some(h)
            })
            .collect())
    }

    /// The rows of the dense and lexical candidates (each once, dense first) in the
    /// accepted collections, read in one transaction: the hits, and the candidates to
    /// rank, index for index. A chunk only BM25 found gets its stored vector dotted with
    /// `vector`; a chunk deleted since it was indexed is skipped.
    fn load_candidates(
        &self,
        dense: &[(u64, f32)],
        lexical: &[(u64, f32)],
        vector: Option<&[f32]>,
        accept: &dyn Fn(&str) -> bool,
    ) -> Result<(Vec<VaultHit>, Vec<Candidate>)> {
        let mut order: Vec<u64> = Vec::with_capacity(dense.len() + lexical.len());
        let mut found: HashMap<u64, (Option<f32>, f32)> = HashMap::new();
        for &(id, cos) in dense {
            order.push(id);
            found.insert(id, (Some(cos), 0.0));
        }
        for &(id, bm25) in lexical {
            found
                .entry(id)
                .and_modify(|e| e.1 = bm25)
                .or_insert_with(|| {
                    order.push(id);
                    (None, bm25)
                });
        }
        self.store.snapshot(|c| {
            let mut hits = Vec::with_capacity(order.len());
            let mut candidates = Vec::with_capacity(order.len());
            for &id in &order {
                let Some(h) = load_hit(c, id)? else { continue };
                if !accept(&h.metadata.collection) {
                    continue;
                }
                let (cos, bm25) = found[&id];
                let cosine = match (cos, vector) {
                    (Some(x), _) => x,
                    (None, Some(q)) => match chunk_vector(c, id)? {
                        Some(v) => q.iter().zip(&v).map(|(a, b)| a * b).sum(),
                        None => continue,
                    },
                    (None, None) => 0.0,
                };
                let code = Format::of(Path::new(&h.path)).is_some_and(Format::is_code);
                let document = format!("{}\0{}", h.metadata.root, h.path);
                candidates.push(Candidate {
                    chunk: id,
                    unit: match code {
                        true => format!("{document}\0{}", h.metadata.heading_path),
                        false => document,
                    },
                    code,
                    cosine,
                    bm25,
                    overlap: 0.0,
                    path: 0.0,
                });
                hits.push(h);
            }
            Ok((hits, candidates))
        })
    }

    /// The `n` best BM25 chunks in the accepted collections. BM25 does not filter by
    /// collection, so when filtering leaves fewer than `n`, more are fetched (up to
    /// 16·`n`): with every chunk accepted the candidates are those of an unfiltered search.
    fn lexical_candidates(
        &self,
        query: &str,
        n: usize,
        accept: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<(u64, f32)>> {
        let dir = lexical_dir(&self.store.index_dir());
        let mut k = n;
        loop {
            let raw = self.state.lexical.search(self.store, &dir, query, k)?;
            let full = raw.len() == k;
            let mut kept = self.store.snapshot(|c| {
                let mut kept = Vec::with_capacity(raw.len());
                for &(id, s) in &raw {
                    if chunk_collection(c, id)?.is_some_and(|col| accept(&col)) {
                        kept.push((id, s));
                    }
                }
                Ok(kept)
            })?;
            if kept.len() >= n || !full || k >= 16 * n {
                kept.truncate(n);
                return Ok(kept);
            }
            k *= 4;
        }
    }

    /// `search_knowledge`: search the bound project's vault collections; `top_k`
    /// default [`DEFAULT_TOP_K`], `min_score` default [`DEFAULT_MIN_SCORE`].
    pub(crate) fn search_knowledge(
        &self,
        session: &WorkContext,
        query: &str,
        top_k: Option<usize>,
        min_score: Option<f32>,
        max_per_document: Option<usize>,
        fresh: Option<Fresh<'_>>,
    ) -> Result<KnowledgeResults> {
        if top_k.is_some_and(|k| k == 0 || k > MAX_KNOWLEDGE_TOP_K) {
            return Err(Error::invalid(
                "top_k",
                format!("must be 1-{MAX_KNOWLEDGE_TOP_K}"),
            ));
        }
        let min_score = min_score.unwrap_or(DEFAULT_MIN_SCORE);
        if !(-1.0..=1.0).contains(&min_score) {
            return Err(Error::invalid("min_score", "must be between -1 and 1"));
        }
        let project = crate::issues::project(self.store, session.require_project()?)?;
        let collections = project.vault_collections();
        if collections.is_empty() {
            return Err(Error::FailedPrecondition(format!(
                "project {} has no vault configuration: name its collections with \
                 `cairn project configure {} --vault-collection NAME` (or configure_project \
                 with vault.collections), and index documents with \
                 `cairn reindex DIR --collection NAME`",
                project.slug, project.slug
            )));
        }
        let freshness = match fresh {
            Some(Fresh(follower)) => Some(self.wait_fresh(
                Some(&collections),
                super::follow_files::FRESH_WAIT,
                follower,
            )?),
            None => None,
        };
        let hits = self.search(query, top_k, Some(&collections), max_per_document)?;
        let best_score = hits.iter().map(|h| h.score).reduce(f32::max);
        let (results, below): (Vec<_>, Vec<_>) =
            hits.into_iter().partition(|h| h.score >= min_score);
        let note = match (results.is_empty(), best_score) {
            (false, _) => None,
            (true, None) => Some(format!(
                "the collections {collections:?} hold no documents yet; index some with \
                 `cairn reindex DIR --collection NAME`"
            )),
            (true, Some(best)) => Some(format!(
                "{} hits fell below min_score {min_score}; the best scored {best:.3}. \
                 Lower min_score or rephrase the query",
                below.len()
            )),
        };
        Ok(KnowledgeResults {
            results,
            collections,
            below_min_score: below.len(),
            best_score,
            note,
            freshness,
        })
    }

    /// Check a tool's `path` (see [`crate::paths::relative_components`]) and open the
    /// root; returns the handle and the document's relative path (the path's normal
    /// components joined by `/`).
    fn tool_path(&self, root: &DocRoot, path: &str) -> Result<(DirHandle, String)> {
        let parts = relative_components(path, "path")?;
        let handle = DirHandle::open_root(&root.dir)?;
        Ok((handle, parts.join("/")))
    }

    /// `vault_update`: re-read, re-chunk and re-embed one file (only changed chunks).
    pub(crate) fn update(&self, session: &WorkContext, path: &str) -> Result<UpdateResult> {
        let root = self.tool_root(session)?;
        let (handle, rel) = self.tool_path(&root, path)?;
        let files = self.update_filter(&root, &rel, path)?;
        let Some(read) = read_file(&handle, &rel)? else {
            return Err(Error::not_found(
                "file",
                format!(
                    "{rel} (under {}); if it was removed, call vault_delete with this path",
                    root.dir.display()
                ),
            ));
        };
        let existing = self.stored_doc(&root.key, &rel)?;
        let collection = match &existing {
            Some(d) => d.collection.clone(),
            None => default_collection(&root),
        };
        if let Some(doc) = &existing
            && is_current(doc, &read.hash, &collection, self.model_id())
        {
            let chunks = self.store.read(|c| {
                Ok(c.query_row(
                    "SELECT count(*) FROM vault_chunks WHERE document_id = ?1",
                    [doc.id],
                    |r| r.get::<_, i64>(0),
                )? as usize)
            })?;
            self.follow_file(&root, &rel, &collection, &files)?;
            return Ok(UpdateResult {
                path: rel,
                collection,
                changed: false,
                chunks,
                embedded: 0,
                reused: chunks,
                removed: 0,
                removed_characters: None,
            });
        }
        let pending = Pending::prepare(
            self.store,
            self.model_id(),
            &root.key,
            &rel,
            &collection,
            read,
            existing.as_ref(),
        )?;
        let done = self
            .embed_and_commit(vec![pending])?
            .pop()
            .ok_or_else(|| Error::Internal("no commit result".into()))?;
        self.state
            .after_write(self.store, &vault_dir(&self.store.index_dir()), false)?;
        self.follow_file(&root, &rel, &collection, &files)?;
        Ok(UpdateResult {
            path: rel,
            collection,
            changed: true,
            chunks: done.chunks,
            embedded: done.embedded,
            reused: done.reused,
            removed: done.removed,
            removed_characters: done.sanitized.non_empty(),
        })
    }

    /// A file `vault_update` indexed in a project is followed from then on.
    fn follow_file(
        &self,
        root: &DocRoot,
        rel: &str,
        collection: &str,
        files: &FileFilter,
    ) -> Result<()> {
        match root.project {
            Some(_) => {
                self.record_root(&root.key, rel, RootKind::File, collection, &root.dir, files)
            }
            None => Ok(()),
        }
    }

    /// Whether `vault_update` reads `rel`: a documentation format always; source code
    /// only when a followed directory of this root that indexes code admits it (code is
    /// opt-in per collection). The filter the file is followed with.
    fn update_filter(&self, root: &DocRoot, rel: &str, path: &str) -> Result<FileFilter> {
        match Format::of(std::path::Path::new(rel)) {
            None => Err(Error::invalid(
                "path",
                format!(
                    "{} is not a format the vault reads ({EXTENSIONS})",
                    shown(path)
                ),
            )),
            Some(f) if !f.is_code() => Ok(FileFilter::default()),
            Some(_) => {
                let admitted = self.followed_roots()?.iter().any(|r| {
                    r.root_key == root.key
                        && r.kind == RootKind::Dir
                        && r.files.code
                        && covers(&r.prefix, rel)
                        && r.files.compile().is_ok_and(|a| {
                            let under = rel
                                .strip_prefix(&r.prefix)
                                .map_or(rel, |x| x.trim_start_matches('/'));
                            a.admits(under)
                        })
                });
                if admitted {
                    Ok(FileFilter {
                        code: true,
                        ..FileFilter::default()
                    })
                } else {
                    Err(Error::invalid(
                        "path",
                        format!(
                            "{} is source code, and no collection following it indexes code \
                             (`cairn reindex DIR --code` opts a directory in)",
                            shown(path)
                        ),
                    ))
                }
            }
        }
    }

    /// `vault_delete`: remove one document and all its chunks and vectors.
    pub(crate) fn delete(&self, session: &WorkContext, path: &str) -> Result<DeleteResult> {
        let root = self.tool_root(session)?;
        let (handle, rel) = self.tool_path(&root, path)?;
        let parts: Vec<&str> = rel.split('/').collect();
        handle.probe(&parts, path, "path")?;
        let removed = self
            .store
            .write(|tx| delete_document(tx, &root.key, &rel))?
            .ok_or_else(|| {
                Error::not_found(
                    "vault document",
                    format!(
                        "{rel} (under {}); vault_retrieve shows the paths of indexed documents",
                        root.dir.display()
                    ),
                )
            })?;
        self.state
            .after_write(self.store, &vault_dir(&self.store.index_dir()), false)?;
        Ok(DeleteResult {
            path: rel,
            deleted: true,
            chunks_removed: removed,
        })
    }
}

/// The collection of a file `vault_update` adds (see the module docs).
fn default_collection(root: &DocRoot) -> String {
    match &root.project {
        Some(p) => p
            .vault_collections()
            .into_iter()
            .next()
            .unwrap_or_else(|| p.slug.clone()),
        None => root
            .dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("vault")
            .to_string(),
    }
}
