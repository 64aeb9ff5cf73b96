//! Agent profiles (the per-profile tool scope stored in the database) and moving a
//! whole knowledge base between stores.

use crate::access::scope::{ProfileScope, ScopeMatrix};
use crate::compose::store_copy::{CopyProgress, CopyReport};
use crate::error::Result;
use crate::store::Location;

use super::Cairn;

impl Cairn {
    /// The stored allow/deny lists of a profile (empty when never set).
    pub(crate) fn profile_scope(&self, profile: &str) -> Result<ProfileScope> {
        crate::access::scope::profile_scope(&self.store, profile)
    }

    /// Store a profile's allow/deny lists (`None` clears a list); every name must be a
    /// tool of `matrix` (the MCP registry's, `crate::mcp::registry::scope_matrix`).
    pub fn set_profile_scope(&self, matrix: &ScopeMatrix, scope: &ProfileScope) -> Result<()> {
        crate::access::scope::set_profile_scope(&self.store, matrix, scope)
    }

    /// Copy the whole knowledge base at `from` into the empty database at `to` (SQLite
    /// or PostgreSQL, either way), ids and hash chains intact, and verify it
    /// ([`crate::compose::store_copy`]).
    pub fn copy_store(
        from: &Location,
        to: &Location,
        progress: &dyn Fn(CopyProgress),
    ) -> Result<CopyReport> {
        crate::compose::store_copy::copy(from, to, progress)
    }
}
