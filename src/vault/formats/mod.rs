//! The formats the vault reads: which files a collection indexes and how each format
//! becomes an [`Outline`] (headings and blocks with line spans) that [`chunk`] cuts
//! into [`Chunk`](super::chunk::Chunk)s. Everything downstream of the chunks (hashes,
//! reuse, embedding, BM25, the graph) is the same for every format.
//!
//! | format | extensions | parser | headings | spans |
//! | --- | --- | --- | --- | --- |
//! | Markdown, MDX | `md` `markdown` `mdx` | pulldown-cmark ([`super::chunk`]) | ATX and setext | lines |
//! | HTML | `html` `htm` `xhtml` | html5ever's tokenizer ([`html`]) | `h1`-`h6` | lines |
//! | plain text | `txt` `text` | paragraphs ([`text`]) | none | lines |
//! | reStructuredText | `rst` `rest` | section adornments ([`rst`]) | adornment styles, in order of appearance | lines |
//! | AsciiDoc | `adoc` `asciidoc` `asc` | section titles and delimited blocks ([`asciidoc`]) | `=` .. `======` | lines |
//! | Jupyter notebook | `ipynb` | serde_json, cells rendered to Markdown ([`notebook`]) | Markdown cells' headings | cells |
//! | PDF | `pdf` | lopdf: text layer and outline, under a budget ([`pdf`]) | outline entries | pages |
//! | source code | see [`code::Lang`] | tree-sitter grammars ([`code`]) | `module › Type › item` | lines |
//!
//! Code is indexed only by collections that opt in ([`FileFilter::code`]); the default
//! skips ([`code::default_skip`]) keep vendored, generated, minified and lock files out.
//! A file a format refuses (a notebook of too many cells, a minified or generated
//! source file, a PDF over its budget) is skipped with the reason, like a file over the
//! size cap.
//!
//! A document is served (MCP resources, [`served`]) as what an agent reads: the file
//! itself for the text formats (Markdown, plain text, reStructuredText, AsciiDoc, code),
//! and for the formats whose file is markup or binary (HTML, notebooks, PDF) the text
//! the chunks were cut from, rendered as Markdown with its headings ([`markdown`]).

pub(crate) mod asciidoc;
pub(crate) mod code;
pub(crate) mod html;
pub(crate) mod notebook;
pub(crate) mod pdf;
pub(crate) mod rst;
pub(crate) mod text;

use std::path::Path;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

use super::chunk::{self, ChunkedDoc, Item, Outline, TOKEN_BUDGET};
use crate::error::{Error, Result};

/// What a file is, by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Markdown,
    Html,
    Text,
    Rst,
    AsciiDoc,
    Notebook,
    Pdf,
    Code(code::Lang),
}

impl Format {
    /// The format of `path` by its extension (case-insensitive); `None`: not read.
    pub(crate) fn of(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "md" | "markdown" | "mdx" => Format::Markdown,
            "html" | "htm" | "xhtml" => Format::Html,
            "txt" | "text" => Format::Text,
            "rst" | "rest" => Format::Rst,
            "adoc" | "asciidoc" | "asc" => Format::AsciiDoc,
            "ipynb" => Format::Notebook,
            "pdf" => Format::Pdf,
            other => Format::Code(code::Lang::of_extension(other)?),
        })
    }

    /// Whether this is source code (indexed only by collections that opt in).
    pub(crate) fn is_code(self) -> bool {
        matches!(self, Format::Code(_))
    }

    /// Whether a document of this format is served as Markdown rendered from its
    /// outline rather than as its file ([`served`]).
    fn is_rendered(self) -> bool {
        matches!(self, Format::Html | Format::Notebook | Format::Pdf)
    }
}

/// The media type of a document as it is served ([`served`], MCP resources).
pub fn mime_type(path: &str) -> &'static str {
    match Format::of(Path::new(path)) {
        Some(Format::Markdown | Format::Html | Format::Notebook | Format::Pdf) | None => {
            "text/markdown"
        }
        Some(Format::Text | Format::Code(_)) => "text/plain",
        Some(Format::Rst) => "text/x-rst",
        Some(Format::AsciiDoc) => "text/asciidoc",
    }
}

/// A document as it is served to an agent (its media type is [`mime_type`]): the text
/// formats as their file (cleaned by the text policy), HTML, notebooks and PDF as the
/// Markdown of the text their chunks were cut from. A file its format refuses is an
/// [`Error::InvalidInput`] naming why, as in [`chunk_file`].
pub(crate) fn served(path: &str, bytes: &[u8]) -> Result<String> {
    match Format::of(Path::new(path)) {
        Some(format) if format.is_rendered() => {
            let outline = outline(format, path, bytes).map_err(|reason| {
                Error::invalid("path", format!("{path} cannot be read: {reason}"))
            })?;
            Ok(markdown(&outline, format == Format::Pdf))
        }
        _ => Ok(crate::text::clean_document(&String::from_utf8_lossy(bytes)).0),
    }
}

/// An outline as Markdown: each heading as an ATX heading of its level, each block's
/// lines, a blank line between them; with `pages`, a `<!-- page N -->` comment before
/// the first heading or block of each page (of [`Outline::source_lines`]).
fn markdown(outline: &Outline, pages: bool) -> String {
    let lines: Vec<&str> = outline.text.lines().collect();
    let page_of = |b: &chunk::Block| {
        (outline.source_lines.as_ref())
            .and_then(|m| m.get(b.first - 1))
            .map_or(0, |m| m.0)
    };
    // The page of each item: a block's own, a heading's that of the block after it (0:
    // none after it).
    let mut page = 0;
    let mut item_pages: Vec<usize> = (outline.items.iter().rev())
        .map(|item| {
            if let Item::Block(b) = item {
                page = page_of(b);
            }
            page
        })
        .collect();
    item_pages.reverse();
    let mut out = String::new();
    let mut shown = 0;
    for (item, page) in outline.items.iter().zip(item_pages) {
        if pages && page != 0 && page != shown && !matches!(item, Item::Leave { .. }) {
            shown = page;
            out.push_str(&format!("<!-- page {page} -->\n\n"));
        }
        match item {
            Item::Heading { level, text } => {
                out.push_str(&"#".repeat(usize::from((*level).clamp(1, 6))));
                out.push(' ');
                out.push_str(text);
                out.push_str("\n\n");
            }
            Item::Block(b) => {
                let last = b.last.min(lines.len());
                out.push_str(&lines[(b.first - 1).min(last)..last].join("\n"));
                out.push_str("\n\n");
            }
            Item::Leave { .. } => {}
        }
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

/// Chunk the file `path` (relative, `/`-separated) by its format with the default
/// token budget. A file its format refuses is an [`Error::InvalidInput`] naming why.
pub(crate) fn chunk_file(path: &str, bytes: &[u8]) -> Result<ChunkedDoc> {
    let format = Format::of(Path::new(path)).ok_or_else(|| {
        Error::invalid(
            "path",
            format!("{path} is not a format the vault reads ({EXTENSIONS})"),
        )
    })?;
    let outline = outline(format, path, bytes)
        .map_err(|reason| Error::invalid("path", format!("{path} was not indexed: {reason}")))?;
    Ok(chunk::chunk_outline(outline, TOKEN_BUDGET))
}

/// The extensions read, for messages.
pub(crate) const EXTENSIONS: &str = "Markdown .md/.markdown/.mdx, HTML .html/.htm, text .txt, \
     reStructuredText .rst, AsciiDoc .adoc/.asciidoc, notebooks .ipynb, PDF .pdf, and with \
     --code source files .rs/.py/.js/.jsx/.mjs/.cjs/.ts/.tsx/.go/.java";

/// The outline of a file of `format`; `Err` with the reason when the format refuses it.
fn outline(format: Format, path: &str, bytes: &[u8]) -> std::result::Result<Outline, String> {
    // The one text policy first; every format keeps newlines, so lines stay exact. A
    // PDF is binary: the policy applies to the text it yields.
    let (text, removed) = match format {
        Format::Pdf => Default::default(),
        _ => crate::text::clean_document(&String::from_utf8_lossy(bytes)),
    };
    let mut outline = match format {
        Format::Markdown => chunk::markdown_outline(text),
        Format::Html => html::outline(&text),
        Format::Text => text::outline(text),
        Format::Rst => rst::outline(text),
        Format::AsciiDoc => asciidoc::outline(text),
        Format::Notebook => notebook::outline(&text)?,
        Format::Pdf => pdf::outline(bytes)?,
        Format::Code(lang) => code::outline(lang, path, text)?,
    };
    outline.removed.add(&removed);
    Ok(outline)
}

/// Which files a collection indexes: documentation formats always, source code when
/// [`Self::code`] is set, narrowed by include and exclude globs. Stored with each
/// followed root so that its follower admits the same files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileFilter {
    /// Index source code too (`--code`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub code: bool,
    /// Only paths matching one of these globs (relative to the directory reindexed;
    /// `**` crosses directories); empty: every path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// Never paths matching one of these globs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
}

/// Globs longer than this are refused.
const GLOB_MAX: usize = 512;
/// At most this many include plus exclude globs.
const GLOBS_MAX: usize = 64;

/// A [`FileFilter`] with its globs compiled.
#[derive(Debug, Clone)]
pub(crate) struct Admit {
    code: bool,
    include: Option<GlobSet>,
    exclude: GlobSet,
}

impl FileFilter {
    /// Check and compile the globs.
    pub(crate) fn compile(&self) -> Result<Admit> {
        if self.include.len() + self.exclude.len() > GLOBS_MAX {
            return Err(Error::invalid(
                "glob",
                format!("at most {GLOBS_MAX} include and exclude globs"),
            ));
        }
        let set = |globs: &[String]| -> Result<GlobSet> {
            let mut b = GlobSetBuilder::new();
            for g in globs {
                if g.is_empty() || g.len() > GLOB_MAX || g.contains('\0') {
                    return Err(Error::invalid(
                        "glob",
                        format!("{g:?} must be 1-{GLOB_MAX} bytes without NUL"),
                    ));
                }
                let glob = Glob::new(g)
                    .map_err(|e| Error::invalid("glob", format!("{g:?} is not a glob: {e}")))?;
                b.add(glob);
            }
            b.build()
                .map_err(|e| Error::invalid("glob", format!("the globs do not compile: {e}")))
        };
        Ok(Admit {
            code: self.code,
            include: if self.include.is_empty() {
                None
            } else {
                Some(set(&self.include)?)
            },
            exclude: set(&self.exclude)?,
        })
    }
}

impl Admit {
    /// Whether the file at `rel` (relative to the directory reindexed, `/`-separated)
    /// is indexed: a format the vault reads, code only when opted in and not a default
    /// skip, inside the include globs and outside the exclude globs.
    pub(crate) fn admits(&self, rel: &str) -> bool {
        let Some(format) = Format::of(Path::new(rel)) else {
            return false;
        };
        if format.is_code() && (!self.code || code::default_skip(rel)) {
            return false;
        }
        self.include.as_ref().is_none_or(|s| s.is_match(rel)) && !self.exclude.is_match(rel)
    }
}

impl Default for Admit {
    fn default() -> Self {
        Admit {
            code: false,
            include: None,
            exclude: GlobSet::empty(),
        }
    }
}
