//! MCP resources: the vault's documents, learnings and the bound issue, read through
//! the same scope as the tools.
//!
//! | URI | what | readable when the session may call |
//! | --- | --- | --- |
//! | `cairn://vault/{collection}/{+path}` | the document read now from its root: a text format as its file, HTML, a notebook or a PDF as the Markdown of its text (`vault::formats::served`) | `vault_retrieve` (every collection) or `search_knowledge` (the bound project's collections) |
//! | `cairn://learnings/{id}` | the learning with its history and chain (JSON), as `cairn learnings show` | `search_learnings` |
//! | `cairn://issues/{identifier}` | the issue with its findings and comments (JSON), as `get_issue` | `get_issue` |
//!
//! `resources/list` lists the bound issue and then the readable documents, a page at a
//! time; learnings are reached through their template (a project has thousands). A
//! URI the session cannot read is answered exactly like one that does not exist, so
//! scope reveals nothing. Path segments are percent-encoded where they are not URI
//! characters (a space is `%20`); `/` separates the path's directories.

use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate,
};
use serde_json::json;

use crate::error::Error;
use crate::vault::formats::mime_type;

use super::server::CairnServer;

const VAULT: &str = "cairn://vault/";
const LEARNINGS: &str = "cairn://learnings/";
const ISSUES: &str = "cairn://issues/";

/// Documents per `resources/list` page.
pub(crate) const PAGE: usize = 100;

/// What is escaped in a URI segment: everything but unreserved characters (and `/`
/// inside a path, where it separates directories).
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}')
    .add(b'/');
const PATH: &AsciiSet = &SEGMENT.remove(b'/');

/// The URI of vault document `(collection, path)`.
pub(crate) fn vault_uri(collection: &str, path: &str) -> String {
    format!(
        "{VAULT}{}/{}",
        utf8_percent_encode(collection, SEGMENT),
        utf8_percent_encode(path, PATH)
    )
}

/// What a URI names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Vault { collection: String, path: String },
    Learning(String),
    Issue(String),
}

fn decode(s: &str) -> Option<String> {
    let d = percent_decode_str(s).decode_utf8().ok()?.into_owned();
    (!d.is_empty()).then_some(d)
}

/// The target of `uri`, `None` when it is no Cairn resource URI.
pub(crate) fn parse(uri: &str) -> Option<Target> {
    if let Some(rest) = uri.strip_prefix(VAULT) {
        let (collection, path) = rest.split_once('/')?;
        return Some(Target::Vault {
            collection: decode(collection)?,
            path: decode(path)?,
        });
    }
    let one = |rest: &str| (!rest.contains('/')).then(|| decode(rest)).flatten();
    if let Some(rest) = uri.strip_prefix(LEARNINGS) {
        return one(rest).map(Target::Learning);
    }
    uri.strip_prefix(ISSUES).and_then(one).map(Target::Issue)
}

/// The resource templates, whatever the scope (a read outside it is refused).
fn templates() -> ListResourceTemplatesResult {
    let t = |uri: &str, name: &str, title: &str, description: &str, mime: &str| {
        ResourceTemplate::new(uri, name)
            .with_title(title)
            .with_description(description)
            .with_mime_type(mime)
    };
    ListResourceTemplatesResult::with_all_items(vec![
        t(
            "cairn://vault/{collection}/{+path}",
            "vault-document",
            "Knowledge Vault document",
            "A document of the vault by collection and path relative to its root: Markdown, reST, AsciiDoc, text or code as its file; HTML, a notebook or a PDF as the Markdown of its text.",
            "text/markdown",
        ),
        t(
            "cairn://learnings/{id}",
            "learning",
            "Learning",
            "A learning with its quality, feedback, history and supersession chain.",
            "application/json",
        ),
        t(
            "cairn://issues/{identifier}",
            "issue",
            "Issue",
            "An issue with its status, findings and comments.",
            "application/json",
        ),
    ])
}

/// The error for a URI the session cannot read, whether or not it exists.
fn unreadable(uri: &str, why: &str) -> McpError {
    McpError::resource_not_found(
        format!("{uri}: {why}"),
        Some(json!({
            "uri": uri,
            "help": "list readable resources with resources/list; URIs follow the templates of \
                     resources/templates/list (cairn://vault/{collection}/{path}, \
                     cairn://learnings/{id}, cairn://issues/{identifier})",
        })),
    )
}

impl CairnServer {
    /// `resources/templates/list`.
    pub(super) fn resource_templates(&self) -> ListResourceTemplatesResult {
        templates()
    }

    /// The collections whose documents this session may read: `None` for all, `Some`
    /// (maybe empty) for the bound project's.
    pub(super) fn readable_collections(&self) -> Option<Option<Vec<String>>> {
        if self.allows("vault_retrieve") {
            return Some(None);
        }
        if !self.allows("search_knowledge") {
            return None;
        }
        let project = self.work().project_id.as_deref()?;
        let p = self.cairn().project(project).ok()?;
        Some(Some(p.vault_collections()))
    }

    /// `resources/list`: the bound issue, then a page of documents.
    pub(super) async fn resources_page(
        &self,
        request: Option<PaginatedRequestParams>,
    ) -> Result<ListResourcesResult, McpError> {
        let cursor = request.and_then(|r| r.cursor);
        let after = match cursor.as_deref() {
            None => None,
            Some(c) => Some(decode_cursor(c).ok_or_else(|| {
                McpError::invalid_params(
                    format!("cursor {c:?} is not one this server gave; list again without it"),
                    None,
                )
            })?),
        };
        let this = self.clone();
        let page = tokio::task::spawn_blocking(move || -> Result<_, Error> {
            let mut resources = Vec::new();
            if after.is_none()
                && this.allows("get_issue")
                && let Some(bound) = &this.work().issue
            {
                let issue = this.cairn().issue(&bound.id)?;
                resources.push(
                    Resource::new(format!("{ISSUES}{}", issue.identifier), &issue.identifier)
                        .with_title(issue.title.clone())
                        .with_description(
                            "The issue this session works on: status, findings, comments.",
                        )
                        .with_mime_type("application/json"),
                );
            }
            let Some(collections) = this.readable_collections() else {
                return Ok((resources, None));
            };
            let page = this.cairn().vault_documents(
                collections.as_deref(),
                after.as_ref().map(|(c, p)| (c.as_str(), p.as_str())),
                PAGE,
            )?;
            resources.extend(page.documents.into_iter().map(|d| {
                let r = Resource::new(vault_uri(&d.collection, &d.path), d.path.clone())
                    .with_description(format!("{} (collection {})", d.path, d.collection))
                    .with_mime_type(mime_type(&d.path));
                match d.title {
                    Some(t) => r.with_title(t),
                    None => r,
                }
            }));
            Ok((resources, page.next.map(|(c, p)| encode_cursor(&c, &p))))
        })
        .await
        .map_err(|e| McpError::internal_error(format!("listing failed: {e}"), None))?
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let mut result = ListResourcesResult::with_all_items(page.0);
        result.next_cursor = page.1;
        Ok(result)
    }

    /// `resources/read`.
    pub(super) async fn read(&self, uri: String) -> Result<ReadResourceResult, McpError> {
        let Some(target) = parse(&uri) else {
            return Err(unreadable(&uri, "not a Cairn resource URI"));
        };
        let this = self.clone();
        let blocking_uri = uri.clone();
        let read = tokio::task::spawn_blocking(move || this.read_target(&blocking_uri, target))
            .await
            .map_err(|e| McpError::internal_error(format!("read failed: {e}"), None))??;
        tracing::info!(uri, session = %self.session(), "resource read");
        Ok(read)
    }

    fn read_target(&self, uri: &str, target: Target) -> Result<ReadResourceResult, McpError> {
        let outside = || unreadable(uri, "no such resource within this session's scope");
        let failed = |e: Error| read_error(uri, e);
        let json_contents = |mut v: serde_json::Value| {
            crate::text::clean_json(&mut v);
            let text = serde_json::to_string_pretty(&v).unwrap_or_default();
            ReadResourceResult::new(vec![
                ResourceContents::text(text, uri).with_mime_type("application/json"),
            ])
        };
        match target {
            Target::Vault { collection, path } => {
                let collections = self.readable_collections().ok_or_else(outside)?;
                let doc = self
                    .cairn()
                    .vault_document(self.work(), collections.as_deref(), &collection, &path)
                    .map_err(failed)?;
                Ok(ReadResourceResult::new(vec![
                    ResourceContents::text(doc.text, uri).with_mime_type(mime_type(&path)),
                ]))
            }
            Target::Learning(id) => {
                if !self.allows("search_learnings") || self.work().project_id.is_none() {
                    return Err(outside());
                }
                let detail = self
                    .cairn()
                    .learning_as(&id, crate::learnings::Reader::agent(self.work()))
                    .map_err(failed)?;
                Ok(json_contents(
                    serde_json::to_value(detail).unwrap_or_default(),
                ))
            }
            Target::Issue(identifier) => {
                if !self.allows("get_issue") {
                    return Err(outside());
                }
                let details = self
                    .cairn()
                    .issue_details_as(&identifier, crate::learnings::Reader::agent(self.work()))
                    .map_err(failed)?;
                Ok(json_contents(
                    serde_json::to_value(details).unwrap_or_default(),
                ))
            }
        }
    }
}

/// The JSON-RPC error of a read that failed with `e`: what does not exist (or is out of
/// reach) `-32002` like an unknown URI, what exists but cannot be read now `-32002` with
/// the reason (a listed document no longer a file in the worktree), what the URI names
/// but Cairn refuses to read `-32602` with the reason (a symlink out of the root, not a
/// regular file, too large), and only a fault of Cairn's `-32603`, without details (they
/// are logged).
fn read_error(uri: &str, e: Error) -> McpError {
    use crate::error::ErrorKind as K;
    match e.kind() {
        K::NotFound | K::TaskNotFound | K::ProjectNotFound | K::SessionNotFound => {
            unreadable(uri, "no such resource within this session's scope")
        }
        K::FailedPrecondition | K::WorkspaceInvalid | K::ModelUnavailable => {
            McpError::resource_not_found(format!("{uri}: {e}"), Some(json!({"uri": uri})))
        }
        K::InvalidInput
        | K::InvalidTransition
        | K::PermissionDenied
        | K::NoBoundIssue
        | K::Conflict
        | K::AlreadyFinalized => {
            McpError::invalid_params(format!("{uri}: {e}"), Some(json!({"uri": uri})))
        }
        K::Index | K::StorageFull | K::Internal => {
            tracing::error!(uri, error = %e, "resource read failed");
            McpError::internal_error(
                format!("{uri}: the read failed inside Cairn; the server's log has the cause"),
                None,
            )
        }
    }
}

fn encode_cursor(collection: &str, path: &str) -> String {
    hex::encode(format!("{collection}\n{path}"))
}

fn decode_cursor(cursor: &str) -> Option<(String, String)> {
    let bytes = hex::decode(cursor).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (c, p) = text.split_once('\n')?;
    Some((c.to_owned(), p.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_refuse_what_they_do_not_name() {
        let uri = vault_uri("team docs", "guide/a b#1?.md");
        assert_eq!(uri, "cairn://vault/team%20docs/guide/a%20b%231%3F.md");
        assert_eq!(
            parse(&uri),
            Some(Target::Vault {
                collection: "team docs".into(),
                path: "guide/a b#1?.md".into()
            })
        );
        assert_eq!(
            parse("cairn://learnings/L-1"),
            Some(Target::Learning("L-1".into()))
        );
        assert_eq!(
            parse("cairn://issues/SHOP-12"),
            Some(Target::Issue("SHOP-12".into()))
        );
        for bad in [
            "cairn://vault/only-collection",
            "cairn://vault//a.md",
            "cairn://learnings/",
            "cairn://learnings/a/b",
            "cairn://issues/%FF",
            "file:///etc/passwd",
            "cairn://other/x",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        assert_eq!(
            decode_cursor(&encode_cursor("c", "a/b.md")),
            Some(("c".into(), "a/b.md".into()))
        );
        assert_eq!(decode_cursor("zz"), None);
    }
}
