//! Session hooks: what the clients send a hook on stdin, and what a hook prints for them.
//!
//! Claude Code and Codex share one contract (Codex's hooks copy Claude Code's): a JSON
//! object on stdin with `hook_event_name`, `cwd`, `prompt` (UserPromptSubmit), `source`
//! (SessionStart), `stop_hook_active` and `transcript_path` (Stop); on stdout, for
//! SessionStart and UserPromptSubmit, `{"hookSpecificOutput": {"hookEventName",
//! "additionalContext"}}`, which the client adds to the model's context; for Stop,
//! `{"decision": "block", "reason"}`, which sends the reason back to the model once.
//! Gemini CLI names its events SessionStart, BeforeAgent, PreCompress and SessionEnd and
//! reads the same `hookSpecificOutput.additionalContext`.
//!
//! A hook never breaks a session: whatever fails, it prints nothing and exits 0
//! (`cli/hook.rs` logs why).

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

/// How long a hook waits for the daemon before it gives up (printing nothing). Claude
/// Code waits up to the `timeout` connect writes ([`super::clients::HOOK_TIMEOUT_SECONDS`])
/// and the user waits for UserPromptSubmit: well under a second is the aim.
pub const BUDGET: Duration = Duration::from_millis(1500);

/// The largest hook input read (a prompt can be long; the rest is cut).
pub const MAX_INPUT_BYTES: u64 = 1024 * 1024;

/// How much of a transcript's end the Stop hook reads.
const TRANSCRIPT_TAIL_BYTES: u64 = 4 * 1024 * 1024;

/// How many learnings a hook puts in the context.
pub const HITS: usize = 5;

/// The client whose contract a hook speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookClient {
    ClaudeCode,
    Codex,
    GeminiCli,
}

impl HookClient {
    pub fn parse(name: &str) -> Result<HookClient, String> {
        match name {
            "claude-code" | "claude" => Ok(HookClient::ClaudeCode),
            "codex" => Ok(HookClient::Codex),
            "gemini-cli" | "gemini" => Ok(HookClient::GeminiCli),
            _ => Err(format!(
                "{name:?} has no hooks Cairn speaks: claude-code, codex or gemini-cli"
            )),
        }
    }
}

/// A session event, by what it is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The session starts (or resumes, or restarts after compaction).
    SessionStart,
    /// The user sent a prompt.
    UserPromptSubmit,
    /// The context is about to be compacted.
    PreCompact,
    /// The agent is about to stop.
    Stop,
}

impl Event {
    pub const ALL: [Event; 4] = [
        Event::SessionStart,
        Event::UserPromptSubmit,
        Event::PreCompact,
        Event::Stop,
    ];

    /// The `cairn hook` subcommand.
    pub fn command(self) -> &'static str {
        match self {
            Event::SessionStart => "session-start",
            Event::UserPromptSubmit => "user-prompt-submit",
            Event::PreCompact => "pre-compact",
            Event::Stop => "stop",
        }
    }

    /// The event's name in `client`'s configuration and messages.
    pub fn client_name(self, client: HookClient) -> &'static str {
        match (client, self) {
            (HookClient::GeminiCli, Event::UserPromptSubmit) => "BeforeAgent",
            (HookClient::GeminiCli, Event::PreCompact) => "PreCompress",
            (HookClient::GeminiCli, Event::Stop) => "SessionEnd",
            (_, Event::SessionStart) => "SessionStart",
            (_, Event::UserPromptSubmit) => "UserPromptSubmit",
            (_, Event::PreCompact) => "PreCompact",
            (_, Event::Stop) => "Stop",
        }
    }
}

/// What the client said, as far as a hook needs it. Missing or malformed fields are
/// empty: a hook reads what it can.
#[derive(Debug, Clone, Default)]
pub struct Input {
    pub cwd: Option<String>,
    pub prompt: Option<String>,
    pub source: Option<String>,
    pub stop_hook_active: bool,
    pub transcript_path: Option<String>,
}

/// Read the hook input from `reader` (at most [`MAX_INPUT_BYTES`]).
pub fn read_input(reader: impl Read) -> Input {
    let mut bytes = Vec::new();
    let _ = reader.take(MAX_INPUT_BYTES).read_to_end(&mut bytes);
    let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(String::from);
    Input {
        cwd: text("cwd"),
        prompt: text("prompt"),
        source: text("source"),
        stop_hook_active: v.get("stop_hook_active").and_then(Value::as_bool) == Some(true),
        transcript_path: text("transcript_path"),
    }
}

/// The words of the current git branch of `dir` (read from `.git/HEAD`, no process):
/// `fix/login-timeout` gives `login timeout`. `None` outside a branch.
pub fn branch_words(dir: &Path) -> Option<String> {
    let head = std::fs::read_to_string(dir.join(".git/HEAD")).ok()?;
    let branch = head.trim().strip_prefix("ref: refs/heads/")?;
    let words: Vec<&str> = branch
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2 && !w.chars().all(|c| c.is_ascii_digit()))
        .filter(|w| !["fix", "feat", "feature", "bug", "chore", "main", "master"].contains(w))
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// What to search the learnings for at `event`, or `None` when the event needs no search.
/// At session start: the bound issue's title and the branch's words (else the
/// repository's name); at a prompt: its first words.
pub fn query(event: Event, input: &Input, issue_title: Option<&str>) -> Option<String> {
    match event {
        Event::SessionStart => {
            let dir = input.cwd.as_deref().map(Path::new);
            let mut parts: Vec<String> = issue_title.map(String::from).into_iter().collect();
            parts.extend(dir.and_then(branch_words));
            if parts.is_empty() {
                parts.extend(
                    dir.and_then(Path::file_name)
                        .map(|n| n.to_string_lossy().into_owned()),
                );
            }
            let q = parts.join(" ");
            (!q.trim().is_empty()).then(|| cut(&q, 400))
        }
        Event::UserPromptSubmit => {
            let p = input.prompt.as_deref()?.trim();
            // A slash command or a one-word answer ("yes", "continue") is not a topic.
            if p.starts_with('/') || p.split_whitespace().count() < 3 {
                return None;
            }
            Some(cut(p, 400))
        }
        Event::PreCompact | Event::Stop => None,
    }
}

fn cut(s: &str, max_chars: usize) -> String {
    s.chars().take(max_chars).collect()
}

/// The learnings of a `search_learnings` answer as lines for the model's context;
/// `None` when there are none.
pub fn context(results: &Value, event: Event) -> Option<String> {
    let hits = results.get("results")?.as_array()?;
    let mut lines = Vec::new();
    for h in hits.iter().take(HITS) {
        let l = h;
        let Some(pattern) = l.get("pattern").and_then(Value::as_str) else {
            continue;
        };
        let id = l.get("id").and_then(Value::as_str).unwrap_or("?");
        let quality = l.get("quality_score").and_then(Value::as_u64).unwrap_or(0);
        let verified = if l.get("verified").and_then(Value::as_bool) == Some(true) {
            ", verified"
        } else {
            ""
        };
        lines.push(format!(
            "- {} ({id}, quality {quality}{verified})",
            cut(pattern, 400)
        ));
    }
    if lines.is_empty() {
        return None;
    }
    let head = match event {
        Event::SessionStart => {
            "Cairn: learnings this team recorded that may bear on this session (search_learnings for more; learning_feedback on one you use):"
        }
        _ => "Cairn: learnings that may bear on this prompt (learning_feedback on one you use):",
    };
    Some(format!("{head}\n{}", lines.join("\n")))
}

/// The reminder to record before the context is compacted or the session ends.
pub const RECORD_REMINDER: &str = "Cairn: before this context is lost, record what cost effort in this session with add_learning (a pattern that starts with its subject and says what to do, with the context where it applies), and give learning_feedback on the learnings you used.";

/// Whether the transcript's end shows a failed tool call and no learning recorded since:
/// the session fixed something and may have a lesson to record.
pub fn worth_a_learning(transcript: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(transcript) else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    let Ok(mut f) = std::fs::File::open(transcript) else {
        return false;
    };
    use std::io::Seek;
    let start = meta.len().saturating_sub(TRANSCRIPT_TAIL_BYTES);
    if f.seek(std::io::SeekFrom::Start(start)).is_err() {
        return false;
    }
    let mut tail = Vec::new();
    if f.take(TRANSCRIPT_TAIL_BYTES)
        .read_to_end(&mut tail)
        .is_err()
    {
        return false;
    }
    let tail = String::from_utf8_lossy(&tail);
    let last_error = tail.rfind("\"is_error\":true");
    let last_record = tail.rfind("add_learning");
    match (last_error, last_record) {
        (Some(e), Some(r)) => e > r,
        (Some(_), None) => true,
        _ => false,
    }
}

/// What the hook prints on stdout for `client` at `event`, given the context to add (if
/// any) and whether to ask the agent to record before it stops. `None`: nothing.
pub fn output(
    client: HookClient,
    event: Event,
    context: Option<&str>,
    remind: bool,
) -> Option<String> {
    let name = event.client_name(client);
    let v = match event {
        Event::SessionStart | Event::UserPromptSubmit => json!({
            "hookSpecificOutput": {"hookEventName": name, "additionalContext": context?}
        }),
        // Shown to the person; the model gets the reminder from the next SessionStart
        // (source "compact") and from Stop.
        Event::PreCompact => json!({"systemMessage": RECORD_REMINDER}),
        Event::Stop => match (client, remind) {
            (HookClient::ClaudeCode | HookClient::Codex, true) => {
                json!({"decision": "block", "reason": RECORD_REMINDER})
            }
            _ => return None,
        },
    };
    Some(v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_words_leave_out_prefixes_and_numbers() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(
            dir.path().join(".git/HEAD"),
            "ref: refs/heads/fix/1234-login-timeout\n",
        )
        .unwrap();
        assert_eq!(branch_words(dir.path()).as_deref(), Some("login timeout"));
        std::fs::write(dir.path().join(".git/HEAD"), "0123abcd\n").unwrap();
        assert_eq!(branch_words(dir.path()), None);
    }

    #[test]
    fn short_prompts_and_slash_commands_search_nothing() {
        let input = |p: &str| Input {
            prompt: Some(p.into()),
            ..Input::default()
        };
        assert_eq!(query(Event::UserPromptSubmit, &input("yes"), None), None);
        assert_eq!(
            query(Event::UserPromptSubmit, &input("/compact now please"), None),
            None
        );
        assert_eq!(
            query(
                Event::UserPromptSubmit,
                &input("fix the flaky login test"),
                None
            )
            .as_deref(),
            Some("fix the flaky login test")
        );
        assert_eq!(
            query(Event::Stop, &input("fix the flaky login test"), None),
            None
        );
    }

    #[test]
    fn malformed_input_reads_as_empty() {
        let i = read_input(&b"not json"[..]);
        assert!(i.cwd.is_none() && i.prompt.is_none() && !i.stop_hook_active);
        let i = read_input(&br#"{"prompt": 7, "stop_hook_active": "yes", "cwd": "/x"}"#[..]);
        assert_eq!(i.cwd.as_deref(), Some("/x"));
        assert!(i.prompt.is_none() && !i.stop_hook_active);
    }

    #[test]
    fn a_transcript_with_an_error_after_the_last_learning_is_worth_one() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t.jsonl");
        std::fs::write(&t, "{\"is_error\":true}\n").unwrap();
        assert!(worth_a_learning(&t));
        std::fs::write(
            &t,
            "{\"is_error\":true}\n{\"name\":\"mcp__cairn__add_learning\"}\n",
        )
        .unwrap();
        assert!(!worth_a_learning(&t));
        std::fs::write(&t, "{\"ok\":1}\n").unwrap();
        assert!(!worth_a_learning(&t));
        assert!(!worth_a_learning(&dir.path().join("absent")));
    }
}
