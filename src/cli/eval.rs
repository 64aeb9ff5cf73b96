//! `cairn eval ...`: ranking quality on graded sets, with baselines from the same run.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use serde::Serialize;

use crate::eval::learnings::{EvalReport, EvalSet, Figures, Part, SystemReport};
use crate::eval::lifecycle::{LifecycleReport, PairsReport};
use crate::eval::vault::{VaultEvalOptions, render};

use super::{Outcome, print_json, print_text};

#[derive(Debug, Subcommand)]
pub(crate) enum EvalCmd {
    /// Measure `search_learnings` on JSONL sets of learnings and graded queries:
    /// nDCG@10, MRR@10, Recall@5 overall and per category, p50 latency, for Cairn's
    /// blend, BM25 alone, cosine alone and two reciprocal-rank fusions (the blend with
    /// cosine, BM25 with cosine); for each set, whole and per part (tuning, held out). Each
    /// set gets its own temporary database (not --db).
    ///
    /// With --pairs, also the duplicate rule on labelled pairs (precision and recall per
    /// split, beside word-Jaccard and cosine-only rules); with --lifecycle, a timeline set
    /// replayed through merging, superseding and feedback (merge precision and recall,
    /// stale answers, duplicate clutter, MRR with quality from evidence against quality
    /// fixed at 50, lexical-only and dense-only, per split).
    Learnings {
        /// The sets (JSONL; format in docs/learnings.md), each measured on its own. At
        /// least one, unless --pairs or --lifecycle is given.
        #[arg(required_unless_present_any = ["pairs", "lifecycle"], num_args = 1..)]
        sets: Vec<PathBuf>,
        /// Labelled duplicate pairs (tests/eval/learning-pairs.jsonl).
        #[arg(long)]
        pairs: Option<PathBuf>,
        /// The lifecycle timeline set (tests/eval/learnings-lifecycle.jsonl).
        #[arg(long)]
        lifecycle: Option<PathBuf>,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// The rule set that holds a learning's text for a person (docs/security.md, "Memory
    /// poisoning") on a labelled set (tests/eval/instructions.jsonl): precision and
    /// recall per part (tuned on `tune`, `heldout` unseen), and the share of the
    /// learnings of the sets given with --learnings it would hold. Needs no model.
    Holds {
        /// The labelled set (JSONL: id, text, held, part).
        set: PathBuf,
        /// Evaluation sets whose learnings should be served (learnings sets, the
        /// lifecycle set, the pairs set).
        #[arg(long, num_args = 1..)]
        learnings: Vec<PathBuf>,
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
pub(crate) struct VaultEvalArgs {
    /// BEIR `corpus.jsonl` (or a directory holding it), or a directory of documents in
    /// the formats the vault reads (document id = path relative to it).
    #[arg(long)]
    pub(crate) corpus: PathBuf,
    /// BEIR `queries.jsonl` (`_id`, `text`, optional `metadata.category` or `category`).
    #[arg(long)]
    pub(crate) queries: PathBuf,
    /// BEIR qrels TSV (`query-id corpus-id score`, header line first).
    #[arg(long)]
    pub(crate) qrels: PathBuf,
    /// Also run the fused ranking over a grid of lexical weights and caps.
    #[arg(long)]
    pub(crate) sweep: bool,
    /// Index source code in a corpus directory too, as `cairn reindex --code` does.
    #[arg(long)]
    pub(crate) code: bool,
    /// Print the result as JSON, for scripts.
    #[arg(long)]
    pub(crate) json: bool,
}

#[allow(clippy::print_stderr)]
pub(super) fn run(cmd: EvalCmd) -> anyhow::Result<Outcome> {
    match cmd {
        EvalCmd::Learnings {
            sets,
            pairs,
            lifecycle,
            json,
        } => {
            let mut progress = |line: &str| eprintln!("eval learnings: {line}");
            let mut search = Vec::with_capacity(sets.len());
            for set in &sets {
                let name = set
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| set.display().to_string());
                let parsed = EvalSet::load(set)?;
                let mut progress = |line: &str| eprintln!("eval learnings: {name}: {line}");
                search.push(crate::eval::learnings::run(&parsed, &name, &mut progress)?);
            }
            let pairs = match pairs {
                Some(p) => {
                    // The model of a throwaway store: nothing is written to --db.
                    let dir = tempfile::tempdir()?;
                    let cairn = crate::Cairn::open(&dir.path().join("pairs.db"))?;
                    Some(crate::eval::lifecycle::pairs(&cairn, &p, &mut progress)?)
                }
                None => None,
            };
            let lifecycle = match lifecycle {
                Some(l) => Some(crate::eval::lifecycle::lifecycle(&l, &mut progress)?),
                None => None,
            };
            let report = FullReport {
                sets: search,
                pairs,
                lifecycle,
            };
            if json {
                print_json(&report)?;
            } else {
                print_text(&full_table(&report))?;
            }
        }
        EvalCmd::Holds {
            set,
            learnings,
            json,
        } => {
            let paths: Vec<&std::path::Path> = learnings.iter().map(|p| p.as_path()).collect();
            let report = crate::eval::holds::run(&set, &paths)?;
            if json {
                print_json(&report)?;
            } else {
                print_text(&crate::eval::holds::render(&report))?;
            }
        }
        EvalCmd::Vault(a) => {
            let report = crate::eval::vault::run(
                &VaultEvalOptions {
                    corpus: a.corpus,
                    queries: a.queries,
                    qrels: a.qrels,
                    sweep: a.sweep,
                    code: a.code,
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

/// `cairn eval learnings`: the search figures of each set, and the lifecycle's when asked
/// for.
#[derive(Debug, Serialize)]
struct FullReport {
    sets: Vec<EvalReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pairs: Option<PairsReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lifecycle: Option<LifecycleReport>,
}

fn full_table(r: &FullReport) -> String {
    let mut out = String::new();
    for s in &r.sets {
        out.push_str(&learnings_table(s));
        out.push('\n');
    }
    if let Some(p) = &r.pairs {
        let _ = write!(
            out,
            "\nduplicate rule on {} labelled pairs\n\n| split | rule | precision | recall | merged right / wrong / missed |\n|---|---|---|---|---|\n",
            p.pairs
        );
        for (split, rules) in &p.splits {
            for (rule, s) in rules {
                let _ = writeln!(
                    out,
                    "| {split} | {rule} | {:.3} | {:.3} | {} / {} / {} |",
                    s.precision, s.recall, s.merged_right, s.merged_wrong, s.missed
                );
            }
        }
        out.push_str("\nmerged by the rule, per kind (both splits): ");
        let kinds: Vec<String> = p
            .kinds
            .iter()
            .map(|(k, (n, m))| format!("{k} {m}/{n}"))
            .collect();
        out.push_str(&kinds.join(", "));
        out.push('\n');
    }
    if let Some(l) = &r.lifecycle {
        let _ = write!(
            out,
            "\nlifecycle: {} learnings recorded, {} stored; merges precision {:.3} recall {:.3} \
             ({} right, {} wrong, {} missed; near misses merged: {})\n\
             stale answers: {} of {} queries (with include_superseded: {})\n",
            l.learnings,
            l.stored,
            l.merges.precision,
            l.merges.recall,
            l.merges.merged_right,
            l.merges.merged_wrong,
            l.merges.missed,
            l.near_misses_merged,
            l.stale_answers.default_results,
            l.stale_answers.queries,
            l.stale_answers.including_superseded,
        );
        for (split, c) in &l.clutter {
            let _ = writeln!(
                out,
                "duplicate clutter in the top 10, {split}: {} of {} queries (restatements \
                 listed as similar: {}; near misses listed as similar: {}; other learnings \
                 listed as similar: {})",
                c.cluttered,
                c.queries,
                c.grouped_restatements,
                c.grouped_near_misses,
                c.grouped_others
            );
        }
        out.push_str("\n| split | system | nDCG@10 | MRR@10 | R@5 |\n|---|---|---|---|---|\n");
        for (split, systems) in &l.splits {
            for (name, s) in systems {
                let _ = writeln!(
                    out,
                    "| {split} | {name} | {:.3} | {:.3} | {:.3} |",
                    s.ndcg10, s.mrr10, s.recall5
                );
            }
        }
    }
    out
}

/// The report as a Markdown table: one row per system, overall and per category.
fn learnings_table(r: &EvalReport) -> String {
    let mut out = format!(
        "{}: {} learnings, {} queries; semantic: {}\n",
        r.set,
        r.learnings,
        r.queries,
        match &r.semantic_unavailable {
            None => "on".to_string(),
            Some(why) => format!("off ({why})"),
        }
    );
    let parts: Vec<Part> = r
        .systems
        .first()
        .map(|s| s.parts.keys().copied().collect())
        .unwrap_or_default();
    let whole = |s: &SystemReport| {
        Some(Figures {
            overall: s.overall,
            categories: s.categories.clone(),
        })
    };
    if parts.len() != 1 {
        out.push_str(&figures_table("whole set", r, whole));
    }
    for part in parts {
        out.push_str(&figures_table(part.as_str(), r, |s| {
            s.parts.get(&part).cloned()
        }));
    }
    out
}

/// One table: each system's figures on some of a set's queries.
fn figures_table(
    label: &str,
    r: &EvalReport,
    of: impl Fn(&SystemReport) -> Option<Figures>,
) -> String {
    let Some(first) = r.systems.first().and_then(&of) else {
        return String::new();
    };
    let categories: Vec<&String> = first.categories.keys().collect();
    let mut out = format!("\n{label} ({} queries)\n\n", first.overall.queries);
    out.push_str("| system | nDCG@10 | MRR@10 | R@5 | p50 ms |");
    for c in &categories {
        let _ = write!(out, " {c} nDCG / MRR |");
    }
    out.push_str("\n|---|---|---|---|---|");
    out.push_str(&"---|".repeat(categories.len()));
    out.push('\n');
    for s in &r.systems {
        let Some(f) = of(s) else { continue };
        let _ = write!(
            out,
            "| {} | {:.3} | {:.3} | {:.3} | {:.1} |",
            s.system, f.overall.ndcg10, f.overall.mrr10, f.overall.recall5, s.p50_ms
        );
        for c in &categories {
            match f.categories.get(*c) {
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
