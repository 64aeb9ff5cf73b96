//! Plain text: paragraphs (runs of non-blank lines) as blocks, no headings.

use crate::vault::chunk::{Block, Item, Outline};

/// The outline of a plain text file.
pub(crate) fn outline(text: String) -> Outline {
    let items = paragraphs(&text, 1).into_iter().map(Item::Block).collect();
    Outline {
        items,
        ..Outline::new(text)
    }
}

/// The runs of non-blank lines of `text`, numbered from `first_line`.
pub(crate) fn paragraphs(text: &str, first_line: usize) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let n = first_line + i;
        if line.trim().is_empty() {
            out.extend(open.take());
        } else {
            match &mut open {
                Some(b) => b.last = n,
                None => open = Some(Block { first: n, last: n }),
            }
        }
    }
    out.extend(open);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_are_runs_of_non_blank_lines() {
        let o = outline("one\ntwo\n\n  \nthree\n".into());
        assert_eq!(
            o.items,
            vec![
                Item::Block(Block { first: 1, last: 2 }),
                Item::Block(Block { first: 5, last: 5 })
            ]
        );
    }
}
