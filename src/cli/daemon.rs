//! `cairn daemon`: one shared MCP server over Streamable HTTP for every session on this
//! host that uses this database (see `crate::daemon` and docs/deployment.md).

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::daemon::{Options, serve};
use crate::mcp::lanes::{LANE_NICE, Lanes, PATIENCE, default_width};

use super::Outcome;

#[derive(Debug, Args)]
pub(crate) struct DaemonArgs {
    /// Address to listen on; port 0 lets the system pick one (the URL is written to
    /// `<db>.daemon.json` and logged).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Allow a non-loopback --listen address. Tokens travel in clear over plain HTTP: put
    /// TLS (a reverse proxy) in front (docs/deployment.md).
    #[arg(long)]
    allow_remote: bool,
    /// A host name to accept in the Host header besides the loopback names and the
    /// listen address (the name a reverse proxy forwards). Repeat for several.
    #[arg(long = "allow-host")]
    allow_hosts: Vec<String>,
    /// The origin people's browsers see when a TLS-terminating proxy is in front
    /// (`https://cairn.example.internal`): the web page's login URLs name it, its form
    /// posts from it are accepted, and behind https its cookie is Secure (docs/web.md).
    #[arg(long, env = "CAIRN_PUBLIC_ORIGIN", value_parser = crate::web::parse_public_origin)]
    public_origin: Option<String>,
    /// Seconds a shutdown waits for calls in flight before it stops without them.
    #[arg(long, default_value_t = 30)]
    drain_seconds: u64,
    /// How many calls of tools other than search_learnings run at once (their shared
    /// lanes; search_learnings never waits for one). Default: the cores less one, at
    /// least 1; 0 lifts the limit.
    #[arg(long, env = "CAIRN_SHARED_LANES")]
    shared_lanes: Option<usize>,
    /// How much nicer than the daemon the shared lanes' threads run (0-19), so that
    /// searches and the transport go first on a busy core; 0 keeps the daemon's own
    /// priority (docs/deployment.md).
    #[arg(long, env = "CAIRN_LANE_NICE", default_value_t = LANE_NICE,
          value_parser = clap::value_parser!(u8).range(0..=19))]
    lane_nice: u8,
}

pub(super) fn run(db: &crate::store::Location, args: DaemonArgs) -> anyhow::Result<Outcome> {
    let cairn = Arc::new(super::open(db)?);
    // Learnings are acknowledged after the SQLite commit and indexed in batches.
    cairn.index_learnings_in_background()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(serve(
        cairn.clone(),
        Options {
            listen: args.listen,
            allow_remote: args.allow_remote,
            allow_hosts: args.allow_hosts,
            public_origin: args.public_origin,
            drain: Duration::from_secs(args.drain_seconds),
            lanes: Arc::new(match args.shared_lanes.map(NonZeroUsize::new) {
                None => Lanes::new(default_width(), PATIENCE, args.lane_nice)?,
                Some(Some(width)) => Lanes::new(width, PATIENCE, args.lane_nice)?,
                Some(None) => Lanes::unlimited(),
            }),
        },
    ))?;
    // Calls still running past the drain time are abandoned: each one's transaction
    // either committed or rolls back with the process.
    rt.shutdown_timeout(Duration::from_millis(200));
    cairn.flush_learnings_index();
    Ok(Outcome::Done)
}
