//! The SQLite side of [`super::Conn`]: statements through rusqlite's statement cache.

use std::sync::Arc;

use rusqlite::types::{Value as SqlValue, ValueRef};

use super::{Row, Value};
use crate::error::{Error, Result};

// The driver's errors become Cairn's here, beside the only code that names the driver.
impl From<rusqlite::Error> for Error {
    /// `SQLITE_FULL` is [`Error::StorageFull`] (the store names the database file, see
    /// `Store::write`); everything else is [`Error::Database`].
    fn from(e: rusqlite::Error) -> Self {
        if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) {
            return Error::StorageFull {
                what: "the database".into(),
            };
        }
        Error::Database(e.to_string())
    }
}

fn bind(values: &[Value]) -> impl Iterator<Item = SqlValue> + '_ {
    values.iter().map(|v| match v {
        Value::Null => SqlValue::Null,
        Value::Integer(i) => SqlValue::Integer(*i),
        Value::Real(r) => SqlValue::Real(*r),
        Value::Text(s) => SqlValue::Text(s.clone()),
        Value::Blob(b) => SqlValue::Blob(b.clone()),
    })
}

fn read(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(r) => Value::Real(r),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

pub(super) fn execute(c: &rusqlite::Connection, sql: &str, values: &[Value]) -> Result<usize> {
    let mut stmt = c.prepare_cached(sql)?;
    Ok(stmt.execute(rusqlite::params_from_iter(bind(values)))?)
}

/// The rows of a query, at most `limit` of them.
pub(super) fn query(
    c: &rusqlite::Connection,
    sql: &str,
    values: &[Value],
    limit: Option<usize>,
) -> Result<Vec<Row>> {
    let mut stmt = c.prepare_cached(sql)?;
    let names: Arc<[String]> = stmt.column_names().iter().map(|n| n.to_string()).collect();
    let width = names.len();
    let mut rows = stmt.query(rusqlite::params_from_iter(bind(values)))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let values = (0..width)
            .map(|i| r.get_ref(i).map(read))
            .collect::<rusqlite::Result<Vec<_>>>()?;
        out.push(Row {
            names: names.clone(),
            values,
        });
        if limit.is_some_and(|l| out.len() >= l) {
            break;
        }
    }
    Ok(out)
}
