//! `GET /ui/review`: what waits for a person (issue 56): learnings held for their text,
//! agents' supersession proposals with both sides and the evidence, learnings flagged
//! wrong. Each entry carries its actions (release, accept, reject, verify, archive);
//! they post to the learning's actions (`learnings::act`) and take effect for agents at
//! once.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use crate::learnings::{Learning, Proposal, ReviewQueue};

use super::learnings::{curate, provenance};
use super::{Visitor, Web, page, run};

/// `GET /ui/review`.
pub(super) async fn review(State(w): State<Web>, who: Visitor) -> Response {
    let cairn = w.cairn.clone();
    match run(&who, StatusCode::INTERNAL_SERVER_ERROR, move || {
        cairn.review_queue()
    })
    .await
    {
        Ok(q) => page("Review", Some(&who), queue(&q, &who)).into_response(),
        Err(r) => r,
    }
}

fn queue(q: &ReviewQueue, who: &Visitor) -> Markup {
    html! {
        h1 { "Review" }
        p { "Nothing here is served to agents as settled: held learnings reach no other agent, a proposed successor stands beside the learning it would replace, a flagged learning is marked to every reader." }
        h2 { "Held (" (q.held.len()) ")" }
        @if q.held.is_empty() { p.empty { "No learning is held." } }
        ol.review.held {
            (entries(&q.held, who, &[
                ("release", "Release to agents", "why it is safe (optional)"),
                ("archive", "Archive", "why it is out (optional)"),
            ]))
        }
        h2 { "Proposed supersessions (" (q.proposals.len()) ")" }
        @if q.proposals.is_empty() { p.empty { "No supersession waits." } }
        ol.review.proposals {
            @for p in &q.proposals {
                li.entry data-old=(p.old.id) data-new=(p.new.id) {
                    (proposal(p, who))
                }
            }
        }
        h2 { "Flagged (" (q.flagged.len()) ")" }
        @if q.flagged.is_empty() { p.empty { "No learning is flagged." } }
        ol.review.flagged {
            (entries(&q.flagged, who, &[
                ("verify", "Verify (it is right)", "note (optional)"),
                ("archive", "Archive", "why it is out (optional)"),
            ]))
        }
    }
}

/// Learnings, each with its text and `actions` (action, button, note hint).
fn entries(list: &[Learning], who: &Visitor, actions: &[(&str, &str, &str)]) -> Markup {
    html! {
        @for l in list {
            li.entry data-id=(l.id) {
                (text(l))
                div.actions {
                    @for (action, label, hint) in actions {
                        (act(l, who, action, label, hint))
                    }
                }
            }
        }
    }
}

/// A learning's text and provenance, linked to its page.
fn text(l: &Learning) -> Markup {
    html! {
        p.pattern { a href=(format!("learnings/{}", l.id)) { (l.pattern) } }
        @if let Some(c) = &l.context { p.context { (c) } }
        (provenance(l))
    }
}

/// One action on `l` that comes back to this page.
fn act(l: &Learning, who: &Visitor, action: &str, label: &str, hint: &str) -> Markup {
    curate(
        &format!("learnings/{}/{action}", l.id),
        &who.csrf,
        action,
        label,
        html! {
            input type="hidden" name="back" value="review";
            input type="text" name="note" placeholder=(hint);
        },
    )
}

/// Both sides of a proposal, who proposed it, the evidence for the successor, and
/// accept / reject.
fn proposal(p: &Proposal, who: &Visitor) -> Markup {
    let to = |a: &str| format!("learnings/{}/{a}", p.old.id);
    html! {
        p.proposer { "Proposed by " (p.actor) " on " (p.issue) " at " (p.at) }
        div.sides {
            div.old { h3 { "Now" } (text(&p.old)) }
            div.new { h3 { "Proposed successor" } (text(&p.new)) }
        }
        p.evidence {
            "Evidence for the successor: helped " (p.new.feedback.helped)
            ", recorded again by " (p.new.confirmations) " issues"
            ", wrong " (p.new.feedback.wrong) "."
        }
        div.actions {
            (curate(&to("supersede"), &who.csrf, "supersede", "Accept", html! {
                input type="hidden" name="by" value=(p.new.id);
                input type="hidden" name="back" value="review";
            }))
            (curate(&to("reject"), &who.csrf, "reject", "Reject", html! {
                input type="hidden" name="by" value=(p.new.id);
                input type="hidden" name="back" value="review";
                input type="text" name="note" placeholder="why (optional)";
            }))
        }
    }
}
