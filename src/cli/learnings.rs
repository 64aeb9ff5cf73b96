//! `cairn learnings ...`: record, search, inspect, supersede (and undo), give feedback,
//! verify, rate, review what waits for a person (held learnings, supersession
//! proposals, flagged ones), release, reindex. The CLI is a person's tool: its
//! supersessions take effect at once and its text is not held.

use clap::{Args, Subcommand};

use crate::Cairn;
use crate::learnings::{
    Learning, LearningDetail, LearningSearch, LearningType, NewFeedback, NewLearning,
    Outcome as Verdict, ReviewQueue, SearchScope, Trust,
};

use super::{Outcome, print_json, print_text};

/// Who CLI changes are attributed to.
const ACTOR: &str = "cli";

#[derive(Debug, Subcommand)]
pub(crate) enum LearningsCmd {
    /// Record a learning on an issue; prints its id. A learning that says the same as
    /// one of the project is merged into it (prints that id and "merged").
    Add(AddArgs),
    /// Search learnings (all projects unless --project is given).
    Search(SearchArgs),
    /// Show a learning, its supersession chain and its history.
    Show {
        id: String,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// List every change of a learning's state, oldest first (append-only).
    History {
        id: String,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Mark learning OLD as replaced by NEW (same project): OLD leaves default results at
    /// once. Accepts an agent's proposal of the same pair.
    Supersede {
        old: String,
        /// The learning that replaces it.
        #[arg(long)]
        by: String,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Reject an agent's proposal that NEW supersede OLD: both stay as they are.
    Reject {
        old: String,
        /// The proposed successor.
        #[arg(long)]
        by: String,
        /// Why, recorded in both learnings' history.
        #[arg(long)]
        note: Option<String>,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Undo the supersession of OLD: it is back in default results with its history,
    /// confirmations and verdicts; its former successor stays as it is.
    Unsupersede {
        old: String,
        /// Why, recorded in both learnings' history.
        #[arg(long)]
        note: Option<String>,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Release a held learning: every agent is served it from now on.
    Release {
        id: String,
        /// Why, recorded in the learning's history.
        #[arg(long)]
        note: Option<String>,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// What waits for a person: held learnings (with the rules they matched),
    /// supersession proposals (both sides and the evidence), flagged learnings.
    Review {
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Record how a learning did on an issue: helped, not_relevant or wrong (the issue's
    /// latest verdict stands).
    Feedback {
        id: String,
        /// The issue the verdict comes from (identifier or id), of the learning's project.
        #[arg(long)]
        issue: String,
        #[arg(value_parser = parse_outcome)]
        outcome: Verdict,
        /// Why, recorded in the learning's history.
        #[arg(long)]
        note: Option<String>,
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
    /// Flag a learning as wrong: it needs review and is no longer verified, until it is
    /// verified again (recorded in its history).
    Flag {
        id: String,
        /// Why, recorded in the learning's history.
        #[arg(long)]
        note: Option<String>,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Take a learning out of circulation without a successor: it leaves every search
    /// and is never merged into, until restored (recorded in its history).
    Archive {
        id: String,
        /// Why, recorded in the learning's history.
        #[arg(long)]
        note: Option<String>,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Bring an archived learning back into circulation (recorded in its history).
    Restore {
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
    /// Candidate learnings found in run logs (`cairn run ingest --propose`), held for a
    /// person: list them (pending by default), accept or reject one.
    Candidates(super::candidates::CandidatesArgs),
}

// `cairn learnings add` (the variant's doc comment is its help).
#[derive(Debug, Args)]
pub(crate) struct AddArgs {
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
    /// Store it as a new learning even if the project has one that says the same.
    #[arg(long)]
    no_merge: bool,
    /// A learning id this one replaces (same project); repeat for more.
    #[arg(long)]
    supersedes: Vec<String>,
    /// Print the result as JSON, for scripts.
    #[arg(long)]
    json: bool,
}

// `cairn learnings search` (the variant's doc comment is its help).
#[derive(Debug, Args)]
pub(crate) struct SearchArgs {
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
    /// Include superseded learnings (marked with their successor).
    #[arg(long)]
    include_superseded: bool,
    /// Include archived and held learnings (marked with when they were archived, or
    /// trust held).
    #[arg(long)]
    include_archived: bool,
    /// Leave out learnings below this trust level: held, flagged, agent, confirmed,
    /// verified.
    #[arg(long, value_parser = parse_trust)]
    min_trust: Option<Trust>,
    /// Print the result as JSON, for scripts.
    #[arg(long)]
    json: bool,
}

fn parse_type(s: &str) -> Result<LearningType, String> {
    LearningType::parse(s).ok_or_else(|| {
        format!(
            "unknown learning type {s:?}; one of: {}",
            LearningType::ALL.map(|t| t.as_str()).join(", ")
        )
    })
}

fn parse_trust(s: &str) -> Result<Trust, String> {
    Trust::parse(s).ok_or_else(|| {
        format!(
            "unknown trust level {s:?}; one of: {}",
            Trust::ALL.map(|t| t.as_str()).join(", ")
        )
    })
}

fn parse_outcome(s: &str) -> Result<Verdict, String> {
    Verdict::parse(s).ok_or_else(|| {
        format!(
            "unknown outcome {s:?}; one of: {}",
            Verdict::ALL.map(|o| o.as_str()).join(", ")
        )
    })
}

/// The marks of a learning's state: trust, stale, superseded, archived, proposals.
fn marks(l: &Learning) -> String {
    let mut m = format!(" {}", l.trust.as_str());
    if !l.held_rules.is_empty() {
        m.push_str(&format!(":{}", l.held_rules.join(",")));
    }
    if l.stale {
        m.push_str(" stale");
    }
    if let Some(by) = &l.superseded_by {
        m.push_str(&format!(" superseded-by:{by}"));
    }
    if l.archived_at.is_some() {
        m.push_str(" archived");
    }
    for old in &l.proposed_supersedes {
        m.push_str(&format!(" proposes-to-supersede:{old}"));
    }
    for new in &l.proposed_successors {
        m.push_str(&format!(" proposed-successor:{new}"));
    }
    m
}

/// The review queue as text: one line per entry, a proposal as its two sides.
fn review(q: &ReviewQueue) -> String {
    let mut s = format!("held ({}):\n", q.held.len());
    for l in &q.held {
        s.push_str(&format!("  {}\n", summary(l)));
    }
    s.push_str(&format!(
        "proposed supersessions ({}):\n",
        q.proposals.len()
    ));
    for p in &q.proposals {
        s.push_str(&format!(
            "  {} by {} ({}, {})\n    old  {}\n    new  {}  (helped {}, confirmations {}, wrong {})\n",
            p.old.id,
            p.new.id,
            p.issue,
            p.at,
            summary(&p.old),
            summary(&p.new),
            p.new.feedback.helped,
            p.new.confirmations,
            p.new.feedback.wrong
        ));
    }
    s.push_str(&format!("flagged ({}):\n", q.flagged.len()));
    for l in &q.flagged {
        s.push_str(&format!("  {}\n", summary(l)));
    }
    s
}

fn summary(l: &Learning) -> String {
    format!(
        "{}\t{}\tq{}{}\t{}\t{}",
        l.id,
        l.issue,
        l.quality_score,
        marks(l),
        l.learning_type.as_str(),
        l.pattern
    )
}

fn history(d: &LearningDetail) -> String {
    let mut s = String::new();
    for h in &d.history {
        let from = [
            h.issue.as_deref().map(|i| format!(" issue {i}")),
            h.related.as_deref().map(|r| format!(" {r}")),
        ]
        .into_iter()
        .flatten()
        .collect::<String>();
        s.push_str(&format!(
            "  {}  {}{}  {}  quality {}{}{}\n",
            h.at,
            h.event,
            from,
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

fn detail(d: &LearningDetail) -> String {
    let l = &d.learning;
    let mut s = format!(
        "{}  {} ({})  {}  quality {}{}\n{}\n",
        l.id,
        l.issue,
        l.project,
        l.learning_type.as_str(),
        l.quality_score,
        marks(l),
        l.pattern
    );
    s.push_str(&format!(
        "\nconfirmations {}; feedback: helped {}, not relevant {}, wrong {}\n",
        l.confirmations, l.feedback.helped, l.feedback.not_relevant, l.feedback.wrong
    ));
    if !d.predecessors.is_empty() {
        s.push_str(&format!("supersedes: {}\n", d.predecessors.join(" <- ")));
    }
    if !d.successors.is_empty() {
        s.push_str(&format!("superseded by: {}\n", d.successors.join(" -> ")));
    }
    if let Some(c) = &l.context {
        s.push_str(&format!("\n{c}\n"));
    }
    if !l.applies_to.is_empty() {
        s.push_str(&format!("\napplies to: {}\n", l.applies_to.join(", ")));
    }
    s.push_str("\nhistory:\n");
    s.push_str(&history(d));
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
        LearningsCmd::Add(a) => add(cairn, a)?,
        LearningsCmd::Search(a) => search(cairn, a)?,
        LearningsCmd::Show { id, json } => {
            let d = cairn.learning(&id)?;
            if json {
                print_json(&d)?;
            } else {
                print_text(&detail(&d))?;
            }
        }
        LearningsCmd::History { id, json } => {
            let d = cairn.learning(&id)?;
            if json {
                print_json(&d.history)?;
            } else {
                print_text(history(&d).trim_end())?;
            }
        }
        LearningsCmd::Supersede { old, by, json } => {
            show(&cairn.supersede_learning(&old, &by, ACTOR)?, json)?
        }
        LearningsCmd::Reject {
            old,
            by,
            note,
            json,
        } => show(
            &cairn.reject_supersession(&old, &by, ACTOR, note.as_deref())?,
            json,
        )?,
        LearningsCmd::Unsupersede { old, note, json } => show(
            &cairn.unsupersede_learning(&old, ACTOR, note.as_deref())?,
            json,
        )?,
        LearningsCmd::Release { id, note, json } => {
            show(&cairn.release_learning(&id, ACTOR, note.as_deref())?, json)?
        }
        LearningsCmd::Review { json } => {
            let q = cairn.review_queue()?;
            if json {
                print_json(&q)?;
            } else {
                print_text(review(&q).trim_end())?;
            }
        }
        LearningsCmd::Feedback {
            id,
            issue,
            outcome,
            note,
            json,
        } => show(
            &cairn.learning_feedback(&NewFeedback {
                learning_id: id,
                issue,
                outcome,
                note,
                agent_type: ACTOR.to_string(),
                actor: ACTOR.to_string(),
            })?,
            json,
        )?,
        LearningsCmd::Verify { id, note, json } => {
            show(&cairn.verify_learning(&id, ACTOR, note.as_deref())?, json)?
        }
        LearningsCmd::Flag { id, note, json } => {
            show(&cairn.flag_learning(&id, ACTOR, note.as_deref())?, json)?
        }
        LearningsCmd::Archive { id, note, json } => {
            show(&cairn.archive_learning(&id, ACTOR, note.as_deref())?, json)?
        }
        LearningsCmd::Restore { id, note, json } => {
            show(&cairn.restore_learning(&id, ACTOR, note.as_deref())?, json)?
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
        LearningsCmd::Candidates(a) => return super::candidates::run(cairn, a),
        LearningsCmd::Reindex { json } => reindex(cairn, json)?,
    }
    Ok(Outcome::Done)
}

/// Record a learning as a person: merged into one that says the same unless `--no-merge`.
fn add(cairn: &Cairn, a: AddArgs) -> anyhow::Result<()> {
    let l = cairn.add_learning(&NewLearning {
        issue: a.issue,
        pattern: a.pattern,
        context: a.context,
        applies_to: a.applies_to,
        learning_type: a.learning_type,
        created_by: ACTOR.to_string(),
        agent_type: ACTOR.to_string(),
        merge: !a.no_merge,
        supersedes: a.supersedes,
        person: true,
    })?;
    if a.json {
        print_json(&l)
    } else if l.merged {
        print_text(&format!("{}\tmerged", l.learning.id))
    } else {
        print_text(&l.learning.id)
    }
}

/// Search and print the hits, each with the learnings listed under it indented.
fn search(cairn: &Cairn, a: SearchArgs) -> anyhow::Result<()> {
    let scope = match a.project {
        Some(p) if a.cross_project => SearchScope::OtherProjects(p),
        Some(p) => SearchScope::Project(p),
        None => SearchScope::All,
    };
    let r = cairn.search_learnings(&LearningSearch {
        query: a.query,
        scope,
        limit: a.limit,
        min_quality_score: a.min_quality,
        include_superseded: a.include_superseded,
        include_archived: a.include_archived,
        min_trust: a.min_trust,
    })?;
    if a.json {
        return print_json(&r);
    }
    // A learning listed under a hit is indented, with its similarity.
    let lines: Vec<String> = r
        .results
        .iter()
        .flat_map(|h| {
            std::iter::once(format!("{:.3}\t{}", h.score.total, summary(&h.learning)))
                .chain(
                    h.similar
                        .iter()
                        .map(|s| format!("  ≈ {:.2}\t{}", s.similarity, summary(&s.learning))),
                )
                .chain((h.similar_omitted > 0).then(|| format!("  ≈ {} more", h.similar_omitted)))
        })
        .collect();
    print_text(&lines.join("\n"))
}

/// Rebuild the learnings' search indexes and say what was done.
fn reindex(cairn: &Cairn, json: bool) -> anyhow::Result<()> {
    let r = cairn.reindex_learnings()?;
    if json {
        return print_json(&r);
    }
    let semantic = match &r.semantic_unavailable {
        None => format!("embedded {} that had no embedding", r.embedded),
        Some(why) => format!("no embeddings: {why}"),
    };
    print_text(&format!(
        "indexed {} learnings in {} ms; {semantic}; recorded the ageing of {}",
        r.learnings, r.millis, r.aged
    ))
}
