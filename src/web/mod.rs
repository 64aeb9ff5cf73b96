//! The daemon's web page for people (`/ui/`, docs/web.md): what the agents learned,
//! server-rendered HTML with no script at all.
//!
//! Access: a person's token (`cairn session new --human`) is a one-time login URL
//! (`/ui/login?code=...`); its first visit gives the browser an HttpOnly, SameSite=Strict
//! cookie that stands for the person until the token expires or is revoked. An agent's
//! token never opens the page, and nothing else does.
//!
//! Every text shown was written by an untrusted agent: maud escapes every value it
//! interpolates, the Content-Security-Policy forbids every script and every source but
//! the page's own stylesheet, and no link is made from stored text.

mod charts;
mod issues;
mod pages;
mod review;
mod service;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use maud::{Markup, html};
use serde::Deserialize;

use crate::Cairn;
use crate::tokens::Person;

/// The login cookie.
const COOKIE: &str = "cairn_ui";

/// What the page's handlers share.
#[derive(Clone)]
struct Web {
    cairn: Arc<Cairn>,
}

/// The routes under `/ui` (nested by the daemon's router, behind its Host and Origin
/// checks).
pub(crate) fn routes<S: Clone + Send + Sync + 'static>(cairn: Arc<Cairn>) -> Router<S> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui/learnings") }))
        .route("/login", get(login))
        .route("/learnings", get(pages::learnings))
        .route("/learnings/{id}", get(pages::learning))
        .route("/learnings/{id}/{action}", post(pages::act))
        .route("/review", get(review::review))
        .route("/issues", get(issues::list))
        .route("/issues/{identifier}", get(issues::issue))
        .route("/vault", get(service::vault))
        .route("/vault/{collection}", get(service::document))
        .route("/service", get(service::service))
        .route("/tokens/{id}/revoke", post(service::revoke))
        .route("/cairn.css", get(css))
        .layer(middleware::from_fn(secure_headers))
        .with_state(Web { cairn })
}

/// Headers on every answer of the page: no script, no frame, no sniffing, no referrer
/// to other sites (`same-origin`: with `no-referrer` a browser sends `Origin: null` on
/// the page's own form posts, which the Origin checks must refuse), no cache.
async fn secure_headers(req: Request, next: Next) -> Response {
    let mut r = next.run(req).await;
    let h = r.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    r
}

async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("cairn.css"),
    )
        .into_response()
}

#[derive(Deserialize)]
struct LoginQuery {
    code: Option<String>,
}

/// `GET /ui/login?code=TOKEN`: a person's token, once, becomes the browser's cookie.
async fn login(State(w): State<Web>, Query(q): Query<LoginQuery>) -> Response {
    let code = q.code.unwrap_or_default();
    let cairn = w.cairn.clone();
    let redeemed = tokio::task::spawn_blocking(move || cairn.redeem_login(&code)).await;
    match redeemed {
        Ok(Ok(Some((secret, person)))) => {
            tracing::info!(token = %person.id, actor = %person.actor, "a person logged in to the web page");
            let max_age = max_age(&person.expires_at);
            let cookie = format!(
                "{COOKIE}={secret}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={max_age}"
            );
            let mut r = Redirect::to("/ui/learnings").into_response();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Ok(Ok(None)) => refused(
            "This login link is not valid: it was used already, it expired or was revoked, \
             or it is not a person's token (an agent's token never opens this page).",
        ),
        Ok(Err(e)) => failed(&e.to_string()),
        Err(e) => failed(&e.to_string()),
    }
}

/// Seconds from now to `expires_at` (ISO-8601), at least 0.
fn max_age(expires_at: &str) -> i64 {
    let parsed =
        time::OffsetDateTime::parse(expires_at, &time::format_description::well_known::Rfc3339);
    parsed
        .map(|t| (t - time::OffsetDateTime::now_utc()).whole_seconds().max(0))
        .unwrap_or(0)
}

/// A logged-in person, and the token their forms carry against cross-site requests.
pub(crate) struct Visitor {
    person: Person,
    /// Derived from the browser's secret: only a page served to that browser has it.
    csrf: String,
}

/// The person whose browser sent the request's cookie; without one, the request is
/// answered with the login page.
impl axum::extract::FromRequestParts<Web> for Visitor {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        w: &Web,
    ) -> Result<Visitor, Response> {
        let secret = parts
            .headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .find_map(|c| {
                c.trim()
                    .strip_prefix(&format!("{COOKIE}="))
                    .map(String::from)
            });
        let Some(secret) = secret else {
            return Err(refused("You are not logged in."));
        };
        let csrf = crate::base::sha256_hex(format!("csrf:{secret}"));
        let cairn = w.cairn.clone();
        match tokio::task::spawn_blocking(move || cairn.person(&secret)).await {
            Ok(Ok(Some(person))) => Ok(Visitor { person, csrf }),
            Ok(Ok(None)) => Err(refused(
                "Your login ended: the token expired or was revoked.",
            )),
            Ok(Err(e)) => Err(failed(&e.to_string())),
            Err(e) => Err(failed(&e.to_string())),
        }
    }
}

/// A state-changing request must come from this page: an `Origin` naming the host the
/// request was sent to, and the form's token of this browser's login. `Some`: the
/// refusal to answer with.
fn cross_site(headers: &HeaderMap, visitor: &Visitor, token: &str) -> Option<Response> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok());
    let from_here = matches!((host, origin), (Some(h), Some(o)) if o == format!("http://{h}"));
    // Compared whole: both are hex of one length, and a wrong one ends the request.
    if !from_here || token != visitor.csrf {
        tracing::warn!(actor = %visitor.person.actor, from_here, "a cross-site request to the web page refused");
        let body = page(
            "Refused",
            Some(&visitor.person),
            html! {
                h1 { "Refused" }
                p { "This request did not come from a page of this daemon. Go back, reload the page and try again." }
            },
        );
        return Some((StatusCode::FORBIDDEN, body).into_response());
    }
    None
}

/// Run `f` on the blocking pool. An internal error becomes the error page; any other
/// the page saying what was wrong, with `status`.
async fn run<T: Send + 'static>(
    who: &Person,
    status: StatusCode,
    f: impl FnOnce() -> crate::Result<T> + Send + 'static,
) -> Result<T, Response> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) if e.kind() == crate::error::ErrorKind::Internal => Err(failed(&e.to_string())),
        Ok(Err(e)) => Err(problem(who, status, &e.to_string())),
        Err(e) => Err(failed(&e.to_string())),
    }
}

/// What was wrong with a request of a logged-in person, and the way back.
fn problem(who: &Person, status: StatusCode, message: &str) -> Response {
    let body = page(
        "Not done",
        Some(who),
        html! {
            h1 { "Not done" }
            p.error { (message) }
            p { a href="/ui/" { "Back to the page" } }
        },
    );
    (status, body).into_response()
}

/// 401 with how to log in.
fn refused(why: &str) -> Response {
    let body = page(
        "Log in",
        None,
        html! {
            h1 { "Log in" }
            p { (why) }
            p { "Ask for a login link on the daemon's host:" }
            pre { "cairn session new --human --ttl 12h" }
        },
    );
    (StatusCode::UNAUTHORIZED, body).into_response()
}

fn failed(why: &str) -> Response {
    tracing::error!(error = why, "web page request failed");
    let body = page(
        "Error",
        None,
        html! { h1 { "Something failed" } p { "The daemon's log on stderr has the cause." } },
    );
    (StatusCode::INTERNAL_SERVER_ERROR, body).into_response()
}

/// A whole page: the stylesheet, the navigation (when logged in) and `content`.
fn page(title: &str, person: Option<&Person>, content: Markup) -> Html<String> {
    let page = html! {
        (maud::DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Cairn" }
                link rel="stylesheet" href="/ui/cairn.css";
            }
            body {
                header {
                    span.brand { "Cairn" }
                    @if let Some(p) = person {
                        nav {
                            a href="/ui/learnings" { "Learnings" }
                            a href="/ui/review" { "Review" }
                            a href="/ui/issues" { "Issues" }
                            a href="/ui/vault" { "Vault" }
                            a href="/ui/service" { "Service" }
                        }
                        span.who { (p.actor) }
                    }
                }
                main { (content) }
            }
        }
    };
    Html(page.into_string())
}
