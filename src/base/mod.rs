//! Below the domain, naming none of it: what every layer may use.
//!
//! | module | owns |
//! | --- | --- |
//! | here | ids ([`new_id`]), the clock ([`now_iso`] and its conversions), hashing ([`sha256_hex`]), used by every module that writes |
//! | [`tantivy_dir`] | what the two tantivy indexes (the learnings, the vault's chunks) share about their directory: recreated when unreadable, one writer with back-off |
//! | [`failpoint`] | test hooks (`CAIRN_FAILPOINT`), in `testing` builds only |
//! | [`rng`] | a seeded PRNG for test data and benchmark corpora, not for secrets |

pub(crate) mod failpoint;
pub mod rng;
pub(crate) mod tantivy_dir;

use std::sync::atomic::{AtomicU64, Ordering};

/// The current time as ISO-8601 UTC with second precision (`2026-04-08T22:15:30Z`).
pub(crate) fn now_iso() -> String {
    iso(time::OffsetDateTime::now_utc())
}

/// `t` as ISO-8601 UTC with second precision, the format of [`now_iso`].
pub(crate) fn iso(t: time::OffsetDateTime) -> String {
    t.to_offset(time::UtcOffset::UTC)
        .format(&time::format_description::well_known::Rfc3339)
        .map(|s| {
            // Rfc3339 keeps sub-seconds; drop them for stable, readable stamps.
            match s.find('.') {
                Some(dot) => format!("{}Z", &s[..dot]),
                None => s,
            }
        })
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_string())
}

/// Seconds since the Unix epoch of an ISO-8601 stamp (the format of [`now_iso`]); `None`
/// when it does not parse.
pub(crate) fn unix_of(iso: &str) -> Option<i64> {
    time::OffsetDateTime::parse(iso, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp())
}

/// The ISO-8601 stamp of `secs` since the Unix epoch.
pub(crate) fn iso_of(secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(secs)
        .map(iso)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_string())
}

/// A fresh opaque id: `<prefix>_<16 hex>`, unique across processes.
pub(crate) fn new_id(prefix: &str) -> String {
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
pub(crate) fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
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
