//! The vault as documents to browse (MCP resources): the indexed documents of some
//! collections a page at a time, one document as served, and cheap marks of change
//! for the notifiers.
//!
//! A document is named by `(collection, path)`. Two roots may hold the same path in one
//! collection; the listing shows it once and a read takes the most recently indexed.
//! Only an indexed document can be read, so these reads reach no other file; its text
//! is read from its root on this machine, beneath the root, never through a symlink
//! ([`crate::paths`]), and cleaned like every stored text ([`crate::text`]); an HTML
//! page, a notebook or a PDF is served as the Markdown of its text ([`super::formats`]).

use std::collections::HashMap;
use std::path::PathBuf;

use crate::access::context::WorkContext;
use crate::error::{Error, Result};
use crate::paths::DirHandle;
use crate::store::db::{Conn, params};

use super::handle::Vault;
use super::ingest::read_file;

/// Most documents one page lists.
pub(crate) const MAX_PAGE: usize = 500;

/// One indexed document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DocumentEntry {
    pub(crate) collection: String,
    /// Relative to its root, `/`-separated.
    pub(crate) path: String,
    pub(crate) title: Option<String>,
    /// sha256 of the file's bytes when it was indexed.
    pub(crate) content_hash: String,
    /// When it was last indexed (ISO-8601 UTC).
    pub(crate) indexed_at: String,
}

/// One page of documents and where the next starts.
#[derive(Debug, Clone)]
pub(crate) struct DocumentPage {
    pub(crate) documents: Vec<DocumentEntry>,
    /// The last `(collection, path)` listed when more follow.
    pub(crate) next: Option<(String, String)>,
}

/// A document as served now ([`super::formats::served`]): the file of a text format,
/// the Markdown of an HTML page, notebook or PDF.
#[derive(Debug, Clone)]
pub(crate) struct DocumentText {
    pub(crate) text: String,
}

/// One stored chunk of a document (the web page's document view).
#[derive(Debug, Clone)]
pub(crate) struct StoredChunk {
    /// The headings above it, outermost first.
    pub(crate) heading_path: Vec<String>,
    pub(crate) line_start: i64,
    pub(crate) line_end: i64,
    pub(crate) text: String,
}

/// The collections filter as SQL: `None` is every collection.
fn among(c: &Conn<'_>, collections: Option<&[String]>, param: &str) -> (String, String) {
    match collections {
        // The parameter is bound either way, so the statement's count of them holds.
        None => (format!("{param} = '*'"), "*".to_owned()),
        Some(cs) => (
            format!(
                "collection IN ({})",
                c.dialect().json_elements(param, false)
            ),
            serde_json::to_string(cs).unwrap_or_else(|_| "[]".into()),
        ),
    }
}

fn entry(r: &crate::store::db::Row) -> Result<DocumentEntry> {
    Ok(DocumentEntry {
        collection: r.get(0)?,
        path: r.get(1)?,
        title: r.get(2)?,
        content_hash: r.get(3)?,
        indexed_at: r.get(4)?,
    })
}

impl Vault<'_> {
    /// The chunks of the most recently indexed `(collection, path)`, in order (none
    /// when it is not indexed).
    pub(crate) fn document_chunks(&self, collection: &str, path: &str) -> Result<Vec<StoredChunk>> {
        self.store.read(|c| {
            c.query_map(
                "SELECT heading_path, line_start, line_end, text FROM vault_chunks
                 WHERE document_id = (SELECT id FROM vault_documents
                                      WHERE collection = ?1 AND path = ?2
                                      ORDER BY indexed_at DESC, id DESC LIMIT 1)
                 ORDER BY ordinal",
                params![collection, path],
                |r| {
                    let headings: String = r.get(0)?;
                    Ok(StoredChunk {
                        heading_path: serde_json::from_str(&headings).unwrap_or_default(),
                        line_start: r.get(1)?,
                        line_end: r.get(2)?,
                        text: r.get(3)?,
                    })
                },
            )
        })
    }

    /// The documents of `collections` (every collection when `None`) in `(collection,
    /// path)` order, after `after`, at most `limit` (capped at [`MAX_PAGE`]).
    pub(crate) fn documents(
        &self,
        collections: Option<&[String]>,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<DocumentPage> {
        let limit = limit.clamp(1, MAX_PAGE);
        let (after_c, after_p) = after.unwrap_or(("", ""));
        let mut documents = self.store.read(|c| {
            let (filter, list) = among(c, collections, "?1");
            // One row per (collection, path): the most recently indexed.
            c.query_map(
                &format!(
                    "SELECT collection, path, title, content_hash, indexed_at FROM vault_documents d
                     WHERE {filter} AND (collection > ?2 OR (collection = ?2 AND path > ?3))
                       AND NOT EXISTS (SELECT 1 FROM vault_documents o
                           WHERE o.collection = d.collection AND o.path = d.path
                             AND (o.indexed_at > d.indexed_at
                                  OR (o.indexed_at = d.indexed_at AND o.id > d.id)))
                     ORDER BY collection, path LIMIT ?4"
                ),
                params![list, after_c, after_p, (limit + 1) as i64],
                entry,
            )
        })?;
        let next = (documents.len() > limit).then(|| {
            documents.truncate(limit);
            let last = &documents[limit - 1];
            (last.collection.clone(), last.path.clone())
        });
        Ok(DocumentPage { documents, next })
    }

    /// The stored row of `(collection, path)` and its root key, when indexed and in
    /// `collections`.
    fn document_row(
        &self,
        collections: Option<&[String]>,
        collection: &str,
        path: &str,
    ) -> Result<Option<(DocumentEntry, String)>> {
        self.store.read(|c| {
            let (filter, list) = among(c, collections, "?3");
            c.query_opt(
                &format!(
                    "SELECT collection, path, title, content_hash, indexed_at, root_key
                     FROM vault_documents WHERE collection = ?1 AND path = ?2 AND {filter}
                     ORDER BY indexed_at DESC, id DESC LIMIT 1"
                ),
                params![collection, path, list],
                |r| Ok((entry(r)?, r.get::<_, String>(5)?)),
            )
        })
    }

    /// The indexed document `(collection, path)` as served ([`super::formats::served`])
    /// if it is in `collections` (every collection when `None`), read from its root now.
    /// A document of the session's project is read from its worktree when it has one.
    pub(crate) fn document_text(
        &self,
        session: &WorkContext,
        collections: Option<&[String]>,
        collection: &str,
        path: &str,
    ) -> Result<DocumentText> {
        let Some((entry, root_key)) = self.document_row(collections, collection, path)? else {
            return Err(Error::not_found(
                "vault document",
                format!("{collection}/{path}"),
            ));
        };
        let dir = self.root_dir(session, &root_key)?;
        let handle = DirHandle::open_root(&dir)?;
        let Some(read) = read_file(&handle, &entry.path)? else {
            // Indexed, so within reach: say why it cannot be read (a `NotFound` is what
            // a document out of reach gets).
            return Err(Error::FailedPrecondition(format!(
                "{collection}/{path} is indexed, but is no longer a file in {} (deleted or \
                 renamed since it was indexed, or not in this worktree): list the resources \
                 again",
                dir.display()
            )));
        };
        let text = super::formats::served(&entry.path, &read.bytes)?;
        Ok(DocumentText { text })
    }

    /// Where the files of root `key` are on this machine.
    fn root_dir(&self, session: &WorkContext, key: &str) -> Result<PathBuf> {
        if let Some(id) = key.strip_prefix(super::identity::PROJECT_KEY) {
            if session.project_id.as_deref() == Some(id) {
                return Ok(self.tool_root(session)?.dir);
            }
            let p = crate::issues::project(self.store, id)?;
            return p.path.map(PathBuf::from).ok_or_else(|| {
                Error::FailedPrecondition(format!(
                    "project {} has no path on this machine to read its documents from",
                    p.slug
                ))
            });
        }
        match key.strip_prefix(super::identity::DIR_KEY) {
            Some(dir) => Ok(PathBuf::from(dir)),
            None => Err(Error::Internal(format!("unknown root key {key}"))),
        }
    }

    /// The mark of the list of `collections` (all when `None`): documents counted and the
    /// greatest id, which moves when one comes or goes.
    pub(crate) fn list_mark(&self, collections: Option<&[String]>) -> Result<(i64, i64)> {
        self.store.read(|c| {
            let (filter, list) = among(c, collections, "?1");
            c.query_row(
                &format!(
                    "SELECT count(*), coalesce(max(id), 0) FROM vault_documents WHERE {filter}"
                ),
                params![list],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
    }

    /// The content hash of each of `documents` (`(collection, path)`) that is indexed;
    /// a document that is not is absent from the answer.
    pub(crate) fn document_hashes(
        &self,
        documents: &[(String, String)],
    ) -> Result<HashMap<(String, String), String>> {
        let mut out = HashMap::new();
        for (collection, path) in documents {
            if let Some((entry, _)) = self.document_row(None, collection, path)? {
                out.insert((collection.clone(), path.clone()), entry.content_hash);
            }
        }
        Ok(out)
    }
}
