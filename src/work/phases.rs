//! The phase pipeline: completion claims (`complete_phase`), judge verdicts
//! (`approve_phase`, `reject_phase`), phase contracts, and a project's pipeline.
//!
//! ## Claims
//!
//! [`Cairn::complete_phase`] verifies the workspace first (with `--worktree-path`; without
//! it, which the spec allows, the project's path is used and the result says that no
//! worktree was verified: [`Cairn::worktree_check`]), then checks the claim and,
//! for every phase but `ready`, the artifact, and only then appends a `pc-` finding
//! (the spec's PhaseCompletionFinding; `processed` is derived, `false` until the
//! orchestrator marks it). Decisions:
//! - `project_path` must be absolute and, canonicalized, be the bound project's path or
//!   the session's worktree (where agents write artifacts before they are merged).
//! - `artifact_path` is relative to `project_path`, inside `docs/tickets/` by its
//!   components, and is opened beneath a handle on `project_path` without following any
//!   symlink ([`crate::paths::DirHandle`]): a regular file with one link, read through a
//!   bound of [`ARTIFACT_MAX_BYTES`] + 1. The hash and the content checks are computed on
//!   the bytes read from that handle. `promote_to` is relative, inside `docs/`, and its
//!   existing part must not go through a symlink. The contract file is opened beneath
//!   `contracts_dir`'s handle the same way. For `ready` the artifact fields are optional and no
//!   content is checked (the artifact is the committed code); given paths are still
//!   checked for safety.
//! - Content checks: SHA-256 of the file's bytes equals `artifact_hash` (hex, any case);
//!   UTF-8 text of at most [`ARTIFACT_MAX_BYTES`]; at least [`MIN_CHARS`] characters
//!   after trimming; at least one Markdown heading (parsed with pulldown-cmark, so `#`
//!   lines inside code blocks do not count); every `required_sections` entry of the
//!   contract present as a level-2 heading (`## Risks`), compared case-insensitively
//!   with whitespace collapsed and a trailing `:` ignored. All content problems are
//!   reported together.
//! - `recommended_next_phase` must be a phase of the project's pipeline.
//!
//! ## Phase contracts (file format, also in `docs/phase-contracts.md`)
//!
//! `<contracts_dir>/<phase>.json`, `contracts_dir` relative to `project_path`, default
//! `prompts/phases/`:
//!
//! ```json
//! {"version": 1, "required_sections": ["summary", "risks", "recommendation"]}
//! ```
//!
//! `version` (integer ≥ 1) is what `contract_version` must equal; `required_sections`
//! (optional, default empty) lists level-2 headings. Other keys are ignored. With no
//! contract file for the phase only the generic checks run and `contract_version` is not
//! compared (there is nothing to compare with). A named `contracts_dir` that does not
//! exist is a caller error; a contract file that does not parse is a precondition error
//! naming the file.
//!
//! ## Verdicts
//!
//! A verdict names the phase and the artifact hash it judged. It must match the latest
//! claim of that phase (no claim: not found; another hash: a conflict naming the latest
//! claim and its hash), and a claim gets one verdict (a second: a conflict naming the
//! first). A rejection also posts a comment with the reason and fix instructions, in
//! the same transaction.
//!
//! ## Pipeline
//!
//! A project's pipeline is the `phases` list of its settings (strings), default
//! [`DEFAULT_PIPELINE`]. `move_issue` uses it to keep or reset an issue's phase label.

use std::path::{Path, PathBuf};

use crate::store::db::{Conn, params};
use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::access::context::WorkContext;
use crate::base::sha256_hex;
use crate::error::{Error, FieldError, Result};
use crate::issues::Project;
use crate::paths::{DirHandle, relative_components, shown, starts_with_parts};
use crate::store::Store;
use crate::trail::FindingCategory;
use crate::trail::findings::{add_comment_in, append_finding, latest_phase_claim_in};

/// The pipeline of a project without a `phases` setting.
/// Limits on phase tool inputs, shared by the CLI and the MCP schemas.
pub(crate) mod limits {
    /// Largest contract version.
    pub(crate) const CONTRACT_VERSION_MAX: u32 = 1000;
    /// Length of an artifact hash (SHA-256, hex).
    pub(crate) const HASH_LEN: usize = 64;
    /// Longest phase summary and reason.
    pub(crate) const SUMMARY_MAX: usize = 2000;
    pub(crate) const REASON_MAX: usize = 2000;
    /// Most open questions, and the longest.
    pub(crate) const OPEN_QUESTIONS_MAX: usize = 50;
    pub(crate) const OPEN_QUESTION_MAX: usize = 1000;
    /// Longest phase name.
    pub(crate) const PHASE_NAME_MAX: usize = 64;
    /// Longest fix instructions of a rejected phase.
    pub(crate) const FIX_INSTRUCTIONS_MAX: usize = 10_000;
}

pub(crate) const DEFAULT_PIPELINE: [&str; 4] = ["research", "architecture", "grooming", "ready"];
/// Minimum trimmed length of an artifact, in characters.
pub(crate) const MIN_CHARS: usize = 100;
/// Largest artifact read, in bytes.
pub(crate) const ARTIFACT_MAX_BYTES: u64 = 1024 * 1024;
/// Largest contract file read, in bytes.
const CONTRACT_MAX_BYTES: u64 = 64 * 1024;
/// The default contracts directory, relative to the project path.
pub(crate) const DEFAULT_CONTRACTS_DIR: &str = "prompts/phases";

/// A phase that can be claimed complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Phase {
    Research,
    Architecture,
    Grooming,
    Ready,
}

impl Phase {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Phase::Research => "research",
            Phase::Architecture => "architecture",
            Phase::Grooming => "grooming",
            Phase::Ready => "ready",
        }
    }
}

/// How sure the claimant is.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Confidence {
    High,
    #[default]
    Medium,
    Low,
}

/// What `complete_phase` is asked to record.
#[derive(Debug, Clone)]
pub(crate) struct PhaseCompletion {
    pub(crate) completed_phase: Phase,
    pub(crate) contract_version: Option<u32>,
    pub(crate) artifact_path: Option<String>,
    pub(crate) artifact_hash: Option<String>,
    pub(crate) summary: String,
    pub(crate) open_questions: Vec<String>,
    pub(crate) confidence: Confidence,
    pub(crate) promote_to: Option<String>,
    pub(crate) recommended_next_phase: Option<String>,
    pub(crate) project_path: String,
    pub(crate) contracts_dir: Option<String>,
}

/// A recorded completion claim: the spec's PhaseCompletionFinding.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct PhaseClaim {
    /// `pc-…`
    pub(crate) id: String,
    /// Always `phase_completion`.
    pub(crate) category: String,
    pub(crate) completed_phase: Phase,
    pub(crate) contract_version: Option<u32>,
    /// Relative to the project path, e.g. docs/tickets/P-1/research.md.
    pub(crate) artifact_path: Option<String>,
    /// SHA-256 of the artifact, lower-case hex.
    pub(crate) artifact_hash: Option<String>,
    pub(crate) summary: String,
    pub(crate) open_questions: Vec<String>,
    pub(crate) confidence: Confidence,
    pub(crate) promote_to: Option<String>,
    pub(crate) recommended_next_phase: Option<String>,
    /// False until the orchestrator processes the claim.
    pub(crate) processed: bool,
    pub(crate) created_at: String,
    /// The checks the artifact passed.
    pub(crate) checks: Vec<String>,
    pub(crate) message: String,
    /// The worktree that was verified, or that none was (no `--worktree-path`).
    pub(crate) worktree: crate::work::workspace::WorktreeCheck,
}

/// A recorded judge verdict: the spec's PhaseVerdictFinding.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct PhaseVerdict {
    /// `pv-…`
    pub(crate) id: String,
    /// Always `phase_verdict`.
    pub(crate) category: String,
    pub(crate) phase: Phase,
    pub(crate) artifact_hash: String,
    /// `approved` or `rejected`.
    pub(crate) verdict: String,
    pub(crate) reason: String,
    pub(crate) fix_instructions: Option<String>,
    /// The claim (`pc-…`) this verdict judges.
    pub(crate) claim_id: String,
    /// The comment posted with a rejection.
    pub(crate) comment_id: Option<String>,
    /// False until the orchestrator processes the verdict.
    pub(crate) processed: bool,
    pub(crate) created_at: String,
}

/// A phase contract file (`<contracts_dir>/<phase>.json`).
#[derive(Debug, Clone, Deserialize)]
struct Contract {
    version: u32,
    #[serde(default)]
    required_sections: Vec<String>,
}

/// The pipeline of `project`: its `phases` setting, or [`DEFAULT_PIPELINE`].
pub(crate) fn pipeline(project: &Project) -> Vec<String> {
    let configured: Vec<String> = project
        .settings
        .get("phases")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    if configured.is_empty() {
        DEFAULT_PIPELINE.map(String::from).to_vec()
    } else {
        configured
    }
}

/// Check a caller-given relative path: its components begin with `prefix` and go
/// beyond it, and its existing part has no symlink beneath `root`. Returns the
/// normalized relative text.
fn check_under(root: &DirHandle, relative: &str, prefix: &[&str], field: &str) -> Result<String> {
    let parts = relative_components(relative, field)?;
    let inside = prefix.join("/");
    if !starts_with_parts(&parts, prefix) || parts.len() == prefix.len() {
        return Err(Error::invalid(
            field,
            format!(
                "{} must be a path inside {inside}/ relative to project_path (e.g. {inside}/…)",
                shown(relative)
            ),
        ));
    }
    root.probe(&parts, relative, field)?;
    Ok(parts.join("/"))
}

/// Level and text of every heading of a Markdown document.
fn headings(text: &str) -> Vec<(HeadingLevel, String)> {
    let mut out = Vec::new();
    let mut current: Option<(HeadingLevel, String)> = None;
    for event in Parser::new(text) {
        match event {
            Event::Start(Tag::Heading { level, .. }) => current = Some((level, String::new())),
            Event::End(TagEnd::Heading(_)) => out.extend(current.take()),
            Event::Text(t) | Event::Code(t) => {
                if let Some((_, s)) = current.as_mut() {
                    s.push_str(&t);
                }
            }
            _ => {}
        }
    }
    out
}

fn normalize_section(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches(':')
        .trim()
        .to_lowercase()
}

/// The generic and contract checks of an artifact's text; every problem, as messages.
fn content_problems(text: &str, required: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    let n = text.trim().chars().count();
    if n < MIN_CHARS {
        problems.push(format!(
            "Artifact content too short ({n} chars, minimum {MIN_CHARS})"
        ));
    }
    let found = headings(text);
    if found.is_empty() {
        problems.push("Artifact does not appear to be Markdown — no headings found".into());
    }
    let h2: Vec<String> = found
        .iter()
        .filter(|(l, _)| *l == HeadingLevel::H2)
        .map(|(_, t)| normalize_section(t))
        .collect();
    let missing: Vec<&str> = required
        .iter()
        .filter(|r| !h2.contains(&normalize_section(r)))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        problems.push(format!(
            "Artifact missing required sections: {} (add each as a `## <name>` heading)",
            missing.join(", ")
        ));
    }
    problems
}

/// The contract of `phase`, if its file exists.
fn load_contract(project: &DirHandle, dir: Option<&str>, phase: Phase) -> Result<Option<Contract>> {
    let field = "contracts_dir";
    let dir_text = dir.unwrap_or(DEFAULT_CONTRACTS_DIR);
    let contracts = match project.dir(dir_text, field) {
        Ok(Some(d)) => d,
        Ok(None) if dir.is_some() => {
            return Err(Error::invalid(
                field,
                format!(
                    "{} is not a directory under project_path (symlinks are not followed); \
                     omit it to use {DEFAULT_CONTRACTS_DIR}/",
                    shown(dir_text)
                ),
            ));
        }
        Ok(None) => return Ok(None),
        Err(e) => return Err(e),
    };
    let name = format!("{}.json", phase.as_str());
    let Some(file) = contracts.open_file_parts(
        &[&name],
        &format!("{dir_text}/{name}"),
        field,
        CONTRACT_MAX_BYTES,
    )?
    else {
        return Ok(None);
    };
    let path = contracts.path().join(&name);
    let bytes = file.read_capped()?;
    let bad = |why: String| {
        Error::FailedPrecondition(format!(
            "phase contract {} is not usable: {why}; expected {{\"version\": 1, \
             \"required_sections\": [\"summary\", …]}} (see docs/phase-contracts.md)",
            path.display()
        ))
    };
    let contract: Contract = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    if contract.version == 0 {
        return Err(bad("version must be at least 1".into()));
    }
    Ok(Some(contract))
}

/// `project_path` checked against the bound project and worktree; returns the canonical
/// project root.
fn check_project_path(given: &str, project: &Project, worktree: Option<&str>) -> Result<PathBuf> {
    let path = Path::new(given);
    let where_ = worktree
        .or(project.path.as_deref())
        .unwrap_or("the project's path");
    let worktree = worktree.unwrap_or(where_);
    if given.contains('\0') || !path.is_absolute() {
        return Err(Error::invalid(
            "project_path",
            format!("must be the absolute path of the project root or your worktree ({where_})"),
        ));
    }
    let canon = std::fs::canonicalize(path).map_err(|_| {
        Error::invalid(
            "project_path",
            format!("{} does not exist; use {worktree}", shown(given)),
        )
    })?;
    let mut allowed: Vec<PathBuf> = vec![PathBuf::from(worktree)];
    allowed.retain(|p| p.is_absolute());
    if let Some(p) = project
        .path
        .as_deref()
        .and_then(|p| std::fs::canonicalize(p).ok())
    {
        allowed.push(p);
    }
    if allowed.contains(&canon) {
        return Ok(canon);
    }
    Err(Error::invalid(
        "project_path",
        format!(
            "{} is neither your worktree ({worktree}) nor the project's path{}; write the \
             artifact in your worktree and pass its path",
            shown(given),
            project
                .path
                .as_deref()
                .map(|p| format!(" ({p})"))
                .unwrap_or_default()
        ),
    ))
}

fn required_fields(p: &PhaseCompletion) -> Result<()> {
    if p.completed_phase == Phase::Ready {
        return Ok(());
    }
    let mut errors = Vec::new();
    let phase = p.completed_phase.as_str();
    let need = |errors: &mut Vec<FieldError>, missing: bool, field: &str, what: &str| {
        if missing {
            errors.push(FieldError::new(
                field,
                format!(
                    "required when completed_phase is {phase} (only ready may omit it): {what}"
                ),
            ));
        }
    };
    need(
        &mut errors,
        p.contract_version.is_none(),
        "contract_version",
        "the phase contract's version, currently 1",
    );
    need(
        &mut errors,
        p.artifact_path.is_none(),
        "artifact_path",
        "e.g. docs/tickets/<ISSUE>/<phase>.md",
    );
    need(
        &mut errors,
        p.artifact_hash.is_none(),
        "artifact_hash",
        "SHA-256 hex of the artifact file",
    );
    need(
        &mut errors,
        p.recommended_next_phase.is_none(),
        "recommended_next_phase",
        "the phase that should follow",
    );
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::InvalidInput(errors))
    }
}

/// Validate the artifact of a non-ready claim (`rel`, checked by [`check_under`]),
/// opened beneath `root`; returns the checks it passed.
fn check_artifact(root: &DirHandle, p: &PhaseCompletion, rel: &str) -> Result<Vec<String>> {
    let parts: Vec<&str> = rel.split('/').collect();
    let file = root.open_file_parts(&parts, rel, "artifact_path", ARTIFACT_MAX_BYTES)?;
    let Some(file) = file else {
        return Err(Error::invalid(
            "artifact_path",
            format!(
                "{} does not exist under project_path; write the artifact first",
                shown(rel)
            ),
        ));
    };
    let bytes = file.read_capped()?;
    let actual = sha256_hex(&bytes);
    let claimed = p.artifact_hash.as_deref().unwrap_or_default();
    if !actual.eq_ignore_ascii_case(claimed) {
        return Err(Error::invalid(
            "artifact_hash",
            format!(
                "does not match the file: {rel} has SHA-256 {actual}; recompute the hash after \
                 your last edit (sha256sum {rel})"
            ),
        ));
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        Error::invalid(
            "artifact_path",
            "the artifact is not UTF-8 text; write it as Markdown",
        )
    })?;
    let contract = load_contract(root, p.contracts_dir.as_deref(), p.completed_phase)?;
    let mut checks = vec![
        "path inside docs/tickets/".to_string(),
        "sha256 matches".to_string(),
    ];
    if let Some(c) = &contract {
        let given = p.contract_version.unwrap_or_default();
        if given != c.version {
            return Err(Error::invalid(
                "contract_version",
                format!(
                    "is {given}, but the {} contract is version {}; re-read the contract and \
                     pass contract_version {}",
                    p.completed_phase.as_str(),
                    c.version,
                    c.version
                ),
            ));
        }
        checks.push(format!("contract version {}", c.version));
    }
    let required = contract
        .as_ref()
        .map(|c| c.required_sections.clone())
        .unwrap_or_default();
    let problems = content_problems(&text, &required);
    if !problems.is_empty() {
        return Err(Error::InvalidInput(
            problems
                .into_iter()
                .map(|m| FieldError::new("artifact_path", m))
                .collect(),
        ));
    }
    checks.push(format!("at least {MIN_CHARS} characters"));
    checks.push("Markdown headings".into());
    if !required.is_empty() {
        checks.push(format!("required sections: {}", required.join(", ")));
    }
    Ok(checks)
}

/// The latest claim of a phase, and the verdict already given on it.
struct LatestClaim {
    id: String,
    artifact_hash: String,
    /// The claim record's own hash (its `hash` in the trail).
    record_hash: String,
    /// `(verdict id, approved|rejected)` of a verdict recorded after the claim.
    verdict: Option<(String, String)>,
}

impl LatestClaim {
    /// Whether a verdict naming `hash` may judge this claim: `hash` is its artifact's
    /// hash (or, for a claim without one, the claim record's hash) and no verdict was
    /// given on it yet.
    fn check_verdict(&self, hash: &str, phase: Phase) -> Result<()> {
        let LatestClaim {
            id: claim_id,
            artifact_hash: claim_hash,
            record_hash,
            verdict: earlier,
        } = self;
        // A `ready` claim may come without an artifact_hash (the spec allows it: the
        // artifact is the committed code). The verdict then names the claim itself, by
        // the claim record's hash, so it judges exactly the claim the judge read.
        if claim_hash.is_empty() && !record_hash.eq_ignore_ascii_case(hash) {
            return Err(Error::Conflict {
                message: format!(
                    "the latest {} claim {claim_id} carries no artifact_hash, so a verdict \
                     names the claim itself: pass as artifact_hash the claim's record hash \
                     (the `hash` of finding {claim_id} in get_issue or list_findings)",
                    phase.as_str()
                ),
                existing_id: Some(claim_id.clone()),
            });
        }
        if !claim_hash.is_empty() && !claim_hash.eq_ignore_ascii_case(hash) {
            return Err(Error::Conflict {
                message: format!(
                    "artifact_hash {hash} does not match the latest {} claim {claim_id} \
                     (artifact_hash {claim_hash}); review that artifact and pass its hash",
                    phase.as_str()
                ),
                existing_id: Some(claim_id.clone()),
            });
        }
        if let Some((verdict_id, given)) = earlier {
            return Err(Error::Conflict {
                message: format!(
                    "the latest {} claim {claim_id} was already {given} by {verdict_id}; a \
                     new claim is needed before another verdict",
                    phase.as_str()
                ),
                existing_id: Some(verdict_id.clone()),
            });
        }
        Ok(())
    }
}

/// The latest claim of `phase` and, if one exists after it, the verdict already given.
fn latest_claim(
    c: &Conn<'_>,
    issue_id: &str,
    identifier: &str,
    phase: Phase,
) -> Result<LatestClaim> {
    let claim = latest_phase_claim_in(c, issue_id, phase.as_str())?.ok_or_else(|| {
        Error::not_found(
            "phase claim",
            format!(
                "no {} completion claim on {identifier}; the agent must call complete_phase first",
                phase.as_str()
            ),
        )
    })?;
    let hash = claim
        .field_str("artifact_hash")
        .unwrap_or_default()
        .to_string();
    let d = c.dialect();
    let verdict: Option<(String, String)> = c.query_opt(
        &format!(
            "SELECT id, {} FROM trail_records
             WHERE issue_id = ?1 AND kind = 'finding' AND category = 'phase_verdict'
               AND {} = ?2 AND position > ?3
             ORDER BY position DESC LIMIT 1",
            d.json_text("body", "verdict"),
            d.json_text("body", "phase")
        ),
        params![issue_id, phase.as_str(), claim.position],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(LatestClaim {
        record_hash: claim.hash.clone(),
        id: claim.id,
        artifact_hash: hash,
        verdict,
    })
}

/// `complete_phase`: verify the workspace, validate the claim and its artifact, and
/// record a `pc-` finding on the bound issue (see the module docs).
pub(crate) fn complete_phase(
    store: &Store,
    work: &WorkContext,
    p: &PhaseCompletion,
) -> Result<PhaseClaim> {
    let worktree = crate::work::workspace::worktree_check(store, work)?;
    let bound = work.require_issue()?;
    let issue = crate::issues::issue(store, &bound.id)?;
    let project = crate::issues::project(store, &issue.project_id)?;
    required_fields(p)?;
    let verified = worktree.path.as_deref().filter(|_| worktree.verified);
    let root = check_project_path(&p.project_path, &project, verified)?;
    let root = DirHandle::open_root(&root)?;
    let artifact = p
        .artifact_path
        .as_deref()
        .map(|a| check_under(&root, a, &["docs", "tickets"], "artifact_path"))
        .transpose()?;
    let promote_to = p
        .promote_to
        .as_deref()
        .map(|t| check_under(&root, t, &["docs"], "promote_to"))
        .transpose()?;
    if let Some(next) = &p.recommended_next_phase {
        let phases = pipeline(&project);
        if !phases.contains(next) {
            return Err(Error::invalid(
                "recommended_next_phase",
                format!(
                    "{} is not a phase of project {}; one of: {}",
                    shown(next),
                    project.slug,
                    phases.join(", ")
                ),
            ));
        }
    }
    let checks = match (&artifact, p.completed_phase) {
        (_, Phase::Ready) => vec!["content validation skipped for ready".to_string()],
        (Some(rel), _) => check_artifact(&root, p, rel)?,
        (None, _) => Vec::new(),
    };
    let artifact_path = artifact;
    let artifact_hash = p.artifact_hash.as_ref().map(|h| h.to_ascii_lowercase());
    let body = json!({
        "completed_phase": p.completed_phase,
        "contract_version": p.contract_version,
        "artifact_path": artifact_path,
        "artifact_hash": artifact_hash,
        "summary": p.summary.trim(),
        "open_questions": p.open_questions,
        "confidence": p.confidence,
        "promote_to": promote_to,
        "recommended_next_phase": p.recommended_next_phase,
    });
    let finding = store.write(|tx| {
        append_finding(
            tx,
            &issue.id,
            FindingCategory::PhaseCompletion,
            body,
            &work.actor,
        )
    })?;
    Ok(PhaseClaim {
        id: finding.id,
        category: FindingCategory::PhaseCompletion.as_str().into(),
        completed_phase: p.completed_phase,
        contract_version: p.contract_version,
        artifact_path,
        artifact_hash,
        summary: p.summary.trim().to_string(),
        open_questions: p.open_questions.clone(),
        confidence: p.confidence,
        promote_to,
        recommended_next_phase: p.recommended_next_phase.clone(),
        processed: finding.processed,
        created_at: finding.created_at,
        checks,
        message: format!(
            "Claim recorded: {} of {} is complete. The orchestrator validates it and \
             advances the phase on its next tick.{}",
            p.completed_phase.as_str(),
            issue.identifier,
            if worktree.verified {
                String::new()
            } else {
                format!(" {}", worktree.message)
            }
        ),
        worktree,
    })
}

/// `approve_phase` / `reject_phase`: record a `pv-` verdict on the bound issue's
/// latest claim of `phase`; a rejection also posts a comment (one transaction).
pub(crate) fn judge_phase(
    store: &Store,
    work: &WorkContext,
    phase: Phase,
    artifact_hash: &str,
    approved: bool,
    reason: Option<&str>,
    fix_instructions: Option<&str>,
) -> Result<PhaseVerdict> {
    let bound = work.require_issue()?;
    let hash = artifact_hash.to_ascii_lowercase();
    let verdict = if approved { "approved" } else { "rejected" };
    let reason = reason
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .unwrap_or("approved without comment")
        .to_string();
    let fix = fix_instructions
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(String::from);
    store.write(|tx| {
        let (issue_id, identifier) = crate::trail::resolve(tx, &bound.id)?;
        let claim = latest_claim(tx, &issue_id, &identifier, phase)?;
        claim.check_verdict(&hash, phase)?;
        let claim_id = claim.id;
        let mut body = json!({
            "phase": phase,
            "artifact_hash": hash,
            "verdict": verdict,
            "reason": reason,
            "claim_id": claim_id,
        });
        if let Some(f) = &fix {
            body["fix_instructions"] = json!(f);
        }
        let finding = append_finding(
            tx,
            &issue_id,
            FindingCategory::PhaseVerdict,
            body,
            &work.actor,
        )?;
        let comment = if approved {
            crate::trail::approval::issue_approved(tx, &issue_id, &work.actor)?;
            None
        } else {
            let text = format!(
                "Phase {} rejected (artifact {hash}): {reason}{}",
                phase.as_str(),
                fix.as_ref()
                    .map(|f| format!("\n\nFix instructions: {f}"))
                    .unwrap_or_default()
            );
            Some(add_comment_in(tx, &issue_id, &text, &work.actor)?.id)
        };
        Ok(PhaseVerdict {
            id: finding.id,
            category: FindingCategory::PhaseVerdict.as_str().into(),
            phase,
            artifact_hash: hash.clone(),
            verdict: verdict.into(),
            reason: reason.clone(),
            fix_instructions: fix.clone(),
            claim_id,
            comment_id: comment,
            processed: finding.processed,
            created_at: finding.created_at,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_in_code_blocks_do_not_count() {
        let text = "```\n# not a heading\n```\nplain text";
        assert!(headings(text).is_empty());
        let h = headings("# Title\n\n## Risks:\n\ntext\n\n### Deep");
        assert_eq!(h.len(), 3);
        assert_eq!(h[1], (HeadingLevel::H2, "Risks:".to_string()));
    }

    #[test]
    fn content_problems_are_all_reported() {
        let p = content_problems("short", &["risks".into()]);
        assert_eq!(p.len(), 3, "{p:?}");
        assert_eq!(p[0], "Artifact content too short (5 chars, minimum 100)");
        let body = format!(
            "# T\n\n## Summary\n\n{}\n\n## RISKS :\n\n### Recommendation\n",
            "x".repeat(120)
        );
        let p = content_problems(
            &body,
            &["summary".into(), "risks".into(), "recommendation".into()],
        );
        assert_eq!(
            p,
            [
                "Artifact missing required sections: recommendation (add each as a `## <name>` heading)"
            ]
        );
    }
}
