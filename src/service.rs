//! The domain facade: [`Cairn`], the one API that both the CLI and the MCP layer call.
//!
//! Each domain module (`issues`, `learnings`, `vault`, `trail`, `colibri`, ...) adds its
//! operations as `impl Cairn` blocks, so there is one entry point and no second path to
//! the data. Nothing here knows about JSON-RPC or the command line.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Result;
use crate::store::Store;

/// An open Cairn: the store and the derived indexes beside it.
#[derive(Debug)]
pub struct Cairn {
    pub(crate) store: Store,
    pub(crate) learnings: crate::learnings::LearningIndex,
    pub(crate) vault: crate::vault::VaultState,
}

impl Cairn {
    /// Open (creating and migrating if needed) the database at `db`.
    pub fn open(db: &Path) -> Result<Cairn> {
        let store = Store::open(db)?;
        let learnings = crate::learnings::LearningIndex::new(store.index_dir().join("learnings"));
        Ok(Cairn {
            store,
            learnings,
            vault: Default::default(),
        })
    }

    /// [`Cairn::open`] with an explicit embedding model handle (benchmarks and tests
    /// that must run without the model, or with another configuration).
    pub fn open_with_embedder(db: &Path, embedder: crate::vault::embed::Embedder) -> Result<Cairn> {
        let mut cairn = Cairn::open(db)?;
        cairn.vault = crate::vault::VaultState::with_embedder(embedder);
        Ok(cairn)
    }

    /// The underlying store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Where derived indexes of this database live.
    pub fn index_dir(&self) -> PathBuf {
        self.store.index_dir()
    }
}

/// The current time as ISO-8601 UTC with second precision (`2026-04-08T22:15:30Z`).
pub fn now_iso() -> String {
    let now = time::OffsetDateTime::now_utc();
    now.format(&time::format_description::well_known::Rfc3339)
        .map(|s| {
            // Rfc3339 keeps sub-seconds; drop them for stable, readable stamps.
            match s.find('.') {
                Some(dot) => format!("{}Z", &s[..dot]),
                None => s,
            }
        })
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_string())
}

/// A fresh opaque id: `<prefix>_<16 hex>`, unique across processes.
pub fn new_id(prefix: &str) -> String {
    use sha2::{Digest, Sha256};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = Sha256::new();
    h.update(std::process::id().to_le_bytes());
    h.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    h.update(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
            .to_le_bytes(),
    );
    let digest = h.finalize();
    format!("{prefix}_{}", hex::encode(&digest[..8]))
}

/// SHA-256 of `bytes` as lower-case hex.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_prefixed() {
        let a = new_id("iss");
        let b = new_id("iss");
        assert_ne!(a, b);
        assert!(a.starts_with("iss_") && a.len() == 4 + 16);
    }

    #[test]
    fn now_is_second_precision_utc() {
        let t = now_iso();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z'));
    }
}
