//! The store: the source of truth for everything Cairn knows, in SQLite (the embedded
//! default, a file) or PostgreSQL (`postgres://…`, shared by many hosts).
//!
//! Owns opening a database (SQLite: WAL, `busy_timeout`, foreign keys; first-time set-up
//! that survives several processes creating the same file at once), the numbered
//! migrations (`migrations/*.sql` for SQLite, `migrations/postgres/*.sql` for
//! PostgreSQL; embedded, applied once each, in a transaction), and the two ways in:
//! [`Store::read`] and [`Store::write`]. Reads run on connections of their own
//! (read-only; opened on demand, kept for reuse), so in a daemon serving many sessions
//! reads never queue behind each other or behind a write (SQLite's WAL, PostgreSQL's
//! MVCC). On PostgreSQL a connection the server closed (a restart, a terminated
//! backend) is replaced by the next read or write that would have used it. Writers are
//! serialized across every process and host on the database (SQLite's `BEGIN IMMEDIATE`; on PostgreSQL a transaction-scoped
//! advisory lock taken first), so a write sees every write acknowledged before it, and
//! ids allocated in a write follow commit order.
//!
//! Derived indexes (tantivy, HNSW) are host-local and live in [`Store::index_dir`]:
//! beside a SQLite file, or in the cache directory of a PostgreSQL database.
//!
//! [`db`] is the one SQL API over both databases and holds their drivers: nothing
//! outside this folder names rusqlite or tokio-postgres.

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

pub mod db;

use crate::error::{Error, Result};
use db::{CHANGES_CHANNEL, Conn, PgConn, PgConnector, PgListener, params};

/// Busy timeout for every connection, in milliseconds.
pub(crate) const BUSY_TIMEOUT_MS: u64 = 5000;

/// The embedded migrations, in order. The number is the `user_version` after applying.
const MIGRATIONS: &[(u32, &str, &str)] = &[
    (
        1,
        "0001_core.sql",
        include_str!("../../migrations/0001_core.sql"),
    ),
    (
        2,
        "0002_trail.sql",
        include_str!("../../migrations/0002_trail.sql"),
    ),
    (
        3,
        "0003_learnings.sql",
        include_str!("../../migrations/0003_learnings.sql"),
    ),
    (
        4,
        "0004_vault.sql",
        include_str!("../../migrations/0004_vault.sql"),
    ),
    (
        5,
        "0005_colibri.sql",
        include_str!("../../migrations/0005_colibri.sql"),
    ),
    (
        6,
        "0006_audit_append_only.sql",
        include_str!("../../migrations/0006_audit_append_only.sql"),
    ),
    (
        7,
        "0007_learning_embeddings.sql",
        include_str!("../../migrations/0007_learning_embeddings.sql"),
    ),
    (
        8,
        "0008_session_tokens.sql",
        include_str!("../../migrations/0008_session_tokens.sql"),
    ),
    (
        9,
        "0009_token_peer.sql",
        include_str!("../../migrations/0009_token_peer.sql"),
    ),
    (
        10,
        "0010_issue_aliases.sql",
        include_str!("../../migrations/0010_issue_aliases.sql"),
    ),
    (
        11,
        "0011_vault_roots.sql",
        include_str!("../../migrations/0011_vault_roots.sql"),
    ),
    (
        12,
        "0012_learning_lifecycle.sql",
        include_str!("../../migrations/0012_learning_lifecycle.sql"),
    ),
    (
        13,
        "0013_people.sql",
        include_str!("../../migrations/0013_people.sql"),
    ),
    (
        14,
        "0014_archive.sql",
        include_str!("../../migrations/0014_archive.sql"),
    ),
    (
        15,
        "0015_learning_trust.sql",
        include_str!("../../migrations/0015_learning_trust.sql"),
    ),
    (
        16,
        "0016_memory_imports.sql",
        include_str!("../../migrations/0016_memory_imports.sql"),
    ),
    (
        17,
        "0017_vault_root_files.sql",
        include_str!("../../migrations/0017_vault_root_files.sql"),
    ),
];

/// The PostgreSQL dialect of the same migrations, same numbers.
const PG_MIGRATIONS: &[(u32, &str, &str)] = &[
    (
        1,
        "postgres/0001_core.sql",
        include_str!("../../migrations/postgres/0001_core.sql"),
    ),
    (
        2,
        "postgres/0002_trail.sql",
        include_str!("../../migrations/postgres/0002_trail.sql"),
    ),
    (
        3,
        "postgres/0003_learnings.sql",
        include_str!("../../migrations/postgres/0003_learnings.sql"),
    ),
    (
        4,
        "postgres/0004_vault.sql",
        include_str!("../../migrations/postgres/0004_vault.sql"),
    ),
    (
        5,
        "postgres/0005_colibri.sql",
        include_str!("../../migrations/postgres/0005_colibri.sql"),
    ),
    (
        6,
        "postgres/0006_audit_append_only.sql",
        include_str!("../../migrations/postgres/0006_audit_append_only.sql"),
    ),
    (
        7,
        "postgres/0007_learning_embeddings.sql",
        include_str!("../../migrations/postgres/0007_learning_embeddings.sql"),
    ),
    (
        8,
        "postgres/0008_session_tokens.sql",
        include_str!("../../migrations/postgres/0008_session_tokens.sql"),
    ),
    (
        9,
        "postgres/0009_token_peer.sql",
        include_str!("../../migrations/postgres/0009_token_peer.sql"),
    ),
    (
        10,
        "postgres/0010_issue_aliases.sql",
        include_str!("../../migrations/postgres/0010_issue_aliases.sql"),
    ),
    (
        11,
        "postgres/0011_vault_roots.sql",
        include_str!("../../migrations/postgres/0011_vault_roots.sql"),
    ),
    (
        12,
        "postgres/0012_learning_lifecycle.sql",
        include_str!("../../migrations/postgres/0012_learning_lifecycle.sql"),
    ),
    (
        13,
        "postgres/0013_people.sql",
        include_str!("../../migrations/postgres/0013_people.sql"),
    ),
    (
        14,
        "postgres/0014_archive.sql",
        include_str!("../../migrations/postgres/0014_archive.sql"),
    ),
    (
        15,
        "postgres/0015_learning_trust.sql",
        include_str!("../../migrations/postgres/0015_learning_trust.sql"),
    ),
    (
        16,
        "postgres/0016_memory_imports.sql",
        include_str!("../../migrations/postgres/0016_memory_imports.sql"),
    ),
    (
        17,
        "postgres/0017_vault_root_files.sql",
        include_str!("../../migrations/postgres/0017_vault_root_files.sql"),
    ),
];

/// The highest migration version this binary knows.
pub(crate) fn latest_version() -> u32 {
    MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

/// Where a knowledge base lives: what `--db` (or `CAIRN_DB`) names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file; its indexes live beside it.
    File(PathBuf),
    /// A PostgreSQL database (`postgres://` or `postgresql://`); this host's indexes and
    /// daemon files live in `cache`.
    Postgres { url: String, cache: PathBuf },
}

impl Location {
    /// Parse a `--db` value; `cache_dir` is where a PostgreSQL database's host-local
    /// files go (default: `$XDG_CACHE_HOME/cairn/pg-<hash of the URL>`).
    pub fn parse(db: &str, cache_dir: Option<&Path>) -> Location {
        let is_url = ["postgres://", "postgresql://"]
            .iter()
            .any(|p| db.len() >= p.len() && db[..p.len()].eq_ignore_ascii_case(p));
        if !is_url {
            return Location::File(PathBuf::from(db));
        }
        let cache = match cache_dir {
            Some(d) => d.to_path_buf(),
            None => {
                let base = std::env::var_os("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                    .unwrap_or_else(std::env::temp_dir);
                let tag = crate::base::sha256_hex(crate::store::db::redact(db).as_bytes());
                base.join("cairn").join(format!("pg-{}", &tag[..16]))
            }
        };
        Location::Postgres {
            url: db.to_owned(),
            cache,
        }
    }

    /// The anchor of this host's files for the database: the SQLite file itself, or
    /// `<cache>/postgres` (indexes in `<anchor>.index/`, daemon files
    /// `<anchor>.daemon.*`).
    pub(crate) fn anchor(&self) -> PathBuf {
        match self {
            Location::File(p) => p.clone(),
            Location::Postgres { cache, .. } => cache.join("postgres"),
        }
    }
}

impl std::fmt::Display for Location {
    /// The path, or the URL without its password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::File(p) => write!(f, "{}", p.display()),
            Location::Postgres { url, .. } => f.write_str(&crate::store::db::redact(url)),
        }
    }
}

enum Backend {
    Sqlite {
        writer: Mutex<Connection>,
        readers: Pool<Connection>,
    },
    Postgres {
        connector: PgConnector,
        writer: Mutex<PgConn>,
        readers: Pool<PgConn>,
    },
}

/// An open database: one writing connection and a pool of reading ones (on SQLite
/// read-only connections; on PostgreSQL sessions whose transactions are read-only).
/// Shared by the threads of a process.
pub struct Store {
    backend: Backend,
    location: Location,
    anchor: PathBuf,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.location.to_string())
            .finish()
    }
}

/// The advisory lock key every PostgreSQL writer takes (ASCII "cairn-w").
const PG_WRITE_LOCK: i64 = 0x0063_6169_726e_2d77;
/// What a write's notification carries: nothing more precise than "something was
/// written" (a listener re-checks its watermarks, which costs microseconds).
const CHANGE_PAYLOAD: &str = "write";
/// The advisory lock key of the migration runner (ASCII "cairn-m").
const PG_MIGRATE_LOCK: i64 = 0x0063_6169_726e_2d6d;

impl Store {
    /// Open (creating if needed) the SQLite database at `path` and bring its schema up
    /// to date.
    pub fn open(path: &Path) -> Result<Store> {
        Store::open_at(&Location::File(path.to_path_buf()))
    }

    /// Open the database at `location` and bring its schema up to date.
    pub fn open_at(location: &Location) -> Result<Store> {
        let backend = match location {
            Location::File(path) => {
                let writer = open_sqlite(path)?;
                let path = path.clone();
                Backend::Sqlite {
                    writer: Mutex::new(writer),
                    readers: Pool::new(usize::MAX, move || open_reader(&path)),
                }
            }
            Location::Postgres { url, cache } => {
                private_dir(cache)?;
                let connector = PgConnector::new(url)?;
                let writer = connector.connect()?;
                migrate_pg(&writer, latest_version())?;
                let opener = connector.clone();
                Backend::Postgres {
                    writer: Mutex::new(writer),
                    readers: Pool::new(PG_READERS_MAX, move || open_pg_reader(&opener)),
                    connector,
                }
            }
        };
        // The indexes hold the learnings' and documents' text: owner-only, like the
        // database.
        private_dir(&index_dir_for(&location.anchor()))?;
        Ok(Store {
            backend,
            anchor: location.anchor(),
            location: location.clone(),
        })
    }

    /// Where the database is.
    pub(crate) fn location(&self) -> &Location {
        &self.location
    }

    /// The anchor of this host's files for the database ([`Location::anchor`]): the
    /// SQLite file, or `<cache>/postgres`.
    pub(crate) fn path(&self) -> &Path {
        &self.anchor
    }

    /// The directory of derived indexes for this database: `<anchor>.index/`
    /// (`index/cairn.db` → `index/cairn.db.index/`).
    pub(crate) fn index_dir(&self) -> PathBuf {
        index_dir_for(&self.anchor)
    }

    /// The schema version of the open database.
    pub(crate) fn user_version(&self) -> Result<u32> {
        self.read(|c| match c.dialect() {
            crate::store::db::Dialect::Sqlite => {
                c.query_row("PRAGMA user_version", [], |r| r.get(0))
            }
            crate::store::db::Dialect::Postgres => c.query_row(
                "SELECT coalesce(max(version), 0) FROM cairn_schema_version",
                [],
                |r| r.get(0),
            ),
        })
    }

    /// On PostgreSQL: a second connection that calls `on_change` whenever a write
    /// transaction commits, on this host or any other (and whenever the listener
    /// (re)connects, since writes made meanwhile were not announced). `None` on SQLite,
    /// where there are no other hosts and the watermark checks before each search see
    /// other processes' writes. A hint to catch up early, never needed for correctness.
    pub(crate) fn listen_for_changes(
        &self,
        on_change: impl Fn() + Send + Sync + 'static,
    ) -> Result<Option<PgListener>> {
        match &self.location {
            Location::File(_) => Ok(None),
            Location::Postgres { url, .. } => {
                PgListener::start(url, CHANGES_CHANNEL, move |_| on_change()).map(Some)
            }
        }
    }

    /// Run `f` on a connection outside any explicit transaction (reads; on SQLite a
    /// read-only connection, so a write there fails). On PostgreSQL a read whose
    /// connection is lost under it runs again on another ([`read_pg`]), so `f` may run
    /// more than once.
    pub fn read<T>(&self, f: impl Fn(&Conn<'_>) -> Result<T>) -> Result<T> {
        let out = match &self.backend {
            Backend::Sqlite { readers, .. } => readers.get().and_then(|r| f(&Conn::sqlite(&r))),
            Backend::Postgres { readers, .. } => read_pg(readers, |r| f(&Conn::postgres(r))),
        };
        out.map_err(|e| self.name_full(e))
    }

    /// Run `f` on one consistent snapshot of the database: a read-only transaction
    /// (SQLite `BEGIN DEFERRED`; PostgreSQL `REPEATABLE READ READ ONLY`), ended when `f`
    /// returns. On PostgreSQL it runs again on another connection if its own is lost
    /// under it, as [`Store::read`] does.
    pub fn snapshot<T>(&self, f: impl Fn(&Conn<'_>) -> Result<T>) -> Result<T> {
        let out = match &self.backend {
            Backend::Sqlite { readers, .. } => (|| -> Result<T> {
                let mut conn = readers.get()?;
                let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
                let out = f(&Conn::sqlite(&tx))?;
                tx.commit()?;
                Ok(out)
            })(),
            Backend::Postgres { readers, .. } => read_pg(readers, |conn| {
                let tx =
                    PgTransaction::begin(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
                f(&Conn::postgres(conn)).and_then(|out| tx.commit().map(|()| out))
            }),
        };
        out.map_err(|e| self.name_full(e))
    }

    /// Run `f` inside a write transaction, committed when `f` returns `Ok` and rolled
    /// back otherwise, so no call ever leaves partial state. Writers are serialized
    /// (SQLite `BEGIN IMMEDIATE`; PostgreSQL: an advisory lock taken first). A full disk
    /// rolls back too and is reported as [`Error::StorageFull`] naming the database.
    /// On PostgreSQL the transaction also notifies [`CHANGES_CHANNEL`], delivered to
    /// every [`Store::listen_for_changes`] listener at commit (never for a rollback).
    pub fn write<T>(&self, f: impl FnOnce(&Conn<'_>) -> Result<T>) -> Result<T> {
        let out = match &self.backend {
            Backend::Sqlite { writer, .. } => {
                let mut conn = lock(writer);
                (|| -> Result<T> {
                    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    let out = f(&Conn::sqlite(&tx))?;
                    tx.commit()?;
                    Ok(out)
                })()
            }
            Backend::Postgres {
                connector, writer, ..
            } => (|| -> Result<T> {
                let mut conn = lock(writer);
                begin_write(&mut conn, connector)?;
                let tx = PgTransaction::began(&conn);
                // One round trip: the writers' lock, and the notification every host's
                // daemon listens for, which PostgreSQL delivers when (and only if) this
                // transaction commits.
                Conn::postgres(&conn)
                    .execute(
                        "SELECT pg_advisory_xact_lock(?1), pg_notify(?2, ?3)",
                        params![PG_WRITE_LOCK, CHANGES_CHANNEL, CHANGE_PAYLOAD],
                    )
                    .and_then(|_| f(&Conn::postgres(&conn)))
                    .and_then(|out| tx.commit().map(|()| out))
            })(),
        };
        out.map_err(|e| self.name_full(e))
    }

    /// Name the database in a [`Error::StorageFull`] raised by it.
    fn name_full(&self, e: Error) -> Error {
        match e {
            Error::StorageFull { what } if what == "the database" => Error::StorageFull {
                what: format!("the database {}", self.location),
            },
            other => other,
        }
    }
}

/// Connections for reads: one per read running at once, kept for the next reads (up to
/// [`READERS_KEPT`]); one that cannot serve another read is closed instead.
struct Pool<C: Pooled> {
    state: Mutex<PoolState<C>>,
    /// Signalled when a connection goes back to the pool or is closed.
    returned: Condvar,
    connect: Box<dyn Fn() -> Result<C> + Send + Sync>,
    /// At most this many connections at once, idle or in use; a read past it waits
    /// for one (up to [`BUSY_TIMEOUT_MS`]).
    max: usize,
}

struct PoolState<C> {
    idle: Vec<C>,
    /// Connections that exist, idle or in use.
    open: usize,
}

/// Idle read connections a store keeps (each holds its own page cache, 2 MiB at most, on
/// SQLite; a server process each on PostgreSQL).
const READERS_KEPT: usize = 8;

/// Read connections a PostgreSQL store has at most at once: each is a server process,
/// and the server refuses connections past its `max_connections` (100 by default) for
/// every host together. SQLite's read connections are not capped.
pub const PG_READERS_MAX: usize = 16;

/// A connection a [`Pool`] can hand out again.
trait Pooled {
    /// Whether it can serve the next read: no transaction left open on it (a panic
    /// inside `snapshot` would pin an old snapshot), and on PostgreSQL the server has
    /// not closed it.
    fn reusable(&self) -> bool;
}

impl Pooled for Connection {
    fn reusable(&self) -> bool {
        self.is_autocommit()
    }
}

impl Pooled for PgConn {
    fn reusable(&self) -> bool {
        self.usable()
    }
}

impl<C: Pooled> Pool<C> {
    fn new(max: usize, connect: impl Fn() -> Result<C> + Send + Sync + 'static) -> Pool<C> {
        Pool {
            state: Mutex::new(PoolState {
                idle: Vec::new(),
                open: 0,
            }),
            returned: Condvar::new(),
            connect: Box::new(connect),
            max,
        }
    }

    /// An idle connection that can still serve, or a new one while fewer than `max`
    /// exist; otherwise the first one given back.
    fn get(&self) -> Result<Reader<'_, C>> {
        // Set only when a read has to wait (no clock read on the common path).
        let mut deadline = None;
        let mut state = lock(&self.state);
        loop {
            while let Some(conn) = state.idle.pop() {
                if conn.reusable() {
                    return Ok(self.reader(conn));
                }
                state.open -= 1;
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                return match (self.connect)() {
                    Ok(conn) => Ok(self.reader(conn)),
                    Err(e) => {
                        self.closed();
                        Err(e)
                    }
                };
            }
            let deadline = *deadline
                .get_or_insert_with(|| Instant::now() + Duration::from_millis(BUSY_TIMEOUT_MS));
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Database(format!(
                    "all {} read connections stayed in use for {BUSY_TIMEOUT_MS} ms",
                    self.max
                )));
            }
            state = self
                .returned
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn reader(&self, conn: C) -> Reader<'_, C> {
        Reader {
            pool: self,
            conn: Some(conn),
        }
    }

    /// One connection fewer exists.
    fn closed(&self) {
        lock(&self.state).open -= 1;
        self.returned.notify_one();
    }
}

/// A read connection, back to the pool when dropped.
struct Reader<'a, C: Pooled> {
    pool: &'a Pool<C>,
    conn: Option<C>,
}

impl<C: Pooled> std::ops::Deref for Reader<'_, C> {
    type Target = C;
    fn deref(&self) -> &C {
        self.conn
            .as_ref()
            .expect("a reader holds its connection until dropped")
    }
}

impl<C: Pooled> std::ops::DerefMut for Reader<'_, C> {
    fn deref_mut(&mut self) -> &mut C {
        self.conn
            .as_mut()
            .expect("a reader holds its connection until dropped")
    }
}

impl<C: Pooled> Drop for Reader<'_, C> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        let mut state = lock(&self.pool.state);
        if conn.reusable() && state.idle.len() < READERS_KEPT {
            state.idle.push(conn);
        } else {
            state.open -= 1;
            drop(state);
            drop(conn);
        }
        self.pool.returned.notify_one();
    }
}

/// `BEGIN` a write on the writer's connection. A connection the server closed (a
/// restart, a terminated backend), whether noticed before or by the `BEGIN` failing, is
/// replaced by a new one and the `BEGIN` sent again: nothing of the write has been sent
/// yet, so it cannot run twice. Once `BEGIN` succeeds, a lost connection fails the write
/// (it is never run again: it may have committed, and its closure may have done more
/// than write).
fn begin_write(conn: &mut PgConn, connector: &PgConnector) -> Result<()> {
    if conn.usable() {
        match Conn::postgres(conn).execute_batch("BEGIN") {
            Err(e) if conn.usable() => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "PostgreSQL writing connection lost; connecting again")
            }
            Ok(()) => return Ok(()),
        }
    }
    *conn = connector.connect()?;
    Conn::postgres(conn).execute_batch("BEGIN")
}

/// Times a PostgreSQL read runs at most when its connection is lost under it: the
/// connections kept idle may have been closed by the same event (a server restart)
/// without this process having noticed yet.
const PG_READ_ATTEMPTS: usize = 3;

/// Run the read `f` on a reader from `readers`. If it fails and its connection turns
/// out lost (the server closed it, or a statement failed for the connection's sake:
/// [`PgConn::usable`]), it runs again on another connection, up to
/// [`PG_READ_ATTEMPTS`] times: a read changes nothing, so running it twice is safe. A
/// failure on a connection still usable (an SQL error, a statement timeout) and a
/// failure to connect are returned at once.
fn read_pg<T>(readers: &Pool<PgConn>, f: impl Fn(&PgConn) -> Result<T>) -> Result<T> {
    let mut attempt = 1;
    loop {
        let reader = readers.get()?;
        match f(&reader) {
            Err(e) if !reader.usable() && attempt < PG_READ_ATTEMPTS => {
                tracing::warn!(error = %e, attempt, "PostgreSQL read connection lost; reading again on another");
                attempt += 1;
            }
            out => return out,
        }
    }
}

/// A PostgreSQL connection for reads: its transactions are read-only, as SQLite's
/// read connections are, so a write attempted through [`Store::read`] fails on both.
fn open_pg_reader(connector: &PgConnector) -> Result<PgConn> {
    let conn = connector.connect()?;
    Conn::postgres(&conn).execute_batch("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")?;
    Ok(conn)
}

/// A read-only connection to the (already migrated) SQLite database at `path`.
fn open_reader(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    tune(&conn)?;
    Ok(conn)
}

/// What every SQLite connection sets, writing or reading.
fn tune(conn: &Connection) -> Result<()> {
    conn.busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS))?;
    conn.pragma_update(None, "foreign_keys", true)?;
    // Reads through a memory map: no read() syscall per page on hot lookups.
    conn.pragma_update(None, "mmap_size", 256 * 1024 * 1024)?;
    conn.set_prepared_statement_cache_capacity(128);
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave a transaction open: rusqlite's
    // Transaction and [`PgTransaction`] roll back on drop. The connection stays usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// An open PostgreSQL transaction, rolled back on drop unless committed.
struct PgTransaction<'a> {
    conn: &'a PgConn,
    open: bool,
}

impl<'a> PgTransaction<'a> {
    fn begin(conn: &'a PgConn, begin: &str) -> Result<PgTransaction<'a>> {
        Conn::postgres(conn).execute_batch(begin)?;
        Ok(PgTransaction::began(conn))
    }

    /// The guard of a transaction `conn` has already begun.
    fn began(conn: &'a PgConn) -> PgTransaction<'a> {
        PgTransaction { conn, open: true }
    }

    fn commit(mut self) -> Result<()> {
        self.open = false;
        Conn::postgres(self.conn).execute_batch("COMMIT")
    }
}

impl Drop for PgTransaction<'_> {
    fn drop(&mut self) {
        if self.open && Conn::postgres(self.conn).execute_batch("ROLLBACK").is_err() {
            self.conn.set_stuck();
        }
    }
}

/// Create `dir` (and its missing parents) owner-only (0700); one that exists keeps its
/// mode.
fn private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(dir, e))
}

/// Create the SQLite file owner-only (0600) when it does not exist: SQLite would create it
/// 0644 (less the umask), and gives its `-wal` and `-shm` files the database's mode, so
/// every local user could read every project's issues and learnings. A file that exists
/// keeps its mode (docs/security.md, "Files on disk").
fn create_private_file(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::io(path, e)),
    }
}

fn open_sqlite(path: &Path) -> Result<Connection> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        private_dir(parent)?;
    }
    create_private_file(path)?;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    tune(&conn)?;
    enable_wal(&conn)?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    migrate(&conn, latest_version())?;
    Ok(conn)
}

/// Create (or bring) the database at `location` up to schema `version` and no further,
/// then run `sql` on it: tests build a database as an older cairn left it, then open it
/// with this one.
#[cfg(feature = "testing")]
pub fn migrate_upto(location: &Location, version: u32, sql: &str) -> Result<()> {
    match location {
        Location::File(path) => {
            let conn = Connection::open(path)?;
            migrate(&conn, version)?;
            conn.execute_batch(sql)?;
        }
        Location::Postgres { url, .. } => {
            let pg = PgConnector::new(url)?.connect()?;
            migrate_pg(&pg, version)?;
            Conn::postgres(&pg).execute_batch(sql)?;
        }
    }
    Ok(())
}

/// Apply every PostgreSQL migration above the recorded version, under a session
/// advisory lock (so hosts starting at once apply each exactly once), each in its own
/// transaction with its version row.
fn migrate_pg(pg: &PgConn, upto: u32) -> Result<()> {
    let c = Conn::postgres(pg);
    c.execute("SELECT pg_advisory_lock(?1)", [PG_MIGRATE_LOCK])?;
    let run = || -> Result<()> {
        c.execute_batch(
            "CREATE TABLE IF NOT EXISTS cairn_schema_version (
                 version BIGINT PRIMARY KEY,
                 name TEXT NOT NULL,
                 applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
        )?;
        let current: u32 = c.query_row(
            "SELECT coalesce(max(version), 0) FROM cairn_schema_version",
            [],
            |r| r.get(0),
        )?;
        if current > latest_version() {
            return Err(newer_schema(current));
        }
        for (version, name, sql) in PG_MIGRATIONS
            .iter()
            .filter(|m| m.0 > current && m.0 <= upto)
        {
            let tx = PgTransaction::begin(pg, "BEGIN")?;
            c.execute_batch(sql)
                .map_err(|e| Error::Internal(format!("migration {name} failed: {e}")))?;
            c.execute(
                "INSERT INTO cairn_schema_version(version, name) VALUES (?1, ?2)",
                params![version, name],
            )?;
            tx.commit()?;
        }
        Ok(())
    };
    let out = run();
    let unlocked = c.execute("SELECT pg_advisory_unlock(?1)", [PG_MIGRATE_LOCK]);
    out.and(unlocked.map(drop))
}

fn newer_schema(current: u32) -> Error {
    Error::FailedPrecondition(format!(
        "database schema version {current} is newer than this cairn ({}); upgrade cairn",
        latest_version()
    ))
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
fn migrate(conn: &Connection, upto: u32) -> Result<()> {
    let current: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if current > latest_version() {
        return Err(newer_schema(current));
    }
    for (version, name, sql) in MIGRATIONS {
        if *version <= current || *version > upto {
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
            .read(|c| c.query_row("PRAGMA journal_mode", [], |r| r.get(0)))
            .unwrap();
        assert_eq!(mode, "wal");
        let fk: i64 = store
            .read(|c| c.query_row("PRAGMA foreign_keys", [], |r| r.get(0)))
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
            .read(|c| c.query_row("SELECT count(*) FROM agent_profiles", [], |r| r.get(0)))
            .unwrap();
        assert_eq!(n, 0);
    }

    /// Reads have connections of their own: one runs while a write transaction is
    /// open (it would wait for the writer's connection otherwise), sees only what was
    /// committed, and cannot write.
    #[test]
    fn reads_run_beside_an_open_write_and_cannot_write() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("c.db")).unwrap();
        let count = || -> Result<i64> {
            store.read(|c| c.query_row("SELECT count(*) FROM agent_profiles", [], |r| r.get(0)))
        };
        store
            .write(|tx| {
                tx.execute(
                    "INSERT INTO agent_profiles(profile_type, updated_at) VALUES ('x', 'now')",
                    [],
                )?;
                assert_eq!(count()?, 0, "a read saw an uncommitted write");
                Ok(())
            })
            .unwrap();
        assert_eq!(count().unwrap(), 1);
        let refused = store.read(|c| {
            c.execute(
                "INSERT INTO agent_profiles(profile_type, updated_at) VALUES ('y', 'now')",
                [],
            )
        });
        assert!(refused.is_err(), "a read connection wrote");
        assert_eq!(count().unwrap(), 1);
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
