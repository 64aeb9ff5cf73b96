//! `cairn eval ...`: ranking quality on graded sets, with baselines from the same run.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::eval::learnings::{EvalReport, EvalSet};
use crate::eval::vault::{VaultEvalOptions, render};

use super::{Outcome, print_json, print_text};

#[derive(Debug, Subcommand)]
pub enum EvalCmd {
    /// Measure `search_learnings` on a JSONL set of learnings and graded queries:
    /// nDCG@10, MRR@10, Recall@5 overall and per category, p50 latency, for Cairn's
    /// blend, BM25 alone and cosine alone. Uses a temporary database (not --db).
    Learnings {
        /// The set (JSONL; format in docs/learnings.md).
        set: PathBuf,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// The Knowledge Vault's ranking on a BEIR-format set (or a Markdown directory),
    /// indexed into a temporary database: nDCG@10, MRR@10, Recall@5 per category, p50
    /// latency, against lexical-only and dense-only rankings.
    Vault(VaultEvalArgs),
}

#[derive(Debug, Args)]
pub struct VaultEvalArgs {
    /// BEIR `corpus.jsonl` (or a directory holding it), or a directory of Markdown files
    /// (document id = path relative to it).
    #[arg(long)]
    pub corpus: PathBuf,
    /// BEIR `queries.jsonl` (`_id`, `text`, optional `metadata.category` or `category`).
    #[arg(long)]
    pub queries: PathBuf,
    /// BEIR qrels TSV (`query-id corpus-id score`, header line first).
    #[arg(long)]
    pub qrels: PathBuf,
    /// Also run the fused ranking over a grid of lexical weights and caps.
    #[arg(long)]
    pub sweep: bool,
    /// Print the result as JSON, for scripts.
    #[arg(long)]
    pub json: bool,
}

#[allow(clippy::print_stderr)]
pub(super) fn run(cmd: EvalCmd) -> anyhow::Result<Outcome> {
    match cmd {
        EvalCmd::Learnings { set, json } => {
            let parsed = EvalSet::load(&set)?;
            let report =
                crate::eval::learnings::run(&parsed, |line| eprintln!("eval learnings: {line}"))?;
            if json {
                print_json(&report)?;
            } else {
                print_text(&learnings_table(&report))?;
            }
        }
        EvalCmd::Vault(a) => {
            let report = crate::eval::vault::run(
                &VaultEvalOptions {
                    corpus: a.corpus,
                    queries: a.queries,
                    qrels: a.qrels,
                    sweep: a.sweep,
                },
                &|m: &str| eprintln!("eval vault: {m}"),
            )?;
            if a.json {
                print_json(&report)?;
            } else {
                print_text(&render(&report))?;
            }
        }
    }
    Ok(Outcome::Done)
}

/// The report as a Markdown table: one row per system, overall and per category.
fn learnings_table(r: &EvalReport) -> String {
    let mut out = format!(
        "{} learnings, {} queries; semantic: {}\n\n",
        r.learnings,
        r.queries,
        match &r.semantic_unavailable {
            None => "on".to_string(),
            Some(why) => format!("off ({why})"),
        }
    );
    let categories: Vec<&String> = r
        .systems
        .first()
        .map(|s| s.categories.keys().collect())
        .unwrap_or_default();
    out.push_str("| system | nDCG@10 | MRR@10 | R@5 | p50 ms |");
    for c in &categories {
        let _ = write!(out, " {c} nDCG / MRR |");
    }
    out.push_str("\n|---|---|---|---|---|");
    out.push_str(&"---|".repeat(categories.len()));
    out.push('\n');
    for s in &r.systems {
        let _ = write!(
            out,
            "| {} | {:.3} | {:.3} | {:.3} | {:.1} |",
            s.system, s.overall.ndcg10, s.overall.mrr10, s.overall.recall5, s.p50_ms
        );
        for c in &categories {
            match s.categories.get(*c) {
                Some(x) => {
                    let _ = write!(out, " {:.3} / {:.3} |", x.ndcg10, x.mrr10);
                }
                None => out.push_str(" |"),
            }
        }
        out.push('\n');
    }
    out
}
