//! The one policy for text an agent writes and a later agent reads.
//!
//! Issue titles and descriptions, findings, comments, PR texts, phase claims and
//! verdicts, thoughts, learnings, memory files and vault chunks are all read back by
//! other agents, so a hidden character stored by one agent is a prompt-injection
//! channel into the next. Every such text goes through [`prose`] (or, for a whole
//! document, [`clean`]) before it is stored — and before it is hashed, where it is
//! hash-chained.
//!
//! ## What is removed, per class
//!
//! | class (`removed_characters` key) | characters |
//! |---|---|
//! | `control` | C0 controls except tab and newline (NUL, BEL, a lone `\r`, ...), DEL, C1 controls (U+0080–U+009F) |
//! | `ansi_escape` | ESC and the whole escape sequence it opens: CSI (`ESC [ ... final`, also U+009B), OSC (`ESC ] ... BEL / ESC \`), two-character `ESC X` |
//! | `bidi` | U+202A–U+202E embeddings and overrides, U+2066–U+2069 isolates, U+200E/U+200F/U+061C marks ("Trojan Source") |
//! | `tag` | U+E0000–U+E007F tag characters ("ASCII smuggling") |
//! | `zero_width` | U+200B, U+2060, U+FEFF (everywhere, a leading BOM too), U+180E; U+200C/U+200D unless between two non-ASCII characters |
//! | `invisible_format` | U+00AD soft hyphen, U+2061–U+2064 invisible operators, U+206A–U+206F, U+FFF9–U+FFFC, Hangul fillers (U+115F, U+1160, U+3164, U+FFA0), U+1D173–U+1D17A, variation selectors U+E0100–U+E01EF |
//!
//! `\r\n` becomes `\n` and is not counted (documents keep it: [`clean_document`]). Zero-width joiner and non-joiner stay
//! between two non-ASCII characters (emoji sequences such as 👩‍💻, Persian and Indic
//! scripts need them); next to ASCII they carry nothing and are removed. Variation
//! selectors U+FE00–U+FE0F stay (emoji presentation). No Unicode normalisation.
//!
//! ## Strip or refuse
//!
//! Prose is cleaned and stored; the tool's result carries `removed_characters` with the
//! count per class (absent when nothing was removed). A field is refused instead when
//! cleaning would change its meaning: prose that is nothing but hidden characters
//! ([`prose`] on text that becomes blank), and identifiers, labels, branch names and
//! paths ([`exact`]), which are never changed silently.
//!
//! ## Reporting
//!
//! The domain functions clean where they store; what they removed is added to the
//! report of the innermost [`collect`] running on the same thread (a tool call runs
//! on one thread from start to end). Outside `collect` nothing is recorded.

use std::cell::RefCell;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, FieldError, Result};

/// Characters removed from a text, per class (see the module table). Zero classes are
/// left out of the JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub(crate) struct Removed {
    /// C0/C1 control characters other than tab and newline.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) control: u64,
    /// Characters of ANSI/terminal escape sequences.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) ansi_escape: u64,
    /// Bidirectional overrides, embeddings, isolates and marks.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) bidi: u64,
    /// Unicode tag characters.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) tag: u64,
    /// Zero-width spaces, joiners, word joiner, BOM.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) zero_width: u64,
    /// Other invisible formatting (soft hyphen, fillers, invisible operators, ...).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) invisible_format: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Removed {
    /// Characters removed in all classes.
    pub(crate) fn total(&self) -> u64 {
        self.control
            + self.ansi_escape
            + self.bidi
            + self.tag
            + self.zero_width
            + self.invisible_format
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// Add `other`'s counts to these.
    pub(crate) fn add(&mut self, other: &Removed) {
        self.control += other.control;
        self.ansi_escape += other.ansi_escape;
        self.bidi += other.bidi;
        self.tag += other.tag;
        self.zero_width += other.zero_width;
        self.invisible_format += other.invisible_format;
    }

    /// `Some(self)` when anything was removed.
    pub(crate) fn non_empty(self) -> Option<Removed> {
        (!self.is_empty()).then_some(self)
    }

    /// "2 control, 1 bidi" for messages.
    pub(crate) fn describe(&self) -> String {
        [
            (self.control, "control"),
            (self.ansi_escape, "ANSI escape"),
            (self.bidi, "bidirectional control"),
            (self.tag, "tag"),
            (self.zero_width, "zero-width"),
            (self.invisible_format, "invisible format"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect::<Vec<_>>()
        .join(", ")
    }
}

/// The class a single character is removed under, if any (escape sequences and the
/// context-dependent joiners are handled by [`clean`]).
fn class_of(c: char) -> Option<fn(&mut Removed) -> &mut u64> {
    Some(match c {
        '\t' | '\n' => return None,
        '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200E}'
        | '\u{200F}'
        | '\u{061C}' => |r| &mut r.bidi,
        '\u{E0000}'..='\u{E007F}' => |r| &mut r.tag,
        '\u{200B}' | '\u{2060}' | '\u{FEFF}' | '\u{180E}' => |r| &mut r.zero_width,
        '\u{00AD}'
        | '\u{2061}'..='\u{2064}'
        | '\u{206A}'..='\u{206F}'
        | '\u{FFF9}'..='\u{FFFC}'
        | '\u{115F}'
        | '\u{1160}'
        | '\u{3164}'
        | '\u{FFA0}'
        | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0100}'..='\u{E01EF}' => |r| &mut r.invisible_format,
        c if c.is_control() => |r| &mut r.control,
        _ => return None,
    })
}

/// Whether a joiner next to `c` is kept: `c` is a visible non-ASCII character.
fn joins(c: Option<char>) -> bool {
    c.is_some_and(|c| !c.is_ascii() && class_of(c).is_none() && !is_joiner(c))
}

fn is_joiner(c: char) -> bool {
    matches!(c, '\u{200C}' | '\u{200D}')
}

/// Clean `text` by the policy; returns the cleaned text and what was removed.
pub(crate) fn clean(text: &str) -> (String, Removed) {
    clean_with(text, false)
}

/// [`clean`] for a whole document whose line spans must stay exact (vault files):
/// CRLF line endings are kept as they are.
pub(crate) fn clean_document(text: &str) -> (String, Removed) {
    clean_with(text, true)
}

/// Whether cleaning `text` might change it (false for most text: nothing to remove).
fn may_change(text: &str) -> bool {
    // ASCII text (most answers' strings) can only hold a control byte to remove; this
    // byte scan spares every answer a char-by-char class lookup (issue 59).
    if text.is_ascii() {
        return text
            .bytes()
            .any(|b| (b < 0x20 && b != b'\t' && b != b'\n') || b == 0x7f);
    }
    text.chars()
        .any(|c| c == '\r' || is_joiner(c) || class_of(c).is_some())
}

/// What [`clean_document`] would remove from `text`, without copying text that has
/// nothing to remove.
pub(crate) fn hidden_in(text: &str) -> Removed {
    match may_change(text) {
        true => clean_document(text).1,
        false => Removed::default(),
    }
}

fn clean_with(text: &str, keep_crlf: bool) -> (String, Removed) {
    let mut removed = Removed::default();
    // Fast path: most text has nothing to remove.
    if !may_change(text) {
        return (text.to_string(), removed);
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\r' if chars.get(i + 1) == Some(&'\n') => {
                if keep_crlf {
                    out.push('\r');
                }
            }
            '\u{1B}' | '\u{9B}' => {
                let end = escape_end(&chars, i);
                removed.ansi_escape += (end - i) as u64;
                i = end;
                continue;
            }
            c if is_joiner(c) => {
                if joins(out.chars().next_back()) && joins(chars.get(i + 1).copied()) {
                    out.push(c);
                } else {
                    removed.zero_width += 1;
                }
            }
            c => match class_of(c) {
                Some(counter) => *counter(&mut removed) += 1,
                None => out.push(c),
            },
        }
        i += 1;
    }
    (out, removed)
}

/// The index just past the escape sequence that starts at `start` (an ESC or a C1 CSI).
fn escape_end(chars: &[char], start: usize) -> usize {
    let csi_body = |mut j: usize| {
        // Parameter and intermediate bytes, then one final byte.
        while j < chars.len() && ('\u{20}'..='\u{3F}').contains(&chars[j]) {
            j += 1;
        }
        if j < chars.len() && ('\u{40}'..='\u{7E}').contains(&chars[j]) {
            j += 1;
        }
        j
    };
    if chars[start] == '\u{9B}' {
        return csi_body(start + 1);
    }
    match chars.get(start + 1) {
        Some('[') => csi_body(start + 2),
        Some(']') => {
            // Operating-system command: up to BEL or ESC \ (string terminator).
            let mut j = start + 2;
            while j < chars.len() {
                match chars[j] {
                    '\u{07}' => return j + 1,
                    '\u{1B}' if chars.get(j + 1) == Some(&'\\') => return j + 2,
                    '\n' => return j,
                    _ => j += 1,
                }
            }
            j
        }
        Some(c) if ('\u{40}'..='\u{5F}').contains(c) => start + 2,
        _ => start + 1,
    }
}

thread_local! {
    static REPORT: RefCell<Option<Removed>> = const { RefCell::new(None) };
}

fn record(removed: &Removed) {
    if removed.is_empty() {
        return;
    }
    REPORT.with(|r| {
        if let Some(total) = r.borrow_mut().as_mut() {
            total.add(removed);
        }
    });
}

/// Run `f` and return, with its result, what the text policy removed while it ran on
/// this thread. Nested calls report to their own caller and to the enclosing one.
pub(crate) fn collect<T>(f: impl FnOnce() -> T) -> (T, Removed) {
    let outer = REPORT.with(|r| r.borrow_mut().replace(Removed::default()));
    // Restore the enclosing report even if `f` panics.
    struct Restore(Option<Option<Removed>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take().flatten();
            REPORT.with(|r| {
                let inner = std::mem::replace(&mut *r.borrow_mut(), outer);
                if let (Some(inner), Some(total)) = (inner, r.borrow_mut().as_mut()) {
                    total.add(&inner);
                }
            });
        }
    }
    let restore = Restore(Some(outer));
    let out = f();
    let mine = REPORT.with(|r| r.borrow().unwrap_or_default());
    drop(restore);
    (out, mine)
}

/// Clean one prose field and record what was removed. Refused when the text had
/// something visible to say and nothing visible is left.
pub(crate) fn prose(field: &str, text: &str) -> Result<String, FieldError> {
    let (out, removed) = clean(text);
    if !removed.is_empty() && out.trim().is_empty() && !text.trim().is_empty() {
        return Err(FieldError::new(
            field,
            format!(
                "consists only of hidden characters ({}); write visible text",
                removed.describe()
            ),
        ));
    }
    record(&removed);
    Ok(out)
}

/// The stricter form for learnings, which every later agent on every issue reads as
/// advice: the `control`, `ansi_escape`, `bidi` and `tag` classes make the call fail
/// (naming the first such character and its 0-based character position) instead of
/// being removed; the invisible classes are removed as by [`prose`].
pub(crate) fn strict(field: &str, text: &str) -> Result<String, FieldError> {
    for (i, c) in text.chars().enumerate() {
        let what = match c {
            '\u{1B}' | '\u{9B}' => "a control character (terminal escape)",
            c => match class_of(c).map(|counter| {
                let mut probe = Removed::default();
                *counter(&mut probe) += 1;
                probe
            }) {
                Some(p) if p.bidi > 0 => "a bidirectional control character",
                Some(p) if p.tag > 0 => "an invisible Unicode tag character",
                Some(p) if p.control > 0 && c != '\r' => "a control character",
                _ => continue,
            },
        };
        return Err(FieldError::new(
            field,
            format!(
                "contains {what} (U+{:04X} at character {i}); remove it — learnings are read by \
                 every later agent and may not hide text",
                c as u32
            ),
        ));
    }
    prose(field, text)
}

/// [`prose`] for an optional field.
pub(crate) fn prose_opt(field: &str, text: Option<&str>) -> Result<Option<String>, FieldError> {
    text.map(|t| prose(field, t)).transpose()
}

/// Clean every string of a JSON value in place (object keys are left alone); a field
/// error names the string's path (`summary`, `gate_results[0].output`).
pub(crate) fn prose_json(path: &str, v: &mut serde_json::Value) -> Result<(), FieldError> {
    use serde_json::Value;
    match v {
        Value::String(s) => *s = prose(if path.is_empty() { "text" } else { path }, s)?,
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                prose_json(&format!("{path}[{i}]"), item)?;
            }
        }
        Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                prose_json(&p, item)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Clean every string of a JSON value in place, object keys included, as documents are
/// cleaned ([`clean_document`]: CRLF kept); returns what was removed. Every answer Cairn
/// sends over MCP passes through it, so text that never went through the policy (stored
/// before it, or ingested as logged, such as run events) reaches no agent with hidden
/// characters, and a forwarder can refuse any answer that still carries some.
pub(crate) fn clean_json(v: &mut serde_json::Value) -> Removed {
    use serde_json::Value;
    let mut removed = Removed::default();
    match v {
        Value::String(s) if may_change(s) => {
            let (out, r) = clean_document(s);
            if !r.is_empty() {
                *s = out;
                removed.add(&r);
            }
        }
        Value::Array(items) => {
            for item in items {
                removed.add(&clean_json(item));
            }
        }
        Value::Object(map) => {
            if map.keys().any(|k| !hidden_in(k).is_empty()) {
                let old = std::mem::take(map);
                for (k, mut item) in old {
                    let (key, r) = clean_document(&k);
                    removed.add(&r);
                    removed.add(&clean_json(&mut item));
                    map.insert(key, item);
                }
            } else {
                for item in map.values_mut() {
                    removed.add(&clean_json(item));
                }
            }
        }
        _ => {}
    }
    removed
}

/// [`prose`] as a one-field [`Error::InvalidInput`].
pub(crate) fn prose_field(field: &str, text: &str) -> Result<String> {
    prose(field, text).map_err(|e| Error::InvalidInput(vec![e]))
}

/// Check an identifier, label, branch name or path: refused if the policy would change
/// it, since a changed name names something else.
pub(crate) fn exact(field: &str, text: &str) -> Result<(), FieldError> {
    let (_, removed) = clean(text);
    if removed.is_empty() {
        return Ok(());
    }
    Err(FieldError::new(
        field,
        format!(
            "contains hidden characters ({}); names, labels and paths are refused rather than \
             changed — remove them",
            removed.describe()
        ),
    ))
}

/// A tool result with what the text policy removed from the caller's text.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Cleaned<T> {
    #[serde(flatten)]
    pub(crate) result: T,
    /// Hidden characters removed from the text you sent, per class; absent when none
    /// were (see docs/security.md, "Stored text").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) removed_characters: Option<Removed>,
}

/// Run a storing operation and report what the text policy removed from its input.
pub(crate) fn cleaned<T>(f: impl FnOnce() -> Result<T>) -> Result<Cleaned<T>> {
    let (out, removed) = collect(f);
    Ok(Cleaned {
        result: out?,
        removed_characters: removed.non_empty(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleaning_twice_removes_nothing_more() {
        // Every string of up to four characters from an alphabet of the policy's edge
        // cases: a cleaned text is a fixed point (a forwarder relies on it).
        let alphabet = [
            'a',
            'é',
            '\u{200D}',
            '\u{200C}',
            '\u{200B}',
            '\u{1B}',
            '[',
            'm',
            ']',
            '\u{07}',
            '\r',
            '\n',
            '\u{202E}',
            '\u{9B}',
            '\u{E0041}',
            '\u{AD}',
            '\\',
        ];
        let n = alphabet.len();
        for len in 1..=4u32 {
            for mut code in 0..n.pow(len) {
                let mut text = String::new();
                for _ in 0..len {
                    text.push(alphabet[code % n]);
                    code /= n;
                }
                let (once, _) = clean_document(&text);
                let (twice, again) = clean_document(&once);
                assert!(again.is_empty(), "{text:?} -> {once:?} -> {twice:?}");
                let (once, _) = clean(&text);
                assert!(clean(&once).1.is_empty(), "{text:?} -> {once:?}");
            }
        }
    }

    #[test]
    fn json_answers_are_cleaned_keys_and_all() {
        let mut v = serde_json::json!({
            "a\u{202E}": ["x\u{1B}[31my", {"k": "line\r\nnext\u{200B}"}],
            "n": 1,
        });
        let removed = clean_json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"a": ["xy", {"k": "line\r\nnext"}], "n": 1})
        );
        assert_eq!(
            (removed.bidi, removed.ansi_escape, removed.zero_width),
            (1, 5, 1)
        );
        assert!(clean_json(&mut v).is_empty());
    }

    #[test]
    fn each_class_is_removed_and_counted() {
        let cases: &[(&str, &str, Removed)] = &[
            (
                "a\0b",
                "ab",
                Removed {
                    control: 1,
                    ..Default::default()
                },
            ),
            (
                "x\u{7F}\u{85}y",
                "xy",
                Removed {
                    control: 2,
                    ..Default::default()
                },
            ),
            (
                "lone\rcr",
                "lonecr",
                Removed {
                    control: 1,
                    ..Default::default()
                },
            ),
            (
                "red\u{1B}[31mtext\u{1B}[0m",
                "redtext",
                Removed {
                    ansi_escape: 9,
                    ..Default::default()
                },
            ),
            (
                "t\u{1B}]0;title\u{07}x",
                "tx",
                Removed {
                    ansi_escape: 10,
                    ..Default::default()
                },
            ),
            (
                "c1\u{9B}2Jz",
                "c1z",
                Removed {
                    ansi_escape: 3,
                    ..Default::default()
                },
            ),
            (
                "abc\u{202E}def\u{2066}g\u{200F}",
                "abcdefg",
                Removed {
                    bidi: 3,
                    ..Default::default()
                },
            ),
            (
                "hi\u{E0041}\u{E0042}",
                "hi",
                Removed {
                    tag: 2,
                    ..Default::default()
                },
            ),
            (
                "a\u{200B}b\u{FEFF}c\u{2060}",
                "abc",
                Removed {
                    zero_width: 3,
                    ..Default::default()
                },
            ),
            (
                "ab\u{200D}cd",
                "abcd",
                Removed {
                    zero_width: 1,
                    ..Default::default()
                },
            ),
            (
                "soft\u{AD}hy\u{3164}",
                "softhy",
                Removed {
                    invisible_format: 2,
                    ..Default::default()
                },
            ),
            (
                "v\u{E0100}s",
                "vs",
                Removed {
                    invisible_format: 1,
                    ..Default::default()
                },
            ),
        ];
        for (input, want, counts) in cases {
            let (out, removed) = clean(input);
            assert_eq!(&out, want, "{input:?}");
            assert_eq!(&removed, counts, "{input:?}");
        }
    }

    #[test]
    fn ordinary_text_is_kept_as_is() {
        for t in [
            "tab\tand\nnewline",
            "Ça marche — déjà 日本語",
            "👩\u{200D}💻 and ❤\u{FE0F}",
            "crlf\r\nbecomes lf",
        ] {
            let (out, removed) = clean(t);
            assert!(removed.is_empty(), "{t:?}: {removed:?}");
            assert_eq!(out, t.replace("\r\n", "\n"));
        }
        assert_eq!(clean_document("a\r\nb\0").0, "a\r\nb");
    }

    #[test]
    fn only_hidden_text_is_refused_and_names_are_never_changed() {
        let e = prose("title", "\u{200B}\u{202E}").unwrap_err();
        assert_eq!(e.field, "title");
        assert!(e.message.contains("only of hidden"), "{}", e.message);
        assert_eq!(prose("title", "").unwrap(), "");
        let e = exact("labels[0]", "bug\u{200B}").unwrap_err();
        assert!(e.message.contains("1 zero-width"), "{}", e.message);
        assert!(exact("labels[0]", "bug").is_ok());
    }

    #[test]
    fn strict_refuses_hostile_classes_with_position_and_strips_invisible_ones() {
        for (text, needle) in [
            ("abc\u{202E}def", "bidirectional"),
            ("x\u{2066}y", "bidirectional"),
            ("hidden\u{E0041}\u{E0042}", "tag character"),
            ("esc\u{1B}[31m", "control character"),
            ("nul\0", "control character"),
            ("c1\u{0085}", "control character"),
        ] {
            let e = strict("pattern", text).unwrap_err();
            assert_eq!(e.field, "pattern");
            assert!(e.message.contains(needle), "{text:?}: {}", e.message);
            assert!(e.message.contains("U+"), "{}", e.message);
        }
        assert_eq!(strict("p", "a\u{200B}b\r\nc\u{FEFF}").unwrap(), "ab\nc");
        assert_eq!(strict("p", "tab\tok").unwrap(), "tab\tok");
        assert_eq!(strict("p", "👩\u{200D}💻").unwrap(), "👩\u{200D}💻");
    }

    #[test]
    fn collect_reports_to_the_innermost_and_enclosing_caller() {
        assert!(prose("x", "a\0").is_ok()); // outside collect: nothing recorded
        let ((inner, _), outer) = collect(|| {
            prose("a", "x\u{202E}").unwrap();
            collect(|| prose("b", "y\0").unwrap())
        });
        assert_eq!(inner, "y");
        assert_eq!(
            outer,
            Removed {
                bidi: 1,
                control: 1,
                ..Default::default()
            }
        );
        let (_, after) = collect(|| ());
        assert!(after.is_empty());
    }
}
