//! The store's connections to PostgreSQL, on a real throwaway cluster ([`PgCluster`])
//! whatever `CAIRN_TEST_STORE` says: reads have connections of their own (they neither
//! wait for the writer's connection nor can write), and a connection the server closed
//! is replaced instead of failing every later call.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
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

fn profiles(c: &cairn::store::db::Conn<'_>) -> cairn::Result<i64> {
    c.query_row("SELECT count(*) FROM agent_profiles", [], |r| r.get(0))
}

fn add_profile(c: &cairn::store::db::Conn<'_>, name: &str) -> cairn::Result<usize> {
    c.execute(
        "INSERT INTO agent_profiles(profile_type, updated_at) VALUES (?1, 'now')",
        [name],
    )
}

/// The server processes serving `db`, other than psql's: its own, and those of earlier
/// psql runs whose processes have not ended yet (on a busy machine they linger).
fn backends(db: &str) -> i64 {
    PgCluster::shared()
        .ok(
            db,
            &format!(
                "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = '{db}' AND application_name <> 'psql'"
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
/// administrator's `pg_terminate_backend` does) while none is in use. The store
/// notices and connects anew: no read and no write fails, and nothing written before or
/// after is lost.
#[test]
fn postgres_connections_the_server_closed_are_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let (store, db) = open(dir.path(), "reconnect");
    store.write(|tx| add_profile(tx, "before")).unwrap();
    assert_eq!(store.read(profiles).unwrap(), 1);
    assert!(backends(&db) >= 2, "a writer and a reader are connected");

    let terminated = PgCluster::shared().ok(
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
    store.write(|tx| add_profile(tx, "after")).unwrap();
    for i in 0..5 {
        store
            .write(|tx| add_profile(tx, &format!("later-{i}")))
            .unwrap();
        store.read(profiles).unwrap();
        store.snapshot(profiles).unwrap();
    }
    assert_eq!(store.read(profiles).unwrap(), 7);
}

/// A TCP relay in front of the cluster that can cut every connection through it as a
/// network failure or a restarted proxy does: the server's side is closed at once,
/// while the client hears nothing until it next sends, and then its connection drops.
/// A connection cut this way still looks usable to its owner until it is used.
struct Relay {
    port: u16,
    /// Bumped by every cut: a connection relayed since an earlier value is cut.
    generation: Arc<AtomicUsize>,
    servers: Arc<std::sync::Mutex<Vec<TcpStream>>>,
}

impl Relay {
    fn start(server_port: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let generation = Arc::new(AtomicUsize::new(0));
        let servers = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (g, all) = (generation.clone(), servers.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let server = TcpStream::connect(("127.0.0.1", server_port)).unwrap();
                all.lock().unwrap().push(server.try_clone().unwrap());
                let born = g.load(Ordering::SeqCst);
                let (mut from_client, mut to_server) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let g = g.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16 * 1024];
                    loop {
                        let n = match from_client.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if g.load(Ordering::SeqCst) != born
                            || to_server.write_all(&buf[..n]).is_err()
                        {
                            break;
                        }
                    }
                    // The client learns of the cut only now, when it sends.
                    let _ = from_client.shutdown(Shutdown::Both);
                    let _ = to_server.shutdown(Shutdown::Both);
                });
                let (mut from_server, mut to_client) = (server, client);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16 * 1024];
                    // On the server's side closing, stop relaying but tell the client nothing.
                    while let Ok(n @ 1..) = from_server.read(&mut buf) {
                        if to_client.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Relay {
            port,
            generation,
            servers,
        }
    }

    /// Cut every connection relayed so far.
    fn cut(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        for s in self.servers.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Every connection of a store is cut on the way (a failover, a restarted proxy) while
/// idle, so each still looks usable. The writer's next `BEGIN` finds it lost and
/// begins again on a new connection; the next read and snapshot find theirs lost and
/// run again on another. No call fails, and nothing is lost. A write cut in its middle
/// fails, is not run again, and leaves nothing behind.
#[test]
fn postgres_connections_cut_while_idle_are_replaced_at_their_next_use() {
    let dir = tempfile::tempdir().unwrap();
    let url = PgCluster::shared().create_database("cut_idle");
    let (base, rest) = url.rsplit_once(':').unwrap();
    let (port, db) = rest.split_once('/').unwrap();
    let relay = Relay::start(port.parse().unwrap());
    let store = Store::open_at(&Location::Postgres {
        url: format!("{base}:{}/{db}", relay.port),
        cache: dir.path().join("cache"),
    })
    .unwrap();
    for round in 0..3 {
        store
            .write(|tx| add_profile(tx, &format!("before cut {round}")))
            .unwrap();
        assert_eq!(store.read(profiles).unwrap(), 2 * round + 1);
        assert_eq!(store.snapshot(profiles).unwrap(), 2 * round + 1);
        relay.cut();
        store
            .write(|tx| add_profile(tx, &format!("after cut {round}")))
            .unwrap_or_else(|e| panic!("round {round}: the write after a cut failed: {e}"));
        assert_eq!(
            store.read(profiles).unwrap(),
            2 * round + 2,
            "round {round}"
        );
        relay.cut();
        assert_eq!(
            store.snapshot(profiles).unwrap(),
            2 * round + 2,
            "round {round}"
        );
    }
    // Cut in the middle of a write: it fails, runs once, and leaves nothing behind; the
    // next write works.
    let runs = AtomicUsize::new(0);
    let cut_mid = store.write(|tx| {
        runs.fetch_add(1, Ordering::SeqCst);
        add_profile(tx, "mid 1")?;
        relay.cut();
        add_profile(tx, "mid 2")
    });
    assert!(cut_mid.is_err(), "{cut_mid:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(store.read(profiles).unwrap(), 6);
    store
        .write(|tx| add_profile(tx, "after the mid cut"))
        .unwrap();
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
        let read = |c: &cairn::store::db::Conn<'_>| -> cairn::Result<i64> {
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
                let ended = PgCluster::shared().ok(
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

/// Reads beyond the cap of read connections wait for one instead of opening more: the
/// cap plus 4 reads at once, each blocked at the server on a lock the writer holds until
/// the cap of them are blocked there, all succeed, and the server never sees more than
/// the cap (plus the writer).
#[test]
fn postgres_read_connections_are_capped_and_reads_past_the_cap_wait() {
    let dir = tempfile::tempdir().unwrap();
    let (store, db) = open(dir.path(), "capped");
    let cap = cairn::store::PG_READERS_MAX;
    let reads = cap + 4;
    // Every read blocks on an advisory lock the writer holds until `cap` reads wait on
    // it at the server: they all overlap by construction, not by a timing window.
    let blocked_at_server = || -> i64 {
        PgCluster::shared()
            .ok(
                &db,
                &format!(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = '{db}' \
                     AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
                ),
            )
            .parse()
            .unwrap()
    };
    let done = std::sync::atomic::AtomicBool::new(false);
    let (release, released) = std::sync::mpsc::channel::<()>();
    let (locked, is_locked) = std::sync::mpsc::channel::<()>();
    let (most, answers, (seen_blocked, at_block)) = std::thread::scope(|s| {
        let store = &store;
        let writer = s.spawn(move || {
            store.write(|c| {
                c.query_row(
                    "SELECT 1 FROM (SELECT pg_advisory_xact_lock(42)) AS l",
                    [],
                    |r| r.get::<usize, i64>(0),
                )?;
                locked.send(()).unwrap();
                released.recv().unwrap();
                Ok(())
            })
        });
        is_locked.recv().unwrap();
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
                    store.read(|c| {
                        c.query_row(
                            "SELECT 1 FROM (SELECT pg_advisory_xact_lock_shared(42)) AS l",
                            [],
                            |r| r.get(0),
                        )
                    })
                })
            })
            .collect();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut seen_blocked = blocked_at_server();
        while seen_blocked < cap as i64 {
            assert!(
                std::time::Instant::now() < deadline,
                "{seen_blocked} reads blocked"
            );
            seen_blocked = blocked_at_server();
        }
        // Every read connection is busy now: the cap of them and the writer.
        let at_block = backends(&db);
        release.send(()).unwrap();
        writer.join().unwrap().unwrap();
        let answers: Vec<cairn::Result<i64>> =
            readers.into_iter().map(|r| r.join().unwrap()).collect();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (
            watcher.join().unwrap().max(at_block),
            answers,
            (seen_blocked, at_block),
        )
    });
    for a in &answers {
        assert_eq!(a.as_ref().ok(), Some(&1), "{a:?}");
    }
    assert_eq!(
        seen_blocked, cap as i64,
        "reads blocked at the server: the cap"
    );
    assert_eq!(
        at_block,
        cap as i64 + 1,
        "backends while the reads were blocked: {cap} readers and the writer"
    );
    assert_eq!(
        most,
        cap as i64 + 1,
        "backends seen at most, all along: {cap} readers and the writer"
    );
}
