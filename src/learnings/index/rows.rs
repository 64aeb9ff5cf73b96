//! What the learnings index holds and how it is written: its schema (plain and
//! project-scoped fields), the rows read from SQLite, the watermarks, and the catch-up
//! that indexes every learning past the disk index's watermark as the one writer.

use std::path::Path;
use std::sync::LazyLock;
use std::time::Duration;

use crate::store::db::params;
use tantivy::schema::{FAST, Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{PreTokenizedString, TextAnalyzer, Token};
use tantivy::{Index, ReloadPolicy, Searcher, TantivyDocument};

use crate::base::tantivy_dir::{acquire_writer, open_or_recreate};
use crate::error::{Error, Result};
use crate::store::Store;

use super::super::query::TOKENIZER;
use super::super::tail::{SLOTS, Tail, Words};

use super::*;

/// The searchable fields. `text` holds the analysed words, in [`FIELD_WEIGHTS`] order;
/// `scoped` holds the same words prefixed with the learning's project id
/// (`proj_1a2b…:import`), so that a search of one project walks only that project's
/// postings instead of filtering every project's (10x less work with ten projects).
#[derive(Debug, Clone, Copy)]
pub(super) struct Fields {
    pub(super) seq: Field,
    pub(super) text: [Field; 3],
    pub(super) scoped: [Field; 3],
}

impl Fields {
    /// The searchable fields: the text fields, then their scoped twins (the tail's slots).
    pub(super) fn slots(&self) -> [Field; SLOTS] {
        let [p, a, c] = self.text;
        let [sp, sa, sc] = self.scoped;
        [p, a, c, sp, sa, sc]
    }

    /// The slot of a searchable field.
    pub(super) fn slot(&self, field: Field) -> Option<usize> {
        self.slots().iter().position(|f| *f == field)
    }
}

/// Which of the two sets of fields a search reads, and the term prefix it uses.
pub(super) struct Lexicon {
    pub(super) fields: [Field; 3],
    /// The tail slot of `fields[0]` (the others follow it).
    pub(super) first_slot: usize,
    pub(super) key: String,
}

/// The scoped term of `word` in `project`.
pub(super) fn scoped_term(project: &str, word: &str) -> String {
    format!("{project}:{word}")
}

pub(super) fn schema() -> (Schema, Fields) {
    static SCHEMA: LazyLock<(Schema, Fields)> = LazyLock::new(build_schema);
    SCHEMA.clone()
}

pub(super) fn build_schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let seq = b.add_u64_field("seq", FAST);
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let pattern = b.add_text_field("pattern", text.clone());
    let applies_to = b.add_text_field("applies_to", text.clone());
    let context = b.add_text_field("context", text.clone());
    let scoped = [
        b.add_text_field("scoped_pattern", text.clone()),
        b.add_text_field("scoped_applies_to", text.clone()),
        b.add_text_field("scoped_context", text),
    ];
    (
        b.build(),
        Fields {
            seq,
            text: [pattern, applies_to, context],
            scoped,
        },
    )
}

/// The index's name in messages.
pub(super) const NAME: &str = "learnings index";

pub(super) fn index_err(e: impl std::fmt::Display) -> Error {
    Error::Index(format!("{NAME}: {e}"))
}

/// One learning's text, as indexed.
pub(super) struct Row {
    pub(super) seq: u64,
    pub(super) project: String,
    pub(super) pattern: String,
    pub(super) applies_to: Vec<String>,
    pub(super) context: Option<String>,
}

impl Row {
    /// The analysed words of each searchable field, in [`Fields::slots`] order: what the
    /// disk index indexes and the tail counts.
    pub(super) fn words(&self) -> Words {
        static ANALYZER: LazyLock<TextAnalyzer> = LazyLock::new(super::super::query::analyzer);
        let applies = self.applies_to.join("\n");
        let texts = [
            Some(self.pattern.as_str()),
            Some(applies.as_str()),
            self.context.as_deref(),
        ];
        let mut out: Words = Default::default();
        for (i, text) in texts.into_iter().enumerate() {
            let Some(text) = text else { continue };
            let mut analyzer = ANALYZER.clone();
            let mut stream = analyzer.token_stream(text);
            let mut words = Vec::new();
            while let Some(t) = stream.next() {
                words.push(t.text.clone());
            }
            words.extend(super::super::query::compounds(text));
            // The scoped twin of field `i` is slot `i + 3`.
            out[i + 3] = Some(
                words
                    .iter()
                    .map(|w| scoped_term(&self.project, w))
                    .collect(),
            );
            out[i] = Some(words);
        }
        out
    }

    pub(super) fn document(&self, f: &Fields) -> TantivyDocument {
        let mut d = TantivyDocument::default();
        d.add_u64(f.seq, self.seq);
        for (field, words) in f.slots().into_iter().zip(self.words()) {
            let Some(words) = words else { continue };
            let tokens = words
                .into_iter()
                .enumerate()
                .map(|(position, text)| Token {
                    position,
                    text,
                    ..Token::default()
                })
                .collect();
            d.add_pre_tokenized_text(
                field,
                PreTokenizedString {
                    text: String::new(),
                    tokens,
                },
            );
        }
        d
    }
}

/// Hand learnings `(after, upto]` to `each`, in order, reading SQLite in batches;
/// returns how many.
pub(super) fn for_rows(
    store: &Store,
    mut after: u64,
    upto: u64,
    mut each: impl FnMut(&Row) -> Result<()>,
) -> Result<u64> {
    let mut n = 0u64;
    loop {
        let rows = rows_after(store, after, upto, BATCH)?;
        let Some(last) = rows.last() else { break };
        after = last.seq;
        for row in &rows {
            each(row)?;
        }
        n += rows.len() as u64;
    }
    Ok(n)
}

/// Learnings with `seq` in `(after, upto]`, at most `limit`, in order.
pub(super) fn rows_after(store: &Store, after: u64, upto: u64, limit: usize) -> Result<Vec<Row>> {
    store.read(|c| {
        let mut st = c.prepare(
            "SELECT seq, pattern, applies_to, context, project_id FROM learnings
             WHERE seq > ?1 AND seq <= ?2 ORDER BY seq LIMIT ?3",
        )?;
        let rows = st.query_map(params![after as i64, upto as i64, limit as i64], |r| {
            let applies: String = r.get(2)?;
            Ok(Row {
                seq: r.get::<_, i64>(0)? as u64,
                project: r.get(4)?,
                pattern: r.get(1)?,
                applies_to: serde_json::from_str(&applies).unwrap_or_default(),
                context: r.get(3)?,
            })
        })?;
        rows.collect::<crate::error::Result<Vec<_>>>()
    })
}

/// The watermarks of one snapshot.
#[derive(Debug, Clone, Copy)]
pub(super) struct Watermarks {
    pub(super) seq: u64,
    pub(super) history: u64,
    pub(super) embedding: u64,
}

/// `max(seq)`, `max(history id)` and `max(embedding id)` in one snapshot.
pub(super) fn watermarks(store: &Store) -> Result<Watermarks> {
    store.read(|c| {
        let mut st = c.prepare(
            "SELECT (SELECT coalesce(max(seq), 0) FROM learnings),
                    (SELECT coalesce(max(id), 0) FROM learning_history),
                    (SELECT coalesce(max(id), 0) FROM learning_embeddings)",
        )?;
        st.query_row([], |r| {
            Ok(Watermarks {
                seq: r.get::<_, i64>(0)? as u64,
                history: r.get::<_, i64>(1)? as u64,
                embedding: r.get::<_, i64>(2)? as u64,
            })
        })
    })
}

/// The largest `seq` an index's searcher holds (0 when empty).
pub(super) fn max_seq(searcher: &Searcher) -> Result<u64> {
    let mut m = 0;
    for seg in searcher.segment_readers() {
        if seg.num_docs() == 0 {
            continue;
        }
        let col = seg.fast_fields().u64("seq").map_err(index_err)?;
        m = m.max(col.max_value());
    }
    Ok(m)
}

pub(super) fn register(index: &Index) {
    index
        .tokenizers()
        .register(TOKENIZER, super::super::query::analyzer());
}

pub(super) fn failpoint(name: &str) {
    if crate::base::failpoint::is_set(name) {
        tracing::error!("failpoint {name}: aborting");
        std::process::abort();
    }
}

/// Open the on-disk index at `dir` (see [`crate::base::tantivy_dir::open_or_recreate`]).
pub(super) fn open_on_disk(dir: &Path) -> Result<Index> {
    let index = open_or_recreate(dir, &schema().0, NAME)?;
    register(&index);
    Ok(index)
}

/// What a catch-up did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CatchUp {
    /// Indexed this many rows (maybe 0) and committed.
    Indexed(u64),
    /// Another process holds the writer lock.
    Busy,
}

/// Index every learning past the on-disk index's watermark (all of them when
/// `rebuild`), as the one writer, and commit.
pub(crate) fn catch_up(
    store: &Store,
    dir: &Path,
    wait: Duration,
    rebuild: bool,
) -> Result<CatchUp> {
    let Some((index, mut writer)) = acquire_writer(wait, NAME, || open_on_disk(dir))? else {
        return Ok(CatchUp::Busy);
    };
    collect_temp_files(dir);
    let (_, fields) = schema();
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()
        .map_err(index_err)?;
    let after = if rebuild {
        writer.delete_all_documents().map_err(index_err)?;
        0
    } else {
        max_seq(&reader.searcher())?
    };
    let upto = watermarks(store)?.seq;
    if after >= upto && !rebuild {
        return Ok(CatchUp::Indexed(0));
    }
    let n = for_rows(store, after, upto, |row| {
        writer
            .add_document(row.document(&fields))
            .map(drop)
            .map_err(index_err)
    })?;
    let prepared = writer.prepare_commit().map_err(index_err)?;
    failpoint("learnings-index-commit");
    prepared.commit().map_err(index_err)?;
    writer.wait_merging_threads().map_err(index_err)?;
    tracing::debug!(rows = n, rebuild, "learnings index committed");
    Ok(CatchUp::Indexed(n))
}

/// Remove the temporary files (`.tmp*`, tantivy's atomic writes) that a killed writer
/// left in `dir`. Only the writer writes them, so while the caller holds the writer lock
/// every one found is a leftover.
pub(super) fn collect_temp_files(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let is_tmp = name.to_str().is_some_and(|n| n.starts_with(".tmp"));
        if is_tmp && entry.file_type().is_ok_and(|t| t.is_file()) {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => tracing::info!(file = ?name, "removed a leftover index temp file"),
                Err(e) => {
                    tracing::warn!(file = ?name, error = %e, "could not remove a leftover temp file")
                }
            }
        }
    }
}

/// Count the tail `(from, to]` in memory.
pub(super) fn build_tail(store: &Store, from: u64, to: u64) -> Result<Tail> {
    let mut docs = Vec::new();
    for_rows(store, from, to, |row| {
        docs.push((row.seq, row.words()));
        Ok(())
    })?;
    tracing::debug!(
        from,
        to,
        "searching an unindexed tail of learnings in memory"
    );
    Ok(Tail::new(from, to, docs))
}
