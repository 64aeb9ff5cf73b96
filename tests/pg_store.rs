//! The store's connections to PostgreSQL, on a real throwaway cluster ([`PgCluster`])
//! whatever `CAIRN_TEST_STORE` says: reads have connections of their own (they neither
//! wait for the writer's connection nor can write), and a connection the server closed
//! is replaced instead of failing every later call.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cairn::store::{Location, Store};

use crate::common::pg::PgCluster;

/// A generous bound that only catches a hang.
const DEADLINE: Duration = Duration::from_secs(60);

fn open(dir: &std::path::Path, name: &str) -> (Store, String) {
    let url = PgCluster::shared().create_database(name);
    let store = Store::open_at(&Location::Postgres {
        url: url.clone(),
        cache: dir.join("cache"),
    })
    .unwrap();
    (store, PgCluster::database_of(&url).to_string())
}

fn profiles(c: &cairn::db::Conn<'_>) -> cairn::Result<i64> {
    c.query_row("SELECT count(*) FROM agent_profiles", [], |r| r.get(0))
}

fn add_profile(c: &cairn::db::Conn<'_>, name: &str) -> cairn::Result<usize> {
    c.execute(
        "INSERT INTO agent_profiles(profile_type, updated_at) VALUES (?1, 'now')",
        [name],
    )
}

/// One statement through psql, its unaligned, tuples-only output.
fn psql(db: &str, statement: &str) -> String {
    let out = PgCluster::shared()
        .psql(db)
        .args(["-A", "-t", "-c", statement])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{statement}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The server processes serving `db`, other than psql's own.
fn backends(db: &str) -> i64 {
    psql(
        db,
        &format!(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = '{db}' AND pid <> pg_backend_pid()"
        ),
    )
    .parse()
    .unwrap()
}

/// A read runs while a write transaction is open (with one connection for both it
/// would wait for the write, which waits for it), sees only what was committed, and
/// cannot write; a snapshot cannot either.
#[test]
fn postgres_reads_run_beside_an_open_write_and_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path(), "reads_beside");
    let store = Arc::new(store);
    store
        .write(|tx| {
            add_profile(tx, "x")?;
            let (sent, seen) = mpsc::channel();
            let reader = store.clone();
            // A thread of its own: if the read waited for the writer's connection, the
            // test reports it instead of hanging (the write rolls back as it unwinds).
            std::thread::spawn(move || sent.send(reader.read(profiles).unwrap()));
            let during = seen
                .recv_timeout(DEADLINE)
                .expect("a read waited for the open write");
            assert_eq!(during, 0, "a read saw an uncommitted write");
            Ok(())
        })
        .unwrap();
    assert_eq!(store.read(profiles).unwrap(), 1);
    assert!(
        store.read(|c| add_profile(c, "y")).is_err(),
        "a read connection wrote"
    );
    assert!(
        store.snapshot(|c| add_profile(c, "z")).is_err(),
        "a snapshot wrote"
    );
    assert_eq!(store.read(profiles).unwrap(), 1);
    assert_eq!(store.snapshot(profiles).unwrap(), 1);
}

/// Every connection of the store is terminated by the server (as a restart or an
/// administrator's `pg_terminate_backend` does). The store notices and connects anew:
/// no read fails, at most the one write sent on the dead connection fails, every call
/// after it works, and nothing written before or after is lost.
#[test]
fn postgres_connections_the_server_closed_are_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let (store, db) = open(dir.path(), "reconnect");
    store.write(|tx| add_profile(tx, "before")).unwrap();
    assert_eq!(store.read(profiles).unwrap(), 1);
    assert!(backends(&db) >= 2, "a writer and a reader are connected");

    let terminated = psql(
        &db,
        &format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = '{db}' AND pid <> pg_backend_pid()"
        ),
    );
    assert!(terminated.parse::<i64>().unwrap() >= 2, "{terminated}");
    let start = Instant::now();
    while backends(&db) > 0 {
        assert!(start.elapsed() < DEADLINE, "the backends did not end");
        std::thread::sleep(Duration::from_millis(20));
    }

    assert_eq!(store.read(profiles).unwrap(), 1);
    let mut failed = Vec::new();
    let mut wrote = false;
    for _ in 0..2 {
        match store.write(|tx| add_profile(tx, "after")) {
            Ok(_) => {
                wrote = true;
                break;
            }
            Err(e) => failed.push(format!("write: {e}")),
        }
    }
    assert!(wrote, "writes did not recover: {failed:?}");
    assert!(failed.len() <= 1, "{failed:?}");
    for i in 0..5 {
        store
            .write(|tx| add_profile(tx, &format!("later-{i}")))
            .unwrap();
        store.read(profiles).unwrap();
        store.snapshot(profiles).unwrap();
    }
    assert_eq!(store.read(profiles).unwrap(), 7);
}

/// A read whose connection the server ends while the read runs (a restart, a failover,
/// `pg_terminate_backend`) runs again on another connection and returns its answer:
/// reads change nothing, so the caller never sees the lost connection. The same for a
/// snapshot.
#[test]
fn postgres_a_read_whose_connection_dies_under_it_runs_again_on_another() {
    let dir = tempfile::tempdir().unwrap();
    let (store, db) = open(dir.path(), "read_again");
    for snapshot in [false, true] {
        let attempts = AtomicUsize::new(0);
        // The first attempt sleeps until its backend is terminated; a second one answers.
        let read = |c: &cairn::db::Conn<'_>| -> cairn::Result<i64> {
            match attempts.fetch_add(1, Ordering::SeqCst) {
                0 => c.query_row("SELECT 1 FROM pg_sleep(120)", [], |r| r.get(0)),
                _ => c.query_row("SELECT 2", [], |r| r.get(0)),
            }
        };
        let answer = std::thread::scope(|s| {
            let reading = s.spawn(|| match snapshot {
                false => store.read(read),
                true => store.snapshot(read),
            });
            let start = Instant::now();
            loop {
                let ended = psql(
                    &db,
                    &format!(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                         WHERE datname = '{db}' AND state = 'active' \
                         AND query LIKE '%pg_sleep(120)%' AND pid <> pg_backend_pid()"
                    ),
                );
                if ended == "1" {
                    break;
                }
                assert!(start.elapsed() < DEADLINE, "the read never started");
                std::thread::sleep(Duration::from_millis(20));
            }
            reading.join().unwrap()
        });
        assert_eq!(answer.unwrap(), 2, "snapshot: {snapshot}");
        assert_eq!(attempts.load(Ordering::SeqCst), 2, "snapshot: {snapshot}");
    }
    assert_eq!(store.read(profiles).unwrap(), 0);
}

/// A read that fails on a connection still usable runs once, and its connection serves
/// the next read: an SQL error, and a statement cancelled by its timeout (SQLSTATE
/// 57014, after which the session lives on).
#[test]
fn postgres_a_read_failing_on_a_live_connection_runs_once_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(dir.path(), "read_once");
    let backend = || -> i64 {
        store
            .read(|c| c.query_row("SELECT pg_backend_pid()", [], |r| r.get(0)))
            .unwrap()
    };
    let before = backend();
    let attempts = AtomicUsize::new(0);
    let missing = store.read(|c| {
        attempts.fetch_add(1, Ordering::SeqCst);
        c.query_row("SELECT count(*) FROM no_such_table", [], |r| {
            r.get::<usize, i64>(0)
        })
    });
    assert!(missing.is_err());
    assert_eq!(attempts.swap(0, Ordering::SeqCst), 1);
    let cancelled = store.snapshot(|c| {
        attempts.fetch_add(1, Ordering::SeqCst);
        c.execute_batch("SET LOCAL statement_timeout = '100ms'")?;
        c.query_row("SELECT 1 FROM pg_sleep(30)", [], |r| r.get::<usize, i64>(0))
    });
    let message = cancelled.unwrap_err().to_string();
    assert!(message.contains("statement timeout"), "{message}");
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    assert_eq!(backend(), before, "the connection was replaced");
}

/// Reads beyond the cap of read connections wait for one instead of opening more: 20
/// reads at once, each holding its connection for half a second, all succeed, and the
/// server never sees more than the cap (plus the writer).
#[test]
fn postgres_read_connections_are_capped_and_reads_past_the_cap_wait() {
    let dir = tempfile::tempdir().unwrap();
    let (store, db) = open(dir.path(), "capped");
    let cap = cairn::store::PG_READERS_MAX;
    let reads = cap + 4;
    let done = std::sync::atomic::AtomicBool::new(false);
    let (most, answers) = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut most = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                most = most.max(backends(&db));
            }
            most
        });
        let readers: Vec<_> = (0..reads)
            .map(|_| {
                s.spawn(|| {
                    store.read(|c| c.query_row("SELECT 1 FROM pg_sleep(0.5)", [], |r| r.get(0)))
                })
            })
            .collect();
        let answers: Vec<cairn::Result<i64>> =
            readers.into_iter().map(|r| r.join().unwrap()).collect();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (watcher.join().unwrap(), answers)
    });
    for a in &answers {
        assert_eq!(a.as_ref().ok(), Some(&1), "{a:?}");
    }
    assert_eq!(
        most,
        cap as i64 + 1,
        "backends seen at most: {cap} readers and the writer"
    );
}
