//! `cairn daemon`: one warm Cairn per host and database, serving MCP over Streamable
//! HTTP to every session that presents a session token ([`crate::access::tokens`]).
//!
//! - [`http`]: the routes (`POST /mcp`, `GET /health`), the Host/Origin checks and the
//!   per-request token check.
//! - [`handler`]: the rmcp handler that answers each request with the `CairnServer` of
//!   that request's token.
//! - [`rundir`]: the daemon's private directory `<db>.daemon.d/` (0700): its lock and the
//!   Unix socket that forwarding `cairn serve`s talk to; [`peer`]: who is at the other
//!   end of a connection on it.
//! - [`forward`]: a `cairn serve` that forwards its calls to the daemon over that socket.
//! - here: start-up (one daemon per database, through the lock in `<db>.daemon.d/`), the
//!   listeners (TCP for HTTP clients, the Unix socket for forwarders), the discovery file
//!   `<db>.daemon.json` that orchestrators and people read, the sweep of ended sessions,
//!   and shutdown on SIGTERM/SIGINT (stop accepting, finish the calls in flight within
//!   [`Options::drain`], remove the discovery file and the socket).
//! - [`follow_writes`]: on PostgreSQL, a connection `LISTEN`ing for every host's commits and a
//!   thread that catches this host's caches up in the background when woken.
//! - The vault's follower ([`crate::vault::follow_files`]): the recorded roots are watched and
//!   their changes indexed while the daemon runs (`GET /health` lists them, `vault`).

pub(crate) mod follow_writes;
pub(crate) mod forward;
pub(crate) mod handler;
pub(crate) mod http;
pub mod peer;
pub(crate) mod rundir;

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use axum::serve::ListenerExt;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::Cairn;
use crate::access::tokens::ToolScope;
use crate::mcp::server::Scope;

/// How the daemon listens and stops.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// The address to listen on (port 0: one the system picks).
    pub(crate) listen: SocketAddr,
    /// Listen on a non-loopback address (behind TLS or a reverse proxy: docs/deployment.md).
    pub(crate) allow_remote: bool,
    /// Host names accepted besides the loopback names and the listen address.
    pub(crate) allow_hosts: Vec<String>,
    /// The origin browsers see behind a TLS-terminating proxy (`--public-origin`).
    pub(crate) public_origin: Option<String>,
    /// How long a shutdown waits for calls in flight.
    pub(crate) drain: Duration,
    /// Which tool handlers run at once, across every session.
    pub(crate) lanes: Arc<crate::mcp::lanes::Lanes>,
}

/// How often the servers of sessions whose tokens expired or were revoked are dropped.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// What `<db>.daemon.json` holds: where the daemon of that database answers. For people
/// and orchestrators (HTTP clients bring their own token); a forwarding `cairn serve`
/// does not read it, it goes to the socket in `<db>.daemon.d/` ([`rundir`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Discovery {
    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub(crate) url: String,
    /// The Unix socket forwarders use (in the daemon's 0700 directory).
    pub(crate) socket: PathBuf,
    pub(crate) pid: u32,
    pub(crate) started_at: String,
    pub(crate) version: String,
}

/// The discovery file of a database: `<db>.daemon.json`, beside it.
pub(crate) fn discovery_path(db: &Path) -> PathBuf {
    suffixed(db, ".daemon.json")
}

/// Read a database's discovery file, if there is one that parses.
fn read_discovery(db: &Path) -> Option<Discovery> {
    let text = std::fs::read_to_string(discovery_path(db)).ok()?;
    serde_json::from_str(&text).ok()
}

/// The resolved scope a token stores for a server [`Scope`] (`None`: every tool).
pub(crate) fn tool_scope(scope: &Scope) -> Option<ToolScope> {
    match scope {
        Scope::All => None,
        Scope::Only { label, tools } => {
            let mut tools: Vec<String> = tools.iter().cloned().collect();
            tools.sort();
            Some(ToolScope {
                label: label.clone(),
                tools,
            })
        }
    }
}

/// The server [`Scope`] of a token's stored scope.
pub(crate) fn server_scope(scope: Option<ToolScope>) -> Scope {
    match scope {
        None => Scope::All,
        Some(s) => Scope::Only {
            label: s.label,
            tools: s.tools.into_iter().collect(),
        },
    }
}

/// Serve until SIGTERM/SIGINT. Logs go to stderr; stdout stays empty.
pub(crate) async fn serve(cairn: Arc<Cairn>, opts: Options) -> anyhow::Result<()> {
    if !opts.listen.ip().is_loopback() && !opts.allow_remote {
        bail!(
            "refusing to listen on {}: not a loopback address. Session tokens travel in clear \
             over plain HTTP; put the daemon behind TLS or a reverse proxy and pass \
             --allow-remote (docs/deployment.md)",
            opts.listen
        );
    }
    let db = cairn.store().path().to_path_buf();
    warn_if_readable_by_others(&cairn);
    let rundir = rundir::RunDir::create(&db)?;
    let _lock = lock(&db, &rundir)?;
    let (listener, local, socket) = listen(opts.listen, &rundir).await?;
    let started_at = crate::base::now_iso();
    let discovery = Discovery {
        url: format!("http://{local}/mcp"),
        socket: rundir.path().join(rundir::SOCKET),
        pid: std::process::id(),
        started_at: started_at.clone(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    let follower = follow_writes::WriteFollower::start(cairn.clone())
        .context("following changes made on other hosts")?
        .map(Arc::new);
    // Following the vault's roots is best effort: without it the daemon serves as before.
    let vault_follower = match cairn.follow_vault(crate::vault::follow_files::FollowScope::All) {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::warn!(error = %e, "not following the vault's directories");
            None
        }
    };
    let shared = Arc::new(http::Shared::new(
        cairn,
        local,
        opts.allow_hosts.clone(),
        opts.public_origin.clone(),
        started_at,
        follower.clone(),
        opts.lanes.clone(),
    ));
    let stopping = CancellationToken::new();
    let abandon = CancellationToken::new();
    let app = http::router(shared.clone(), stopping.clone(), abandon.clone());
    let warming = {
        let shared = shared.clone();
        tokio::task::spawn_blocking(move || shared.warm_up())
    };
    let sweeping = tokio::spawn(sweep(shared.clone()));

    write_discovery(&db, &discovery)?;
    tracing::info!(
        url = %discovery.url,
        db = %db.display(),
        shared_lanes = opts.lanes.shown_width(),
        lane_nice = opts.lanes.nice(),
        "listening"
    );

    stop_on_signal(stopping.clone(), shared.clone());
    let outcome = serve_until_drained(listener, socket, app, &stopping, opts.drain).await;
    abandon.cancel();
    sweeping.abort();
    remove_discovery(&db, &discovery);
    if let Err(e) = rundir.remove_socket() {
        tracing::warn!(error = %e, "could not remove the socket");
    }
    // A process that exits while ONNX Runtime is still loading the model crashes in its
    // teardown: let the warm-up (a few seconds at most) finish first.
    if !warming.is_finished() {
        tracing::info!("waiting for the warm-up to finish before exiting");
    }
    let _ = warming.await;
    // The batch in hand is finished, then the roots are released.
    drop(vault_follower);
    drop(follower);
    match outcome {
        Ok(Ok(Ok(()))) => tracing::info!("stopped"),
        Ok(Ok(Err(e))) => tracing::warn!(error = %e, "the HTTP server ended with an error"),
        Ok(Err(e)) => tracing::warn!(error = %e, "the HTTP server task failed"),
        Err(_) => tracing::warn!(
            drain_seconds = opts.drain.as_secs(),
            "calls still in flight after the drain time; stopping without them"
        ),
    }
    Ok(())
}

/// The TCP listener (and the address it got) and the Unix socket in `rundir`.
async fn listen(
    addr: SocketAddr,
    rundir: &rundir::RunDir,
) -> anyhow::Result<(
    tokio::net::TcpListener,
    SocketAddr,
    tokio::net::UnixListener,
)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    let local = listener.local_addr()?;
    // Any socket left in the directory is a dead daemon's: this one holds the lock.
    rundir.remove_socket()?;
    let socket =
        tokio::net::UnixListener::bind(rundir.entry(rundir::SOCKET)).with_context(|| {
            format!(
                "listening on {}/{}",
                rundir.path().display(),
                rundir::SOCKET
            )
        })?;
    Ok((listener, local, socket))
}

/// On SIGTERM/SIGINT: stop indexing and cancel `stopping` (the listeners stop accepting).
fn stop_on_signal(stopping: CancellationToken, shared: Arc<http::Shared>) {
    tokio::spawn(async move {
        let s = crate::mcp::server::shutdown_signal().await;
        tracing::info!(
            signal = s,
            "stopping: refusing new connections, finishing calls in flight"
        );
        // A file being embedded (a `vault_update`, a followed root's batch) gives up
        // at its next model run, storing nothing of itself (docs/vault.md, "No
        // document starves the others").
        shared.cairn.vault.stop_indexing();
        stopping.cancel();
    });
}

/// How serving ended: the servers' own end, or (`Err`) the drain time over once
/// `stopping` was cancelled.
type Ended =
    Result<Result<std::io::Result<()>, tokio::task::JoinError>, tokio::time::error::Elapsed>;

/// Serve `app` on both listeners until they end, or until `stopping` is cancelled and
/// the calls in flight finish within `drain`.
async fn serve_until_drained(
    listener: tokio::net::TcpListener,
    socket: tokio::net::UnixListener,
    app: axum::Router,
    stopping: &CancellationToken,
    drain: Duration,
) -> Ended {
    // Clients keep their connection between calls (the official SDKs do): answer each
    // call without waiting for Nagle's algorithm to gather a fuller segment.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY on a connection");
        }
    });
    let tcp = axum::serve(listener, app.clone())
        .with_graceful_shutdown(stopping.clone().cancelled_owned());
    let unix = axum::serve(
        socket,
        app.into_make_service_with_connect_info::<http::SocketPeer>(),
    )
    .with_graceful_shutdown(stopping.clone().cancelled_owned());
    let mut server = tokio::spawn(async move {
        let (tcp, unix) = tokio::join!(tcp, unix);
        tcp.and(unix)
    });
    tokio::select! {
        ended = &mut server => Ok(ended),
        _ = stopping.cancelled() => tokio::time::timeout(drain, &mut server).await,
    }
}

/// A SQLite database an older Cairn created `0644` stays so (Cairn creates new ones
/// `0600`): say so, with the fix, once at start-up.
fn warn_if_readable_by_others(cairn: &Cairn) {
    use std::os::unix::fs::PermissionsExt;
    let crate::store::Location::File(path) = cairn.store().location() else {
        return;
    };
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            db = %path.display(),
            mode = format!("{:o}", meta.permissions().mode() & 0o777),
            "the database is readable by other users of this host: chmod 600 it and its \
             -wal and -shm files, chmod 700 its .index directory (docs/security.md, \
             \"Files on disk\")"
        );
    }
}

/// `<db><suffix>`.
fn suffixed(db: &Path, suffix: &str) -> PathBuf {
    let mut s = db.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

/// Hold the lock in `<db>.daemon.d/` for the daemon's life: a second daemon on the same
/// database refuses to start (the lock is released by the kernel however the first one
/// ends). The directory is 0700, so no other user can open the lock, let alone hold it.
fn lock(db: &Path, rundir: &rundir::RunDir) -> anyhow::Result<std::fs::File> {
    match rundir.lock()? {
        Some(file) => Ok(file),
        None => {
            let at = read_discovery(db)
                .map(|d| format!(" at {} (pid {})", d.url, d.pid))
                .unwrap_or_default();
            bail!(
                "another cairn daemon already serves {}{at}; one daemon per database",
                db.display()
            )
        }
    }
}

/// Every [`SWEEP_EVERY`], drop the servers of ended sessions ([`http::Shared::sweep`]).
async fn sweep(shared: Arc<http::Shared>) {
    let mut every = tokio::time::interval(SWEEP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let s = shared.clone();
        match tokio::task::spawn_blocking(move || s.sweep()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "sweeping ended sessions failed; retrying"),
            Err(e) => tracing::warn!(error = %e, "sweeping ended sessions panicked"),
        }
    }
}

/// Write the discovery file atomically (a temporary file beside it, renamed over it).
fn write_discovery(db: &Path, d: &Discovery) -> anyhow::Result<()> {
    let path = discovery_path(db);
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("writing {}", path.display()))?;
    serde_json::to_writer_pretty(&mut tmp, d)?;
    tmp.write_all(b"\n")?;
    tmp.as_file().sync_all()?;
    tmp.persist(&path)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Remove the discovery file if it is still this daemon's.
fn remove_discovery(db: &Path, d: &Discovery) {
    if read_discovery(db).as_ref() == Some(d) {
        let path = discovery_path(db);
        if let Err(e) = std::fs::remove_file(&path) {
            tracing::warn!(error = %e, path = %path.display(), "could not remove the discovery file");
        }
    }
}
