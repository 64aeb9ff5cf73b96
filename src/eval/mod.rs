//! `cairn eval`: ranking quality measured on graded query sets, with lexical-only and
//! dense-only baselines computed in the same run.
//!
//! - [`metrics`]: nDCG@k, MRR@k, Recall@k over graded relevance judgements, and the
//!   per-category summary every report prints.
//! - [`learnings`]: `cairn eval learnings SET`, the learnings search on a JSONL set.
//! - [`lifecycle`]: `cairn eval learnings --pairs P --lifecycle L`, the duplicate rule on
//!   labelled pairs and the learnings lifecycle replayed on a timeline set.
//! - [`holds`]: `cairn eval holds`, the rule set that holds instructions for a person,
//!   on a labelled set per part, and its share of other sets' learnings.
//! - [`vault`]: `cairn eval vault`, the Knowledge Vault's ranking on a BEIR-format set.

pub(crate) mod holds;
pub(crate) mod learnings;
pub(crate) mod lifecycle;
pub(crate) mod metrics;
pub(crate) mod vault;

use serde::de::DeserializeOwned;

use crate::error::FieldError;

/// The non-blank lines of JSONL `text` parsed as `T`, and a problem per line that does
/// not parse (named `line N`).
pub(crate) fn jsonl<T: DeserializeOwned>(text: &str) -> (Vec<T>, Vec<FieldError>) {
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<T>(line) {
            Ok(row) => rows.push(row),
            Err(e) => errors.push(FieldError::new(format!("line {}", i + 1), e.to_string())),
        }
    }
    (rows, errors)
}
