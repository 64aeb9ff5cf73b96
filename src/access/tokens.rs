//! Session tokens for `cairn daemon`: a bearer token bound to exactly what the flags of
//! one `cairn serve` bind.
//!
//! A token is 256 bits from the operating system (`getrandom`), printed once as
//! `cairn_<64 hex>`; the database keeps only its SHA-256 (`session_tokens.token_hash`)
//! and a short public id (`tok_` + the first 12 hex of that hash) for `cairn session
//! list|revoke`. What it binds is resolved and checked when it is minted, with the same
//! [`crate::access::context::bind`] as `cairn serve`, and stored as the resolved
//! [`WorkContext`] and tool list: a request presenting the token is served with exactly
//! that binding, whatever the request says ([`authenticate`]).
//!
//! Validity is checked on every lookup: a token is served while `now < expires_at` and
//! `revoked_at` is NULL, so a revocation takes effect on the next request.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::store::db::{Row, params};
use serde::Serialize;

use crate::access::context::{BindArgs, BoundIssue, WorkContext, bind};
use crate::base::{iso, now_iso, sha256_hex};
use crate::error::{Error, Result};
use crate::store::Store;

/// The prefix of every token (so a leaked one is recognisable in logs and scanners).
pub(crate) const TOKEN_PREFIX: &str = "cairn_";
/// The prefix of a token's public id.
pub(crate) const ID_PREFIX: &str = "tok_";
/// The lifetime `cairn session new --ttl` gives by default, as the flag takes it
/// ([`parse_ttl`]).
pub(crate) const DEFAULT_TTL: &str = "8h";
/// The longest lifetime a token may be given (`--ttl`): 90 days.
pub(crate) const MAX_TTL: Duration = Duration::from_secs(90 * 24 * 3600);

/// A resolved tool scope: what `--tool-scope-file` or `--agent-type` allowed when the
/// token was minted. `None` in its place means every tool (no scope flag).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolScope {
    /// Where the list came from (`agent type judge`, `scope file /x.json`).
    pub(crate) label: String,
    /// The tool names, sorted.
    pub(crate) tools: Vec<String>,
}

/// A token just minted: the secret (shown once) and what it binds.
#[derive(Debug, Clone, Serialize)]
pub struct Minted {
    /// The bearer token. Not stored anywhere; print it once.
    pub token: String,
    #[serde(flatten)]
    pub info: TokenInfo,
}

/// What `cairn session list` shows of a token (never the token itself).
#[derive(Debug, Clone, Serialize)]
pub struct TokenInfo {
    pub id: String,
    /// `active`, `expired` or `revoked`, at the time of reading.
    pub(crate) state: TokenState,
    pub(crate) issue: Option<String>,
    pub(crate) project_id: Option<String>,
    pub(crate) worktree_path: Option<PathBuf>,
    pub(crate) agent_type: Option<String>,
    pub(crate) project_slug: Option<String>,
    pub(crate) symphony_dir: Option<PathBuf>,
    /// The resolved scope; `None` is every tool.
    pub(crate) scope: Option<ToolScope>,
    pub(crate) created_at: String,
    pub(crate) expires_at: String,
    pub(crate) revoked_at: Option<String>,
    /// Who revoked it (`cli`, `person:NAME`, `forwarder`); absent for an older
    /// revocation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) revoked_by: Option<String>,
    /// The process the token is bound to (`uid:pid:start`): a forwarding `cairn serve`'s
    /// own token, served only over the daemon's socket to that process. `None`: a token
    /// minted by a person or orchestrator, valid from any connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) peer: Option<String>,
    /// A person's token (`cairn session new --human`): it opens the web page, never MCP.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) human: bool,
}

/// Whether a token may be used now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TokenState {
    Active,
    Expired,
    Revoked,
}

/// A token that may be used now: the binding to serve its request with.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) work: WorkContext,
    pub(crate) scope: Option<ToolScope>,
    pub(crate) expires_at: String,
    /// The process the token is bound to ([`TokenInfo::peer`]).
    pub(crate) peer: Option<String>,
    /// A person's token ([`TokenInfo::human`]).
    pub(crate) human: bool,
}

/// The outcome of presenting a token.
#[derive(Debug, Clone)]
pub(crate) enum Check {
    Active(Box<Session>),
    /// Known, past its `expires_at`.
    Expired {
        id: String,
        expires_at: String,
    },
    /// Known, revoked (`revoked_by`: `cli`, `person:NAME`, `forwarder`; absent for an
    /// older revocation).
    Revoked {
        id: String,
        revoked_at: String,
        revoked_by: Option<String>,
    },
    /// Not a token of this database (or not a token at all).
    Unknown,
}

/// Mint a token bound to `args` (checked against the database exactly like `cairn
/// serve`'s flags, by [`crate::access::context::bind`]) and to the resolved `scope` (`None`:
/// every tool), valid for `ttl`. The token is returned once and stored only hashed.
///
/// This is the one way to mint: `cairn session new` calls it, and so does a `cairn serve`
/// that forwards its session to a daemon (with its own `BindArgs` and resolved scope, and
/// `peer`: its own process, which the daemon then requires at the other end of the
/// connection).
pub(crate) fn mint(
    store: &Store,
    args: &BindArgs,
    scope: Option<&ToolScope>,
    ttl: Duration,
    peer: Option<&str>,
) -> Result<Minted> {
    let work = bind(store, args)?;
    let worktree = utf8_path("worktree_path", work.worktree_path.as_deref())?;
    let symphony = utf8_path("symphony_dir", work.symphony_dir.as_deref())?;
    let scope = scope.map(|s| {
        let mut tools = s.tools.clone();
        tools.sort();
        tools.dedup();
        ToolScope {
            label: s.label.clone(),
            tools,
        }
    });
    let tools_json = match &scope {
        Some(s) => {
            Some(serde_json::to_string(&s.tools).map_err(|e| Error::Internal(e.to_string()))?)
        }
        None => None,
    };

    let Fresh {
        token,
        hash,
        id,
        created_at,
        expires_at,
    } = Fresh::new(ttl)?;
    store.write(|tx| {
        tx.execute(
            "INSERT INTO session_tokens (id, token_hash, issue_id, issue_identifier, project_id,
                 worktree_path, agent_type, project_slug, symphony_dir, actor, scope_label,
                 scope_tools, created_at, expires_at, peer)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            params![
                id,
                hash,
                work.issue.as_ref().map(|i| &i.id),
                work.issue.as_ref().map(|i| &i.identifier),
                work.project_id,
                worktree,
                work.agent_type,
                work.project_slug,
                symphony,
                work.actor,
                scope.as_ref().map(|s| &s.label),
                tools_json,
                created_at,
                expires_at,
                peer,
            ],
        )?;
        Ok(())
    })?;
    tracing::info!(id = %id, expires_at = %expires_at, "session token minted");
    Ok(Minted {
        token,
        info: TokenInfo {
            id,
            state: TokenState::Active,
            issue: work.issue.map(|i| i.identifier),
            project_id: work.project_id,
            worktree_path: work.worktree_path,
            agent_type: work.agent_type,
            project_slug: work.project_slug,
            symphony_dir: work.symphony_dir,
            scope,
            created_at,
            expires_at,
            revoked_at: None,
            revoked_by: None,
            peer: peer.map(str::to_string),
            human: false,
        },
    })
}

/// Look a presented token up (by its hash) and say whether it may be used now.
pub(crate) fn authenticate(store: &Store, token: &str) -> Result<Check> {
    // Anything that is not shaped like a token is unknown without a query.
    if !token.starts_with(TOKEN_PREFIX) || token.len() != TOKEN_PREFIX.len() + 64 {
        return Ok(Check::Unknown);
    }
    let hash = sha256_hex(token);
    let row = store.read(|c| {
        c.query_opt(
            &format!("SELECT {COLUMNS} FROM session_tokens WHERE token_hash = ?1"),
            [&hash],
            read_row,
        )
    })?;
    let Some(row) = row else {
        return Ok(Check::Unknown);
    };
    let row = row?;
    Ok(match state(&row, &now_iso()) {
        TokenState::Revoked => Check::Revoked {
            id: row.id,
            revoked_at: row.revoked_at.unwrap_or_default(),
            revoked_by: row.revoked_by,
        },
        TokenState::Expired => Check::Expired {
            id: row.id,
            expires_at: row.expires_at,
        },
        TokenState::Active => Check::Active(Box::new(Session {
            work: WorkContext {
                issue: row
                    .issue_id
                    .zip(row.issue_identifier)
                    .map(|(id, identifier)| BoundIssue { id, identifier }),
                project_id: row.project_id,
                worktree_path: row.worktree_path.map(PathBuf::from),
                agent_type: row.agent_type,
                project_slug: row.project_slug,
                symphony_dir: row.symphony_dir.map(PathBuf::from),
                actor: row.actor,
            },
            id: row.id,
            scope: row.scope,
            expires_at: row.expires_at,
            peer: row.peer,
            human: row.human,
        })),
    })
}

/// Every token, newest first.
pub(crate) fn list(store: &Store) -> Result<Vec<TokenInfo>> {
    let rows = store.read(|c| {
        let mut stmt = c.prepare(&format!(
            "SELECT {COLUMNS} FROM session_tokens ORDER BY created_at DESC, id"
        ))?;
        let rows = stmt
            .query_map([], read_row)?
            .collect::<crate::error::Result<Vec<_>>>()?;
        Ok(rows)
    })?;
    let now = now_iso();
    rows.into_iter().map(|r| r.map(|r| r.info(&now))).collect()
}

/// Revoke the token with public id `id`, or the token itself given in its place
/// (idempotent: a revoked token keeps its first revocation time). Takes effect on the
/// token's next request.
pub(crate) fn revoke(store: &Store, id: &str, by: &str) -> Result<TokenInfo> {
    // A token (`cairn_...`) is looked up by its public id, which is never echoed back
    // as the secret was.
    let public;
    let id = if id.starts_with(TOKEN_PREFIX) {
        public = public_id(&sha256_hex(id));
        public.as_str()
    } else {
        id
    };
    let now = now_iso();
    let row = store.write(|tx| {
        tx.execute(
            "UPDATE session_tokens SET revoked_at = ?2, revoked_by = ?3
             WHERE id = ?1 AND revoked_at IS NULL",
            params![id, now, by],
        )?;
        tx.query_opt(
            &format!("SELECT {COLUMNS} FROM session_tokens WHERE id = ?1"),
            [id],
            read_row,
        )
    })?;
    match row {
        Some(r) => {
            let info = r?.info(&now);
            tracing::info!(id = %info.id, by, "session token revoked");
            Ok(info)
        }
        None => Err(Error::not_found("session token", id)),
    }
}

/// The public ids of the tokens revoked at or after `since` (ISO-8601 UTC, second
/// precision: a token revoked in the same second as `since` is included).
pub(crate) fn revoked_since(
    store: &Store,
    since: &str,
) -> Result<std::collections::HashSet<String>> {
    store.read(|c| {
        let mut stmt = c.prepare(
            "SELECT id FROM session_tokens WHERE revoked_at IS NOT NULL AND revoked_at >= ?1",
        )?;
        let ids = stmt
            .query_map([since], |r| r.get(0))?
            .collect::<crate::error::Result<_>>()?;
        Ok(ids)
    })
}

/// Parse a `--ttl`: a whole number with an optional unit `s`, `m`, `h` or `d`
/// (seconds without one): `8h`, `30m`, `90`.
pub(crate) fn parse_ttl(text: &str) -> Result<Duration> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&text[..i], c),
        _ => (text, 's'),
    };
    let bad = || {
        Error::invalid(
            "ttl",
            format!("{text:?} is not a duration: write a whole number with s, m, h or d (8h)"),
        )
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let unit = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86400,
        _ => return Err(bad()),
    };
    Ok(Duration::from_secs(n.checked_mul(unit).ok_or_else(bad)?))
}

const COLUMNS: &str = "id, issue_id, issue_identifier, project_id, worktree_path, agent_type, \
                       project_slug, symphony_dir, actor, scope_label, scope_tools, created_at, \
                       expires_at, revoked_at, peer, human, revoked_by";

/// One stored token, as read.
struct StoredToken {
    id: String,
    issue_id: Option<String>,
    issue_identifier: Option<String>,
    project_id: Option<String>,
    worktree_path: Option<String>,
    agent_type: Option<String>,
    project_slug: Option<String>,
    symphony_dir: Option<String>,
    actor: String,
    scope: Option<ToolScope>,
    created_at: String,
    expires_at: String,
    revoked_at: Option<String>,
    peer: Option<String>,
    human: bool,
    revoked_by: Option<String>,
}

impl StoredToken {
    fn info(self, now: &str) -> TokenInfo {
        TokenInfo {
            state: state(&self, now),
            id: self.id,
            issue: self.issue_identifier,
            project_id: self.project_id,
            worktree_path: self.worktree_path.map(PathBuf::from),
            agent_type: self.agent_type,
            project_slug: self.project_slug,
            symphony_dir: self.symphony_dir.map(PathBuf::from),
            scope: self.scope,
            created_at: self.created_at,
            expires_at: self.expires_at,
            revoked_at: self.revoked_at,
            revoked_by: self.revoked_by,
            peer: self.peer,
            human: self.human,
        }
    }
}

/// A token's state at `now` (ISO-8601 UTC, second precision, like `expires_at`, so the
/// two compare as strings). An `expires_at` in any other shape counts as expired.
fn state(t: &StoredToken, now: &str) -> TokenState {
    if t.revoked_at.is_some() {
        TokenState::Revoked
    } else if t.expires_at.len() != now.len() || now >= t.expires_at.as_str() {
        TokenState::Expired
    } else {
        TokenState::Active
    }
}

/// A row, with a scope list that does not parse as an error of its own (the row is then
/// refused rather than served with a wider scope).
fn read_row(r: &Row) -> crate::error::Result<Result<StoredToken>> {
    let label: Option<String> = r.get(9)?;
    let tools: Option<String> = r.get(10)?;
    let id: String = r.get(0)?;
    let scope = match (label, tools) {
        (Some(label), Some(tools)) => match serde_json::from_str::<Vec<String>>(&tools) {
            Ok(tools) => Some(ToolScope { label, tools }),
            Err(e) => {
                return Ok(Err(Error::Internal(format!(
                    "session token {id}: stored tool list is not a JSON array of names: {e}"
                ))));
            }
        },
        _ => None,
    };
    Ok(Ok(StoredToken {
        id,
        issue_id: r.get(1)?,
        issue_identifier: r.get(2)?,
        project_id: r.get(3)?,
        worktree_path: r.get(4)?,
        agent_type: r.get(5)?,
        project_slug: r.get(6)?,
        symphony_dir: r.get(7)?,
        actor: r.get(8)?,
        scope,
        created_at: r.get(11)?,
        expires_at: r.get(12)?,
        revoked_at: r.get(13)?,
        peer: r.get(14)?,
        human: r.get::<_, i64>(15)? != 0,
        revoked_by: r.get(16)?,
    }))
}

/// The public id of a token hash.
fn public_id(hash: &str) -> String {
    format!("{ID_PREFIX}{}", &hash[..12])
}

fn random_bytes() -> Result<[u8; 32]> {
    let mut buf = [0u8; 32];
    getrandom::fill(&mut buf)
        .map_err(|e| Error::Internal(format!("no randomness from the operating system: {e}")))?;
    Ok(buf)
}

/// A path stored as text: refused (not mangled) when it is not UTF-8.
fn utf8_path<'a>(field: &str, p: Option<&'a Path>) -> Result<Option<&'a str>> {
    match p {
        None => Ok(None),
        Some(p) => p
            .to_str()
            .map(Some)
            .ok_or_else(|| Error::invalid(field, "the path is not valid UTF-8")),
    }
}

/// Mint a person's token (`cairn session new --human --name NAME`): it binds nothing
/// and lists no tool, records are attributed to `person:NAME`, and it is good for one
/// login to the web page ([`redeem`]) within `ttl`.
pub(crate) fn mint_person(store: &Store, name: &str, ttl: Duration) -> Result<Minted> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if !valid {
        return Err(Error::invalid(
            "name",
            "a person's name is 1 to 64 letters, digits, '.', '_' or '-'",
        ));
    }
    let Fresh {
        token,
        hash,
        id,
        created_at,
        expires_at,
    } = Fresh::new(ttl)?;
    let scope = ToolScope {
        label: "web page".into(),
        tools: Vec::new(),
    };
    store.write(|tx| {
        tx.execute(
            "INSERT INTO session_tokens (id, token_hash, actor, scope_label, scope_tools,
                 created_at, expires_at, human)
             VALUES (?1, ?2, ?3, ?4, '[]', ?5, ?6, 1)",
            params![
                id,
                hash,
                format!("person:{name}"),
                scope.label,
                created_at,
                expires_at
            ],
        )?;
        Ok(())
    })?;
    tracing::info!(id = %id, expires_at = %expires_at, "a person's token minted");
    Ok(Minted {
        token,
        info: TokenInfo {
            id,
            state: TokenState::Active,
            issue: None,
            project_id: None,
            worktree_path: None,
            agent_type: None,
            project_slug: None,
            symphony_dir: None,
            scope: Some(scope),
            created_at,
            expires_at,
            revoked_at: None,
            revoked_by: None,
            peer: None,
            human: true,
        },
    })
}

/// A new token: the secret, its hash and public id, and its lifetime from now.
struct Fresh {
    token: String,
    hash: String,
    id: String,
    created_at: String,
    expires_at: String,
}

impl Fresh {
    /// A token that lives `ttl`: between 1 second and [`MAX_TTL`].
    fn new(ttl: Duration) -> Result<Fresh> {
        if ttl.is_zero() || ttl > MAX_TTL {
            return Err(Error::invalid(
                "ttl",
                format!(
                    "a token lives between 1 second and {} days",
                    MAX_TTL.as_secs() / 86400
                ),
            ));
        }
        let token = format!("{TOKEN_PREFIX}{}", hex::encode(random_bytes()?));
        let hash = sha256_hex(&token);
        let now = time::OffsetDateTime::now_utc();
        Ok(Fresh {
            id: public_id(&hash),
            token,
            hash,
            created_at: iso(now),
            expires_at: iso(now + ttl),
        })
    }
}

/// A person logged in to the web page.
#[derive(Debug, Clone)]
pub(crate) struct Person {
    /// The token's public id.
    pub(crate) id: String,
    /// Who records are attributed to (`person:NAME`).
    pub(crate) actor: String,
    pub(crate) expires_at: String,
}

/// The first visit of a login URL: a person's active, never redeemed `token` is marked
/// redeemed and a new browser secret is stored (hashed) with it. Returns the secret
/// for the browser's cookie and the person; `None` for any other token, an agent's
/// included, and for a token already redeemed (a login URL works once).
pub(crate) fn redeem(store: &Store, token: &str) -> Result<Option<(String, Person)>> {
    if !token.starts_with(TOKEN_PREFIX) || token.len() != TOKEN_PREFIX.len() + 64 {
        return Ok(None);
    }
    let hash = sha256_hex(token);
    let secret = hex::encode(random_bytes()?);
    let browser = sha256_hex(&secret);
    let now = now_iso();
    let person = store.write(|tx| {
        let row = tx.query_opt(
            "SELECT id, actor, expires_at FROM session_tokens
             WHERE token_hash = ?1 AND human = 1 AND redeemed_at IS NULL
               AND revoked_at IS NULL AND expires_at > ?2",
            params![hash, now],
            |r| {
                Ok(Person {
                    id: r.get(0)?,
                    actor: r.get(1)?,
                    expires_at: r.get(2)?,
                })
            },
        )?;
        if let Some(p) = &row {
            tx.execute(
                "UPDATE session_tokens SET redeemed_at = ?1, browser_hash = ?2 WHERE id = ?3",
                params![now, browser, p.id],
            )?;
        }
        Ok(row)
    })?;
    Ok(person.map(|p| (secret, p)))
}

/// The person whose browser presents `secret` (the login cookie), while their token is
/// active.
pub(crate) fn person(store: &Store, secret: &str) -> Result<Option<Person>> {
    if secret.len() != 64 || !secret.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(None);
    }
    let browser = sha256_hex(secret);
    store.read(|c| {
        c.query_opt(
            "SELECT id, actor, expires_at FROM session_tokens
             WHERE browser_hash = ?1 AND human = 1 AND revoked_at IS NULL AND expires_at > ?2",
            params![browser, now_iso()],
            |r| {
                Ok(Person {
                    id: r.get(0)?,
                    actor: r.get(1)?,
                    expires_at: r.get(2)?,
                })
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lifetime `cairn session new` gives by default.
    fn default_ttl() -> Duration {
        parse_ttl(DEFAULT_TTL).unwrap()
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("c.db")).unwrap();
        (dir, store)
    }

    fn judge() -> ToolScope {
        ToolScope {
            label: "agent type judge".into(),
            tools: vec![
                "server_ping".into(),
                "get_issue".into(),
                "server_ping".into(),
            ],
        }
    }

    #[test]
    fn a_minted_token_authenticates_to_its_binding_and_only_its_hash_is_stored() {
        let (_d, store) = store();
        let args = BindArgs {
            agent_type: Some("judge".into()),
            worktree_path: Some("/w/x".into()),
            ..Default::default()
        };
        let m = mint(&store, &args, Some(&judge()), default_ttl(), None).unwrap();
        assert!(m.token.starts_with(TOKEN_PREFIX) && m.token.len() == 70);
        assert!(m.info.id.starts_with(ID_PREFIX));
        let stored: Vec<String> = store
            .read(|c| {
                // Every text column (`human` is the only other: 0 or 1).
                let mut s = c.prepare(
                    "SELECT id, token_hash, issue_id, issue_identifier, project_id,
                            worktree_path, agent_type, project_slug, symphony_dir, actor,
                            scope_label, scope_tools, created_at, expires_at, revoked_at, peer,
                            redeemed_at, browser_hash
                     FROM session_tokens",
                )?;
                let v = s
                    .query_map([], |r| {
                        (0..r.len())
                            .map(|i| r.get::<_, Option<String>>(i).map(|v| v.unwrap_or_default()))
                            .collect::<crate::error::Result<Vec<_>>>()
                    })?
                    .collect::<crate::error::Result<Vec<_>>>()?;
                Ok(v.concat())
            })
            .unwrap();
        assert!(
            !stored
                .iter()
                .any(|v| v.contains(&m.token[TOKEN_PREFIX.len()..]))
        );
        assert!(stored.contains(&sha256_hex(&m.token)));

        let Check::Active(s) = authenticate(&store, &m.token).unwrap() else {
            panic!("not active")
        };
        assert_eq!(s.id, m.info.id);
        assert_eq!(s.work.agent_type.as_deref(), Some("judge"));
        assert_eq!(s.work.actor, "agent-judge");
        assert_eq!(s.work.worktree_path, Some(PathBuf::from("/w/x")));
        let scope = s.scope.unwrap();
        assert_eq!(scope.tools, vec!["get_issue", "server_ping"]);

        // Another token of the same shape is unknown; so is garbage.
        let other = format!("{TOKEN_PREFIX}{}", "0".repeat(64));
        assert!(matches!(
            authenticate(&store, &other).unwrap(),
            Check::Unknown
        ));
        assert!(matches!(authenticate(&store, "").unwrap(), Check::Unknown));
        assert!(matches!(
            authenticate(&store, "cairn_").unwrap(),
            Check::Unknown
        ));
    }

    #[test]
    fn two_tokens_differ() {
        let (_d, store) = store();
        let a = mint(&store, &BindArgs::default(), None, default_ttl(), None).unwrap();
        let b = mint(&store, &BindArgs::default(), None, default_ttl(), None).unwrap();
        assert_ne!(a.token, b.token);
        assert_ne!(a.info.id, b.info.id);
    }

    #[test]
    fn revoked_and_expired_tokens_are_refused() {
        let (_d, store) = store();
        let a = mint(&store, &BindArgs::default(), None, default_ttl(), None).unwrap();
        let r = revoke(&store, &a.info.id, "cli").unwrap();
        assert_eq!(r.state, TokenState::Revoked);
        let first = r.revoked_at.clone().unwrap();
        assert!(matches!(
            authenticate(&store, &a.token).unwrap(),
            Check::Revoked { .. }
        ));
        assert_eq!(r.revoked_by.as_deref(), Some("cli"));
        // Idempotent: the first revocation's time and revoker stay.
        let again = revoke(&store, &a.info.id, "person:alice").unwrap();
        assert_eq!(
            (again.revoked_at.unwrap(), again.revoked_by.as_deref()),
            (first, Some("cli"))
        );
        assert!(matches!(
            revoke(&store, "tok_nope", "cli"),
            Err(Error::NotFound { .. })
        ));

        let b = mint(&store, &BindArgs::default(), None, default_ttl(), None).unwrap();
        store
            .write(|tx| {
                tx.execute(
                    "UPDATE session_tokens SET expires_at = '2000-01-01T00:00:00Z' WHERE id = ?1",
                    [&b.info.id],
                )?;
                Ok(())
            })
            .unwrap();
        assert!(matches!(
            authenticate(&store, &b.token).unwrap(),
            Check::Expired { .. }
        ));
        let states: Vec<TokenState> = list(&store).unwrap().iter().map(|t| t.state).collect();
        assert!(states.contains(&TokenState::Expired) && states.contains(&TokenState::Revoked));
    }

    #[test]
    fn a_token_is_revoked_by_its_id_or_by_itself_and_never_echoed() {
        let (_d, store) = store();
        let a = mint(&store, &BindArgs::default(), None, default_ttl(), None).unwrap();
        let b = mint(&store, &BindArgs::default(), None, default_ttl(), None).unwrap();
        assert_eq!(
            revoke(&store, &a.info.id, "cli").unwrap().state,
            TokenState::Revoked
        );
        let by_token = revoke(&store, &b.token, "cli").unwrap();
        assert_eq!(
            (by_token.id.as_str(), by_token.state),
            (b.info.id.as_str(), TokenState::Revoked)
        );
        let unknown = format!("{TOKEN_PREFIX}{}", "0".repeat(64));
        let err = revoke(&store, &unknown, "cli").unwrap_err().to_string();
        assert!(!err.contains(&unknown) && err.contains(ID_PREFIX), "{err}");
    }

    #[test]
    fn binding_is_checked_like_cairn_serve() {
        let (_d, store) = store();
        let err = mint(
            &store,
            &BindArgs {
                issue: Some("NOPE-1".into()),
                ..Default::default()
            },
            None,
            default_ttl(),
            None,
        )
        .unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
        let err = mint(
            &store,
            &BindArgs {
                agent_type: Some("wizard".into()),
                ..Default::default()
            },
            None,
            default_ttl(),
            None,
        )
        .unwrap_err();
        assert_eq!(err.kind(), crate::error::ErrorKind::InvalidInput, "{err:?}");
        assert!(mint(&store, &BindArgs::default(), None, Duration::ZERO, None).is_err());
        assert!(mint(&store, &BindArgs::default(), None, MAX_TTL * 2, None).is_err());
        assert_eq!(list(&store).unwrap().len(), 0);
    }

    #[test]
    fn ttl_parses_units_and_refuses_the_rest() {
        assert_eq!(parse_ttl("8h").unwrap(), Duration::from_secs(28800));
        assert_eq!(parse_ttl("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_ttl("2d").unwrap(), Duration::from_secs(172800));
        assert_eq!(parse_ttl("45s").unwrap(), Duration::from_secs(45));
        assert_eq!(parse_ttl("90").unwrap(), Duration::from_secs(90));
        for bad in ["", "h", "8x", "-1h", "1.5h", "99999999999999999999d"] {
            assert!(parse_ttl(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_persons_token_logs_in_once_and_an_agents_never() {
        let (_dir, store) = store();
        let agent = mint(&store, &BindArgs::default(), None, default_ttl(), None).unwrap();
        assert!(redeem(&store, &agent.token).unwrap().is_none());
        assert!(mint_person(&store, "al ice", default_ttl()).is_err());
        let alice = mint_person(&store, "alice", default_ttl()).unwrap();
        assert!(alice.info.human);
        let Check::Active(s) = authenticate(&store, &alice.token).unwrap() else {
            panic!("active")
        };
        assert!(s.human && s.scope.unwrap().tools.is_empty());
        let (secret, p) = redeem(&store, &alice.token).unwrap().unwrap();
        assert_eq!(p.actor, "person:alice");
        assert!(redeem(&store, &alice.token).unwrap().is_none(), "once");
        assert_eq!(person(&store, &secret).unwrap().unwrap().id, alice.info.id);
        assert!(person(&store, &sha256_hex(&secret)).unwrap().is_none());
        assert!(person(&store, "not hex").unwrap().is_none());
        revoke(&store, &alice.info.id, "cli").unwrap();
        assert!(person(&store, &secret).unwrap().is_none(), "revoked");
    }
}
