//! `cairn issue ...`

use clap::{Args, Subcommand};

use crate::Cairn;
use crate::issues::{Issue, IssueFilter, Limit, NewIssue, Status};

use super::{Outcome, print_json, print_text};

#[derive(Debug, Subcommand)]
pub(crate) enum IssueCmd {
    /// Create an issue; prints its identifier alone on stdout.
    Create {
        /// Project slug or id.
        #[arg(long)]
        project: String,
        #[command(flatten)]
        text: IssueText,
        /// A label; repeat for more.
        #[arg(long = "label")]
        labels: Vec<String>,
        /// An issue this one depends on; repeat for more.
        #[arg(long = "depends-on")]
        depends_on: Vec<String>,
        /// Initial status (default todo).
        #[arg(long, value_parser = parse_status)]
        status: Option<Status>,
    },
    /// List a project's issues.
    List {
        /// The project (slug or id).
        #[arg(long)]
        project: String,
        /// Only issues with this status; repeat for more.
        #[arg(long = "status", value_parser = parse_status)]
        statuses: Vec<Status>,
        /// Only issues with this label.
        #[arg(long)]
        label: Option<String>,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Show one issue (by identifier or id).
    Show {
        issue: String,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Change an issue's status (the trail vocabulary's transitions; a person may also
    /// set done, cancelled and backlog).
    Status {
        issue: String,
        #[arg(value_parser = parse_status)]
        status: Status,
        /// Why; kept in the status history.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Post a comment on an issue.
    Comment { issue: String, text: String },
    /// Create a sub-task; the parent is blocked until its sub-tasks are done.
    Subtask {
        /// The parent issue.
        parent: String,
        #[command(flatten)]
        text: IssueText,
    },
    /// The issue with its whole trail: findings, comments, status history, PRs, runs.
    /// Always JSON: the whole record is meant for scripts and for reading with jq.
    Trail { issue: String },
    /// Move an issue to another project (as `move_issue`); prints its new identifier.
    Move {
        issue: String,
        /// The destination project (slug or id).
        #[arg(long)]
        to: String,
        /// Why the issue moves (recorded as a comment).
        #[arg(long)]
        reason: String,
        /// Print the result as JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
}

/// Title, description and priority: what every new issue is given.
#[derive(Debug, Args)]
pub(crate) struct IssueText {
    /// The issue's title (one line).
    #[arg(long)]
    title: String,
    /// What the issue is about (Markdown).
    #[arg(long)]
    description: Option<String>,
    /// 1 = urgent, 2 = high, 3 = medium (default), 4 = low.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=4))]
    priority: Option<u8>,
}

impl IssueText {
    fn into_new_issue(self) -> NewIssue {
        NewIssue {
            title: self.title,
            description: self.description,
            priority: self.priority,
            ..Default::default()
        }
    }
}

fn parse_status(s: &str) -> Result<Status, String> {
    Status::parse(s).ok_or_else(|| {
        format!(
            "unknown status {s:?}; one of: {}",
            Status::ALL.map(|s| s.as_str()).join(", ")
        )
    })
}

fn line(i: &Issue) -> String {
    format!(
        "{}\t{}\tP{}\t{}{}",
        i.identifier,
        i.status,
        i.priority,
        i.title,
        if i.labels.is_empty() {
            String::new()
        } else {
            format!("\t[{}]", i.labels.join(", "))
        }
    )
}

pub(super) fn run(cairn: &Cairn, cmd: IssueCmd) -> anyhow::Result<Outcome> {
    match cmd {
        IssueCmd::Create {
            project,
            text,
            labels,
            depends_on,
            status,
        } => {
            let issue = cairn.create_issue(&NewIssue {
                project,
                labels,
                depends_on,
                status,
                ..text.into_new_issue()
            })?;
            print_text(&issue.identifier)?;
        }
        IssueCmd::List {
            project,
            statuses,
            label,
            json,
        } => {
            let issues = cairn.list_issues(&IssueFilter {
                project: Some(project),
                statuses,
                label,
                limit: Limit::All,
            })?;
            if json {
                print_json(&issues)?;
            } else {
                print_text(&issues.iter().map(line).collect::<Vec<_>>().join("\n"))?;
            }
        }
        IssueCmd::Show { issue, json } => {
            let i = cairn.issue(&issue)?;
            if json {
                print_json(&i)?;
            } else {
                let mut s = format!(
                    "{} {}\nstatus: {}  priority: {}  project: {}\n",
                    i.identifier, i.title, i.status, i.priority, i.project_slug
                );
                if !i.labels.is_empty() {
                    s.push_str(&format!("labels: {}\n", i.labels.join(", ")));
                }
                if !i.depends_on.is_empty() {
                    s.push_str(&format!("depends on: {}\n", i.depends_on.join(", ")));
                }
                if let Some(p) = &i.parent {
                    s.push_str(&format!("parent: {p}\n"));
                }
                if !i.description.is_empty() {
                    s.push_str(&format!("\n{}\n", i.description));
                }
                print_text(&s)?;
            }
        }
        IssueCmd::Status {
            issue,
            status,
            reason,
        } => {
            let c = cairn.update_issue_status(&issue, status, reason.as_deref(), "cli", false)?;
            print_text(&format!("{} -> {}", c.from, c.to))?;
        }
        IssueCmd::Comment { issue, text } => {
            print_text(&cairn.add_comment(&issue, &text, "cli")?.id)?;
        }
        IssueCmd::Subtask { parent, text } => {
            print_text(
                &cairn
                    .create_subtask(&parent, text.into_new_issue(), "cli")?
                    .identifier,
            )?;
        }
        IssueCmd::Trail { issue } => print_json(&cairn.issue_details(&issue)?)?,
        IssueCmd::Move {
            issue,
            to,
            reason,
            json,
        } => {
            let moved = cairn.move_issue(&issue, &to, &reason, "cli")?;
            if json {
                print_json(&moved)?;
            } else {
                print_text(&moved.identifier)?;
            }
        }
    }
    Ok(Outcome::Done)
}
