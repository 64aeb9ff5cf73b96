//! What Cairn's two tantivy indexes (the learnings, the vault's chunks)
//! share about their directory on disk: opening it, recreating one that cannot be opened
//! or holds another schema (it is derived data), and taking its one writer with back-off.

use std::path::Path;
use std::time::{Duration, Instant};

use tantivy::directory::MmapDirectory;
use tantivy::directory::error::LockError;
use tantivy::schema::Schema;
use tantivy::{Index, IndexWriter, TantivyDocument, TantivyError};

use crate::error::{Error, Result};

/// Memory budget of one index writer.
pub(crate) const WRITER_MEMORY: usize = 50_000_000;

/// The index `name` (for messages) at `dir`, created when missing, wiped and recreated
/// when it cannot be opened or has another schema. Tokenizers are the caller's to
/// register.
pub(crate) fn open_or_recreate(dir: &Path, schema: &Schema, name: &str) -> Result<Index> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let attempt = || -> tantivy::Result<Index> {
        Index::open_or_create(MmapDirectory::open(dir)?, schema.clone())
    };
    // A failure may be a race with another process creating the index at the same
    // moment: look again before treating the directory as unusable.
    let first = attempt().or_else(|_| {
        std::thread::sleep(Duration::from_millis(50));
        attempt()
    });
    match first {
        Ok(i) => Ok(i),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), "{name} unusable ({e}); rebuilding it");
            std::fs::remove_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            attempt().map_err(|e| Error::Index(format!("{name}: {e}")))
        }
    }
}

/// Take the writer of a freshly opened index (`open`), waiting up to `wait` with
/// back-off while another process holds it; `None` when it is still held then.
pub(crate) fn acquire_writer(
    wait: Duration,
    name: &str,
    open: impl Fn() -> Result<Index>,
) -> Result<Option<(Index, IndexWriter)>> {
    let deadline = Instant::now() + wait;
    let mut delay = Duration::from_millis(5);
    loop {
        let index = open()?;
        match index.writer_with_num_threads::<TantivyDocument>(1, WRITER_MEMORY) {
            Ok(w) => return Ok(Some((index, w))),
            Err(TantivyError::LockFailure(LockError::LockBusy, _)) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(None);
                }
                std::thread::sleep(delay.min(left));
                delay = (delay * 2).min(Duration::from_millis(200));
            }
            Err(e) => return Err(Error::Index(format!("{name}: {e}"))),
        }
    }
}
