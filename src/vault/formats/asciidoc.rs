//! AsciiDoc: section titles, the header's attributes and delimited blocks.
//!
//! The maintained AsciiDoc parser crate (`asciidork-parser`) builds a full AST in a
//! bump arena, resolves includes and attributes, and would need a walk of every block
//! type back to source lines; what the chunker needs is titles, blocks and their lines,
//! so this reads those rules of the AsciiDoc language directly:
//!
//! * **Section titles** — `= Title` (the document title, level 1) to `====== Title`
//!   (level 6) at the left margin, or the Markdown-style `#` forms.
//! * **Header attributes** — `:name: value` lines right under the document title are
//!   the document's metadata ([`Outline::front_matter`]), not text.
//! * **Delimited blocks** — between two identical delimiter lines (`----` listing,
//!   `....` literal, `====` example, `****` sidebar, `____` quote, `++++` passthrough,
//!   `|===` table, `--` open block; four or more characters except `--` and `|===`), no
//!   line is a title and the block stays whole; a `////` comment block is dropped, as
//!   are `//` comment lines.
//! * **Blocks** — runs of non-blank lines; block attribute lines (`[source,rust]`) and
//!   block titles (`.Example`) stay with the block they precede.

use std::collections::BTreeMap;

use crate::vault::chunk::{Block, Item, Outline, first_title};

/// The outline of an AsciiDoc file.
pub(crate) fn outline(text: String) -> Outline {
    let lines: Vec<&str> = text.lines().collect();
    let mut items = Vec::new();
    let mut attrs = BTreeMap::new();
    let mut open: Option<Block> = None;
    let mut in_header = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_end();
        let n = i + 1;
        if let Some(delim) = delimiter(line) {
            // The block runs to the same delimiter (or the end of the file).
            let end = (i + 1..lines.len())
                .find(|&j| lines[j].trim_end() == delim)
                .unwrap_or(lines.len() - 1);
            if delim != "////" {
                match &mut open {
                    Some(b) => b.last = end + 1,
                    None => {
                        open = Some(Block {
                            first: n,
                            last: end + 1,
                        })
                    }
                }
            }
            in_header = false;
            i = end + 1;
            continue;
        }
        if line.starts_with("//") {
            i += 1;
            continue;
        }
        if in_header && let Some((key, value)) = attribute(line) {
            attrs.insert(key.to_string(), value.to_string());
            i += 1;
            continue;
        }
        in_header = false;
        if let Some((level, title)) = section_title(line) {
            items.extend(open.take().map(Item::Block));
            items.push(Item::Heading {
                level,
                text: title.to_string(),
            });
            in_header = level == 1 && attrs.is_empty();
            i += 1;
            continue;
        }
        if line.trim().is_empty() {
            items.extend(open.take().map(Item::Block));
        } else {
            match &mut open {
                Some(b) => b.last = n,
                None => open = Some(Block { first: n, last: n }),
            }
        }
        i += 1;
    }
    items.extend(open.map(Item::Block));
    Outline {
        title: first_title(&items),
        front_matter: (!attrs.is_empty()).then_some(attrs),
        items,
        ..Outline::new(text)
    }
}

/// `= Title` .. `====== Title` (or `#` .. `######`): the level and the title.
fn section_title(line: &str) -> Option<(u8, &str)> {
    let marker = line.chars().next().filter(|c| *c == '=' || *c == '#')?;
    let depth = line.chars().take_while(|c| *c == marker).count();
    let rest = &line[depth..];
    let title = rest.strip_prefix(' ')?.trim();
    (depth <= 6 && !title.is_empty()).then_some((depth as u8, title))
}

/// The delimiter a line opens a block with, if it is one.
fn delimiter(line: &str) -> Option<&str> {
    if line == "--" || line == "|===" {
        return Some(line);
    }
    let c = line.chars().next()?;
    (matches!(c, '-' | '.' | '=' | '*' | '_' | '+' | '/')
        && line.len() >= 4
        && line.chars().all(|x| x == c))
    .then_some(line)
}

/// `:name: value` (a header attribute entry).
fn attribute(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix(':')?;
    let (key, value) = rest.split_once(':')?;
    (!key.is_empty() && !key.contains(' ')).then_some((key, value.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_attributes_and_delimited_blocks() {
        let src = "= Guide\n:author: Ann\n:toc:\n\nIntro.\n\n== Install\n\n[source,bash]\n----\n== not a title\ncargo install\n----\n\n////\nhidden\n////\n// a comment\n\n=== From source\n\nClone it.\n";
        let o = outline(src.into());
        let fm = o.front_matter.as_ref().unwrap();
        assert_eq!(fm.get("author").map(String::as_str), Some("Ann"));
        assert_eq!(o.title.as_deref(), Some("Guide"));
        let got: Vec<String> = o
            .items
            .iter()
            .map(|i| match i {
                Item::Heading { level, text } => format!("h{level} {text}"),
                Item::Block(b) => format!("{}-{}", b.first, b.last),
                Item::Leave { .. } => "leave".into(),
            })
            .collect();
        assert_eq!(
            got,
            [
                "h1 Guide",
                "5-5",
                "h2 Install",
                "9-13",
                "h3 From source",
                "22-22"
            ]
        );
    }
}
