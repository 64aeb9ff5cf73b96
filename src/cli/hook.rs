//! `cairn hook EVENT`: a session hook of an agent client (Claude Code, Codex, Gemini
//! CLI). Reads the client's JSON on stdin, asks the daemon of `--db` for the learnings
//! that bear on the session or the prompt, and prints what the client adds to the
//! model's context (`agents::hooks` has the contracts). It never breaks the session:
//! past its budget, with no daemon, or on any error it prints nothing, exits 0 and
//! appends why to `$XDG_STATE_HOME/cairn/hooks.log`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;

use crate::agents::hooks::{self, Event, HookClient, Input};
use crate::store::Location;

use super::serve::SessionFlags;
use super::{Outcome, print_text};

/// The largest the hooks' log grows before it is started afresh (the old one kept as
/// `hooks.log.1`).
const LOG_MAX_BYTES: u64 = 1024 * 1024;

fn parse_event(s: &str) -> Result<Event, String> {
    Event::ALL
        .into_iter()
        .find(|e| e.command() == s)
        .ok_or_else(|| {
            let names: Vec<_> = Event::ALL.iter().map(|e| e.command()).collect();
            format!("{s:?} is not a hook event: {}", names.join(", "))
        })
}

#[derive(Debug, Args)]
pub(crate) struct HookArgs {
    /// session-start, user-prompt-submit, pre-compact or stop.
    #[arg(value_parser = parse_event)]
    event: Event,
    /// Whose contract to speak: claude-code, codex or gemini-cli.
    #[arg(long, default_value = "claude-code", value_parser = HookClient::parse)]
    client: HookClient,
    /// The session's binding, as `cairn serve` takes it: the project's learnings are
    /// searched, and the issue's title joins the search.
    #[command(flatten)]
    session: SessionFlags,
    /// How long to wait for the daemon before giving up, in milliseconds.
    #[arg(long, default_value_t = hooks::BUDGET.as_millis() as u64)]
    budget_ms: u64,
}

pub(super) fn run(db: &Location, a: HookArgs) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let budget = Duration::from_millis(a.budget_ms);
    let event = a.event;
    let db = db.clone();
    // The work runs in a thread the budget does not wait for: a daemon that accepts and
    // never answers, or stdin never closed, costs the session the budget and no more.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(answer(&db, &a));
    });
    let outcome = match rx.recv_timeout(budget) {
        Ok(r) => r,
        Err(_) => Err(format!(
            "no answer within the budget of {} ms",
            budget.as_millis()
        )),
    };
    match outcome {
        Ok(Some(text)) => print_text(&text)?,
        Ok(None) => {}
        Err(why) => log(event, &why, started.elapsed()),
    }
    Ok(Outcome::Done)
}

/// What to print, if anything; `Err` says why nothing.
fn answer(db: &Location, a: &HookArgs) -> Result<Option<String>, String> {
    let input = hooks::read_input(std::io::stdin().lock());
    match a.event {
        Event::PreCompact => Ok(hooks::output(a.client, a.event, None, false)),
        Event::Stop => {
            let remind = !input.stop_hook_active
                && input
                    .transcript_path
                    .as_deref()
                    .is_some_and(|p| hooks::worth_a_learning(std::path::Path::new(p)));
            Ok(hooks::output(a.client, a.event, None, remind))
        }
        // After compaction the session starts again without what it learned: it gets
        // the reminder to record, with the learnings if the daemon gives them.
        Event::SessionStart if input.source.as_deref() == Some("compact") => {
            let found = learnings(db, a, &input).unwrap_or_else(|why| {
                log(a.event, &why, Duration::ZERO);
                None
            });
            let context = hooks::after_compaction(found.as_deref());
            Ok(hooks::output(a.client, a.event, Some(&context), false))
        }
        Event::SessionStart | Event::UserPromptSubmit => {
            let context = learnings(db, a, &input)?;
            Ok(context.and_then(|c| hooks::output(a.client, a.event, Some(&c), false)))
        }
    }
}

/// The learnings that bear on the session or prompt, as context lines.
fn learnings(db: &Location, a: &HookArgs, input: &Input) -> Result<Option<String>, String> {
    if a.session.project_id.is_none() && a.session.issue_id.is_none() {
        return Err("no --project-id or --issue-id: no project to search".into());
    }
    let cairn = Arc::new(crate::Cairn::open_at(db).map_err(|e| format!("opening {db}: {e}"))?);
    let title = match &a.session.issue_id {
        Some(i) => Some(cairn.issue(i).map_err(|e| e.to_string())?.title.clone()),
        None => None,
    };
    let Some(query) = hooks::query(a.event, input, title.as_deref()) else {
        return Ok(None);
    };
    let bind = a.session.bind_args();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let args = json!({"query": query, "limit": hooks::HITS});
    let results = rt.block_on(crate::daemon::forward::call_once(
        &cairn,
        &bind,
        "search_learnings",
        args,
    ))?;
    Ok(hooks::context(&results, a.event))
}

/// Append one line to the hooks' log; a log that cannot be written is let go (the hook
/// must still say nothing).
fn log(event: Event, why: &str, took: Duration) {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return;
    };
    let dir = crate::agents::files::state_dir(&home);
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let path = dir.join("hooks.log");
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > LOG_MAX_BYTES) {
        let _ = std::fs::rename(&path, dir.join("hooks.log.1"));
    }
    let line = format!(
        "{} {} gave nothing after {} ms: {}\n",
        crate::base::now_iso(),
        event.command(),
        took.as_millis(),
        why.replace('\n', " ")
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}
