//! A throwaway PostgreSQL cluster for the tests: `initdb` and `pg_ctl` under a temporary
//! directory, listening on 127.0.0.1 only (a free port) and on a Unix socket in that
//! directory, trust authentication, superuser `cairn`.
//!
//! - Binaries: the highest version under `/usr/lib/postgresql/*/bin` (Debian's layout),
//!   else `initdb` on `PATH`. Missing PostgreSQL is a panic that says how to install it,
//!   never a skipped test (`scripts/setup.sh` installs it in CI).
//! - Unprivileged: PostgreSQL refuses to run as root. Run as root (CI), the cluster
//!   belongs to the system user `cairn-pg` (created with `useradd --system` when
//!   missing) and every server command runs through `runuser` (or `setpriv`); run as
//!   anyone else, it runs as that user.
//! - One cluster per test process: [`PgCluster::shared`] starts it on first use, and each
//!   test makes its own database with [`PgCluster::create_database`].
//! - Cleanup: a static is never dropped, so the cluster cannot rely on `Drop` alone. Beside
//!   the server, a watchdog shell in its own session polls the test process
//!   (`kill -0 <pid>` every second) and, once it is gone, however it ended (normal exit,
//!   panic, SIGKILL), stops the server (`pg_ctl stop -m immediate`) and removes the
//!   directory. A cluster owned by a test (`PgCluster::start`) is also stopped and
//!   removed by `Drop`, which then ends its watchdog.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system user that owns the clusters when the tests run as root.
const PG_USER: &str = "cairn-pg";
/// The cluster's superuser (trust authentication).
const SUPERUSER: &str = "cairn";
/// Server settings of the tests' clusters: durability off (a throwaway cluster).
pub const TEST_SETTINGS: &str = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off";

/// A running throwaway cluster. See the module documentation.
pub struct PgCluster {
    /// The temporary directory: `data/` (the cluster), `server.log`, the Unix socket.
    dir: PathBuf,
    /// Directory of `initdb`, `pg_ctl`, `postgres`.
    bin: PathBuf,
    port: u16,
    /// The server's options (`pg_ctl start -o`), to start it again after [`PgCluster::stop`].
    options: String,
    /// `Some(user)` when server commands run as another user (the tests run as root).
    run_as: Option<String>,
    watchdog: Option<Child>,
}

impl PgCluster {
    /// The process's cluster, started on first use and stopped when the process ends.
    pub fn shared() -> &'static PgCluster {
        static SHARED: OnceLock<PgCluster> = OnceLock::new();
        SHARED.get_or_init(PgCluster::start)
    }

    /// Create, start and wait for a new cluster tuned for tests ([`TEST_SETTINGS`]: no
    /// fsync); panics with the reason if it cannot.
    pub fn start() -> PgCluster {
        PgCluster::start_with(TEST_SETTINGS)
    }

    /// [`PgCluster::start`] with other server settings (`-c name=value ...`) than
    /// [`TEST_SETTINGS`]: `""` keeps PostgreSQL's durable defaults (the writers benchmark).
    pub fn start_with(settings: &str) -> PgCluster {
        let bin = find_bin_dir();
        let run_as = is_root().then(|| {
            ensure_system_user();
            PG_USER.to_string()
        });
        let tmp = tempfile::Builder::new()
            .prefix("cairn-pg-")
            .tempdir()
            .expect("create the cluster's temporary directory");
        let dir = tmp.keep();
        let mut cluster = PgCluster {
            dir,
            bin,
            port: 0,
            options: String::new(),
            run_as,
            watchdog: None,
        };
        if let Some(user) = &cluster.run_as {
            run(Command::new("chown")
                .arg(format!("{user}:"))
                .arg(&cluster.dir));
            // The user must reach the directory through its parents (a TMPDIR under a
            // private home directory would not do).
            let reachable = as_user(user, Path::new("test"))
                .arg("-w")
                .arg(&cluster.dir)
                .status()
                .is_ok_and(|s| s.success());
            assert!(
                reachable,
                "{user} cannot write {}: set TMPDIR to a directory every user can reach",
                cluster.dir.display()
            );
        }
        // The watchdog first: from here on, whatever happens, the directory goes.
        cluster.watchdog = Some(cluster.spawn_watchdog());
        run(cluster
            .server_command("initdb")
            .args(["--auth=trust", "--username", SUPERUSER])
            .args(["--encoding=UTF8", "--no-locale", "--no-sync"])
            .arg("-D")
            .arg(cluster.data()));
        cluster.port = free_port();
        cluster.options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -c unix_socket_directories='{}' \
             -c max_connections=200 {settings}",
            cluster.port,
            cluster.dir.display()
        );
        cluster.start_again();
        cluster
    }

    /// Start the server (again, after [`PgCluster::stop`]) and wait until it accepts
    /// connections, on the same port.
    pub fn start_again(&self) {
        run(self
            .server_command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.join("server.log"))
            .args(["-w", "-t", "60", "-o", &self.options, "start"]));
    }

    /// Stop the server (`pg_ctl stop -m fast`: every connection is cut) and wait until it
    /// is down.
    pub fn stop(&self) {
        run(self
            .server_command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-w", "-t", "60", "-m", "fast", "stop"]));
    }

    /// `postgres://` URL of database `db`, over TCP on loopback.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{db}", self.port)
    }

    /// Create database `name` (letters, digits and `_`; made unique within the cluster
    /// with a counter, so two tests may pass the same name) and return its URL.
    pub fn create_database(&self, name: &str) -> String {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "database name {name:?}: letters, digits and _ only"
        );
        let db = format!("{name}_{}", COUNTER.fetch_add(1, Ordering::Relaxed));
        run(self
            .psql("postgres")
            .arg("-c")
            .arg(format!("CREATE DATABASE {db}")));
        self.url(&db)
    }

    /// `psql` connected to database `db` over the Unix socket, quiet (no psqlrc, no
    /// NOTICE), stopping at the first error. Add `-c SQL` or `-f FILE`.
    pub fn psql(&self, db: &str) -> Command {
        let mut c = Command::new(self.client_bin("psql"));
        c.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(&self.dir)
            .args(["-p", &self.port.to_string(), "-U", SUPERUSER, "-d", db])
            .env("PGOPTIONS", "-c client_min_messages=warning")
            .stdin(Stdio::null());
        c
    }

    /// One statement through psql in database `db`: its unaligned, tuples-only output
    /// (trimmed), or the server's error message (terse).
    pub fn sql(&self, db: &str, statement: &str) -> Result<String, String> {
        let out = self
            .psql(db)
            .args(["-At", "-v", "VERBOSITY=terse", "-c", statement])
            .output()
            .unwrap();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }

    /// [`PgCluster::sql`] that must succeed.
    pub fn ok(&self, db: &str, statement: &str) -> String {
        self.sql(db, statement)
            .unwrap_or_else(|e| panic!("{statement}: {e}"))
    }

    /// The database name of a URL made by [`PgCluster::url`].
    pub fn database_of(url: &str) -> &str {
        url.rsplit('/').next().expect("a database URL")
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// `psql` of the server's own version when it has one, else the one on `PATH`.
    fn client_bin(&self, name: &str) -> PathBuf {
        let own = self.bin.join(name);
        if own.exists() {
            own
        } else {
            PathBuf::from(name)
        }
    }

    /// A server program (`initdb`, `pg_ctl`) run as the cluster's owner, in its directory.
    fn server_command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        let mut c = match &self.run_as {
            Some(user) => as_user(user, &program),
            None => Command::new(&program),
        };
        c.current_dir(&self.dir).stdin(Stdio::null());
        c
    }

    /// The watchdog: waits for this process to end, then stops the server and removes
    /// the directory. In its own session (`setsid`), so that a signal to the test's
    /// process group does not end it before it has cleaned up.
    fn spawn_watchdog(&self) -> Child {
        let pg_ctl = self.server_command("pg_ctl");
        let pg_ctl: Vec<&std::ffi::OsStr> = std::iter::once(pg_ctl.get_program())
            .chain(pg_ctl.get_args())
            .collect();
        let script = r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done
dir=$2; shift 2
"$@" -D "$dir/data" -m immediate stop >/dev/null 2>&1
rm -rf "$dir""#;
        Command::new("setsid")
            .args(["sh", "-c", script, "cairn-pg-watchdog"])
            .arg(std::process::id().to_string())
            .arg(&self.dir)
            .args(pg_ctl)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the cluster's watchdog (setsid sh)")
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = self
            .server_command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// `program` run as `user`: `runuser -u user --`, else `setpriv`.
fn as_user(user: &str, program: &Path) -> Command {
    if Path::new("/usr/sbin/runuser").exists() || Path::new("/sbin/runuser").exists() {
        let mut c = Command::new("runuser");
        c.args(["-u", user, "--"]).arg(program);
        c
    } else {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={user}"))
            .arg(format!("--regid={user}"))
            .args(["--init-groups", "--"])
            .arg(program);
        c
    }
}

/// Run to completion; panic with the command and its output if it fails.
fn run(c: &mut Command) {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", c.get_program()));
    assert!(
        out.status.success(),
        "{c:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The directory of PostgreSQL's server binaries: the highest version under
/// `/usr/lib/postgresql/*/bin`, else the directory of `initdb` on `PATH`.
fn find_bin_dir() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .find(|d| d.join("initdb").exists() && d.join("pg_ctl").exists())
        .unwrap_or_else(|| {
            panic!(
                "PostgreSQL not found: no initdb under /usr/lib/postgresql/*/bin nor on PATH. \
                 The PostgreSQL tests need a real server (15 or later): run scripts/setup.sh \
                 as root, or `apt-get install postgresql`."
            )
        })
}

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().expect("run id -u");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// Create the system user `cairn-pg` unless it exists (another test process may create
/// it at the same moment: its existence afterwards is what counts).
fn ensure_system_user() {
    let exists = || {
        Command::new("id")
            .arg(PG_USER)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if exists() {
        return;
    }
    let out = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
        ])
        .arg(PG_USER)
        .output();
    assert!(
        exists(),
        "cannot create the system user {PG_USER} for PostgreSQL: {out:?}"
    );
}

/// A TCP port free on 127.0.0.1 right now (bound to port 0, then released).
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local address").port()
}
