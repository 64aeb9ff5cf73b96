//! reStructuredText: sections by their title adornments, everything else as blocks.
//!
//! No maintained reStructuredText parser crate reports source lines: `rst_parser`
//! (rust-rst, pest) builds a `document_tree` without positions and supports a subset of
//! the syntax (an unsupported construct fails the whole parse), so this is the smallest
//! parser the chunker needs, following docutils' rules for what it reads:
//!
//! * **Section titles** — a line of text at the left margin with an *underline*, or
//!   with an *overline* and an underline of the same character, made of one repeated
//!   non-alphanumeric printable ASCII character (at least 3, and at least as long as the
//!   title when there is no overline), after a blank line or the start of the file.
//!   Levels follow the order in which each style (character, with or without overline)
//!   first appears, as docutils assigns them.
//! * **Transitions** — an adornment line alone between blank lines is no title and no
//!   text.
//! * **Blocks** — runs of non-blank lines; lines indented deeper than the block's first
//!   line after blank lines belong to it, so a directive (`.. code-block::`,
//!   `.. note::`) with its body and a paragraph ending in `::` with its literal block
//!   stay one block (split by lines only when over budget). Section-looking lines inside
//!   such indented bodies are not titles (titles are never indented).
//! * **Comments and targets** — an explicit markup block that is not a directive,
//!   footnote or citation (`.. _label:`, `.. a comment`) is dropped with its body.

use crate::vault::chunk::{Block, Item, Outline, first_title};

/// The outline of a reStructuredText file.
pub(crate) fn outline(text: String) -> Outline {
    let lines: Vec<&str> = text.lines().collect();
    let mut styles: Vec<(char, bool)> = Vec::new();
    let mut items = Vec::new();
    let mut open: Option<(Block, usize, bool)> = None; // block, indent, dropped
    let mut i = 0;
    let close = |open: &mut Option<(Block, usize, bool)>, items: &mut Vec<Item>| {
        if let Some((b, _, dropped)) = open.take()
            && !dropped
        {
            items.push(Item::Block(b));
        }
    };
    while i < lines.len() {
        let blank_before = i == 0 || lines[i - 1].trim().is_empty();
        if blank_before && let Some((title, style, used)) = title_at(&lines, i) {
            close(&mut open, &mut items);
            let level = match styles.iter().position(|s| *s == style) {
                Some(p) => p + 1,
                None => {
                    styles.push(style);
                    styles.len()
                }
            };
            items.push(Item::Heading {
                level: level.min(u8::MAX as usize) as u8,
                text: title,
            });
            i += used;
            continue;
        }
        let line = lines[i];
        let n = i + 1;
        if line.trim().is_empty() {
            i += 1;
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        match &mut open {
            // The line continues the open block: no blank line between, or deeper indent.
            Some((b, first_indent, _)) if !blank_before || indent > *first_indent => b.last = n,
            _ => {
                close(&mut open, &mut items);
                if is_adornment(line) && i + 1 < lines.len() && lines[i + 1].trim().is_empty() {
                    // A transition.
                    i += 1;
                    continue;
                }
                open = Some((Block { first: n, last: n }, indent, is_comment(line)));
            }
        }
        i += 1;
    }
    close(&mut open, &mut items);
    Outline {
        title: first_title(&items),
        items,
        ..Outline::new(text)
    }
}

/// A section title starting at line `i`: its text, its style and how many lines it
/// takes (2 or 3).
fn title_at(lines: &[&str], i: usize) -> Option<(String, (char, bool), usize)> {
    let line = lines[i];
    if let Some(c) = adornment_char(line)
        && let (Some(text), Some(under)) = (lines.get(i + 1), lines.get(i + 2))
        && adornment_char(under) == Some(c)
        && under.trim_end().len() == line.trim_end().len()
        && !text.trim().is_empty()
        && adornment_char(text).is_none()
    {
        return Some((text.trim().to_string(), (c, true), 3));
    }
    let under = lines.get(i + 1)?;
    let c = adornment_char(under)?;
    let title = line.trim_end();
    if line.starts_with(char::is_whitespace)
        || title.is_empty()
        || adornment_char(line).is_some()
        || under.trim_end().chars().count() < title.chars().count()
    {
        return None;
    }
    Some((title.to_string(), (c, false), 2))
}

/// The character of an adornment line: one non-alphanumeric printable ASCII character
/// repeated at least 3 times from the left margin.
fn adornment_char(line: &str) -> Option<char> {
    let t = line.trim_end();
    let c = t.chars().next()?;
    (t.len() >= 3 && c.is_ascii_punctuation() && t.chars().all(|x| x == c)).then_some(c)
}

fn is_adornment(line: &str) -> bool {
    adornment_char(line).is_some()
}

/// An explicit markup block that is neither a directive, a footnote nor a citation.
fn is_comment(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("..") else {
        return false;
    };
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return false;
    }
    let rest = rest.trim_start();
    !(rest.starts_with('[') || rest.starts_with('|') || is_directive(rest))
}

/// `name::` at the start of an explicit markup block (`code-block:: rust`).
fn is_directive(rest: &str) -> bool {
    rest.split_once("::").is_some_and(|(name, _)| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ':' | '.' | '+'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headings(o: &Outline) -> Vec<(u8, String)> {
        o.items
            .iter()
            .filter_map(|i| match i {
                Item::Heading { level, text } => Some((*level, text.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn styles_give_levels_in_order_of_appearance() {
        let src = "=====\nGuide\n=====\n\nIntro.\n\nInstall\n-------\n\nText.\n\nSource\n~~~~~~\n\nMore.\n\nUsage\n-----\n\nRun.\n";
        let o = outline(src.into());
        assert_eq!(
            headings(&o),
            vec![
                (1, "Guide".into()),
                (2, "Install".into()),
                (3, "Source".into()),
                (2, "Usage".into())
            ]
        );
        assert_eq!(o.title.as_deref(), Some("Guide"));
    }

    #[test]
    fn directive_bodies_and_literal_blocks_stay_whole() {
        let src = "Title\n=====\n\nExample::\n\n    Not a title\n    -----------\n\n.. code-block:: rust\n\n   fn main() {}\n\n.. _target:\n\n.. a comment\n   spanning lines\n\n----------\n\nAfter.\n";
        let o = outline(src.into());
        assert_eq!(headings(&o), vec![(1, "Title".into())]);
        let blocks: Vec<_> = o
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Block(b) => Some((b.first, b.last)),
                _ => None,
            })
            .collect();
        assert_eq!(blocks, vec![(4, 7), (9, 11), (20, 20)]);
    }
}
