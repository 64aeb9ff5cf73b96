//! `cairn eval`: ranking quality measured on graded query sets, with lexical-only and
//! dense-only baselines computed in the same run.
//!
//! - [`metrics`]: nDCG@k, MRR@k, Recall@k over graded relevance judgements, and the
//!   per-category summary every report prints.
//! - [`learnings`]: `cairn eval learnings SET`, the learnings search on a JSONL set.
//! - [`lifecycle`]: `cairn eval learnings --pairs P --lifecycle L`, the duplicate rule on
//!   labelled pairs and the learnings lifecycle replayed on a timeline set.
//! - [`vault`]: `cairn eval vault`, the Knowledge Vault's ranking on a BEIR-format set.

pub mod learnings;
pub mod lifecycle;
pub mod metrics;
pub mod vault;
