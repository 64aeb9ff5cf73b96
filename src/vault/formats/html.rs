//! HTML: the main content as text, `h1`-`h6` as headings, read through html5ever's
//! tokenizer (the HTML5 tokenization every browser does: entities decoded, malformed
//! markup recovered, never an error).
//!
//! * **Dropped** — `script`, `style`, `template`, `noscript`, `svg`, `math`, `iframe`,
//!   navigation and page furniture (`nav`, `header`, `footer`, `aside`, `form`,
//!   `button`, and any element with `role="navigation"`, `"banner"`, `"contentinfo"`,
//!   `"search"`, or `hidden`), with everything inside them.
//! * **Main content** — when the page has a `main` element (or `role="main"`), only
//!   what is inside it is read (generated docs and docs sites put their sidebars and
//!   menus outside it).
//! * **Text** — each block element (`p`, `div`, `pre`, `table`, `ul`, ...) is a block;
//!   its text is rendered on one line per list item, table row or `br` (cells joined by
//!   ` | `), whitespace collapsed except inside `pre`. Chunks are cut from that text;
//!   their spans are the source lines it came from.
//! * **Title** — the first `h1`, else the `title` element.
//!
//! Elements are tracked on a stack of at most [`MAX_DEPTH`] open elements (deeper
//! ones are read as text of their parent), so no nesting makes the work superlinear.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};

use crate::vault::chunk::{Block, Item, Outline, first_title};

/// Open elements tracked at most.
const MAX_DEPTH: usize = 512;

/// The outline of an HTML file.
pub(crate) fn outline(source: &str) -> Outline {
    let sink = Sink::default();
    let tokenizer = Tokenizer::new(sink, TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(source));
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    let mut state = tokenizer.sink.state.into_inner();
    state.end_block();
    state.render()
}

#[derive(Default)]
struct Sink {
    state: RefCell<State>,
}

/// What the page yields, in order.
enum Piece {
    Heading {
        level: u8,
        text: String,
        main: bool,
    },
    /// Rendered lines with the source lines each came from.
    Block {
        lines: Vec<(String, usize, usize)>,
        main: bool,
    },
}

#[derive(Default)]
struct State {
    /// Open elements: name, dropped, main.
    stack: Vec<(String, bool, bool)>,
    dropped: usize,
    main: usize,
    saw_main: bool,
    pre: usize,
    heading: Option<(u8, String)>,
    title: Option<String>,
    in_title: bool,
    /// The block being read: its finished lines and the current one.
    lines: Vec<(String, usize, usize)>,
    line: Option<(String, usize, usize)>,
    pieces: Vec<Piece>,
}

fn is_dropped(name: &str) -> bool {
    matches!(
        name,
        "script"
            | "style"
            | "template"
            | "noscript"
            | "svg"
            | "math"
            | "iframe"
            | "object"
            | "nav"
            | "header"
            | "footer"
            | "aside"
            | "form"
            | "button"
            | "select"
            | "textarea"
            | "canvas"
    )
}

fn is_void(name: &str) -> bool {
    matches!(
        name,
        "area"
            | "base"
            | "br"
            | "col"
            | "embed"
            | "hr"
            | "img"
            | "input"
            | "link"
            | "meta"
            | "source"
            | "track"
            | "wbr"
    )
}

fn is_block(name: &str) -> bool {
    matches!(
        name,
        "p" | "div"
            | "section"
            | "article"
            | "main"
            | "body"
            | "pre"
            | "table"
            | "ul"
            | "ol"
            | "dl"
            | "blockquote"
            | "figure"
            | "figcaption"
            | "details"
            | "summary"
            | "hr"
            | "address"
            | "fieldset"
            | "center"
    )
}

fn is_line_break(name: &str) -> bool {
    matches!(name, "li" | "tr" | "br" | "dt" | "dd" | "caption")
}

fn heading_level(name: &str) -> Option<u8> {
    match name {
        "h1" => Some(1),
        "h2" => Some(2),
        "h3" => Some(3),
        "h4" => Some(4),
        "h5" => Some(5),
        "h6" => Some(6),
        _ => None,
    }
}

impl State {
    fn in_main(&self) -> bool {
        self.main > 0
    }

    fn break_line(&mut self) {
        if let Some(l) = self.line.take()
            && !l.0.trim().is_empty()
        {
            self.lines.push((l.0.trim().to_string(), l.1, l.2));
        }
    }

    fn end_block(&mut self) {
        self.break_line();
        while self.lines.last().is_some_and(|l| l.0.trim().is_empty()) {
            self.lines.pop();
        }
        let lead = self
            .lines
            .iter()
            .take_while(|l| l.0.trim().is_empty())
            .count();
        self.lines.drain(..lead);
        if !self.lines.is_empty() {
            let main = self.in_main();
            self.pieces.push(Piece::Block {
                lines: std::mem::take(&mut self.lines),
                main,
            });
        }
    }

    fn text(&mut self, text: &str, line: usize) {
        let newlines = text.matches('\n').count();
        if self.in_title {
            self.title.get_or_insert_default().push_str(text);
            return;
        }
        if let Some((_, h)) = &mut self.heading {
            h.push_str(text);
            return;
        }
        if self.pre > 0 {
            let mut at = line.saturating_sub(newlines).max(1);
            for (i, part) in text.split('\n').enumerate() {
                if i > 0 {
                    // Keep blank lines of code: the block goes on.
                    let l = self.line.take().unwrap_or((String::new(), at, at));
                    self.lines.push(l);
                    at += 1;
                }
                let l = self.line.get_or_insert_with(|| (String::new(), at, at));
                l.0.push_str(part);
                l.2 = at;
            }
            return;
        }
        if text.trim().is_empty() {
            if let Some(l) = &mut self.line
                && !l.0.ends_with(' ')
            {
                l.0.push(' ');
            }
            return;
        }
        let first = line.saturating_sub(newlines).max(1);
        let l = self
            .line
            .get_or_insert_with(|| (String::new(), first, line));
        let mut words = text.split_whitespace();
        if text.starts_with(char::is_whitespace) && !l.0.is_empty() && !l.0.ends_with(' ') {
            l.0.push(' ');
        }
        if let Some(w) = words.next() {
            l.0.push_str(w);
        }
        for w in words {
            l.0.push(' ');
            l.0.push_str(w);
        }
        if text.ends_with(char::is_whitespace) {
            l.0.push(' ');
        }
        l.2 = line;
    }

    fn start(&mut self, name: &str, attrs: &[html5ever::Attribute], self_closing: bool) {
        let attr = |n: &str| {
            attrs
                .iter()
                .find(|a| &*a.name.local == n)
                .map(|a| a.value.to_string())
        };
        let role = attr("role").unwrap_or_default();
        let drop = is_dropped(name)
            || attr("hidden").is_some()
            || matches!(
                role.as_str(),
                "navigation" | "banner" | "contentinfo" | "search"
            );
        let main = name == "main" || role == "main";
        if self.dropped == 0 {
            if name == "title" && self.title.is_none() {
                self.in_title = true;
            } else if let Some(level) = heading_level(name) {
                self.end_block();
                self.heading = Some((level, String::new()));
            } else if is_block(name) {
                self.end_block();
            } else if is_line_break(name) {
                self.break_line();
            } else if matches!(name, "td" | "th")
                && let Some(l) = &mut self.line
            {
                l.0.push_str(" | ");
            }
        }
        if is_void(name) || self_closing || self.stack.len() >= MAX_DEPTH {
            return;
        }
        if main {
            // What precedes the main content is not part of it.
            self.end_block();
            self.saw_main = true;
        }
        self.stack.push((name.to_string(), drop, main));
        self.dropped += usize::from(drop);
        self.main += usize::from(main);
        self.pre += usize::from(name == "pre" && self.dropped == 0);
    }

    fn end(&mut self, name: &str) {
        if name == "title" {
            self.in_title = false;
        }
        if let Some((level, text)) = self.heading.take() {
            if heading_level(name).is_some() {
                let main = self.in_main();
                self.pieces.push(Piece::Heading {
                    level,
                    text: text.split_whitespace().collect::<Vec<_>>().join(" "),
                    main,
                });
            } else {
                self.heading = Some((level, text));
            }
        }
        let Some(pos) = self.stack.iter().rposition(|(n, _, _)| n == name) else {
            return;
        };
        if self.dropped == 0 && (is_block(name) || is_line_break(name)) {
            if is_block(name) {
                self.end_block();
            } else {
                self.break_line();
            }
        }
        let closed: Vec<_> = self.stack.drain(pos..).rev().collect();
        for (n, drop, main) in closed {
            if main {
                self.end_block();
            }
            self.dropped -= usize::from(drop);
            self.main -= usize::from(main);
            self.pre -= usize::from(n == "pre" && self.pre > 0 && self.dropped == 0);
        }
    }

    /// The outline: the rendered text with its source lines, headings and blocks.
    fn render(self) -> Outline {
        let keep_all = !self.saw_main;
        let mut text = String::new();
        let mut map = Vec::new();
        let mut items = Vec::new();
        let mut removed = crate::text::Removed::default();
        for piece in self.pieces {
            match piece {
                Piece::Heading {
                    level,
                    text: t,
                    main,
                } if keep_all || main => {
                    let (t, r) = crate::text::clean(&t);
                    removed.add(&r);
                    items.push(Item::Heading { level, text: t });
                }
                Piece::Block { lines, main } if keep_all || main => {
                    let first = map.len() + 1;
                    for (line, a, b) in lines {
                        let (line, r) = crate::text::clean(&line);
                        removed.add(&r);
                        text.push_str(&line);
                        text.push('\n');
                        map.push((a, b));
                    }
                    items.push(Item::Block(Block {
                        first,
                        last: map.len(),
                    }));
                    let end = map.last().map_or((1, 1), |m| (m.1, m.1));
                    text.push('\n');
                    map.push(end);
                }
                _ => {}
            }
        }
        let title = first_title(&items).or_else(|| {
            self.title
                .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
                .filter(|t| !t.is_empty())
        });
        Outline {
            title,
            items,
            removed,
            source_lines: Some(map),
            ..Outline::new(text)
        }
    }
}

impl TokenSink for Sink {
    type Handle = ();

    fn process_token(&self, token: Token, line: u64) -> TokenSinkResult<()> {
        let line = usize::try_from(line).unwrap_or(usize::MAX).max(1);
        let mut s = self.state.borrow_mut();
        match token {
            Token::TagToken(tag) => {
                let name = tag.name.to_string();
                match tag.kind {
                    TagKind::StartTag => {
                        s.start(&name, &tag.attrs, tag.self_closing);
                        if !tag.self_closing {
                            return match name.as_str() {
                                "script" => TokenSinkResult::RawData(RawKind::ScriptData),
                                "style" | "xmp" | "iframe" | "noembed" | "noframes" => {
                                    TokenSinkResult::RawData(RawKind::Rawtext)
                                }
                                "title" | "textarea" => TokenSinkResult::RawData(RawKind::Rcdata),
                                "plaintext" => TokenSinkResult::Plaintext,
                                _ => TokenSinkResult::Continue,
                            };
                        }
                    }
                    TagKind::EndTag => s.end(&name),
                }
            }
            Token::CharacterTokens(t) if s.dropped == 0 || s.in_title => s.text(&t, line),
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vault::chunk::chunk_outline;

    fn chunks(src: &str) -> Vec<(String, usize, usize, String)> {
        chunk_outline(outline(src), 200)
            .chunks
            .into_iter()
            .map(|c| (c.heading_path.join(" > "), c.line_start, c.line_end, c.text))
            .collect()
    }

    #[test]
    fn without_main_the_body_is_read_and_furniture_dropped() {
        let src = "<body>\n<header>Site name</header>\n<h1>T&amp;C</h1>\n<ul><li>one</li>\n<li>two</li></ul>\n<table><tr><th>k</th><th>v</th></tr>\n<tr><td>a</td><td>1</td></tr></table>\n<div hidden>secret</div><div role=\"navigation\">menu</div>\n<p>last<br>line</p>\n</body>";
        let got = chunks(src);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, "T&C");
        assert_eq!(got[0].3, "one\ntwo\n\nk | v\na | 1\n\nlast\nline");
        assert_eq!((got[0].1, got[0].2), (4, 9));
        let o = outline(src);
        assert_eq!(o.title.as_deref(), Some("T&C"));
    }

    #[test]
    fn the_title_element_is_the_title_without_h1() {
        let o = outline(
            "<html><head><title> My\n page </title></head><body><h2>Sub</h2><p>x</p></body></html>",
        );
        assert_eq!(o.title.as_deref(), Some("My page"));
    }
}
