//! Applying a connection's edits to the clients' files, and taking them back.
//!
//! Every file is hostile input: a symlink anywhere below the directory it belongs to, a
//! file that is not regular, larger than [`MAX_FILE_BYTES`], not UTF-8, or not valid in
//! its format is refused with a message saying so, and nothing is written. A file is
//! replaced atomically (a temporary file in the same directory, synced, renamed over it),
//! keeping its mode (0600 when it holds a token).
//!
//! The ledger (`<state>/connect/`, 0700) remembers, per file, the bytes it had before
//! Cairn first touched it (the backup), what each connection added (and what a member it
//! replaced held), and a digest of what Cairn last wrote. Connecting twice changes
//! nothing the second time. Disconnecting puts the backup back byte for byte when the
//! file is as Cairn left it and no other connection has edits in it; otherwise it takes
//! out exactly its own edits and leaves the rest.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::clients::{Edit, FileEdit};
use super::json::Json;
use super::managed;

/// The largest configuration file read (Claude Code's `~/.claude.json` keeps history and
/// grows to a few MB).
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Why a file was left alone.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{path}: {why}; nothing was written")]
    Refused { path: PathBuf, why: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn refused(path: &Path, why: impl Into<String>) -> FileError {
    FileError::Refused {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FileError + '_ {
    move |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One file's change: its text before and after (`None`: absent).
#[derive(Debug, Clone)]
pub struct Change {
    pub path: PathBuf,
    pub before: Option<String>,
    pub after: Option<String>,
    /// Whether the file holds a token afterwards (written 0600).
    pub secret: bool,
    /// The file is put back from its backup (byte for byte).
    pub restored: bool,
    record: Option<Record>,
    backup: Option<Vec<u8>>,
    base: PathBuf,
}

impl Change {
    /// Whether applying it changes the file.
    pub fn changes_file(&self) -> bool {
        self.before != self.after
    }

    /// A unified diff of the change.
    pub fn diff(&self) -> String {
        let name = self.path.display().to_string();
        let (a, b) = (
            self.before.as_deref().unwrap_or(""),
            self.after.as_deref().unwrap_or(""),
        );
        let from = if self.before.is_some() {
            name.as_str()
        } else {
            "/dev/null"
        };
        let to = if self.after.is_some() {
            name.as_str()
        } else {
            "/dev/null"
        };
        similar::TextDiff::from_lines(a, b)
            .unified_diff()
            .context_radius(3)
            .header(from, to)
            .to_string()
    }
}

/// What the ledger knows of one file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    path: PathBuf,
    /// Whether the file existed before Cairn first wrote it (its bytes are the backup).
    existed: bool,
    /// Its mode then.
    mode: Option<u32>,
    /// Directories Cairn created for it, outermost first.
    created_dirs: Vec<PathBuf>,
    /// SHA-256 of what Cairn last wrote.
    written_sha256: String,
    edits: Vec<Owned>,
}

/// An edit and the connection that made it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Owned {
    owner: String,
    edit: Edit,
    /// What a member or table held before the edit replaced it.
    previous: Option<Json>,
}

/// Cairn's state directory for `home`: `$XDG_STATE_HOME/cairn`, default
/// `~/.local/state/cairn` (the ledger, the hooks' log).
pub fn state_dir(home: &Path) -> PathBuf {
    std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| home.join(".local/state"))
        .join("cairn")
}

/// The ledger directory (`$XDG_STATE_HOME/cairn/connect`, default
/// `~/.local/state/cairn/connect`).
#[derive(Debug, Clone)]
pub struct Ledger {
    dir: PathBuf,
}

impl Ledger {
    pub fn new(dir: PathBuf) -> Ledger {
        Ledger { dir }
    }

    /// The default place for `home`.
    pub fn for_home(home: &Path) -> Ledger {
        Ledger::new(state_dir(home).join("connect"))
    }

    fn key(&self, file: &Path) -> PathBuf {
        let digest = hex::encode(Sha256::digest(file.as_os_str().as_encoded_bytes()));
        self.dir.join(&digest[..32])
    }

    fn load(&self, file: &Path) -> Result<Option<Record>, FileError> {
        let p = self.key(file).with_extension("json");
        match std::fs::read(&p) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| refused(&p, format!("the ledger record is damaged ({e})"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&p)(e)),
        }
    }

    fn backup(&self, file: &Path) -> Result<Vec<u8>, FileError> {
        let p = self.key(file).with_extension("orig");
        std::fs::read(&p).map_err(io(&p))
    }

    fn ensure_dir(&self) -> Result<(), FileError> {
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io(&self.dir))
    }

    fn store(
        &self,
        file: &Path,
        record: Option<&Record>,
        backup: Option<&[u8]>,
    ) -> Result<(), FileError> {
        self.ensure_dir()?;
        let key = self.key(file);
        if let Some(bytes) = backup {
            write_atomic(&key.with_extension("orig"), bytes, 0o600)?;
        }
        match record {
            Some(r) => {
                let json = serde_json::to_vec_pretty(r).unwrap_or_default();
                write_atomic(&key.with_extension("json"), &json, 0o600)
            }
            None => {
                for ext in ["json", "orig"] {
                    let p = key.with_extension(ext);
                    match std::fs::remove_file(&p) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(io(&p)(e)),
                    }
                }
                Ok(())
            }
        }
    }
}

/// `path`'s text, or `None` when absent; refused when anything from `base` down to it is
/// a symlink, or it is not a regular file, too large or not UTF-8.
fn read(path: &Path, base: &Path) -> Result<Option<(String, u32)>, FileError> {
    let rel = path
        .strip_prefix(base)
        .map_err(|_| refused(path, format!("not inside {}", base.display())))?;
    let mut here = base.to_path_buf();
    for part in rel.components() {
        here.push(part);
        match std::fs::symlink_metadata(&here) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(refused(
                    path,
                    format!(
                        "{} is a symlink: Cairn does not write through links",
                        here.display()
                    ),
                ));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&here)(e)),
        }
    }
    let meta = std::fs::symlink_metadata(path).map_err(io(path))?;
    if !meta.is_file() {
        return Err(refused(path, "not a regular file"));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(refused(
            path,
            format!(
                "{} bytes, more than the {MAX_FILE_BYTES} a configuration file may have",
                meta.len()
            ),
        ));
    }
    let bytes = std::fs::read(path).map_err(io(path))?;
    let text = String::from_utf8(bytes).map_err(|_| refused(path, "not UTF-8 text"))?;
    Ok(Some((text, meta.mode() & 0o7777)))
}

/// Write `bytes` to `path` through a temporary file in its directory, renamed over it.
fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), FileError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".cairn-")
        .tempfile_in(dir)
        .map_err(io(path))?;
    tmp.write_all(bytes).map_err(io(path))?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(io(path))?;
    tmp.as_file().sync_all().map_err(io(path))?;
    tmp.persist(path).map_err(|e| io(path)(e.error))?;
    Ok(())
}

fn sha(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The format a file's edits imply.
#[derive(Clone, Copy, PartialEq)]
enum Format {
    Json,
    Toml,
    Markdown,
    Owned,
}

fn format_of(edit: &Edit) -> Format {
    match edit {
        Edit::JsonMember { .. } | Edit::JsonItem { .. } => Format::Json,
        Edit::TomlTable { .. } => Format::Toml,
        Edit::Section { .. } => Format::Markdown,
        Edit::File { .. } => Format::Owned,
    }
}

/// A parsed file being edited.
enum Doc {
    Json(Json),
    Toml(toml_edit::DocumentMut),
    Text(Option<String>),
}

impl Doc {
    fn parse(path: &Path, format: Format, text: Option<&str>) -> Result<Doc, FileError> {
        let blank = text.is_none_or(|t| t.trim().is_empty());
        match format {
            Format::Json if blank => Ok(Doc::Json(Json::Object(Vec::new()))),
            Format::Json => {
                let json = Json::parse(text.unwrap_or_default()).map_err(|e| {
                    refused(path, format!("not strict JSON ({e}); Cairn does not rewrite a file it cannot read (comments included): fix it, or add the entry by hand (cairn connect --dry-run shows it)"))
                })?;
                match json {
                    Json::Object(_) => Ok(Doc::Json(json)),
                    _ => Err(refused(path, "the JSON is not an object")),
                }
            }
            Format::Toml => text
                .unwrap_or_default()
                .parse::<toml_edit::DocumentMut>()
                .map(Doc::Toml)
                .map_err(|e| refused(path, format!("not valid TOML ({})", e.message()))),
            Format::Markdown | Format::Owned => Ok(Doc::Text(text.map(String::from))),
        }
    }

    fn render(&self) -> Option<String> {
        match self {
            Doc::Json(j) => Some(j.pretty()),
            Doc::Toml(t) => Some(t.to_string()),
            Doc::Text(t) => t.clone(),
        }
    }

    /// Apply `edit`; return what it replaced (for a member or a table).
    fn apply(&mut self, path: &Path, edit: &Edit, mine: bool) -> Result<Option<Json>, FileError> {
        let conflict = |what: String| {
            refused(
                path,
                format!(
                    "{what} is already there and was not written by cairn connect; choose another --name or remove it first"
                ),
            )
        };
        match (self, edit) {
            (Doc::Json(doc), Edit::JsonMember { path: at, value }) => {
                let current = doc.at(at).cloned();
                if current.is_some() && current.as_ref() != Some(value) && !mine {
                    return Err(conflict(at.join(".")));
                }
                doc.set(at, value.clone()).map_err(|e| refused(path, e))?;
                Ok(current)
            }
            (Doc::Json(doc), Edit::JsonItem { path: at, value }) => {
                let mut items = match doc.at(at) {
                    None => Vec::new(),
                    Some(Json::Array(items)) => items.clone(),
                    Some(_) => {
                        return Err(refused(path, format!("{} is not an array", at.join("."))));
                    }
                };
                if !items.contains(value) {
                    items.push(value.clone());
                }
                doc.set(at, Json::Array(items))
                    .map_err(|e| refused(path, e))?;
                Ok(None)
            }
            (Doc::Toml(doc), Edit::TomlTable { path: at, value }) => {
                let current = toml_at(doc, at);
                if current.is_some() && current.as_ref() != Some(value) && !mine {
                    return Err(conflict(at.join(".")));
                }
                toml_set(doc, at, value).map_err(|e| refused(path, e))?;
                Ok(current)
            }
            (Doc::Text(text), Edit::Section { name, body }) => {
                let now = text.as_deref().unwrap_or("");
                let new = managed::upsert_managed_section(now, name, body)
                    .map_err(|e| refused(path, e.to_string()))?;
                *text = Some(new);
                Ok(None)
            }
            (Doc::Text(text), Edit::File { content }) => {
                if text.as_ref().is_some_and(|t| t != content) && !mine {
                    return Err(conflict("a different file".into()));
                }
                *text = Some(content.clone());
                Ok(None)
            }
            _ => Err(refused(path, "edits of different formats in one file")),
        }
    }

    /// Take `owned` back out.
    fn undo(&mut self, path: &Path, owned: &Owned) -> Result<(), FileError> {
        match (self, &owned.edit) {
            (Doc::Json(doc), Edit::JsonMember { path: at, .. }) => {
                match &owned.previous {
                    Some(v) => doc.set(at, v.clone()).map_err(|e| refused(path, e))?,
                    None => {
                        doc.remove(at);
                    }
                }
                Ok(())
            }
            (Doc::Json(doc), Edit::JsonItem { path: at, value }) => {
                if let Some(Json::Array(items)) = doc.at(at) {
                    let kept: Vec<Json> = items.iter().filter(|i| *i != value).cloned().collect();
                    if kept.is_empty() {
                        doc.remove(at);
                    } else {
                        doc.set(at, Json::Array(kept))
                            .map_err(|e| refused(path, e))?;
                    }
                }
                Ok(())
            }
            (Doc::Toml(doc), Edit::TomlTable { path: at, .. }) => {
                match &owned.previous {
                    Some(v) => toml_set(doc, at, v).map_err(|e| refused(path, e))?,
                    None => toml_remove(doc, at),
                }
                Ok(())
            }
            (Doc::Text(text), Edit::Section { name, .. }) => {
                if let Some(t) = text.as_deref() {
                    let without = managed::remove_managed_section(t, name)
                        .map_err(|e| refused(path, e.to_string()))?;
                    if let Some(w) = without {
                        *text = if w.is_empty() { None } else { Some(w) };
                    }
                }
                Ok(())
            }
            (Doc::Text(text), Edit::File { content }) => {
                // A file someone has changed since is theirs now: left in place.
                if text.as_deref() == Some(content.as_str()) {
                    *text = None;
                }
                Ok(())
            }
            _ => Err(refused(
                path,
                "the ledger's edit does not match the file's format",
            )),
        }
    }
}

fn toml_at(doc: &toml_edit::DocumentMut, at: &[String]) -> Option<Json> {
    let mut item = doc.as_item();
    for k in at {
        item = item.get(k.as_str())?;
    }
    Some(toml_to_json(item))
}

fn toml_to_json(item: &toml_edit::Item) -> Json {
    use toml_edit::{Item, Value};
    fn value(v: &Value) -> Json {
        match v {
            Value::String(s) => Json::String(s.value().clone()),
            Value::Integer(i) => Json::Number((*i.value()).into()),
            Value::Float(f) => {
                serde_json::Number::from_f64(*f.value()).map_or(Json::Null, Json::Number)
            }
            Value::Boolean(b) => Json::Bool(*b.value()),
            Value::Datetime(d) => Json::String(d.value().to_string()),
            Value::Array(a) => Json::Array(a.iter().map(value).collect()),
            Value::InlineTable(t) => {
                Json::Object(t.iter().map(|(k, v)| (k.to_string(), value(v))).collect())
            }
        }
    }
    match item {
        Item::None => Json::Null,
        Item::Value(v) => value(v),
        Item::Table(t) => Json::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), toml_to_json(v)))
                .collect(),
        ),
        Item::ArrayOfTables(a) => Json::Array(
            a.iter()
                .map(|t| {
                    Json::Object(
                        t.iter()
                            .map(|(k, v)| (k.to_string(), toml_to_json(v)))
                            .collect(),
                    )
                })
                .collect(),
        ),
    }
}

fn json_to_toml(v: &Json) -> Result<toml_edit::Value, String> {
    use toml_edit::Value;
    Ok(match v {
        Json::String(s) => Value::from(s.as_str()),
        Json::Bool(b) => Value::from(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::from(i),
            None => Value::from(n.as_f64().unwrap_or_default()),
        },
        Json::Array(a) => Value::Array(a.iter().map(json_to_toml).collect::<Result<_, _>>()?),
        Json::Object(m) => {
            let mut t = toml_edit::InlineTable::new();
            for (k, v) in m {
                t.insert(k, json_to_toml(v)?);
            }
            Value::InlineTable(t)
        }
        Json::Null => return Err("TOML has no null".into()),
    })
}

/// Set the table at `at` (parents made implicit tables) to the object `value`.
fn toml_set(doc: &mut toml_edit::DocumentMut, at: &[String], value: &Json) -> Result<(), String> {
    let Json::Object(members) = value else {
        return Err("a TOML table must come from an object".into());
    };
    let (last, parents) = at.split_last().ok_or("an empty TOML path")?;
    let mut table = doc.as_table_mut();
    for k in parents {
        let entry = table.entry(k).or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        });
        table = entry
            .as_table_mut()
            .ok_or_else(|| format!("{k} is not a table"))?;
    }
    let mut new = toml_edit::Table::new();
    for (k, v) in members {
        new.insert(k, toml_edit::Item::Value(json_to_toml(v)?));
    }
    table.insert(last, toml_edit::Item::Table(new));
    Ok(())
}

/// Remove the table at `at`, then parents it left empty.
fn toml_remove(doc: &mut toml_edit::DocumentMut, at: &[String]) {
    fn go(table: &mut toml_edit::Table, at: &[String]) {
        let Some((first, rest)) = at.split_first() else {
            return;
        };
        if rest.is_empty() {
            table.remove(first);
            return;
        }
        if let Some(inner) = table.get_mut(first).and_then(|i| i.as_table_mut()) {
            go(inner, rest);
            if inner.is_empty() {
                table.remove(first);
            }
        }
    }
    go(doc.as_table_mut(), at);
}

/// The changes connecting `owner` makes (nothing is written: see [`apply`]).
pub fn connect(ledger: &Ledger, owner: &str, edits: &[FileEdit]) -> Result<Vec<Change>, FileError> {
    let mut by_file: BTreeMap<&Path, Vec<&FileEdit>> = BTreeMap::new();
    for e in edits {
        by_file.entry(e.path.as_path()).or_default().push(e);
    }
    let mut changes = Vec::new();
    for (path, edits) in by_file {
        let base = &edits[0].base;
        let current = read(path, base)?;
        let record = ledger.load(path)?;
        let before = current.as_ref().map(|(t, _)| t.clone());
        let format = format_of(&edits[0].edit);
        let mut doc = Doc::parse(path, format, before.as_deref())?;
        let mut record = record.unwrap_or_else(|| Record {
            path: path.to_path_buf(),
            existed: current.is_some(),
            mode: current.as_ref().map(|(_, m)| *m),
            created_dirs: Vec::new(),
            written_sha256: String::new(),
            edits: Vec::new(),
        });
        let fresh = record.edits.is_empty();
        // This owner's earlier edits that this connection no longer makes come out first
        // (a hook command with other flags, say).
        let stale: Vec<Owned> = record
            .edits
            .iter()
            .filter(|o| o.owner == owner && !edits.iter().any(|e| same_place(&e.edit, &o.edit)))
            .cloned()
            .collect();
        for o in &stale {
            doc.undo(path, o)?;
        }
        record
            .edits
            .retain(|o| !(o.owner == owner && stale.iter().any(|s| s.edit == o.edit)));
        for e in &edits {
            let earlier = record
                .edits
                .iter()
                .position(|o| o.owner == owner && same_place(&o.edit, &e.edit));
            let replaced = doc.apply(path, &e.edit, earlier.is_some())?;
            match earlier {
                Some(i) => {
                    // Keep what the first connection replaced, so disconnect restores it.
                    if let (Edit::JsonItem { value: old, .. }, Edit::JsonItem { value: new, .. }) =
                        (&record.edits[i].edit, &e.edit)
                        && old != new
                    {
                        let old = record.edits[i].clone();
                        doc.undo(path, &old)?;
                        doc.apply(path, &e.edit, true)?;
                    }
                    record.edits[i].edit = e.edit.clone();
                }
                None => record.edits.push(Owned {
                    owner: owner.into(),
                    edit: e.edit.clone(),
                    previous: replaced,
                }),
            }
        }
        let after = doc.render();
        let secret = edits.iter().any(|e| e.secret);
        let backup = match (fresh, &current) {
            (true, Some((text, _))) => Some(text.as_bytes().to_vec()),
            _ => None,
        };
        if fresh && current.is_none() {
            record.created_dirs = missing_dirs(path, base);
        }
        if let Some(a) = &after {
            record.written_sha256 = sha(a);
        }
        changes.push(Change {
            path: path.to_path_buf(),
            before,
            after,
            secret,
            restored: false,
            record: Some(record),
            backup,
            base: base.clone(),
        });
    }
    Ok(changes)
}

/// Whether two edits are at the same place (the same member, table, section or file).
fn same_place(a: &Edit, b: &Edit) -> bool {
    match (a, b) {
        (Edit::JsonMember { path: p, .. }, Edit::JsonMember { path: q, .. })
        | (Edit::TomlTable { path: p, .. }, Edit::TomlTable { path: q, .. })
        | (Edit::JsonItem { path: p, .. }, Edit::JsonItem { path: q, .. }) => p == q,
        (Edit::Section { name: n, .. }, Edit::Section { name: m, .. }) => n == m,
        (Edit::File { .. }, Edit::File { .. }) => true,
        _ => false,
    }
}

/// The directories between `base` and `path` that do not exist yet, outermost first.
fn missing_dirs(path: &Path, base: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d == base || !d.starts_with(base) || d.exists() {
            break;
        }
        out.push(d.to_path_buf());
        dir = d.parent();
    }
    out.reverse();
    out
}

/// The changes disconnecting `owner` makes in `files` (the files its connection would
/// touch); files the ledger knows nothing of are left alone.
pub fn disconnect(
    ledger: &Ledger,
    owner: &str,
    files: &[(PathBuf, PathBuf)],
) -> Result<Vec<Change>, FileError> {
    let mut changes = Vec::new();
    let mut seen = Vec::new();
    for (path, base) in files {
        if seen.contains(path) {
            continue;
        }
        seen.push(path.clone());
        let Some(mut record) = ledger.load(path)? else {
            continue;
        };
        if !record.edits.iter().any(|o| o.owner == owner) {
            continue;
        }
        let current = read(path, base)?;
        let before = current.as_ref().map(|(t, _)| t.clone());
        let untouched = before.as_deref().map(sha) == Some(record.written_sha256.clone());
        let others = record.edits.iter().any(|o| o.owner != owner);
        if untouched && !others {
            let after = match record.existed {
                true => {
                    let bytes = ledger.backup(path)?;
                    Some(
                        String::from_utf8(bytes)
                            .map_err(|_| refused(path, "the backup is not UTF-8"))?,
                    )
                }
                false => None,
            };
            changes.push(Change {
                path: path.clone(),
                before,
                after,
                secret: false,
                restored: true,
                record: Some(record),
                backup: None,
                base: base.clone(),
            });
            continue;
        }
        let format = format_of(&record.edits[0].edit);
        let mut doc = Doc::parse(path, format, before.as_deref())?;
        let mine: Vec<Owned> = record
            .edits
            .iter()
            .filter(|o| o.owner == owner)
            .cloned()
            .collect();
        for o in mine.iter().rev() {
            doc.undo(path, o)?;
        }
        record.edits.retain(|o| o.owner != owner);
        let mut after = doc.render();
        // A JSON file left as `{}` that Cairn created goes away.
        if !record.existed
            && record.edits.is_empty()
            && matches!(&doc, Doc::Json(Json::Object(m)) if m.is_empty())
        {
            after = None;
        }
        if let Some(a) = &after {
            record.written_sha256 = sha(a);
        }
        changes.push(Change {
            path: path.clone(),
            before,
            after,
            secret: false,
            restored: false,
            record: Some(record),
            backup: None,
            base: base.clone(),
        });
    }
    Ok(changes)
}

/// Write `changes` (from [`connect`] or [`disconnect`]) and the ledger.
pub fn apply(ledger: &Ledger, changes: &[Change]) -> Result<(), FileError> {
    for c in changes {
        let Some(record) = &c.record else { continue };
        // Re-check the file is what was read (and no link appeared) just before writing.
        let now = read(&c.path, &c.base)?.map(|(t, _)| t);
        if now != c.before {
            return Err(refused(
                &c.path,
                "changed while cairn was working; run the command again",
            ));
        }
        let done = record.edits.is_empty() || c.restored;
        if !c.changes_file() && !done {
            // Still record the edits (an entry that was already there as Cairn writes it).
            ledger.store(&c.path, Some(record), c.backup.as_deref())?;
            continue;
        }
        match &c.after {
            Some(text) => {
                if let Some(parent) = c.path.parent() {
                    std::fs::create_dir_all(parent).map_err(io(parent))?;
                }
                let mode = match (c.secret, record.mode) {
                    (true, _) => 0o600,
                    (false, Some(m)) => m,
                    (false, None) => 0o644,
                };
                if c.changes_file() {
                    write_atomic(&c.path, text.as_bytes(), mode)?;
                }
            }
            None => {
                if c.before.is_some() {
                    std::fs::remove_file(&c.path).map_err(io(&c.path))?;
                }
            }
        }
        if done {
            if c.after.is_none() {
                for d in record.created_dirs.iter().rev() {
                    // Only empty directories go; anything else put there stays.
                    let _ = std::fs::remove_dir(d);
                }
            }
            ledger.store(&c.path, None, None)?;
        } else {
            ledger.store(&c.path, Some(record), c.backup.as_deref())?;
        }
    }
    Ok(())
}
