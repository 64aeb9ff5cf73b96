//! PDF: the text layer of each page, the outline (bookmarks) as headings, read through
//! lopdf (objects, streams, fonts' encodings and content operators). Spans are **page
//! numbers** (1-based), not lines of the file.
//!
//! * **Text** ([`text`]) — each page's text-showing operators in content order, decoded
//!   by the font's encoding (its `ToUnicode` map when it has one). A vertical move of the
//!   text position starts a line; a move of more than [`text::PARAGRAPH_GAP`] line
//!   heights, and a page break, start a paragraph (a block). A move along the line, or a
//!   gap in a `TJ` array wider than [`text::WORD_GAP`] thousandths of an em, is a space.
//!   Text inside form XObjects, annotations and images (scans) is not read. A page
//!   listed twice in the page tree is read once.
//! * **Headings** ([`bookmarks`]) — the outline's entries at their depth (deeper than 6
//!   as 6), each at its destination page: before the page's first line that reads as its
//!   title (the line is then the heading's, not text), else at the page's start (after
//!   the headings placed on it before). Entries are read in outline order and placed by
//!   page ([`assemble`]).
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

mod bookmarks;
mod text;

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};

use lopdf::{DecompressError, Document, LoadOptions, Object, ObjectId};

use crate::vault::chunk::{Block, Item, Outline};

use bookmarks::{Mark, bookmarks, info_title};
use text::TextReader;

/// Pages a PDF may have.
const MAX_PAGES: usize = 5_000;
/// Objects a PDF may hold (those of its object streams included).
const MAX_OBJECTS: usize = 500_000;
/// Bytes one stream may decompress to.
const MAX_STREAM: usize = 16 << 20;
/// Bytes all the streams read may decompress to together: object streams while loading,
/// page contents and fonts' `ToUnicode` maps.
const MAX_DECODED: usize = 64 << 20;
/// Bytes of text a PDF may yield.
const MAX_TEXT: usize = 8 << 20;
/// Outline entries read at most (and name-tree nodes visited to resolve them).
const MAX_ENTRIES: usize = 10_000;
/// Why an encrypted PDF is refused.
const ENCRYPTED: &str = "the PDF is encrypted; the vault reads unencrypted PDFs only (its object streams are \
     decoded before any budget applies)";
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
    let mut reader = TextReader::new(&doc, MAX_DECODED.saturating_sub(decoded));
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
    let mut removed = reader.removed();
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
}
