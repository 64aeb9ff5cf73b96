//! Source code by its syntax: tree-sitter grammars from crates.io parse the file, and
//! its items (functions, methods, types, impls, classes, traits, interfaces, modules)
//! become the sections of the outline.
//!
//! * **Heading path** — `module › Type › method`: the module (from the file's path:
//!   `src/vault/chunk.rs` → `vault::chunk`, `pkg/sub/mod.py` → `pkg.sub.mod`, else the
//!   file's stem), then each enclosing container (impl, trait, class, interface, mod,
//!   namespace; a Go method's receiver type), then the item's name.
//! * **Doc comments** — the comments and attributes right above an item (no blank line
//!   between) belong to its chunk; Python docstrings are in the body already.
//! * **Other code** — imports, statements and fields between items are blocks of the
//!   enclosing path, split at blank lines.
//! * **Big items** are split by lines like any oversize block ([`super::super::chunk`]).
//! * **Refused** — a file with a line over [`MAX_LINE`] bytes or an average line over
//!   [`MAX_AVERAGE_LINE`] bytes (minified), a file whose first lines say it is
//!   generated (`@generated`, `DO NOT EDIT`), and a parse that takes over
//!   [`PARSE_DEADLINE`].
//!
//! The lexical half splits identifiers ([`crate::vault::lexical`]), so `issueApproved`,
//! `issue_approved` and `issue approved` meet.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use tree_sitter::{Language, Node, ParseOptions, Parser};

use super::text::paragraphs;
use crate::vault::chunk::{Block, Item, Outline};

/// A line longer than this (bytes) marks a file as minified.
pub(crate) const MAX_LINE: usize = 4_000;
/// An average line longer than this (bytes) marks a file as minified.
pub(crate) const MAX_AVERAGE_LINE: usize = 300;
/// A parse taking longer than this is abandoned.
pub(crate) const PARSE_DEADLINE: Duration = Duration::from_secs(5);
/// Containers nested deeper than this are read as one item.
const MAX_NESTING: u8 = 12;

/// The languages read as code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    Rust,
    Python,
    JavaScript,
    TypeScript,
    Tsx,
    Go,
    Java,
}

impl Lang {
    /// The language of a (lower-case) file extension.
    pub(crate) fn of_extension(ext: &str) -> Option<Lang> {
        Some(match ext {
            "rs" => Lang::Rust,
            "py" | "pyi" => Lang::Python,
            "js" | "jsx" | "mjs" | "cjs" => Lang::JavaScript,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "go" => Lang::Go,
            "java" => Lang::Java,
            _ => return None,
        })
    }

    fn grammar(self) -> Language {
        match self {
            Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
            Lang::Python => tree_sitter_python::LANGUAGE.into(),
            Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Lang::Go => tree_sitter_go::LANGUAGE.into(),
            Lang::Java => tree_sitter_java::LANGUAGE.into(),
        }
    }

    /// Items holding other items, and the field of their body.
    fn container(self, kind: &str) -> bool {
        match self {
            Lang::Rust => matches!(kind, "impl_item" | "trait_item" | "mod_item"),
            Lang::Python => kind == "class_definition",
            Lang::JavaScript | Lang::TypeScript | Lang::Tsx => matches!(
                kind,
                "class_declaration"
                    | "abstract_class_declaration"
                    | "class"
                    | "internal_module"
                    | "module"
            ),
            Lang::Go => false,
            Lang::Java => matches!(
                kind,
                "class_declaration"
                    | "interface_declaration"
                    | "enum_declaration"
                    | "record_declaration"
                    | "annotation_type_declaration"
            ),
        }
    }

    /// Items holding no other items.
    fn leaf(self, kind: &str) -> bool {
        match self {
            Lang::Rust => matches!(
                kind,
                "function_item"
                    | "function_signature_item"
                    | "struct_item"
                    | "enum_item"
                    | "union_item"
                    | "type_item"
                    | "const_item"
                    | "static_item"
                    | "macro_definition"
            ),
            Lang::Python => kind == "function_definition",
            Lang::JavaScript | Lang::TypeScript | Lang::Tsx => matches!(
                kind,
                "function_declaration"
                    | "generator_function_declaration"
                    | "method_definition"
                    | "method_signature"
                    | "abstract_method_signature"
                    | "interface_declaration"
                    | "type_alias_declaration"
                    | "enum_declaration"
                    | "function_signature"
            ),
            Lang::Go => matches!(
                kind,
                "function_declaration" | "method_declaration" | "type_declaration"
            ),
            Lang::Java => matches!(kind, "method_declaration" | "constructor_declaration"),
        }
    }

    /// Nodes that wrap an item (`export`, decorators): the field holding it.
    fn wrapper(self, kind: &str) -> Option<&'static str> {
        match (self, kind) {
            (Lang::Python, "decorated_definition") => Some("definition"),
            (Lang::JavaScript | Lang::TypeScript | Lang::Tsx, "export_statement") => {
                Some("declaration")
            }
            _ => None,
        }
    }

    /// Comments and attributes that attach to the item below them.
    fn attaches(self, kind: &str) -> bool {
        matches!(kind, "comment" | "line_comment" | "block_comment")
            || (self == Lang::Rust && kind == "attribute_item")
    }

    fn module_separator(self) -> &'static str {
        match self {
            Lang::Rust => "::",
            Lang::Python => ".",
            _ => "/",
        }
    }
}

/// Whether a code path is skipped by default even in a collection that indexes code:
/// vendored and third-party trees, build output, generated and minified files.
pub(crate) fn default_skip(rel: &str) -> bool {
    let mut parts = rel.split('/');
    let name = parts.next_back().unwrap_or("").to_ascii_lowercase();
    let dir_skipped = parts.any(|d| {
        matches!(
            d,
            "vendor"
                | "vendored"
                | "third_party"
                | "third-party"
                | "node_modules"
                | "bower_components"
                | "target"
                | "dist"
                | "build"
                | "out"
                | "__pycache__"
                | "site-packages"
                | "venv"
                | "generated"
        )
    });
    dir_skipped
        || [
            ".min.js",
            ".min.mjs",
            "-min.js",
            ".bundle.js",
            "_pb2.py",
            "_pb2_grpc.py",
            ".pb.go",
            "_generated.go",
            "_generated.rs",
            ".generated.ts",
            ".generated.js",
        ]
        .iter()
        .any(|s| name.ends_with(s))
}

/// The outline of a source file; `Err` with the reason when it is refused.
pub(crate) fn outline(lang: Lang, path: &str, text: String) -> Result<Outline, String> {
    check_not_minified(&text)?;
    check_not_generated(&text)?;
    let mut parser = Parser::new();
    parser
        .set_language(&lang.grammar())
        .map_err(|e| format!("the {lang:?} grammar does not load: {e}"))?;
    let started = Instant::now();
    let mut deadline = |_: &tree_sitter::ParseState| {
        if started.elapsed() > PARSE_DEADLINE {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let bytes = text.as_bytes();
    let tree = parser
        .parse_with_options(
            &mut |i, _| bytes.get(i..).unwrap_or_default(),
            None,
            Some(ParseOptions::new().progress_callback(&mut deadline)),
        )
        .ok_or_else(|| format!("parsing took over {} s", PARSE_DEADLINE.as_secs()))?;
    let module = module_name(lang, path);
    let mut walker = Walker {
        lang,
        src: bytes,
        items: vec![Item::Heading {
            level: 1,
            text: module.clone(),
        }],
    };
    walker.walk(tree.root_node(), 1);
    Ok(Outline {
        title: Some(module),
        items: walker.items,
        ..Outline::new(text)
    })
}

fn check_not_minified(text: &str) -> Result<(), String> {
    let mut lines = 0usize;
    for line in text.lines() {
        lines += 1;
        if line.len() > MAX_LINE {
            return Err(format!(
                "it looks minified (line {lines} has {} bytes, more than {MAX_LINE})",
                line.len()
            ));
        }
    }
    if lines > 0 && text.len() / lines > MAX_AVERAGE_LINE {
        return Err(format!(
            "it looks minified (lines average {} bytes, more than {MAX_AVERAGE_LINE})",
            text.len() / lines
        ));
    }
    Ok(())
}

fn check_not_generated(text: &str) -> Result<(), String> {
    for line in text.lines().take(5) {
        let l = line.to_ascii_lowercase();
        if l.contains("@generated") || l.contains("do not edit") {
            return Err(format!(
                "it is generated (its first lines say {:?})",
                line.trim().chars().take(80).collect::<String>()
            ));
        }
    }
    Ok(())
}

/// The module a file's items are under.
fn module_name(lang: Lang, path: &str) -> String {
    let stem = path.rsplit_once('.').map_or(path, |(s, _)| s);
    let stem = stem.rsplit_once("src/").map_or(stem, |(_, s)| s);
    let parts: Vec<&str> = stem.split('/').filter(|p| !p.is_empty()).collect();
    let parts: Vec<&str> = match lang {
        Lang::Rust | Lang::Python => {
            let mut p = parts;
            if p.len() > 1 && matches!(p.last(), Some(&("mod" | "lib" | "main" | "__init__"))) {
                p.pop();
            }
            p
        }
        _ => parts.last().copied().into_iter().collect(),
    };
    parts.join(lang.module_separator())
}

struct Walker<'a> {
    lang: Lang,
    src: &'a [u8],
    items: Vec<Item>,
}

/// 1-based first line of a node.
fn first_line(n: Node) -> usize {
    n.start_position().row + 1
}

/// 1-based last line of a node (a node ending at a line's start ends on the line before).
fn last_line(n: Node) -> usize {
    let end = n.end_position();
    if end.column == 0 && end.row > n.start_position().row {
        end.row
    } else {
        end.row + 1
    }
}

impl Walker<'_> {
    fn text(&self, n: Node) -> String {
        n.utf8_text(self.src).unwrap_or("").to_string()
    }

    /// The item a child stands for (looking through wrappers), if it is one.
    fn item<'t>(&self, n: Node<'t>) -> Option<Node<'t>> {
        let kind = n.kind();
        if let Some(field) = self.lang.wrapper(kind) {
            return n
                .child_by_field_name(field)
                .and_then(|inner| self.item(inner));
        }
        if self.lang.container(kind) || self.lang.leaf(kind) || self.arrow_function(n) {
            return Some(n);
        }
        None
    }

    /// `const name = () => ...` / `= function ...` in JavaScript and TypeScript.
    fn arrow_function(&self, n: Node) -> bool {
        matches!(self.lang, Lang::JavaScript | Lang::TypeScript | Lang::Tsx)
            && matches!(n.kind(), "lexical_declaration" | "variable_declaration")
            && n.named_child(0).is_some_and(|d| {
                d.child_by_field_name("value").is_some_and(|v| {
                    matches!(
                        v.kind(),
                        "arrow_function" | "function_expression" | "function"
                    )
                })
            })
    }

    fn name(&self, n: Node) -> String {
        let named = match (self.lang, n.kind()) {
            (Lang::Rust, "impl_item") => n.child_by_field_name("type"),
            (Lang::Go, "type_declaration") => n
                .named_child(0)
                .and_then(|spec| spec.child_by_field_name("name")),
            (_, "lexical_declaration" | "variable_declaration") => {
                n.named_child(0).and_then(|d| d.child_by_field_name("name"))
            }
            _ => n.child_by_field_name("name"),
        };
        let name = named.map(|x| self.text(x)).unwrap_or_default();
        // `Vault<'_>` is `Vault`.
        let name = name.split('<').next().unwrap_or("").trim().to_string();
        if name.is_empty() {
            n.kind().to_string()
        } else {
            name
        }
    }

    /// A Go method's receiver type.
    fn receiver(&self, n: Node) -> Option<String> {
        if self.lang != Lang::Go || n.kind() != "method_declaration" {
            return None;
        }
        let recv = n.child_by_field_name("receiver")?;
        let text = self.text(recv);
        let ty = text
            .trim_matches(|c| c == '(' || c == ')')
            .split_whitespace()
            .last()?
            .trim_start_matches('*');
        Some(ty.split('[').next().unwrap_or(ty).to_string())
    }

    fn loose(&mut self, span: &mut Option<(usize, usize)>) {
        if let Some((first, last)) = span.take() {
            let lines: Vec<&str> = std::str::from_utf8(self.src)
                .unwrap_or("")
                .lines()
                .skip(first - 1)
                .take(last + 1 - first)
                .collect();
            let joined = lines.join("\n");
            self.items
                .extend(paragraphs(&joined, first).into_iter().map(Item::Block));
        }
    }

    /// The items under `node` (the file or a container's body) at heading `level`.
    fn walk(&mut self, node: Node, level: u8) {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        let mut loose: Option<(usize, usize)> = None;
        // Comments and attributes waiting to see what follows them.
        let mut pending: Option<(usize, usize)> = None;
        let extend = |span: &mut Option<(usize, usize)>, first: usize, last: usize| {
            *span = Some(match *span {
                Some((a, b)) => (a.min(first), b.max(last)),
                None => (first, last),
            });
        };
        for child in children {
            let (first, last) = (first_line(child), last_line(child));
            if self.lang.attaches(child.kind()) {
                match pending {
                    Some((a, b)) if first <= b + 1 => pending = Some((a, b.max(last))),
                    Some((a, b)) => {
                        extend(&mut loose, a, b);
                        pending = Some((first, last));
                    }
                    None => pending = Some((first, last)),
                }
                continue;
            }
            let Some(item) = self.item(child) else {
                if let Some((a, b)) = pending.take() {
                    extend(&mut loose, a, b);
                }
                extend(&mut loose, first, last);
                continue;
            };
            let start = match pending.take() {
                Some((a, b)) if b + 1 >= first => a,
                Some((a, b)) => {
                    extend(&mut loose, a, b);
                    first
                }
                None => first,
            };
            self.loose(&mut loose);
            self.emit(item, start, first, last, level);
        }
        if let Some((a, b)) = pending {
            extend(&mut loose, a, b);
        }
        self.loose(&mut loose);
    }

    /// One item: `start` is its first line with its doc comment, `first..=last` its
    /// own lines (with a wrapper's).
    fn emit(&mut self, item: Node, start: usize, first: usize, last: usize, level: u8) {
        let name = self.name(item);
        let body = item.child_by_field_name("body");
        let receiver = self.receiver(item);
        let mut level = level;
        if let Some(ty) = &receiver {
            level += 1;
            self.items.push(Item::Heading {
                level,
                text: ty.clone(),
            });
        }
        let inner = level + 1;
        self.items.push(Item::Heading {
            level: inner,
            text: name,
        });
        match body {
            Some(body) if self.lang.container(item.kind()) && inner < MAX_NESTING => {
                // The doc comment and declaration down to where the body opens.
                if start < first {
                    self.items.push(Item::Block(Block {
                        first: start,
                        last: first_line(body),
                    }));
                }
                self.walk(body, inner);
            }
            _ => self.items.push(Item::Block(Block { first: start, last })),
        }
        self.items.push(Item::Leave {
            level: if receiver.is_some() { level } else { inner },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vault::chunk::chunk_outline;

    fn paths(lang: Lang, path: &str, src: &str) -> Vec<(String, usize, usize)> {
        let o = outline(lang, path, src.to_string()).unwrap();
        chunk_outline(o, 200)
            .chunks
            .iter()
            .map(|c| (c.heading_path.join(" › "), c.line_start, c.line_end))
            .collect()
    }

    #[test]
    fn rust_items_nest_under_module_and_type_with_doc_comments() {
        let src = "//! Module doc.\n\nuse std::fmt;\n\n/// A vault.\n#[derive(Debug)]\npub struct Vault;\n\nimpl Vault<'_> {\n    /// Whether the issue was approved.\n    pub fn issue_approved(&self) -> bool {\n        true\n    }\n}\n";
        assert_eq!(
            paths(Lang::Rust, "src/vault/service.rs", src),
            vec![
                ("vault::service".into(), 1, 3),
                ("vault::service › Vault".into(), 5, 7),
                ("vault::service › Vault › issue_approved".into(), 10, 13),
            ]
        );
    }

    #[test]
    fn go_methods_sit_under_their_receiver() {
        let src = "package retry\n\n// Budget enforces the retry budget.\nfunc (b *Budget) Allow() bool {\n\treturn true\n}\n";
        assert_eq!(
            paths(Lang::Go, "internal/retry/budget.go", src),
            vec![
                ("budget".into(), 1, 1),
                ("budget › Budget › Allow".into(), 3, 6)
            ]
        );
    }

    #[test]
    fn minified_and_generated_files_are_refused() {
        let long = format!("var a={};\n", "1+".repeat(5_000));
        assert!(
            outline(Lang::JavaScript, "a.js", long)
                .unwrap_err()
                .contains("minified")
        );
        let generated = "// Code generated by protoc. DO NOT EDIT.\npackage x\n".to_string();
        assert!(
            outline(Lang::Go, "x.go", generated)
                .unwrap_err()
                .contains("generated")
        );
        assert!(default_skip("web/node_modules/x/index.js"));
        assert!(default_skip("static/app.min.js"));
        assert!(!default_skip("src/app.js"));
    }
}
