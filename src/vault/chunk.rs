//! Heading-aware Markdown chunking: owns how a Markdown file becomes the
//! [`Chunk`]s that are embedded and searched.
//!
//! # Rules
//!
//! * **Front matter** — a `---` (YAML) or `+++` (TOML) block opening the file
//!   and closed by the same delimiter (YAML may also close with `...`) is
//!   metadata, not text. Simple `key: value` / `key = value` lines are parsed
//!   into [`ChunkedDoc::front_matter`]; nested structures are skipped.
//! * **Title** — front matter `title`, else the text of the first level-1
//!   heading, else none.
//! * **Sections** — every top-level heading (ATX `#` or setext) opens a
//!   section that runs to the next top-level heading. Each section is chunked
//!   on its own, so a chunk never straddles a heading. Headings inside code
//!   fences, lists or block quotes are not headings (pulldown-cmark decides).
//! * **Heading path** — the chain of headings above a section
//!   (`["Guide", "Install", "From source"]`); a heading pops every heading of
//!   equal or deeper level first. Content before the first heading has an
//!   empty path.
//! * **Text** — [`Chunk::text`] is the section content only (heading lines are
//!   excluded), taken verbatim from the source lines `line_start..=line_end`
//!   (1-based, inclusive, exact in the file; a trailing `\r` is dropped).
//!   [`Chunk::embedding_text`] prefixes the heading path, which is what should
//!   be embedded: a section's heading says what its content is about.
//! * **Budget** — chunks stay within [`TOKEN_BUDGET`] approximate tokens (see
//!   [`approx_tokens`]) including the heading path, so that they fit the
//!   model's 256 WordPiece tokens with room for `[CLS]`/`[SEP]`.
//! * **Splitting** — a section over budget is split at top-level block
//!   boundaries (paragraphs, lists, tables, code blocks, ...), greedily,
//!   with an **overlap of one block**: the next chunk starts with the last
//!   block of the previous one, when that block and the following one fit
//!   together. A fenced code block is never split *unless it alone exceeds the
//!   budget*; such an oversize block (code fence, giant paragraph, list or
//!   table) is split by lines with an overlap of one line, so a piece of a
//!   split fence may lack its opening or closing fence line. A single line
//!   over budget is cut at character boundaries (preferring whitespace) into
//!   pieces that all carry that line's number.
//! * **Encoding** — bytes that are not UTF-8 are decoded lossily (U+FFFD); this
//!   never changes line numbers. Empty or whitespace-only files give no chunks,
//!   and a section with no content under its heading gives none either (its
//!   heading still appears in the paths of its subsections).
//!
//! Changing any of this changes chunk boundaries: bump [`CHUNKER_VERSION`].

use std::collections::BTreeMap;
use std::ops::Range;

use pulldown_cmark::{Event, Options, Parser, Tag};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Version of the chunking rules; stored in the index manifest so an index
/// built with other rules is detected and rebuilt.
pub const CHUNKER_VERSION: u32 = 2;

/// Maximum approximate tokens of a chunk's [`Chunk::embedding_text`].
///
/// Calibrated against the model's WordPiece tokenizer on ~7,500 paragraphs of
/// Markdown READMEs: real tokens / [`approx_tokens`] is 0.75 on average, 0.96
/// at the 95th percentile, 1.05 at the 99th and 1.35 at worst (hex strings),
/// so 200 approximate tokens fit the model's 256-token window (254 after
/// `[CLS]`/`[SEP]`) in all but pathological cases, where the model truncates
/// the tail.
pub const TOKEN_BUDGET: usize = 200;

/// Heading paths never take more than half the budget: the text of a chunk
/// always gets at least `budget / 2` tokens.
const MIN_TEXT_SHARE_DIVISOR: usize = 2;

/// Separator of [`Chunk::heading_path_string`].
pub(crate) const HEADING_SEPARATOR: &str = " > ";

/// One piece of a Markdown file, ready to embed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    /// The section content, verbatim from the source lines
    /// `line_start..=line_end` (or part of one line when a single line was
    /// over budget).
    pub(crate) text: String,
    /// Headings above this chunk, outermost first; empty before the first heading.
    pub(crate) heading_path: Vec<String>,
    /// First source line of `text`, 1-based.
    pub(crate) line_start: usize,
    /// Last source line of `text`, 1-based, inclusive.
    pub(crate) line_end: usize,
    /// sha256 of `text`, lowercase hex.
    pub(crate) content_hash: String,
}

impl Chunk {
    /// The heading path rendered as `Guide > Install > From source`.
    pub(crate) fn heading_path_string(&self) -> String {
        self.heading_path.join(HEADING_SEPARATOR)
    }

    /// What to embed: the heading path, a blank line, then the text; just the
    /// text when there is no heading.
    pub fn embedding_text(&self) -> String {
        if self.heading_path.is_empty() {
            self.text.clone()
        } else {
            format!("{}\n\n{}", self.heading_path_string(), self.text)
        }
    }
}

/// The result of chunking one file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkedDoc {
    /// Front matter `title`, else the first level-1 heading.
    pub(crate) title: Option<String>,
    /// Simple `key: value` pairs of the front matter, if the file has one.
    pub(crate) front_matter: Option<BTreeMap<String, String>>,
    /// The chunks in file order.
    pub chunks: Vec<Chunk>,
    /// Hidden characters removed from the file before chunking ([`crate::text`]).
    #[serde(default)]
    pub(crate) removed: crate::text::Removed,
}

/// Approximate WordPiece token count of `text`, cheap and model-free.
///
/// Mirrors BERT's pre-tokenisation: every punctuation or symbol character is
/// one token; CJK ideographs are one token each; a run of letters/digits
/// counts one token per 3 characters (rounded up), or per 2 when it contains a
/// digit (hashes, versions, identifiers split into many pieces). Whitespace is
/// free. It over-estimates English prose (real ≈ 0.75 × this) so the budget is
/// conservative; see [`TOKEN_BUDGET`] for the calibration.
pub fn approx_tokens(text: &str) -> usize {
    let mut counter = TokenCounter::default();
    text.chars().for_each(|ch| counter.push(ch));
    counter.total()
}

/// Incremental form of [`approx_tokens`].
#[derive(Default)]
struct TokenCounter {
    done: usize,
    run: usize,
    digit: bool,
}

impl TokenCounter {
    fn push(&mut self, ch: char) {
        if ch.is_alphanumeric() && !is_cjk(ch) {
            self.run += 1;
            self.digit |= ch.is_numeric();
        } else {
            self.done += self.run_tokens();
            self.run = 0;
            self.digit = false;
            if !ch.is_whitespace() {
                self.done += 1;
            }
        }
    }

    fn run_tokens(&self) -> usize {
        if self.digit {
            self.run.div_ceil(2)
        } else {
            self.run.div_ceil(3)
        }
    }

    fn total(&self) -> usize {
        self.done + self.run_tokens()
    }
}

fn is_cjk(ch: char) -> bool {
    matches!(ch as u32,
        0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FA1F)
}

/// Chunks a Markdown file with the default [`TOKEN_BUDGET`].
pub fn chunk_markdown(source: &[u8]) -> ChunkedDoc {
    chunk_markdown_with_budget(source, TOKEN_BUDGET)
}

/// Chunks a Markdown file keeping every chunk's [`Chunk::embedding_text`]
/// within `budget` approximate tokens (at least 16).
pub(crate) fn chunk_markdown_with_budget(source: &[u8], budget: usize) -> ChunkedDoc {
    // The one text policy, before anything is split: chunks, headings, title and front
    // matter are all read by agents. Newlines are kept, so line numbers stay exact.
    let (text, removed) = crate::text::clean_document(&String::from_utf8_lossy(source));
    let mut outline = markdown_outline(text);
    outline.removed = removed;
    chunk_outline(outline, budget)
}

/// The outline of a (cleaned) Markdown text: front matter, title, headings and
/// top-level blocks.
pub(crate) fn markdown_outline(text: String) -> Outline {
    let lines = LineIndex::new(&text);
    let (front_matter, body_start) = split_front_matter(&lines);
    let items = top_level_items(&lines, body_start);
    let title = front_matter
        .as_ref()
        .and_then(|fm| fm.get("title"))
        .filter(|t| !t.is_empty())
        .cloned()
        .or_else(|| first_title(&items));
    Outline {
        title,
        front_matter,
        items,
        ..Outline::new(text)
    }
}

/// The text of the first level-1 heading among `items`.
pub(crate) fn first_title(items: &[Item]) -> Option<String> {
    items.iter().find_map(|i| match i {
        Item::Heading { level: 1, text } if !text.is_empty() => Some(text.clone()),
        _ => None,
    })
}

/// A document as the chunker sees it, whatever its format ([`super::formats`]): a text
/// whose lines the chunks are cut from, and its headings and blocks in order.
#[derive(Debug, Default)]
pub(crate) struct Outline {
    /// The text chunks are cut from (for Markdown, reST, AsciiDoc, plain text and code
    /// the cleaned file itself; for HTML and notebooks the text rendered from it).
    pub(crate) text: String,
    /// Headings, blocks (line spans of [`Self::text`]) and section ends, in order.
    pub(crate) items: Vec<Item>,
    pub(crate) title: Option<String>,
    pub(crate) front_matter: Option<BTreeMap<String, String>>,
    pub(crate) removed: crate::text::Removed,
    /// When [`Self::text`] is rendered: for each of its lines, the first and last line
    /// of the source it came from (a cell for notebooks). `None`: the text is the source.
    pub(crate) source_lines: Option<Vec<(usize, usize)>>,
}

impl Outline {
    pub(crate) fn new(text: String) -> Outline {
        Outline {
            text,
            ..Outline::default()
        }
    }
}

/// Chunks an [`Outline`] keeping every chunk's [`Chunk::embedding_text`] within
/// `budget` approximate tokens (at least 16); spans are mapped back to the source.
pub(crate) fn chunk_outline(outline: Outline, budget: usize) -> ChunkedDoc {
    let budget = budget.max(16);
    let lines = LineIndex::new(&outline.text);
    let mut chunks = Vec::new();
    let mut stack: Vec<(u8, String)> = Vec::new();
    let mut blocks: Vec<Block> = Vec::new();
    for item in outline.items {
        match item {
            Item::Heading { level, text } => {
                flush_section(&lines, &stack, &mut blocks, budget, &mut chunks);
                while stack.last().is_some_and(|(l, _)| *l >= level) {
                    stack.pop();
                }
                stack.push((level, text));
            }
            Item::Leave { level } => {
                flush_section(&lines, &stack, &mut blocks, budget, &mut chunks);
                while stack.last().is_some_and(|(l, _)| *l >= level) {
                    stack.pop();
                }
            }
            Item::Block(b) => blocks.push(b),
        }
    }
    flush_section(&lines, &stack, &mut blocks, budget, &mut chunks);
    if let Some(map) = &outline.source_lines {
        for c in &mut chunks {
            c.line_start = map.get(c.line_start - 1).map_or(c.line_start, |m| m.0);
            c.line_end = map.get(c.line_end - 1).map_or(c.line_end, |m| m.1);
        }
    }
    ChunkedDoc {
        title: outline.title,
        front_matter: outline.front_matter,
        chunks,
        removed: outline.removed,
    }
}

/// Byte offset ↔ 1-based line number over the decoded text.
struct LineIndex<'a> {
    text: &'a str,
    /// `starts[i]` is the byte offset where line `i + 1` begins.
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    fn new(text: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        // A final newline does not open another line.
        if starts.len() > 1 && *starts.last().unwrap_or(&0) == text.len() {
            starts.pop();
        }
        LineIndex { text, starts }
    }

    fn count(&self) -> usize {
        self.starts.len()
    }

    /// Line holding byte `pos`.
    fn line_of(&self, pos: usize) -> usize {
        self.starts.partition_point(|&s| s <= pos).max(1)
    }

    /// Byte range of line `line` without its `\n` (and `\r`).
    fn range(&self, line: usize) -> Range<usize> {
        let start = self.starts[line - 1];
        let mut end = self
            .starts
            .get(line)
            .map_or(self.text.len(), |&next| next - 1);
        if end > start && self.text.as_bytes()[end - 1] == b'\n' {
            end -= 1;
        }
        if end > start && self.text.as_bytes()[end - 1] == b'\r' {
            end -= 1;
        }
        start..end
    }

    fn line(&self, line: usize) -> &'a str {
        &self.text[self.range(line)]
    }

    /// Lines `first..=last` verbatim, without the final line break.
    fn span(&self, first: usize, last: usize) -> &'a str {
        &self.text[self.starts[first - 1]..self.range(last).end]
    }
}

/// Detects front matter; returns its parsed pairs and the byte offset where
/// the Markdown body starts.
fn split_front_matter(lines: &LineIndex) -> (Option<BTreeMap<String, String>>, usize) {
    if lines.text.is_empty() {
        return (None, 0);
    }
    let first = lines.line(1).trim_start_matches('\u{feff}').trim_end();
    let (yaml, closers): (bool, &[&str]) = match first {
        "---" => (true, &["---", "..."]),
        "+++" => (false, &["+++"]),
        _ => return (None, 0),
    };
    let Some(close) = (2..=lines.count()).find(|&l| closers.contains(&lines.line(l).trim_end()))
    else {
        return (None, 0);
    };
    let mut map = BTreeMap::new();
    for l in 2..close {
        let line = lines.line(l);
        if line.starts_with([' ', '\t', '-', '#', '[']) {
            continue;
        }
        let pair = if yaml {
            line.split_once(':')
        } else {
            line.split_once('=')
        };
        let Some((key, value)) = pair else { continue };
        let key = key.trim();
        let value = unquote(value.trim());
        if key.is_empty() || value.is_empty() {
            continue;
        }
        map.insert(key.to_string(), value.to_string());
    }
    let body_start = lines.starts.get(close).copied().unwrap_or(lines.text.len());
    (Some(map), body_start)
}

fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

/// A block of an [`Outline`]: a 1-based inclusive line span of its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Block {
    pub(crate) first: usize,
    pub(crate) last: usize,
}

/// One entry of an [`Outline`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    /// A heading: it ends every open heading of this level or deeper, then opens.
    Heading { level: u8, text: String },
    /// A block of the current section.
    Block(Block),
    /// The end of every open heading of this level or deeper (code: an item's body ends).
    Leave { level: u8 },
}

/// The top-level headings and blocks of the body, in order.
fn top_level_items(lines: &LineIndex, body_start: usize) -> Vec<Item> {
    let body = &lines.text[body_start..];
    let mut opts = Options::empty();
    opts.insert(Options::ENABLE_TABLES);
    opts.insert(Options::ENABLE_STRIKETHROUGH);
    opts.insert(Options::ENABLE_TASKLISTS);
    opts.insert(Options::ENABLE_FOOTNOTES);

    let span = |r: &Range<usize>| -> Block {
        let first = lines.line_of(body_start + r.start);
        let mut last = lines.line_of(body_start + r.end.max(r.start + 1) - 1);
        while last > first && lines.line(last).trim().is_empty() {
            last -= 1;
        }
        Block { first, last }
    };

    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut open: Option<(Range<usize>, Option<u8>)> = None;
    let mut heading_text = String::new();
    for (event, range) in Parser::new_ext(body, opts).into_offset_iter() {
        match event {
            Event::Start(tag) => {
                if depth == 0 {
                    let level = match &tag {
                        Tag::Heading { level, .. } => Some(*level as u8),
                        _ => None,
                    };
                    heading_text.clear();
                    open = Some((range.clone(), level));
                }
                depth += 1;
            }
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                if depth == 0
                    && let Some((r, level)) = open.take()
                {
                    match level {
                        Some(level) => items.push(Item::Heading {
                            level,
                            text: heading_text
                                .split_whitespace()
                                .collect::<Vec<_>>()
                                .join(" "),
                        }),
                        None => items.push(Item::Block(span(&r))),
                    }
                }
            }
            Event::Text(t) | Event::Code(t) | Event::InlineMath(t) | Event::DisplayMath(t) => {
                if open.as_ref().is_some_and(|(_, l)| l.is_some()) {
                    heading_text.push_str(&t);
                } else if depth == 0 && !t.trim().is_empty() {
                    items.push(Item::Block(span(&range)));
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if open.as_ref().is_some_and(|(_, l)| l.is_some()) {
                    heading_text.push(' ');
                }
            }
            _ => {
                if depth == 0 {
                    items.push(Item::Block(span(&range)));
                }
            }
        }
    }
    items
}

/// A packable piece of a section: a block, a line, or part of a line.
struct Unit {
    first: usize,
    last: usize,
    tokens: usize,
}

/// Chunks the blocks of one section and clears them.
fn flush_section(
    lines: &LineIndex,
    stack: &[(u8, String)],
    blocks: &mut Vec<Block>,
    budget: usize,
    out: &mut Vec<Chunk>,
) {
    if blocks.is_empty() {
        return;
    }
    let path: Vec<String> = stack.iter().map(|(_, t)| t.clone()).collect();
    let path_tokens = if path.is_empty() {
        0
    } else {
        approx_tokens(&path.join(HEADING_SEPARATOR))
    };
    let text_budget = budget
        .saturating_sub(path_tokens)
        .max(budget / MIN_TEXT_SHARE_DIVISOR);

    let mut pending: Vec<Unit> = Vec::new();
    for b in blocks.drain(..) {
        let tokens = approx_tokens(lines.span(b.first, b.last));
        if tokens <= text_budget {
            pending.push(Unit {
                first: b.first,
                last: b.last,
                tokens,
            });
            continue;
        }
        // Oversize block: what is pending is chunked first, then the block by lines.
        pack(lines, &path, &pending, text_budget, out);
        pending.clear();
        let mut line_units: Vec<Unit> = Vec::new();
        for l in b.first..=b.last {
            let tokens = approx_tokens(lines.line(l));
            if tokens <= text_budget {
                line_units.push(Unit {
                    first: l,
                    last: l,
                    tokens,
                });
            } else {
                pack(lines, &path, &line_units, text_budget, out);
                line_units.clear();
                split_long_line(lines.line(l), l, &path, text_budget, out);
            }
        }
        pack(lines, &path, &line_units, text_budget, out);
    }
    pack(lines, &path, &pending, text_budget, out);
}

/// Greedy packing of consecutive units into chunks of at most `budget`
/// tokens, each chunk after the first starting with the previous chunk's last
/// unit when that unit and the next one fit together.
fn pack(lines: &LineIndex, path: &[String], units: &[Unit], budget: usize, out: &mut Vec<Chunk>) {
    let n = units.len();
    let mut i = 0;
    while i < n {
        let mut j = i;
        let mut total = units[i].tokens;
        while j + 1 < n && total + units[j + 1].tokens <= budget {
            j += 1;
            total += units[j].tokens;
        }
        push_chunk(
            lines.span(units[i].first, units[j].last),
            path,
            units[i].first,
            units[j].last,
            out,
        );
        if j + 1 >= n {
            break;
        }
        i = if j > i && units[j].tokens + units[j + 1].tokens <= budget {
            j
        } else {
            j + 1
        };
    }
}

/// Cuts one over-budget line into pieces of at most `budget` tokens,
/// preferring to cut before whitespace.
fn split_long_line(
    line: &str,
    line_no: usize,
    path: &[String],
    budget: usize,
    out: &mut Vec<Chunk>,
) {
    let mut start = 0;
    while start < line.len() {
        let rest = &line[start..];
        let mut counter = TokenCounter::default();
        let mut cut = rest.len();
        let mut last_ws = None;
        for (idx, ch) in rest.char_indices() {
            counter.push(ch);
            if counter.total() > budget {
                cut = idx;
                break;
            }
            if ch.is_whitespace() && idx > 0 {
                last_ws = Some(idx);
            }
        }
        if cut < rest.len() {
            if let Some(ws) = last_ws {
                cut = ws;
            }
            if cut == 0 {
                cut = rest.chars().next().map_or(rest.len(), char::len_utf8);
            }
        }
        push_chunk(&rest[..cut], path, line_no, line_no, out);
        start += cut;
    }
}

fn push_chunk(text: &str, path: &[String], first: usize, last: usize, out: &mut Vec<Chunk>) {
    if text.trim().is_empty() {
        return;
    }
    out.push(Chunk {
        text: text.to_string(),
        heading_path: path.to_vec(),
        line_start: first,
        line_end: last,
        content_hash: hex::encode(Sha256::digest(text.as_bytes())),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every chunk's text must equal the source lines it claims.
    fn assert_spans_exact(source: &str, doc: &ChunkedDoc) {
        let lines: Vec<&str> = source.split('\n').collect();
        for c in &doc.chunks {
            assert!(c.line_start >= 1 && c.line_start <= c.line_end, "{c:?}");
            let joined = lines[c.line_start - 1..c.line_end].join("\n");
            let span = joined.strip_suffix('\r').unwrap_or(&joined).to_string();
            if c.line_start == c.line_end && c.text != span {
                assert!(
                    span.contains(&c.text),
                    "piece {:?} not in line {}",
                    c.text,
                    c.line_start
                );
            } else {
                assert_eq!(
                    c.text, span,
                    "chunk text differs from lines {}..={}",
                    c.line_start, c.line_end
                );
            }
            assert_eq!(
                c.content_hash,
                hex::encode(Sha256::digest(c.text.as_bytes()))
            );
            assert!(
                approx_tokens(&c.embedding_text()) <= TOKEN_BUDGET,
                "over budget: {c:?}"
            );
        }
    }

    #[test]
    fn nested_headings_give_paths_and_never_straddle() {
        let src = "# Guide\n\nIntro text.\n\n## Install\n\nUse cargo.\n\n### From source\n\nClone it.\n\n## Usage\n\nRun it.\n";
        let doc = chunk_markdown(src.as_bytes());
        assert_spans_exact(src, &doc);
        assert_eq!(doc.title.as_deref(), Some("Guide"));
        let got: Vec<(String, &str, usize, usize)> = doc
            .chunks
            .iter()
            .map(|c| {
                (
                    c.heading_path_string(),
                    c.text.as_str(),
                    c.line_start,
                    c.line_end,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("Guide".to_string(), "Intro text.", 3, 3),
                ("Guide > Install".to_string(), "Use cargo.", 7, 7),
                (
                    "Guide > Install > From source".to_string(),
                    "Clone it.",
                    11,
                    11
                ),
                ("Guide > Usage".to_string(), "Run it.", 15, 15),
            ]
        );
        assert_eq!(
            doc.chunks[2].embedding_text(),
            "Guide > Install > From source\n\nClone it."
        );
    }

    #[test]
    fn code_fence_hash_lines_are_not_headings() {
        let src = "# Title\n\nBefore.\n\n```bash\n# install deps\napt-get install foo\n## not a heading\n```\n\nAfter.\n";
        let doc = chunk_markdown(src.as_bytes());
        assert_spans_exact(src, &doc);
        assert_eq!(doc.chunks.len(), 1, "{:?}", doc.chunks);
        let c = &doc.chunks[0];
        assert_eq!(c.heading_path, vec!["Title"]);
        assert_eq!((c.line_start, c.line_end), (3, 11));
        assert!(c.text.contains("# install deps") && c.text.contains("## not a heading"));
    }

    #[test]
    fn tables_stay_whole_and_keep_lines() {
        let src = "## Options\n\n| name | default |\n| --- | --- |\n| `threads` | all cores |\n| `batch` | 32 |\n\nText after.\n";
        let doc = chunk_markdown(src.as_bytes());
        assert_spans_exact(src, &doc);
        assert_eq!(doc.title, None, "no H1, no front matter");
        assert_eq!(doc.chunks.len(), 1);
        assert_eq!((doc.chunks[0].line_start, doc.chunks[0].line_end), (3, 8));
        assert!(doc.chunks[0].text.starts_with("| name | default |"));
    }

    #[test]
    fn yaml_front_matter_is_metadata() {
        let src = "---\ntitle: \"Deploying\"\ntags:\n  - ops\nowner: team-a\n---\n# Other heading\n\nBody line.\n";
        let doc = chunk_markdown(src.as_bytes());
        assert_spans_exact(src, &doc);
        let fm = doc.front_matter.as_ref().expect("front matter");
        assert_eq!(fm.get("title").map(String::as_str), Some("Deploying"));
        assert_eq!(fm.get("owner").map(String::as_str), Some("team-a"));
        assert!(!fm.contains_key("tags"), "nested values are skipped");
        assert_eq!(doc.title.as_deref(), Some("Deploying"));
        assert_eq!(doc.chunks.len(), 1);
        assert_eq!(doc.chunks[0].text, "Body line.");
        assert_eq!(doc.chunks[0].line_start, 9);
        assert!(doc.chunks.iter().all(|c| !c.text.contains("owner")));
    }

    #[test]
    fn toml_front_matter_is_metadata() {
        let src = "+++\ntitle = 'Notes'\ndraft = false\n+++\n\nPlain text.\n";
        let doc = chunk_markdown(src.as_bytes());
        assert_spans_exact(src, &doc);
        let fm = doc.front_matter.as_ref().expect("front matter");
        assert_eq!(fm.get("draft").map(String::as_str), Some("false"));
        assert_eq!(doc.title.as_deref(), Some("Notes"));
        assert_eq!(doc.chunks.len(), 1);
        assert_eq!(
            (doc.chunks[0].line_start, doc.chunks[0].text.as_str()),
            (6, "Plain text.")
        );
        assert!(doc.chunks[0].heading_path.is_empty());
    }

    #[test]
    fn unclosed_front_matter_is_text() {
        let src = "---\ntitle: x\n\nno closing delimiter\n";
        let doc = chunk_markdown(src.as_bytes());
        assert!(doc.front_matter.is_none());
        assert!(!doc.chunks.is_empty());
        assert_spans_exact(src, &doc);
    }

    /// A section of 2,000 lines: paragraphs of 3 lines separated by blank lines.
    fn long_section() -> String {
        let mut s = String::from("# Big\n\n");
        let mut line = 3;
        while line <= 2000 {
            s.push_str(&format!("paragraph line {line} alpha beta gamma delta\n"));
            line += 1;
            if line % 4 == 2 {
                s.push('\n');
                line += 1;
            }
        }
        s
    }

    #[test]
    fn long_section_is_split_within_budget_with_overlap_and_full_coverage() {
        let src = long_section();
        let doc = chunk_markdown(src.as_bytes());
        assert_spans_exact(&src, &doc);
        assert!(doc.chunks.len() > 20, "{} chunks", doc.chunks.len());
        let total_lines = src.lines().count();
        // Coverage: first chunk starts at the first content line, last ends at the last.
        assert_eq!(doc.chunks[0].line_start, 3);
        assert_eq!(doc.chunks.last().unwrap().line_end, total_lines);
        for pair in doc.chunks.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            // Contiguous with an overlap of one block (a 3-line paragraph).
            assert!(b.line_start <= a.line_end, "gap between {a:?} and {b:?}");
            assert!(b.line_start > a.line_start, "no progress");
            let shared: Vec<&str> = b.text.split("\n\n").take(1).collect();
            assert!(a.text.ends_with(shared[0]), "overlap block missing");
            assert!(b.heading_path == vec!["Big"]);
        }
    }

    #[test]
    fn giant_code_fence_is_split_by_lines_only_when_oversize() {
        let mut src = String::from("# Code\n\nShort intro.\n\n```rust\n");
        for i in 0..400 {
            src.push_str(&format!("let value_{i} = compute({i});\n"));
        }
        src.push_str("```\n\nOutro.\n");
        let doc = chunk_markdown(src.as_bytes());
        assert_spans_exact(&src, &doc);
        assert!(doc.chunks.len() > 5);
        assert_eq!(doc.chunks[0].text, "Short intro.");
        assert_eq!(doc.chunks.last().unwrap().text, "Outro.");
        let fence_pieces = &doc.chunks[1..doc.chunks.len() - 1];
        assert_eq!(fence_pieces[0].line_start, 5);
        assert_eq!(
            fence_pieces.last().unwrap().line_end,
            src.lines().count() - 2
        );
        for pair in fence_pieces.windows(2) {
            assert_eq!(pair[1].line_start, pair[0].line_end, "one-line overlap");
        }
        // A small fence next to text stays whole.
        let small = "# A\n\ntext\n\n```\n# x\ny\n```\n";
        let doc = chunk_markdown(small.as_bytes());
        assert_eq!(doc.chunks.len(), 1);
        assert_eq!((doc.chunks[0].line_start, doc.chunks[0].line_end), (3, 8));
    }

    #[test]
    fn single_huge_line_is_cut_within_budget() {
        let word = "lorem ipsum dolor sit amet ";
        let src = format!("# H\n\n{}\n", word.repeat(300));
        let doc = chunk_markdown(src.as_bytes());
        assert_spans_exact(&src, &doc);
        assert!(doc.chunks.len() > 1);
        assert!(
            doc.chunks
                .iter()
                .all(|c| c.line_start == 3 && c.line_end == 3)
        );
        let joined: String = doc.chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(joined.trim_end(), word.repeat(300).trim_end());
    }

    #[test]
    fn empty_and_blank_files_give_no_chunks() {
        for src in ["", "\n\n  \n", "# Only a heading\n", "---\ntitle: t\n---\n"] {
            let doc = chunk_markdown(src.as_bytes());
            assert!(doc.chunks.is_empty(), "{src:?} gave {:?}", doc.chunks);
        }
        assert_eq!(
            chunk_markdown(b"# Only a heading\n").title.as_deref(),
            Some("Only a heading")
        );
    }

    #[test]
    fn non_utf8_bytes_are_decoded_lossily() {
        let mut src =
            b"# Caf\xe9\n\nline with \xff\xfe bad bytes\n\nsecond \xc3\x28 para\n".to_vec();
        src.extend_from_slice(&[0x80; 10]);
        let doc = chunk_markdown(&src);
        assert_eq!(doc.title.as_deref(), Some("Caf\u{fffd}"));
        assert_eq!(doc.chunks.len(), 1);
        let c = &doc.chunks[0];
        assert_eq!((c.line_start, c.line_end), (3, 6));
        assert!(c.text.contains('\u{fffd}'));
    }

    #[test]
    fn crlf_line_endings_keep_exact_spans() {
        let src = "# T\r\n\r\nfirst\r\nsecond\r\n\r\n## U\r\n\r\nthird\r\n";
        let doc = chunk_markdown(src.as_bytes());
        assert_spans_exact(src, &doc);
        assert_eq!(doc.chunks.len(), 2);
        assert_eq!(doc.chunks[0].text, "first\r\nsecond");
        assert_eq!(
            (doc.chunks[1].line_start, doc.chunks[1].text.as_str()),
            (8, "third")
        );
    }

    #[test]
    fn setext_headings_lists_and_quotes() {
        let src = "Title\n=====\n\n- item one\n- item two\n  # not a top heading? (inside list)\n\n> quoted\n> # quoted heading\n\nSub\n---\n\ntext\n";
        let doc = chunk_markdown(src.as_bytes());
        assert_spans_exact(src, &doc);
        assert_eq!(doc.title.as_deref(), Some("Title"));
        assert_eq!(doc.chunks.len(), 2, "{:?}", doc.chunks);
        assert_eq!((doc.chunks[0].line_start, doc.chunks[0].line_end), (4, 9));
        assert_eq!(doc.chunks[1].heading_path, vec!["Title", "Sub"]);
        assert_eq!(doc.chunks[1].line_start, 14);
    }

    #[test]
    fn approx_tokens_counts_punctuation_and_runs() {
        assert_eq!(approx_tokens(""), 0);
        assert_eq!(approx_tokens("the cat"), 2);
        assert_eq!(approx_tokens("installation"), 4);
        assert_eq!(approx_tokens("a.b"), 3);
        assert_eq!(approx_tokens("v1234"), 3);
        assert_eq!(approx_tokens("中文"), 2);
    }

    #[test]
    fn chunking_is_deterministic() {
        let src = long_section();
        assert_eq!(
            chunk_markdown(src.as_bytes()),
            chunk_markdown(src.as_bytes())
        );
    }
}
