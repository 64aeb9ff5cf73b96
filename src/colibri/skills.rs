//! Skills: the front matter of every `.agents/skills/*/SKILL.md` under a project root.
//!
//! Decisions:
//! - A skill's `name` is its directory name (as the document says); a `name` key in
//!   the front matter is ignored.
//! - `description` is required; `version` defaults to "" and `capabilities` to `[]`.
//! - A directory without `SKILL.md` is not a skill and is skipped silently. Any other
//!   problem (no front matter, unterminated front matter, a line that is not
//!   `key: value`, a `capabilities` value that is not a list, a file that is not UTF-8 or
//!   larger than [`SKILL_FILE_MAX_BYTES`], a skill directory or SKILL.md that is a
//!   symlink (symlinks are never followed, wherever they lead), a SKILL.md that is not a
//!   regular file or has more than one hard link) is reported for that skill in
//!   `errors`; the other skills are still listed. Every directory and file is opened
//!   beneath a handle on the root ([`crate::paths::DirHandle`]), never by name.
//! - The front matter is a small YAML subset: `key: value` lines, values plain or
//!   quoted ('…' or "…"), inline lists `[a, "b"]`, block lists (`- a` lines below
//!   `key:`), block scalars (`|` keeps newlines, `>` folds them), `#` comment lines;
//!   nested maps under other keys are skipped.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::access::context::WorkContext;
use crate::error::{Error, Result};
use crate::paths::{DirHandle, refusal_text};
use crate::store::Store;

/// Largest `SKILL.md` read, in bytes.
pub(crate) const SKILL_FILE_MAX_BYTES: u64 = 1024 * 1024;

/// One skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct Skill {
    /// The directory name under .agents/skills/.
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) description: String,
    pub(crate) capabilities: Vec<String>,
    /// Root-relative path of the SKILL.md file.
    pub(crate) path: String,
}

/// A skill whose SKILL.md could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct SkillError {
    /// Root-relative path of the SKILL.md file (or the skill directory).
    pub(crate) path: String,
    /// What is wrong.
    pub(crate) reason: String,
}

/// What `skill_list` returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct SkillList {
    /// Skills matching the filters, by name.
    pub(crate) skills: Vec<Skill>,
    pub(crate) total_count: usize,
    /// Skills that could not be read (all of them, whatever the filters), by path.
    pub(crate) errors: Vec<SkillError>,
}

/// Filters of `skill_list`.
#[derive(Debug, Clone, Default)]
pub(crate) struct SkillFilter {
    /// Case-insensitive substring of the name or the description.
    pub(crate) search: Option<String>,
    /// A declared capability (case-insensitive).
    pub(crate) capability: Option<String>,
}

/// A front-matter value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Text(String),
    List(Vec<String>),
    /// A nested map or anything else we skip.
    Other,
}

fn unquote(s: &str) -> String {
    let s = s.trim();
    let b = s.as_bytes();
    if b.len() >= 2 && b[0] == b'"' && b[b.len() - 1] == b'"' {
        return s[1..s.len() - 1]
            .replace("\\\"", "\"")
            .replace("\\n", "\n")
            .replace("\\\\", "\\");
    }
    if b.len() >= 2 && b[0] == b'\'' && b[b.len() - 1] == b'\'' {
        return s[1..s.len() - 1].replace("''", "'");
    }
    // A plain scalar ends at " #" (a trailing comment).
    match s.find(" #") {
        Some(i) => s[..i].trim_end().to_string(),
        None => s.to_string(),
    }
}

/// Split an inline list's body on commas outside quotes.
fn inline_list(body: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for ch in body.chars() {
        match (quote, ch) {
            (None, '"' | '\'') => {
                quote = Some(ch);
                cur.push(ch);
            }
            (Some(q), c) if c == q => {
                quote = None;
                cur.push(ch);
            }
            (None, ',') => items.push(std::mem::take(&mut cur)),
            _ => cur.push(ch),
        }
    }
    items.push(cur);
    items
        .iter()
        .map(|i| unquote(i))
        .filter(|i| !i.is_empty())
        .collect()
}

/// Parse the front matter of a SKILL.md into `(key, value)` pairs.
fn front_matter(text: &str) -> std::result::Result<Vec<(String, Value)>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, l)) if l.trim_end() == "---" => {}
        _ => return Err("no front matter: the file must start with a '---' line".into()),
    }
    let mut body = Vec::new();
    let mut closed = false;
    for (n, l) in lines {
        if l.trim_end() == "---" || l.trim_end() == "..." {
            closed = true;
            break;
        }
        body.push((n + 1, l));
    }
    if !closed {
        return Err("front matter is not closed: add a '---' line after it".into());
    }
    let mut out: Vec<(String, Value)> = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let (n, line) = body[i];
        i += 1;
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            return Err(format!("line {n}: unexpected indentation"));
        }
        let Some((key, rest)) = line.split_once(':') else {
            return Err(format!("line {n}: expected 'key: value'"));
        };
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(format!("line {n}: expected 'key: value'"));
        }
        let rest = rest.trim();
        // The indented lines that belong to this key.
        let start = i;
        while i < body.len() && {
            let l = body[i].1;
            l.trim().is_empty() || l.starts_with([' ', '\t', '-'])
        } {
            i += 1;
        }
        let block: Vec<&str> = body[start..i]
            .iter()
            .map(|(_, l)| *l)
            .filter(|l| !l.trim().is_empty())
            .collect();
        let value = if rest == "|" || rest == ">" || rest == "|-" || rest == ">-" {
            let joined: Vec<&str> = block.iter().map(|l| l.trim()).collect();
            Value::Text(if rest.starts_with('|') {
                joined.join("\n")
            } else {
                joined.join(" ")
            })
        } else if rest.is_empty() {
            if block.is_empty() {
                Value::Text(String::new())
            } else if block.iter().all(|l| l.trim_start().starts_with('-')) {
                Value::List(
                    block
                        .iter()
                        .map(|l| unquote(l.trim_start().trim_start_matches('-')))
                        .collect(),
                )
            } else {
                Value::Other
            }
        } else if let Some(inner) = rest.strip_prefix('[') {
            let Some(inner) = inner.trim_end().strip_suffix(']') else {
                return Err(format!(
                    "line {n}: inline list of {key} is not closed with ']'"
                ));
            };
            Value::List(inline_list(inner))
        } else if !block.is_empty() {
            return Err(format!("line {n}: {key} has a value and an indented block"));
        } else {
            Value::Text(unquote(rest))
        };
        out.push((key.to_string(), value));
    }
    Ok(out)
}

/// Read one SKILL.md into a skill named `name`.
fn parse_skill(name: &str, rel: &str, text: &str) -> std::result::Result<Skill, String> {
    let fields = front_matter(text)?;
    let get = |k: &str| fields.iter().find(|(key, _)| key == k).map(|(_, v)| v);
    let text_of = |k: &str| -> std::result::Result<Option<String>, String> {
        match get(k) {
            None => Ok(None),
            Some(Value::Text(t)) => Ok(Some(t.clone())),
            Some(_) => Err(format!("{k} must be a single value")),
        }
    };
    let description = text_of("description")?
        .filter(|d| !d.trim().is_empty())
        .ok_or("front matter has no description")?;
    let version = text_of("version")?.unwrap_or_default();
    let capabilities = match get("capabilities") {
        None => Vec::new(),
        Some(Value::List(l)) => l.clone(),
        Some(Value::Text(t)) if t.is_empty() => Vec::new(),
        Some(_) => {
            return Err("capabilities must be a list ([a, b] or '- a' lines)".into());
        }
    };
    Ok(Skill {
        name: name.to_string(),
        version,
        description,
        capabilities,
        path: rel.to_string(),
    })
}

/// The skill root of a piece of work: its `--worktree-path` when given (the agent's own
/// checkout, where it sees the skills it is editing), else the bound project's `path`.
pub(crate) fn skill_root(store: &Store, work: &WorkContext) -> Result<PathBuf> {
    if let Some(w) = &work.worktree_path {
        return Ok(w.clone());
    }
    if let Some(pid) = &work.project_id
        && let Some(path) = crate::issues::project(store, pid)?.path
    {
        return Ok(PathBuf::from(path));
    }
    Err(Error::FailedPrecondition(
        "skill_list needs a project root: start `cairn serve` with --worktree-path, or bind \
         a project that has a path (--project-id / --issue-id)"
            .into(),
    ))
}

/// `skill_list` for a piece of work: the skills under its [`skill_root`].
pub(crate) fn list_work_skills(
    store: &Store,
    work: &WorkContext,
    filter: &SkillFilter,
) -> Result<SkillList> {
    list_skills(&skill_root(store, work)?, filter)
}

/// List the skills under `root/.agents/skills/`. A missing skills directory is an
/// empty list.
pub(crate) fn list_skills(root: &Path, filter: &SkillFilter) -> Result<SkillList> {
    let root = DirHandle::open_root(root)?;
    let mut skills = Vec::new();
    let mut errors = Vec::new();
    let dir = match root.dir(".agents/skills", "skills_dir") {
        Ok(Some(d)) => d,
        Ok(None) => {
            return Ok(SkillList {
                skills,
                total_count: 0,
                errors,
            });
        }
        Err(e) => {
            errors.push(SkillError {
                path: ".agents/skills".into(),
                reason: refusal_text(&e),
            });
            return Ok(SkillList {
                skills,
                total_count: 0,
                errors,
            });
        }
    };
    let mut names: Vec<String> = Vec::new();
    for entry in dir.entries()? {
        match entry.name.into_string() {
            Ok(n) if n.starts_with('.') => {}
            Ok(n) => names.push(n),
            Err(raw) => errors.push(SkillError {
                path: format!(".agents/skills/{}", raw.to_string_lossy()),
                reason: "the directory name is not valid UTF-8".into(),
            }),
        }
    }
    for name in names {
        let rel = format!(".agents/skills/{name}/SKILL.md");
        let mut fail = |reason: String| {
            errors.push(SkillError {
                path: rel.clone(),
                reason,
            })
        };
        // The skill directory and its SKILL.md, opened beneath the skills directory's
        // handle without following symlinks; a plain file is not a skill.
        let skill_dir = match dir.dir_parts(&[&name], &name, "skill") {
            Ok(Some(d)) => d,
            Ok(None) => continue,
            Err(Error::InvalidInput(f))
                if f.iter().any(|f| f.message.contains("not a directory")) =>
            {
                continue;
            }
            Err(e) => {
                fail(refusal_text(&e));
                continue;
            }
        };
        let bytes = match skill_dir.open_file("SKILL.md", "skill", SKILL_FILE_MAX_BYTES) {
            Ok(Some(f)) => f.read_capped(),
            Ok(None) => continue,
            Err(e) => Err(e),
        };
        let bytes = match bytes {
            Ok(b) => b,
            Err(e) => {
                fail(format!("SKILL.md: {}", refusal_text(&e)));
                continue;
            }
        };
        let Ok(text) = String::from_utf8(bytes) else {
            fail("SKILL.md is not valid UTF-8".into());
            continue;
        };
        match parse_skill(&name, &rel, &text) {
            Ok(s) => skills.push(s),
            Err(reason) => fail(reason),
        }
    }
    let search = filter.search.as_ref().map(|s| s.to_lowercase());
    let capability = filter.capability.as_ref().map(|s| s.to_lowercase());
    skills.retain(|s| {
        search.as_ref().is_none_or(|q| {
            s.name.to_lowercase().contains(q) || s.description.to_lowercase().contains(q)
        }) && capability
            .as_ref()
            .is_none_or(|c| s.capabilities.iter().any(|x| x.to_lowercase() == *c))
    });
    Ok(SkillList {
        total_count: skills.len(),
        skills,
        errors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_block_lists_and_scalars() {
        let s = parse_skill(
            "x",
            "p",
            "---\nname: other\nversion: \"1.0.0\"\ndescription: >\n  Folded\n  text\ncapabilities: [a, 'b, c', \"d\"]\nmetadata:\n  owner: me\n---\nbody\n",
        )
        .unwrap();
        assert_eq!(s.name, "x");
        assert_eq!(s.version, "1.0.0");
        assert_eq!(s.description, "Folded text");
        assert_eq!(s.capabilities, ["a", "b, c", "d"]);
        let s = parse_skill(
            "y",
            "p",
            "---\ndescription: plain # comment\ncapabilities:\n  - one\n  - \"two\"\n---\n",
        )
        .unwrap();
        assert_eq!(s.description, "plain");
        assert_eq!(s.capabilities, ["one", "two"]);
        assert_eq!(s.version, "");
    }

    #[test]
    fn malformed_front_matter_says_why() {
        let err = |t: &str| parse_skill("x", "p", t).unwrap_err();
        assert!(err("no front matter").contains("no front matter"));
        assert!(err("---\ndescription: d\n").contains("not closed"));
        assert!(err("---\njust words\n---\n").contains("line 2"));
        assert!(err("---\ndescription: d\ncapabilities: x\n---\n").contains("list"));
        assert!(err("---\nversion: 1\n---\n").contains("description"));
        assert!(err("---\ndescription: d\ncapabilities: [a, b\n---\n").contains("']'"));
    }
}
