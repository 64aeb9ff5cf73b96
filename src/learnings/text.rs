//! Hygiene of learning text: what characters a learning may hold, and the normal form
//! used to spot duplicate patterns.
//!
//! A learning written by one agent is read by every later agent, so its text must not
//! carry hidden instructions or visually disguised content. The policy, per class:
//!
//! | class | examples | policy |
//! |---|---|---|
//! | carriage return | `\r` (from CRLF pastes) | stripped |
//! | invisible format characters with no meaning in prose | U+200B zero-width space, U+2060 word joiner, U+FEFF BOM, U+00AD soft hyphen, U+180E | stripped |
//! | other C0/C1 controls (tab and newline are allowed) | NUL, ESC (ANSI sequences), BEL, U+0085 | refused |
//! | bidirectional controls | U+202A-U+202E overrides/embeddings, U+2066-U+2069 isolates, U+200E/U+200F marks, U+061C | refused ("Trojan Source") |
//! | Unicode tag characters | U+E0000-U+E007F ("ASCII smuggling") | refused |
//! | interlinear annotation, object replacement | U+FFF9-U+FFFC | refused |
//!
//! Stripped characters carry nothing a reader could see, so dropping them changes no
//! meaning; refused ones can change what a reader sees or an agent obeys, so the call
//! fails and names the character and its position. Zero-width joiner and non-joiner
//! (U+200C, U+200D) are kept: emoji sequences and several scripts need them. Otherwise
//! text is stored as given (no Unicode normalisation).

use crate::error::FieldError;

/// Characters removed silently.
fn is_stripped(c: char) -> bool {
    matches!(
        c,
        '\r' | '\u{200B}' | '\u{2060}' | '\u{FEFF}' | '\u{00AD}' | '\u{180E}'
    )
}

/// Characters that make the whole call fail, with a short name for the message.
fn refused(c: char) -> Option<&'static str> {
    match c {
        '\t' | '\n' => None,
        '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200E}'
        | '\u{200F}'
        | '\u{061C}' => Some("a bidirectional control character"),
        '\u{E0000}'..='\u{E007F}' => Some("an invisible Unicode tag character"),
        '\u{FFF9}'..='\u{FFFC}' => {
            Some("an interlinear annotation or object replacement character")
        }
        c if c.is_control() => Some("a control character"),
        _ => None,
    }
}

/// Clean one field's text by the policy above: stripped classes removed, refused
/// classes reported (first offending character, with its 0-based character position).
pub(crate) fn sanitize(field: &str, text: &str) -> Result<String, FieldError> {
    let mut out = String::with_capacity(text.len());
    for (i, c) in text.chars().enumerate() {
        if is_stripped(c) {
            continue;
        }
        if let Some(what) = refused(c) {
            return Err(FieldError::new(
                field,
                format!(
                    "contains {what} (U+{:04X} at character {i}); remove it — learnings are read by \
                     every later agent and may not hide text",
                    c as u32
                ),
            ));
        }
        out.push(c);
    }
    Ok(out)
}

/// The duplicate-detection form of a pattern: lower-cased, every run of characters that
/// are not letters or digits folded to one space, trimmed. `"Use  WAL-mode!"` and
/// `"use wal mode"` are the same pattern.
pub(crate) fn normalize_pattern(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut gap = false;
    for c in pattern.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            if gap && !out.is_empty() {
                out.push(' ');
            }
            gap = false;
            out.push(c);
        } else {
            gap = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_form_ignores_case_space_and_punctuation() {
        assert_eq!(normalize_pattern("  Use  WAL-mode!! "), "use wal mode");
        assert_eq!(
            normalize_pattern("Nuxt auto-imports app/utils/"),
            normalize_pattern("nuxt AUTO imports: app utils")
        );
        assert_eq!(normalize_pattern("Ça marche — déjà"), "ça marche déjà");
    }

    #[test]
    fn invisible_formatting_is_stripped() {
        assert_eq!(sanitize("p", "a\u{200B}b\r\nc\u{FEFF}").unwrap(), "ab\nc");
        assert_eq!(sanitize("p", "tab\tok").unwrap(), "tab\tok");
        // Joiners stay: emoji and several scripts need them.
        assert_eq!(sanitize("p", "👩\u{200D}💻").unwrap(), "👩\u{200D}💻");
    }

    #[test]
    fn hostile_characters_are_refused_with_position() {
        for (text, needle) in [
            ("abc\u{202E}def", "bidirectional"),
            ("x\u{2066}y", "bidirectional"),
            ("hidden\u{E0041}\u{E0042}", "tag character"),
            ("esc\u{1B}[31m", "control character"),
            ("nul\0", "control character"),
            ("c1\u{0085}", "control character"),
        ] {
            let e = sanitize("pattern", text).unwrap_err();
            assert_eq!(e.field, "pattern");
            assert!(e.message.contains(needle), "{text:?}: {}", e.message);
            assert!(e.message.contains("U+"), "{}", e.message);
        }
    }
}
