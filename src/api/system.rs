//! Agent profiles: the per-profile tool scope stored in the database.

use crate::error::Result;
use crate::scope::{ProfileScope, ScopeMatrix};

use super::Cairn;

impl Cairn {
    /// The stored allow/deny lists of a profile (empty when never set).
    pub fn profile_scope(&self, profile: &str) -> Result<ProfileScope> {
        crate::scope::profile_scope(&self.store, profile)
    }

    /// Store a profile's allow/deny lists (`None` clears a list); every name must be a
    /// tool of `matrix` (the MCP registry's, `crate::mcp::registry::scope_matrix`).
    pub fn set_profile_scope(&self, matrix: &ScopeMatrix, scope: &ProfileScope) -> Result<()> {
        crate::scope::set_profile_scope(&self.store, matrix, scope)
    }
}
