//! The learnings pages: each reads through the facade exactly what an MCP tool of the same name
//! would (the learnings search is `search_learnings`, with the same ranking).

use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, PreEscaped, html};
use serde::Deserialize;
use serde_json::Value;

use crate::learnings::{
    Learning, LearningDetail, LearningHit, LearningSearch, ScoreBreakdown, SearchScope, SimilarHit,
    Trust,
};

use super::{Visitor, Web, cross_site, page, run};

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
    #[serde(default)]
    archived: Option<String>,
    /// The lowest trust level shown (`held`, `flagged`, `agent`, `confirmed`,
    /// `verified`); empty: any.
    #[serde(default)]
    trust: String,
}

/// `GET /ui/<key>/learnings`: the search box, ranked exactly as `search_learnings`; the
/// filters only leave hits out, so the order is the tool's.
pub(super) async fn list(
    State(w): State<Web>,
    who: Visitor,
    Query(q): Query<LearningsQuery>,
) -> Response {
    let query = q.q.trim().to_string();
    // Without a query, the pictures: what the learnings did over time, their quality.
    let pictures = if query.is_empty() {
        let cairn = w.cairn.clone();
        match run(&who, StatusCode::INTERNAL_SERVER_ERROR, move || {
            cairn.learnings_activity(30)
        })
        .await
        {
            Ok(a) => Some((
                super::charts::learnings_over_time(&a),
                super::charts::quality_distribution(&a),
            )),
            Err(r) => return r,
        }
    } else {
        None
    };
    let hits = if query.is_empty() {
        None
    } else {
        let cairn = w.cairn.clone();
        let project = q.project.trim().to_string();
        let include_superseded = q.superseded.is_some();
        let include_archived = q.archived.is_some();
        let trust = q.trust.trim().to_string();
        let found = run(&who, StatusCode::BAD_REQUEST, move || {
            let min_trust = match trust.as_str() {
                "" => None,
                t => Some(Trust::parse(t).ok_or_else(|| {
                    crate::Error::invalid(
                        "trust",
                        "one of held, flagged, agent, confirmed, verified, or empty",
                    )
                })?),
            };
            let scope = if project.is_empty() {
                SearchScope::All
            } else {
                SearchScope::Project(cairn.project(&project)?.id)
            };
            cairn.search_learnings(&LearningSearch {
                query,
                scope,
                limit: Some(50),
                min_quality_score: None,
                include_superseded,
                include_archived,
                min_trust,
            })
        })
        .await;
        match found {
            Ok(r) => Some(r.results),
            Err(r) => return r,
        }
    };
    let shown: Option<Vec<&LearningHit>> = hits
        .as_ref()
        .map(|hs| hs.iter().filter(|h| keep(&h.learning, &q)).collect());
    let body = html! {
        h1 { "Learnings" }
        form method="get" action="learnings" {
            input type="search" name="q" value=(q.q) placeholder="What are you looking for?" autofocus;
            input type="text" name="project" value=(q.project) placeholder="project (all)";
            input type="text" name="type" value=(q.learning_type) placeholder="type (any)";
            label { input type="checkbox" name="verified" checked[q.verified.is_some()]; " verified" }
            label { input type="checkbox" name="flagged" checked[q.flagged.is_some()]; " flagged wrong" }
            label { input type="checkbox" name="superseded" checked[q.superseded.is_some()]; " with superseded" }
            label { input type="checkbox" name="archived" checked[q.archived.is_some()]; " with archived and held" }
            select name="trust" {
                option value="" selected[q.trust.is_empty()] { "any trust" }
                @for t in Trust::ALL {
                    option value=(t.as_str()) selected[q.trust == t.as_str()] { "trust ≥ " (t.as_str()) }
                }
            }
            button type="submit" { "Search" }
        }
        @if let Some((over_time, quality)) = &pictures {
            figure.picture.over-time { (PreEscaped(over_time)) }
            figure.picture.quality { (PreEscaped(quality)) }
        }
        @if let Some(shown) = &shown {
            p.count { (shown.len()) " learnings" }
            ol.hits {
                @for h in shown {
                    (hit(h, &q))
                }
            }
        }
    };
    page("Learnings", Some(&who), body).into_response()
}

/// Whether a learning found passes the page's filters.
fn keep(l: &Learning, q: &LearningsQuery) -> bool {
    let kind = serde_json::to_value(l.learning_type).unwrap_or(Value::Null);
    (q.learning_type.trim().is_empty() || kind == q.learning_type.trim())
        && (q.verified.is_none() || l.verified)
        && (q.flagged.is_none() || l.needs_review)
}

/// One hit, with the learnings listed under it that say much the same (those that pass
/// the page's filters).
fn hit(h: &LearningHit, q: &LearningsQuery) -> Markup {
    let similar: Vec<&SimilarHit> = h.similar.iter().filter(|s| keep(&s.learning, q)).collect();
    html! {
        li.hit data-id=(h.learning.id) {
            (found(&h.learning, &h.score))
            @if !similar.is_empty() {
                p.similar-note {
                    "Says much the same"
                    @if h.similar_omitted > 0 { " (" (h.similar_omitted) " more not shown)" }
                    ":"
                }
                ol.similar {
                    @for s in similar {
                        li.similar data-id=(s.learning.id) {
                            p.similarity { "similarity " (format!("{:.2}", s.similarity)) }
                            (found(&s.learning, &s.score))
                        }
                    }
                }
            }
        }
    }
}

/// A learning found: the pattern (a link to its page) and context as text, its
/// provenance and score breakdown.
fn found(l: &Learning, score: &ScoreBreakdown) -> Markup {
    let score = serde_json::to_value(score).unwrap_or(Value::Null);
    html! {
            p.pattern { a href=(format!("learnings/{}", l.id)) { (l.pattern) } }
            @if let Some(c) = &l.context {
                p.context { (c) }
            }
            (provenance(l))
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

fn kind(l: &Learning) -> String {
    serde_json::to_value(l.learning_type)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// Where a learning comes from and where it stands.
pub(super) fn provenance(l: &Learning) -> Markup {
    html! {
        dl.provenance {
            dt { "id" } dd.id { (l.id) }
            dt { "trust" } dd.trust data-trust=(l.trust.as_str()) { (l.trust.as_str()) }
            @if !l.held_rules.is_empty() {
                dt { "held for" } dd.held { (l.held_rules.join(", ")) }
            }
            @for old in &l.proposed_supersedes {
                dt { "proposes to supersede" }
                dd.proposed { a href=(format!("learnings/{old}")) { (old) } }
            }
            @for new in &l.proposed_successors {
                dt { "proposed successor" }
                dd.proposed-successor { a href=(format!("learnings/{new}")) { (new) } }
            }
            dt { "type" } dd { (kind(l)) }
            dt { "quality" } dd.quality { (l.quality_score) }
            dt { "project" } dd { (l.project) }
            dt { "issue" } dd { (l.issue) }
            dt { "by" } dd { (l.created_by) }
            dt { "created" } dd { (l.created_at) }
            dt { "confirmations" } dd { (l.confirmations) }
            dt { "feedback" } dd { (serde_json::to_string(&l.feedback).unwrap_or_default()) }
            dt { "verified" } dd.verified { @if l.verified { "yes" } @else { "no" } }
            @if l.needs_review { dt { "flagged" } dd.flag { "wrong, needs review" } }
            @if l.stale { dt { "stale" } dd { "yes" } }
            @if let Some(s) = &l.superseded_by {
                dt { "superseded by" }
                dd.superseded { a href=(format!("learnings/{s}")) { (s) } }
            }
            @if let Some(at) = &l.archived_at { dt { "archived" } dd.archived { (at) } }
            @if !l.applies_to.is_empty() { dt { "applies to" } dd { (l.applies_to.join(", ")) } }
        }
    }
}

/// `GET /ui/<key>/learnings/{id}`: one learning, its supersede chain, its history and what a
/// person can do with it.
pub(super) async fn learning(
    State(w): State<Web>,
    who: Visitor,
    Path(id): Path<String>,
) -> Response {
    let cairn = w.cairn.clone();
    match run(&who, StatusCode::NOT_FOUND, move || cairn.learning(&id)).await {
        Ok(d) => page("Learning", Some(&who), detail_page(&d, &who)).into_response(),
        Err(r) => r,
    }
}

fn detail_page(d: &LearningDetail, who: &Visitor) -> Markup {
    let l = &d.learning;
    let action = |a: &str| format!("learnings/{}/{a}", l.id);
    html! {
        h1 { "Learning" }
        article.learning data-id=(l.id) {
            p.pattern { (l.pattern) }
            @if let Some(c) = &l.context { p.context { (c) } }
            (provenance(l))
        }
        @if !d.predecessors.is_empty() || !d.successors.is_empty() {
            h2 { "Supersede chain" }
            p.chain {
                @for p in d.predecessors.iter().rev() { a href=(format!("learnings/{p}")) { (p) } " → " }
                strong { (l.id) }
                @for s in &d.successors { " → " a href=(format!("learnings/{s}")) { (s) } }
            }
        }
        h2 { "Curate" }
        div.actions {
            (curate(&action("verify"), &who.csrf, "verify", "Verify", html! {
                input type="text" name="note" placeholder="note (optional)";
            }))
            (curate(&action("flag"), &who.csrf, "flag", "Flag wrong", html! {
                input type="text" name="note" placeholder="why it is wrong (optional)";
            }))
            (curate(&action("rate"), &who.csrf, "rate", "Rate", html! {
                input type="number" name="score" min="0" max="100" value=(l.quality_score);
                input type="text" name="note" placeholder="note (optional)";
            }))
            (curate(&action("supersede"), &who.csrf, "supersede", "Supersede", html! {
                input type="text" name="by" placeholder="replaced by (learning id)";
            }))
            @if l.superseded_by.is_some() {
                (curate(&action("unsupersede"), &who.csrf, "unsupersede", "Undo supersession", html! {
                    input type="text" name="note" placeholder="why it is back (optional)";
                }))
            }
            @if l.trust == Trust::Held {
                (curate(&action("release"), &who.csrf, "release", "Release to agents", html! {
                    input type="text" name="note" placeholder="why it is safe (optional)";
                }))
            }
            @for new in &l.proposed_successors {
                (curate(&action("supersede"), &who.csrf, "supersede", &format!("Accept {new}"), html! {
                    input type="hidden" name="by" value=(new);
                }))
                (curate(&action("reject"), &who.csrf, "reject", &format!("Reject {new}"), html! {
                    input type="hidden" name="by" value=(new);
                    input type="text" name="note" placeholder="why (optional)";
                }))
            }
            @if l.archived_at.is_some() {
                (curate(&action("restore"), &who.csrf, "restore", "Restore", html! {
                    input type="text" name="note" placeholder="why it is back (optional)";
                }))
            } @else {
                (curate(&action("archive"), &who.csrf, "archive", "Archive", html! {
                    input type="text" name="note" placeholder="why it is out (optional)";
                }))
            }
        }
        h2 { "History" }
        table.history {
            tr { th { "when" } th { "event" } th { "who" } th { "quality" } th { "verified" } th { "issue" } th { "related" } th { "note" } }
            @for h in &d.history {
                tr {
                    td { (h.at) }
                    td.event { (h.event) }
                    td { (h.actor) }
                    td { @if let Some(b) = h.quality_before { (b) " → " } (h.quality_after) }
                    td { (h.verified_after) }
                    td { (h.issue.as_deref().unwrap_or("")) }
                    td { (h.related.as_deref().unwrap_or("")) }
                    td { (h.note.as_deref().unwrap_or("")) }
                }
            }
        }
    }
}

/// One curation form: a POST to `action` with the form token, `fields` and a button.
pub(super) fn curate(action: &str, csrf: &str, value: &str, label: &str, fields: Markup) -> Markup {
    html! {
        form method="post" action=(action) {
            input type="hidden" name="csrf" value=(csrf);
            (fields)
            button type="submit" name="go" value=(value) { (label) }
        }
    }
}

/// A curation form.
#[derive(Debug, Deserialize)]
pub(super) struct ActForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    note: String,
    #[serde(default)]
    score: String,
    #[serde(default)]
    by: String,
    /// Where to go after the action: `review` (the review queue), else the learning.
    #[serde(default)]
    back: String,
}

/// `POST /ui/<key>/learnings/{id}/{verify|flag|rate|supersede|reject|unsupersede|release|archive|restore}`:
/// recorded like any other write, attributed to the person (`person:NAME`); it takes
/// effect for agents at once (their next search reads the new standing).
pub(super) async fn act(
    State(w): State<Web>,
    who: Visitor,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
    Form(f): Form<ActForm>,
) -> Response {
    if let Some(r) = cross_site(&headers, &who, &f.csrf) {
        return r;
    }
    let actor = who.person.actor.clone();
    let note = Some(f.note.trim().to_string()).filter(|n| !n.is_empty());
    let cairn = w.cairn.clone();
    let target = id;
    let done = run(&who, StatusCode::BAD_REQUEST, move || {
        match action.as_str() {
            "verify" => cairn.verify_learning(&target, &actor, note.as_deref()),
            "flag" => cairn.flag_learning(&target, &actor, note.as_deref()),
            "archive" => cairn.archive_learning(&target, &actor, note.as_deref()),
            "restore" => cairn.restore_learning(&target, &actor, note.as_deref()),
            "rate" => {
                let score = f
                    .score
                    .trim()
                    .parse::<u8>()
                    .ok()
                    .filter(|s| *s <= 100)
                    .ok_or_else(|| {
                        crate::Error::invalid(
                            "score",
                            "a quality score is a whole number from 0 to 100",
                        )
                    })?;
                cairn.rate_learning(&target, score, &actor, note.as_deref())
            }
            "supersede" => cairn.supersede_learning(&target, f.by.trim(), &actor),
            "reject" => cairn.reject_supersession(&target, f.by.trim(), &actor, note.as_deref()),
            "unsupersede" => cairn.unsupersede_learning(&target, &actor, note.as_deref()),
            "release" => cairn.release_learning(&target, &actor, note.as_deref()),
            other => Err(crate::Error::invalid(
                "action",
                format!(
                    "{other:?} is not an action: verify, flag, rate, supersede, reject, \
                     unsupersede, release, archive or restore"
                ),
            )),
        }
    })
    .await;
    match done {
        Ok(_) if f.back == "review" => Redirect::to(&who.url("review")).into_response(),
        Ok(l) => Redirect::to(&who.url(&format!("learnings/{}", l.id))).into_response(),
        Err(r) => r,
    }
}
