//! The vault page (collections and how fresh they are, search, a document's chunks) and
//! the service page (tokens, per-tool calls and latency, index sizes, embedding lag).

use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{PreEscaped, html};
use serde::Deserialize;

use super::{Visitor, Web, cross_site, page, problem, run};

/// The vault page's form.
#[derive(Debug, Default, Deserialize)]
pub(super) struct VaultQuery {
    #[serde(default)]
    q: String,
    /// A collection; empty: every one.
    #[serde(default)]
    collection: String,
}

/// `GET /ui/<key>/vault`: each collection with its roots and their freshness; the search,
/// ranked as `search_knowledge`'s ranking of the vault.
pub(super) async fn vault(
    State(w): State<Web>,
    who: Visitor,
    Query(q): Query<VaultQuery>,
) -> Response {
    let cairn = w.cairn.clone();
    let query = q.q.trim().to_string();
    let collection = q.collection.trim().to_string();
    let read = run(&who, StatusCode::BAD_REQUEST, move || {
        let status = cairn.vault_status()?;
        let hits = if query.is_empty() {
            None
        } else {
            let only = (!collection.is_empty()).then(|| vec![collection]);
            Some(cairn.vault_search(&query, Some(10), only.as_deref(), None)?)
        };
        Ok((status, hits))
    })
    .await;
    let (status, hits) = match read {
        Ok(r) => r,
        Err(r) => return r,
    };
    let body = html! {
        h1 { "Vault" }
        table.collections {
            tr { th { "collection" } th { "documents" } th { "chunks" } th { "root" } th { "following" } th { "pending" } th { "last sync" } }
            @for c in &status {
                @if c.roots.is_empty() {
                    tr.collection data-id=(c.collection) {
                        td { (c.collection) } td.documents { (c.documents) } td { (c.chunks) }
                        td { "-" } td.following { "not followed" } td { "-" } td { "-" }
                    }
                }
                @for r in &c.roots {
                    tr.collection data-id=(c.collection) {
                        td { (c.collection) } td.documents { (c.documents) } td { (c.chunks) }
                        td { (r.root) }
                        td.following {
                            (r.following)
                            @if let Some(why) = &r.reason { " (" (why) ")" }
                        }
                        td { (r.pending) }
                        td { (r.last_sync_at.as_deref().unwrap_or("-")) }
                    }
                }
            }
        }
        form method="get" action="vault" {
            input type="search" name="q" value=(q.q) placeholder="Search the vault";
            input type="text" name="collection" value=(q.collection) placeholder="collection (all)";
            button type="submit" { "Search" }
        }
        @if let Some(hits) = &hits {
            ol.hits {
                @for h in hits {
                    li.chunk data-path=(h.path) {
                        p.where {
                            a href=(format!("vault/{}?path={}", h.metadata.collection, percent(&h.path))) { (h.path) }
                            " · " span.headings { (h.metadata.heading_path) }
                            " · lines " (h.metadata.line_start) "-" (h.metadata.line_end)
                            " · score " (format!("{:.3}", h.score))
                            " · indexed " (h.metadata.indexed_at)
                        }
                        pre.text { (h.text) }
                    }
                }
            }
        }
    };
    page("Vault", Some(&who), body).into_response()
}

/// A query-string value, percent-encoded.
fn percent(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[derive(Debug, Deserialize)]
pub(super) struct DocQuery {
    #[serde(default)]
    path: String,
}

/// `GET /ui/<key>/vault/{collection}?path=...`: one document's chunks as indexed.
pub(super) async fn document(
    State(w): State<Web>,
    who: Visitor,
    Path(collection): Path<String>,
    Query(q): Query<DocQuery>,
) -> Response {
    let cairn = w.cairn.clone();
    let (c, p) = (collection.clone(), q.path.clone());
    let chunks = match run(&who, StatusCode::NOT_FOUND, move || {
        cairn.vault_document_chunks(&c, &p)
    })
    .await
    {
        Ok(c) => c,
        Err(r) => return r,
    };
    if chunks.is_empty() {
        return problem(
            &who,
            StatusCode::NOT_FOUND,
            &format!("{collection}/{} is not an indexed document", q.path),
        );
    }
    let body = html! {
        h1 { (collection) " / " (q.path) }
        p.count { (chunks.len()) " chunks" }
        ol.chunks {
            @for c in &chunks {
                li.chunk {
                    p.where { span.headings { (c.heading_path.join(" > ")) } " · lines " (c.line_start) "-" (c.line_end) }
                    pre.text { (c.text) }
                }
            }
        }
    };
    page("Document", Some(&who), body).into_response()
}

/// `GET /ui/<key>/service`: tokens, per-tool calls and latency, index sizes, embedding lag.
pub(super) async fn service(State(w): State<Web>, who: Visitor) -> Response {
    let cairn = w.cairn.clone();
    let read = run(&who, StatusCode::BAD_REQUEST, move || {
        Ok((
            cairn.session_tokens()?,
            cairn.learnings_sizes()?,
            cairn.vault_status()?,
        ))
    })
    .await;
    let (tokens, sizes, vault) = match read {
        Ok(r) => r,
        Err(r) => return r,
    };
    let stats = crate::metrics::tool_stats();
    let ms = |x: f64| {
        if x.is_finite() {
            format!("≤ {x:.2} ms")
        } else {
            "over 8 s".to_string()
        }
    };
    let body = html! {
        h1 { "Service" }
        h2 { "Index sizes" }
        dl.provenance {
            dt { "learnings" } dd.learnings { (sizes.learnings) }
            dt { "waiting for an embedding" } dd.lag { (sizes.pending_embeddings) }
            dt { "vault documents" } dd { (vault.iter().map(|c| c.documents).sum::<u64>()) }
            dt { "vault chunks" } dd { (vault.iter().map(|c| c.chunks).sum::<u64>()) }
            dt { "vault changes pending" } dd { (vault.iter().flat_map(|c| &c.roots).map(|r| r.pending).sum::<u64>()) }
        }
        h2 { "Tool calls since the daemon started" }
        table.tools {
            tr { th { "tool" } th { "calls" } th { "errors" } th { "median" } th { "95th" } th { "mean" } }
            @for s in &stats {
                tr.tool data-id=(s.tool) {
                    td { (s.tool) } td.calls { (s.calls) } td { (s.errors) }
                    td { (ms(s.p50_ms)) } td { (ms(s.p95_ms)) } td { (format!("{:.2} ms", s.mean_ms)) }
                }
            }
        }
        div.latencies {
            @for s in &stats {
                figure.picture.latency data-id=(s.tool) { (PreEscaped(super::charts::latency(s))) }
            }
        }
        h2 { "Session tokens" }
        table.tokens {
            tr { th { "id" } th { "state" } th { "kind" } th { "issue" } th { "agent" } th { "scope" } th { "expires" } th { "revoked by" } th {} }
            @for t in &tokens {
                tr.token data-id=(t.id) {
                    td { (t.id) }
                    td.state { (serde_json::to_value(t.state).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()) }
                    td { @if t.human { "person" } @else if t.peer.is_some() { "forwarder" } @else { "agent" } }
                    td { (t.issue.as_deref().unwrap_or("-")) }
                    td { (t.agent_type.as_deref().unwrap_or("-")) }
                    td { (t.scope.as_ref().map(|s| s.label.as_str()).unwrap_or("all tools")) }
                    td { (t.expires_at) }
                    td.revoked-by { (t.revoked_by.as_deref().unwrap_or("")) }
                    td {
                        @if t.revoked_at.is_none() && t.id != who.person.id {
                            form method="post" action=(format!("tokens/{}/revoke", t.id)) {
                                input type="hidden" name="csrf" value=(who.csrf);
                                button type="submit" name="go" value="revoke" { "Revoke" }
                            }
                        }
                    }
                }
            }
        }
    };
    page("Service", Some(&who), body).into_response()
}

#[derive(Debug, Deserialize)]
pub(super) struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

/// `POST /ui/<key>/tokens/{id}/revoke`: as `cairn session revoke`; its next request is refused.
pub(super) async fn revoke(
    State(w): State<Web>,
    who: Visitor,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(f): Form<CsrfForm>,
) -> Response {
    if let Some(r) = cross_site(&headers, &who, &f.csrf) {
        return r;
    }
    let cairn = w.cairn.clone();
    let actor = who.person.actor.clone();
    match run(&who, StatusCode::NOT_FOUND, move || {
        cairn.revoke_session_token(&id, &actor)
    })
    .await
    {
        Ok(_) => Redirect::to(&who.url("service")).into_response(),
        Err(r) => r,
    }
}
