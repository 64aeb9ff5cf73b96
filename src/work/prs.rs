//! Local pull-request records (`create_pr`, `approve_pr`, `reject_pr`, `cairn pr`): the
//! diff snapshot, per-file stats parsed from the unified diff, gate results, and a risk
//! score.
//!
//! ## Risk score (decision; the spec names the inputs, not the formula)
//!
//! With `L` = added + deleted lines, `F` = changed files and the project's
//! `risk_thresholds` (default 50/500 lines, 3/15 files):
//!
//! - size: `0` when `L <= lowLines`, `40` when `L >= highLines`, linear between;
//! - breadth: `0` when `F <= lowFiles`, `30` when `F >= highFiles`, linear between;
//! - sensitive: `30` when any changed path (old or new name) matches a `sensitive_paths`
//!   glob;
//! - gates: `+20` for each required gate with a non-zero exit code.
//!
//! The score is the rounded sum, capped at 100; level `low` below 30, `medium` below 60,
//! `high` from 60. `risk_factors` lists every contribution in words.
//!
//! A new PR on an issue supersedes its open one; `approve_pr` / `reject_pr` act on the
//! issue's open PR. `create_pr` moves the issue to `review` (from `in_progress` or
//! `todo`; an issue already in review stays there).

use crate::store::db::{Conn, Row, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::access::context::WorkContext;
use crate::base::{new_id, now_iso};
use crate::error::{Error, FieldError, Result};
use crate::issues::Status;
use crate::store::Store;
use crate::work::workspace::WorktreeCheck;

use crate::issues::settings::{RiskThresholds, glob_matcher, risk_settings};
use crate::trail::findings::add_comment_in;
use crate::trail::status::{change_status_in, current_status, set_status_in};

/// Limits on PR fields.
pub(crate) mod limits {
    pub(crate) const DIFF_MAX: usize = 2_000_000;
    pub(crate) const BRANCH_MAX: usize = 255;
    pub(crate) const GATES_MAX: usize = 50;
    pub(crate) const GATE_OUTPUT_MAX: usize = 100_000;
    /// Longest gate command and label (as for configured gates).
    pub(crate) const GATE_COMMAND_MAX: usize = crate::issues::settings::limits::COMMAND_MAX;
    pub(crate) const GATE_LABEL_MAX: usize = crate::issues::settings::limits::LABEL_MAX;
    /// Exit codes range over ±this.
    pub(crate) const EXIT_CODE_MAX: i64 = 1_000_000;
    /// Longest fix instructions of a rejection.
    pub(crate) const FIX_INSTRUCTIONS_MAX: usize = 20_000;
}

/// One quality gate's result, as the agent reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateResult {
    /// Command that was run.
    #[schemars(length(min = 1, max = limits::GATE_COMMAND_MAX))]
    pub(crate) command: String,
    /// Human-readable label.
    #[schemars(length(min = 1, max = limits::GATE_LABEL_MAX))]
    pub(crate) label: String,
    /// Exit code (0 = pass).
    #[schemars(range(min = -limits::EXIT_CODE_MAX, max = limits::EXIT_CODE_MAX))]
    pub(crate) exit_code: i64,
    /// Command output.
    #[schemars(length(max = limits::GATE_OUTPUT_MAX))]
    pub(crate) output: String,
    /// Whether this gate is required (default false).
    #[serde(default)]
    pub(crate) required: bool,
}

/// Per-file stats of a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct FileStat {
    pub(crate) path: String,
    /// The old path of a rename.
    pub(crate) old_path: Option<String>,
    /// `added`, `deleted`, `renamed`, `modified` or `binary`.
    pub(crate) status: String,
    pub(crate) additions: u64,
    pub(crate) deletions: u64,
}

/// The computed risk of a PR.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub(crate) struct Risk {
    /// 0-100.
    pub(crate) score: u32,
    /// `low`, `medium` or `high`.
    pub(crate) level: String,
    /// Each contribution to the score, in words.
    pub(crate) factors: Vec<String>,
}

/// A PR record.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PullRequest {
    pub(crate) id: String,
    /// Identifier of the issue.
    pub(crate) issue: String,
    /// `open`, `approved`, `rejected` or `superseded`.
    pub(crate) status: String,
    pub(crate) branch_name: String,
    pub(crate) base_branch: String,
    pub(crate) files: Vec<FileStat>,
    pub(crate) additions: u64,
    pub(crate) deletions: u64,
    pub(crate) gate_results: Vec<GateResult>,
    pub(crate) risk: Risk,
    pub(crate) review_reason: Option<String>,
    pub(crate) fix_instructions: Option<String>,
    pub(crate) reviewed_by: Option<String>,
    pub(crate) reviewed_at: Option<String>,
    pub(crate) created_by: String,
    pub(crate) created_at: String,
    /// The diff snapshot (left out of listings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) diff: Option<String>,
}

/// A PR in one line.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct PullRequestSummary {
    pub(crate) id: String,
    pub(crate) status: String,
    pub(crate) branch_name: String,
    pub(crate) files: u64,
    pub(crate) additions: u64,
    pub(crate) deletions: u64,
    pub(crate) risk_score: u32,
    pub(crate) risk_level: String,
    pub(crate) created_at: String,
}

/// What `create_pr` records.
#[derive(Debug, Clone)]
pub struct NewPullRequest {
    pub diff: String,
    pub branch_name: String,
    pub base_branch: String,
    pub gate_results: Vec<GateResult>,
}

fn strip_prefix(path: &str) -> String {
    let p = path.trim_end_matches('\t');
    p.strip_prefix("a/")
        .or_else(|| p.strip_prefix("b/"))
        .unwrap_or(p)
        .to_string()
}

fn hunk_counts(header: &str) -> (u64, u64) {
    // @@ -a[,b] +c[,d] @@
    let mut parts = header.split_whitespace().skip(1);
    let count = |s: Option<&str>| {
        s.and_then(|r| r.get(1..))
            .map(|r| match r.split_once(',') {
                Some((_, n)) => n.parse().unwrap_or(0),
                None => 1,
            })
            .unwrap_or(0)
    };
    (count(parts.next()), count(parts.next()))
}

/// Parse a unified (git) diff into per-file stats.
pub(crate) fn parse_diff(diff: &str) -> Vec<FileStat> {
    let mut files: Vec<FileStat> = Vec::new();
    let (mut old_left, mut new_left) = (0u64, 0u64);
    let mut git_header = false;
    let new_file = |files: &mut Vec<FileStat>| {
        files.push(FileStat {
            path: String::new(),
            old_path: None,
            status: "modified".into(),
            additions: 0,
            deletions: 0,
        })
    };
    for line in diff.lines() {
        if old_left > 0 || new_left > 0 {
            let f = files.last_mut();
            match (line.as_bytes().first(), f) {
                (Some(b'+'), Some(f)) => {
                    f.additions += 1;
                    new_left = new_left.saturating_sub(1);
                }
                (Some(b'-'), Some(f)) => {
                    f.deletions += 1;
                    old_left = old_left.saturating_sub(1);
                }
                (Some(b'\\'), _) => {}
                _ => {
                    old_left = old_left.saturating_sub(1);
                    new_left = new_left.saturating_sub(1);
                }
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("diff --git ") {
            new_file(&mut files);
            git_header = true;
            if let (Some(f), Some((_, b))) = (files.last_mut(), rest.split_once(" b/")) {
                f.path = b.to_string();
            }
        } else if line.starts_with("@@") {
            (old_left, new_left) = hunk_counts(line);
            git_header = false;
        } else if let Some(p) = line.strip_prefix("--- ") {
            if !git_header {
                new_file(&mut files);
            }
            if let Some(f) = files.last_mut()
                && p != "/dev/null"
            {
                f.old_path = Some(strip_prefix(p));
            }
        } else if let Some(p) = line.strip_prefix("+++ ") {
            if let Some(f) = files.last_mut() {
                if p == "/dev/null" {
                    f.status = "deleted".into();
                    f.path = f.old_path.take().unwrap_or_default();
                } else {
                    f.path = strip_prefix(p);
                }
            }
        } else if let Some(f) = files.last_mut() {
            if line.starts_with("new file mode") {
                f.status = "added".into();
            } else if line.starts_with("deleted file mode") {
                f.status = "deleted".into();
            } else if let Some(p) = line.strip_prefix("rename from ") {
                f.status = "renamed".into();
                f.old_path = Some(p.to_string());
            } else if let Some(p) = line.strip_prefix("rename to ") {
                f.path = p.to_string();
            } else if line.starts_with("Binary files ") {
                f.status = "binary".into();
            }
        }
    }
    for f in &mut files {
        if f.status == "modified" && f.old_path.as_ref().is_some_and(|o| *o != f.path) {
            f.status = "renamed".into();
        }
        if f.status != "renamed" {
            f.old_path = None;
        }
    }
    files.retain(|f| !f.path.is_empty());
    files
}

fn ramp(value: u64, low: u64, high: u64, weight: f64) -> f64 {
    if value <= low {
        0.0
    } else if value >= high {
        weight
    } else {
        weight * (value - low) as f64 / (high - low) as f64
    }
}

/// The risk of a change (see the module doc for the formula).
pub(crate) fn risk_score(
    files: &[FileStat],
    gates: &[GateResult],
    t: &RiskThresholds,
    sensitive: &[String],
) -> Result<Risk> {
    let lines: u64 = files.iter().map(|f| f.additions + f.deletions).sum();
    let n = files.len() as u64;
    let mut factors = Vec::new();
    let size = ramp(lines, t.low_lines, t.high_lines, 40.0);
    if size > 0.0 {
        factors.push(format!(
            "{lines} changed lines (low {}, high {}): +{size:.0}",
            t.low_lines, t.high_lines
        ));
    }
    let breadth = ramp(n, t.low_files, t.high_files, 30.0);
    if breadth > 0.0 {
        factors.push(format!(
            "{n} changed files (low {}, high {}): +{breadth:.0}",
            t.low_files, t.high_files
        ));
    }
    let matcher = glob_matcher(sensitive)?;
    let hits: Vec<&str> = files
        .iter()
        .flat_map(|f| std::iter::once(f.path.as_str()).chain(f.old_path.as_deref()))
        .filter(|p| {
            matcher
                .matched_path_or_any_parents(format!("/{p}"), false)
                .is_ignore()
        })
        .collect();
    let sens = if hits.is_empty() { 0.0 } else { 30.0 };
    if !hits.is_empty() {
        factors.push(format!(
            "sensitive paths touched ({}): +30",
            hits.join(", ")
        ));
    }
    let failed: Vec<&str> = gates
        .iter()
        .filter(|g| g.required && g.exit_code != 0)
        .map(|g| g.label.as_str())
        .collect();
    if !failed.is_empty() {
        factors.push(format!(
            "required gates failed ({}): +{}",
            failed.join(", "),
            20 * failed.len()
        ));
    }
    let score = ((size + breadth + sens).round() as u32 + 20 * failed.len() as u32).min(100);
    let level = match score {
        0..30 => "low",
        30..60 => "medium",
        _ => "high",
    };
    Ok(Risk {
        score,
        level: level.into(),
        factors,
    })
}

/// `new` with its text cleaned by [`crate::text`] (the diff and the gate results are read
/// by the judge agent); branch names are names and refused if they hide characters.
fn clean_pr(new: &NewPullRequest) -> Result<NewPullRequest> {
    use crate::text;
    let mut errors = Vec::new();
    for (field, v) in [
        ("branch_name", &new.branch_name),
        ("base_branch", &new.base_branch),
    ] {
        if let Err(e) = text::exact(field, v) {
            errors.push(e);
        }
    }
    let mut out = new.clone();
    let mut take = |r: std::result::Result<String, FieldError>| {
        r.unwrap_or_else(|e| {
            errors.push(e);
            String::new()
        })
    };
    out.diff = take(text::prose("diff", &new.diff));
    for (i, g) in out.gate_results.iter_mut().enumerate() {
        g.command = take(text::prose(
            &format!("gate_results[{i}].command"),
            &g.command,
        ));
        g.label = take(text::prose(&format!("gate_results[{i}].label"), &g.label));
        g.output = take(text::prose(&format!("gate_results[{i}].output"), &g.output));
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(Error::InvalidInput(errors))
    }
}

fn validate(new: &NewPullRequest) -> Result<Vec<FileStat>> {
    let mut errors = Vec::new();
    for (field, v) in [
        ("branch_name", &new.branch_name),
        ("base_branch", &new.base_branch),
    ] {
        let bad = v.trim().is_empty()
            || v.len() > limits::BRANCH_MAX
            || v.chars().any(|c| c.is_control() || c == ' ')
            || v.contains("..");
        if bad {
            errors.push(FieldError::new(
                field,
                format!(
                    "a branch name is 1-{} bytes without spaces, control characters or '..'",
                    limits::BRANCH_MAX
                ),
            ));
        }
    }
    if new.diff.len() > limits::DIFF_MAX {
        errors.push(FieldError::new(
            "diff",
            format!("at most {} bytes", limits::DIFF_MAX),
        ));
    }
    let files = parse_diff(&new.diff);
    if files.is_empty() {
        errors.push(FieldError::new(
            "diff",
            "no file changes found; pass the full output of `git diff <base>...<branch>`",
        ));
    }
    if !errors.is_empty() {
        return Err(Error::InvalidInput(errors));
    }
    Ok(files)
}

fn pr_from_row(r: &Row) -> crate::error::Result<PullRequest> {
    let json = |k: &str| -> crate::error::Result<Value> {
        let s: String = r.get(k)?;
        Ok(serde_json::from_str(&s).unwrap_or(Value::Null))
    };
    Ok(PullRequest {
        id: r.get("id")?,
        issue: r.get("identifier")?,
        status: r.get("status")?,
        branch_name: r.get("branch_name")?,
        base_branch: r.get("base_branch")?,
        files: serde_json::from_value(json("files")?).unwrap_or_default(),
        additions: r.get("additions")?,
        deletions: r.get("deletions")?,
        gate_results: serde_json::from_value(json("gate_results")?).unwrap_or_default(),
        risk: Risk {
            score: r.get("risk_score")?,
            level: r.get("risk_level")?,
            factors: serde_json::from_value(json("risk_factors")?).unwrap_or_default(),
        },
        review_reason: r.get("review_reason")?,
        fix_instructions: r.get("fix_instructions")?,
        reviewed_by: r.get("reviewed_by")?,
        reviewed_at: r.get("reviewed_at")?,
        created_by: r.get("created_by")?,
        created_at: r.get("created_at")?,
        diff: r.get("diff")?,
    })
}

const PR_SQL: &str =
    "SELECT pr.*, i.identifier FROM pull_requests pr JOIN issues i ON i.id = pr.issue_id";

fn load_pr(c: &Conn<'_>, id: &str) -> Result<PullRequest> {
    c.query_opt(&format!("{PR_SQL} WHERE pr.id = ?1"), [id], pr_from_row)?
        .ok_or_else(|| Error::not_found("pull request", id))
}

fn summary(pr: PullRequest) -> PullRequestSummary {
    PullRequestSummary {
        id: pr.id,
        status: pr.status,
        branch_name: pr.branch_name,
        files: pr.files.len() as u64,
        additions: pr.additions,
        deletions: pr.deletions,
        risk_score: pr.risk.score,
        risk_level: pr.risk.level,
        created_at: pr.created_at,
    }
}

/// An issue's PRs, oldest first.
pub(crate) fn prs_of(c: &Conn<'_>, issue_id: &str) -> Result<Vec<PullRequestSummary>> {
    let mut stmt = c.prepare(&format!(
        "{PR_SQL} WHERE pr.issue_id = ?1 ORDER BY pr.created_at, pr.rowid"
    ))?;
    let rows = stmt
        .query_map([issue_id], pr_from_row)?
        .map(|r| r.map(summary))
        .collect::<crate::error::Result<_>>()?;
    Ok(rows)
}

/// The review decision on an open PR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Review {
    Approve,
    Reject,
}

/// `create_pr` for a piece of work: the spec's precondition first (the worktree is
/// validated before anything is recorded; without `--worktree-path` the check says that
/// nothing was verified), then the PR on the bound issue under the work's actor.
pub(crate) fn create_work_pr(
    store: &Store,
    work: &WorkContext,
    new: &NewPullRequest,
) -> Result<(PullRequest, WorktreeCheck)> {
    let worktree = crate::work::workspace::worktree_check(store, work)?;
    let issue = &work.require_issue()?.id;
    Ok((create_pr(store, issue, new, &work.actor)?, worktree))
}

/// Record a PR for an issue (id or identifier) and move the issue from
/// `in_progress` to review.
pub(crate) fn create_pr(
    store: &Store,
    issue: &str,
    new: &NewPullRequest,
    actor: &str,
) -> Result<PullRequest> {
    let new = &clean_pr(new)?;
    let files = validate(new)?;
    store.write(|tx| {
        let (issue_id, _) = crate::trail::resolve(tx, issue)?;
        let settings: String = tx.query_row(
            "SELECT p.settings FROM projects p JOIN issues i ON i.project_id = p.id
             WHERE i.id = ?1",
            [&issue_id],
            |r| r.get(0),
        )?;
        let (thresholds, globs) =
            risk_settings(&serde_json::from_str(&settings).unwrap_or(Value::Null));
        let risk = risk_score(&files, &new.gate_results, &thresholds, &globs)?;
        // The spec's rule for agents: review only from in_progress (a new PR while
        // in review supersedes the open one).
        match current_status(tx, &issue_id)? {
            Status::Review => {}
            Status::InProgress => {
                set_status_in(
                    tx,
                    &issue_id,
                    Status::Review,
                    Some("pull request created"),
                    actor,
                )?;
            }
            other => {
                return Err(Error::InvalidTransition {
                    from: other.to_string(),
                    to: Status::Review.to_string(),
                    hint: "a PR can be created for an issue in in_progress (it moves to \
                           review) or in review"
                        .into(),
                });
            }
        }
        tx.execute(
            "UPDATE pull_requests SET status = 'superseded' WHERE issue_id = ?1 AND status = 'open'",
            [&issue_id],
        )?;
        let id = new_id("pr");
        let additions: u64 = files.iter().map(|f| f.additions).sum();
        let deletions: u64 = files.iter().map(|f| f.deletions).sum();
        tx.execute(
            "INSERT INTO pull_requests (id, issue_id, status, branch_name, base_branch, diff,
                 files, additions, deletions, gate_results, risk_score, risk_level,
                 risk_factors, created_by, created_at)
             VALUES (?1, ?2, 'open', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                id,
                issue_id,
                new.branch_name,
                new.base_branch,
                new.diff,
                serde_json::to_string(&files)?,
                additions,
                deletions,
                serde_json::to_string(&new.gate_results)?,
                risk.score,
                risk.level,
                serde_json::to_string(&risk.factors)?,
                actor,
                now_iso(),
            ],
        )?;
        load_pr(tx, &id)
    })
}

/// Approve or reject the open PR of an issue (id or identifier). A rejection moves
/// the issue to todo and records a comment with the reason and fix instructions; an
/// approval leaves the issue in review (a person merges) and records a comment too.
pub(crate) fn review_pr(
    store: &Store,
    issue: &str,
    review: Review,
    reason: Option<&str>,
    fix_instructions: Option<&str>,
    actor: &str,
) -> Result<PullRequest> {
    store.write(|tx| {
        let (issue_id, identifier) = crate::trail::resolve(tx, issue)?;
        let pr_id: String = tx
            .query_opt(
                "SELECT id FROM pull_requests WHERE issue_id = ?1 AND status = 'open'
                 ORDER BY created_at DESC, rowid DESC LIMIT 1",
                [&issue_id],
                |r| r.get(0),
            )?
            .ok_or_else(|| {
                Error::not_found(
                    "pull request",
                    format!("open PR of {identifier} (create one with create_pr)"),
                )
            })?;
        let (status, verb) = match review {
            Review::Approve => ("approved", "approved"),
            Review::Reject => ("rejected", "rejected"),
        };
        tx.execute(
            "UPDATE pull_requests SET status = ?2, review_reason = ?3, fix_instructions = ?4,
                 reviewed_by = ?5, reviewed_at = ?6 WHERE id = ?1",
            params![pr_id, status, reason, fix_instructions, actor, now_iso()],
        )?;
        let mut comment = format!("PR {pr_id} {verb}");
        if let Some(r) = reason {
            comment.push_str(&format!(": {r}"));
        }
        if let Some(f) = fix_instructions {
            comment.push_str(&format!("\n\nFix instructions: {f}"));
        }
        add_comment_in(tx, &issue_id, &comment, actor)?;
        if review == Review::Approve {
            crate::trail::approval::issue_approved(tx, &issue_id, actor)?;
        }
        if review == Review::Reject {
            change_status_in(
                tx,
                &issue_id,
                Status::Todo,
                Some(reason.unwrap_or("pull request rejected")),
                actor,
                false,
            )?;
        }
        load_pr(tx, &pr_id)
    })
}

/// PRs, newest first: of one project (id or slug) or of all.
pub(crate) fn pull_requests(store: &Store, project: Option<&str>) -> Result<Vec<PullRequest>> {
    store.read(|c| {
        let project_id = match project {
            Some(p) => Some(
                crate::issues::find_project(c, p)?
                    .ok_or_else(|| Error::ProjectNotFound(p.to_string()))?
                    .id,
            ),
            None => None,
        };
        let mut stmt = c.prepare(&format!(
            "{PR_SQL} WHERE (CAST(?1 AS TEXT) IS NULL OR i.project_id = ?1)
             ORDER BY pr.created_at DESC, pr.rowid DESC"
        ))?;
        let rows = stmt
            .query_map([project_id], |r| {
                pr_from_row(r).map(|mut pr| {
                    pr.diff = None;
                    pr
                })
            })?
            .collect::<crate::error::Result<_>>()?;
        Ok(rows)
    })
}

/// One PR with its diff.
pub(crate) fn pull_request(store: &Store, id: &str) -> Result<PullRequest> {
    store.read(|c| load_pr(c, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "diff --git a/src/a.rs b/src/a.rs
index 1..2 100644
--- a/src/a.rs
+++ b/src/a.rs
@@ -1,3 +1,4 @@
 keep
--- not a header, a removed line starting with --
+++ not a header, an added line
+added
 keep
diff --git a/new.txt b/new.txt
new file mode 100644
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+one
+two
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/old.md b/docs/new.md
similarity index 100%
rename from old.md
rename to docs/new.md
diff --git a/img.png b/img.png
Binary files a/img.png and b/img.png differ
";

    #[test]
    fn parses_git_diff_stats() {
        let files = parse_diff(DIFF);
        let got: Vec<(&str, &str, u64, u64)> = files
            .iter()
            .map(|f| (f.path.as_str(), f.status.as_str(), f.additions, f.deletions))
            .collect();
        assert_eq!(
            got,
            [
                ("src/a.rs", "modified", 2, 1),
                ("new.txt", "added", 2, 0),
                ("gone.txt", "deleted", 0, 1),
                ("docs/new.md", "renamed", 0, 0),
                ("img.png", "binary", 0, 0),
            ]
        );
        assert_eq!(files[3].old_path.as_deref(), Some("old.md"));
    }

    #[test]
    fn parses_plain_unified_diff() {
        let d = "--- a/x.txt\n+++ b/x.txt\n@@ -1 +1 @@\n-a\n+b\n--- y.txt\n+++ y.txt\n@@ -1,0 +1 @@\n+c\n";
        let files = parse_diff(d);
        assert_eq!(files.len(), 2, "{files:?}");
        assert_eq!((files[0].additions, files[0].deletions), (1, 1));
        assert_eq!((files[1].path.as_str(), files[1].additions), ("y.txt", 1));
    }

    fn stat(path: &str, lines: u64) -> FileStat {
        FileStat {
            path: path.into(),
            old_path: None,
            status: "modified".into(),
            additions: lines,
            deletions: 0,
        }
    }

    #[test]
    fn risk_formula() {
        let t = RiskThresholds::default();
        let small = risk_score(&[stat("a.rs", 10)], &[], &t, &[]).unwrap();
        assert_eq!((small.score, small.level.as_str()), (0, "low"));
        // 275 lines = halfway between 50 and 500 → 20; 9 files = halfway 3..15 → 15.
        let files: Vec<FileStat> = (0..9)
            .map(|i| stat(&format!("f{i}.rs"), if i == 0 { 275 } else { 0 }))
            .collect();
        let mid = risk_score(&files, &[], &t, &[]).unwrap();
        assert_eq!((mid.score, mid.level.as_str()), (35, "medium"));
        let globs = vec!["server/database/*".to_string(), ".env*".to_string()];
        let sens = risk_score(&[stat("config/.env.local", 1)], &[], &t, &globs).unwrap();
        assert_eq!(sens.score, 30, "{sens:?}");
        let not = risk_score(&[stat("server/api/x.ts", 1)], &[], &t, &globs).unwrap();
        assert_eq!(not.score, 0);
        let gate = GateResult {
            command: "t".into(),
            label: "Tests".into(),
            exit_code: 1,
            output: String::new(),
            required: true,
        };
        let failing = risk_score(&files, &[gate.clone(), gate], &t, &globs).unwrap();
        assert_eq!((failing.score, failing.level.as_str()), (75, "high"));
    }
}
