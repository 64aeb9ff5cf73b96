//! The pages: each reads through the facade exactly what an MCP tool of the same name
//! would (the learnings search is `search_learnings`, with the same ranking).

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;

use crate::learnings::{LearningHit, LearningSearch, SearchScope};

use super::{Web, failed, page, person};

/// The learnings page's form.
#[derive(Debug, Default, Deserialize)]
pub(super) struct LearningsQuery {
    #[serde(default)]
    q: String,
    /// A project's slug or id; empty: every project.
    #[serde(default)]
    project: String,
    /// A learning type (`pattern`, `gotcha`, ...); empty: any.
    #[serde(default, rename = "type")]
    learning_type: String,
    #[serde(default)]
    verified: Option<String>,
    #[serde(default)]
    flagged: Option<String>,
    #[serde(default)]
    superseded: Option<String>,
}

/// `GET /ui/learnings`: the search box, ranked exactly as `search_learnings`; the
/// filters only leave hits out, so the order is the tool's.
pub(super) async fn learnings(
    State(w): State<Web>,
    headers: HeaderMap,
    Query(q): Query<LearningsQuery>,
) -> Response {
    let who = match person(&w, &headers).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    let query = q.q.trim().to_string();
    let hits = if query.is_empty() {
        Ok(None)
    } else {
        let cairn = w.cairn.clone();
        let project = q.project.trim().to_string();
        let include_superseded = q.superseded.is_some();
        tokio::task::spawn_blocking(move || {
            let scope = if project.is_empty() {
                SearchScope::All
            } else {
                SearchScope::Project(cairn.project(&project)?.id)
            };
            cairn
                .search_learnings(&LearningSearch {
                    query,
                    scope,
                    limit: Some(50),
                    min_quality_score: None,
                    include_superseded,
                })
                .map(Some)
        })
        .await
        .unwrap_or_else(|e| Err(crate::Error::Internal(e.to_string())))
    };
    let (hits, error) = match hits {
        Ok(Some(r)) => (Some(r.results), None),
        Ok(None) => (None, None),
        Err(e) if e.kind() == crate::error::ErrorKind::Internal => return failed(&e.to_string()),
        Err(e) => (None, Some(e.to_string())),
    };
    let shown: Option<Vec<&LearningHit>> = hits
        .as_ref()
        .map(|hs| hs.iter().filter(|h| keep(h, &q)).collect());
    let body = html! {
        h1 { "Learnings" }
        form method="get" action="/ui/learnings" {
            input type="search" name="q" value=(q.q) placeholder="What are you looking for?" autofocus;
            input type="text" name="project" value=(q.project) placeholder="project (all)";
            input type="text" name="type" value=(q.learning_type) placeholder="type (any)";
            label { input type="checkbox" name="verified" checked[q.verified.is_some()]; " verified" }
            label { input type="checkbox" name="flagged" checked[q.flagged.is_some()]; " flagged wrong" }
            label { input type="checkbox" name="superseded" checked[q.superseded.is_some()]; " with superseded" }
            button type="submit" { "Search" }
        }
        @if let Some(e) = &error {
            p.error { (e) }
        }
        @if let Some(shown) = &shown {
            p.count { (shown.len()) " learnings" }
            ol.hits {
                @for h in shown {
                    (hit(h))
                }
            }
        }
    };
    page("Learnings", Some(&who), body).into_response()
}

/// Whether a hit passes the page's filters.
fn keep(h: &LearningHit, q: &LearningsQuery) -> bool {
    let l = &h.learning;
    let kind = serde_json::to_value(l.learning_type).unwrap_or(Value::Null);
    (q.learning_type.trim().is_empty() || kind == q.learning_type.trim())
        && (q.verified.is_none() || l.verified)
        && (q.flagged.is_none() || l.needs_review)
}

/// One hit: the pattern and context as text, its provenance and score breakdown.
fn hit(h: &LearningHit) -> Markup {
    let l = &h.learning;
    let kind = serde_json::to_value(l.learning_type)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    let score = serde_json::to_value(h.score).unwrap_or(Value::Null);
    html! {
        li.hit data-id=(l.id) {
            p.pattern { (l.pattern) }
            @if let Some(c) = &l.context {
                p.context { (c) }
            }
            dl.provenance {
                dt { "id" } dd.id { (l.id) }
                dt { "type" } dd { (kind) }
                dt { "quality" } dd { (l.quality_score) }
                dt { "project" } dd { (l.project) }
                dt { "issue" } dd { (l.issue) }
                dt { "by" } dd { (l.created_by) }
                dt { "created" } dd { (l.created_at) }
                dt { "confirmations" } dd { (l.confirmations) }
                @if l.verified { dt { "verified" } dd { "yes" } }
                @if l.needs_review { dt { "flagged" } dd.flag { "wrong, needs review" } }
                @if l.stale { dt { "stale" } dd { "yes" } }
                @if let Some(s) = &l.superseded_by { dt { "superseded by" } dd { (s) } }
                @if !l.applies_to.is_empty() { dt { "applies to" } dd { (l.applies_to.join(", ")) } }
            }
            @if let Value::Object(parts) = &score {
                table.score {
                    @for (k, v) in parts {
                        tr {
                            th { (k) }
                            td {
                                @if let Some(x) = v.as_f64() { (format!("{x:.3}")) } @else { (v) }
                            }
                        }
                    }
                }
            }
        }
    }
}
