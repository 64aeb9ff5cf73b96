//! `cairn eval`: ranking quality on graded query sets, with baselines in the same run.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::eval::vault::{VaultEvalOptions, render, run};

use super::{print_json, print_text};

#[derive(Debug, Subcommand)]
pub enum EvalCmd {
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
    #[arg(long)]
    pub json: bool,
}

pub fn run_cmd(cmd: EvalCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        EvalCmd::Vault(a) => {
            #[allow(clippy::print_stderr)]
            let progress = |m: &str| eprintln!("{m}");
            let report = run(
                &VaultEvalOptions {
                    corpus: a.corpus,
                    queries: a.queries,
                    qrels: a.qrels,
                    sweep: a.sweep,
                },
                &progress,
            )?;
            if a.json {
                print_json(&report)?;
            } else {
                print_text(&render(&report))?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
