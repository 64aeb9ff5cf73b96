//! `cairn eval holds`: the rule set that holds instructions for a person
//! (`crate::learnings` "held"; docs/security.md, "Memory poisoning") measured on a
//! labelled set (`tests/eval/instructions.jsonl`: texts a reader must not follow blindly,
//! and realistic lessons that merely mention such things), per part (the rules were
//! tuned on `tune`; `heldout` is the honest figure), and the share of the learnings of
//! other evaluation sets it would hold (false positives on real lessons).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::learnings::held_rules;

/// One labelled text.
#[derive(Debug, Deserialize)]
struct Labelled {
    id: String,
    text: String,
    /// Whether a person should see it before any agent follows it.
    held: bool,
    /// `tune` or `heldout`.
    part: String,
}

/// Precision and recall of the rules on one part.
#[derive(Debug, Default, Serialize)]
pub(crate) struct PartReport {
    pub(crate) texts: usize,
    pub(crate) precision: f64,
    pub(crate) recall: f64,
    pub(crate) held_right: usize,
    /// Lessons held that should have been served (their ids).
    pub(crate) held_wrong: Vec<String>,
    /// Instructions served that should have been held (their ids).
    pub(crate) missed: Vec<String>,
}

/// The share of one evaluation set's learnings the rules would hold.
#[derive(Debug, Serialize)]
pub(crate) struct ShareReport {
    pub(crate) set: String,
    pub(crate) learnings: usize,
    pub(crate) held: usize,
    pub(crate) share: f64,
    /// The keys (or line numbers) of the learnings held, with the rules they matched.
    pub(crate) held_learnings: Vec<(String, Vec<&'static str>)>,
}

#[derive(Debug, Serialize)]
pub(crate) struct HoldsReport {
    pub(crate) parts: BTreeMap<String, PartReport>,
    pub(crate) sets: Vec<ShareReport>,
}

/// Measure the rules on the labelled set at `labelled`, and their share on `sets`.
pub(crate) fn run(labelled: &Path, sets: &[&Path]) -> Result<HoldsReport> {
    let text = read(labelled)?;
    let (rows, errors) = super::jsonl::<Labelled>(&text);
    if !errors.is_empty() {
        return Err(Error::InvalidInput(errors));
    }
    let mut parts: BTreeMap<String, PartReport> = BTreeMap::new();
    for r in &rows {
        let p = parts.entry(r.part.clone()).or_default();
        p.texts += 1;
        let held = !held_rules(&r.text, None).is_empty();
        match (held, r.held) {
            (true, true) => p.held_right += 1,
            (true, false) => p.held_wrong.push(r.id.clone()),
            (false, true) => p.missed.push(r.id.clone()),
            (false, false) => {}
        }
    }
    for p in parts.values_mut() {
        let held = p.held_right + p.held_wrong.len();
        let positives = p.held_right + p.missed.len();
        p.precision = ratio(p.held_right, held);
        p.recall = ratio(p.held_right, positives);
    }
    let mut shares = Vec::with_capacity(sets.len());
    for set in sets {
        shares.push(share(set)?);
    }
    Ok(HoldsReport {
        parts,
        sets: shares,
    })
}

fn ratio(n: usize, d: usize) -> f64 {
    if d == 0 { 1.0 } else { n as f64 / d as f64 }
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::io(path, e))
}

/// The learnings of a JSONL evaluation set: every object with a `pattern` (a set's
/// `learning` lines, the lifecycle's), and the `a` and `b` sides of a pairs set.
fn share(path: &Path) -> Result<ShareReport> {
    let text = read(path)?;
    let (rows, errors) = super::jsonl::<Value>(&text);
    if !errors.is_empty() {
        return Err(Error::InvalidInput(errors));
    }
    let mut learnings = 0;
    let mut held_learnings = Vec::new();
    for (n, row) in rows.iter().enumerate() {
        let sides: Vec<(&Value, String)> = if row.get("pattern").is_some() {
            vec![(row, key(row, n))]
        } else {
            ["a", "b"]
                .into_iter()
                .filter_map(|s| Some((row.get(s)?, format!("{}.{s}", key(row, n)))))
                .collect()
        };
        for (l, k) in sides {
            let Some(pattern) = l.get("pattern").and_then(Value::as_str) else {
                continue;
            };
            learnings += 1;
            let rules = held_rules(pattern, l.get("context").and_then(Value::as_str));
            if !rules.is_empty() {
                held_learnings.push((k, rules));
            }
        }
    }
    Ok(ShareReport {
        set: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string()),
        learnings,
        held: held_learnings.len(),
        share: if learnings == 0 {
            0.0
        } else {
            held_learnings.len() as f64 / learnings as f64
        },
        held_learnings,
    })
}

/// A row's key (`key` or `id`), else its line.
fn key(row: &Value, n: usize) -> String {
    ["key", "id"]
        .into_iter()
        .find_map(|k| row.get(k).and_then(Value::as_str).map(String::from))
        .unwrap_or_else(|| format!("line {}", n + 1))
}

/// The report as text.
pub(crate) fn render(r: &HoldsReport) -> String {
    use std::fmt::Write;
    let mut out = String::from(
        "instructions held for a person\n\n| part | texts | precision | recall | held right | held wrong | missed |\n|---|---|---|---|---|---|---|\n",
    );
    for (part, p) in &r.parts {
        let _ = writeln!(
            out,
            "| {part} | {} | {:.3} | {:.3} | {} | {} {:?} | {} {:?} |",
            p.texts,
            p.precision,
            p.recall,
            p.held_right,
            p.held_wrong.len(),
            p.held_wrong,
            p.missed.len(),
            p.missed
        );
    }
    if !r.sets.is_empty() {
        out.push_str("\nheld among the learnings of other sets\n\n| set | learnings | held | share |\n|---|---|---|---|\n");
        for s in &r.sets {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.3} {:?} |",
                s.set, s.learnings, s.held, s.share, s.held_learnings
            );
        }
    }
    out
}
