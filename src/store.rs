//! The SQLite store: the source of truth for everything Cairn knows.
//!
//! Owns opening a database (WAL, `busy_timeout`, foreign keys), first-time setup that
//! survives several processes creating the same file at once, the numbered migrations
//! under `migrations/` (embedded, applied by `PRAGMA user_version`, one transaction
//! each), and the two ways in: [`Store::read`] and [`Store::write`] (always
//! `BEGIN IMMEDIATE`). Derived indexes (tantivy, HNSW) live in [`Store::index_dir`].

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

use crate::error::{Error, Result};

/// Busy timeout for every connection, in milliseconds.
pub const BUSY_TIMEOUT_MS: u64 = 5000;

/// The embedded migrations, in order. The number is the `user_version` after applying.
const MIGRATIONS: &[(u32, &str, &str)] = &[
    (
        1,
        "0001_core.sql",
        include_str!("../migrations/0001_core.sql"),
    ),
    (
        2,
        "0002_trail.sql",
        include_str!("../migrations/0002_trail.sql"),
    ),
    (
        3,
        "0003_learnings.sql",
        include_str!("../migrations/0003_learnings.sql"),
    ),
    (
        4,
        "0004_vault.sql",
        include_str!("../migrations/0004_vault.sql"),
    ),
    (
        5,
        "0005_colibri.sql",
        include_str!("../migrations/0005_colibri.sql"),
    ),
    (
        6,
        "0006_audit_append_only.sql",
        include_str!("../migrations/0006_audit_append_only.sql"),
    ),
    (
        7,
        "0007_learning_embeddings.sql",
        include_str!("../migrations/0007_learning_embeddings.sql"),
    ),
    (
        8,
        "0008_session_tokens.sql",
        include_str!("../migrations/0008_session_tokens.sql"),
    ),
];

/// The highest migration version this binary knows.
pub fn latest_version() -> u32 {
    MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

/// An open database. One connection, shared by the threads of a process.
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Open (creating if needed) the database at `path` and bring its schema up to date.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS))?;
        enable_wal(&conn)?;
        conn.pragma_update(None, "foreign_keys", true)?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Reads through a memory map: no read() syscall per page on hot lookups.
        conn.pragma_update(None, "mmap_size", 256 * 1024 * 1024)?;
        migrate(&conn)?;
        Ok(Store {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory of derived indexes for this database: `<db path>.index/`
    /// (`index/cairn.db` → `index/cairn.db.index/`).
    pub fn index_dir(&self) -> PathBuf {
        index_dir_for(&self.path)
    }

    /// The schema version of the open database.
    pub fn user_version(&self) -> Result<u32> {
        self.read(|c| Ok(c.query_row("PRAGMA user_version", [], |r| r.get(0))?))
    }

    /// Run `f` on the connection outside any explicit transaction (reads).
    pub fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.lock();
        f(&conn).map_err(|e| self.name_full(e))
    }

    /// Run `f` inside a `BEGIN IMMEDIATE` transaction, committed when `f` returns `Ok`
    /// and rolled back otherwise, so no call ever leaves partial state. A full disk
    /// (`SQLITE_FULL`) rolls back too and is reported as [`Error::StorageFull`] naming
    /// the database file.
    pub fn write<T>(&self, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.lock();
        let run = || -> Result<T> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        };
        run().map_err(|e| self.name_full(e))
    }

    /// Name the database file in a [`Error::StorageFull`] raised by SQLite.
    fn name_full(&self, e: Error) -> Error {
        match e {
            Error::StorageFull { what } if what == "the database" => Error::StorageFull {
                what: format!("the database {}", self.path.display()),
            },
            other => other,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave a transaction open: rusqlite's
        // Transaction rolls back on drop. The connection itself stays usable.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `<db path>.index/`, the derived-index directory of a database path.
pub fn index_dir_for(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_os_string();
    s.push(".index");
    PathBuf::from(s)
}

/// Switch to WAL. On a brand-new file several processes race here, and SQLite answers
/// `SQLITE_BUSY` at once (the busy handler is not consulted while the journal mode
/// changes), so retry with back-off for a bounded time.
fn enable_wal(conn: &Connection) -> Result<()> {
    let deadline = Instant::now() + Duration::from_millis(BUSY_TIMEOUT_MS * 2);
    let mut delay = Duration::from_millis(2);
    loop {
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0)) {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => {
                return Err(Error::Internal(format!(
                    "could not switch the database to WAL (journal mode is {mode})"
                )));
            }
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_millis(100));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Apply every migration above the database's `user_version`, each in its own
/// `BEGIN IMMEDIATE` transaction that re-reads the version first, so concurrent
/// openers apply each migration exactly once.
fn migrate(conn: &Connection) -> Result<()> {
    let current: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if current > latest_version() {
        return Err(Error::FailedPrecondition(format!(
            "database schema version {current} is newer than this cairn ({}); upgrade cairn",
            latest_version()
        )));
    }
    for (version, name, sql) in MIGRATIONS {
        if *version <= current {
            continue;
        }
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let step = (|| -> Result<()> {
            let now: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if now >= *version {
                return Ok(());
            }
            conn.execute_batch(sql)
                .map_err(|e| Error::Internal(format!("migration {name} failed: {e}")))?;
            conn.pragma_update(None, "user_version", version)?;
            Ok(())
        })();
        match step {
            Ok(()) => conn.execute_batch("COMMIT")?,
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(e);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_database_is_migrated_in_wal_mode() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("sub/c.db")).unwrap();
        assert_eq!(store.user_version().unwrap(), latest_version());
        let mode: String = store
            .read(|c| Ok(c.query_row("PRAGMA journal_mode", [], |r| r.get(0))?))
            .unwrap();
        assert_eq!(mode, "wal");
        let fk: i64 = store
            .read(|c| Ok(c.query_row("PRAGMA foreign_keys", [], |r| r.get(0))?))
            .unwrap();
        assert_eq!(fk, 1);
    }

    #[test]
    fn failed_write_rolls_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("c.db")).unwrap();
        let r: Result<()> = store.write(|tx| {
            tx.execute(
                "INSERT INTO agent_profiles(profile_type, updated_at) VALUES ('x', 'now')",
                [],
            )?;
            Err(Error::Internal("boom".into()))
        });
        assert!(r.is_err());
        let n: i64 = store
            .read(|c| Ok(c.query_row("SELECT count(*) FROM agent_profiles", [], |r| r.get(0))?))
            .unwrap();
        assert_eq!(n, 0);
    }

    #[test]
    fn many_threads_open_a_new_database_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("race.db");
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let p = path.clone();
                std::thread::spawn(move || Store::open(&p).map(|s| s.user_version().unwrap()))
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap().unwrap(), latest_version());
        }
    }
}
