//! The agents' memory and rule files: which client a file belongs to, where they are
//! under a project and in the user's agent directories, and the items a file holds.
//!
//! ## Items
//!
//! A file is Markdown (a `.mdc` Cursor rule is Markdown after its front matter). An item
//! is a list entry (`-`, `*`, `+`, `1.`) with its continuation lines and the entries
//! nested under it, or a paragraph. Headings are not items: an item shorter than a
//! learning's minimum is prefixed with its heading (`Testing: run the suite with ...`).
//! Left out: front matter, fenced code blocks, tables, HTML comments, Claude Code's
//! `@path` imports, index entries that only link to another Markdown file (`MEMORY.md`),
//! and every section Cairn manages (`<!-- BEGIN cairn:NAME -->` ... `<!-- END ... -->`):
//! what `cairn connect` and `cairn export` wrote is Cairn's own, so importing it back
//! changes nothing.

use std::path::{Path, PathBuf};

use crate::learnings::limits::PATTERN_MIN;

/// Whose file it is (recorded with each imported item).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// CLAUDE.md, CLAUDE.local.md, `~/.claude/projects/*/memory/*.md`.
    ClaudeCode,
    /// `$CODEX_HOME/memories/*.md` (default `~/.codex`).
    Codex,
    /// `.cursor/rules/*.mdc`.
    Cursor,
    /// GEMINI.md.
    GeminiCli,
    /// `.github/copilot-instructions.md`.
    Copilot,
    /// AGENTS.md, read by many clients.
    AgentsMd,
    /// Any other Markdown file named on the command line.
    Markdown,
}

impl Client {
    /// The name recorded and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::Codex => "codex",
            Client::Cursor => "cursor",
            Client::GeminiCli => "gemini-cli",
            Client::Copilot => "copilot",
            Client::AgentsMd => "agents-md",
            Client::Markdown => "markdown",
        }
    }

    /// The client of the file at `path`, by its name and the directories above it.
    pub fn of(path: &Path) -> Client {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let parts: Vec<&str> = path
            .components()
            .filter_map(|c| c.as_os_str().to_str())
            .collect();
        let under = |a: &str, b: &str| parts.windows(2).any(|w| w[0] == a && w[1] == b);
        match name {
            "CLAUDE.md" | "CLAUDE.local.md" => Client::ClaudeCode,
            "AGENTS.md" | "AGENTS.override.md" => Client::AgentsMd,
            "GEMINI.md" => Client::GeminiCli,
            "copilot-instructions.md" => Client::Copilot,
            _ if name.ends_with(".mdc") || under(".cursor", "rules") => Client::Cursor,
            _ if under(".claude", "projects") => Client::ClaudeCode,
            _ if parts.contains(&"memories") => Client::Codex,
            _ => Client::Markdown,
        }
    }
}

/// One item of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// 1-based line where it starts.
    pub line: usize,
    /// Its text, on one line per source line joined by spaces.
    pub text: String,
}

/// What a file gives: its items, and the path prefixes a Cursor rule's `globs` name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    pub items: Vec<Item>,
    pub applies_to: Vec<String>,
}

/// The files `cairn import --discover` reads for a project at `root`, with `home` the
/// user's home directory and `codex_home` Codex's (`$CODEX_HOME`, default
/// `~/.codex`). Only files that exist are listed; nothing is opened (reading checks
/// each file).
pub fn discover(root: &Path, home: Option<&Path>, codex_home: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for rel in [
        "CLAUDE.md",
        "CLAUDE.local.md",
        "AGENTS.md",
        "GEMINI.md",
        ".github/copilot-instructions.md",
    ] {
        let p = root.join(rel);
        if std::fs::symlink_metadata(&p).is_ok() {
            out.push(p);
        }
    }
    out.extend(markdown_in(&root.join(".cursor/rules"), "mdc"));
    if let Some(home) = home {
        let dir = home
            .join(".claude/projects")
            .join(claude_project_dir(root))
            .join("memory");
        out.extend(markdown_in(&dir, "md"));
    }
    if let Some(codex) = codex_home {
        out.extend(markdown_in(&codex.join("memories"), "md"));
    }
    out
}

/// The files of `dir` (not below it) whose name ends in `.ext`, by name; symlinks
/// included (reading refuses them, so the report names them).
fn markdown_in(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    files
}

/// The directory Claude Code keeps a project's sessions and memory in, under
/// `~/.claude/projects/`: the project's absolute path with every character other than
/// an ASCII letter or digit replaced by `-` (`/home/ann/shop.api` → `-home-ann-shop-api`).
pub fn claude_project_dir(root: &Path) -> String {
    root.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The items of a Markdown file (see the module docs).
pub fn split(text: &str) -> Split {
    let mut out = Split::default();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    // Front matter: `---` on the first line up to the next `---`.
    if lines.first().is_some_and(|l| l.trim_end() == "---")
        && let Some(end) = lines.iter().skip(1).position(|l| l.trim_end() == "---")
    {
        for l in &lines[1..=end] {
            if let Some(globs) = l.trim().strip_prefix("globs:") {
                out.applies_to = glob_prefixes(globs);
            }
        }
        i = end + 2;
    }
    let mut heading: Option<String> = None;
    let mut fence: Option<&str> = None;
    let mut managed = false;
    let mut current: Option<(usize, usize, Vec<String>)> = None; // (line, indent, parts)
    let flush = |current: &mut Option<(usize, usize, Vec<String>)>,
                 heading: &Option<String>,
                 out: &mut Split| {
        if let Some((line, _, parts)) = current.take() {
            let text = parts.join(" ").trim().to_string();
            if let Some(text) = keep(text, heading.as_deref()) {
                out.items.push(Item { line, text });
            }
        }
    };
    while i < lines.len() {
        let raw = lines[i];
        let line_no = i + 1;
        i += 1;
        let trimmed = raw.trim();
        if managed {
            if trimmed.starts_with("<!-- END cairn:") {
                managed = false;
            }
            continue;
        }
        if let Some(f) = fence {
            if trimmed.starts_with(f) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("<!-- BEGIN cairn:") {
            flush(&mut current, &heading, &mut out);
            managed = true;
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            flush(&mut current, &heading, &mut out);
            fence = Some(&trimmed[..3]);
            continue;
        }
        if trimmed.is_empty() {
            flush(&mut current, &heading, &mut out);
            continue;
        }
        if let Some(h) = heading_text(trimmed) {
            flush(&mut current, &heading, &mut out);
            heading = Some(h.to_string());
            continue;
        }
        if trimmed.starts_with('|') || trimmed.starts_with("<!--") {
            flush(&mut current, &heading, &mut out);
            continue;
        }
        let indent = raw.len() - raw.trim_start().len();
        if let Some(body) = list_entry(trimmed) {
            match &mut current {
                // An entry nested under the current one belongs to it.
                Some((_, at, parts)) if indent > *at => parts.push(body.to_string()),
                _ => {
                    flush(&mut current, &heading, &mut out);
                    current = Some((line_no, indent, vec![body.to_string()]));
                }
            }
            continue;
        }
        match &mut current {
            Some((_, _, parts)) => parts.push(trimmed.to_string()),
            None => current = Some((line_no, indent, vec![trimmed.to_string()])),
        }
    }
    flush(&mut current, &heading, &mut out);
    out
}

/// The text of a Markdown heading line (`## Testing` → `Testing`).
fn heading_text(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    (1..=6)
        .contains(&hashes)
        .then(|| line[hashes..].strip_prefix(' '))
        .flatten()
        .map(str::trim)
}

/// The body of a list entry line (`- x`, `* x`, `+ x`, `12. x`, `3) x`).
fn list_entry(line: &str) -> Option<&str> {
    for marker in ["- ", "* ", "+ "] {
        if let Some(rest) = line.strip_prefix(marker) {
            return Some(rest.trim_start_matches("[ ] ").trim_start_matches("[x] "));
        }
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 {
        let rest = &line[digits..];
        if let Some(r) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return Some(r);
        }
    }
    None
}

/// An item's text as recorded, or `None` for what is not a lesson: a file's preamble
/// about itself, a Claude Code `@path` import, or an index entry that only links to
/// another Markdown file.
fn keep(text: String, heading: Option<&str>) -> Option<String> {
    // `This file provides guidance to ...`: the preamble `/init` writes, about the file.
    if text.is_empty()
        || text.starts_with("This file ")
        || (text.starts_with('@') && !text.contains(' '))
    {
        return None;
    }
    if text.starts_with('[')
        && text
            .split_once("](")
            .is_some_and(|(_, rest)| rest.split(')').next().is_some_and(|t| t.ends_with(".md")))
    {
        return None;
    }
    match heading {
        Some(h) if text.chars().count() < PATTERN_MIN && !h.is_empty() => {
            Some(format!("{h}: {text}"))
        }
        _ => Some(text),
    }
}

/// The path prefixes of a Cursor rule's `globs` (`src/api/**/*.ts, tests/**` →
/// `src/api/`, `tests/`): each glob up to its first wildcard, cut back to a directory.
/// A glob that starts with a wildcard applies everywhere and gives no prefix.
fn glob_prefixes(globs: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for g in globs
        .trim()
        .trim_matches(['[', ']'])
        .split(',')
        .map(|g| g.trim().trim_matches(['"', '\'']))
    {
        let literal = g.split(['*', '?', '[', '{']).next().unwrap_or("");
        let dir = match literal.rfind('/') {
            Some(i) => &literal[..=i],
            None => "",
        };
        let dir = dir.trim_start_matches("./");
        if !dir.is_empty() && !dir.starts_with('/') && !out.iter().any(|o| o == dir) {
            out.push(dir.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_entries_and_paragraphs_with_nested_entries_joined() {
        let text = "---\ndescription: API rules\nglobs: src/api/**/*.ts, \"tests/**\"\n---\n\
                    # Rules\n\n## Testing\n- Run the suite with `pnpm test --run`, never in watch mode in CI.\n\
                    - Short one\n  - nested detail that belongs to it\n\n\
                    A paragraph that spans\ntwo lines of text.\n\n```sh\n- not an item\n```\n\
                    | a | b |\n@docs/more.md\n- [Testing](testing.md) — how we test\n";
        let s = split(text);
        assert_eq!(s.applies_to, vec!["src/api/", "tests/"]);
        let texts: Vec<&str> = s.items.iter().map(|i| i.text.as_str()).collect();
        assert_eq!(
            texts,
            vec![
                "Run the suite with `pnpm test --run`, never in watch mode in CI.",
                "Testing: Short one nested detail that belongs to it",
                "Testing: A paragraph that spans two lines of text.",
            ]
        );
        assert_eq!(s.items[0].line, 8);
        assert_eq!(s.items[2].line, 12);
    }

    #[test]
    fn managed_sections_are_left_out() {
        let text = "- Keep migrations append-only; add a new numbered file for every change.\n\n\
                    <!-- BEGIN cairn:learnings (managed by cairn; edits inside are replaced) -->\n\
                    - An exported learning that must not come back as an import item.\n\
                    <!-- END cairn:learnings -->\n";
        let s = split(text);
        assert_eq!(s.items.len(), 1);
        assert!(s.items[0].text.starts_with("Keep migrations"));
    }

    #[test]
    fn clients_by_path_and_claude_project_dirs() {
        assert_eq!(Client::of(Path::new("/p/CLAUDE.md")), Client::ClaudeCode);
        assert_eq!(
            Client::of(Path::new("/p/.cursor/rules/api.mdc")),
            Client::Cursor
        );
        assert_eq!(
            Client::of(Path::new("/h/.claude/projects/-p/memory/feedback.md")),
            Client::ClaudeCode
        );
        assert_eq!(
            Client::of(Path::new("/h/.codex/memories/a.md")),
            Client::Codex
        );
        assert_eq!(Client::of(Path::new("/p/notes.md")), Client::Markdown);
        assert_eq!(
            claude_project_dir(Path::new("/home/ann/shop.api")),
            "-home-ann-shop-api"
        );
    }
}
