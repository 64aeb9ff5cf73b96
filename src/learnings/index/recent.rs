//! The candidates of recent searches on one view, kept for a search that asks again
//! (issue 59): an agent repeats its queries, and on a view that has not changed since,
//! BM25's candidates and the nearest vectors of a query are what they were. Only those
//! two lists are kept, never a ranking: the standing, age and phrase of each candidate,
//! the blend, the grouping and the rows of the answer are worked out again for every
//! search, so an answer is the one the same search gets without the lists kept.
//!
//! A view ([`Open`]) changes only under the write lock ([`LearningIndex::fresh`]), which
//! replaces its lists; a graph growing under a view is part of the nearest list's key.

use std::hash::Hash;

use super::super::query::Slot;
use super::super::trust::Trust;

use super::*;

/// Searches whose lists one view keeps, per half: each list holds the search's number of
/// candidates ([`CANDIDATES_MIN`](super::super::limits::CANDIDATES_MIN) or more), 12 to 16
/// bytes each, and a nearest list's key the query's vector (1.5 KB): under 1 MB in all.
pub(super) const RECENT_SEARCHES: usize = 256;

/// Which learnings a search may take as candidates, and how many each half takes: what
/// both lists depend on besides the query.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Among {
    pub(super) scope: SearchScope,
    pub(super) min_quality: Option<u8>,
    pub(super) include_superseded: bool,
    pub(super) include_archived: bool,
    pub(super) min_trust: Option<Trust>,
    pub(super) taken: usize,
}

/// What BM25's candidates depend on: the query's slots, the filters, the ranking (the
/// dense baseline takes none, BM25 alone weighs no field).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct LexicalKey {
    pub(super) among: Among,
    pub(super) slots: Vec<Slot>,
    pub(super) ranking: Ranking,
}

/// What the nearest vectors depend on: the query's vector (its bits), the filters, and
/// the points the view's graphs held (a graph being built answers for more of them
/// later).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct NearestKey {
    pub(super) among: Among,
    pub(super) vector: Vec<u32>,
    pub(super) graph_points: usize,
}

/// One BM25 candidate as the blend reads it before its standing: its `seq`, score and
/// field priority.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct LexicalHit {
    pub(super) seq: u64,
    pub(super) bm25: f32,
    pub(super) field_priority: f32,
}

/// Lists by their key, the most recently used kept.
type Lists<K, T> = Mutex<lru::LruCache<K, Arc<[T]>>>;

/// The lists of recent searches on one view.
pub(super) struct Recent {
    lexical: Lists<LexicalKey, LexicalHit>,
    nearest: Lists<NearestKey, (u64, f32)>,
}

impl Default for Recent {
    fn default() -> Self {
        let n = NonZeroUsize::new(RECENT_SEARCHES).expect("not zero");
        Recent {
            lexical: Mutex::new(lru::LruCache::new(n)),
            nearest: Mutex::new(lru::LruCache::new(n)),
        }
    }
}

impl Recent {
    /// BM25's candidates for `key`: kept, or found by `find` and kept.
    pub(super) fn lexical(
        &self,
        key: LexicalKey,
        find: impl FnOnce() -> Result<Vec<LexicalHit>>,
    ) -> Result<Arc<[LexicalHit]>> {
        kept_or(&self.lexical, key, find)
    }

    /// The nearest vectors for `key`, best first: kept, or found by `find` and kept.
    pub(super) fn nearest(
        &self,
        key: NearestKey,
        find: impl FnOnce() -> Vec<(u64, f32)>,
    ) -> Arc<[(u64, f32)]> {
        kept_or(&self.nearest, key, || {
            Ok::<_, std::convert::Infallible>(find())
        })
        .unwrap_or_else(|never| match never {})
    }
}

/// The list kept under `key` in `lists`, or the one `find` makes, then kept. The lock is
/// not held while `find` runs: two searches asking at once both find it, and the second
/// keeps the same list again.
fn kept_or<K: Hash + Eq, T, E>(
    lists: &Lists<K, T>,
    key: K,
    find: impl FnOnce() -> std::result::Result<Vec<T>, E>,
) -> std::result::Result<Arc<[T]>, E> {
    let lock = || {
        lists
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    if let Some(kept) = lock().get(&key) {
        return Ok(kept.clone());
    }
    let found: Arc<[T]> = find()?.into();
    lock().put(key, found.clone());
    Ok(found)
}
