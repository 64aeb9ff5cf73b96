//! Knowledge Vault tools: `vault_retrieve`, `search_knowledge`, `vault_update`,
//! `vault_delete`. The model loads on the first call that embeds, never at start-up.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Cairn;
use crate::access::scope::Profile::{self, *};
use crate::error::Result;
use crate::mcp::tool::{Effect, ToolCtx, ToolDef, tool};
use crate::vault::documents::VaultHit;
use crate::vault::follow_files::{FRESH_WAIT, Freshness};
use crate::vault::service::{
    DeleteResult, KnowledgeResults, MAX_KNOWLEDGE_TOP_K, MAX_PER_DOCUMENT_LIMIT, MAX_QUERY_CHARS,
    MAX_TOP_K, UpdateResult,
};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetrieveParams {
    /// Natural-language query.
    #[schemars(length(min = 1, max = MAX_QUERY_CHARS))]
    pub(crate) query: String,
    /// Results to return (default 5, max 50).
    #[schemars(range(min = 1, max = MAX_TOP_K))]
    pub(crate) top_k: Option<u32>,
    /// At most this many chunks of one document, or of one item (function, type) in source code (default 2; 0 = no cap).
    #[schemars(range(min = 0, max = MAX_PER_DOCUMENT_LIMIT))]
    pub(crate) max_per_document: Option<u32>,
    /// Wait (at most 3 s) until the changes seen in the followed docs are indexed before searching; `freshness` says whether the wait completed.
    pub(crate) fresh: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct KnowledgeParams {
    /// Natural-language query.
    #[schemars(length(min = 1, max = MAX_QUERY_CHARS))]
    pub(crate) query: String,
    /// Results to return (default 5, max 20).
    #[schemars(range(min = 1, max = MAX_KNOWLEDGE_TOP_K))]
    pub(crate) top_k: Option<u32>,
    /// Minimum `score` (the ranking key: cosine similarity fused with BM25 and keyword overlap), -1 to 1 (default 0.3).
    #[schemars(range(min = -1.0, max = 1.0))]
    pub(crate) min_score: Option<f32>,
    /// At most this many chunks of one document, or of one item (function, type) in source code (default 2; 0 = no cap).
    #[schemars(range(min = 0, max = MAX_PER_DOCUMENT_LIMIT))]
    pub(crate) max_per_document: Option<u32>,
    /// Wait (at most 3 s) until the changes seen in the followed docs are indexed before searching; `freshness` says whether the wait completed.
    pub(crate) fresh: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PathParams {
    /// Document path relative to the project root (e.g. docs/guide.md).
    #[schemars(length(min = 1, max = crate::paths::PATH_MAX))]
    pub(crate) path: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RetrieveResult {
    /// Best first, by `score` (cosine similarity fused with BM25 and keyword overlap).
    pub(crate) results: Vec<VaultHit>,
    /// With `fresh: true`: whether the wait for pending changes completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Freshness")]
    pub(crate) freshness: Option<Freshness>,
}

fn retrieve(cx: &ToolCtx<'_>, p: RetrieveParams) -> Result<RetrieveResult> {
    let freshness = if p.fresh == Some(true) {
        Some(cx.cairn.vault_wait_fresh(None, FRESH_WAIT)?)
    } else {
        None
    };
    let results = cx.cairn.vault_search(
        &p.query,
        p.top_k.map(|n| n as usize),
        None,
        p.max_per_document.map(|n| n as usize),
    )?;
    Ok(RetrieveResult { results, freshness })
}

fn knowledge(cx: &ToolCtx<'_>, p: KnowledgeParams) -> Result<KnowledgeResults> {
    cx.cairn.search_knowledge(
        cx.work,
        &p.query,
        p.top_k.map(|n| n as usize),
        p.min_score,
        p.max_per_document.map(|n| n as usize),
        p.fresh == Some(true),
    )
}

fn update(cx: &ToolCtx<'_>, p: PathParams) -> Result<UpdateResult> {
    cx.cairn.vault_update(cx.work, &p.path)
}

fn delete(cx: &ToolCtx<'_>, p: PathParams) -> Result<DeleteResult> {
    cx.cairn.vault_delete(cx.work, &p.path)
}

/// Embed the call's query before it waits for a lane ([`ToolDef::prepare`]).
fn embed_query(cairn: &Cairn, args: &Value) -> Result<()> {
    match args.get("query").and_then(Value::as_str) {
        Some(query) => cairn.vault_prepare_query(query),
        None => Ok(()),
    }
}

pub(crate) fn tools() -> Vec<ToolDef> {
    vec![
        tool(
            "search_knowledge",
            "Semantic search over the bound project's vault collections: ranked snippets with path, heading and score. Needs the project's vault configuration.",
            Effect::ReadOnly,
            json!({"query": "retry pattern with exponential backoff", "top_k": 10, "min_score": 0.4}),
            knowledge,
        )
        .profiles(&Profile::ALL)
        .prepare(embed_query),
        tool(
            "vault_retrieve",
            "Semantic search over the whole Knowledge Vault (cosine similarity fused with BM25 and keyword overlap, at most 2 chunks per document by default): text, path, score and metadata (heading path, lines, collection, chunk hash).",
            Effect::ReadOnly,
            json!({"query": "retry pattern with exponential backoff", "top_k": 10}),
            retrieve,
        )
        .profiles(&Profile::ALL)
        .prepare(embed_query),
        tool(
            "vault_update",
            "Re-read, re-chunk and re-embed one document (Markdown, HTML, reST, AsciiDoc, text or notebook; source code where a collection indexes code; path relative to the project root); only changed chunks are re-embedded.",
            Effect::Destructive { idempotent: true },
            json!({"path": "docs/patterns/retry-with-backoff.md"}),
            update,
        )
        .profiles(&[Worker, Researcher]),
        tool(
            "vault_delete",
            "Remove one document and all its vectors from the Knowledge Vault (path relative to the project root).",
            Effect::Destructive { idempotent: true },
            json!({"path": "docs/deprecated/old-pattern.md"}),
            delete,
        )
        .profiles(&[Worker]),
    ]
}
