//! Tool scope by agent profile: the profiles, the per-profile allow/deny lists stored in
//! SQLite, the critical tools, and `computeEffectiveTools()`.
//!
//! The spec's matrix ("Tool Scope by Profile") is not kept here: each MCP tool declares
//! the profiles that may use it where it is declared (`src/mcp/tools/*.rs`), and the MCP
//! registry derives the [`ScopeMatrix`] from the list of tools
//! (`crate::mcp::registry::scope_matrix`), so a tool cannot be forgotten in a separate
//! table. The domain takes the matrix as an argument and never names the MCP layer. A
//! test keeps the derived matrix equal to the spec's table (`tests/fixtures/tool-scope.md`).
//!
//! Decisions of ours, declared with the tools:
//! - the system tools (`server_ping`, `server_health`) are open to every profile;
//! - `create_pr` (⚠️, deprecated in the spec) stays available to workers;
//! - the Colibri vocabulary (the Colibri document has no matrix) gets the rows of its
//!   Symphony counterparts, never more: `task_get` = `get_issue`, `task_list` and
//!   `task_next_actions` = `list_issues`, `task_create` = `create_issue`,
//!   `task_update` = `update_issue_status`, `thought_record` = `add_comment` (the
//!   profiles that work on an issue), `thought_record_list`, `audit_verify_chain`
//!   and `merkle_root` = `get_issue` (reads of an issue's records), `audit_session_start`
//!   and `merkle_finalize` = the judge's verdict tools, `skill_list` open to all (it
//!   reads the checkout's skill catalog). At call time an agent's Colibri mutations
//!   are further limited to its bound issue (`docs/colibri.md`);
//! - `learning_feedback` (issue 35) is open to the worker, researcher and judge
//!   profiles, whose work a learning can help or mislead; it is bound to the issue
//!   and to learnings of its project (`docs/learnings.md`, "Quality from evidence").

use crate::store::db::params;
use serde::Serialize;

use crate::base::now_iso;
use crate::error::{Error, Result};
use crate::store::Store;

/// The agent profiles of the spec, by name, in the spec's column order.
pub const PROFILES: [&str; 7] = [
    "worker",
    "researcher",
    "judge",
    "scanner",
    "architect",
    "planner",
    "intake",
];

/// An agent profile of the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    Worker,
    Researcher,
    Judge,
    Scanner,
    Architect,
    Planner,
    Intake,
}

impl Profile {
    /// Every profile, in the spec's column order (the order of [`PROFILES`]).
    pub(crate) const ALL: [Profile; 7] = [
        Profile::Worker,
        Profile::Researcher,
        Profile::Judge,
        Profile::Scanner,
        Profile::Architect,
        Profile::Planner,
        Profile::Intake,
    ];

    /// The profile's name (`worker`, ...).
    pub fn name(self) -> &'static str {
        PROFILES[self as usize]
    }

    /// The profile named `name`, or an error listing the valid names.
    pub(crate) fn parse(name: &str) -> Result<Profile> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                Error::invalid(
                    "agent_type",
                    format!(
                        "unknown agent type {name:?}; valid types: {}",
                        PROFILES.join(", ")
                    ),
                )
            })
    }
}

/// Which profiles may use which tool: one row per tool, in the order given. Built by the
/// MCP registry from each tool's declaration.
#[derive(Debug, Clone, Default)]
pub struct ScopeMatrix {
    rows: Vec<(&'static str, &'static [Profile])>,
}

impl ScopeMatrix {
    /// A matrix from `(tool, profiles that may use it)` rows.
    pub(crate) fn new(rows: impl IntoIterator<Item = (&'static str, &'static [Profile])>) -> Self {
        ScopeMatrix {
            rows: rows.into_iter().collect(),
        }
    }

    /// Every tool the matrix knows, in row order.
    pub fn tools(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.rows.iter().map(|(t, _)| *t)
    }

    /// The profiles that may use `tool` (`None` for a tool the matrix does not know).
    pub fn profiles_of(&self, tool: &str) -> Option<&'static [Profile]> {
        self.rows.iter().find(|(t, _)| *t == tool).map(|(_, p)| *p)
    }

    /// The registry defaults for a profile, in row order.
    pub fn profile_defaults(&self, profile: &str) -> Result<Vec<&'static str>> {
        let profile = Profile::parse(profile)?;
        Ok(self
            .rows
            .iter()
            .filter(|(_, ps)| ps.contains(&profile))
            .map(|(t, _)| *t)
            .collect())
    }
}

/// Tools a profile cannot do its job without; denying one warns (it does not block).
const CRITICAL: &[(&str, &[&str])] = &[
    (
        "worker",
        &[
            "get_issue",
            "update_issue_status",
            "complete_phase",
            "verify_workspace",
        ],
    ),
    ("researcher", &["get_issue", "complete_phase"]),
    (
        "judge",
        &[
            "get_issue",
            "approve_phase",
            "reject_phase",
            "approve_pr",
            "reject_pr",
        ],
    ),
    ("scanner", &["record_coverage", "create_issue"]),
    ("architect", &["get_issue", "complete_phase"]),
    (
        "planner",
        &[
            "get_issue",
            "create_subtask",
            "complete_phase",
            "move_issue",
        ],
    ),
    ("intake", &["create_issue"]),
];

/// Check that `profile` is one of [`PROFILES`].
pub(crate) fn check_profile(profile: &str) -> Result<()> {
    Profile::parse(profile).map(|_| ())
}

/// The critical tools of a profile.
pub(crate) fn critical_tools(profile: &str) -> &'static [&'static str] {
    CRITICAL
        .iter()
        .find(|(p, _)| *p == profile)
        .map(|(_, t)| *t)
        .unwrap_or(&[])
}

/// A profile's stored allow and deny lists (`None` = inherit / no removals).
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ProfileScope {
    pub profile_type: String,
    pub allowed_tools: Option<Vec<String>>,
    pub disallowed_tools: Option<Vec<String>>,
}

/// The result of `computeEffectiveTools()`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct EffectiveScope {
    pub(crate) profile_type: String,
    pub(crate) tools: Vec<String>,
    /// One line per critical tool that the lists removed.
    pub(crate) warnings: Vec<String>,
}

/// `computeEffectiveTools()`: registry defaults, intersected with the allow list when
/// there is one, minus the deny list; warn when a critical tool goes missing.
pub(crate) fn compute_effective(
    matrix: &ScopeMatrix,
    scope: &ProfileScope,
) -> Result<EffectiveScope> {
    let mut tools: Vec<String> = matrix
        .profile_defaults(&scope.profile_type)?
        .into_iter()
        .map(String::from)
        .collect();
    if let Some(allow) = &scope.allowed_tools {
        tools.retain(|t| allow.contains(t));
    }
    if let Some(deny) = &scope.disallowed_tools {
        tools.retain(|t| !deny.contains(t));
    }
    let warnings = critical_tools(&scope.profile_type)
        .iter()
        .filter(|t| !tools.iter().any(|x| x == *t))
        .map(|t| {
            format!(
                "critical tool {t} is not available to profile {}",
                scope.profile_type
            )
        })
        .collect();
    Ok(EffectiveScope {
        profile_type: scope.profile_type.clone(),
        tools,
        warnings,
    })
}

fn check_tool_names(matrix: &ScopeMatrix, field: &str, names: &[String]) -> Result<()> {
    for (i, n) in names.iter().enumerate() {
        if matrix.profiles_of(n).is_none() {
            return Err(Error::invalid(
                format!("{field}[{i}]"),
                format!("unknown tool {n:?}"),
            ));
        }
    }
    Ok(())
}

/// The stored allow/deny lists of a profile (empty when never set).
pub(crate) fn profile_scope(store: &Store, profile: &str) -> Result<ProfileScope> {
    check_profile(profile)?;
    let row: Option<(Option<String>, Option<String>)> = store.read(|c| {
        c.query_opt(
            "SELECT allowed_tools, disallowed_tools FROM agent_profiles WHERE profile_type = ?1",
            [profile],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    })?;
    let parse = |s: Option<String>| -> Result<Option<Vec<String>>> {
        s.map(|s| serde_json::from_str(&s).map_err(Error::from))
            .transpose()
    };
    let (allowed, denied) = row.unwrap_or_default();
    Ok(ProfileScope {
        profile_type: profile.to_string(),
        allowed_tools: parse(allowed)?,
        disallowed_tools: parse(denied)?,
    })
}

/// Store a profile's allow/deny lists (`None` clears a list); every name must be a tool
/// of `matrix`.
pub(crate) fn set_profile_scope(
    store: &Store,
    matrix: &ScopeMatrix,
    scope: &ProfileScope,
) -> Result<()> {
    check_profile(&scope.profile_type)?;
    if let Some(a) = &scope.allowed_tools {
        check_tool_names(matrix, "allow", a)?;
    }
    if let Some(d) = &scope.disallowed_tools {
        check_tool_names(matrix, "deny", d)?;
    }
    let enc = |v: &Option<Vec<String>>| v.as_ref().map(serde_json::to_string).transpose();
    let (allowed, denied) = (enc(&scope.allowed_tools)?, enc(&scope.disallowed_tools)?);
    store.write(|tx| {
        tx.execute(
            "INSERT INTO agent_profiles(profile_type, allowed_tools, disallowed_tools, updated_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(profile_type) DO UPDATE SET allowed_tools = ?2,
                 disallowed_tools = ?3, updated_at = ?4",
            params![scope.profile_type, allowed, denied, now_iso()],
        )?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use Profile::*;

    fn sample() -> ScopeMatrix {
        ScopeMatrix::new([
            ("get_issue", &[Worker, Judge][..]),
            ("approve_pr", &[Judge][..]),
            ("reject_pr", &[Judge][..]),
            ("create_issue", &[Worker, Intake][..]),
            ("configure_project", &[][..]),
        ])
    }

    #[test]
    fn profiles_parse_by_name_in_the_spec_order() {
        for (p, name) in Profile::ALL.into_iter().zip(PROFILES) {
            assert_eq!(p.name(), name);
            assert_eq!(Profile::parse(name).unwrap(), p);
        }
        assert!(Profile::parse("nobody").is_err());
        assert!(Profile::parse("Worker").is_err());
    }

    #[test]
    fn profile_defaults_are_the_rows_naming_the_profile_in_row_order() {
        let m = sample();
        assert_eq!(
            m.profile_defaults("judge").unwrap(),
            ["get_issue", "approve_pr", "reject_pr"]
        );
        assert_eq!(m.profile_defaults("intake").unwrap(), ["create_issue"]);
        assert!(m.profile_defaults("planner").unwrap().is_empty());
        assert!(m.profile_defaults("nobody").is_err());
        assert_eq!(m.profiles_of("configure_project"), Some(&[][..]));
        assert_eq!(m.profiles_of("no_such_tool"), None);
    }

    #[test]
    fn effective_scope_intersects_subtracts_and_warns() {
        let eff = compute_effective(
            &sample(),
            &ProfileScope {
                profile_type: "judge".into(),
                allowed_tools: Some(vec![
                    "get_issue".into(),
                    "approve_pr".into(),
                    "reject_pr".into(),
                ]),
                disallowed_tools: Some(vec!["reject_pr".into()]),
            },
        )
        .unwrap();
        assert_eq!(eff.tools, ["get_issue", "approve_pr"]);
        assert_eq!(eff.warnings.len(), 3, "{:?}", eff.warnings);
        assert!(eff.warnings.iter().any(|w| w.contains("reject_pr")));
    }
}
