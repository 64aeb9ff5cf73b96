//! The daemon's web page for people (`/ui/`, docs/web.md): what the agents learned,
//! server-rendered HTML with no script at all.
//!
//! Access: a person's token (`cairn session new --human`) is a one-time login URL
//! (`/ui/login?code=...`). Its first visit opens a login of its own: a random place
//! `/ui/<key>/` where the pages of that login live, an HttpOnly, SameSite=Strict cookie
//! whose `Path` is that place (so the browser sends it to no other path, on any port),
//! and a random form token kept here. The cookie stands for the person until the token
//! expires or is revoked; the place and the form token for this daemon's life. An
//! agent's token never opens the page, and nothing else does.
//!
//! Every text shown was written by an untrusted agent: maud escapes every value it
//! interpolates, the Content-Security-Policy forbids every script and every source but
//! the page's own stylesheet, and no link is made from stored text.

mod charts;
mod issues;
mod learnings;
mod review;
mod service;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use maud::{Markup, html};
use serde::Deserialize;

use crate::Cairn;
use crate::access::tokens::Person;
use crate::base::sha256_hex;

/// The login cookie.
const COOKIE: &str = "cairn_ui";

/// What the page's handlers share.
#[derive(Clone)]
struct Web {
    cairn: Arc<Cairn>,
    logins: Arc<Logins>,
    /// The origin browsers see behind a TLS-terminating proxy (`--public-origin`).
    public_origin: Option<Arc<str>>,
}

/// The logins of this daemon's life, by their place's key.
#[derive(Default)]
struct Logins(Mutex<HashMap<String, Login>>);

/// One login: what only the daemon and the person's browser know.
#[derive(Clone)]
struct Login {
    /// SHA-256 of the browser's secret (its cookie), as the token's row stores it.
    browser_hash: String,
    /// The form token: random, never in a cookie, compared in constant time.
    form: String,
    /// When the person's token expires; the login is dropped after.
    expires_at: String,
}

impl Logins {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Login>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new login for the browser presenting `secret`; its key.
    fn open(&self, secret: &str, expires_at: &str) -> crate::Result<String> {
        let key = random_hex::<16>()?;
        let login = Login {
            browser_hash: sha256_hex(secret),
            form: random_hex::<32>()?,
            expires_at: expires_at.to_string(),
        };
        let now = crate::base::now_iso();
        let mut map = self.map();
        map.retain(|_, l| l.expires_at > now);
        map.insert(key.clone(), login);
        Ok(key)
    }
}

/// `N` random bytes from the operating system, as hex.
fn random_hex<const N: usize>() -> crate::Result<String> {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).map_err(|e| {
        crate::Error::Internal(format!("no randomness from the operating system: {e}"))
    })?;
    Ok(hex::encode(buf))
}

/// Equal, in a time that depends on the lengths only.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// `--public-origin`: `http(s)://host[:port]`, nothing after; a trailing `/` is dropped.
pub(crate) fn parse_public_origin(s: &str) -> Result<String, String> {
    let origin = s.trim_end_matches('/');
    let authority = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
        .ok_or_else(|| format!("{s:?} is not an origin: it starts with https:// or http://"))?;
    let clean = !authority.is_empty()
        && authority
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b));
    if clean {
        Ok(origin.to_ascii_lowercase())
    } else {
        Err(format!(
            "{s:?} is not an origin: scheme://host[:port], with no path, user or query"
        ))
    }
}

/// The routes under `/ui` (nested by the daemon's router, behind its Host and Origin
/// checks): the login, the stylesheet, and every page under a login's place.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>(
    cairn: Arc<Cairn>,
    public_origin: Option<String>,
) -> Router<S> {
    let web = Web {
        cairn,
        logins: Arc::new(Logins::default()),
        public_origin: public_origin.map(Arc::from),
    };
    let pages = Router::new()
        .route("/", get(home))
        .route("/learnings", get(learnings::list))
        .route("/learnings/{id}", get(learnings::learning))
        .route("/learnings/{id}/{action}", post(learnings::act))
        .route("/review", get(review::review))
        .route("/issues", get(issues::list))
        .route("/issues/{identifier}", get(issues::issue))
        .route("/vault", get(service::vault))
        .route("/vault/{collection}", get(service::document))
        .route("/service", get(service::service))
        .route("/tokens/{id}/revoke", post(service::revoke))
        .with_state(web.clone());
    let in_place =
        tower_layer::Layer::layer(&middleware::from_fn_with_state(web.clone(), enter), pages);
    Router::new()
        .route("/login", get(login))
        .route("/cairn.css", get(css))
        .fallback_service(in_place)
        .layer(middleware::from_fn(secure_headers))
        .with_state(web)
}

/// Headers on every answer of the page: no script, no frame, no sniffing, no referrer
/// to other origins (`same-origin`: a login's place is in every address, and no other
/// origin, another port included, gets it; `no-referrer` would make a browser send
/// `Origin: null` on the page's own form posts, which the Origin checks must refuse), no
/// cache.
async fn secure_headers(req: Request, next: Next) -> Response {
    let mut r = next.run(req).await;
    let h = r.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'self'",
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

/// `GET /ui/login?code=TOKEN`: a person's token, once, becomes a login: its place, the
/// browser's cookie for that place only, and the way there.
async fn login(State(w): State<Web>, Query(q): Query<LoginQuery>) -> Response {
    let code = q.code.unwrap_or_default();
    let cairn = w.cairn.clone();
    let redeemed = tokio::task::spawn_blocking(move || cairn.redeem_login(&code)).await;
    match redeemed {
        Ok(Ok(Some((secret, person)))) => {
            let key = match w.logins.open(&secret, &person.expires_at) {
                Ok(key) => key,
                Err(e) => return failed(&e.to_string()),
            };
            tracing::info!(token = %person.id, actor = %person.actor, "a person logged in to the web page");
            let max_age = max_age(&person.expires_at);
            // Behind https the cookie never travels in clear.
            let secure = w
                .public_origin
                .as_deref()
                .is_some_and(|o| o.starts_with("https://"));
            let cookie = format!(
                "{COOKIE}={secret}; Path=/ui/{key}; HttpOnly; SameSite=Strict; Max-Age={max_age}{}",
                if secure { "; Secure" } else { "" }
            );
            let mut r = Redirect::to(&format!("/ui/{key}/learnings")).into_response();
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

/// Every request under `/ui/<key>/`: the login whose place it is, the browser's cookie of
/// that login among any others of the same name (tossed by a page of another port: they
/// are not that login's, and are ignored), and the person while their token is active.
/// The pages below see the path after the place (`/learnings`, ...) and the [`Visitor`].
async fn enter(State(w): State<Web>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().trim_start_matches('/');
    let (key, rest) = path.split_once('/').unwrap_or((path, ""));
    let login = w.logins.map().get(key).cloned();
    let Some(login) = login else {
        return refused(
            "You are not logged in here: a login ends when its token expires or is revoked, \
             and when the daemon restarts.",
        );
    };
    let secret = cookies(req.headers()).find(|c| same(&sha256_hex(c), &login.browser_hash));
    let Some(secret) = secret.map(String::from) else {
        return refused("You are not logged in.");
    };
    let cairn = w.cairn.clone();
    let person = match tokio::task::spawn_blocking(move || cairn.person(&secret)).await {
        Ok(Ok(Some(person))) => person,
        Ok(Ok(None)) => {
            w.logins.map().remove(key);
            return refused("Your login ended: the token expired or was revoked.");
        }
        Ok(Err(e)) => return failed(&e.to_string()),
        Err(e) => return failed(&e.to_string()),
    };
    let visitor = Visitor {
        person,
        home: format!("/ui/{key}/"),
        csrf: login.form,
        public_origin: w.public_origin.clone(),
    };
    let inner = match req.uri().query() {
        Some(q) => format!("/{rest}?{q}"),
        None => format!("/{rest}"),
    };
    match inner.parse::<Uri>() {
        Ok(uri) => *req.uri_mut() = uri,
        Err(e) => return failed(&e.to_string()),
    }
    req.extensions_mut().insert(visitor);
    next.run(req).await
}

/// The values of the request's `cairn_ui` cookies, in every `Cookie` header.
fn cookies(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// `GET /ui/<key>/`: the learnings.
async fn home(who: Visitor) -> Response {
    Redirect::to(&who.url("learnings")).into_response()
}

/// A logged-in person, where their login's pages are, and the token their forms carry
/// against cross-site requests.
#[derive(Clone)]
pub(crate) struct Visitor {
    person: Person,
    /// The login's place, `/ui/<key>/`: every page's base, every link relative to it.
    home: String,
    /// The login's form token: random, kept by the daemon, in no cookie.
    csrf: String,
    public_origin: Option<Arc<str>>,
}

impl Visitor {
    /// The address of `page` (relative, as `learnings/ID`) in this login's place.
    fn url(&self, page: &str) -> String {
        format!("{}{page}", self.home)
    }
}

/// The person [`enter`] found for the request.
impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Visitor {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Visitor, Response> {
        parts
            .extensions
            .get::<Visitor>()
            .cloned()
            .ok_or_else(|| refused("You are not logged in."))
    }
}

/// A state-changing request must come from this page: an `Origin` naming the host the
/// request was sent to (or the `--public-origin` of the proxy in front), and the form's
/// token of this login. `Some`: the refusal to answer with.
fn cross_site(headers: &HeaderMap, visitor: &Visitor, token: &str) -> Option<Response> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok());
    let direct = matches!((host, origin), (Some(h), Some(o)) if o == format!("http://{h}"));
    let proxied = origin.is_some() && origin == visitor.public_origin.as_deref();
    let from_here = direct || proxied;
    if !from_here || !same(token, &visitor.csrf) {
        tracing::warn!(actor = %visitor.person.actor, from_here, "a cross-site request to the web page refused");
        let body = page(
            "Refused",
            Some(visitor),
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
    who: &Visitor,
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
fn problem(who: &Visitor, status: StatusCode, message: &str) -> Response {
    let body = page(
        "Not done",
        Some(who),
        html! {
            h1 { "Not done" }
            p.error { (message) }
            p { a href="learnings" { "Back to the page" } }
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

/// A whole page: the stylesheet, the navigation (when logged in: every link relative to
/// the login's place) and `content`.
fn page(title: &str, visitor: Option<&Visitor>, content: Markup) -> Html<String> {
    let page = html! {
        (maud::DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Cairn" }
                @if let Some(v) = visitor { base href=(v.home); }
                link rel="stylesheet" href="/ui/cairn.css";
            }
            body {
                header {
                    span.brand { "Cairn" }
                    @if let Some(v) = visitor {
                        nav {
                            a href="learnings" { "Learnings" }
                            a href="review" { "Review" }
                            a href="issues" { "Issues" }
                            a href="vault" { "Vault" }
                            a href="service" { "Service" }
                        }
                        span.who { (v.person.actor) }
                    }
                }
                main { (content) }
            }
        }
    };
    Html(page.into_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_origins_are_a_scheme_and_an_authority() {
        for (given, kept) in [
            (
                "https://cairn.example.internal",
                "https://cairn.example.internal",
            ),
            ("https://Cairn.Example:8443/", "https://cairn.example:8443"),
            ("http://[::1]:7411", "http://[::1]:7411"),
        ] {
            assert_eq!(parse_public_origin(given).as_deref(), Ok(kept), "{given}");
        }
        for bad in [
            "cairn.example",
            "https://",
            "https://cairn.example/ui",
            "https://user@cairn.example",
            "https://cairn.example?x",
            "ftp://cairn.example",
            "https://cairn example",
        ] {
            assert!(parse_public_origin(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_login_cookie_of_a_request_is_seen_and_only_equal_strings_are_the_same() {
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("cairn_ui=a; other=b; cairn_uix=c"),
        );
        h.append(header::COOKIE, HeaderValue::from_static(" cairn_ui=d"));
        assert_eq!(cookies(&h).collect::<Vec<_>>(), ["a", "d"]);
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "abcd"));
        assert!(!same("", "a"));
    }
}
