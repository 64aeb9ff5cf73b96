//! The vault's rows in SQLite (migration `0004_vault.sql`): documents and their chunks
//! with embeddings. SQLite is the truth; the HNSW index is derived from `vault_chunks`.
//!
//! Writing a document ([`write_document`]) keeps the row, and so the id and the vector
//! in the HNSW index, of every chunk whose heading path and text are unchanged (only
//! its position and line span are updated), inserts the new chunks and deletes the
//! others. Chunk ids come from `AUTOINCREMENT`: monotonic, never reused.

use std::collections::HashMap;

use crate::store::db::{Conn, params};
use serde::Serialize;

use crate::base::now_iso;
use crate::error::Result;

use super::chunk::Chunk;
use crate::embed::vector::{decode_vector, encode_vector};

/// What identifies a chunk's embedding: its heading path (JSON) and text hash. The
/// embedded text is the heading path plus the text, so both must match for reuse.
pub(crate) type ChunkKey = (String, String);

/// The key of a chunk about to be written.
pub(crate) fn chunk_key(chunk: &Chunk) -> ChunkKey {
    (
        heading_json(&chunk.heading_path),
        chunk.content_hash.clone(),
    )
}

fn heading_json(path: &[String]) -> String {
    serde_json::to_string(path).unwrap_or_else(|_| "[]".to_string())
}

/// A stored document's bookkeeping.
#[derive(Debug, Clone)]
pub(crate) struct StoredDoc {
    pub(crate) id: i64,
    pub(crate) content_hash: String,
    pub(crate) collection: String,
    pub(crate) chunker_version: u32,
    pub(crate) embed_model: String,
}

/// The document `(root_key, path)`, if stored.
pub(crate) fn find_doc(c: &Conn<'_>, root_key: &str, path: &str) -> Result<Option<StoredDoc>> {
    c.prepare(
        "SELECT id, content_hash, collection, chunker_version, embed_model
         FROM vault_documents WHERE root_key = ?1 AND path = ?2",
    )?
    .query_opt(params![root_key, path], |r| {
        Ok(StoredDoc {
            id: r.get(0)?,
            content_hash: r.get(1)?,
            collection: r.get(2)?,
            chunker_version: r.get(3)?,
            embed_model: r.get(4)?,
        })
    })
}

/// The embeddings of a document's chunks by [`ChunkKey`].
pub(crate) fn chunk_embeddings(c: &Conn<'_>, doc_id: i64) -> Result<HashMap<ChunkKey, Vec<f32>>> {
    let mut stmt = c.prepare(
        "SELECT id, heading_path, content_hash, embedding FROM vault_chunks WHERE document_id = ?1",
    )?;
    let mut rows = stmt.query([doc_id])?;
    let mut out = HashMap::new();
    while let Some(r) = rows.next()? {
        let id: i64 = r.get(0)?;
        let blob: Vec<u8> = r.get(3)?;
        out.insert((r.get(1)?, r.get(2)?), decode_vector(id, &blob)?);
    }
    Ok(out)
}

/// Everything written for one document.
#[derive(Debug)]
pub(crate) struct DocWrite<'a> {
    pub(crate) root_key: &'a str,
    pub(crate) path: &'a str,
    pub(crate) collection: &'a str,
    pub(crate) content_hash: &'a str,
    pub(crate) title: Option<&'a str>,
    pub(crate) modified_at: Option<&'a str>,
    pub(crate) front_matter: Option<String>,
    pub(crate) chunker_version: u32,
    pub(crate) embed_model: &'a str,
    /// The chunks in order, each with its vector.
    pub(crate) chunks: &'a [(Chunk, Vec<f32>)],
}

/// Row counts of one [`write_document`].
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WriteStats {
    /// Chunk rows kept (same heading path and text).
    pub(crate) kept: usize,
    /// Chunk rows inserted.
    pub(crate) inserted: usize,
    /// Chunk rows deleted.
    pub(crate) deleted: usize,
}

/// Insert or replace a document and its chunks; call inside one transaction. Chunk rows
/// are kept only when the document was embedded by the same embedder: after a model
/// change every chunk gets a new row (and id), so the graph, caught up by id, gets the
/// new vectors.
pub(crate) fn write_document(c: &Conn<'_>, w: &DocWrite<'_>) -> Result<WriteStats> {
    let now = now_iso();
    let same_embedder =
        find_doc(c, w.root_key, w.path)?.is_none_or(|d| d.embed_model == w.embed_model);
    let doc_id: i64 = c.query_row(
        "INSERT INTO vault_documents(root_key, path, collection, content_hash, title,
             modified_at, front_matter, chunker_version, embed_model, indexed_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT(root_key, path) DO UPDATE SET collection = excluded.collection,
             content_hash = excluded.content_hash, title = excluded.title,
             modified_at = excluded.modified_at, front_matter = excluded.front_matter,
             chunker_version = excluded.chunker_version, embed_model = excluded.embed_model,
             indexed_at = excluded.indexed_at
         RETURNING id",
        params![
            w.root_key,
            w.path,
            w.collection,
            w.content_hash,
            w.title,
            w.modified_at,
            w.front_matter,
            w.chunker_version,
            w.embed_model,
            now
        ],
        |r| r.get(0),
    )?;
    let mut existing: HashMap<ChunkKey, Vec<i64>> = HashMap::new();
    {
        let mut stmt = c.prepare(
            "SELECT id, heading_path, content_hash FROM vault_chunks
             WHERE document_id = ?1 ORDER BY ordinal DESC",
        )?;
        let mut rows = stmt.query([doc_id])?;
        while let Some(r) = rows.next()? {
            existing
                .entry((r.get(1)?, r.get(2)?))
                .or_default()
                .push(r.get(0)?);
        }
    }
    let mut stats = WriteStats::default();
    for (ordinal, (chunk, vector)) in w.chunks.iter().enumerate() {
        let key = chunk_key(chunk);
        let kept = match same_embedder {
            true => existing.get_mut(&key).and_then(Vec::pop),
            false => None,
        };
        if let Some(id) = kept {
            c.prepare(
                "UPDATE vault_chunks SET ordinal = ?2, line_start = ?3, line_end = ?4 WHERE id = ?1",
            )?
            .execute(params![
                id,
                ordinal as i64,
                chunk.line_start as i64,
                chunk.line_end as i64
            ])?;
            stats.kept += 1;
        } else {
            c.prepare(
                "INSERT INTO vault_chunks(document_id, ordinal, text, heading_path, line_start,
                     line_end, content_hash, embedding)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                doc_id,
                ordinal as i64,
                chunk.text,
                key.0,
                chunk.line_start as i64,
                chunk.line_end as i64,
                chunk.content_hash,
                encode_vector(vector)
            ])?;
            stats.inserted += 1;
        }
    }
    for id in existing.into_values().flatten() {
        c.prepare("DELETE FROM vault_chunks WHERE id = ?1")?
            .execute([id])?;
        stats.deleted += 1;
    }
    Ok(stats)
}

/// Delete a document and its chunks; returns how many chunks went, `None` when the
/// document was not stored.
pub(crate) fn delete_document(c: &Conn<'_>, root_key: &str, path: &str) -> Result<Option<usize>> {
    let Some(doc) = find_doc(c, root_key, path)? else {
        return Ok(None);
    };
    let chunks = c.execute("DELETE FROM vault_chunks WHERE document_id = ?1", [doc.id])?;
    c.execute("DELETE FROM vault_documents WHERE id = ?1", [doc.id])?;
    Ok(Some(chunks))
}

/// Paths of the documents of one root and collection.
pub(crate) fn doc_paths(c: &Conn<'_>, root_key: &str, collection: &str) -> Result<Vec<String>> {
    let mut stmt = c.prepare(
        "SELECT path FROM vault_documents WHERE root_key = ?1 AND collection = ?2 ORDER BY path",
    )?;
    let rows = stmt
        .query_map(params![root_key, collection], |r| r.get(0))?
        .collect::<crate::error::Result<_>>()?;
    Ok(rows)
}

/// The collection of a live chunk, `None` when the chunk no longer exists.
pub(crate) fn chunk_collection(c: &Conn<'_>, id: u64) -> Result<Option<String>> {
    c.prepare(
        "SELECT d.collection FROM vault_chunks c JOIN vault_documents d ON d.id = c.document_id
         WHERE c.id = ?1",
    )?
    .query_opt([id as i64], |r| r.get(0))
}

/// Where a hit comes from and what it covers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct HitMetadata {
    /// Headings above the chunk, `Guide > Install > From source`.
    pub(crate) heading_path: String,
    /// First line of the chunk in the file, 1-based.
    pub line_start: u32,
    /// Last line of the chunk in the file, 1-based, inclusive.
    pub(crate) line_end: u32,
    pub(crate) collection: String,
    /// sha256 of the chunk's text.
    pub(crate) chunk_hash: String,
    /// The document's title (front matter `title` or first `#` heading).
    pub(crate) title: Option<String>,
    /// What `path` is relative to: `project:<id>` or `dir:<absolute path>`.
    pub root: String,
    /// The chunk's id (stable while its heading path and text are unchanged).
    pub chunk_id: u64,
    /// When the document was last indexed (ISO-8601 UTC): how fresh this text is.
    pub(crate) indexed_at: String,
}

/// One search result.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct VaultHit {
    /// The chunk's text, verbatim from the file.
    pub text: String,
    /// The document's path relative to its root.
    pub path: String,
    /// The ranking key: results are ordered by it and `min_score` filters on it. A
    /// weighted sum of `cosine`, `lexical`, `overlap` and `path_overlap` whose weights
    /// sum to one (docs/vault.md, "Ranking"), at most 1.
    pub score: f32,
    /// Cosine similarity of the query's and the chunk's embeddings, -1 to 1.
    pub cosine: f32,
    /// The chunk's BM25 score over the best BM25 score among this query's candidates,
    /// 0 to 1 (0 when the chunk shares no word with the query).
    pub lexical: f32,
    /// The IDF-weighted share of the query's keywords in the chunk's heading path and
    /// text, IDF among this query's candidates, 0 to 1.
    pub overlap: f32,
    /// Source code: the IDF-weighted share of the query's keywords in the words of the
    /// item's heading path (`module › Type › name`, identifiers split: `issueApproved` is
    /// `issue` and `Approved`), IDF among this query's candidates, 0 to 1; 0 for prose.
    pub path_overlap: f32,
    pub metadata: HitMetadata,
}

/// The stored rows behind a search result (scores zero), `None` when the chunk was
/// deleted.
pub(crate) fn load_hit(c: &Conn<'_>, id: u64) -> Result<Option<VaultHit>> {
    c.prepare(
        "SELECT c.text, c.heading_path, c.line_start, c.line_end, c.content_hash,
                d.path, d.collection, d.title, d.root_key, d.indexed_at
         FROM vault_chunks c JOIN vault_documents d ON d.id = c.document_id WHERE c.id = ?1",
    )?
    .query_opt([id as i64], |r| {
        let headings: String = r.get(1)?;
        let headings: Vec<String> = serde_json::from_str(&headings).unwrap_or_default();
        Ok(VaultHit {
            text: r.get(0)?,
            path: r.get(5)?,
            score: 0.0,
            cosine: 0.0,
            lexical: 0.0,
            overlap: 0.0,
            path_overlap: 0.0,
            metadata: HitMetadata {
                heading_path: headings.join(super::chunk::HEADING_SEPARATOR),
                line_start: r.get(2)?,
                line_end: r.get(3)?,
                collection: r.get(6)?,
                chunk_hash: r.get(4)?,
                title: r.get(7)?,
                root: r.get(8)?,
                chunk_id: id,
                indexed_at: r.get(9)?,
            },
        })
    })
}

/// The stored embedding of one chunk, `None` when the chunk was deleted.
pub(crate) fn chunk_vector(c: &Conn<'_>, id: u64) -> Result<Option<Vec<f32>>> {
    let blob: Option<Vec<u8>> = c
        .prepare("SELECT embedding FROM vault_chunks WHERE id = ?1")?
        .query_opt([id as i64], |r| r.get(0))?;
    blob.map(|b| decode_vector(id as i64, &b)).transpose()
}

/// `(id, heading path and text)` of at most `limit` chunks with `after < id <= upto`,
/// by id: what the BM25 index holds of each chunk.
pub(crate) fn chunk_texts_between(
    c: &Conn<'_>,
    after: u64,
    upto: u64,
    limit: usize,
) -> Result<Vec<(u64, String)>> {
    let mut stmt = c.prepare(
        "SELECT id, heading_path, text FROM vault_chunks WHERE id > ?1 AND id <= ?2
         ORDER BY id LIMIT ?3",
    )?;
    let rows = stmt.query_map(params![after as i64, upto as i64, limit as i64], |r| {
        let headings: String = r.get(1)?;
        let headings: Vec<String> = serde_json::from_str(&headings).unwrap_or_default();
        let text: String = r.get(2)?;
        Ok((
            r.get::<_, i64>(0)? as u64,
            format!("{}\n{text}", headings.join("\n")),
        ))
    })?;
    rows.collect::<crate::error::Result<_>>()
}

/// `(max(id), live chunks with id <= w)` in one snapshot: what the BM25 index needs to
/// know whether it is behind and how many of its entries are dead.
pub(crate) fn lexical_watermarks(c: &Conn<'_>, w: u64) -> Result<(u64, u64)> {
    c.prepare(
        "SELECT (SELECT coalesce(max(id), 0) FROM vault_chunks),
                (SELECT count(*) FROM vault_chunks WHERE id <= ?1)",
    )?
    .query_row([w as i64], |r| {
        Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
    })
}

/// The highest chunk id ever committed and still present (0 for none).
pub(crate) fn max_chunk_id(c: &Conn<'_>) -> Result<u64> {
    let max: Option<i64> = c
        .prepare("SELECT max(id) FROM vault_chunks")?
        .query_row([], |r| r.get(0))?;
    Ok(max.unwrap_or(0) as u64)
}

/// How many chunks exist.
pub(crate) fn chunk_count(c: &Conn<'_>) -> Result<usize> {
    let n: i64 = c.query_row("SELECT count(*) FROM vault_chunks", [], |r| r.get(0))?;
    Ok(n as usize)
}

/// `(id, vector)` of the chunks with `after < id <= upto`, by id.
pub(crate) fn vectors_between(c: &Conn<'_>, after: u64, upto: u64) -> Result<Vec<(u64, Vec<f32>)>> {
    let mut stmt =
        c.prepare("SELECT id, embedding FROM vault_chunks WHERE id > ?1 AND id <= ?2 ORDER BY id")?;
    let mut rows = stmt.query(params![after as i64, upto as i64])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let id: i64 = r.get(0)?;
        let blob: Vec<u8> = r.get(1)?;
        out.push((id as u64, decode_vector(id, &blob)?));
    }
    Ok(out)
}

/// Tests: store `path` (root `dir:/t`, collection `c`, its path as content hash) with
/// these chunks and vectors, in one transaction.
#[cfg(test)]
pub(crate) fn write_test_document(
    store: &crate::store::Store,
    path: &str,
    chunks: &[(Chunk, Vec<f32>)],
) {
    store
        .write(|tx| {
            write_document(
                tx,
                &DocWrite {
                    root_key: "dir:/t",
                    path,
                    collection: "c",
                    content_hash: path,
                    title: None,
                    modified_at: None,
                    front_matter: None,
                    chunker_version: super::chunk::CHUNKER_VERSION,
                    embed_model: crate::embed::MODEL_ID,
                    chunks,
                },
            )
        })
        .unwrap();
}
