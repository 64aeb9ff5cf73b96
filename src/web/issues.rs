//! The issues pages: the list with filters, and one issue's trail with whether its hash
//! chain (and the Merkle roots frozen over it) still verify.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;

use crate::compose::board::IssueDetails;
use crate::issues::{IssueFilter, Limit, Status};
use crate::trail::TrailVerification;

use super::{Visitor, Web, page, problem, run};

/// The list's filters.
#[derive(Debug, Default, Deserialize)]
pub(super) struct IssuesQuery {
    /// A project's slug or id; empty: every project.
    #[serde(default)]
    project: String,
    /// A status (`todo`, `in_progress`, ...); empty: any.
    #[serde(default)]
    status: String,
}

/// The text of a serialized value (an enum's name).
fn name(v: impl serde::Serialize) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// `GET /ui/<key>/issues`.
pub(super) async fn list(
    State(w): State<Web>,
    who: Visitor,
    Query(q): Query<IssuesQuery>,
) -> Response {
    let status: Option<Status> = match q.status.trim() {
        "" => None,
        s => match serde_json::from_value(Value::String(s.to_string())) {
            Ok(s) => Some(s),
            Err(_) => {
                return problem(
                    &who,
                    StatusCode::BAD_REQUEST,
                    &format!("{s:?} is not an issue status"),
                );
            }
        },
    };
    let filter = IssueFilter {
        project: Some(q.project.trim().to_string()).filter(|p| !p.is_empty()),
        statuses: status.into_iter().collect(),
        label: None,
        limit: Limit::At(500),
    };
    let cairn = w.cairn.clone();
    let issues = match run(&who, StatusCode::BAD_REQUEST, move || {
        cairn.list_issues(&filter)
    })
    .await
    {
        Ok(i) => i,
        Err(r) => return r,
    };
    let body = html! {
        h1 { "Issues" }
        form method="get" action="issues" {
            input type="text" name="project" value=(q.project) placeholder="project (all)";
            input type="text" name="status" value=(q.status) placeholder="status (any)";
            button type="submit" { "Filter" }
        }
        p.count { (issues.len()) " issues" }
        table.issues {
            tr { th { "issue" } th { "title" } th { "status" } th { "priority" } th { "project" } th { "updated" } }
            @for i in &issues {
                tr.issue data-id=(i.identifier) {
                    td { a href=(format!("issues/{}", i.identifier)) { (i.identifier) } }
                    td { (i.title) }
                    td { (name(i.status)) }
                    td { (i.priority) }
                    td { (i.project_slug) }
                    td { (i.updated_at) }
                }
            }
        }
    };
    page("Issues", Some(&who), body).into_response()
}

/// `GET /ui/<key>/issues/{identifier}`: the issue, its trail, and whether the trail verifies.
pub(super) async fn issue(
    State(w): State<Web>,
    who: Visitor,
    Path(identifier): Path<String>,
) -> Response {
    let cairn = w.cairn.clone();
    let read = run(&who, StatusCode::NOT_FOUND, move || {
        let details = cairn.issue_details(&identifier)?;
        let verification = cairn.verify_trail(&details.issue.id)?;
        Ok((details, verification))
    })
    .await;
    match read {
        Ok((d, v)) => page(&d.issue.identifier, Some(&who), issue_page(&d, &v)).into_response(),
        Err(r) => r,
    }
}

fn issue_page(d: &IssueDetails, v: &TrailVerification) -> Markup {
    let i = &d.issue;
    html! {
        h1 { (i.identifier) " · " (i.title) }
        dl.provenance {
            dt { "status" } dd.status { (name(i.status)) }
            dt { "priority" } dd { (i.priority) }
            dt { "project" } dd { (i.project_slug) }
            dt { "assignee" } dd { (i.assignee) }
            dt { "created" } dd { (i.created_at) }
            dt { "updated" } dd { (i.updated_at) }
        }
        @if !i.description.is_empty() { p.description { (i.description) } }
        h2 { "Trail" }
        @if v.intact {
            p.verified { "The trail verifies: " (v.total_records) " records, head " code { (v.head_hash) } "." }
        } @else {
            p.broken { "The trail does not verify: " (v.broken.len()) " broken of " (v.total_records) " records." }
            table.broken {
                tr { th { "position" } th { "record" } th { "problem" } th { "detail" } }
                @for b in &v.broken {
                    tr.break {
                        td.position { (b.position) }
                        td.record { (b.record_id) }
                        td.problem { (b.problem) }
                        td {
                            @if let Some(d) = &b.detail { (d) } @else {
                                "expected " code { (b.expected_hash) } ", stored " code { (b.actual_hash) }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Findings" }
        table.findings {
            tr { th { "#" } th { "category" } th { "summary" } th { "processed" } }
            @for f in &d.findings {
                tr { td { (f.position) } td { (f.category) } td { (f.summary) } td { (f.processed) } }
            }
        }
        h2 { "Comments" }
        @for c in &d.comments {
            div.comment {
                p.meta { "#" (c.position) " · " (c.actor) " · " (c.created_at) }
                p.content { (c.content) }
            }
        }
        h2 { "Pull requests" }
        ul {
            @for pr in &d.pull_requests {
                li { (serde_json::to_string(pr).unwrap_or_default()) }
            }
        }
        h2 { "Status history" }
        ul {
            @for s in &d.status_history {
                li { (serde_json::to_string(s).unwrap_or_default()) }
            }
        }
        h2 { "Learnings recorded here" }
        ul {
            @for l in &d.learnings {
                li { a href=(format!("learnings/{}", l.id)) { (l.pattern) } }
            }
        }
    }
}
