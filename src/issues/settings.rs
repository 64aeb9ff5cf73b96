//! Project settings (`configure_project`, `cairn project configure`), stored as JSON in
//! `projects.settings`:
//!
//! ```json
//! {"gates": [{"command", "label", "required"}], "sensitive_paths": ["glob", ..],
//!  "risk_thresholds": {"lowLines", "highLines", "lowFiles", "highFiles"},
//!  "worker_instructions": "..", "judge_instructions": "..",
//!  "vault": {"collections": ["name", ..]}}
//! ```
//!
//! A call replaces the sections it names and keeps the others. `sensitive_paths` are
//! gitignore-style globs (a pattern without `/` matches a file name at any depth; `*`
//! stays within a directory, `**` crosses directories); an invalid glob is refused.

use crate::store::db::params;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Project, find_project};
use crate::base::now_iso;
use crate::error::{Error, FieldError, Result};
use crate::store::Store;

/// Limits on settings.
pub(crate) mod limits {
    pub(crate) const GATES_MAX: usize = 20;
    pub(crate) const COMMAND_MAX: usize = 1000;
    pub(crate) const LABEL_MAX: usize = 100;
    pub(crate) const GLOBS_MAX: usize = 100;
    pub(crate) const GLOB_MAX: usize = 500;
    pub(crate) const INSTRUCTIONS_MAX: usize = 20_000;
    pub(crate) const COLLECTIONS_MAX: usize = 50;
    /// The longest age limit of learnings, in days (100 years).
    pub(crate) const STALE_AFTER_DAYS_MAX: u32 = 36_500;
    pub(crate) const COLLECTION_MAX: usize = 64;
    pub(crate) const PHASES_MAX: usize = 20;
    pub(crate) const PHASE_MAX: usize = 32;
    pub(crate) const THRESHOLD_MAX: u64 = 10_000_000;
}

/// A configured quality gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Gate {
    /// Command to run.
    #[schemars(length(min = 1, max = limits::COMMAND_MAX))]
    pub(crate) command: String,
    /// Human-readable label.
    #[schemars(length(min = 1, max = limits::LABEL_MAX))]
    pub(crate) label: String,
    /// Whether this gate must pass.
    pub(crate) required: bool,
}

/// Risk scoring thresholds (the spec's camelCase keys).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RiskThresholds {
    /// Changed lines at or below which size adds no risk.
    #[schemars(range(max = limits::THRESHOLD_MAX))]
    pub(crate) low_lines: u64,
    /// Changed lines at or above which size adds full risk.
    #[schemars(range(max = limits::THRESHOLD_MAX))]
    pub(crate) high_lines: u64,
    /// Changed files at or below which breadth adds no risk.
    #[schemars(range(max = limits::THRESHOLD_MAX))]
    pub(crate) low_files: u64,
    /// Changed files at or above which breadth adds full risk.
    #[schemars(range(max = limits::THRESHOLD_MAX))]
    pub(crate) high_files: u64,
}

impl Default for RiskThresholds {
    /// The spec's example: 50 / 500 lines, 3 / 15 files.
    fn default() -> Self {
        RiskThresholds {
            low_lines: 50,
            high_lines: 500,
            low_files: 3,
            high_files: 15,
        }
    }
}

/// A settings change: each `Some` section replaces the stored one.
#[derive(Debug, Clone, Default)]
pub struct SettingsUpdate {
    pub gates: Option<Vec<Gate>>,
    pub sensitive_paths: Option<Vec<String>>,
    pub risk_thresholds: Option<RiskThresholds>,
    pub worker_instructions: Option<String>,
    pub judge_instructions: Option<String>,
    /// Knowledge Vault collection names (`vault.collections`).
    pub vault_collections: Option<Vec<String>>,
    /// The project's phase pipeline, in order (`phases`; default research,
    /// architecture, grooming, ready).
    pub phases: Option<Vec<String>>,
    /// Days after which an unverified learning nobody confirmed or found helpful ranks
    /// lower (`learnings.stale_after_days`; default 180; docs/learnings.md, "Age").
    pub stale_after_days: Option<u32>,
}

/// Build a gitignore-style matcher over `globs`; the error names the bad pattern.
pub(crate) fn glob_matcher(globs: &[String]) -> Result<ignore::gitignore::Gitignore> {
    let mut b = ignore::gitignore::GitignoreBuilder::new("/");
    for (i, g) in globs.iter().enumerate() {
        b.add_line(None, g).map_err(|e| {
            Error::invalid(
                format!("sensitive_paths[{i}]"),
                format!("invalid glob: {e}"),
            )
        })?;
    }
    b.build()
        .map_err(|e| Error::invalid("sensitive_paths", format!("invalid glob: {e}")))
}

/// Check a list of names (collections, phases): each 1-`max` characters of a-z, A-Z,
/// 0-9, '-' and '_'.
fn name_list(errors: &mut Vec<FieldError>, field: &str, names: Option<&[String]>, max: usize) {
    for (i, c) in names.into_iter().flatten().enumerate() {
        let ok = !c.is_empty()
            && c.len() <= max
            && c.chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_');
        if !ok {
            errors.push(FieldError::new(
                format!("{field}[{i}]"),
                format!("a name is 1-{max} characters of a-z, A-Z, 0-9, '-' and '_'"),
            ));
        }
    }
}

fn validate(u: &SettingsUpdate) -> Result<()> {
    let mut errors = Vec::new();
    check_texts(&mut errors, u);
    name_list(
        &mut errors,
        "vault_collections",
        u.vault_collections.as_deref(),
        limits::COLLECTION_MAX,
    );
    check_phases(&mut errors, u.phases.as_deref());
    check_counts(&mut errors, u);
    if u.stale_after_days
        .is_some_and(|d| !(1..=limits::STALE_AFTER_DAYS_MAX).contains(&d))
    {
        errors.push(FieldError::new(
            "stale_after_days",
            format!("must be between 1 and {}", limits::STALE_AFTER_DAYS_MAX),
        ));
    }
    if let Some(t) = &u.risk_thresholds {
        check_thresholds(&mut errors, t);
    }
    if !errors.is_empty() {
        return Err(Error::InvalidInput(errors));
    }
    if let Some(globs) = &u.sensitive_paths {
        glob_matcher(globs)?;
    }
    Ok(())
}

/// The texts of an update (gate commands and labels, instructions, globs): each within
/// its length, without NUL, and not blank unless it may be empty.
fn check_texts(errors: &mut Vec<FieldError>, u: &SettingsUpdate) {
    let mut text = |field: String, v: &str, max: usize, allow_empty: bool| {
        let n = v.chars().count();
        if (!allow_empty && v.trim().is_empty()) || n > max || v.contains('\0') {
            errors.push(FieldError::new(
                field,
                format!("must be 1-{max} characters without NUL"),
            ));
        }
    };
    if let Some(gates) = &u.gates {
        for (i, g) in gates.iter().enumerate() {
            text(
                format!("gates[{i}].command"),
                &g.command,
                limits::COMMAND_MAX,
                false,
            );
            text(
                format!("gates[{i}].label"),
                &g.label,
                limits::LABEL_MAX,
                false,
            );
        }
    }
    for (name, v) in [
        ("worker_instructions", &u.worker_instructions),
        ("judge_instructions", &u.judge_instructions),
    ] {
        if let Some(v) = v {
            text(name.into(), v, limits::INSTRUCTIONS_MAX, true);
        }
    }
    for (i, g) in u.sensitive_paths.iter().flatten().enumerate() {
        text(format!("sensitive_paths[{i}]"), g, limits::GLOB_MAX, false);
    }
}

/// A pipeline's phases: names, at least one, each once.
fn check_phases(errors: &mut Vec<FieldError>, phases: Option<&[String]>) {
    name_list(errors, "phases", phases, limits::PHASE_MAX);
    if let Some(phases) = phases {
        if phases.is_empty() {
            errors.push(FieldError::new(
                "phases",
                "a pipeline needs at least one phase",
            ));
        }
        let unique: std::collections::HashSet<&String> = phases.iter().collect();
        if unique.len() != phases.len() {
            errors.push(FieldError::new("phases", "each phase may appear once"));
        }
    }
}

/// The lists of an update within their counts.
fn check_counts(errors: &mut Vec<FieldError>, u: &SettingsUpdate) {
    let counts = [
        ("gates", u.gates.as_ref().map(Vec::len), limits::GATES_MAX),
        (
            "sensitive_paths",
            u.sensitive_paths.as_ref().map(Vec::len),
            limits::GLOBS_MAX,
        ),
        (
            "vault_collections",
            u.vault_collections.as_ref().map(Vec::len),
            limits::COLLECTIONS_MAX,
        ),
        (
            "phases",
            u.phases.as_ref().map(Vec::len),
            limits::PHASES_MAX,
        ),
    ];
    for (field, n, max) in counts {
        if n.is_some_and(|n| n > max) {
            errors.push(FieldError::new(field, format!("at most {max} entries")));
        }
    }
}

/// Risk thresholds: each low below its high, the highs within bounds.
fn check_thresholds(errors: &mut Vec<FieldError>, t: &RiskThresholds) {
    if t.low_lines >= t.high_lines {
        errors.push(FieldError::new(
            "risk_thresholds",
            "lowLines must be below highLines",
        ));
    }
    if t.low_files >= t.high_files {
        errors.push(FieldError::new(
            "risk_thresholds",
            "lowFiles must be below highFiles",
        ));
    }
    if t.high_lines > limits::THRESHOLD_MAX || t.high_files > limits::THRESHOLD_MAX {
        errors.push(FieldError::new(
            "risk_thresholds",
            format!("thresholds are at most {}", limits::THRESHOLD_MAX),
        ));
    }
}

/// The risk thresholds and sensitive globs of a project's stored settings.
pub(crate) fn risk_settings(settings: &Value) -> (RiskThresholds, Vec<String>) {
    let thresholds = settings
        .get("risk_thresholds")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    let globs = settings
        .get("sensitive_paths")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    (thresholds, globs)
}

/// Change a project's settings (id or slug); returns the project as stored.
pub(crate) fn configure_project(
    store: &Store,
    project: &str,
    update: &SettingsUpdate,
) -> Result<Project> {
    validate(update)?;
    store.write(|tx| {
        let p = find_project(tx, project)?
            .ok_or_else(|| Error::ProjectNotFound(project.to_string()))?;
        let mut settings = match p.settings {
            Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        if let Some(g) = &update.gates {
            settings.insert("gates".into(), json!(g));
        }
        if let Some(s) = &update.sensitive_paths {
            settings.insert("sensitive_paths".into(), json!(s));
        }
        if let Some(t) = &update.risk_thresholds {
            settings.insert("risk_thresholds".into(), json!(t));
        }
        if let Some(w) = &update.worker_instructions {
            settings.insert("worker_instructions".into(), json!(w));
        }
        if let Some(j) = &update.judge_instructions {
            settings.insert("judge_instructions".into(), json!(j));
        }
        if let Some(p) = &update.phases {
            settings.insert("phases".into(), json!(p));
        }
        if let Some(d) = update.stale_after_days {
            // Only `learnings.stale_after_days`: other keys of the section stay.
            let learnings = settings.entry("learnings").or_insert_with(|| json!({}));
            if !learnings.is_object() {
                *learnings = json!({});
            }
            learnings["stale_after_days"] = json!(d);
        }
        if let Some(c) = &update.vault_collections {
            // Only `vault.collections`: other keys of the vault section stay.
            let vault = settings.entry("vault").or_insert_with(|| json!({}));
            if !vault.is_object() {
                *vault = json!({});
            }
            vault["collections"] = json!(c);
        }
        tx.execute(
            "UPDATE projects SET settings = ?2, updated_at = ?3 WHERE id = ?1",
            params![p.id, Value::Object(settings).to_string(), now_iso()],
        )?;
        find_project(tx, &p.id)?.ok_or_else(|| Error::ProjectNotFound(p.id.clone()))
    })
}
