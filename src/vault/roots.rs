//! The roots the vault follows (migration `0011_vault_roots.sql`): what `cairn reindex
//! DIR` and `vault_update` indexed, the lease of the one process that follows each, and
//! what that process last reported. [`super::follow_files`] keeps them; `cairn vault status`
//! reads them ([`Vault::status`]).
//!
//! The lease: a follower writes its name (`host:pid:start`) and a heartbeat into a row
//! when it claims it, and renews the heartbeat every [`HEARTBEAT`]; a row whose heartbeat
//! is older than [`LEASE`] is free to claim. So at most one daemon (on any host of a
//! shared PostgreSQL) indexes a root's changes, and another takes over within [`LEASE`]
//! of it stopping without releasing (a clean stop releases at once).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::base::{iso, now_iso};
use crate::error::Result;
use crate::store::db::{Conn, params};

use super::documents::{delete_document, find_doc};
use super::formats::FileFilter;
use super::handle::Vault;
use super::identity::{DIR_KEY, relative_path};

/// How often a follower renews its leases (and reports its state).
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(15);
/// A lease whose heartbeat is older than this is free to claim.
pub(crate) const LEASE: Duration = Duration::from_secs(45);

/// What a root follows: a directory (`cairn reindex DIR`) or one file (`vault_update`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RootKind {
    Dir,
    File,
}

impl RootKind {
    fn as_str(self) -> &'static str {
        match self {
            RootKind::Dir => "dir",
            RootKind::File => "file",
        }
    }
}

/// A recorded root.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FollowedRoot {
    pub id: i64,
    /// `project:<id>` or `dir:<path>` ([`super::identity`]).
    pub(crate) root_key: String,
    /// The directory or file followed, relative to the root (empty: the root itself).
    pub(crate) prefix: String,
    pub(crate) kind: RootKind,
    pub(crate) collection: String,
    /// The root's canonical directory where it was recorded.
    pub(crate) dir: PathBuf,
    /// Which files it indexes ([`FileFilter`], stored as JSON).
    pub(crate) files: FileFilter,
}

impl FollowedRoot {
    /// The directory or file followed, absolute.
    pub fn path(&self) -> PathBuf {
        if self.prefix.is_empty() {
            self.dir.clone()
        } else {
            self.dir.join(&self.prefix)
        }
    }

    /// The directory whose entries are watched: the followed directory, or a followed
    /// file's directory.
    pub(crate) fn watched_dir(&self) -> PathBuf {
        let path = self.path();
        match self.kind {
            RootKind::Dir => path,
            RootKind::File => path.parent().map(Path::to_path_buf).unwrap_or(path),
        }
    }

    /// The project id of a `project:` root.
    pub(crate) fn project(&self) -> Option<&str> {
        self.root_key.strip_prefix("project:")
    }
}

/// Whether the relative path `path` is `prefix` or lies under it.
pub(crate) fn covers(prefix: &str, path: &str) -> bool {
    prefix.is_empty()
        || path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether `roots` already follow `prefix` of `root_key` in `collection`: the same
/// root, or a recorded directory above it.
fn is_recorded(roots: &[FollowedRoot], root_key: &str, prefix: &str, collection: &str) -> bool {
    roots.iter().any(|r| {
        r.root_key == root_key
            && r.collection == collection
            && (r.prefix == prefix || (r.kind == RootKind::Dir && covers(&r.prefix, prefix)))
    })
}

/// Record a root unless it is recorded already ([`is_recorded`]).
fn record(
    tx: &Conn<'_>,
    root_key: &str,
    prefix: &str,
    kind: RootKind,
    collection: &str,
    dir: &Path,
    files: &FileFilter,
) -> Result<()> {
    let roots = list(tx)?;
    let files_json = serde_json::to_string(files).unwrap_or_else(|_| "{}".into());
    if let Some(same) = roots
        .iter()
        .find(|r| r.root_key == root_key && r.prefix == prefix && r.collection == collection)
    {
        if &same.files != files {
            tx.execute(
                "UPDATE vault_roots SET files = ?2 WHERE id = ?1",
                params![same.id, files_json],
            )?;
        }
        return Ok(());
    }
    if is_recorded(&roots, root_key, prefix, collection) {
        return Ok(());
    }
    tx.execute(
        "INSERT INTO vault_roots (root_key, prefix, kind, collection, dir, added_at, files)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (root_key, prefix, collection) DO NOTHING",
        params![
            root_key,
            prefix,
            kind.as_str(),
            collection,
            dir.to_string_lossy().into_owned(),
            now_iso(),
            files_json
        ],
    )?;
    Ok(())
}

/// `rel` (a directory relative to a root) joined with `path` (relative to it).
fn join(rel: &str, path: &str) -> String {
    match (rel.is_empty(), path.is_empty()) {
        (true, _) => path.to_string(),
        (false, true) => rel.to_string(),
        (false, false) => format!("{rel}/{path}"),
    }
}

/// Move the documents and followed roots of `key` (a `dir:` root at `rel` in the root
/// `to_key`, directory `to_dir`) to `to_key` ([`Vault::adopt_dir_roots`]).
fn adopt(tx: &Conn<'_>, key: &str, rel: &str, to_key: &str, to_dir: &Path) -> Result<usize> {
    let docs: Vec<(i64, String)> = tx.query_map(
        "SELECT id, path FROM vault_documents WHERE root_key = ?1",
        params![key],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    for (id, path) in &docs {
        let to = join(rel, path);
        if find_doc(tx, to_key, &to)?.is_some() {
            delete_document(tx, key, path)?;
        } else {
            tx.execute(
                "UPDATE vault_documents SET root_key = ?2, path = ?3 WHERE id = ?1",
                params![*id, to_key, to],
            )?;
        }
    }
    let roots = list(tx)?;
    for r in roots.iter().filter(|r| r.root_key == key) {
        let prefix = join(rel, &r.prefix);
        let taken = roots
            .iter()
            .any(|o| o.root_key == to_key && o.prefix == prefix && o.collection == r.collection);
        if taken {
            tx.execute("DELETE FROM vault_roots WHERE id = ?1", params![r.id])?;
        } else {
            tx.execute(
                "UPDATE vault_roots SET root_key = ?2, prefix = ?3, dir = ?4 WHERE id = ?1",
                params![r.id, to_key, prefix, to_dir.to_string_lossy().into_owned()],
            )?;
        }
    }
    Ok(docs.len())
}

/// Every recorded root, oldest first.
pub(crate) fn list(c: &Conn<'_>) -> Result<Vec<FollowedRoot>> {
    Ok(with_leases(c)?.into_iter().map(|(root, _)| root).collect())
}

/// Every recorded root with its lease and last report, oldest first.
fn with_leases(c: &Conn<'_>) -> Result<Vec<(FollowedRoot, Lease)>> {
    c.query_map(
        "SELECT id, root_key, prefix, kind, collection, dir,
                follower, state, reason, pending, last_sync_at, heartbeat_at, files
         FROM vault_roots ORDER BY id",
        params![],
        |r| {
            let kind: String = r.get(3)?;
            let dir: String = r.get(5)?;
            let root = FollowedRoot {
                id: r.get(0)?,
                root_key: r.get(1)?,
                prefix: r.get(2)?,
                kind: if kind == "file" {
                    RootKind::File
                } else {
                    RootKind::Dir
                },
                collection: r.get(4)?,
                dir: PathBuf::from(dir),
                // An unreadable filter is the default one (documentation formats).
                files: serde_json::from_str(&r.get::<_, String>(12)?).unwrap_or_default(),
            };
            let lease = Lease {
                follower: r.get(6)?,
                state: r.get(7)?,
                reason: r.get(8)?,
                pending: r.get(9)?,
                last_sync_at: r.get(10)?,
                heartbeat_at: r.get(11)?,
            };
            Ok((root, lease))
        },
    )
}

/// The oldest heartbeat a live lease can have now.
fn lease_cutoff() -> String {
    iso(time::OffsetDateTime::now_utc() - LEASE)
}

/// Claim (or renew) root `id` for `me`: true when `me` holds it afterwards.
pub(crate) fn claim(tx: &Conn<'_>, id: i64, me: &str) -> Result<bool> {
    let n = tx.execute(
        "UPDATE vault_roots SET follower = ?2, heartbeat_at = ?3
         WHERE id = ?1 AND (follower IS NULL OR follower = ?2 OR heartbeat_at IS NULL
                            OR heartbeat_at < ?4)",
        params![id, me, now_iso(), lease_cutoff()],
    )?;
    Ok(n == 1)
}

/// What a follower reports about one root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Report {
    pub(crate) state: &'static str,
    pub(crate) reason: Option<String>,
    pub(crate) pending: u64,
    pub(crate) last_sync_at: Option<String>,
}

/// A follower's live view: its name and its report on each root it holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct FollowerReports {
    pub(crate) follower: String,
    pub(crate) reports: std::collections::HashMap<i64, Report>,
}

/// Write `me`'s report on root `id` (and renew its heartbeat); false when `me` no longer
/// holds the root.
pub(crate) fn report(tx: &Conn<'_>, id: i64, me: &str, r: &Report) -> Result<bool> {
    let n = tx.execute(
        "UPDATE vault_roots SET state = ?3, reason = ?4, pending = ?5,
                last_sync_at = coalesce(?6, last_sync_at), heartbeat_at = ?7
         WHERE id = ?1 AND follower = ?2",
        params![
            id,
            me,
            r.state,
            r.reason.clone(),
            r.pending as i64,
            r.last_sync_at.clone(),
            now_iso()
        ],
    )?;
    Ok(n == 1)
}

/// Give up `me`'s leases (a clean stop): the roots show as not followed at once and
/// another follower may claim them.
pub(crate) fn release(tx: &Conn<'_>, me: &str) -> Result<()> {
    tx.execute(
        "UPDATE vault_roots SET follower = NULL, state = NULL, reason = NULL, pending = 0,
                heartbeat_at = NULL
         WHERE follower = ?1",
        params![me],
    )?;
    Ok(())
}

/// One followed root of a collection, as `cairn vault status`, `server_health` and the
/// daemon's `/health` show it.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
#[schemars(description = "One followed root of a collection.")]
pub(crate) struct RootStatus {
    /// The followed directory or file, absolute (on the host that recorded it).
    pub(crate) root: String,
    /// `dir` (cairn reindex) or `file` (vault_update).
    pub(crate) kind: RootKind,
    /// `watching`, `rescanning` (events are not trusted: periodic rescans), or `not followed`.
    pub(crate) following: String,
    /// Why it is rescanning or not followed.
    pub(crate) reason: Option<String>,
    /// The process following it (`host:pid:start`), while one does.
    pub(crate) follower: Option<String>,
    /// Changes seen and not yet indexed (as last reported).
    pub(crate) pending: u64,
    /// When the last batch of changes committed.
    pub(crate) last_sync_at: Option<String>,
    /// Documents under it.
    pub(crate) documents: u64,
    /// Chunks of those documents.
    pub(crate) chunks: u64,
}

/// One collection's freshness.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
pub(crate) struct CollectionStatus {
    pub(crate) collection: String,
    /// Documents in the collection.
    pub(crate) documents: u64,
    pub(crate) chunks: u64,
    /// The roots it follows (none: indexed by hand only, e.g. before following existed).
    pub(crate) roots: Vec<RootStatus>,
}

/// A root's lease and its follower's last report, as stored.
struct Lease {
    follower: Option<String>,
    state: Option<String>,
    reason: Option<String>,
    pending: i64,
    last_sync_at: Option<String>,
    heartbeat_at: Option<String>,
}

impl Lease {
    /// Whether a follower holds it now (heartbeat within [`LEASE`]; `cutoff` from
    /// [`lease_cutoff`]).
    fn is_live(&self, cutoff: &str) -> bool {
        self.follower.is_some() && self.heartbeat_at.as_deref().is_some_and(|h| h >= cutoff)
    }
}

impl Vault<'_> {
    /// Every collection with its documents and followed roots.
    /// `here`: what the follower of this process reports now, fresher than its rows.
    pub(crate) fn status(&self, here: Option<&FollowerReports>) -> Result<Vec<CollectionStatus>> {
        self.store.snapshot(|c| {
            let counts: Vec<(String, i64, i64)> = c.query_map(
                "SELECT d.collection, count(DISTINCT d.id), count(c.id)
                 FROM vault_documents d LEFT JOIN vault_chunks c ON c.document_id = d.id
                 GROUP BY d.collection ORDER BY d.collection",
                params![],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?;
            let mut out: Vec<CollectionStatus> = counts
                .into_iter()
                .map(|(collection, d, n)| CollectionStatus {
                    collection,
                    documents: d as u64,
                    chunks: n as u64,
                    roots: Vec::new(),
                })
                .collect();
            let cutoff = lease_cutoff();
            for (root, lease) in with_leases(c)? {
                let (documents, chunks) = root_counts(c, &root)?;
                let live = lease.is_live(&cutoff);
                let mut status = RootStatus {
                    root: root.path().to_string_lossy().into_owned(),
                    kind: root.kind,
                    following: if live {
                        lease.state.clone().unwrap_or_else(|| "watching".into())
                    } else {
                        "not followed".into()
                    },
                    reason: if live {
                        lease.reason
                    } else if lease.follower.is_some() {
                        Some("its follower stopped reporting (no daemon runs, or it hangs)".into())
                    } else {
                        Some("no daemon follows it (start `cairn daemon`, or `cairn reindex DIR --watch`; a daemon follows only a directory that exists where it runs)".into())
                    },
                    follower: lease.follower.filter(|_| live),
                    pending: if live { lease.pending.max(0) as u64 } else { 0 },
                    last_sync_at: lease.last_sync_at,
                    documents,
                    chunks,
                };
                if let Some((me, rep)) = here.and_then(|l| Some((&l.follower, l.reports.get(&root.id)?))) {
                    status.following = rep.state.to_string();
                    status.reason = rep.reason.clone();
                    status.follower = Some(me.clone());
                    status.pending = rep.pending;
                    status.last_sync_at = rep.last_sync_at.clone().or(status.last_sync_at);
                }
                match out.iter_mut().find(|s| s.collection == root.collection) {
                    Some(s) => s.roots.push(status),
                    None => out.push(CollectionStatus {
                        collection: root.collection.clone(),
                        documents: 0,
                        chunks: 0,
                        roots: vec![status],
                    }),
                }
            }
            out.sort_by(|a, b| a.collection.cmp(&b.collection));
            Ok(out)
        })
    }

    /// The recorded roots.
    pub(crate) fn followed_roots(&self) -> Result<Vec<FollowedRoot>> {
        self.store.read(list)
    }

    /// Whether a follower holds a live lease on root `id` now.
    pub(crate) fn is_followed(&self, id: i64) -> Result<bool> {
        let cutoff = lease_cutoff();
        Ok(self
            .store
            .read(with_leases)?
            .iter()
            .any(|(root, lease)| root.id == id && lease.is_live(&cutoff)))
    }

    /// Record a followed root (`cairn reindex`, `vault_update`): a read, and a write
    /// only the first time or when its file filter changed.
    pub(crate) fn record_root(
        &self,
        root_key: &str,
        prefix: &str,
        kind: RootKind,
        collection: &str,
        dir: &Path,
        files: &FileFilter,
    ) -> Result<()> {
        let roots = self.followed_roots()?;
        let same = roots
            .iter()
            .find(|r| r.root_key == root_key && r.prefix == prefix && r.collection == collection);
        if same.is_some_and(|r| &r.files == files)
            || (same.is_none() && is_recorded(&roots, root_key, prefix, collection))
        {
            return Ok(());
        }
        self.store
            .write(|tx| record(tx, root_key, prefix, kind, collection, dir, files))
    }

    /// Move to the project root `root_key` (directory `root_dir`) what is stored under
    /// a `dir:` key whose directory lies in `root_dir`: the documents and followed roots
    /// of a directory indexed before a project's path covered it. One file then has one
    /// key whichever came first ([`super::identity`]): each document keeps its row, id
    /// and vectors under its path relative to the project (so the reindex that follows
    /// finds it unchanged), unless the project already holds that path, when the
    /// directory's copy is deleted. Returns the documents moved or deleted.
    pub(crate) fn adopt_dir_roots(&self, root_key: &str, root_dir: &Path) -> Result<usize> {
        let keys: Vec<String> = self.store.read(|c| {
            c.query_map(
                "SELECT root_key FROM vault_documents WHERE root_key LIKE 'dir:%'
                 UNION SELECT root_key FROM vault_roots WHERE root_key LIKE 'dir:%'",
                params![],
                |r| r.get(0),
            )
        })?;
        let inside: Vec<(String, String)> = (keys.into_iter())
            .filter_map(|key| {
                let dir = Path::new(key.strip_prefix(DIR_KEY)?);
                let rel = relative_path(root_dir, dir).ok()?;
                Some((key, rel))
            })
            .collect();
        if inside.is_empty() {
            return Ok(0);
        }
        let adopted = self.store.write(|tx| {
            let mut n = 0;
            for (key, rel) in &inside {
                n += adopt(tx, key, rel, root_key, root_dir)?;
            }
            Ok(n)
        })?;
        tracing::info!(
            root = root_key,
            documents = adopted,
            "adopted directories indexed before the project covered them"
        );
        Ok(adopted)
    }

    /// Claim or renew root `id` for the follower `me`.
    pub(crate) fn claim_root(&self, id: i64, me: &str) -> Result<bool> {
        self.store.write(|tx| claim(tx, id, me))
    }

    /// Write the follower `me`'s reports; the ids it no longer holds.
    pub(crate) fn report_roots(&self, me: &str, reports: &[(i64, Report)]) -> Result<Vec<i64>> {
        self.store.write(|tx| {
            let mut lost = Vec::new();
            for (id, r) in reports {
                if !report(tx, *id, me, r)? {
                    lost.push(*id);
                }
            }
            Ok(lost)
        })
    }

    /// Release every root the follower `me` holds.
    pub(crate) fn release_roots(&self, me: &str) -> Result<()> {
        self.store.write(|tx| release(tx, me))
    }
}

/// Documents and chunks under a root.
fn root_counts(c: &Conn<'_>, root: &FollowedRoot) -> Result<(u64, u64)> {
    let (d, n): (i64, i64) = c.query_row(
        "SELECT count(DISTINCT d.id), count(c.id)
         FROM vault_documents d LEFT JOIN vault_chunks c ON c.document_id = d.id
         WHERE d.root_key = ?1 AND d.collection = ?2
           AND (?3 = '' OR d.path = ?3 OR substr(d.path, 1, length(?3) + 1) = ?3 || '/')",
        params![
            root.root_key.as_str(),
            root.collection.as_str(),
            root.prefix.as_str()
        ],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok((d as u64, n as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_cover_whole_components() {
        assert!(covers("", "a.md"));
        assert!(covers("docs", "docs/a.md"));
        assert!(covers("docs/a.md", "docs/a.md"));
        assert!(!covers("docs", "docsx/a.md"));
        assert!(!covers("docs/a.md", "docs/a.mdx"));
    }
}
