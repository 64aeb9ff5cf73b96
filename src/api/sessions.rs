//! Session tokens of `cairn daemon` (see [`crate::tokens`]).

use std::time::Duration;

use crate::context::BindArgs;
use crate::error::Result;
use crate::tokens::{Check, Minted, TokenInfo, ToolScope};

use super::Cairn;

impl Cairn {
    /// Mint a token bound to `args` (checked like `cairn serve`'s flags) and `scope`.
    pub fn mint_session_token(
        &self,
        args: &BindArgs,
        scope: Option<&ToolScope>,
        ttl: Duration,
    ) -> Result<Minted> {
        crate::tokens::mint(&self.store, args, scope, ttl)
    }

    /// Whether a presented token may be used now, and its binding.
    pub fn authenticate_session_token(&self, token: &str) -> Result<Check> {
        crate::tokens::authenticate(&self.store, token)
    }

    /// Every session token, newest first.
    pub fn session_tokens(&self) -> Result<Vec<TokenInfo>> {
        crate::tokens::list(&self.store)
    }

    /// Revoke a session token by its public id.
    pub fn revoke_session_token(&self, id: &str) -> Result<TokenInfo> {
        crate::tokens::revoke(&self.store, id)
    }
}
