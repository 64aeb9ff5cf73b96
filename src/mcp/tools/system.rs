//! System tools: `server_ping` and `server_health` (Colibri phase 0).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use crate::access::scope::Profile;
use crate::base::now_iso;
use crate::error::Result;
use crate::mcp::tool::{Effect, NoParams, ToolCtx, ToolDef, tool};

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Ping {
    /// Always true when the server answers.
    pub(crate) ok: bool,
    /// ISO-8601 UTC.
    pub(crate) timestamp: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct DbHealth {
    pub(crate) open: bool,
    /// The schema's migration version (`PRAGMA user_version`).
    pub(crate) user_version: u32,
    /// The migration version this binary expects.
    pub(crate) expected_version: u32,
    pub(crate) path: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Middleware {
    /// The stages every tool call passes, in order.
    pub(crate) stages: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ToolCount {
    pub(crate) registered: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Health {
    /// `ok`, or `degraded` when the database is unreachable or its schema is behind.
    pub(crate) status: String,
    /// Always `FULL` for a server with a writable database.
    pub(crate) mode: String,
    pub(crate) uptime_ms: u64,
    pub(crate) db: DbHealth,
    pub(crate) middleware: Middleware,
    pub(crate) tools: ToolCount,
    pub(crate) version: String,
    pub(crate) timestamp: String,
    /// Per vault collection: documents, chunks and its followed roots (who follows each,
    /// watching / rescanning / not followed, changes pending, last sync).
    pub(crate) vault: Vec<crate::vault::roots::CollectionStatus>,
}

fn ping(_cx: &ToolCtx<'_>, _p: NoParams) -> Result<Ping> {
    Ok(Ping {
        ok: true,
        timestamp: now_iso(),
    })
}

fn health(cx: &ToolCtx<'_>, _p: NoParams) -> Result<Health> {
    let expected = crate::store::latest_version();
    let version = cx.cairn.store().user_version();
    let open = version.is_ok();
    let user_version = version.unwrap_or(0);
    Ok(Health {
        status: if open && user_version == expected {
            "ok"
        } else {
            "degraded"
        }
        .into(),
        mode: "FULL".into(),
        uptime_ms: cx.started.elapsed().as_millis() as u64,
        db: DbHealth {
            open,
            user_version,
            expected_version: expected,
            path: cx.cairn.store().location().to_string(),
        },
        middleware: Middleware {
            stages: [
                "scope",
                "size_limit",
                "schema_validation",
                "binding",
                "handler",
            ]
            .map(String::from)
            .to_vec(),
        },
        tools: ToolCount {
            registered: cx.tools_registered,
        },
        version: env!("CARGO_PKG_VERSION").into(),
        timestamp: now_iso(),
        vault: cx.cairn.vault_status().unwrap_or_default(),
    })
}

pub(crate) fn tools() -> Vec<ToolDef> {
    vec![
        tool(
            "server_ping",
            "Liveness check: answers {ok: true, timestamp} at once.",
            Effect::ReadOnly,
            json!({}),
            ping,
        )
        .profiles(&Profile::ALL),
        tool(
            "server_health",
            "Health report: database state and migration version, middleware stages, tool count, uptime, version.",
            Effect::ReadOnly,
            json!({}),
            health,
        )
        .profiles(&Profile::ALL),
    ]
}
