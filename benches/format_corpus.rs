//! One corpus written in every format the vault reads, for the reindex throughput per
//! format (`cargo bench --bench vault -- formats`, issue 58).
//!
//! The documents' text is real prose: paragraphs of the Markdown files of
//! [`corpus::markdown_files`](super::corpus::markdown_files) (outside code fences, at least
//! 150 bytes once the marks of inline code and emphasis are dropped, only letters, digits,
//! spaces and plain punctuation, so that no format's markup changes the words). Document `i` has a title and [`SECTIONS`] sections of two
//! paragraphs each, and is written the same in Markdown, reStructuredText, AsciiDoc, HTML
//! (navigation and a script around the main content), plain text (paragraphs only, no
//! headings), a Jupyter notebook (one markdown cell per section), a PDF (lopdf; one page
//! per section, Helvetica, each heading a line of its own and an outline entry) and Rust
//! (`--code`: one function per section, its paragraphs as the doc comment).

use std::path::Path;

use lopdf::content::{Content, Operation};
use lopdf::{Bookmark, Document, Object, Stream, dictionary};

/// Sections per document.
pub const SECTIONS: usize = 4;

/// A document: its title and sections (heading, paragraphs).
pub struct Doc {
    pub title: String,
    pub sections: Vec<(String, Vec<String>)>,
}

/// The formats written, each with its file extension.
pub const FORMATS: [(&str, &str); 8] = [
    ("Markdown", "md"),
    ("reStructuredText", "rst"),
    ("AsciiDoc", "adoc"),
    ("HTML", "html"),
    ("plain text", "txt"),
    ("notebook", "ipynb"),
    ("PDF", "pdf"),
    ("Rust code", "rs"),
];

/// Prose paragraphs of the corpus, in its order.
fn paragraphs() -> Vec<String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || " .,;:'\"()-?!/%".contains(c);
    // Inline code and emphasis lose their marks; links and other markup are left out.
    let unmark = |p: &str| p.replace(['`', '*'], "");
    let mut out = Vec::new();
    for f in super::corpus::markdown_files() {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        let (mut fence, mut current) = (false, String::new());
        for line in text.lines().chain([""]) {
            let t = line.trim();
            if t.starts_with("```") || t.starts_with("~~~") {
                fence = !fence;
                current.clear();
                continue;
            }
            if fence || t.is_empty() {
                let p = unmark(current.trim_end());
                if p.len() >= 150 && p.chars().all(plain) {
                    out.push(p);
                }
                current.clear();
                continue;
            }
            current.push_str(t);
            current.push(' ');
        }
    }
    out
}

/// `n` documents from the corpus's paragraphs (each paragraph used once).
pub fn documents(n: usize) -> Vec<Doc> {
    let mut paras = paragraphs().into_iter();
    let mut docs = Vec::with_capacity(n);
    for i in 0..n {
        let mut sections = Vec::with_capacity(SECTIONS);
        for j in 0..SECTIONS {
            let ps: Vec<String> = paras.by_ref().take(2).collect();
            assert_eq!(ps.len(), 2, "the corpus has too few plain paragraphs");
            let words: Vec<&str> = ps[0].split_whitespace().take(4).collect();
            sections.push((format!("Part {}: {}", j + 1, words.join(" ")), ps));
        }
        docs.push(Doc {
            title: format!("Document {i}"),
            sections,
        });
    }
    docs
}

/// Write every document in `ext`'s format into `dir`.
pub fn write(docs: &[Doc], ext: &str, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for (i, d) in docs.iter().enumerate() {
        let bytes = match ext {
            "md" => text_format(d, |t| format!("# {t}\n"), |h| format!("## {h}\n")),
            "rst" => text_format(
                d,
                |t| format!("{t}\n{}\n", "=".repeat(t.len())),
                |h| format!("{h}\n{}\n", "-".repeat(h.len())),
            ),
            "adoc" => text_format(d, |t| format!("= {t}\n"), |h| format!("== {h}\n")),
            "txt" => text_format(d, |_| String::new(), |_| String::new()),
            "html" => html(d),
            "ipynb" => notebook(d),
            "pdf" => pdf(d),
            "rs" => rust(d),
            other => panic!("no writer for {other}"),
        };
        std::fs::write(dir.join(format!("d{i:04}.{ext}")), bytes).unwrap();
    }
}

/// A lightweight markup: the title and each heading as `title`/`heading` write them,
/// paragraphs separated by blank lines.
fn text_format(d: &Doc, title: fn(&str) -> String, heading: fn(&str) -> String) -> Vec<u8> {
    let mut s = title(&d.title);
    for (h, ps) in &d.sections {
        s.push('\n');
        s.push_str(&heading(h));
        for p in ps {
            s.push('\n');
            s.push_str(p);
            s.push('\n');
        }
    }
    s.into_bytes()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn html(d: &Doc) -> Vec<u8> {
    let mut s = format!(
        "<!DOCTYPE html>\n<html><head><title>{t}</title><style>body {{ margin: 0 }}</style>\
         </head>\n<body><nav><a href=\"/\">Home</a> <a href=\"/docs\">Docs</a></nav>\n\
         <main>\n<h1>{t}</h1>\n",
        t = escape(&d.title)
    );
    for (h, ps) in &d.sections {
        s.push_str(&format!("<h2>{}</h2>\n", escape(h)));
        for p in ps {
            s.push_str(&format!("<p>{}</p>\n", escape(p)));
        }
    }
    s.push_str("</main>\n<script>console.log('menu')</script></body></html>\n");
    s.into_bytes()
}

fn notebook(d: &Doc) -> Vec<u8> {
    let cell = |source: String| serde_json::json!({"cell_type": "markdown", "metadata": {}, "source": source});
    let mut cells = vec![cell(format!("# {}", d.title))];
    for (h, ps) in &d.sections {
        cells.push(cell(format!("## {h}\n\n{}", ps.join("\n\n"))));
    }
    let nb = serde_json::json!({
        "cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5
    });
    serde_json::to_vec_pretty(&nb).unwrap()
}

fn rust(d: &Doc) -> Vec<u8> {
    let mut s = format!("//! {}\n", d.title);
    for (j, (h, ps)) in d.sections.iter().enumerate() {
        s.push_str(&format!("\n/// {h}\n"));
        for p in ps {
            s.push_str("///\n");
            s.push_str(&format!("/// {p}\n"));
        }
        s.push_str(&format!(
            "pub fn part_{j}(input: &str) -> usize {{\n    input.len() + {j}\n}}\n"
        ));
    }
    s.into_bytes()
}

/// Words of `p` in lines of at most `width` bytes.
fn wrap(p: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for w in p.split_whitespace() {
        let line = lines.last_mut().unwrap();
        if !line.is_empty() && line.len() + 1 + w.len() > width {
            lines.push(w.to_string());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(w);
        }
    }
    lines
}

/// One page per section: the title (first page) and the heading each on a line of their
/// own in a larger size, then the paragraphs' lines 12 points apart with 30 points
/// between paragraphs (the reader's paragraph gap is 1.6 line heights); an outline
/// entry for the title and, under it, one for each section's page.
fn pdf(d: &Doc) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
        "Encoding" => "WinAnsiEncoding",
    });
    let resources = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font } });
    let mut kids: Vec<Object> = Vec::new();
    let mut top = None;
    for (k, (h, ps)) in d.sections.iter().enumerate() {
        let mut ops = vec![
            Operation::new("BT", vec![]),
            Operation::new("Td", vec![72.into(), 780.into()]),
        ];
        let mut line = |size: i64, text: &str, gap: i64| {
            ops.push(Operation::new("Tf", vec!["F1".into(), size.into()]));
            ops.push(Operation::new("Tj", vec![Object::string_literal(text)]));
            ops.push(Operation::new("Td", vec![0.into(), (-gap).into()]));
        };
        if k == 0 {
            line(16, &d.title, 30);
        }
        line(13, h, 30);
        for p in ps {
            let lines = wrap(p, 90);
            for (n, l) in lines.iter().enumerate() {
                line(10, l, if n + 1 == lines.len() { 30 } else { 12 });
            }
        }
        ops.push(Operation::new("ET", vec![]));
        let content = Content { operations: ops }.encode().unwrap();
        let content_id = doc.add_object(Stream::new(dictionary! {}, content));
        let page_id = doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => content_id,
        });
        kids.push(page_id.into());
        let parent = *top.get_or_insert_with(|| {
            doc.add_bookmark(Bookmark::new(d.title.clone(), [0.0; 3], 0, page_id), None)
        });
        doc.add_bookmark(Bookmark::new(h.clone(), [0.0; 3], 0, page_id), Some(parent));
    }
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => kids, "Count" => count, "Resources" => resources,
            "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
        }),
    );
    let outline = doc.build_outline().unwrap();
    let catalog = doc.add_object(dictionary! {
        "Type" => "Catalog", "Pages" => pages_id, "Outlines" => outline,
    });
    doc.trailer.set("Root", catalog);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}
