//! Jupyter notebooks: the cells rendered to one Markdown text (Markdown cells as they
//! are, code cells as fenced code in the notebook's language; raw cells and outputs
//! left out), outlined by the Markdown chunker, so a heading in one Markdown cell
//! heads the cells after it. Spans are **cell numbers** (1-based), not lines of the
//! JSON file.
//!
//! A notebook is refused when it is not JSON with a `cells` array, or has more than
//! [`MAX_CELLS`] cells.

use serde_json::Value;

use crate::vault::chunk::{Outline, markdown_outline};

/// Cells a notebook may have.
pub(crate) const MAX_CELLS: usize = 5_000;

/// The outline of a notebook; `Err` with the reason when it is refused.
pub(crate) fn outline(text: &str) -> Result<Outline, String> {
    let nb: Value =
        serde_json::from_str(text).map_err(|e| format!("not a notebook (invalid JSON: {e})"))?;
    let cells = nb
        .get("cells")
        .and_then(Value::as_array)
        .ok_or("not a notebook (no \"cells\" array)")?;
    if cells.len() > MAX_CELLS {
        return Err(format!(
            "the notebook has {} cells, more than the {MAX_CELLS} the vault reads",
            cells.len()
        ));
    }
    let lang = nb
        .pointer("/metadata/kernelspec/language")
        .or_else(|| nb.pointer("/metadata/language_info/name"))
        .and_then(Value::as_str)
        .filter(|l| {
            l.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-')
        })
        .unwrap_or("");
    let mut rendered = String::new();
    let mut map: Vec<(usize, usize)> = Vec::new();
    let mut removed = crate::text::Removed::default();
    let mut push = |rendered: &mut String, line: &str, cell: usize| {
        rendered.push_str(line);
        rendered.push('\n');
        map.push((cell, cell));
    };
    // A blank first line: a cell opening with `---` is no front matter.
    push(&mut rendered, "", 1);
    for (i, cell) in cells.iter().enumerate() {
        let n = i + 1;
        let source = match cell.get("source") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts.iter().filter_map(Value::as_str).collect(),
            _ => continue,
        };
        if source.trim().is_empty() {
            continue;
        }
        let (source, r) = crate::text::clean_document(&source);
        removed.add(&r);
        match cell.get("cell_type").and_then(Value::as_str) {
            Some("markdown") => {
                source.lines().for_each(|l| push(&mut rendered, l, n));
            }
            Some("code") => {
                let fence = "`".repeat(longest_backtick_run(&source).max(2) + 1);
                push(&mut rendered, &format!("{fence}{lang}"), n);
                source.lines().for_each(|l| push(&mut rendered, l, n));
                push(&mut rendered, &fence, n);
            }
            _ => continue,
        }
        // A blank line ends every cell (it belongs to the cell before it).
        push(&mut rendered, "", n);
    }
    let mut outline = markdown_outline(rendered);
    outline.source_lines = Some(map);
    outline.removed = removed;
    Ok(outline)
}

fn longest_backtick_run(s: &str) -> usize {
    let mut best = 0;
    let mut run = 0;
    for c in s.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}
