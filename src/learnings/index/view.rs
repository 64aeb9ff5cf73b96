//! One view of the index: the reader at its last reload, the tail past it, and the
//! per-process caches a search needs (standing and vectors), kept consistent together
//! and brought up to date under the write lock ([`LearningIndex::fresh`]).

use super::*;

/// An open reader with its caches: one consistent view, changed only under the
/// write lock ([`LearningIndex::fresh`]) and searched under read locks.
pub(super) struct Open {
    reader: IndexReader,
    /// The disk index as searched: the reader's searcher at the last reload.
    pub(super) disk: Searcher,
    /// Largest `seq` in `disk`.
    pub(super) upto: u64,
    /// The background indexer's round count before the last reload: the disk index
    /// can have changed only if it moved on since.
    pub(super) rounds_seen: u64,
    pub(super) meta: MetaCache,
    pub(super) vectors: Vectors,
    pub(super) words: TextWords,
    /// The learnings past `upto`, counted in memory: each refresh counts only the
    /// learnings new since the last one and appends them; the disk index catching up
    /// shortens it.
    pub(super) tail: Option<Tail>,
    /// `Some` when the disk index could not be opened (a full or read-only index
    /// directory): an empty in-memory index, every learning scored in the in-memory
    /// tail, which is extended as learnings are added (not rebuilt per search); the disk
    /// is tried again from this instant on ([`DISK_RETRY`] after the last attempt).
    pub(super) retry_disk_at: Option<Instant>,
    /// The candidates of recent searches on this view ([`Recent`]): replaced whenever
    /// the view is refreshed.
    pub(super) recent: Recent,
}

/// How often a search tries the disk index again while it is served from memory.
pub(super) const DISK_RETRY: Duration = Duration::from_secs(1);

impl Open {
    /// The disk index, or, when it cannot be opened, an empty in-memory one (a read
    /// never needs to write: the search then scores every learning as the tail).
    pub(super) fn new_or_in_memory(dir: &Path) -> Result<Open> {
        match open_on_disk(dir) {
            Ok(index) => Open::over(index, None),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "learnings index unusable; searching from memory");
                let (schema, _) = schema();
                let index = Index::create_in_ram(schema);
                register(&index);
                Open::over(index, Some(Instant::now() + DISK_RETRY))
            }
        }
    }

    pub(super) fn over(index: Index, retry_disk_at: Option<Instant>) -> Result<Open> {
        let reader: IndexReader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(index_err)?;
        let disk = reader.searcher();
        let upto = max_seq(&disk)?;
        Ok(Open {
            reader,
            disk,
            upto,
            rounds_seen: 0,
            meta: MetaCache::default(),
            vectors: Vectors::default(),
            words: TextWords::default(),
            tail: None,
            retry_disk_at,
            recent: Recent::default(),
        })
    }

    /// Whether this view answers a search made at `marks`: every learning, rating and
    /// embedding they cover is in it.
    pub(super) fn covers(&self, marks: Watermarks) -> bool {
        self.retry_disk_at.is_none_or(|at| Instant::now() < at)
            && self.tail.as_ref().map_or(self.upto, |t| t.to) >= marks.seq
            && self.meta.seq_upto >= marks.seq
            && self.meta.history_upto >= marks.history
            && self.meta.limits_fresh()
            && self.vectors.upto() >= marks.embedding
    }

    /// Count the learnings in `(upto, to]` that the tail does not hold yet and append
    /// them to it; when the disk index has caught up with some of the tail, count all of
    /// `(upto, to]` again instead.
    pub(super) fn extend_tail(&mut self, store: &Store, to: u64) -> Result<()> {
        let upto = self.upto;
        // A view never loses what it covered: a refresh for older watermarks (another
        // search's, which took the lock first) keeps the newer learnings.
        let to = to.max(self.tail.as_ref().map_or(0, |t| t.to));
        if self.tail.as_ref().is_some_and(|t| t.from < upto) {
            self.tail = None;
        }
        let from = self.tail.as_ref().map_or(upto, |t| t.to);
        if from < to {
            let new = build_tail(store, from, to)?;
            match &mut self.tail {
                Some(t) => t.append(new),
                None => self.tail = Some(new),
            }
        }
        Ok(())
    }

    /// Bring the metadata, words and vectors up to one snapshot's watermarks.
    pub(super) fn refresh_caches(&mut self, store: &Store, marks: Watermarks) -> Result<()> {
        self.meta.refresh(store, marks.seq, marks.history)?;
        self.words.refresh(store, marks.seq)?;
        let meta = &self.meta;
        self.vectors.refresh(store, marks.embedding, |seq| {
            meta.get(seq).map(|m| m.project)
        })
    }

    pub(super) fn reload(&mut self, rounds: u64) -> Result<()> {
        self.reader.reload().map_err(index_err)?;
        retire(std::mem::replace(&mut self.disk, self.reader.searcher()));
        self.upto = max_seq(&self.disk)?;
        self.rounds_seen = rounds;
        Ok(())
    }
}

/// Drop a replaced disk searcher on a thread of its own: closing its segments unmaps
/// their files, which blocks for milliseconds when other threads fault pages in, and
/// the search that reloads holds the view's write lock. (Should the thread not start,
/// the searcher is dropped here.)
fn retire(old: Searcher) {
    let _ = std::thread::Builder::new()
        .name("learnings-retire".into())
        .spawn(move || drop(old));
}

/// `Open` is not `Debug` (tantivy readers are not); this wrapper is.
pub(super) struct OpenSlot(pub(super) Open);

/// Each learning's words in order ([`word_ids`](super::super::query::word_ids)) by
/// `seq`, for the in-order phrase bonus: read with the metadata, once per learning and
/// process (a learning's pattern and context never change), 4 bytes a word.
#[derive(Default)]
pub(super) struct TextWords {
    words: Vec<Box<[u32]>>,
    upto: u64,
}

impl TextWords {
    /// Read the words of the learnings with `seq` in `(upto, to]`.
    fn refresh(&mut self, store: &Store, to: u64) -> Result<()> {
        if to <= self.upto {
            return Ok(());
        }
        let rows: Vec<(u64, Box<[u32]>)> = store.read(|c| {
            let mut st = c.prepare(
                "SELECT seq, pattern, context FROM learnings WHERE seq > ?1 AND seq <= ?2",
            )?;
            let rows = st.query_map(
                crate::store::db::params![self.upto as i64, to as i64],
                |r| {
                    let context: Option<String> = r.get(2)?;
                    let text = super::super::semantic::embedding_text(
                        &r.get::<_, String>(1)?,
                        context.as_deref(),
                    );
                    Ok((
                        r.get::<_, i64>(0)? as u64,
                        super::super::query::word_ids(&text),
                    ))
                },
            )?;
            rows.collect::<Result<Vec<_>>>()
        })?;
        for (seq, words) in rows {
            let i = seq as usize;
            if self.words.len() <= i {
                self.words.resize_with(i + 1, Default::default);
            }
            self.words[i] = words;
        }
        self.upto = to;
        Ok(())
    }

    /// Learning `seq`'s words (none for a learning not read).
    pub(super) fn get(&self, seq: u64) -> &[u32] {
        self.words.get(seq as usize).map_or(&[], |w| w)
    }
}

impl std::fmt::Debug for OpenSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Open").field("upto", &self.0.upto).finish()
    }
}

#[cfg(test)]
mod tests {
    //! The tail scores exactly as the disk index would: the same learnings searched
    //! with every one on disk, and with most of them in the tail, rank the same.

    use super::*;
    use std::collections::{BTreeMap, HashMap};

    use crate::embed::{EmbedderConfig, ModelEmbedder};
    use crate::issues::{NewIssue, NewProject, create_issue, create_project};
    use crate::learnings::{Learnings, NewLearning};

    const TOPICS: [&str; 8] = [
        "migrations",
        "imports",
        "caching",
        "websockets",
        "graphql",
        "deploys",
        "fixtures",
        "timeouts",
    ];

    /// An embedder whose model is missing: learnings are stored without a vector and
    /// searched lexically.
    fn without_model() -> ModelEmbedder {
        ModelEmbedder::new(EmbedderConfig {
            model_dir: Some("/nonexistent/cairn-model".into()),
            ..Default::default()
        })
    }

    /// 60 learnings over two projects: varied lengths, contexts and applies-to, many
    /// sharing words, so that norms, frequencies and prefixes all matter.
    fn seeded() -> (tempfile::TempDir, Store, HashMap<&'static str, String>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cairn.db")).unwrap();
        let index = LearningIndex::new(dir.path().join("scratch-index"));
        let embedder = without_model();
        let learnings = Learnings {
            store: &store,
            index: &index,
            embedder: &embedder,
        };
        let mut projects = HashMap::new();
        for slug in ["web", "api"] {
            let p = create_project(
                &store,
                &NewProject {
                    slug: slug.into(),
                    name: slug.into(),
                    prefix: None,
                    path: None,
                },
            )
            .unwrap();
            projects.insert(slug, p.id);
            let issue = create_issue(
                &store,
                &NewIssue {
                    project: slug.into(),
                    title: "Learn".into(),
                    ..Default::default()
                },
            )
            .unwrap()
            .identifier;
            for i in 0..30 {
                let topic = TOPICS[i % TOPICS.len()];
                let other = TOPICS[(i * 3 + 1) % TOPICS.len()];
                let filler = " and then the service retries".repeat(i % 5);
                learnings
                    .add_learning(&NewLearning {
                        issue: issue.clone(),
                        pattern: format!(
                            "{topic} in {slug} break when {other} change{filler}; check {topic} {i}"
                        ),
                        context: (i % 3 != 0).then(|| {
                            format!(
                                "seen while fixing {other} timeouts, case {i}: the nightly job \
                                 failed twice before anyone noticed the {topic} change"
                            )
                        }),
                        applies_to: if i % 4 == 0 {
                            vec![format!("src/{topic}/"), "ci".into()]
                        } else {
                            vec![]
                        },
                        learning_type: None,
                        created_by: "test".into(),
                        agent_type: "test".into(),
                        merge: false,
                        supersedes: Vec::new(),
                        person: false,
                    })
                    .unwrap();
            }
        }
        (dir, store, projects)
    }

    /// A view whose disk index holds `1..=disk` and whose tail holds the rest, counted
    /// up to each of `steps` in turn (each step appended to the tail).
    fn view(store: &Store, dir: &Path, disk: u64, steps: &[u64]) -> Open {
        let index = open_on_disk(dir).unwrap();
        let mut writer: tantivy::IndexWriter = index.writer(15_000_000).unwrap();
        let (_, fields) = schema();
        for_rows(store, 0, disk, |row| {
            writer
                .add_document(row.document(&fields))
                .map(drop)
                .map_err(index_err)
        })
        .unwrap();
        writer.commit().unwrap();
        let mut open = Open::over(index, None).unwrap();
        assert_eq!(open.upto, disk);
        for &to in steps {
            open.extend_tail(store, to).unwrap();
        }
        open.refresh_caches(store, watermarks(store).unwrap())
            .unwrap();
        open
    }

    /// The learnings the tail holds, `(from, to]`.
    fn tail_range(open: &Open) -> Option<(u64, u64)> {
        open.tail.as_ref().map(|t| (t.from, t.to))
    }

    #[test]
    fn a_tail_grown_one_learning_at_a_time_counts_as_one_counted_at_once() {
        let (dir, store, _) = seeded();
        let mut grown = view(&store, &dir.path().join("grown"), 10, &[]);
        for to in 11..=60 {
            // What a search after every write does: count the new learning and append it.
            grown.extend_tail(&store, to).unwrap();
            assert_eq!(tail_range(&grown), Some((10, to)));
        }
        // Appended one at a time, the counts are those of the 50 counted at once.
        assert_eq!(grown.tail, Some(build_tail(&store, 10, 60).unwrap()));
        // The disk index catches up with some of the tail: the rest is counted again.
        grown.upto = 25;
        grown.extend_tail(&store, 60).unwrap();
        assert_eq!(tail_range(&grown), Some((25, 60)));
        grown.upto = 60;
        grown.extend_tail(&store, 60).unwrap();
        assert_eq!(tail_range(&grown), None);
    }

    #[test]
    fn a_tail_counted_in_steps_scores_as_the_disk_index() {
        let (dir, store, projects) = seeded();
        let all = view(&store, &dir.path().join("all"), 60, &[]);
        // A tail counted in three steps, each appended to the last.
        let split = view(&store, &dir.path().join("split"), 17, &[33, 41, 60]);
        assert!(all.tail.is_none());
        assert_eq!(tail_range(&split), Some((17, 60)));
        let scopes = [
            SearchScope::All,
            SearchScope::Project(projects["web"].clone()),
            SearchScope::OtherProjects(projects["web"].clone()),
        ];
        let queries = [
            "migrations",
            "graphql websockets",
            "timeouts retries",
            "check caching 7",
            "imp",
            "fix* dep",
            "src ci",
            "seen while fixing fixtures",
        ];
        let mut compared = 0;
        for q in queries {
            let parsed = crate::learnings::query::parse(q).unwrap();
            for scope in &scopes {
                let search = IndexSearch {
                    query: &parsed,
                    scope,
                    min_quality: None,
                    // Every match: a cut inside a tie could keep either learning.
                    candidates: 100,
                    limit: 100,
                    ranking: Ranking::Lexical,
                    include_superseded: false,
                    include_archived: false,
                    min_trust: None,
                    signature: &|_| None,
                };
                let a = search_in(&all, &search, None).unwrap();
                let b = search_in(&split, &search, None).unwrap();
                assert!(!a.is_empty(), "{q} {scope:?} found nothing");
                // The same learnings with the same scores. Only the order of learnings
                // whose scores tie (the two projects hold texts alike but for the slug)
                // may differ: tantivy adds a document's term scores in an order of its
                // own, so a tie can differ in the last bit.
                let by_seq = |r: &[Ranked]| {
                    r.iter()
                        .map(|h| (h.seq, (h.key, h.score.total, h.score.field_priority)))
                        .collect::<BTreeMap<_, _>>()
                };
                let (on_disk, in_tail) = (by_seq(&a), by_seq(&b));
                assert_eq!(
                    on_disk.keys().collect::<Vec<_>>(),
                    in_tail.keys().collect::<Vec<_>>(),
                    "{q} {scope:?}"
                );
                let close = |x: f32, y: f32| (x - y).abs() <= 1e-6 * x.abs().max(1.0);
                for (seq, (bm25, total, priority)) in &on_disk {
                    let (bm25_t, total_t, priority_t) = in_tail[seq];
                    assert!(
                        close(*bm25, bm25_t) && close(*total, total_t),
                        "{q} {scope:?}: learning {seq} scored {bm25}/{total} on disk, \
                         {bm25_t}/{total_t} in the tail"
                    );
                    assert_eq!(*priority, priority_t, "{q} {scope:?}: learning {seq}");
                    compared += 1;
                }
                for (x, y) in a.iter().zip(&b) {
                    assert!(close(x.key, y.key), "{q} {scope:?}: rank order differs");
                }
            }
        }
        assert!(compared > 200, "only {compared} results compared");
    }

    /// An index directory that cannot be used (here a path beneath a regular file; a
    /// full disk in `tests/security.rs`): searches are answered from memory, the view in
    /// memory is kept and extended by new learnings rather than rebuilt for every
    /// search, and once the directory is usable again the next search after
    /// [`DISK_RETRY`] moves to the disk index.
    #[test]
    fn an_unusable_index_directory_is_searched_from_one_view_in_memory_until_it_recovers() {
        let (dir, store, _) = seeded();
        let blocker = dir.path().join("blocker");
        std::fs::write(
            &blocker,
            "a file where the index directory's parent should be",
        )
        .unwrap();
        let index = LearningIndex::new(blocker.join("learnings"));
        let embedder = without_model();
        let learnings = Learnings {
            store: &store,
            index: &index,
            embedder: &embedder,
        };
        let search = |q: &str| {
            learnings
                .search_learnings(&crate::learnings::LearningSearch {
                    query: q.into(),
                    scope: SearchScope::All,
                    limit: Some(100),
                    min_quality_score: None,
                    include_superseded: false,
                    include_archived: false,
                    min_trust: None,
                })
                .unwrap()
        };
        // Whether the view is in memory, and its tail.
        let state = |index: &LearningIndex| {
            let view = index.read();
            let open = &view.as_ref().expect("a view is open").0;
            (open.retry_disk_at.is_some(), tail_range(open))
        };
        assert!(search("migrations").count > 0);
        assert_eq!(state(&index), (true, Some((0, 60))));

        let issue = store
            .read(|c| c.query_row("SELECT identifier FROM issues LIMIT 1", [], |r| r.get(0)))
            .unwrap();
        // An old learning rewritten behind the view's back (Cairn never rewrites one): a
        // view that counted its tail again would find the new word.
        store
            .write(|c| {
                c.execute(
                    "UPDATE learnings SET pattern = 'albatross nesting' WHERE seq = 1",
                    [],
                )
            })
            .unwrap();
        learnings
            .add_learning(&NewLearning {
                issue,
                pattern: "zeppelin moorings need a second anchor line, or a gust swings the hull into the mast"
                    .into(),
                context: None,
                applies_to: vec![],
                learning_type: None,
                created_by: "test".into(),
                agent_type: "test".into(),
                merge: false,
                supersedes: Vec::new(),
                person: false,
            })
            .unwrap();
        assert_eq!(search("zeppelin").count, 1);
        assert_eq!(state(&index), (true, Some((0, 61))));
        assert_eq!(
            search("albatross").count,
            0,
            "only the new learning was counted"
        );

        // Usable again: the next search once the retry is due opens the disk index.
        std::fs::remove_file(&blocker).unwrap();
        assert_eq!(search("zeppelin").count, 1);
        assert!(
            state(&index).0,
            "the disk was tried before the retry was due"
        );
        index
            .write()
            .as_mut()
            .expect("a view is open")
            .0
            .retry_disk_at = Some(Instant::now());
        assert_eq!(search("zeppelin").count, 1);
        assert!(!state(&index).0, "still searching from memory");
        assert!(blocker.join("learnings/meta.json").exists());
    }
}
