//! Session tokens of `cairn daemon` (see [`crate::access::tokens`]).

use std::time::Duration;

use crate::access::context::BindArgs;
use crate::access::tokens::{Check, Minted, Person, TokenInfo, ToolScope};
use crate::error::Result;

use super::Cairn;

impl Cairn {
    /// Mint a token bound to `args` (checked like `cairn serve`'s flags) and `scope`;
    /// `peer`: the process it is bound to (a forwarder's own token), `None` for any.
    pub fn mint_session_token(
        &self,
        args: &BindArgs,
        scope: Option<&ToolScope>,
        ttl: Duration,
        peer: Option<&str>,
    ) -> Result<Minted> {
        crate::access::tokens::mint(&self.store, args, scope, ttl, peer)
    }

    /// Whether a presented token may be used now, and its binding.
    pub(crate) fn authenticate_session_token(&self, token: &str) -> Result<Check> {
        crate::access::tokens::authenticate(&self.store, token)
    }

    /// The ids of the tokens revoked at or after `since` (ISO-8601).
    pub(crate) fn session_tokens_revoked_since(
        &self,
        since: &str,
    ) -> Result<std::collections::HashSet<String>> {
        crate::access::tokens::revoked_since(&self.store, since)
    }

    /// Every session token, newest first.
    pub(crate) fn session_tokens(&self) -> Result<Vec<TokenInfo>> {
        crate::access::tokens::list(&self.store)
    }

    /// Revoke a session token by its public id; `by` is recorded as who revoked it.
    pub fn revoke_session_token(&self, id: &str, by: &str) -> Result<TokenInfo> {
        crate::access::tokens::revoke(&self.store, id, by)
    }

    /// Mint a person's token for the web page (one login within `ttl`).
    pub(crate) fn mint_person_token(&self, name: &str, ttl: Duration) -> Result<Minted> {
        crate::access::tokens::mint_person(&self.store, name, ttl)
    }

    /// Redeem a login URL's token: the browser's secret and the person, once.
    pub(crate) fn redeem_login(&self, token: &str) -> Result<Option<(String, Person)>> {
        crate::access::tokens::redeem(&self.store, token)
    }

    /// The person whose browser presents `secret`, while their token is active.
    pub(crate) fn person(&self, secret: &str) -> Result<Option<Person>> {
        crate::access::tokens::person(&self.store, secret)
    }
}
