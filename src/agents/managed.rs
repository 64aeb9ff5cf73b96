//! Managed sections: a block of a Markdown file (AGENTS.md, CLAUDE.md, GEMINI.md, ...)
//! between two HTML comment markers that Cairn owns and rewrites in place, leaving every
//! byte around it alone. A file holds a section of a name at most once: a second pair of
//! markers, or one marker without its partner, is refused rather than guessed at.
//!
//! `cairn connect` writes the agents' guide as the section `guide`; `cairn export` can
//! write learnings as another section with the same two functions.

/// Why a file's markers cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SectionError {
    #[error("the section {name:?} is marked {count} times; keep one pair of markers")]
    Repeated { name: String, count: usize },
    #[error("the section {name:?} has a begin marker and no end marker after it (or the reverse)")]
    Unbalanced { name: String },
}

/// The begin marker of the section `name`.
pub fn begin_marker(name: &str) -> String {
    format!("<!-- BEGIN cairn:{name} (managed by cairn; edits inside are replaced) -->")
}

/// The end marker of the section `name`.
pub fn end_marker(name: &str) -> String {
    format!("<!-- END cairn:{name} -->")
}

/// Where the section `name` is in `text`: the byte range from the start of its begin
/// marker's line to the end of its end marker's line (newline included), if present.
fn locate(text: &str, name: &str) -> Result<Option<std::ops::Range<usize>>, SectionError> {
    // Markers are matched without their explanatory tail, so a person who shortened the
    // begin comment does not get a second section.
    let begin = format!("<!-- BEGIN cairn:{name} ");
    let begin_exact = format!("<!-- BEGIN cairn:{name}-->");
    let end = end_marker(name);
    let starts: Vec<usize> = text
        .match_indices(&begin)
        .chain(text.match_indices(&begin_exact))
        .map(|(i, _)| i)
        .collect();
    let ends: Vec<usize> = text.match_indices(&end).map(|(i, _)| i).collect();
    let repeated = starts.len().max(ends.len());
    if repeated > 1 {
        return Err(SectionError::Repeated {
            name: name.into(),
            count: repeated,
        });
    }
    match (starts.first(), ends.first()) {
        (None, None) => Ok(None),
        (Some(&s), Some(&e)) if s < e => {
            let line_start = text[..s].rfind('\n').map_or(0, |i| i + 1);
            let after = e + end.len();
            let line_end = text[after..]
                .find('\n')
                .map_or(text.len(), |i| after + i + 1);
            Ok(Some(line_start..line_end))
        }
        _ => Err(SectionError::Unbalanced { name: name.into() }),
    }
}

/// The body of the section `name` in `text` (between the markers' lines), if present.
pub fn managed_section<'a>(text: &'a str, name: &str) -> Result<Option<&'a str>, SectionError> {
    let Some(range) = locate(text, name)? else {
        return Ok(None);
    };
    let block = &text[range];
    let body_start = block.find('\n').map_or(block.len(), |i| i + 1);
    let body_end = block.rfind(&end_marker(name)).unwrap_or(body_start);
    Ok(Some(&block[body_start..body_end.max(body_start)]))
}

/// `text` with the section `name` holding `body`: replaced in place when present, else
/// appended after a blank line. Writing the same body twice gives the same text.
pub fn upsert_managed_section(text: &str, name: &str, body: &str) -> Result<String, SectionError> {
    let mut block = begin_marker(name);
    block.push('\n');
    block.push_str(body.trim_end_matches('\n'));
    block.push('\n');
    block.push_str(&end_marker(name));
    block.push('\n');
    Ok(match locate(text, name)? {
        Some(range) => format!("{}{block}{}", &text[..range.start], &text[range.end..]),
        None if text.is_empty() => block,
        None if text.ends_with("\n\n") => format!("{text}{block}"),
        None if text.ends_with('\n') => format!("{text}\n{block}"),
        None => format!("{text}\n\n{block}"),
    })
}

/// `text` without the section `name`, and without the blank line
/// [`upsert_managed_section`] put before it: removing what was appended gives the text
/// back as it was. `None` when there is no such section.
pub fn remove_managed_section(text: &str, name: &str) -> Result<Option<String>, SectionError> {
    let Some(range) = locate(text, name)? else {
        return Ok(None);
    };
    let (before, after) = (&text[..range.start], &text[range.end..]);
    let before = if after.is_empty() {
        before.strip_suffix('\n').unwrap_or(before)
    } else {
        before
    };
    Ok(Some(format!("{before}{after}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_then_removed_gives_the_text_back_byte_for_byte() {
        // (A file ending in a blank line loses it: `cairn disconnect` restores such a
        // file from its backup, byte for byte.)
        for original in ["", "# Rules\n", "# Rules", "a\n\nb\n"] {
            let with = upsert_managed_section(original, "guide", "Use Cairn.\n").unwrap();
            assert_eq!(
                upsert_managed_section(&with, "guide", "Use Cairn.").unwrap(),
                with,
                "not idempotent on {original:?}"
            );
            let back = remove_managed_section(&with, "guide").unwrap().unwrap();
            let expected = if original == "# Rules" {
                "# Rules\n"
            } else {
                original
            };
            // A file without a final newline gets one: the only byte that differs.
            assert_eq!(back, expected, "from {original:?} via {with:?}");
        }
    }

    #[test]
    fn a_section_is_updated_in_place_with_the_text_around_it_untouched() {
        let text = format!(
            "# Top\n\n{}\nold\n{}\n\n## After\nkeep\n",
            begin_marker("guide"),
            end_marker("guide")
        );
        let new = upsert_managed_section(&text, "guide", "new body").unwrap();
        assert_eq!(
            new,
            format!(
                "# Top\n\n{}\nnew body\n{}\n\n## After\nkeep\n",
                begin_marker("guide"),
                end_marker("guide")
            )
        );
        assert_eq!(managed_section(&new, "guide").unwrap(), Some("new body\n"));
        assert_eq!(managed_section(&new, "learnings").unwrap(), None);
        // Another section's markers are another section.
        let both = upsert_managed_section(&new, "learnings", "x").unwrap();
        assert_eq!(managed_section(&both, "guide").unwrap(), Some("new body\n"));
    }

    #[test]
    fn repeated_or_unbalanced_markers_are_refused() {
        let one = upsert_managed_section("", "guide", "a").unwrap();
        let twice = format!("{one}{one}");
        assert!(matches!(
            upsert_managed_section(&twice, "guide", "b"),
            Err(SectionError::Repeated { count: 2, .. })
        ));
        let lone = format!("x\n{}\n", begin_marker("guide"));
        assert!(matches!(
            upsert_managed_section(&lone, "guide", "b"),
            Err(SectionError::Unbalanced { .. })
        ));
        let reversed = format!("{}\n{}\n", end_marker("guide"), begin_marker("guide"));
        assert!(remove_managed_section(&reversed, "guide").is_err());
    }
}
