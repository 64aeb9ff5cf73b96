//! The quality gates of a new learning, and the checks of the ids and notes callers
//! give: every problem is reported with its field.

use crate::error::{Error, FieldError, Result};

use super::*;

fn trimmed_len(
    errors: &mut Vec<FieldError>,
    field: &str,
    text: &str,
    min: usize,
    max: usize,
    hint: &str,
) {
    let n = text.chars().count();
    if n < min {
        errors.push(FieldError::new(
            field,
            format!("must be at least {min} characters (got {n}); {hint}"),
        ));
    } else if n > max {
        errors.push(FieldError::new(
            field,
            format!("must be at most {max} characters (got {n})"),
        ));
    }
}

/// Check an `applies_to` entry: a relative path prefix.
fn check_prefix(field: &str, p: &str) -> Option<FieldError> {
    let bad = |m: &str| Some(FieldError::new(field, m.to_string()));
    if p.trim().is_empty() {
        return bad("must not be blank; give a path prefix such as \"src/api/\"");
    }
    if p.chars().count() > limits::APPLIES_TO_ITEM_MAX {
        return bad(&format!(
            "must be at most {} characters",
            limits::APPLIES_TO_ITEM_MAX
        ));
    }
    let b = p.as_bytes();
    if b[0] == b'/' || b[0] == b'\\' || b[0] == b'~' || (b.len() > 1 && b[1] == b':') {
        return bad(
            "must be a path relative to the repository root (no leading /, \\, ~ or drive letter)",
        );
    }
    if p.split(['/', '\\']).any(|c| c == "..") {
        return bad("must not contain a `..` component");
    }
    None
}

/// A new learning's text after the quality gates.
pub(crate) struct Valid {
    /// Trimmed.
    pub(crate) pattern: String,
    /// Trimmed.
    pub(crate) context: Option<String>,
    pub(crate) applies_to: Vec<String>,
}

/// Validate and clean a new learning; every problem, with its field.
pub(crate) fn validate(new: &NewLearning) -> Result<Valid> {
    let mut errors = Vec::new();
    let pattern = match crate::text::strict("pattern", &new.pattern) {
        Ok(p) => p.trim().to_string(),
        Err(e) => {
            errors.push(e);
            String::new()
        }
    };
    if errors.is_empty() {
        trimmed_len(
            &mut errors,
            "pattern",
            &pattern,
            limits::PATTERN_MIN,
            limits::PATTERN_MAX,
            "start with the subject and say what to do or avoid, and why",
        );
        if pattern.chars().count() >= limits::PATTERN_MIN
            && !pattern.chars().any(char::is_alphabetic)
        {
            errors.push(FieldError::new("pattern", "must contain words"));
        }
    }
    let context = match &new.context {
        None => None,
        Some(c) => match crate::text::strict("context", c) {
            Ok(c) => {
                let c = c.trim().to_string();
                trimmed_len(
                    &mut errors,
                    "context",
                    &c,
                    limits::CONTEXT_MIN,
                    limits::CONTEXT_MAX,
                    "say when and where the pattern applies, or leave context out",
                );
                Some(c)
            }
            Err(e) => {
                errors.push(e);
                None
            }
        },
    };
    if new.applies_to.len() > limits::APPLIES_TO_MAX {
        errors.push(FieldError::new(
            "applies_to",
            format!("at most {} path prefixes", limits::APPLIES_TO_MAX),
        ));
    }
    let mut applies_to = Vec::new();
    for (i, p) in new.applies_to.iter().enumerate() {
        let field = format!("applies_to[{i}]");
        match crate::text::exact(&field, p).map(|()| p.clone()) {
            Ok(p) => match check_prefix(&field, &p) {
                Some(e) => errors.push(e),
                None => applies_to.push(p),
            },
            Err(e) => errors.push(e),
        }
    }
    if new.supersedes.len() > limits::SUPERSEDES_MAX {
        errors.push(FieldError::new(
            "supersedes",
            format!("at most {} learning ids", limits::SUPERSEDES_MAX),
        ));
    }
    for (i, id) in new.supersedes.iter().enumerate() {
        if let Err(e) = check_id(&format!("supersedes[{i}]"), id) {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(Valid {
            pattern,
            context,
            applies_to,
        })
    } else {
        Err(Error::InvalidInput(errors))
    }
}

/// Check a learning id given by a caller: a plain `lrn_...` token.
pub(crate) fn check_id(field: &str, id: &str) -> std::result::Result<(), FieldError> {
    let ok = !id.is_empty()
        && id.len() <= limits::ID_MAX
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!(
                "must be a learning id such as \"lrn_0123456789abcdef\" (letters, digits and _, at most {} characters)",
                limits::ID_MAX
            ),
        ))
    }
}

pub(crate) fn check_note(note: Option<&str>) -> Result<Option<String>> {
    let Some(n) = note else { return Ok(None) };
    let n = crate::text::strict("note", n).map_err(|e| Error::InvalidInput(vec![e]))?;
    if n.chars().count() > limits::NOTE_MAX {
        return Err(Error::invalid(
            "note",
            format!("must be at most {} characters", limits::NOTE_MAX),
        ));
    }
    Ok(Some(n))
}
