//! A tool's answer, serialized once (issue 59).
//!
//! A success reaches the client twice: as `structuredContent` and as the same JSON in a
//! text content. Both come from one serialization of the handler's typed result, its
//! JSON text: the text content is that text, and the transports write the
//! `structuredContent` from it without serializing anything again: the stdio wire
//! ([`super::wire`]) and the daemon's HTTP (its JSON body, or the event of its event
//! stream that holds the answer: `daemon::http`). Only a direct
//! [`super::server::CairnServer::call`], which no transport serializes, gets the answer as
//! a tree, [`Wire::Tree`].
//!
//! The text policy ([`crate::text`]) applies to every answer. Rather than walking the
//! answer's strings, [`may_hide`] scans its JSON text once: where nothing can be hidden
//! (nearly always), the text is the answer; otherwise the answer is cleaned as a tree by
//! [`crate::text::clean_json`] and serialized again from it.
//!
//! The text holds what a `serde_json::Value` of the same result holds, an `f32` written as
//! the `f64` it widens to ([`Widened`]), so the text and a tree agree to the last digit.
//! Its keys come in the order the result type declares them (a tree sorts them: the text
//! of an answer the policy had to clean comes from its cleaned tree).

use std::io;

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::Value;

use crate::metrics::cost::{Unit, Work, count};
use crate::text::{clean_json, hidden_in};

/// What a transport needs of an answer besides its JSON text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    /// The text only: the stdio wire writes `structuredContent` from it
    /// ([`super::wire::Answers`]).
    Text,
    /// The text and the answer as a tree, which rmcp serializes as `structuredContent`.
    Tree,
}

/// A success's answer, serialized and cleaned.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The answer's JSON text.
    text: String,
    /// The answer as a tree, with [`Wire::Tree`].
    tree: Option<Value>,
}

impl Answer {
    /// Serialize `out`, the result of `tool`, once, and clean it by the text policy;
    /// what was removed is logged. Each serialization counts its bytes
    /// ([`Unit::BytesSerialized`]; a tree counts as the text it holds).
    pub(crate) fn of<R: Serialize>(tool: &str, out: &R, wire: Wire) -> serde_json::Result<Answer> {
        let mut text = Vec::with_capacity(1024);
        out.serialize(&mut serde_json::Serializer::with_formatter(
            &mut text, Widened,
        ))?;
        let text =
            String::from_utf8(text).map_err(<serde_json::Error as serde::ser::Error>::custom)?;
        Answer::cleaned(tool, text, wire, &|| serde_json::to_value(out))
    }

    /// [`Answer::of`] once `text` is written; `tree` makes the tree of the same answer.
    fn cleaned(
        tool: &str,
        text: String,
        wire: Wire,
        tree: &dyn Fn() -> serde_json::Result<Value>,
    ) -> serde_json::Result<Answer> {
        count(Unit::BytesSerialized, text.len() as u64);
        if !may_hide(&text) {
            let tree = match wire {
                Wire::Text => None,
                Wire::Tree => Some(counted(tree()?, &text)),
            };
            return Ok(Answer { text, tree });
        }
        let mut cleaned = counted(tree()?, &text);
        let removed = clean_json(&mut cleaned);
        let text = match removed.is_empty() {
            true => text,
            false => {
                tracing::info!(tool, removed = %removed.describe(), "hidden characters removed from an answer (text stored before the text policy, or ingested as logged)");
                let text = cleaned.to_string();
                count(Unit::BytesSerialized, text.len() as u64);
                text
            }
        };
        let tree = (wire == Wire::Tree).then_some(cleaned);
        Ok(Answer { text, tree })
    }

    /// Add `work` to an object answer as `debug.work` (`CAIRN_WORK_DEBUG`).
    pub(crate) fn show_work(&mut self, work: &Work) {
        if !self.text.starts_with('{') {
            return;
        }
        let debug = serde_json::json!({ "work": work });
        // `{…}` becomes `{…,"debug":{…}}`.
        self.text.pop();
        if self.text.len() > 1 {
            self.text.push(',');
        }
        self.text.push_str("\"debug\":");
        self.text.push_str(&debug.to_string());
        self.text.push('}');
        if let Some(Value::Object(answer)) = &mut self.tree {
            answer.insert("debug".into(), debug);
        }
    }

    /// The success as rmcp's result: the text as its text content, and with
    /// [`Wire::Tree`] the tree as its `structuredContent`.
    pub(crate) fn into_result(self) -> CallToolResult {
        let mut result = CallToolResult::success(vec![ContentBlock::text(self.text)]);
        result.structured_content = self.tree;
        result
    }
}

/// `tree`, its serialization counted as the bytes of `text`, the same answer's.
fn counted(tree: Value, text: &str) -> Value {
    count(Unit::BytesSerialized, text.len() as u64);
    tree
}

/// Whether the text policy might remove something from `json` or from a string (or key)
/// in it. Where it says no, [`clean_json`] over the answer would remove nothing, and
/// [`hidden_in`] finds nothing in the text itself (the forwarder's check of a daemon's
/// answer, `daemon::forward`).
///
/// In serde_json's compact output a character the policy removes is either escaped
/// (every C0 control but tab and newline: `\b`, `\f`, `\u00XX`, a `\r` that does not
/// begin `\r\n`, which documents keep) or written as it is: DEL, and the non-ASCII
/// classes, which [`hidden_in`] judges run by run (a run of non-ASCII characters lies
/// between ASCII bytes in the text as in the string, so a joiner keeps or loses its
/// neighbours alike). Other JSON may also hold a raw control character between its
/// tokens (a `\r`): any but tab and newline counts.
///
/// Nearly all of an answer is printable ASCII: the scan passes it [`PLAIN_RUN`] bytes at a
/// time and looks byte by byte only at a run that holds some other byte.
pub(crate) fn may_hide(json: &str) -> bool {
    let bytes = json.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        // Every byte of the run is tested (no early exit), so that the test is a few
        // vector instructions.
        if let Some(run) = bytes[i..].first_chunk::<PLAIN_RUN>()
            && run.iter().fold(true, |plain, &b| {
                plain & (b.wrapping_sub(0x20) < 0x5f) & (b != b'\\')
            })
        {
            i += PLAIN_RUN;
            continue;
        }
        match bytes[i] {
            b'\\' => match bytes.get(i + 1) {
                Some(b'r') if bytes.get(i + 2..i + 4) == Some(b"\\n") => i += 4,
                Some(b'"' | b'\\' | b'/' | b'n' | b't') => i += 2,
                _ => return true,
            },
            0x7f => return true,
            b if b < 0x20 && b != b'\t' && b != b'\n' => return true,
            b if b >= 0x80 => {
                let end = bytes[i..]
                    .iter()
                    .position(u8::is_ascii)
                    .map_or(bytes.len(), |n| i + n);
                if !hidden_in(&json[i..end]).is_empty() {
                    return true;
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    false
}

/// The bytes [`may_hide`] passes at once when none needs a look (printable ASCII, no
/// escape).
const PLAIN_RUN: usize = 16;

/// serde_json's compact format, with an `f32` written as the `f64` it widens to, as a
/// `serde_json::Value` holds it.
struct Widened;

impl serde_json::ser::Formatter for Widened {
    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        self.write_f64(writer, f64::from(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::Removed;
    use serde_json::json;

    /// What the text policy removes from `json`.
    fn removed_from(json: &Value) -> Removed {
        clean_json(&mut json.clone())
    }

    #[derive(Serialize)]
    struct Hit {
        title: String,
        score: f32,
        cosine: f64,
        tags: Vec<&'static str>,
        note: Option<String>,
    }

    #[test]
    fn the_text_holds_what_a_value_of_the_answer_holds_in_the_types_order() {
        let hit = Hit {
            title: "Retry › backoff — \"quoted\"\n\ttab".into(),
            score: 0.812_345_7,
            cosine: 0.1,
            tags: vec!["a", "b"],
            note: None,
        };
        let answer = Answer::of("t", &hit, Wire::Tree).unwrap();
        let value = serde_json::to_value(&hit).unwrap();
        let text: Value = serde_json::from_str(&answer.text).unwrap();
        assert_eq!(text, value, "{}", answer.text);
        // The f32 as the f64 it widens to, as the tree holds it.
        assert!(
            answer.text.contains(&value["score"].to_string()),
            "{}",
            answer.text
        );
        assert!(answer.text.starts_with(r#"{"title":"#), "{}", answer.text);
        assert_eq!(answer.tree.as_ref(), Some(&value));
        assert!(Answer::of("t", &hit, Wire::Text).unwrap().tree.is_none());
    }

    #[test]
    fn the_scan_finds_what_the_policy_would_remove_and_passes_what_it_keeps() {
        let hidden = [
            "bell\u{7}",
            "esc\u{1b}[31mred",
            "lone\rreturn",
            "del\u{7f}",
            "c1\u{85}",
            "bidi\u{202E}",
            "tag\u{E0041}",
            "zero\u{200B}width",
            "soft\u{AD}hyphen",
            "ascii\u{200D}joiner",
            "é\u{200D}",
        ];
        // Anywhere in a long answer: in the runs the scan passes at once, and after them.
        let pad = |n: usize| "p".repeat(n);
        for s in hidden {
            let mut shapes = vec![json!({ "k": s }), json!({ s: 1 }), json!([[s]])];
            for n in 0..2 * PLAIN_RUN + 1 {
                shapes.push(json!({ "k": format!("{}{s}{}", pad(n), pad(2 * PLAIN_RUN)) }));
                shapes.push(json!([pad(n), s]));
            }
            for v in shapes {
                assert!(!removed_from(&v).is_empty(), "{v}");
                assert!(may_hide(&v.to_string()), "{v}");
            }
        }
        // A raw control character between the tokens of JSON from elsewhere.
        assert!(!hidden_in("{\"k\":1}\r").is_empty());
        assert!(may_hide("{\"k\":1}\r"));
        assert!(!may_hide("{\"k\":\t1}\n"));
        let kept = [
            "plain",
            "tab\tand\nnewline",
            "crlf\r\nkept",
            "quote \" and backslash \\ and \\u0041 and \\r text",
            "Retry › backoff — é",
            "👩\u{200D}💻",
            "emoji ✨\u{FE0F}",
        ];
        for s in kept {
            let mut shapes = vec![json!({ "k": s, s: [s] })];
            for n in 0..2 * PLAIN_RUN + 1 {
                shapes.push(json!({ "k": format!("{}{s}{}", pad(n), pad(2 * PLAIN_RUN)) }));
            }
            for v in shapes {
                assert!(removed_from(&v).is_empty(), "{v}");
                assert!(!may_hide(&v.to_string()), "{v}");
            }
        }
    }

    #[test]
    fn hidden_characters_are_removed_from_the_text_and_the_tree() {
        let dirty = json!({"title": "a\u{202E}b", "n": 1});
        for wire in [Wire::Text, Wire::Tree] {
            let answer = Answer::of("t", &dirty, wire).unwrap();
            let text: Value = serde_json::from_str(&answer.text).unwrap();
            assert_eq!(text, json!({"title": "ab", "n": 1}));
            if wire == Wire::Tree {
                assert_eq!(answer.tree, Some(json!({"title": "ab", "n": 1})));
            }
        }
    }

    #[test]
    fn each_serialization_counts_the_answers_bytes() {
        let clean = json!({"title": "ok", "n": 1});
        let size = clean.to_string().len() as u64;
        let (_, text) =
            crate::metrics::cost::measure(|| Answer::of("t", &clean, Wire::Text).unwrap());
        assert_eq!(text.bytes_serialized, size);
        let (_, tree) =
            crate::metrics::cost::measure(|| Answer::of("t", &clean, Wire::Tree).unwrap());
        assert_eq!(tree.bytes_serialized, 2 * size);
    }

    #[test]
    fn the_work_goes_into_an_object_answer_only() {
        let work = Work {
            model_runs: 1,
            ..Work::default()
        };
        for (out, wire) in [(json!({"n": 1}), Wire::Tree), (json!({}), Wire::Text)] {
            let mut answer = Answer::of("t", &out, wire).unwrap();
            answer.show_work(&work);
            let text: Value = serde_json::from_str(&answer.text).unwrap();
            assert_eq!(text["debug"]["work"]["model_runs"], 1, "{text}");
            if let Some(tree) = &answer.tree {
                assert_eq!(tree, &text);
            }
        }
        let mut list = Answer::of("t", &json!([1]), Wire::Text).unwrap();
        list.show_work(&work);
        assert_eq!(list.text, "[1]");
    }
}
