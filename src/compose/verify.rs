//! Verifying an issue's trail: its hash chain ([`crate::trail::chain`]) and the stored root of
//! every finalized audit session covering it ([`crate::colibri::audit`]). Above both, so
//! neither needs the other.

use crate::error::Result;
use crate::store::Store;

use crate::trail::chain::{TrailVerification, verify_chain};

/// Re-compute every hash and link of an issue's trail (id or identifier), and the
/// stored root of every finalized audit session covering the issue (from its frozen
/// leaves and from the current records).
pub(crate) fn verify_trail(store: &Store, issue: &str) -> Result<TrailVerification> {
    // One snapshot: the records and the recorded head of one moment (an append between
    // two reads would look like a broken head).
    store.snapshot(|c| {
        let (id, identifier) = crate::trail::resolve(c, issue)?;
        let mut v = verify_chain(c, &id, &identifier)?;
        let roots = crate::colibri::audit::frozen_root_breaks(c, &id)?;
        if !roots.is_empty() {
            v.broken.extend(roots);
            v.intact = false;
        }
        Ok(v)
    })
}
