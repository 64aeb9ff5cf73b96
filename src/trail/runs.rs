//! Agent runs and their events: `cairn run ingest` records a run from a Claude Code
//! stream-JSON log; `query_run_events` filters and pages the events; `get_issue_status`
//! shows the last runs.
//!
//! ## Ingest (decisions)
//!
//! - One JSON object per line. Blank lines are skipped; a line that is not a JSON object
//!   with a string `type` is *malformed*: counted, its line numbers reported, never fatal.
//! - `assistant` / `user` lines carry `message.content`: each content block becomes one
//!   event whose subtype is the block's `type` (`text`, `thinking`, `tool_use`,
//!   `tool_result`, ...) and whose payload is the block; string content is one `text`
//!   event. Every other line is one event with the line's `subtype` (if any) and the
//!   whole line as payload. Payloads above 64 KiB are stored as
//!   `{"truncated": true, "bytes": n, "preview": "<first 64 KiB>"}`.
//! - The run's id is `--run-id`, else the `session_id` of the log, else a fresh `run_…`.
//! - The outcome, error, cost, duration and turns come from the last `result` event:
//!   outcome = its `subtype` (`success`, `error_max_turns`, ...); error = its `result`
//!   text (or `errors`) when `is_error` is true or the subtype is not `success`. A log
//!   without a `result` event is recorded with outcome `incomplete`.
//! - Ingesting a run id that exists is refused (`ERR_CONFLICT`) unless `replace` is
//!   set, which replaces the run and all its events in one transaction (same issue only).
//!   A run is never stored twice.

use std::io::BufRead;
use std::path::Path;

use crate::store::db::{Conn, params};
use serde::Serialize;
use serde_json::{Value, json};

use crate::base::{new_id, now_iso};
use crate::error::{Error, Result};
use crate::store::Store;

/// Largest payload stored as is, in bytes.
pub(crate) const PAYLOAD_MAX: usize = 64 * 1024;
/// Limits of `query_run_events`.
pub(crate) const QUERY_LIMIT_DEFAULT: u32 = 100;
pub(crate) const QUERY_LIMIT_MAX: u32 = 500;
/// Largest `query_run_events` offset.
pub(crate) const QUERY_OFFSET_MAX: u64 = 100_000_000;
/// Longest run id.
pub(crate) const RUN_ID_MAX: usize = 128;
/// The event types of the spec.
pub(crate) const EVENT_TYPES: [&str; 5] =
    ["system", "assistant", "user", "result", "rate_limit_event"];
/// The event subtypes of the spec.
pub(crate) const EVENT_SUBTYPES: [&str; 5] =
    ["init", "thinking", "text", "tool_use", "tool_result"];

/// Event types of a stream-JSON log.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EventType {
    System,
    Assistant,
    User,
    Result,
    RateLimitEvent,
}

/// Event subtypes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EventSubtype {
    Init,
    Thinking,
    Text,
    ToolUse,
    ToolResult,
}

impl EventType {
    /// The name stored in the log and the database.
    pub(crate) fn as_str(self) -> &'static str {
        EVENT_TYPES[self as usize]
    }
}

impl EventSubtype {
    /// The name stored in the log and the database.
    pub(crate) fn as_str(self) -> &'static str {
        EVENT_SUBTYPES[self as usize]
    }
}

/// One recorded run, in brief.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct RunSummary {
    pub(crate) id: String,
    /// The outcome: `success`, an `error_*` subtype, or `incomplete` (no result event).
    pub(crate) status: String,
    pub(crate) is_error: bool,
    pub(crate) error: Option<String>,
    pub(crate) cost_usd: Option<f64>,
    pub(crate) duration_ms: Option<i64>,
    pub(crate) num_turns: Option<i64>,
    pub(crate) model: Option<String>,
    pub(crate) event_count: u64,
    pub(crate) malformed_lines: u64,
    pub(crate) ingested_at: String,
}

/// What `cairn run ingest` reports.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct IngestReport {
    pub(crate) issue: String,
    pub(crate) run: RunSummary,
    /// Whether an earlier ingest of this run id was replaced.
    pub(crate) replaced: bool,
    /// Line numbers of malformed lines (the first 100).
    pub(crate) malformed_line_numbers: Vec<u64>,
}

/// One event of a run.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct RunEvent {
    pub(crate) run_id: String,
    /// 1-based order within the run.
    pub(crate) seq: u64,
    /// Line of the log it came from.
    pub(crate) line: u64,
    pub(crate) event_type: String,
    pub(crate) event_subtype: Option<String>,
    pub(crate) payload: Value,
}

/// Filters of `query_run_events`. One of `issue` and `run_id` is required.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunEventQuery {
    pub(crate) issue: Option<String>,
    pub(crate) run_id: Option<String>,
    pub(crate) event_type: Option<EventType>,
    pub(crate) event_subtype: Option<EventSubtype>,
    pub(crate) limit: Option<u32>,
    pub(crate) offset: Option<u64>,
}

/// A page of events.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct RunEventPage {
    pub(crate) events: Vec<RunEvent>,
    /// Events matching the filters, over all pages.
    pub(crate) total: u64,
    pub(crate) limit: u32,
    pub(crate) offset: u64,
    /// Whether more events follow this page.
    pub(crate) has_more: bool,
}

struct Parsed {
    events: Vec<(u64, String, Option<String>, Value)>,
    malformed: Vec<u64>,
    malformed_count: u64,
    session_id: Option<String>,
    model: Option<String>,
    result: Option<Value>,
}

fn capped(v: Value) -> Value {
    let text = v.to_string();
    if text.len() <= PAYLOAD_MAX {
        return v;
    }
    let mut cut = PAYLOAD_MAX;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    json!({ "truncated": true, "bytes": text.len(), "preview": &text[..cut] })
}

fn str_field(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(String::from)
}

fn parse_log(reader: impl BufRead) -> std::io::Result<Parsed> {
    let mut p = Parsed {
        events: Vec::new(),
        malformed: Vec::new(),
        malformed_count: 0,
        session_id: None,
        model: None,
        result: None,
    };
    for (i, line) in reader.split(b'\n').enumerate() {
        let line_no = i as u64 + 1;
        let bytes = line?;
        let text = String::from_utf8_lossy(&bytes);
        if text.trim().is_empty() {
            continue;
        }
        let parsed: Option<Value> = serde_json::from_str(text.trim()).ok();
        let Some(v) = parsed.filter(|v| v.get("type").and_then(Value::as_str).is_some()) else {
            p.malformed_count += 1;
            if p.malformed.len() < 100 {
                p.malformed.push(line_no);
            }
            continue;
        };
        let ty: String = str_field(&v, "type")
            .unwrap_or_default()
            .chars()
            .take(64)
            .collect();
        if p.session_id.is_none() {
            p.session_id = str_field(&v, "session_id");
        }
        if p.model.is_none() {
            p.model = str_field(&v, "model");
        }
        let content = v.get("message").and_then(|m| m.get("content"));
        match (ty.as_str(), content) {
            ("assistant" | "user", Some(Value::Array(blocks))) if !blocks.is_empty() => {
                for b in blocks {
                    let sub = str_field(b, "type");
                    p.events.push((line_no, ty.clone(), sub, capped(b.clone())));
                }
            }
            ("assistant" | "user", Some(Value::String(s))) => {
                let block = json!({ "type": "text", "text": s });
                p.events
                    .push((line_no, ty.clone(), Some("text".into()), capped(block)));
            }
            _ => {
                if ty == "result" {
                    p.result = Some(v.clone());
                }
                let sub = str_field(&v, "subtype");
                p.events.push((line_no, ty, sub, capped(v)));
            }
        }
    }
    Ok(p)
}

fn check_run_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= RUN_ID_MAX
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "run_id",
            format!("a run id is 1-{RUN_ID_MAX} characters of A-Z, a-z, 0-9, '-', '_', '.', ':'"),
        ))
    }
}

fn run_from_row(r: &crate::store::db::Row) -> crate::error::Result<RunSummary> {
    Ok(RunSummary {
        id: r.get("id")?,
        status: r.get("outcome")?,
        is_error: r.get("is_error")?,
        error: r.get("error")?,
        cost_usd: r.get("cost_usd")?,
        duration_ms: r.get("duration_ms")?,
        num_turns: r.get("num_turns")?,
        model: r.get("model")?,
        event_count: r.get("event_count")?,
        malformed_lines: r.get("malformed_lines")?,
        ingested_at: r.get("ingested_at")?,
    })
}

/// The last `n` runs of an issue, newest first.
pub(crate) fn recent_runs_in(c: &Conn<'_>, issue_id: &str, n: usize) -> Result<Vec<RunSummary>> {
    let mut stmt = c.prepare(
        "SELECT * FROM runs WHERE issue_id = ?1 ORDER BY ingested_at DESC, rowid DESC LIMIT ?2",
    )?;
    let limit = i64::try_from(n).unwrap_or(i64::MAX);
    let rows = stmt
        .query_map(params![issue_id, limit], run_from_row)?
        .collect::<crate::error::Result<_>>()?;
    Ok(rows)
}

/// Record an agent run of an issue (id or identifier) from a stream-JSON log.
pub(crate) fn ingest_run(
    store: &Store,
    issue: &str,
    run_id: Option<&str>,
    log: &Path,
    replace: bool,
) -> Result<IngestReport> {
    if let Some(id) = run_id {
        check_run_id(id)?;
    }
    let file = std::fs::File::open(log).map_err(|e| Error::io(log, e))?;
    let parsed = parse_log(std::io::BufReader::new(file)).map_err(|e| Error::io(log, e))?;
    let run_id = match run_id {
        Some(id) => id.to_string(),
        None => match &parsed.session_id {
            Some(s) if check_run_id(s).is_ok() => s.clone(),
            _ => new_id("run"),
        },
    };
    let result = parsed.result.clone().unwrap_or(Value::Null);
    let RunOutcome {
        outcome,
        failed,
        error,
    } = RunOutcome::of(&parsed);
    let source = log.display().to_string();
    store.write(|tx| {
        let (issue_id, identifier) = super::resolve(tx, issue)?;
        let replaced = remove_earlier(tx, &run_id, &issue_id, replace)?;
        tx.execute(
            "INSERT INTO runs (id, issue_id, outcome, is_error, error, cost_usd, duration_ms,
                 num_turns, session_id, model, event_count, malformed_lines, source, ingested_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                run_id,
                issue_id,
                outcome,
                failed,
                error,
                result.get("total_cost_usd").and_then(Value::as_f64),
                result.get("duration_ms").and_then(Value::as_i64),
                result.get("num_turns").and_then(Value::as_i64),
                parsed.session_id,
                parsed.model,
                parsed.events.len() as i64,
                parsed.malformed_count as i64,
                source,
                now_iso(),
            ],
        )?;
        insert_events(tx, &run_id, &parsed.events)?;
        let run = tx.query_row("SELECT * FROM runs WHERE id = ?1", [&run_id], run_from_row)?;
        Ok(IngestReport {
            issue: identifier,
            run,
            replaced,
            malformed_line_numbers: parsed.malformed.clone(),
        })
    })
}

/// How a run ended, from its log's `result` line.
struct RunOutcome {
    /// The result's subtype; `error` or `success` without one; `incomplete` without a
    /// result.
    outcome: String,
    failed: bool,
    /// What went wrong (at most 4000 characters), when it failed.
    error: Option<String>,
}

impl RunOutcome {
    fn of(parsed: &Parsed) -> RunOutcome {
        let result = parsed.result.clone().unwrap_or(Value::Null);
        let subtype = str_field(&result, "subtype");
        let is_error = result
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let outcome = match (&parsed.result, subtype) {
            (None, _) => "incomplete".to_string(),
            (Some(_), Some(s)) => s,
            (Some(_), None) if is_error => "error".to_string(),
            (Some(_), None) => "success".to_string(),
        };
        let failed = is_error || (parsed.result.is_some() && outcome != "success");
        let error = failed
            .then(|| {
                str_field(&result, "result")
                    .or_else(|| result.get("errors").map(Value::to_string))
                    .or_else(|| Some(outcome.clone()))
            })
            .flatten()
            .map(|e| e.chars().take(4000).collect::<String>());
        RunOutcome {
            outcome,
            failed,
            error,
        }
    }
}

/// A run already ingested with this id: removed with its events when `replace` is
/// given and it is the same issue's (returns true), a conflict otherwise.
fn remove_earlier(tx: &Conn<'_>, run_id: &str, issue_id: &str, replace: bool) -> Result<bool> {
    let existing: Option<String> =
        tx.query_opt("SELECT issue_id FROM runs WHERE id = ?1", [run_id], |r| {
            r.get(0)
        })?;
    match existing {
        None => Ok(false),
        Some(owner) if replace && owner == issue_id => {
            tx.execute("DELETE FROM run_events WHERE run_id = ?1", [run_id])?;
            tx.execute("DELETE FROM runs WHERE id = ?1", [run_id])?;
            Ok(true)
        }
        Some(_) => Err(Error::Conflict {
            message: format!(
                "run {run_id} was already ingested{}; pass --replace to replace \
                 it, or --run-id to record this log as another run",
                if replace { " for another issue" } else { "" }
            ),
            existing_id: Some(run_id.to_string()),
        }),
    }
}

/// The run's events, numbered from 1 in log order.
fn insert_events(
    tx: &Conn<'_>,
    run_id: &str,
    events: &[(u64, String, Option<String>, Value)],
) -> Result<()> {
    let mut stmt = tx.prepare(
        "INSERT INTO run_events (run_id, seq, line, event_type, event_subtype, payload)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for (i, (line, ty, sub, payload)) in events.iter().enumerate() {
        stmt.execute(params![
            run_id,
            i as i64 + 1,
            *line as i64,
            ty,
            sub,
            payload.to_string()
        ])?;
    }
    Ok(())
}

/// Filter and page the events of a run or of every run of an issue.
pub(crate) fn query_run_events(store: &Store, q: &RunEventQuery) -> Result<RunEventPage> {
    if q.issue.is_none() && q.run_id.is_none() {
        return Err(Error::invalid(
            "issue_id",
            "either run_id or issue_id is required",
        ));
    }
    let limit = q
        .limit
        .unwrap_or(QUERY_LIMIT_DEFAULT)
        .clamp(1, QUERY_LIMIT_MAX);
    let offset = q.offset.unwrap_or(0);
    store.read(|c| {
        let issue_id = match &q.issue {
            Some(i) => Some(super::resolve(c, i)?.0),
            None => None,
        };
        if let Some(r) = &q.run_id {
            let owner: Option<String> =
                c.query_opt("SELECT issue_id FROM runs WHERE id = ?1", [r], |row| {
                    row.get(0)
                })?;
            match owner {
                None => return Err(Error::not_found("run", r)),
                Some(o) if issue_id.as_ref().is_some_and(|i| *i != o) => {
                    return Err(Error::invalid(
                        "run_id",
                        format!("run {r} belongs to another issue than issue_id"),
                    ));
                }
                Some(_) => {}
            }
        }
        let filter = "FROM run_events e JOIN runs r ON r.id = e.run_id
             WHERE (CAST(?1 AS TEXT) IS NULL OR r.issue_id = ?1) AND (CAST(?2 AS TEXT) IS NULL OR e.run_id = ?2)
               AND (CAST(?3 AS TEXT) IS NULL OR e.event_type = ?3) AND (CAST(?4 AS TEXT) IS NULL OR e.event_subtype = ?4)";
        let event_type = q.event_type.map(EventType::as_str);
        let event_subtype = q.event_subtype.map(EventSubtype::as_str);
        let args = params![issue_id, q.run_id, event_type, event_subtype];
        let total: u64 = c.query_row(&format!("SELECT count(*) {filter}"), args, |r| r.get(0))?;
        let mut stmt = c.prepare(&format!(
            "SELECT e.* {filter} ORDER BY r.ingested_at, r.rowid, e.seq LIMIT ?5 OFFSET ?6"
        ))?;
        let events: Vec<RunEvent> = stmt
            .query_map(
                params![
                    issue_id,
                    q.run_id,
                    event_type,
                    event_subtype,
                    limit,
                    i64::try_from(offset).unwrap_or(i64::MAX)
                ],
                |r| {
                    let payload: String = r.get("payload")?;
                    Ok(RunEvent {
                        run_id: r.get("run_id")?,
                        seq: r.get("seq")?,
                        line: r.get("line")?,
                        event_type: r.get("event_type")?,
                        event_subtype: r.get("event_subtype")?,
                        payload: serde_json::from_str(&payload).unwrap_or(Value::Null),
                    })
                },
            )?
            .collect::<crate::error::Result<_>>()?;
        Ok(RunEventPage {
            has_more: offset + (events.len() as u64) < total,
            events,
            total,
            limit,
            offset,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stream_json_blocks_and_counts_malformed() {
        let log = r#"{"type":"system","subtype":"init","session_id":"s-1","model":"m"}
{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"hi"},{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}
not json

{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}
[1,2]
{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.5,"result":"done"}
"#;
        let p = parse_log(log.as_bytes()).unwrap();
        let kinds: Vec<(&str, Option<&str>)> = p
            .events
            .iter()
            .map(|e| (e.1.as_str(), e.2.as_deref()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("system", Some("init")),
                ("assistant", Some("thinking")),
                ("assistant", Some("text")),
                ("assistant", Some("tool_use")),
                ("user", Some("tool_result")),
                ("result", Some("success")),
            ]
        );
        assert_eq!(p.malformed, [3, 6]);
        assert_eq!(p.session_id.as_deref(), Some("s-1"));
        assert!(p.result.is_some());
    }

    #[test]
    fn large_payloads_are_capped() {
        let big = json!({ "text": "é".repeat(PAYLOAD_MAX) });
        let c = capped(big);
        assert_eq!(c["truncated"], true);
        assert!(c["preview"].as_str().unwrap().len() <= PAYLOAD_MAX);
    }
}
