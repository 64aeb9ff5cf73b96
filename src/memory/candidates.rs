//! Candidate learnings found in an agent's run log (`cairn run ingest --propose`), held
//! for a person: recorded in `learning_candidates`, which no search, resource or prompt
//! reads, until `cairn learnings candidates accept ID` records one through the
//! learnings' add path (the same gates and merge rule as any learning).
//!
//! ## Where a log shows a lesson
//!
//! A shell command fails (its `tool_result` has `is_error`, or its output says `error`,
//! `failed`, `panicked`, `traceback`); the agent edits files; the same command (its
//! first two words) then succeeds. The lesson is the agent's own explanation: among its
//! text blocks from the failure to the first text after the success, the longest that
//! gives a cause (`because`, `the problem`, `the issue`, `was missing`, `instead of`,
//! ...), cut to the sentences around that cause. A fix the agent did not explain gives
//! no candidate: mined memories are noisy (docs/agents.md gives the share a reader
//! accepts), and a command and a file name alone teach the next agent nothing.

use serde::Serialize;
use serde_json::Value;

use crate::base::{new_id, now_iso};
use crate::error::{Error, Result};
use crate::learnings::limits::{CONTEXT_MAX, CONTEXT_MIN, PATTERN_MAX, PATTERN_MIN};
use crate::learnings::{Added, LearningType, Learnings, NewLearning};
use crate::store::Store;
use crate::store::db::params;

/// Words that mark a text as giving a cause.
const CAUSE_MARKERS: &[&str] = &[
    "because",
    "the problem",
    "the issue",
    "the cause",
    "caused by",
    "the error was",
    "the failure was",
    "was missing",
    "is missing",
    "instead of",
    "needs to",
    "need to",
    "must be",
    "has to be",
    "expects",
    "root cause",
    "turns out",
    "the fix",
];
/// Words that must follow a cause marker in its sentence.
const CAUSE_WORDS: usize = 5;
/// Words in a command's output that mean it failed.
const FAILURE_MARKERS: &[&str] = &["error", "failed", "panicked", "traceback", "exception"];
/// Tools that run shell commands (Claude Code, Codex, Gemini CLI).
const SHELL_TOOLS: &[&str] = &["Bash", "bash", "shell", "exec_command", "run_shell_command"];
/// Tools that change files.
const EDIT_TOOLS: &[&str] = &[
    "Edit",
    "MultiEdit",
    "Write",
    "NotebookEdit",
    "apply_patch",
    "str_replace_based_edit_tool",
    "write_file",
    "replace",
];

/// A candidate learning.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    pub id: String,
    /// Identifier of the run's issue.
    pub issue: String,
    pub run_id: String,
    pub pattern: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The failed command, its error, the files changed, as the log shows them.
    pub evidence: String,
    /// `pending`, `accepted` or `rejected`.
    pub status: String,
    /// The learning it became, once accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learning_id: Option<String>,
    pub created_at: String,
}

/// A lesson found in a log, before it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub pattern: String,
    pub context: Option<String>,
    pub evidence: String,
}

/// One event of a run, as stored.
pub struct Event {
    pub subtype: Option<String>,
    pub payload: Value,
}

/// A failure waiting for its fix.
struct Open {
    command: String,
    error: String,
    edits: Vec<String>,
    texts: Vec<String>,
}

/// The text of a tool result's `content` (a string, or blocks with `text`).
fn result_text(block: &Value) -> String {
    match &block["content"] {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A shell command's first two words: what makes two runs "the same command".
fn command_key(command: &str) -> String {
    command
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

fn failure_line(output: &str) -> Option<String> {
    output
        .lines()
        .find(|l| {
            let l = l.to_lowercase();
            FAILURE_MARKERS.iter().any(|m| l.contains(m))
        })
        .map(|l| l.trim().chars().take(200).collect())
}

/// The sentences of `text`: each ends at `.`, `!` or `?` followed by white space, or
/// at a line break (`self.items` and `0003_orders.sql` stay whole).
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        let end =
            c == '\n' || (matches!(c, '.' | '!' | '?') && next.is_none_or(char::is_whitespace));
        if end {
            out.push(text[start..i + c.len_utf8()].trim());
            start = i + c.len_utf8();
        }
    }
    out.push(text[start..].trim());
    out.retain(|s| !s.is_empty());
    out
}

/// The sentences of `text` around its first cause marker: that sentence, the one before
/// when it is short, and the next.
fn lesson_of(text: &str) -> Option<String> {
    let sentences = sentences(text);
    // A cause says something: at least CAUSE_WORDS words follow its marker ("The
    // problem is clear now." gives none).
    let at = sentences.iter().position(|s| {
        let s = s.to_lowercase();
        CAUSE_MARKERS.iter().any(|m| {
            s.find(m)
                .is_some_and(|i| s[i + m.len()..].split_whitespace().count() >= CAUSE_WORDS)
        })
    })?;
    let from = if at > 0 && sentences[at].len() < PATTERN_MIN {
        at - 1
    } else {
        at
    };
    let to = (at + 2).min(sentences.len());
    let mut lesson = sentences[from..to].join(" ");
    if lesson.len() > PATTERN_MAX / 4 {
        lesson = sentences[from..=at].join(" ");
    }
    let lesson = lesson.trim().to_string();
    (lesson.chars().count() >= PATTERN_MIN && lesson.chars().count() <= PATTERN_MAX)
        .then_some(lesson)
}

/// The lessons of a run's events, in order (see the module docs).
pub fn find(run_id: &str, events: &[Event]) -> Vec<Found> {
    let mut uses: std::collections::HashMap<String, (String, String)> = Default::default();
    let mut open: Option<Open> = None;
    let mut found: Vec<Found> = Vec::new();
    let mut closing: Option<Open> = None;
    for e in events {
        let block = &e.payload;
        match e.subtype.as_deref() {
            Some("text") => {
                let text = block["text"].as_str().unwrap_or_default().to_string();
                if let Some(o) = open.as_mut() {
                    o.texts.push(text);
                } else if let Some(mut o) = closing.take() {
                    // The first text after the success often says what the fix was.
                    o.texts.push(text);
                    found.extend(lesson(run_id, o));
                }
            }
            Some("tool_use") => {
                let name = block["name"].as_str().unwrap_or_default().to_string();
                let input = &block["input"];
                let command = match &input["command"] {
                    Value::String(s) => s.clone(),
                    Value::Array(a) => a
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" "),
                    _ => String::new(),
                };
                if let Some(id) = block["id"].as_str() {
                    uses.insert(id.to_string(), (name.clone(), command));
                }
                if EDIT_TOOLS.contains(&name.as_str())
                    && let Some(o) = open.as_mut()
                {
                    let file = ["file_path", "path", "notebook_path"]
                        .iter()
                        .find_map(|k| input[*k].as_str())
                        .unwrap_or("a file")
                        .to_string();
                    if !o.edits.contains(&file) {
                        o.edits.push(file);
                    }
                }
            }
            Some("tool_result") => {
                let Some((name, command)) = block["tool_use_id"]
                    .as_str()
                    .and_then(|id| uses.get(id))
                    .cloned()
                else {
                    continue;
                };
                if !SHELL_TOOLS.contains(&name.as_str()) || command.is_empty() {
                    continue;
                }
                let output = result_text(block);
                let failed_line = failure_line(&output);
                let failed = block["is_error"].as_bool().unwrap_or(false)
                    || (failed_line.is_some() && !output.contains(" 0 failed"));
                let same = open
                    .as_ref()
                    .is_some_and(|o| command_key(&o.command) == command_key(&command));
                if failed {
                    let error = failed_line
                        .or_else(|| output.lines().next().map(|l| l.chars().take(200).collect()))
                        .unwrap_or_default();
                    match open.as_mut() {
                        Some(o) if same => o.error = error,
                        _ => {
                            open = Some(Open {
                                command,
                                error,
                                edits: Vec::new(),
                                texts: Vec::new(),
                            })
                        }
                    }
                } else if same {
                    let o = open.take().expect("same implies open");
                    if o.edits.is_empty() {
                        continue;
                    }
                    if let Some(prev) = closing.replace(o) {
                        found.extend(lesson(run_id, prev));
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(o) = closing {
        found.extend(lesson(run_id, o));
    }
    let mut seen = std::collections::HashSet::new();
    found.retain(|f| seen.insert(f.pattern.clone()));
    found
}

/// The lesson of a failure and its fix, if the agent explained it.
fn lesson(run_id: &str, o: Open) -> Option<Found> {
    let pattern = o
        .texts
        .iter()
        .filter_map(|t| lesson_of(t))
        .max_by_key(|l| l.len())?;
    let evidence = format!(
        "Run {run_id}: `{}` failed with `{}`; after changes to {} it passed.",
        o.command.chars().take(200).collect::<String>(),
        o.error,
        o.edits.join(", ")
    );
    let n = evidence.chars().count();
    let context = (CONTEXT_MIN..=CONTEXT_MAX)
        .contains(&n)
        .then(|| evidence.clone());
    Some(Found {
        pattern,
        context,
        evidence,
    })
}

const SELECT: &str = "SELECT c.id, i.identifier, c.run_id, c.pattern, c.context, c.evidence,
        c.status, c.learning_id, c.created_at
    FROM learning_candidates c JOIN issues i ON i.id = c.issue_id";

fn from_row(r: &crate::store::db::Row) -> Result<Candidate> {
    Ok(Candidate {
        id: r.get(0)?,
        issue: r.get(1)?,
        run_id: r.get(2)?,
        pattern: r.get(3)?,
        context: r.get(4)?,
        evidence: r.get(5)?,
        status: r.get(6)?,
        learning_id: r.get(7)?,
        created_at: r.get(8)?,
    })
}

/// Find the lessons of a stored run and hold them for a person; the run's candidates
/// (a second call finds the same and adds nothing).
pub(crate) fn propose(store: &Store, run_id: &str) -> Result<Vec<Candidate>> {
    let (issue_id, events) = store.read(|c| {
        let issue_id: String = c
            .query_opt("SELECT issue_id FROM runs WHERE id = ?1", [run_id], |r| {
                r.get(0)
            })?
            .ok_or_else(|| Error::not_found("run", run_id))?;
        let events = c.query_map(
            "SELECT event_subtype, payload FROM run_events WHERE run_id = ?1 ORDER BY seq",
            [run_id],
            |r| {
                let payload: String = r.get(1)?;
                Ok(Event {
                    subtype: r.get(0)?,
                    payload: serde_json::from_str(&payload).unwrap_or(Value::Null),
                })
            },
        )?;
        Ok((issue_id, events))
    })?;
    let found = find(run_id, &events);
    store.write(|tx| {
        for f in &found {
            hold(tx, &issue_id, run_id, f)?;
        }
        Ok(())
    })?;
    let mut held = store.read(|c| {
        c.query_map(
            &format!("{SELECT} WHERE c.run_id = ?1 ORDER BY c.created_at, c.id"),
            [run_id],
            from_row,
        )
    })?;
    // In the log's order (one batch shares its timestamp).
    held.sort_by_key(|c| found.iter().position(|f| f.pattern == c.pattern));
    Ok(held)
}

/// Record a found lesson as held for a person (once per run and text).
///
/// LEAD, after merging `poison` (issue 56): its held state serves the same purpose for
/// learnings whose text is dangerous (kept from every agent until a person releases
/// it). Candidates stay in this table (they are not learnings yet: no gates passed, no
/// merge, no index); accepting one goes through the add path, where poison's hold
/// rules apply like for any learning. Nothing else to wire.
fn hold(tx: &crate::store::db::Conn<'_>, issue_id: &str, run_id: &str, f: &Found) -> Result<()> {
    tx.execute(
        "INSERT INTO learning_candidates(id, issue_id, run_id, pattern, context, evidence,
            created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING",
        params![
            new_id("cand"),
            issue_id,
            run_id,
            f.pattern,
            f.context,
            f.evidence,
            now_iso()
        ],
    )?;
    Ok(())
}

/// Candidates with `status` (every status when `None`), of one project when given,
/// oldest first.
pub(crate) fn list(
    store: &Store,
    status: Option<&str>,
    project: Option<&str>,
) -> Result<Vec<Candidate>> {
    let project_id = match project {
        Some(p) => Some(crate::issues::project(store, p)?.id),
        None => None,
    };
    store.read(|c| {
        c.query_map(
            &format!(
                "{SELECT} WHERE (CAST(?1 AS TEXT) IS NULL OR c.status = ?1)
                   AND (CAST(?2 AS TEXT) IS NULL OR i.project_id = ?2)
                 ORDER BY c.created_at, c.id"
            ),
            params![status, project_id],
            from_row,
        )
    })
}

fn load(store: &Store, id: &str) -> Result<Candidate> {
    store.read(|c| {
        c.query_opt(&format!("{SELECT} WHERE c.id = ?1"), [id], from_row)?
            .ok_or_else(|| Error::not_found("candidate", id))
    })
}

fn pending(store: &Store, id: &str) -> Result<Candidate> {
    let c = load(store, id)?;
    if c.status != "pending" {
        return Err(Error::Conflict {
            message: format!("candidate {id} is already {}", c.status),
            existing_id: c.learning_id.clone(),
        });
    }
    Ok(c)
}

/// A person accepts a candidate (its text, or `pattern` instead): recorded through the
/// learnings' add path on the run's issue, by `actor`.
pub(crate) fn accept(
    l: &Learnings<'_>,
    id: &str,
    pattern: Option<&str>,
    actor: &str,
) -> Result<(Candidate, Added)> {
    let c = pending(l.store, id)?;
    let added = l.add_learning(&NewLearning {
        issue: c.issue.clone(),
        pattern: pattern.unwrap_or(&c.pattern).to_string(),
        context: c.context.clone(),
        applies_to: Vec::new(),
        learning_type: Some(LearningType::Gotcha),
        created_by: actor.to_string(),
        agent_type: "cli".into(),
        merge: true,
        supersedes: Vec::new(),
        // A person accepted this text on the CLI: it is not held for one.
        person: true,
    })?;
    decide(l.store, id, "accepted", Some(&added.learning.id), actor)?;
    Ok((load(l.store, id)?, added))
}

/// A person rejects a candidate: it stays, marked rejected.
pub(crate) fn reject(store: &Store, id: &str, actor: &str) -> Result<Candidate> {
    pending(store, id)?;
    decide(store, id, "rejected", None, actor)?;
    load(store, id)
}

fn decide(
    store: &Store,
    id: &str,
    status: &str,
    learning_id: Option<&str>,
    actor: &str,
) -> Result<()> {
    store.write(|tx| {
        tx.execute(
            "UPDATE learning_candidates SET status = ?2, learning_id = ?3, decided_by = ?4,
                decided_at = ?5
             WHERE id = ?1 AND status = 'pending'",
            params![id, status, learning_id, actor, now_iso()],
        )
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(subtype: &str, payload: Value) -> Event {
        Event {
            subtype: Some(subtype.into()),
            payload,
        }
    }

    #[test]
    fn an_explained_fix_between_a_failure_and_a_passing_rerun_is_a_lesson() {
        let events = vec![
            ev(
                "tool_use",
                json!({"type":"tool_use","id":"a","name":"Bash","input":{"command":"cargo test -p store"}}),
            ),
            ev(
                "tool_result",
                json!({"type":"tool_result","tool_use_id":"a","is_error":true,"content":"running 3 tests\nerror: database is locked\ntest result: FAILED"}),
            ),
            ev(
                "text",
                json!({"type":"text","text":"Let me look at the store."}),
            ),
            ev(
                "text",
                json!({"type":"text","text":"The tests fail because each test opens the same SQLite file without a busy timeout, so concurrent writers get SQLITE_BUSY at once. Setting busy_timeout fixes it."}),
            ),
            ev(
                "tool_use",
                json!({"type":"tool_use","id":"b","name":"Edit","input":{"file_path":"src/store.rs"}}),
            ),
            ev(
                "tool_use",
                json!({"type":"tool_use","id":"c","name":"Bash","input":{"command":"cargo test -p store --quiet"}}),
            ),
            ev(
                "tool_result",
                json!({"type":"tool_result","tool_use_id":"c","content":"test result: ok. 3 passed; 0 failed"}),
            ),
        ];
        let found = find("r1", &events);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0]
                .pattern
                .starts_with("The tests fail because each test opens")
        );
        assert!(found[0].evidence.contains("database is locked"));
        assert!(found[0].evidence.contains("src/store.rs"));
    }

    #[test]
    fn no_lesson_without_an_edit_a_passing_rerun_or_an_explanation() {
        let fail = |id: &str| {
            vec![
                ev(
                    "tool_use",
                    json!({"type":"tool_use","id":id,"name":"Bash","input":{"command":"pnpm test"}}),
                ),
                ev(
                    "tool_result",
                    json!({"type":"tool_result","tool_use_id":id,"is_error":true,"content":"Error: expected 2 got 3"}),
                ),
            ]
        };
        // Rerun passes without an edit (a flaky test).
        let mut flaky = fail("a");
        flaky.push(ev("text", json!({"type":"text","text":"It failed because of a flaky timer; rerunning it should be enough for now."})));
        flaky.push(ev(
            "tool_use",
            json!({"type":"tool_use","id":"b","name":"Bash","input":{"command":"pnpm test"}}),
        ));
        flaky.push(ev(
            "tool_result",
            json!({"type":"tool_result","tool_use_id":"b","content":"ok"}),
        ));
        assert!(find("r", &flaky).is_empty());
        // Edit and pass, but nothing explained.
        let mut silent = fail("a");
        silent.push(ev(
            "tool_use",
            json!({"type":"tool_use","id":"e","name":"Edit","input":{"file_path":"x.ts"}}),
        ));
        silent.push(ev(
            "tool_use",
            json!({"type":"tool_use","id":"b","name":"Bash","input":{"command":"pnpm test"}}),
        ));
        silent.push(ev(
            "tool_result",
            json!({"type":"tool_result","tool_use_id":"b","content":"ok"}),
        ));
        assert!(find("r", &silent).is_empty());
    }
}
