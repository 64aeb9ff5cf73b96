//! The BM25 index of vault chunks (tantivy), the lexical half of the vault's hybrid
//! ranking ([`super::rerank`]). Derived data under `<index_dir>/vault-bm25/`: it can be
//! deleted at any time and is rebuilt from SQLite.
//!
//! - **What is indexed**: each chunk's heading path and text, analysed like the
//!   learnings (words, lower-cased, English stop words removed, Snowball stems:
//!   [`analyzer`]), with its chunk id as a fast field.
//! - **Catch-up by watermark**: the index holds chunks `≤ W`, `W` being the largest
//!   chunk id it contains. Chunk ids are `AUTOINCREMENT` and SQLite serialises writers,
//!   so when `max(id)` is visible every lower id is committed; before each search one
//!   query reads `max(id)` and the number of live chunks `≤ W`, and the chunks past `W`
//!   are indexed. Another process's writes are caught up the same way.
//! - **Deleted chunks**: a hit whose chunk row is gone is skipped by the caller (it
//!   joins every hit with SQLite). When dead entries exceed [`REBUILD_DEAD_SHARE`] of
//!   the index, it is rebuilt from SQLite's live chunks (as the HNSW graph is compacted).
//! - **One writer**: tantivy's directory lock; every write opens a fresh `Index` (a
//!   long-lived one would save a stale managed-file list over another process's) and
//!   re-reads `W` from it. A search waits at most [`WRITER_WAIT`] for the writer; when
//!   another process holds it longer, the search answers from the last commit (the
//!   newest chunks are then found by the dense half only) and a later search catches up.
//! - **Crash**: a tantivy commit is atomic, so an interrupted one leaves a lower `W`;
//!   an unreadable directory (or another schema) is wiped and rebuilt.
//! - **Unusable directory** (full disk, read-only, not creatable): searches build the
//!   index in memory from SQLite and catch it up the same way (the HNSW graph does the
//!   same, [`super::live`]); the first search that can write the directory again drops it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{FAST, Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, Token,
    TokenStream, Tokenizer,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term};

use crate::base::tantivy_dir::{WRITER_MEMORY, acquire_writer, open_or_recreate};
use crate::error::{Error, Result};
use crate::store::Store;

use super::documents::{chunk_texts_between, lexical_watermarks};

/// Directory of the index under a database's index directory.
const DIR_NAME: &str = "vault-bm25";
/// Name the analyzer is registered under.
const TOKENIZER: &str = "cairn_vault_en";
/// Rebuild the index when more than this share of its entries are deleted chunks.
pub(crate) const REBUILD_DEAD_SHARE: f64 = 0.2;
/// How long a search or a write waits for another process's writer.
pub(crate) const WRITER_WAIT: Duration = Duration::from_secs(10);
/// Chunks read from SQLite per batch while indexing.
const BATCH: usize = 5_000;
/// Distinct query terms searched at most.
const MAX_TERMS: usize = 64;

/// Tokens this long (bytes) or longer are not indexed (hashes, base64 blobs).
const LONG_TOKEN: usize = 40;

/// Short question words agents put in queries, beside Lucene's English stop words and
/// [`super::rerank::STOP_WORDS`].
const SHORT_STOP_WORDS: &[&str] = &["do", "i", "we", "my", "me", "so"];

/// Words ([`IdentTokenizer`]), ≤ 40 bytes, lower-cased, without stop words (Lucene's
/// English list, [`super::rerank::STOP_WORDS`] and [`SHORT_STOP_WORDS`]), English
/// (Snowball) stems.
pub(crate) fn analyzer() -> TextAnalyzer {
    let extra = super::rerank::STOP_WORDS
        .iter()
        .chain(SHORT_STOP_WORDS)
        .map(|w| w.to_string());
    TextAnalyzer::builder(IdentTokenizer)
        .filter(RemoveLongFilter::limit(LONG_TOKEN))
        .filter(LowerCaser)
        .filter(
            StopWordFilter::new(Language::English).unwrap_or_else(|| StopWordFilter::remove([])),
        )
        .filter(StopWordFilter::remove(extra))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// Runs of letters and digits (what tantivy's `SimpleTokenizer` yields, so `issue_approved`
/// is `issue` and `approved`), and for a run in camel case its humps too:
/// `issueApproved` yields `issueApproved`, `issue` and `Approved`; `HTTPServer` yields
/// `HTTPServer`, `HTTP` and `Server`. So an identifier and the words it is made of meet
/// in code and in prose ([`super::formats::code`]).
#[derive(Clone, Copy, Default)]
pub(crate) struct IdentTokenizer;

/// The tokens of one text, computed when the stream is made.
pub(crate) struct IdentTokens {
    tokens: Vec<Token>,
    at: usize,
}

impl Tokenizer for IdentTokenizer {
    type TokenStream<'a> = IdentTokens;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> IdentTokens {
        let mut tokens = Vec::new();
        let mut push = |from: usize, to: usize| {
            let position = tokens.len();
            tokens.push(Token {
                offset_from: from,
                offset_to: to,
                position,
                text: text[from..to].to_string(),
                position_length: 1,
            });
        };
        let mut run: Option<usize> = None;
        let mut chars = text.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c.is_alphanumeric() {
                run.get_or_insert(i);
            }
            let ends =
                !c.is_alphanumeric() || chars.peek().is_none_or(|(_, n)| !n.is_alphanumeric());
            if let (true, Some(start)) = (ends, run) {
                let end = if c.is_alphanumeric() {
                    i + c.len_utf8()
                } else {
                    i
                };
                run = None;
                push(start, end);
                let humps = humps(&text[start..end]);
                if humps.len() > 1 {
                    for (a, b) in humps {
                        push(start + a, start + b);
                    }
                }
            }
        }
        IdentTokens { tokens, at: 0 }
    }
}

/// The byte ranges of the camel-case humps of a word (`issueApproved` → `issue`,
/// `Approved`; `HTTPServer` → `HTTP`, `Server`); one range when there is none.
fn humps(word: &str) -> Vec<(usize, usize)> {
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    let mut out = Vec::new();
    let mut start = 0;
    for k in 1..chars.len() {
        let (i, c) = chars[k];
        let prev = chars[k - 1].1;
        let next_lower = chars.get(k + 1).is_some_and(|(_, n)| n.is_lowercase());
        let boundary = c.is_uppercase()
            && (prev.is_lowercase() || prev.is_numeric() || (prev.is_uppercase() && next_lower));
        if boundary {
            out.push((start, i));
            start = i;
        }
    }
    out.push((start, word.len()));
    out
}

impl TokenStream for IdentTokens {
    fn advance(&mut self) -> bool {
        self.at += 1;
        self.at <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.at - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.at - 1]
    }
}

/// The words of an item's path (a code chunk's heading path, `module › Type › name`),
/// split as the lexical index splits identifiers ([`IdentTokenizer`]: `issueApproved` is
/// `issueApproved`, `issue`, `Approved`; `issue_approved` is `issue`, `approved`), one
/// space between them, for the ranking's path part ([`super::rerank::overlaps`]). The
/// overlap over the chunk's text sees these words too, but among the body's words and
/// with camel case unsplit: this part weighs what the item is called.
pub(crate) fn path_words(heading_path: &str) -> String {
    let mut stream = IdentTokenizer.token_stream(heading_path);
    let mut out = String::new();
    while stream.advance() {
        out.push_str(&stream.token().text);
        out.push(' ');
    }
    out
}

/// The index directory under a database's index directory.
pub(crate) fn lexical_dir(index_dir: &Path) -> PathBuf {
    index_dir.join(DIR_NAME)
}

#[derive(Debug, Clone, Copy)]
struct Fields {
    chunk: Field,
    text: Field,
}

fn schema() -> (Schema, Fields) {
    static SCHEMA: LazyLock<(Schema, Fields)> = LazyLock::new(|| {
        let mut b = Schema::builder();
        let chunk = b.add_u64_field("chunk", FAST);
        let text = b.add_text_field(
            "text",
            TextOptions::default().set_indexing_options(
                TextFieldIndexing::default()
                    .set_tokenizer(TOKENIZER)
                    .set_index_option(IndexRecordOption::WithFreqs),
            ),
        );
        (b.build(), Fields { chunk, text })
    });
    SCHEMA.clone()
}

/// The index's name in messages.
const NAME: &str = "vault BM25 index";

fn index_err(e: impl std::fmt::Display) -> Error {
    Error::Index(format!("{NAME}: {e}"))
}

/// Open the on-disk index (see [`crate::base::tantivy_dir::open_or_recreate`]).
fn open_on_disk(dir: &Path) -> Result<Index> {
    let index = open_or_recreate(dir, &schema().0, NAME)?;
    index.tokenizers().register(TOKENIZER, analyzer());
    Ok(index)
}

/// The largest chunk id a searcher holds (0 when empty).
fn watermark(searcher: &Searcher) -> Result<u64> {
    let mut w = 0;
    for seg in searcher.segment_readers() {
        if seg.num_docs() > 0 {
            w = w.max(
                seg.fast_fields()
                    .u64("chunk")
                    .map_err(index_err)?
                    .max_value(),
            );
        }
    }
    Ok(w)
}

/// What the on-disk index needs, given SQLite's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Nothing,
    CatchUp,
    Rebuild,
}

/// Compare an index holding `docs` entries up to chunk `w` with SQLite.
fn need(store: &Store, w: u64, docs: u64) -> Result<(Need, u64)> {
    let (top, live) = store.read(|c| lexical_watermarks(c, w))?;
    let dead = docs.saturating_sub(live);
    Ok(
        if docs > 0 && dead as f64 > REBUILD_DEAD_SHARE * docs as f64 {
            (Need::Rebuild, top)
        } else if top > w {
            (Need::CatchUp, top)
        } else {
            (Need::Nothing, top)
        },
    )
}

/// As the one writer: index the chunks past the index's watermark, or everything when
/// `rebuild` (or when too many entries are dead), and commit. `None` when another
/// process held the writer for `wait`.
fn write(store: &Store, dir: &Path, wait: Duration, rebuild: bool) -> Result<Option<u64>> {
    let Some((index, writer)) = acquire_writer(wait, NAME, || open_on_disk(dir))? else {
        return Ok(None);
    };
    fill(store, &index, writer, rebuild).map(Some)
}

/// With `index`'s writer: bring it up to date with SQLite (see [`write`]) and commit;
/// returns how many chunks were indexed.
fn fill(store: &Store, index: &Index, mut writer: IndexWriter, rebuild: bool) -> Result<u64> {
    let (_, f) = schema();
    let reader: IndexReader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()
        .map_err(index_err)?;
    let searcher = reader.searcher();
    let w = watermark(&searcher)?;
    let (need, top) = need(store, w, searcher.num_docs())?;
    let rebuild = rebuild || need == Need::Rebuild;
    if !rebuild && need == Need::Nothing {
        return Ok(0);
    }
    let mut after = if rebuild {
        writer.delete_all_documents().map_err(index_err)?;
        0
    } else {
        w
    };
    let mut n = 0u64;
    loop {
        let rows = store.read(|c| chunk_texts_between(c, after, top, BATCH))?;
        let Some(&(last, _)) = rows.last() else { break };
        for (id, text) in rows {
            let mut d = TantivyDocument::default();
            d.add_u64(f.chunk, id);
            d.add_text(f.text, &text);
            writer.add_document(d).map_err(index_err)?;
            n += 1;
        }
        after = last;
    }
    writer.commit().map_err(index_err)?;
    writer.wait_merging_threads().map_err(index_err)?;
    tracing::debug!(chunks = n, rebuild, "vault BM25 index committed");
    Ok(n)
}

/// The query's distinct analysed terms (at most [`MAX_TERMS`]).
fn query_terms(field: Field, query: &str) -> Vec<Term> {
    static ANALYZER: LazyLock<TextAnalyzer> = LazyLock::new(analyzer);
    let mut a = ANALYZER.clone();
    let mut stream = a.token_stream(query);
    let mut seen = HashSet::new();
    let mut terms = Vec::new();
    while let Some(t) = stream.next() {
        if terms.len() < MAX_TERMS && seen.insert(t.text.clone()) {
            terms.push(Term::from_field_text(field, &t.text));
        }
    }
    terms
}

/// The process's reader of one database's chunk index.
#[derive(Default)]
pub(crate) struct LexicalState {
    reader: Mutex<Option<IndexReader>>,
    /// While the directory is unusable (full, read-only, not creatable): an index in
    /// memory, built from SQLite and caught up the same way; dropped once the directory
    /// works again.
    memory: Mutex<Option<IndexReader>>,
}

impl std::fmt::Debug for LexicalState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LexicalState").finish_non_exhaustive()
    }
}

impl LexicalState {
    fn lock(&self) -> MutexGuard<'_, Option<IndexReader>> {
        self.reader.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The reader, opened on first use, reloaded and caught up with SQLite.
    fn ready(&self, store: &Store, dir: &Path) -> Result<Searcher> {
        let mut guard = self.lock();
        if guard.is_none() {
            let index = open_on_disk(dir)?;
            *guard = Some(
                index
                    .reader_builder()
                    .reload_policy(ReloadPolicy::Manual)
                    .try_into()
                    .map_err(index_err)?,
            );
        }
        let reader = guard.as_ref().expect("opened above");
        reader.reload().map_err(index_err)?;
        let searcher = reader.searcher();
        let (need, _) = need(store, watermark(&searcher)?, searcher.num_docs())?;
        if need == Need::Nothing {
            return Ok(searcher);
        }
        if write(store, dir, WRITER_WAIT, false)?.is_none() {
            tracing::info!("vault BM25 index writer busy; searching the last commit");
        }
        reader.reload().map_err(index_err)?;
        Ok(reader.searcher())
    }

    /// The `n` best chunks for `query` by BM25, as `(chunk id, score)`, best first,
    /// after catching up with SQLite. Deleted chunks may be among them (the caller
    /// joins with SQLite); a query without an indexable word finds nothing.
    pub(crate) fn search(
        &self,
        store: &Store,
        dir: &Path,
        query: &str,
        n: usize,
    ) -> Result<Vec<(u64, f32)>> {
        let searcher = match self.ready(store, dir) {
            Ok(s) => {
                self.memory
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                s
            }
            Err(e) => self.in_memory(store, &e)?,
        };
        let (_, f) = schema();
        let terms = query_terms(f.text, query);
        if terms.is_empty() || n == 0 {
            return Ok(Vec::new());
        }
        let clauses: Vec<(Occur, Box<dyn Query>)> = terms
            .into_iter()
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs));
                (Occur::Should, q)
            })
            .collect();
        let top = searcher
            .search(
                &BooleanQuery::new(clauses),
                &TopDocs::with_limit(n).order_by_score(),
            )
            .map_err(index_err)?;
        let mut out = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let col = searcher
                .segment_reader(addr.segment_ord)
                .fast_fields()
                .u64("chunk")
                .map_err(index_err)?;
            if let Some(id) = col.first(addr.doc_id) {
                out.push((id, score));
            }
        }
        Ok(out)
    }

    /// The in-memory index, built on first use and caught up with SQLite: searches use it
    /// while the directory fails with `why` (a write committed to SQLite is then still
    /// found by its words). Fails only when SQLite does.
    fn in_memory(&self, store: &Store, why: &Error) -> Result<Searcher> {
        let mut guard = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        if guard.is_none() {
            tracing::warn!(error = %why, "vault BM25 index directory unusable; indexing in memory");
            let index = Index::create_in_ram(schema().0);
            index.tokenizers().register(TOKENIZER, analyzer());
            *guard = Some(
                index
                    .reader_builder()
                    .reload_policy(ReloadPolicy::Manual)
                    .try_into()
                    .map_err(index_err)?,
            );
        }
        let reader = guard.as_ref().expect("created above");
        let searcher = reader.searcher();
        let (need, _) = need(store, watermark(&searcher)?, searcher.num_docs())?;
        if need == Need::Nothing {
            return Ok(searcher);
        }
        let index = searcher.index().clone();
        let writer = index
            .writer_with_num_threads::<TantivyDocument>(1, WRITER_MEMORY)
            .map_err(index_err)?;
        fill(store, &index, writer, false)?;
        reader.reload().map_err(index_err)?;
        Ok(reader.searcher())
    }

    /// After writes through this process: catch up (rebuilding past the dead share).
    /// Failures are logged: the chunks are safe in SQLite and the next search retries.
    pub(crate) fn after_write(&self, store: &Store, dir: &Path) {
        if let Err(e) = self.ready(store, dir) {
            tracing::warn!("updating the vault BM25 index failed ({e}); the next search retries");
        }
    }

    /// Rebuild the index from SQLite; returns how many chunks it holds.
    pub(crate) fn rebuild(&self, store: &Store, dir: &Path) -> Result<u64> {
        let n = write(store, dir, WRITER_WAIT, true)?.ok_or_else(|| {
            Error::Index("vault BM25 index: another process holds the writer".into())
        })?;
        if let Some(r) = self.lock().as_ref() {
            r.reload().map_err(index_err)?;
        }
        Ok(n)
    }

    /// Entries in the index and its watermark, as this process sees them now (tests).
    #[cfg(test)]
    pub(crate) fn stats(&self, dir: &Path) -> Result<(u64, u64)> {
        let reader: IndexReader = open_on_disk(dir)?
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(index_err)?;
        let s = reader.searcher();
        Ok((s.num_docs(), watermark(&s)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(text: &str) -> Vec<String> {
        let mut a = analyzer();
        let mut stream = a.token_stream(text);
        let mut out = Vec::new();
        while stream.advance() {
            out.push(stream.token().text.clone());
        }
        out
    }

    #[test]
    fn an_items_path_meets_the_words_of_a_query() {
        assert_eq!(
            path_words("vault::service > Vault > issue_approved"),
            "vault service Vault issue approved "
        );
        assert_eq!(
            path_words("Chronology > getCalendarType"),
            "Chronology getCalendarType get Calendar Type "
        );
        assert_eq!(path_words("HTTPServer"), "HTTPServer HTTP Server ");
        let paths = [
            path_words("crc > Hasher > new_with_initial_len"),
            path_words("crc > Hasher > reset"),
        ];
        let o = super::super::rerank::overlaps("Create a new Hasher with an initial state", &paths);
        assert!(o[0] > 2.0 * o[1] && o[1] > 0.0, "{o:?}");
        let camel = [path_words("Chronology > getCalendarType"), String::new()];
        assert!(
            (super::super::rerank::overlaps("the calendar type", &camel)[0] - 1.0).abs() < 1e-6
        );
    }

    #[test]
    fn identifiers_meet_their_words() {
        assert_eq!(terms("issueApproved"), ["issueapprov", "issu", "approv"]);
        assert_eq!(terms("issue_approved"), ["issu", "approv"]);
        assert_eq!(terms("issue approved"), ["issu", "approv"]);
        assert_eq!(
            terms("HTTPServer v2Retry"),
            ["httpserver", "http", "server", "v2retri", "v2", "retri"]
        );
        assert_eq!(terms("naïveCafé"), ["naïvecafé", "naïv", "café"]);
    }
    use crate::embed::DIMENSION;
    use crate::vault::chunk::chunk_markdown;
    use crate::vault::documents::{delete_document, write_test_document};

    /// Store `path` with one section per entry of `sections` (zero vectors: BM25 only).
    fn add_doc(store: &Store, path: &str, sections: &[&str]) {
        let md: String = sections
            .iter()
            .enumerate()
            .map(|(i, s)| format!("## Part {i}\n\n{s}\n\n"))
            .collect();
        let chunks: Vec<_> = chunk_markdown(md.as_bytes())
            .chunks
            .into_iter()
            .map(|c| (c, vec![0.0; DIMENSION]))
            .collect();
        assert_eq!(chunks.len(), sections.len());
        write_test_document(store, path, &chunks);
    }

    fn chunk_ids(store: &Store) -> Vec<u64> {
        store
            .read(|c| {
                let mut st = c.prepare("SELECT id FROM vault_chunks ORDER BY id")?;
                let ids = st
                    .query_map([], |r| r.get::<_, i64>(0))?
                    .map(|r| r.map(|i| i as u64))
                    .collect::<crate::error::Result<_>>()?;
                Ok(ids)
            })
            .unwrap()
    }

    #[test]
    fn stemmed_terms_rank_the_matching_chunk_first_and_stop_words_find_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("c.db")).unwrap();
        let dir = lexical_dir(&store.index_dir());
        add_doc(
            &store,
            "a.md",
            &[
                "Retrying requests with exponential backoff and jitter.",
                "Deploying a release to production.",
            ],
        );
        let state = LexicalState::default();
        let ids = chunk_ids(&store);
        let hits = state
            .search(&store, &dir, "how do I retry a request?", 10)
            .unwrap();
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(hits[0].0, ids[0]);
        assert!(hits[0].1 > 0.0);
        // The heading path is indexed too.
        assert_eq!(state.search(&store, &dir, "part", 10).unwrap().len(), 2);
        assert!(
            state
                .search(&store, &dir, "how do the", 10)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_process_catches_up_with_chunks_another_process_added() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("c.db");
        let (store_a, state_a) = (Store::open(&db).unwrap(), LexicalState::default());
        let dir = lexical_dir(&store_a.index_dir());
        add_doc(&store_a, "a.md", &["circuit breaker opens after failures"]);
        assert_eq!(
            state_a.search(&store_a, &dir, "breaker", 5).unwrap().len(),
            1
        );
        assert_eq!(state_a.stats(&dir).unwrap(), (1, chunk_ids(&store_a)[0]));

        // Another process adds a document and searches: it indexes it (one writer).
        let (store_b, state_b) = (Store::open(&db).unwrap(), LexicalState::default());
        add_doc(&store_b, "b.md", &["idempotency keys deduplicate payments"]);
        let b_id = *chunk_ids(&store_b).last().unwrap();
        assert_eq!(
            state_b.search(&store_b, &dir, "idempotency", 5).unwrap()[0].0,
            b_id
        );
        // A third writes without searching; the first process catches up by watermark.
        add_doc(&store_b, "c.md", &["rollback a deployment"]);
        let c_id = *chunk_ids(&store_b).last().unwrap();
        assert_eq!(
            state_a.search(&store_a, &dir, "rollback", 5).unwrap()[0].0,
            c_id
        );
        assert_eq!(state_a.stats(&dir).unwrap(), (3, c_id));
        // A fresh process on a deleted index directory rebuilds it from SQLite.
        std::fs::remove_dir_all(&dir).unwrap();
        let state_d = LexicalState::default();
        assert_eq!(
            state_d.search(&store_a, &dir, "payments", 5).unwrap()[0].0,
            b_id
        );
        assert_eq!(state_d.stats(&dir).unwrap(), (3, c_id));
    }

    #[test]
    fn an_unusable_directory_is_replaced_by_an_index_in_memory_until_it_works() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("c.db")).unwrap();
        let dir = lexical_dir(&store.index_dir());
        // A regular file where the directory should be: it can be neither created nor
        // opened.
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        std::fs::write(&dir, b"not a directory").unwrap();
        add_doc(&store, "a.md", &["circuit breaker opens after failures"]);
        let state = LexicalState::default();
        let ids = chunk_ids(&store);
        let hits = state.search(&store, &dir, "breaker", 5).unwrap();
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(hits[0].0, ids[0]);
        assert!(state.memory.lock().unwrap().is_some());
        // Chunks written later are caught up in memory too.
        add_doc(&store, "b.md", &["idempotency keys deduplicate payments"]);
        let b_id = *chunk_ids(&store).last().unwrap();
        assert_eq!(
            state.search(&store, &dir, "idempotency", 5).unwrap()[0].0,
            b_id
        );
        assert!(
            std::fs::metadata(&dir).unwrap().is_file(),
            "nothing written"
        );
        // The directory usable again: the next search indexes on disk and drops the
        // in-memory index.
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(
            state.search(&store, &dir, "payments", 5).unwrap()[0].0,
            b_id
        );
        assert!(state.memory.lock().unwrap().is_none());
        assert_eq!(state.stats(&dir).unwrap(), (2, b_id));
    }

    #[test]
    fn deleted_chunks_are_rebuilt_away_past_a_fifth_dead() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("c.db")).unwrap();
        let dir = lexical_dir(&store.index_dir());
        for i in 0..10 {
            add_doc(
                &store,
                &format!("d{i}.md"),
                &[&format!("topic{i} shared word")],
            );
        }
        let state = LexicalState::default();
        assert_eq!(state.search(&store, &dir, "shared", 20).unwrap().len(), 10);
        let delete = |p: &str| store.write(|tx| delete_document(tx, "dir:/t", p)).unwrap();
        delete("d0.md");
        delete("d1.md");
        // 2 dead of 10: not past the share; the index keeps them (callers skip them).
        assert_eq!(state.search(&store, &dir, "shared", 20).unwrap().len(), 10);
        assert_eq!(state.stats(&dir).unwrap().0, 10);
        delete("d2.md");
        // 3 dead of 10: rebuilt from the 7 live chunks before answering.
        let hits = state.search(&store, &dir, "shared", 20).unwrap();
        assert_eq!(hits.len(), 7);
        let live = chunk_ids(&store);
        assert!(hits.iter().all(|(id, _)| live.contains(id)), "{hits:?}");
        assert_eq!(state.stats(&dir).unwrap(), (7, *live.last().unwrap()));
        assert!(state.search(&store, &dir, "topic0", 5).unwrap().is_empty());
    }
}
