//! `cairn learnings ...`: record, search, inspect, verify, rate, reindex.

use clap::Subcommand;

use crate::Cairn;
use crate::learnings::{
    Learning, LearningDetail, LearningSearch, LearningType, NewLearning, SearchScope,
};

use super::{Outcome, print_json, print_text};

/// Who CLI changes are attributed to.
const ACTOR: &str = "cli";

#[derive(Debug, Subcommand)]
pub enum LearningsCmd {
    /// Record a learning on an issue; prints its id.
    Add {
        /// Issue identifier or id.
        #[arg(long)]
        issue: String,
        /// The lesson, starting with its subject (at least 50 characters).
        #[arg(long)]
        pattern: String,
        /// When and where it applies (at least 100 characters).
        #[arg(long)]
        context: Option<String>,
        /// A relative path prefix it applies to; repeat for more.
        #[arg(long = "applies-to")]
        applies_to: Vec<String>,
        /// convention, gotcha or pattern (default pattern).
        #[arg(long = "type", value_parser = parse_type)]
        learning_type: Option<LearningType>,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Search learnings (all projects unless --project is given).
    Search {
        query: String,
        /// Project slug or id to search in.
        #[arg(long)]
        project: Option<String>,
        /// Search every project except --project.
        #[arg(long, requires = "project")]
        cross_project: bool,
        /// Max results (1-100, default 50).
        #[arg(long)]
        limit: Option<usize>,
        /// Leave out learnings below this quality; verified ones always pass.
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=100))]
        min_quality: Option<u8>,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Show a learning and its history.
    Show {
        id: String,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Mark a learning verified (recorded in its history).
    Verify {
        id: String,
        /// Why, recorded in the learning's history.
        #[arg(long)]
        note: Option<String>,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Set a learning's quality score, 0-100 (recorded in its history).
    Rate {
        id: String,
        #[arg(value_parser = clap::value_parser!(u8).range(0..=100))]
        score: u8,
        /// Why, recorded in the learning's history.
        #[arg(long)]
        note: Option<String>,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Rebuild the search index from the database.
    Reindex {
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
}

fn parse_type(s: &str) -> Result<LearningType, String> {
    LearningType::parse(s).ok_or_else(|| {
        format!(
            "unknown learning type {s:?}; one of: {}",
            LearningType::ALL.map(|t| t.as_str()).join(", ")
        )
    })
}

fn summary(l: &Learning) -> String {
    format!(
        "{}\t{}\tq{}{}\t{}\t{}",
        l.id,
        l.issue,
        l.quality_score,
        if l.verified { " verified" } else { "" },
        l.learning_type.as_str(),
        l.pattern
    )
}

fn detail(d: &LearningDetail) -> String {
    let l = &d.learning;
    let mut s = format!(
        "{}  {} ({})  {}  quality {}{}\n{}\n",
        l.id,
        l.issue,
        l.project,
        l.learning_type.as_str(),
        l.quality_score,
        if l.verified { ", verified" } else { "" },
        l.pattern
    );
    if let Some(c) = &l.context {
        s.push_str(&format!("\n{c}\n"));
    }
    if !l.applies_to.is_empty() {
        s.push_str(&format!("\napplies to: {}\n", l.applies_to.join(", ")));
    }
    s.push_str("\nhistory:\n");
    for h in &d.history {
        s.push_str(&format!(
            "  {}  {}  {}  quality {}{}{}\n",
            h.at,
            h.event,
            h.actor,
            h.quality_after,
            if h.verified_after { ", verified" } else { "" },
            h.note
                .as_deref()
                .map(|n| format!("  ({n})"))
                .unwrap_or_default()
        ));
    }
    s
}

fn show(l: &Learning, json: bool) -> anyhow::Result<()> {
    if json {
        print_json(l)
    } else {
        print_text(&summary(l))
    }
}

pub(super) fn run(cairn: &Cairn, cmd: LearningsCmd) -> anyhow::Result<Outcome> {
    match cmd {
        LearningsCmd::Add {
            issue,
            pattern,
            context,
            applies_to,
            learning_type,
            json,
        } => {
            let l = cairn.add_learning(&NewLearning {
                issue,
                pattern,
                context,
                applies_to,
                learning_type,
                created_by: ACTOR.to_string(),
            })?;
            if json {
                print_json(&l)?;
            } else {
                print_text(&l.id)?;
            }
        }
        LearningsCmd::Search {
            query,
            project,
            cross_project,
            limit,
            min_quality,
            json,
        } => {
            let scope = match project {
                Some(p) if cross_project => SearchScope::OtherProjects(p),
                Some(p) => SearchScope::Project(p),
                None => SearchScope::All,
            };
            let r = cairn.search_learnings(&LearningSearch {
                query,
                scope,
                limit,
                min_quality_score: min_quality,
            })?;
            if json {
                print_json(&r)?;
            } else {
                let lines: Vec<String> = r
                    .results
                    .iter()
                    .map(|h| format!("{:.3}\t{}", h.score.total, summary(&h.learning)))
                    .collect();
                print_text(&lines.join("\n"))?;
            }
        }
        LearningsCmd::Show { id, json } => {
            let d = cairn.learning(&id)?;
            if json {
                print_json(&d)?;
            } else {
                print_text(&detail(&d))?;
            }
        }
        LearningsCmd::Verify { id, note, json } => {
            show(&cairn.verify_learning(&id, ACTOR, note.as_deref())?, json)?
        }
        LearningsCmd::Rate {
            id,
            score,
            note,
            json,
        } => show(
            &cairn.rate_learning(&id, score, ACTOR, note.as_deref())?,
            json,
        )?,
        LearningsCmd::Reindex { json } => {
            let r = cairn.reindex_learnings()?;
            if json {
                print_json(&r)?;
            } else {
                let semantic = match &r.semantic_unavailable {
                    None => format!("embedded {} that had no embedding", r.embedded),
                    Some(why) => format!("no embeddings: {why}"),
                };
                print_text(&format!(
                    "indexed {} learnings in {} ms; {semantic}",
                    r.learnings, r.millis
                ))?;
            }
        }
    }
    Ok(Outcome::Done)
}
