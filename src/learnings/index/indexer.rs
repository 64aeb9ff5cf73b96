//! The background indexer of a long-lived process: two lanes, one indexing and one
//! embedding, each a thread woken by writes (see the module docs of [`super`]).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::embed::Embed;
use crate::embed::foreground::Foreground;
use crate::store::Store;

use super::super::semantic::{self};

use super::*;

/// The background indexer's shared state: two lanes, each a thread with a wake-up
/// flag (one indexes, one embeds, so a model load or a busy model never delays an
/// index commit), and what they have done.
#[derive(Debug, Default)]
pub(super) struct Indexer {
    pub(super) index: Lane,
    pub(super) embed: Lane,
    /// Commits that indexed at least one learning.
    pub(super) commits: AtomicU64,
    /// Learnings those commits indexed.
    pub(super) indexed: AtomicU64,
    /// Learnings it embedded.
    pub(super) embedded: AtomicU64,
    /// Index rounds finished (whatever they found to do).
    pub(super) rounds: AtomicU64,
}

/// One background thread's wake-up flag.
#[derive(Debug, Default)]
pub(super) struct Lane {
    pub(super) state: Mutex<IndexerState>,
    /// Signalled when `pending` is set.
    pub(super) wake: Condvar,
    /// Signalled after each round.
    pub(super) done: Condvar,
}

#[derive(Debug, Default)]
pub(super) struct IndexerState {
    /// Some write (or search) happened since the last round began.
    pub(super) pending: bool,
    /// A round is under way.
    pub(super) running: bool,
    /// A flush waits: the next round starts without waiting for its spacing.
    pub(super) hurry: bool,
}

impl Lane {
    pub(super) fn lock(&self) -> MutexGuard<'_, IndexerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn nudge(&self) {
        self.lock().pending = true;
        self.wake.notify_one();
    }

    /// The thread's loop: wait for a nudge, run a round, repeat. A round that did some
    /// work (`round` returns true) makes the next one wait until `spacing` has passed,
    /// unless a flush waits. Everything written while a round runs (or waits for its
    /// spacing) is taken by the next one.
    pub(super) fn serve(&self, spacing: Duration, mut round: impl FnMut() -> bool) {
        let mut due = Instant::now();
        loop {
            {
                let mut s = self.lock();
                loop {
                    let now = Instant::now();
                    if s.pending && (s.hurry || now >= due) {
                        break;
                    }
                    s = if s.pending {
                        self.wake
                            .wait_timeout(s, due - now)
                            .unwrap_or_else(|p| p.into_inner())
                            .0
                    } else {
                        self.wake.wait(s).unwrap_or_else(|p| p.into_inner())
                    };
                }
                s.pending = false;
                s.hurry = false;
                s.running = true;
            }
            if round() {
                due = Instant::now() + spacing;
            }
            self.lock().running = false;
            self.done.notify_all();
        }
    }

    /// Wait until every round asked for before the call has run, up to `deadline`;
    /// whether it had.
    pub(super) fn flush(&self, deadline: Instant) -> bool {
        let mut s = self.lock();
        s.pending = true;
        s.hurry = true;
        self.wake.notify_one();
        while s.pending || s.running {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            s = self
                .done
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }
}

impl Indexer {
    pub(super) fn nudge(&self) {
        self.index.nudge();
        self.embed.nudge();
    }

    /// The indexing thread: catch the index up to `max(seq)` in one commit per round.
    pub(super) fn run_index(&self, store: &Store, dir: &Path) {
        self.index.serve(COMMIT_SPACING, || {
            let committed = match catch_up(store, dir, ADD_WRITER_WAIT, false) {
                Ok(CatchUp::Indexed(0)) => false,
                Ok(CatchUp::Indexed(n)) => {
                    self.commits.fetch_add(1, Ordering::Relaxed);
                    self.indexed.fetch_add(n, Ordering::Relaxed);
                    true
                }
                Ok(CatchUp::Busy) => {
                    tracing::info!("learnings index writer busy; the next write or search retries");
                    false
                }
                Err(e) => {
                    tracing::warn!(
                        "indexing new learnings failed ({e}); the next write or search retries"
                    );
                    false
                }
            };
            self.rounds.fetch_add(1, Ordering::Release);
            committed
        });
    }

    /// The embedding thread: embed the learnings that have no vector, a few per model
    /// run, each once no call is in flight ([`semantic::Urgency::Idle`]).
    pub(super) fn run_embed(&self, store: &Store, embedder: &dyn Embed, foreground: &Foreground) {
        let mut embedded_upto = 0;
        let mut warned = false;
        // No spacing: each run already waits for a quiet moment.
        self.embed.serve(Duration::ZERO, || {
            loop {
                match semantic::backfill(
                    store,
                    embedder,
                    semantic::Span::after(embedded_upto),
                    semantic::BACKGROUND_BATCH,
                    semantic::Urgency::Idle(foreground),
                ) {
                    Ok((n, reached)) => {
                        embedded_upto = reached;
                        self.embedded.fetch_add(n as u64, Ordering::Relaxed);
                        if n < semantic::BACKGROUND_BATCH {
                            return false;
                        }
                    }
                    Err(e) => {
                        // Without the model every round fails the same way: say it once.
                        if !warned {
                            tracing::warn!(
                                "embedding new learnings failed ({e}); they stay lexical \
                                 until a later round or `cairn learnings reindex` embeds them"
                            );
                        }
                        warned = true;
                        return false;
                    }
                }
            }
        });
    }
}

/// What the background indexer has done (tests, benchmarks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexerStats {
    /// Commits that indexed at least one learning.
    pub(crate) commits: u64,
    /// Learnings indexed by those commits.
    pub(crate) indexed: u64,
    /// Learnings it embedded.
    pub(crate) embedded: u64,
}

#[cfg(test)]
mod group_commit_tests {
    //! The background indexer of a long-lived process, in-process: every acknowledged
    //! write is found by the next search, and commits are grouped.

    use super::*;
    use crate::embed::HashEmbedder;
    use crate::embed::foreground::Foreground;
    use crate::embed::{EmbedderConfig, ModelEmbedder};
    use crate::issues::{NewIssue, NewProject, create_issue, create_project};
    use crate::learnings::{LearningHit, LearningSearch, Learnings, NewLearning};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    struct Fixture {
        _dir: tempfile::TempDir,
        store: Store,
        index: LearningIndex,
        embedder: Arc<dyn Embed>,
        foreground: Arc<Foreground>,
        issue: String,
    }

    /// A database with one project and issue, a learnings index with its background
    /// indexer started, and no model (lexical search only: fast and deterministic).
    /// A fixture whose embedder has no model (learnings stay lexical).
    fn fixture() -> Fixture {
        fixture_with(Arc::new(ModelEmbedder::new(EmbedderConfig {
            model_dir: Some("/nonexistent/cairn-model".into()),
            ..Default::default()
        })))
    }

    fn fixture_with(embedder: Arc<dyn Embed>) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("cairn.db");
        let store = Store::open(&db).unwrap();
        create_project(
            &store,
            &NewProject {
                slug: "web".into(),
                name: "web".into(),
                prefix: None,
                path: None,
            },
        )
        .unwrap();
        let issue = create_issue(
            &store,
            &NewIssue {
                project: "web".into(),
                title: "Learn things".into(),
                ..Default::default()
            },
        )
        .unwrap()
        .identifier;
        let index = LearningIndex::new(store.index_dir().join("learnings"));
        let foreground = Arc::new(Foreground::default());
        index
            .start_indexer(store.location(), embedder.clone(), foreground.clone())
            .unwrap();
        Fixture {
            _dir: dir,
            store,
            index,
            embedder,
            foreground,
            issue,
        }
    }

    impl Fixture {
        fn learnings(&self) -> Learnings<'_> {
            Learnings {
                store: &self.store,
                index: &self.index,
                embedder: &*self.embedder,
            }
        }

        /// Record a learning whose pattern holds the word `marker`; its id.
        fn add(&self, marker: &str) -> String {
            self.learnings()
                .add_learning(&NewLearning {
                    issue: self.issue.clone(),
                    pattern: format!(
                        "When touching the {marker} module always run the migration check first, \
                         or the deploy fails"
                    ),
                    context: None,
                    applies_to: vec![],
                    learning_type: None,
                    created_by: "test".into(),
                    agent_type: "test".into(),
                    merge: false,
                    supersedes: Vec::new(),
                    person: false,
                })
                .unwrap()
                .learning
                .id
        }

        /// The first ten hits of a search for `query` over every project.
        fn search(&self, query: &str) -> Vec<LearningHit> {
            self.learnings()
                .search_learnings(&LearningSearch {
                    query: query.into(),
                    scope: SearchScope::All,
                    limit: Some(10),
                    min_quality_score: None,
                    include_superseded: false,
                    include_archived: false,
                    min_trust: None,
                })
                .unwrap()
                .results
        }

        /// The ids a search for `word` returns.
        fn find(&self, word: &str) -> Vec<String> {
            self.search(word)
                .into_iter()
                .map(|h| h.learning.id)
                .collect()
        }

        /// How many learnings the on-disk index holds (read without writing).
        fn on_disk(&self) -> u64 {
            disk_watermark(self.index.dir()).unwrap()
        }
    }

    fn marker(t: usize, i: usize) -> String {
        // No marker is a prefix of another (a search expands prefixes).
        format!("zq{}x{}w", ["a", "b", "c", "d", "e", "f", "g", "h"][t], i)
    }

    #[test]
    fn a_query_word_no_learning_has_weighs_nothing_in_field_priority() {
        let f = fixture();
        let id = f.add("zqaxw");
        f.add("zqbxw");
        let priority = |query: &str| {
            let hits = f.search(query);
            let hit = hits.iter().find(|h| h.learning.id == id).expect(query);
            hit.score.field_priority
        };
        assert_eq!(priority("migration check"), 1.0);
        // A misspelt word, and a compound whose words are all new: every query word
        // the learnings have is still in its pattern.
        assert_eq!(priority("migration check migrashun"), 1.0);
        assert_eq!(priority("migration check deploy_window_qzms"), 1.0);
        // A word another learning has still counts against this one.
        assert!(priority("migration check zqbxw") < 0.7);
    }

    #[test]
    fn a_write_is_found_by_the_very_next_search() {
        let f = fixture();
        for i in 0..30 {
            let m = marker(0, i);
            let id = f.add(&m);
            assert_eq!(
                f.find(&m),
                vec![id],
                "learning {i} not found right after its write"
            );
        }
        f.index.flush();
        assert_eq!(f.on_disk(), 30);
    }

    #[test]
    fn writes_from_many_threads_are_all_found_and_committed_in_groups() {
        const THREADS: usize = 8;
        const EACH: usize = 25;
        let f = fixture();
        let written: Vec<(String, String)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let f = &f;
                    s.spawn(move || {
                        (0..EACH)
                            .map(|i| {
                                let m = marker(t, i);
                                let id = f.add(&m);
                                // Read your own write, while the others keep writing.
                                assert_eq!(f.find(&m), vec![id.clone()], "{m} not found");
                                (m, id)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        assert_eq!(written.len(), THREADS * EACH);
        for (m, id) in &written {
            assert_eq!(f.find(m), vec![id.clone()], "{m}");
        }
        f.index.flush();
        let stats = f.index.indexer_stats();
        assert_eq!(stats.indexed, (THREADS * EACH) as u64, "{stats:?}");
        assert!(stats.commits >= 1, "{stats:?}");
        assert!(
            stats.commits < (THREADS * EACH) as u64,
            "one commit per write: {stats:?}"
        );
        assert_eq!(f.on_disk(), (THREADS * EACH) as u64);
    }

    /// The background indexer starts its commits at least `COMMIT_SPACING` apart: learnings
    /// written one by one in between are found through the tail, and one commit takes
    /// them all.
    #[test]
    fn commits_are_spaced_and_writes_between_them_are_found() {
        const WRITES: usize = 30;
        const PAUSE: Duration = Duration::from_millis(20);
        let f = fixture();
        let started = Instant::now();
        for i in 0..WRITES {
            let m = marker(0, i);
            let id = f.add(&m);
            assert_eq!(f.find(&m), vec![id], "{m} not found right after its write");
            std::thread::sleep(PAUSE);
        }
        let spell = started.elapsed();
        f.index.flush();
        let stats = f.index.indexer_stats();
        assert_eq!(stats.indexed, WRITES as u64, "{stats:?}");
        assert_eq!(f.on_disk(), WRITES as u64);
        // Without spacing each write (20 ms apart, a round takes a few) gets a commit.
        assert!(
            stats.commits < WRITES as u64 / 2,
            "{stats:?}: the writes were not grouped"
        );
        // Rounds start at least COMMIT_SPACING apart, plus the flush's own round.
        let most = spell.as_millis() / COMMIT_SPACING.as_millis() + 2;
        assert!(
            u128::from(stats.commits) <= most,
            "{} commits for {WRITES} writes over {spell:?}: more than one per {:?}",
            stats.commits,
            COMMIT_SPACING
        );
    }

    /// A long-lived process acknowledges a learning before embedding it: the indexer
    /// thread embeds it afterwards, and a flush (a server's clean exit) waits for that.
    #[test]
    fn the_indexer_embeds_acknowledged_learnings_after_the_write() {
        let embedder = Arc::new(HashEmbedder::new());
        let f = fixture_with(embedder.clone());
        assert_eq!(f.index.deferred_from(), 1, "no learning before the indexer");
        for i in 0..12 {
            f.add(&marker(0, i));
        }
        f.index.flush();
        assert_eq!(f.index.indexer_stats().embedded, 12);
        let rows: i64 = f
            .store
            .read(|c| {
                c.query_row(
                    "SELECT count(*) FROM learning_embeddings WHERE model = ?1",
                    [embedder.model_id()],
                    |r| r.get(0),
                )
            })
            .unwrap();
        assert_eq!(rows, 12);
        // The writes themselves embedded nothing: every text went through the indexer.
        assert_eq!(embedder.stats().texts, 12);
    }

    /// While a call is in flight the indexer does not embed: it waits for a quiet moment,
    /// and runs anyway once [`semantic::BACKGROUND_PATIENCE`] has passed (a server that is
    /// never quiet still embeds what it acknowledged). The learning is found lexically
    /// all along.
    #[test]
    fn background_embedding_waits_for_a_quiet_moment_or_its_patience() {
        let embedder = Arc::new(HashEmbedder::new());
        let f = fixture_with(embedder.clone());
        let call = f.foreground.begin();
        let started = Instant::now();
        let m = marker(0, 0);
        let id = f.add(&m);
        assert_eq!(f.find(&m), vec![id], "found before it is embedded");
        while f.index.indexer_stats().embedded == 0 {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "never embedded while a call stayed in flight: the patience floor is broken"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let waited = started.elapsed();
        assert!(
            waited >= semantic::BACKGROUND_PATIENCE,
            "embedded after {waited:?} with a call in flight: it did not wait for a quiet moment"
        );
        assert_eq!(f.index.indexer_stats().embedded, 1);
        drop(call);
        // Quiet: the next learning is embedded (and a flush waits for it).
        f.add(&marker(0, 1));
        f.index.flush();
        assert_eq!(f.index.indexer_stats().embedded, 2);
    }
}
