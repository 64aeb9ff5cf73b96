//! A page's text: its text-showing operators in content order, decoded by each font's
//! encoding, laid out in lines and paragraphs by how the text position moves.

use std::collections::HashMap;

use lopdf::content::Content;
use lopdf::{Dictionary, Document, Encoding, Object, ObjectId};

use super::{MAX_STREAM, MAX_TEXT, Over, over_limit};

/// A vertical move over this many line heights ends a paragraph.
const PARAGRAPH_GAP: f32 = 1.6;
/// A `TJ` adjustment more negative than this (thousandths of an em) is a space.
const WORD_GAP: f32 = 150.0;
/// Reads pages' text, charging what it decompresses to what is left of the budget.
pub(super) struct TextReader<'a> {
    doc: &'a Document,
    left: usize,
    text: usize,
    /// Each font's encoding, by the address of its dictionary (read once).
    fonts: HashMap<*const Dictionary, Option<Encoding<'a>>>,
    removed: crate::text::Removed,
}

impl<'a> TextReader<'a> {
    /// A reader of `doc`'s pages with `left` bytes of the budget to decompress.
    pub(super) fn new(doc: &'a Document, left: usize) -> Self {
        TextReader {
            doc,
            left,
            text: 0,
            fonts: HashMap::new(),
            removed: crate::text::Removed::default(),
        }
    }

    /// The hidden characters the text policy removed from the lines read.
    pub(super) fn removed(self) -> crate::text::Removed {
        self.removed
    }

    fn spend(&mut self, n: usize) -> Result<(), String> {
        self.left = self
            .left
            .checked_sub(n)
            .ok_or_else(|| Over::Decoded.reason())?;
        Ok(())
    }

    /// The lines of one page (`""` between paragraphs).
    pub(super) fn page(&mut self, page: ObjectId) -> Result<Vec<String>, String> {
        let content = match self.doc.get_page_content_with_limit(page, self.left) {
            Ok(c) => c,
            Err(e) if over_limit(&e) => return Err(Over::Decoded.reason()),
            Err(_) => return Ok(Vec::new()),
        };
        self.spend(content.len())?;
        let fonts = self.doc.get_page_fonts(page).unwrap_or_default();
        let mut layout = Layout::default();
        let mut font: Option<*const Dictionary> = None;
        for op in Content::decode_iter(&content) {
            let Ok(op) = op else { break };
            let num = |i: usize| op.operands.get(i).and_then(|o| o.as_float().ok());
            match op.operator.as_str() {
                "BT" => layout.begin(),
                "Tf" => {
                    let dict = (op.operands.first())
                        .and_then(|o| o.as_name().ok())
                        .and_then(|n| fonts.get(n))
                        .copied();
                    font = dict.map(|d| d as *const Dictionary);
                    if let Some(d) = dict {
                        self.encoding(d)?;
                    }
                    layout.size = num(1).unwrap_or(layout.size).abs();
                }
                "Td" | "TD" => layout.move_by(num(1).unwrap_or(0.0)),
                "Tm" => {
                    let (c, d) = (num(2).unwrap_or(0.0), num(3).unwrap_or(1.0));
                    layout.set_matrix((c * c + d * d).sqrt(), num(5).unwrap_or(0.0));
                }
                "T*" => layout.newline(),
                "Tj" | "TJ" | "'" | "\"" => {
                    if op.operator != "Tj" && op.operator != "TJ" {
                        layout.newline();
                    }
                    layout.show();
                    let shown = match op.operator.as_str() {
                        "\"" => op.operands.get(2..).unwrap_or_default(),
                        _ => &op.operands[..],
                    };
                    let encoding = font
                        .and_then(|f| self.fonts.get(&f))
                        .and_then(Option::as_ref);
                    for o in shown {
                        layout.text(o, encoding);
                    }
                }
                _ => {}
            }
            if self.text + layout.bytes() > MAX_TEXT {
                return Err(format!(
                    "the PDF has more than the {MAX_TEXT} bytes of text the vault reads"
                ));
            }
        }
        let lines = layout.finish();
        self.text += lines.iter().map(|l| l.len() + 1).sum::<usize>();
        Ok(lines
            .into_iter()
            .map(|l| {
                let (l, r) = crate::text::clean(&l);
                self.removed.add(&r);
                l
            })
            .collect())
    }

    /// Read the encoding of `font` once, charging its `ToUnicode` map to the budget.
    fn encoding(&mut self, font: &'a Dictionary) -> Result<(), String> {
        let key = font as *const Dictionary;
        if self.fonts.contains_key(&key) {
            return Ok(());
        }
        if let Ok(map) = font
            .get_deref(b"ToUnicode", self.doc)
            .and_then(Object::as_stream)
        {
            match map.decompressed_content_with_limit(self.left) {
                Ok(data) => self.spend(data.len())?,
                Err(e) if over_limit(&e) => return Err(Over::Decoded.reason()),
                Err(_) => {}
            }
        }
        let encoding = match font.get_font_encoding_with_limit(self.doc, MAX_STREAM) {
            Ok(e) => Some(e),
            Err(e) if over_limit(&e) => return Err(Over::Stream.reason()),
            Err(_) => None,
        };
        self.fonts.insert(key, encoding);
        Ok(())
    }
}

/// Where the text of a page goes: lines, paragraphs and spaces from the text position.
struct Layout {
    lines: Vec<String>,
    line: String,
    /// Vertical position of the current text line, and the line matrix's vertical scale.
    y: f32,
    scale: f32,
    size: f32,
    /// Where the last text was shown; `None` before the page's first.
    shown_at: Option<f32>,
    /// Moved along the line since the last text.
    moved: bool,
    /// A line break was asked for (`T*`, `'`, `"`).
    broke: bool,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            lines: Vec::new(),
            line: String::new(),
            y: 0.0,
            scale: 1.0,
            size: 1.0,
            shown_at: None,
            moved: false,
            broke: false,
        }
    }
}

impl Layout {
    fn begin(&mut self) {
        self.y = 0.0;
        self.scale = 1.0;
        self.moved = true;
    }

    fn move_by(&mut self, dy: f32) {
        self.y += dy * self.scale;
        self.moved = true;
    }

    fn set_matrix(&mut self, scale: f32, y: f32) {
        self.scale = scale;
        self.y = y;
        self.moved = true;
    }

    fn newline(&mut self) {
        self.broke = true;
    }

    /// Before text is shown: break the line or separate words by how far the position
    /// moved since the last text.
    fn show(&mut self) {
        let height = (self.size * self.scale).abs().max(1.0);
        if let Some(at) = self.shown_at {
            let dy = (self.y - at).abs();
            if dy > PARAGRAPH_GAP * height {
                self.end_line();
                if self.lines.last().is_some_and(|l| !l.is_empty()) {
                    self.lines.push(String::new());
                }
            } else if self.broke || dy > 0.3 * height {
                self.end_line();
            } else if self.moved {
                self.space();
            }
        }
        self.shown_at = Some(self.y);
        self.moved = false;
        self.broke = false;
    }

    fn text(&mut self, o: &Object, encoding: Option<&Encoding>) {
        match o {
            Object::String(bytes, _) => {
                if let Some(s) = encoding.and_then(|e| Document::decode_text(e, bytes).ok()) {
                    self.line.push_str(&s);
                }
            }
            Object::Array(parts) => parts.iter().for_each(|p| self.text(p, encoding)),
            Object::Integer(_) | Object::Real(_)
                if o.as_float().is_ok_and(|gap| gap < -WORD_GAP) =>
            {
                self.space()
            }
            _ => {}
        }
    }

    fn space(&mut self) {
        if !self.line.is_empty() && !self.line.ends_with(char::is_whitespace) {
            self.line.push(' ');
        }
    }

    fn end_line(&mut self) {
        let line = self.line.split_whitespace().collect::<Vec<_>>().join(" ");
        self.line.clear();
        if !line.is_empty() {
            self.lines.push(line);
        }
    }

    fn bytes(&self) -> usize {
        self.line.len()
    }

    fn finish(mut self) -> Vec<String> {
        self.end_line();
        if self.lines.last().is_some_and(String::is_empty) {
            self.lines.pop();
        }
        self.lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_break_on_vertical_moves_and_words_on_gaps() {
        let mut l = Layout {
            size: 10.0,
            ..Layout::default()
        };
        let s = |t: &str| Object::string_literal(t);
        let mut font = Dictionary::new();
        font.set("Type", Object::Name(b"Font".to_vec()));
        font.set("Subtype", Object::Name(b"Type1".to_vec()));
        font.set("Encoding", Object::Name(b"WinAnsiEncoding".to_vec()));
        let doc = Document::new();
        let enc = font.get_font_encoding(&doc).unwrap();
        l.begin();
        l.move_by(700.0);
        l.show();
        l.text(
            &Object::Array(vec![
                s("Hel"),
                20.into(),
                s("lo"),
                (-300).into(),
                s("world"),
            ]),
            Some(&enc),
        );
        l.move_by(-12.0);
        l.show();
        l.text(&s("next line"), Some(&enc));
        l.move_by(-30.0);
        l.show();
        l.text(&s("new paragraph"), Some(&enc));
        l.move_by(0.0);
        l.show();
        l.text(&s("same line"), Some(&enc));
        assert_eq!(
            l.finish(),
            ["Hello world", "next line", "", "new paragraph same line"]
        );
    }
}
