//! The work a call does, counted in deterministic units (issue 59): documents scored,
//! stored rows and texts read, vectors compared, model runs, candidates grouped, bytes
//! serialized. Unlike a wall-clock time, a count is the same on a loaded machine and an
//! idle one, so tests can hold budgets on it (tests/cost.rs) and `/metrics` can show
//! where the work goes (`cairn_tool_work_total`, docs/metrics.md).
//!
//! A call is measured by [`measure`], which opens a scope on the current thread; the
//! code that does the work calls [`count`] where it does it, and a count outside any
//! scope (the background indexer, a CLI command) goes nowhere. A scope is per thread:
//! work handed to another thread is counted there only inside a scope of its own.

use std::cell::Cell;

use schemars::JsonSchema;
use serde::Serialize;

/// One unit of work (see [`Work`] for what each counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    DocumentsScored,
    PostingsRead,
    RowsRead,
    TextsRead,
    VectorsCompared,
    ModelRuns,
    CandidatesGrouped,
    BytesSerialized,
    ThreadsStarted,
}

impl Unit {
    /// Every unit, in the order of [`Work`]'s fields.
    pub const ALL: [Unit; 9] = [
        Unit::DocumentsScored,
        Unit::PostingsRead,
        Unit::RowsRead,
        Unit::TextsRead,
        Unit::VectorsCompared,
        Unit::ModelRuns,
        Unit::CandidatesGrouped,
        Unit::BytesSerialized,
        Unit::ThreadsStarted,
    ];

    /// The unit's name: the `unit` label in `/metrics` and the field of [`Work`].
    pub fn name(self) -> &'static str {
        match self {
            Unit::DocumentsScored => "documents_scored",
            Unit::PostingsRead => "postings_read",
            Unit::RowsRead => "rows_read",
            Unit::TextsRead => "texts_read",
            Unit::VectorsCompared => "vectors_compared",
            Unit::ModelRuns => "model_runs",
            Unit::CandidatesGrouped => "candidates_grouped",
            Unit::BytesSerialized => "bytes_serialized",
            Unit::ThreadsStarted => "threads_started",
        }
    }
}

/// The work one call did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Work {
    /// Documents the lexical half scored with BM25 (each one offered to the top k).
    pub documents_scored: u64,
    /// Postings of the terms that choose the lexical half's candidates (their document
    /// frequencies in the scope, summed): what their union walks to find them. A narrowed
    /// query's other terms only score those candidates (docs/learnings.md).
    pub postings_read: u64,
    /// Stored rows read from the database to build the answer (one per learning loaded).
    pub rows_read: u64,
    /// Stored texts read one at a time beside the answer's rows (a learning's text read
    /// to group restatements by their code).
    pub texts_read: u64,
    /// Dot products of two embeddings (the nearest search's scan, a candidate's cosine,
    /// grouping's comparisons with the heads). An HNSW graph's own comparisons inside its
    /// walk are not counted.
    pub vectors_compared: u64,
    /// Runs of the embedding model this call made (0 for a query from the cache, or one
    /// embedded by a concurrent call's run).
    pub model_runs: u64,
    /// Ranked candidates walked to group restatements under their heads.
    pub candidates_grouped: u64,
    /// Bytes of JSON serialized for the answer: its text, once. Every transport writes
    /// its `structuredContent` from that text (the stdio wire, the daemon's HTTP in and
    /// out of MCP sessions); a direct call of the server, which no transport writes, gets
    /// a tree, counted too.
    pub bytes_serialized: u64,
    /// Threads the call started to run parts of its work beside each other (a search's
    /// query embedding beside its lexical half, on an index of at least 5,000 learnings;
    /// none on a smaller one, or when the query's vector is cached).
    pub threads_started: u64,
}

impl Work {
    /// The count of `unit`.
    pub fn get(&self, unit: Unit) -> u64 {
        match unit {
            Unit::DocumentsScored => self.documents_scored,
            Unit::PostingsRead => self.postings_read,
            Unit::RowsRead => self.rows_read,
            Unit::TextsRead => self.texts_read,
            Unit::VectorsCompared => self.vectors_compared,
            Unit::ModelRuns => self.model_runs,
            Unit::CandidatesGrouped => self.candidates_grouped,
            Unit::BytesSerialized => self.bytes_serialized,
            Unit::ThreadsStarted => self.threads_started,
        }
    }

    fn slot(&mut self, unit: Unit) -> &mut u64 {
        match unit {
            Unit::DocumentsScored => &mut self.documents_scored,
            Unit::PostingsRead => &mut self.postings_read,
            Unit::RowsRead => &mut self.rows_read,
            Unit::TextsRead => &mut self.texts_read,
            Unit::VectorsCompared => &mut self.vectors_compared,
            Unit::ModelRuns => &mut self.model_runs,
            Unit::CandidatesGrouped => &mut self.candidates_grouped,
            Unit::BytesSerialized => &mut self.bytes_serialized,
            Unit::ThreadsStarted => &mut self.threads_started,
        }
    }

    /// Add `n` to `unit`'s count.
    pub fn add(&mut self, unit: Unit, n: u64) {
        let slot = self.slot(unit);
        *slot = slot.saturating_add(n);
    }

    /// Add every count of `other`.
    pub(crate) fn absorb(&mut self, other: &Work) {
        for unit in Unit::ALL {
            self.add(unit, other.get(unit));
        }
    }
}

thread_local! {
    /// The open scope's counts on this thread, if a call is being measured.
    static CURRENT: Cell<Option<Work>> = const { Cell::new(None) };
}

/// Run `f` and return what it counted on this thread. Scopes nest: an inner scope's
/// work is counted in the outer one too.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, Work) {
    /// The outer scope, put back when `f` unwinds (a panicking handler is caught
    /// further up): the unwound scope's counts are dropped.
    struct Outer(Option<Option<Work>>);
    impl Drop for Outer {
        fn drop(&mut self) {
            if let Some(outer) = self.0.take() {
                CURRENT.with(|c| c.set(outer));
            }
        }
    }
    let mut outer = Outer(Some(CURRENT.with(|c| c.replace(Some(Work::default())))));
    let out = f();
    let mine = CURRENT.with(|c| c.get()).unwrap_or_default();
    let outer = outer.0.take().flatten().map(|mut o| {
        o.absorb(&mine);
        o
    });
    CURRENT.with(|c| c.set(outer));
    (out, mine)
}

/// Count `n` of `unit` in the scope open on this thread (nothing when none is).
pub fn count(unit: Unit, n: u64) {
    CURRENT.with(|c| {
        if let Some(mut w) = c.get() {
            w.add(unit, n);
            c.set(Some(w));
        }
    });
}

/// Count every unit of `work` in the scope open on this thread: the work of this call
/// done on another thread, measured there by [`measure`].
pub(crate) fn count_all(work: &Work) {
    for unit in Unit::ALL {
        count(unit, work.get(unit));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_go_to_the_open_scope_and_nested_scopes_add_up() {
        count(Unit::TextsRead, 5);
        let ((), outer) = measure(|| {
            count(Unit::RowsRead, 2);
            let ((), inner) = measure(|| count(Unit::RowsRead, 3));
            assert_eq!(inner.rows_read, 3);
            count(Unit::ModelRuns, 1);
        });
        assert_eq!(
            outer,
            Work {
                rows_read: 5,
                model_runs: 1,
                ..Work::default()
            }
        );
        let ((), after) = measure(|| ());
        assert_eq!(
            after,
            Work::default(),
            "a closed scope leaves nothing behind"
        );
    }

    #[test]
    fn a_scope_unwound_by_a_panic_is_closed() {
        let outer = measure(|| {
            let caught = std::panic::catch_unwind(|| {
                measure(|| {
                    count(Unit::TextsRead, 1);
                    panic!("handler failed");
                })
            });
            assert!(caught.is_err());
            count(Unit::RowsRead, 1);
        })
        .1;
        assert_eq!(outer.rows_read, 1);
        assert_eq!(
            outer.texts_read, 0,
            "the unwound scope's counts are dropped"
        );
    }
}
