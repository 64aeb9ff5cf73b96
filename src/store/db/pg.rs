//! The PostgreSQL side of [`super::Conn`]: one tokio-postgres connection whose socket is
//! driven by a private single-thread runtime, so the store stays a blocking API that
//! works the same from a CLI command, a blocking pool thread or an async task.
//!
//! Statements are written with SQLite's `?N` placeholders and rewritten to `$N`. Each
//! bound value declares its type (bigint, double precision, text, bytea) and a NULL is
//! `unknown`, resolved by the server from its uses. PostgreSQL cannot type a parameter
//! whose first use is `IS NULL`, so optional filters are written
//! `CAST(?1 AS TEXT) IS NULL OR col = ?1` (the same on SQLite).
//! Prepared statements are cached per (text, parameter types).

use std::collections::HashMap;
use std::error::Error as StdError;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{IsNull, ToSql as PgToSql, Type, to_sql_checked};
use tokio_postgres::{Client, NoTls, Statement};

use super::{Row, Value};
use crate::error::{Error, Result};

// The driver's errors become Cairn's here, beside the only code that names the driver.
impl From<tokio_postgres::Error> for Error {
    /// `disk_full` (SQLSTATE 53100) is [`Error::StorageFull`]; everything else is
    /// [`Error::Database`] with the server's message.
    fn from(e: tokio_postgres::Error) -> Self {
        if e.code() == Some(&tokio_postgres::error::SqlState::DISK_FULL) {
            return Error::StorageFull {
                what: "the database".into(),
            };
        }
        Error::Database(describe(&e))
    }
}

/// An open PostgreSQL connection.
pub(crate) struct PgConn {
    client: Client,
    _driver: Arc<Driver>,
    statements: Mutex<HashMap<(String, Vec<u32>), Statement>>,
    /// Not to be used again: a statement on it failed for the connection's sake
    /// ([`PgConn::sent`]), or a transaction on it could not be ended (its `ROLLBACK`
    /// failed, so the session may be stuck in it).
    stuck: AtomicBool,
}

impl std::fmt::Debug for PgConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConn").finish_non_exhaustive()
    }
}

/// The private one-thread runtime that drives a connection's socket. Dropping it shuts
/// it down in the background: a runtime dropped plainly inside an async context panics.
struct Driver(Option<tokio::runtime::Runtime>);

impl Driver {
    fn start(thread_name: &str) -> Result<Driver> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(thread_name)
            .enable_all()
            .build()
            .map(|rt| Driver(Some(rt)))
            .map_err(|e| Error::Internal(format!("{thread_name} runtime: {e}")))
    }

    fn spawn<F>(&self, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0
            .as_ref()
            .expect("a driver runs until dropped")
            .spawn(future)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// Run a future to completion on this thread, whatever runtime (if any) the thread is in.
fn wait<F: Future>(f: F) -> F::Output {
    futures_executor::block_on(f)
}

/// Opens connections to one database, every one of them driven by the same private
/// runtime thread (a store's writer and its readers).
#[derive(Clone)]
pub(crate) struct PgConnector {
    url: String,
    driver: Arc<Driver>,
}

impl std::fmt::Debug for PgConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConnector")
            .field("url", &redact(&self.url))
            .finish_non_exhaustive()
    }
}

impl PgConnector {
    /// A connector for `url` (`postgres://user@host:port/db`); connects nothing yet.
    pub(crate) fn new(url: &str) -> Result<PgConnector> {
        Ok(PgConnector {
            url: url.to_owned(),
            driver: Arc::new(Driver::start("cairn-pg")?),
        })
    }

    /// A new connection.
    pub(crate) fn connect(&self) -> Result<PgConn> {
        let url = self.url.clone();
        let connected = wait(self.driver.spawn(async move {
            let (client, connection) = tokio_postgres::connect(&url, NoTls).await?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::warn!(error = %e, "postgres connection ended");
                }
            });
            Ok::<_, tokio_postgres::Error>(client)
        }))
        .map_err(|e| Error::Internal(format!("postgres connect task: {e}")))?;
        let client = connected.map_err(|e| {
            Error::FailedPrecondition(format!(
                "cannot connect to PostgreSQL at {}: {}",
                redact(&self.url),
                describe(&e)
            ))
        })?;
        Ok(PgConn {
            client,
            _driver: self.driver.clone(),
            statements: Mutex::new(HashMap::new()),
            stuck: AtomicBool::new(false),
        })
    }
}

impl PgConn {
    /// Whether the connection can serve another statement: the server has not closed
    /// it (a restart, `pg_terminate_backend`, a network failure), no statement on it
    /// failed for the connection's sake, and no transaction was left open on it.
    pub(crate) fn usable(&self) -> bool {
        !self.client.is_closed() && !self.stuck.load(Ordering::Relaxed)
    }

    /// Mark the connection as not to be used again (see [`PgConn::usable`]).
    pub(crate) fn set_stuck(&self) {
        self.stuck.store(true, Ordering::Relaxed);
    }

    /// A statement's outcome. A failure that the server did not report as an SQL error
    /// (the socket closed or failed), or that reports the session ending (SQLSTATE
    /// class 08, connection exception, or 57, operator intervention: a restart, a
    /// terminated backend), leaves the connection unusable: its owner replaces it
    /// rather than fail every later call on it. A statement cancelled by a timeout
    /// (57014, the one code of class 57 after which the session lives on) does not.
    fn sent<T>(&self, out: std::result::Result<T, tokio_postgres::Error>) -> Result<T> {
        out.map_err(|e| {
            let lost = e.as_db_error().is_none_or(|db| {
                let code = db.code();
                code != &SqlState::QUERY_CANCELED && matches!(&code.code()[..2], "08" | "57")
            });
            if lost {
                self.set_stuck();
            }
            e.into()
        })
    }

    fn statement(&self, sql: &str, values: &[Value]) -> Result<Statement> {
        let types: Vec<Type> = values.iter().map(param_type).collect();
        let key = (
            sql.to_owned(),
            types.iter().map(Type::oid).collect::<Vec<_>>(),
        );
        let mut cache = self.statements.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = cache.get(&key) {
            return Ok(s.clone());
        }
        let text = super::to_dollar_placeholders(sql);
        let stmt = self.sent(wait(self.client.prepare_typed(&text, &types)))?;
        cache.insert(key, stmt.clone());
        Ok(stmt)
    }

    pub(super) fn execute(&self, sql: &str, values: &[Value]) -> Result<usize> {
        let stmt = self.statement(sql, values)?;
        let binds: Vec<Bind<'_>> = values.iter().map(Bind).collect();
        let refs: Vec<&(dyn PgToSql + Sync)> = binds.iter().map(|b| b as _).collect();
        let n = self.sent(wait(self.client.execute(&stmt, &refs)))?;
        Ok(n as usize)
    }

    pub(super) fn query(&self, sql: &str, values: &[Value]) -> Result<Vec<Row>> {
        let stmt = self.statement(sql, values)?;
        let binds: Vec<Bind<'_>> = values.iter().map(Bind).collect();
        let refs: Vec<&(dyn PgToSql + Sync)> = binds.iter().map(|b| b as _).collect();
        let rows = self.sent(wait(self.client.query(&stmt, &refs)))?;
        let names: Arc<[String]> = stmt.columns().iter().map(|c| c.name().to_owned()).collect();
        rows.iter()
            .map(|r| {
                let values = (0..names.len())
                    .map(|i| read(r, i))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Row {
                    names: names.clone(),
                    values,
                })
            })
            .collect()
    }

    pub(super) fn batch(&self, sql: &str) -> Result<()> {
        self.sent(wait(self.client.batch_execute(sql)))
    }
}

/// The channel every PostgreSQL write transaction notifies on commit
/// ([`crate::store::Store::write`]).
pub(crate) const CHANGES_CHANNEL: &str = "cairn_changes";

/// Longest pause between two attempts to reconnect a [`PgListener`].
const LISTEN_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// A second connection that `LISTEN`s on a channel and calls `on_change` for every
/// notification, on a private runtime thread, until dropped.
///
/// A notification only says "look again": it is delivered after its transaction commits
/// and never for one that rolled back, but it can be lost (the connection drops, the
/// listener starts after the write). So `on_change` is also called each time the
/// listener (re)connects, and readers keep their own watermark checks: correctness never
/// depends on a notification arriving. A lost connection is retried with back-off (up
/// to [`LISTEN_RETRY_MAX`] between attempts), logged, never fatal.
pub(crate) struct PgListener {
    _driver: Driver,
    listening: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for PgListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgListener").finish_non_exhaustive()
    }
}

impl PgListener {
    /// Connect to `url`, `LISTEN channel`, and call `on_change(payload)` for each
    /// notification (and `on_change("")` after each successful (re)connection). Returns
    /// once the first `LISTEN` is in place, or the reason it could not be.
    pub(crate) fn start(
        url: &str,
        channel: &str,
        on_change: impl Fn(&str) + Send + Sync + 'static,
    ) -> Result<PgListener> {
        if channel.is_empty() || !channel.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
            return Err(Error::Internal(format!("bad channel name {channel:?}")));
        }
        let driver = Driver::start("cairn-pg-listen")?;
        let listening = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let on_change: Arc<dyn Fn(&str) + Send + Sync> = Arc::new(on_change);
        let (first_tx, first_rx) = tokio::sync::oneshot::channel();
        let (url, channel) = (url.to_owned(), channel.to_owned());
        let flag = listening.clone();
        driver.spawn(async move {
            let mut first = Some(first_tx);
            let mut delay = std::time::Duration::from_millis(100);
            loop {
                let outcome = listen_once(&url, &channel, &on_change, &flag, &mut first).await;
                flag.store(false, std::sync::atomic::Ordering::Relaxed);
                match outcome {
                    Ok(()) => delay = std::time::Duration::from_millis(100),
                    Err(e) => {
                        if let Some(tx) = first.take() {
                            let _ = tx.send(Err(e));
                            return;
                        }
                        tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "following changes failed; retrying");
                    }
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(LISTEN_RETRY_MAX);
            }
        });
        // Built before waiting, so that a failure shuts the driver down through `Drop`.
        let listener = PgListener {
            _driver: driver,
            listening,
        };
        let first =
            wait(first_rx).map_err(|_| Error::Internal("postgres listener ended".into()))?;
        first.map_err(|e| {
            Error::FailedPrecondition(format!("cannot listen for changes on PostgreSQL: {e}"))
        })?;
        Ok(listener)
    }

    /// Whether the `LISTEN` connection is up right now.
    pub(crate) fn is_listening(&self) -> bool {
        self.listening.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// One connection's life: connect, `LISTEN`, report readiness, then deliver
/// notifications until the connection ends (`Ok`: it ended after it had listened;
/// `Err`: it never got that far).
async fn listen_once(
    url: &str,
    channel: &str,
    on_change: &Arc<dyn Fn(&str) + Send + Sync>,
    listening: &std::sync::atomic::AtomicBool,
    first: &mut Option<tokio::sync::oneshot::Sender<std::result::Result<(), String>>>,
) -> std::result::Result<(), String> {
    use tokio_postgres::AsyncMessage;
    let (client, mut connection) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| format!("{}: {}", redact(url), describe(&e)))?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    // The connection is driven here: it carries the LISTEN's reply and the notifications.
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if tx.send(n.payload().to_owned()).is_err() {
                        return Ok(());
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(describe(&e)),
                None => return Ok(()),
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {channel}"))
        .await
        .map_err(|e| describe(&e))?;
    listening.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(tx) = first.take() {
        let _ = tx.send(Ok(()));
    } else {
        tracing::info!("following changes again");
    }
    // Writes made while nobody listened are caught by a look now.
    on_change("");
    while let Some(payload) = rx.recv().await {
        on_change(&payload);
    }
    match driver.await {
        Ok(Ok(())) => tracing::warn!("the connection that follows changes closed"),
        Ok(Err(e)) => tracing::warn!(error = %e, "the connection that follows changes failed"),
        Err(e) => tracing::warn!(error = %e, "the listener task failed"),
    }
    drop(client);
    Ok(())
}

/// The declared type of a bound value; a NULL is `unknown`, resolved by the server.
fn param_type(v: &Value) -> Type {
    match v {
        Value::Null => Type::UNKNOWN,
        Value::Integer(_) => Type::INT8,
        Value::Real(_) => Type::FLOAT8,
        Value::Text(_) => Type::TEXT,
        Value::Blob(_) => Type::BYTEA,
    }
}

#[derive(Debug)]
struct Bind<'a>(&'a Value);

impl PgToSql for Bind<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Integer(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::BOOL => (*i != 0).to_sql(ty, out),
                Type::FLOAT8 => (*i as f64).to_sql(ty, out),
                _ => Err(format!("cannot bind an integer as {ty}").into()),
            },
            Value::Real(r) => match *ty {
                Type::FLOAT4 => (*r as f32).to_sql(ty, out),
                _ => r.to_sql(ty, out),
            },
            // PostgreSQL text cannot hold U+0000. Text Cairn stores is cleaned of control
            // characters before it gets here, so a NUL can only be in a lookup key (an
            // agent's hostile id), which then matches nothing, as on SQLite.
            Value::Text(s) if s.contains('\0') => s.replace('\0', "\u{FFFD}").to_sql(ty, out),
            Value::Text(s) => s.as_str().to_sql(ty, out),
            Value::Blob(b) => b.as_slice().to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// Column `i` of a PostgreSQL row as a [`Value`].
fn read(r: &tokio_postgres::Row, i: usize) -> Result<Value> {
    let ty = r.columns()[i].type_().clone();
    let v = match ty {
        Type::BOOL => r
            .try_get::<_, Option<bool>>(i)?
            .map(|b| Value::Integer(b.into())),
        Type::INT2 => r
            .try_get::<_, Option<i16>>(i)?
            .map(|v| Value::Integer(v.into())),
        Type::INT4 => r
            .try_get::<_, Option<i32>>(i)?
            .map(|v| Value::Integer(v.into())),
        Type::INT8 => r.try_get::<_, Option<i64>>(i)?.map(Value::Integer),
        Type::OID => r
            .try_get::<_, Option<u32>>(i)?
            .map(|v| Value::Integer(v.into())),
        Type::FLOAT4 => r
            .try_get::<_, Option<f32>>(i)?
            .map(|v| Value::Real(v.into())),
        Type::FLOAT8 => r.try_get::<_, Option<f64>>(i)?.map(Value::Real),
        Type::BYTEA => r.try_get::<_, Option<Vec<u8>>>(i)?.map(Value::Blob),
        Type::NUMERIC => r.try_get::<_, Option<Numeric>>(i)?.map(|n| n.0),
        Type::JSON | Type::JSONB => r
            .try_get::<_, Option<Raw>>(i)?
            .map(|raw| Value::Text(raw.json_text(&ty))),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
            r.try_get::<_, Option<String>>(i)?.map(Value::Text)
        }
        // Anything else (a `tsvector` that `SELECT *` brings along) is opaque bytes.
        _ => r
            .try_get::<_, Option<Raw>>(i)?
            .map(|raw| Value::Blob(raw.0)),
    };
    Ok(v.unwrap_or(Value::Null))
}

/// A `numeric` column (what `sum` and `avg` of integers give): an integer when it has
/// no fraction and fits, a real otherwise.
struct Numeric(Value);

impl<'a> tokio_postgres::types::FromSql<'a> for Numeric {
    fn from_sql(
        _: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn StdError + Sync + Send>> {
        let word = |k: usize| -> std::result::Result<i16, Box<dyn StdError + Sync + Send>> {
            let b = raw.get(2 * k..2 * k + 2).ok_or("short numeric")?;
            Ok(i16::from_be_bytes([b[0], b[1]]))
        };
        let ndigits = word(0)? as usize;
        let weight = i32::from(word(1)?);
        let sign = word(2)? as u16;
        let dscale = word(3)?;
        if sign == 0xC000 {
            return Ok(Numeric(Value::Real(f64::NAN)));
        }
        let mut real = 0f64;
        let mut int: Option<i128> = Some(0);
        for k in 0..ndigits {
            let d = i128::from(word(4 + k)?);
            let exp = weight - k as i32;
            real += d as f64 * 10000f64.powi(exp);
            int = match (int, exp >= 0) {
                (Some(acc), true) => 10000i128
                    .checked_pow(exp as u32)
                    .and_then(|p| acc.checked_add(d * p)),
                (Some(acc), false) if d == 0 => Some(acc),
                _ => None,
            };
        }
        let negative = sign == 0x4000;
        let value = match int.and_then(|i| i64::try_from(if negative { -i } else { i }).ok()) {
            Some(i) if dscale == 0 => Value::Integer(i),
            _ => Value::Real(if negative { -real } else { real }),
        };
        Ok(Numeric(value))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
}

/// The raw bytes of a column.
struct Raw(Vec<u8>);

impl Raw {
    fn json_text(&self, ty: &Type) -> String {
        // jsonb's binary form is a version byte (1) and the text.
        let body = if *ty == Type::JSONB {
            self.0.get(1..).unwrap_or_default()
        } else {
            &self.0[..]
        };
        String::from_utf8_lossy(body).into_owned()
    }
}

impl<'a> tokio_postgres::types::FromSql<'a> for Raw {
    fn from_sql(
        _: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn StdError + Sync + Send>> {
        Ok(Raw(raw.to_vec()))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// A PostgreSQL error with the server's message, detail and SQLSTATE.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!(
                "{}: {} (SQLSTATE {})",
                db.severity(),
                db.message(),
                db.code().code()
            );
            if let Some(d) = db.detail() {
                s.push_str("; ");
                s.push_str(d);
            }
            s
        }
        None => match e.source() {
            Some(src) => format!("{e}: {src}"),
            None => e.to_string(),
        },
    }
}

/// `url` without its password.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme + 3],
                    &userinfo[..colon],
                    &url[at..]
                ),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_their_password() {
        assert_eq!(
            redact("postgres://u:secret@h:5/db"),
            "postgres://u:***@h:5/db"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("postgres://h/db"), "postgres://h/db");
    }

    #[test]
    fn numerics_read_as_integers_or_reals() {
        use tokio_postgres::types::FromSql;
        // 123456789 = digits [1, 2345, 6789], weight 2, scale 0.
        let mut b = Vec::new();
        for w in [3i16, 2, 0, 0, 1, 2345, 6789] {
            b.extend_from_slice(&w.to_be_bytes());
        }
        assert_eq!(
            Numeric::from_sql(&Type::NUMERIC, &b).unwrap().0,
            Value::Integer(123_456_789)
        );
        // -1.5 = digits [1, 5000], weight 0, sign negative, scale 1.
        let mut b = Vec::new();
        for w in [2i16, 0, 0x4000, 1, 1, 5000] {
            b.extend_from_slice(&w.to_be_bytes());
        }
        assert_eq!(
            Numeric::from_sql(&Type::NUMERIC, &b).unwrap().0,
            Value::Real(-1.5)
        );
    }
}
