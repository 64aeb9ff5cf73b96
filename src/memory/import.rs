//! `cairn import`: the items of the agents' memory and rule files recorded as learnings
//! through the learnings' add path (the same gates, the same near-duplicate rule), with a
//! record of what each file gave.
//!
//! - Each file is read as the vault reads a document ([`crate::vault::ingest::read_file`]:
//!   a regular file with one link, not a symlink, at most
//!   [`crate::vault::ingest::MAX_FILE_BYTES`]) and must be UTF-8 with at most
//!   [`ITEMS_MAX`] items; a refused file is reported and the others are imported.
//! - Each file of a project gets its own issue (`memory_sources.issue_id`, created done,
//!   labelled `imported`): its items are recorded on it, so a rule that three files
//!   repeat is one learning with two confirmations, as three agents' issues would give.
//! - `memory_items` holds, per file, the normal form of each item and the learning it
//!   went into. An item already recorded for its file is left alone (a second import
//!   changes nothing); an item no longer in its file is marked removed, and its learning
//!   archived with a note when no other file still holds it and an import created it
//!   (a learning an agent recorded and a file merely confirmed stays). An item that
//!   comes back restores the learning.
//! - The add path and the record are two transactions: an import interrupted between
//!   them finds the learning on its next run (the add answers a conflict naming it) and
//!   records it then.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::base::now_iso;
use crate::error::{Error, Result};
use crate::issues::{NewIssue, Status};
use crate::learnings::{LearningType, Learnings, NewLearning, normalize_pattern};
use crate::paths::DirHandle;
use crate::store::db::params;

use super::split::{Client, Item, split};

/// The most items one file may hold: each is a learning recorded on its own, and a
/// rule file is a page or two of them.
pub const ITEMS_MAX: usize = 2_000;

/// The actor recorded for what an import does.
pub const ACTOR: &str = "import";

/// What to import.
#[derive(Debug, Clone)]
pub struct ImportRequest {
    /// Project id or slug.
    pub project: String,
    /// Files to read.
    pub paths: Vec<PathBuf>,
    /// Report what would change without writing anything.
    pub dry_run: bool,
}

/// What happened to one item.
#[derive(Debug, Clone, Serialize)]
pub struct ItemOutcome {
    pub line: usize,
    /// `added`, `merged` (into an existing learning, as a confirmation), `unchanged`,
    /// `restored`, `refused` (by the learnings' gates: `reason` says why).
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learning: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub text: String,
}

/// What one file gave.
#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    pub path: String,
    pub client: &'static str,
    /// The issue its learnings are recorded on (absent when the file was refused or
    /// nothing was recorded in a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue: Option<String>,
    /// Why the whole file was not read, if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub items: Vec<ItemOutcome>,
    /// Learnings archived because their item left this file.
    pub archived: Vec<String>,
    /// Items removed from this file whose learning stays (another file or an agent
    /// still holds it).
    pub removed: usize,
}

/// What `cairn import` did.
#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    pub project: String,
    pub dry_run: bool,
    pub files: Vec<FileReport>,
    pub added: usize,
    pub merged: usize,
    pub unchanged: usize,
    pub refused_items: usize,
    pub refused_files: usize,
    pub archived: usize,
}

/// A file read and split.
struct Read {
    items: Vec<(Item, String)>,
    applies_to: Vec<String>,
    commit: Option<String>,
}

/// Read and split one file (see the module docs for what is refused).
fn read(path: &Path) -> Result<Read> {
    let shown = path.display().to_string();
    let (dir, name) = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        (Some(d), Some(n)) => (
            if d.as_os_str().is_empty() {
                Path::new(".")
            } else {
                d
            },
            n,
        ),
        _ => return Err(Error::invalid("path", format!("{shown} names no file"))),
    };
    let root = DirHandle::open_root(dir)?;
    let file = crate::vault::ingest::read_file(&root, name)?
        .ok_or_else(|| Error::invalid("path", format!("{shown} does not exist")))?;
    let text = String::from_utf8(file.bytes)
        .map_err(|_| Error::invalid("path", format!("{shown} is not UTF-8 text")))?;
    let s = split(&text);
    if s.items.len() > ITEMS_MAX {
        return Err(Error::invalid(
            "path",
            format!(
                "{shown} holds {} items; at most {ITEMS_MAX} are imported from one file \
                 (a file that long is reference: index it in the vault)",
                s.items.len()
            ),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    let items = s
        .items
        .into_iter()
        .filter_map(|item| {
            // The normal form of the text the add path stores (hidden characters that
            // it removes are removed here too, so the record matches the learning).
            let norm = normalize_pattern(crate::text::clean(&item.text).0.trim());
            (!norm.is_empty() && seen.insert(norm.clone())).then_some((item, norm))
        })
        .collect();
    Ok(Read {
        items,
        applies_to: s.applies_to,
        commit: last_commit(root.path(), name),
    })
}

/// The last commit that touched `name` in `dir`, if it is in a git work tree.
fn last_commit(dir: &Path, name: &str) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["log", "-n1", "--format=%H", "--"])
        .arg(name)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let hash = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && hash.len() == 40).then_some(hash)
}

/// A source as recorded: its row id and issue.
struct Source {
    id: i64,
    issue_id: String,
}

/// One recorded item of a source.
struct Recorded {
    norm: String,
    learning_id: String,
    line: i64,
    commit: Option<String>,
    removed: bool,
}

/// Import `req.paths` into the project (see the module docs).
pub(crate) fn import(l: &Learnings<'_>, req: &ImportRequest) -> Result<ImportReport> {
    let project = crate::issues::project(l.store, &req.project)?;
    let mut report = ImportReport {
        project: project.slug.clone(),
        dry_run: req.dry_run,
        files: Vec::new(),
        added: 0,
        merged: 0,
        unchanged: 0,
        refused_items: 0,
        refused_files: 0,
        archived: 0,
    };
    for path in &req.paths {
        // The recorded path is absolute, so the same file named two ways is one source.
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        let client = Client::of(&abs);
        let mut file = FileReport {
            path: abs.display().to_string(),
            client: client.as_str(),
            issue: None,
            refused: None,
            commit: None,
            items: Vec::new(),
            archived: Vec::new(),
            removed: 0,
        };
        match read(&abs) {
            Err(e) => {
                file.refused = Some(crate::paths::refusal_text(&e));
                report.refused_files += 1;
            }
            Ok(r) => {
                file.commit = r.commit.clone();
                import_file(l, &project.id, &abs, client, &r, req.dry_run, &mut file)?;
            }
        }
        for i in &file.items {
            match i.outcome {
                "added" => report.added += 1,
                "merged" => report.merged += 1,
                "unchanged" => report.unchanged += 1,
                "refused" => report.refused_items += 1,
                _ => {}
            }
        }
        report.archived += file.archived.len();
        report.files.push(file);
    }
    Ok(report)
}

fn import_file(
    l: &Learnings<'_>,
    project_id: &str,
    path: &Path,
    client: Client,
    r: &Read,
    dry_run: bool,
    file: &mut FileReport,
) -> Result<()> {
    let (source, recorded) = recorded(l, project_id, path)?;
    if dry_run {
        return preview(l, r, source, &recorded, file);
    }
    let source = match source {
        Some(s) => s,
        None => create_source(l, project_id, path, client)?,
    };
    file.issue = Some(issue_identifier(l, &source.issue_id)?);
    let import = FileImport {
        l,
        source: &source,
        client,
        read: r,
        recorded: &recorded,
    };
    for (item, norm) in &r.items {
        file.items.push(import.item(item, norm)?);
    }
    for x in recorded.iter().filter(|x| !x.removed) {
        if !r.items.iter().any(|(_, n)| *n == x.norm) {
            import.gone(x, path, file)?;
        }
    }
    Ok(())
}

/// The file's source, if an import recorded it before, and the items recorded for it.
fn recorded(
    l: &Learnings<'_>,
    project_id: &str,
    path: &Path,
) -> Result<(Option<Source>, Vec<Recorded>)> {
    let key = path.display().to_string();
    let source = l.store.read(|c| {
        c.query_opt(
            "SELECT id, issue_id FROM memory_sources WHERE project_id = ?1 AND path = ?2",
            params![project_id, key],
            |row| {
                Ok(Source {
                    id: row.get(0)?,
                    issue_id: row.get(1)?,
                })
            },
        )
    })?;
    let recorded = match &source {
        None => Vec::new(),
        Some(s) => l.store.read(|c| {
            c.query_map(
                "SELECT pattern_norm, learning_id, line, git_commit, removed_at IS NOT NULL
                 FROM memory_items WHERE source_id = ?1 ORDER BY id",
                [s.id],
                |row| {
                    Ok(Recorded {
                        norm: row.get(0)?,
                        learning_id: row.get(1)?,
                        line: row.get(2)?,
                        commit: row.get(3)?,
                        removed: row.get(4)?,
                    })
                },
            )
        })?,
    };
    Ok((source, recorded))
}

/// A dry run: what an import of the file would do, writing nothing.
fn preview(
    l: &Learnings<'_>,
    r: &Read,
    source: Option<Source>,
    recorded: &[Recorded],
    file: &mut FileReport,
) -> Result<()> {
    for (item, norm) in &r.items {
        let outcome = match recorded.iter().find(|x| x.norm == *norm) {
            Some(x) if !x.removed => "unchanged",
            Some(_) => "restored",
            None => "added",
        };
        file.items.push(outcome_of(item, outcome, None, None));
    }
    file.removed = recorded
        .iter()
        .filter(|x| !x.removed && !r.items.iter().any(|(_, n)| *n == x.norm))
        .count();
    file.issue = match source {
        Some(s) => Some(issue_identifier(l, &s.issue_id)?),
        None => None,
    };
    Ok(())
}

/// One file's import into its source, against what was recorded for it before.
struct FileImport<'a> {
    l: &'a Learnings<'a>,
    source: &'a Source,
    client: Client,
    read: &'a Read,
    recorded: &'a [Recorded],
}

impl FileImport<'_> {
    /// Import one item of the file: a recorded one is restored or left (its line and
    /// commit brought up to date), a new one goes through the add path and is recorded.
    fn item(&self, item: &Item, norm: &str) -> Result<ItemOutcome> {
        let (l, source, commit) = (self.l, self.source, &self.read.commit);
        let line = item.line as i64;
        if let Some(x) = self.recorded.iter().find(|x| x.norm == norm) {
            if x.removed {
                restore(l, source.id, x, item, commit.as_deref())?;
                return Ok(outcome_of(
                    item,
                    "restored",
                    Some(x.learning_id.clone()),
                    None,
                ));
            }
            if x.line != line || x.commit != *commit {
                l.store.write(|tx| {
                    tx.execute(
                        "UPDATE memory_items SET line = ?2, git_commit = ?3
                         WHERE source_id = ?1 AND pattern_norm = ?4",
                        params![source.id, line, commit, norm],
                    )
                })?;
            }
            return Ok(outcome_of(
                item,
                "unchanged",
                Some(x.learning_id.clone()),
                None,
            ));
        }
        let new = NewLearning {
            issue: source.issue_id.clone(),
            pattern: item.text.clone(),
            context: None,
            applies_to: self.read.applies_to.clone(),
            learning_type: Some(LearningType::Convention),
            created_by: ACTOR.into(),
            agent_type: self.client.as_str().into(),
            merge: true,
            supersedes: Vec::new(),
            // Rule files are written by agents as well as people: their text meets the
            // hold rules like any agent's.
            person: false,
        };
        let (learning_id, outcome) = match l.add_learning(&new) {
            Ok(a) => (a.learning.id, if a.merged { "merged" } else { "added" }),
            // Recorded on this file's issue by an import that stopped before its record.
            Err(Error::Conflict {
                existing_id: Some(id),
                ..
            }) => (id, "unchanged"),
            Err(e @ Error::InvalidInput(_)) => {
                return Ok(outcome_of(item, "refused", None, Some(e.to_string())));
            }
            Err(e) => return Err(e),
        };
        let at = now_iso();
        l.store.write(|tx| {
            tx.execute(
                "INSERT INTO memory_items(source_id, pattern_norm, learning_id, line, git_commit,
                    imported_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![source.id, norm, learning_id, line, commit, at],
            )
        })?;
        Ok(outcome_of(item, outcome, Some(learning_id), None))
    }

    /// A recorded item no longer in the file: marked removed, and its learning archived
    /// when no other file holds it and an import created it.
    fn gone(&self, x: &Recorded, path: &Path, file: &mut FileReport) -> Result<()> {
        let archive = self.l.store.write(|tx| {
            tx.execute(
                "UPDATE memory_items SET removed_at = ?3 WHERE source_id = ?1 AND pattern_norm = ?2",
                params![self.source.id, x.norm, now_iso()],
            )?;
            let held_elsewhere: i64 = tx.query_row(
                "SELECT count(*) FROM memory_items WHERE learning_id = ?1 AND removed_at IS NULL",
                [&x.learning_id],
                |row| row.get(0),
            )?;
            let imported: i64 = tx.query_row(
                "SELECT count(*) FROM learnings l JOIN memory_sources s ON s.issue_id = l.issue_id
                 WHERE l.id = ?1 AND l.archived_at IS NULL",
                [&x.learning_id],
                |row| row.get(0),
            )?;
            Ok(held_elsewhere == 0 && imported > 0)
        })?;
        if archive {
            let note = format!(
                "removed from {} (it was at line {}); archived by cairn import",
                path.display(),
                x.line
            );
            self.l
                .archive_learning(&x.learning_id, ACTOR, Some(&note))?;
            file.archived.push(x.learning_id.clone());
        } else {
            file.removed += 1;
        }
        Ok(())
    }
}

fn outcome_of(
    item: &Item,
    outcome: &'static str,
    learning: Option<String>,
    reason: Option<String>,
) -> ItemOutcome {
    ItemOutcome {
        line: item.line,
        outcome,
        learning,
        reason,
        text: item.text.clone(),
    }
}

/// An item back in its file: live again, and its learning restored if an import
/// archived it.
fn restore(
    l: &Learnings<'_>,
    source_id: i64,
    x: &Recorded,
    item: &Item,
    commit: Option<&str>,
) -> Result<()> {
    let archived = l.store.write(|tx| {
        tx.execute(
            "UPDATE memory_items SET removed_at = NULL, line = ?3, git_commit = ?4
             WHERE source_id = ?1 AND pattern_norm = ?2",
            params![source_id, x.norm, item.line as i64, commit],
        )?;
        Ok(tx
            .query_opt(
                "SELECT 1 FROM learnings WHERE id = ?1 AND archived_at IS NOT NULL",
                [&x.learning_id],
                |row| row.get::<_, i64>(0),
            )?
            .is_some())
    })?;
    if archived {
        l.restore_learning(
            &x.learning_id,
            ACTOR,
            Some("back in its file; restored by cairn import"),
        )?;
    }
    Ok(())
}

/// The issue and record of a file imported for the first time.
fn create_source(
    l: &Learnings<'_>,
    project_id: &str,
    path: &Path,
    client: Client,
) -> Result<Source> {
    let issue = crate::issues::create_issue(
        l.store,
        &NewIssue {
            project: project_id.to_string(),
            title: format!("Imported rules: {}", path.display()),
            description: Some(format!(
                "The learnings `cairn import` recorded from {} ({}). Each item of the file \
                 is a learning of this issue, or a confirmation of the same lesson recorded \
                 elsewhere.",
                path.display(),
                client.as_str()
            )),
            labels: vec!["imported".into()],
            status: Some(Status::Done),
            created_by: Some(ACTOR.into()),
            ..Default::default()
        },
    )?;
    let key = path.display().to_string();
    let id = l.store.write(|tx| {
        tx.query_row(
            "INSERT INTO memory_sources(project_id, path, client, issue_id, imported_at)
             VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
            params![project_id, key, client.as_str(), issue.id, now_iso()],
            |row| row.get(0),
        )
    })?;
    Ok(Source {
        id,
        issue_id: issue.id,
    })
}

fn issue_identifier(l: &Learnings<'_>, issue_id: &str) -> Result<String> {
    l.store.read(|c| {
        c.query_row(
            "SELECT identifier FROM issues WHERE id = ?1",
            [issue_id],
            |row| row.get(0),
        )
    })
}
