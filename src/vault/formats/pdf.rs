//! PDF: the text layer of each page, the outline (bookmarks) as headings, read through
//! lopdf (objects, streams, fonts' encodings and content operators). Spans are **page
//! numbers** (1-based), not lines of the file.
//!
//! * **Text** — each page's text-showing operators in content order, decoded by the
//!   font's encoding (its `ToUnicode` map when it has one). A vertical move of the text
//!   position starts a line; a move of more than [`PARAGRAPH_GAP`] line heights, and a
//!   page break, start a paragraph (a block). A move along the line, or a gap in a `TJ`
//!   array wider than [`WORD_GAP`] thousandths of an em, is a space. Text inside form
//!   XObjects, annotations and images (scans) is not read.
//! * **Headings** — the outline's entries at their depth (deeper than 6 as 6), each at
//!   its destination page: before the page's first line that reads as its title (the
//!   line is then the heading's, not text), else at the page's start (after the headings
//!   placed on it before). Entries are read in outline order and placed by page.
//! * **Title** — the document information's `Title`, else the first top-level entry.
//!
//! A PDF is a tree of objects an agent may have written, so it is read under a budget,
//! and refused with the reason past it: encrypted ([`ENCRYPTED`]), more than
//! [`MAX_PAGES`] pages or [`MAX_OBJECTS`] objects, a stream decompressing to more than
//! [`MAX_STREAM`] bytes, all streams read together to more than [`MAX_DECODED`] bytes,
//! more than [`MAX_TEXT`] bytes of text. The outline is walked without recursion,
//! each entry once ([`MAX_ENTRIES`] at most), so a cyclic or deep outline ends; lopdf
//! bounds its own recursion and reference chains, and a panic inside it refuses the
//! file instead of ending the process.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};

use lopdf::content::Content;
use lopdf::{
    DecompressError, Dictionary, Document, Encoding, LoadOptions, Object, ObjectId,
    decode_text_string,
};

use crate::vault::chunk::{Block, Item, Outline};

/// Pages a PDF may have.
pub(crate) const MAX_PAGES: usize = 5_000;
/// Objects a PDF may hold (those of its object streams included).
pub(crate) const MAX_OBJECTS: usize = 500_000;
/// Bytes one stream may decompress to.
pub(crate) const MAX_STREAM: usize = 16 << 20;
/// Bytes all the streams read may decompress to together: object streams while loading,
/// page contents and fonts' `ToUnicode` maps.
pub(crate) const MAX_DECODED: usize = 64 << 20;
/// Bytes of text a PDF may yield.
pub(crate) const MAX_TEXT: usize = 8 << 20;
/// Outline entries read at most (and name-tree nodes visited to resolve them).
pub(crate) const MAX_ENTRIES: usize = 10_000;
/// Why an encrypted PDF is refused.
pub(crate) const ENCRYPTED: &str = "the PDF is encrypted; the vault reads unencrypted PDFs only (its object streams are \
     decoded before any budget applies)";
/// A vertical move over this many line heights ends a paragraph.
const PARAGRAPH_GAP: f32 = 1.6;
/// A `TJ` adjustment more negative than this (thousandths of an em) is a space.
const WORD_GAP: f32 = 150.0;
/// Longest heading kept, in characters.
const MAX_TITLE: usize = 200;

/// The outline of a PDF; `Err` with the reason when it is refused.
pub(crate) fn outline(bytes: &[u8]) -> Result<Outline, String> {
    // The trailer (or cross-reference stream) naming `/Encrypt` is never compressed.
    if bytes.windows(8).any(|w| w == b"/Encrypt") {
        return Err(ENCRYPTED.into());
    }
    catch_unwind(AssertUnwindSafe(|| read(bytes)))
        .unwrap_or_else(|_| Err("the PDF could not be read (its parser failed on it)".into()))
}

fn read(bytes: &[u8]) -> Result<Outline, String> {
    let (doc, decoded) = load(bytes)?;
    // Each page once: a page tree may list a page (or itself) again.
    let mut seen = HashSet::new();
    let pages: Vec<ObjectId> = (doc.page_iter())
        .filter(|p| seen.insert(*p))
        .take(MAX_PAGES + 1)
        .collect();
    if pages.len() > MAX_PAGES {
        return Err(format!(
            "the PDF has more than the {MAX_PAGES} pages the vault reads"
        ));
    }
    let mut reader = TextReader {
        doc: &doc,
        left: MAX_DECODED.saturating_sub(decoded),
        text: 0,
        fonts: HashMap::new(),
        removed: crate::text::Removed::default(),
    };
    let mut lines = Vec::with_capacity(pages.len());
    for &page in &pages {
        lines.push(reader.page(page)?);
    }
    let number: HashMap<ObjectId, usize> = (pages.iter().enumerate())
        .map(|(i, &page)| (page, i + 1))
        .collect();
    let mut marks = bookmarks(&doc, &number);
    let title =
        info_title(&doc).or_else(|| marks.iter().find(|m| m.level == 1).map(|m| m.title.clone()));
    let mut removed = reader.removed;
    for m in &mut marks {
        let (t, r) = crate::text::clean(&m.title);
        removed.add(&r);
        m.title = t;
    }
    let mut outline = assemble(lines, marks);
    outline.title = title.map(|t| crate::text::clean(&t).0);
    outline.removed = removed;
    Ok(outline)
}

/// What loading has cost so far (the filter below runs on the loading thread).
#[derive(Clone, Copy, Default)]
struct Loading {
    objects: usize,
    decoded: usize,
    over: Option<Over>,
}

/// Which budget a PDF went over.
#[derive(Clone, Copy, Debug)]
enum Over {
    Objects,
    Stream,
    Decoded,
}

impl Over {
    fn reason(self) -> String {
        match self {
            Over::Objects => {
                format!("the PDF holds more than the {MAX_OBJECTS} objects the vault reads")
            }
            Over::Stream => {
                format!("a stream of the PDF decompresses to more than {MAX_STREAM} bytes")
            }
            Over::Decoded => format!(
                "the PDF's streams decompress to more than the {MAX_DECODED} bytes the vault \
                 reads"
            ),
        }
    }
}

/// Whether `e` is lopdf refusing to decompress past a limit.
fn over_limit(e: &lopdf::Error) -> bool {
    matches!(
        e,
        lopdf::Error::Decompress(DecompressError::MemoryLimitExceeded { .. })
    )
}

thread_local! {
    static LOADING: Cell<Loading> = Cell::new(Loading::default());
}

/// The document and the bytes its object streams decompressed to.
fn load(bytes: &[u8]) -> Result<(Document, usize), String> {
    LOADING.with(|l| l.set(Loading::default()));
    let options = LoadOptions {
        max_decompressed_size: Some(MAX_STREAM),
        filter: Some(charge),
        ..LoadOptions::default()
    };
    let loaded = Document::load_mem_with_options(bytes, options);
    let cost = LOADING.with(|l| l.take());
    if let Some(over) = cost.over {
        return Err(over.reason());
    }
    match loaded {
        Ok(doc) => Ok((doc, cost.decoded)),
        Err(e) if over_limit(&e) => Err(Over::Stream.reason()),
        Err(e) => Err(format!("not a readable PDF ({})", short(&e.to_string()))),
    }
}

/// The load filter: counts every object and charges each object stream's decompressed
/// bytes to [`MAX_DECODED`]; past either, objects are dropped and the load is refused.
fn charge(id: ObjectId, object: &mut Object) -> Option<(ObjectId, Object)> {
    LOADING.with(|l| {
        let mut cost = l.get();
        if cost.over.is_some() {
            return None;
        }
        cost.objects += 1;
        if cost.objects > MAX_OBJECTS {
            cost.over = Some(Over::Objects);
        } else if let Object::Stream(s) = &*object
            && s.dict.has_type(b"ObjStm")
        {
            let left = MAX_DECODED.saturating_sub(cost.decoded);
            match s.decompressed_content_with_limit(left.min(MAX_STREAM)) {
                Ok(data) => cost.decoded += data.len(),
                Err(e) if over_limit(&e) && left > MAX_STREAM => cost.over = Some(Over::Stream),
                Err(e) if over_limit(&e) => cost.over = Some(Over::Decoded),
                Err(_) => {}
            }
        }
        l.set(cost);
        cost.over.is_none().then(|| (id, object.clone()))
    })
}

/// Reads pages' text, charging what it decompresses to what is left of the budget.
struct TextReader<'a> {
    doc: &'a Document,
    left: usize,
    text: usize,
    /// Each font's encoding, by the address of its dictionary (read once).
    fonts: HashMap<*const Dictionary, Option<Encoding<'a>>>,
    removed: crate::text::Removed,
}

impl<'a> TextReader<'a> {
    fn spend(&mut self, n: usize) -> Result<(), String> {
        self.left = self
            .left
            .checked_sub(n)
            .ok_or_else(|| Over::Decoded.reason())?;
        Ok(())
    }

    /// The lines of one page (`""` between paragraphs).
    fn page(&mut self, page: ObjectId) -> Result<Vec<String>, String> {
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

/// An outline entry: its depth (1-based, at most 6), title and page.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mark {
    level: u8,
    title: String,
    page: usize,
}

/// The outline's entries in outline order, each with the page its destination names
/// (entries whose destination is no page of the document are left out).
fn bookmarks(doc: &Document, pages: &HashMap<ObjectId, usize>) -> Vec<Mark> {
    let Ok(catalog) = doc.catalog() else {
        return Vec::new();
    };
    let Ok(root) = catalog
        .get_deref(b"Outlines", doc)
        .and_then(Object::as_dict)
    else {
        return Vec::new();
    };
    let mut names = Names::new(doc, catalog);
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    // Pre-order without recursion: a node's children come before its next sibling.
    let mut stack: Vec<(ObjectId, u8)> = Vec::new();
    if let Ok(first) = root.get(b"First").and_then(Object::as_reference) {
        stack.push((first, 1));
    }
    while let Some((id, level)) = stack.pop() {
        if !seen.insert(id) || seen.len() > MAX_ENTRIES {
            continue;
        }
        let Ok(node) = doc.get_dictionary(id) else {
            continue;
        };
        if let Ok(next) = node.get(b"Next").and_then(Object::as_reference) {
            stack.push((next, level));
        }
        if let Ok(first) = node.get(b"First").and_then(Object::as_reference) {
            stack.push((first, level.saturating_add(1)));
        }
        let title = node
            .get_deref(b"Title", doc)
            .and_then(decode_text_string)
            .map(|t| title_of(&t))
            .unwrap_or_default();
        let dest = match node.get_deref(b"Dest", doc) {
            Ok(d) => Some(d),
            Err(_) => node
                .get_deref(b"A", doc)
                .and_then(Object::as_dict)
                .ok()
                .filter(|a| {
                    a.get(b"S")
                        .and_then(Object::as_name)
                        .is_ok_and(|s| s == b"GoTo")
                })
                .and_then(|a| a.get_deref(b"D", doc).ok()),
        };
        let page = dest
            .and_then(|d| names.page_of(d))
            .and_then(|p| pages.get(&p).copied());
        if let Some(page) = page
            && !title.is_empty()
        {
            out.push(Mark {
                level: level.min(6),
                title,
                page,
            });
        }
    }
    out
}

/// A title's whitespace collapsed, cut at [`MAX_TITLE`] characters.
fn title_of(raw: &str) -> String {
    let t = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    match t.char_indices().nth(MAX_TITLE) {
        Some((i, _)) => t[..i].to_string(),
        None => t,
    }
}

/// Named destinations (the catalog's `Dests` dictionary and `Names` › `Dests` tree),
/// read on the first name an entry uses.
struct Names<'a> {
    doc: &'a Document,
    catalog: &'a Dictionary,
    map: Option<HashMap<Vec<u8>, &'a Object>>,
}

impl<'a> Names<'a> {
    fn new(doc: &'a Document, catalog: &'a Dictionary) -> Self {
        Names {
            doc,
            catalog,
            map: None,
        }
    }

    /// The page a destination names: an array opening with the page, a dictionary's
    /// `D`, or a name or string looked up among the named destinations.
    fn page_of(&mut self, dest: &'a Object) -> Option<ObjectId> {
        let doc = self.doc;
        let resolve = |o: &'a Object| doc.dereference(o).ok().map(|(_, o)| o);
        let mut dest = resolve(dest)?;
        for _ in 0..3 {
            match dest {
                Object::Array(a) => return a.first()?.as_reference().ok(),
                Object::Dictionary(d) => dest = resolve(d.get(b"D").ok()?)?,
                Object::Name(n) | Object::String(n, _) => {
                    dest = resolve(self.named().get(n.as_slice()).copied()?)?
                }
                _ => return None,
            }
        }
        None
    }

    fn named(&mut self) -> &HashMap<Vec<u8>, &'a Object> {
        let (doc, catalog) = (self.doc, self.catalog);
        self.map.get_or_insert_with(|| {
            let mut map = HashMap::new();
            if let Ok(dests) = catalog.get_deref(b"Dests", doc).and_then(Object::as_dict) {
                for (k, v) in dests.iter() {
                    map.insert(k.clone(), v);
                }
            }
            let tree = catalog
                .get_deref(b"Names", doc)
                .and_then(Object::as_dict)
                .and_then(|n| n.get_deref(b"Dests", doc))
                .and_then(Object::as_dict);
            let Ok(tree) = tree else { return map };
            // The name tree, each node once, without recursion.
            let mut seen = HashSet::new();
            let mut stack = vec![tree];
            while let Some(node) = stack.pop() {
                if seen.len() > MAX_ENTRIES {
                    break;
                }
                if let Ok(kids) = node.get_deref(b"Kids", doc).and_then(Object::as_array) {
                    for kid in kids {
                        if let Ok(id) = kid.as_reference()
                            && seen.insert(id)
                            && let Ok(d) = doc.get_dictionary(id)
                        {
                            stack.push(d);
                        }
                    }
                }
                if let Ok(pairs) = node.get_deref(b"Names", doc).and_then(Object::as_array) {
                    for pair in pairs.chunks_exact(2) {
                        if let Ok(name) = pair[0].as_str() {
                            map.entry(name.to_vec()).or_insert(&pair[1]);
                        }
                    }
                }
            }
            map
        })
    }
}

/// The document information's `Title`, when it has one.
fn info_title(doc: &Document) -> Option<String> {
    let info = doc.trailer.get_deref(b"Info", doc).ok()?.as_dict().ok()?;
    let title = title_of(&decode_text_string(info.get_deref(b"Title", doc).ok()?).ok()?);
    (!title.is_empty()).then_some(title)
}

/// A line and a title compared without case, punctuation or a leading section number.
fn reads_as(line: &str, title: &str) -> bool {
    fn key(s: &str) -> String {
        let words: Vec<String> = s
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        let start = words
            .iter()
            .position(|w| !w.chars().all(|c| c.is_ascii_digit()))
            .unwrap_or(words.len());
        words[start..].join(" ")
    }
    let k = key(title);
    !k.is_empty() && key(line) == k
}

/// The pages' lines and the outline's entries as one outline: a blank line after each
/// page, each entry placed on its page (see the module's doc), spans mapped to pages.
fn assemble(pages: Vec<Vec<String>>, mut marks: Vec<Mark>) -> Outline {
    marks.sort_by_key(|m| m.page);
    let mut marks = marks.into_iter().peekable();
    let mut text = String::new();
    let mut map = Vec::new();
    let mut items = Vec::new();
    let mut open: Option<Block> = None;
    let close = |open: &mut Option<Block>, items: &mut Vec<Item>| {
        if let Some(b) = open.take() {
            items.push(Item::Block(b));
        }
    };
    for (i, lines) in pages.iter().enumerate() {
        let page = i + 1;
        // Each entry of this page: the line it heads, and whether that line is its title.
        let mut placed: Vec<(usize, Mark, bool)> = Vec::new();
        let mut cursor = 0;
        while let Some(m) = marks.next_if(|m| m.page == page) {
            match lines[cursor..].iter().position(|l| reads_as(l, &m.title)) {
                Some(k) => {
                    placed.push((cursor + k, m, true));
                    cursor += k + 1;
                }
                None => placed.push((cursor, m, false)),
            }
        }
        let mut placed = placed.into_iter().peekable();
        for (k, line) in lines.iter().enumerate() {
            let mut title_line = false;
            while let Some((_, m, is_title)) = placed.next_if(|p| p.0 == k) {
                close(&mut open, &mut items);
                items.push(Item::Heading {
                    level: m.level,
                    text: m.title,
                });
                title_line |= is_title;
            }
            text.push_str(line);
            text.push('\n');
            map.push((page, page));
            let n = map.len();
            if title_line || line.is_empty() {
                close(&mut open, &mut items);
            } else {
                match &mut open {
                    Some(b) => b.last = n,
                    None => open = Some(Block { first: n, last: n }),
                }
            }
        }
        close(&mut open, &mut items);
        for (_, m, _) in placed {
            items.push(Item::Heading {
                level: m.level,
                text: m.title,
            });
        }
        text.push('\n');
        map.push((page, page));
    }
    Outline {
        items,
        source_lines: Some(map),
        ..Outline::new(text)
    }
}

fn short(s: &str) -> String {
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(level: u8, title: &str, page: usize) -> Mark {
        Mark {
            level,
            title: title.into(),
            page,
        }
    }

    #[test]
    fn titles_match_lines_without_case_punctuation_or_section_numbers() {
        assert!(reads_as("1.2 From Source", "From source"));
        assert!(reads_as("From source", "2 From source"));
        assert!(!reads_as("From source code", "From source"));
        assert!(!reads_as("1 Introduction ........ 3", "Introduction"));
        assert!(!reads_as("12", "12"), "no words left");
    }

    #[test]
    fn entries_head_their_title_line_or_their_page() {
        let pages = vec![
            vec!["Guide".into(), "Intro text.".into()],
            vec![
                "More intro.".into(),
                String::new(),
                "1 Install".into(),
                "Steps.".into(),
            ],
            vec!["Usage text.".into()],
        ];
        let marks = vec![
            mark(1, "Guide", 1),
            mark(2, "Install", 2),
            mark(2, "Usage", 3),
        ];
        let o = assemble(pages, marks);
        let doc = crate::vault::chunk::chunk_outline(o, 200);
        let got: Vec<(Vec<String>, usize, usize, String)> = doc
            .chunks
            .into_iter()
            .map(|c| (c.heading_path, c.line_start, c.line_end, c.text))
            .collect();
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            got,
            vec![
                (path(&["Guide"]), 1, 2, "Intro text.\n\nMore intro.".into()),
                (path(&["Guide", "Install"]), 2, 2, "Steps.".into()),
                (path(&["Guide", "Usage"]), 3, 3, "Usage text.".into()),
            ]
        );
    }

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
